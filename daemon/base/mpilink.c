/* mpilink.c — the link of mpilink.h on MPI point-to-point messages.
 *
 * Waiting: MPI's blocking receive spins a core at full load, which a serving rank would do
 * for as long as the daemon idles, on a host whose cores its CPU backend needs. So a wait
 * probes without blocking: it spins for TL_MPILINK_SPIN_NS (an answer to a request comes
 * within that while the ranks are busy), then sleeps TL_MPILINK_NAP_NS between probes
 * (what an idle rank costs, and what the first request after an idle spell waits at
 * most). A peer that dies ends the job: MPI's default error handler aborts every rank, with
 * mpirun's message naming the one that died.
 */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "daemon/base/mpilink.h"
#include "gpu/base/clock.h"

#ifdef HAVE_MPI
#include <mpi.h>

#define TL_MPILINK_SPIN_NS 200000 /* 0.2 ms */
#define TL_MPILINK_NAP_NS 50000   /* 0.05 ms */

static tl_status mpi_send(const tl_link *l, int to, int tag, const void *buf, size_t len,
                          tl_errbuf *eb)
{
    (void)l;
    if (len > INT_MAX)
        return tl_fail(eb, TL_EUNSUPPORTED,
                       "a message of %zu bytes to rank %d: MPI takes %d "
                       "at most",
                       len, to, INT_MAX);
    if (MPI_Send(buf, (int)len, MPI_BYTE, to, tag, MPI_COMM_WORLD) != MPI_SUCCESS)
        return tl_fail(eb, TL_EIO, "MPI_Send to rank %d failed", to);
    return TL_OK;
}

static tl_status mpi_recv(const tl_link *l, int from, int tag, tl_link_msg *m, tl_errbuf *eb)
{
    (void)l;
    MPI_Message msg;
    MPI_Status status;
    int found = 0, count = 0;
    const uint64_t t0 = tl_clock_ns();
    const struct timespec nap = {0, TL_MPILINK_NAP_NS};
    for (;;) {
        if (MPI_Improbe(from == TL_LINK_ANY ? MPI_ANY_SOURCE : from,
                        tag == TL_LINK_ANY ? MPI_ANY_TAG : tag, MPI_COMM_WORLD, &found, &msg,
                        &status) != MPI_SUCCESS)
            return tl_fail(eb, TL_EIO, "MPI_Improbe failed");
        if (found)
            break;
        if (tl_clock_ns() - t0 > TL_MPILINK_SPIN_NS)
            nanosleep(&nap, NULL);
    }
    MPI_Get_count(&status, MPI_BYTE, &count);
    if ((size_t)count > m->cap) { /* grows to the largest message, then stays */
        void *grown = realloc(m->data, (size_t)count);
        if (!grown) {
            /* the matched message must be taken: truncated, MPI ends the job, which is
             * what a rank without memory for a request should do */
            MPI_Mrecv(NULL, 0, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
            return tl_fail(eb, TL_ENOMEM, "out of memory for a message of %d bytes", count);
        }
        m->data = grown;
        m->cap = (size_t)count;
    }
    if (MPI_Mrecv(m->data, count, MPI_BYTE, &msg, &status) != MPI_SUCCESS)
        return tl_fail(eb, TL_EIO, "MPI_Mrecv from rank %d failed", status.MPI_SOURCE);
    m->len = (size_t)count;
    m->src = status.MPI_SOURCE;
    m->tag = status.MPI_TAG;
    return TL_OK;
}

int tl_mpilink_start(int *argc, char ***argv, tl_link *l, char *why, size_t why_len)
{
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        snprintf(why, why_len, "--mpi: MPI_Init_thread failed");
        return -1;
    }
    if (provided < MPI_THREAD_MULTIPLE) {
        snprintf(why, why_len,
                 "--mpi: this MPI offers thread level %d, not MPI_THREAD_MULTIPLE (a split "
                 "engine's parts talk to their ranks from threads of their own)",
                 provided);
        MPI_Finalize();
        return -1;
    }
    *l = (tl_link){.send = mpi_send, .recv = mpi_recv};
    MPI_Comm_rank(MPI_COMM_WORLD, &l->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &l->size);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, l->rank, MPI_INFO_NULL, &local);
    MPI_Comm_size(local, &l->local_ranks);
    MPI_Comm_rank(local, &l->local_rank);
    MPI_Comm_free(&local);
    return 0;
}

void tl_mpilink_end(tl_link *l)
{
    (void)l;
    MPI_Finalize();
}

#else /* no MPI in this build */

int tl_mpilink_start(int *argc, char ***argv, tl_link *l, char *why, size_t why_len)
{
    (void)argc;
    (void)argv;
    (void)l;
    snprintf(why, why_len,
             "--mpi: this tomolived was built without MPI (configure "
             "--with-mpi; Debian: libopenmpi-dev)");
    return -1;
}

void tl_mpilink_end(tl_link *l)
{
    (void)l;
}
#endif
