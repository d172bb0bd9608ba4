/* grid.c — the MPI grid of `recon --grid` (grid.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/cli.h"
#include "clients/grid.h"

#ifdef HAVE_MPI
#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h> /* MPIX_CUDA_AWARE_SUPPORT */
#endif
#endif

bool tl_grid_parse(const char *s, uint32_t *rows, uint32_t *cols)
{
    char *end;
    long r = strtol(s, &end, 10);
    if (end == s || (*end != 'x' && *end != ',') || r < 1 || r > 65536)
        return false;
    const char *t = end + 1;
    long c = strtol(t, &end, 10);
    if (end == t || *end || c < 1 || c > 65536)
        return false;
    *rows = (uint32_t)r;
    *cols = (uint32_t)c;
    return true;
}

#ifdef HAVE_MPI

typedef struct {
    MPI_Comm row; /* the C ranks that reconstruct the same sub-volume */
} comms;

/* Default MPI error handling (MPI_ERRORS_ARE_FATAL) stays: a failed collective ends the
 * job loudly, which is what a failing rank should do to its peers. */
int tl_grid_start(tl_grid *g, uint32_t rows, uint32_t cols, char *err, size_t errlen)
{
    memset(g, 0, sizeof *g);
    g->rows = rows;
    g->cols = cols;
    int provided = 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        return tl_cli_errf(err, errlen, "--grid: MPI_Init_thread failed");
    g->started = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &g->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g->size);
    if (provided < MPI_THREAD_SERIALIZED)
        return tl_cli_errf(err, errlen,
                           "--grid: the MPI library gives thread level %d, and the writer "
                           "thread's reductions need MPI_THREAD_SERIALIZED (%d)",
                           provided, MPI_THREAD_SERIALIZED);
    if ((uint64_t)g->size != (uint64_t)rows * cols)
        return tl_cli_errf(err, errlen,
                           "--grid %ux%u needs %llu ranks, and the job has %d (mpirun -n %llu)",
                           rows, cols, (unsigned long long)rows * cols, g->size,
                           (unsigned long long)rows * cols);
    g->row = (uint32_t)g->rank / cols;
    g->col = (uint32_t)g->rank % cols;
    comms *c = calloc(1, sizeof *c);
    if (!c)
        return tl_cli_errf(err, errlen, "out of memory");
    g->comms = c;
    MPI_Comm_split(MPI_COMM_WORLD, (int)g->row, (int)g->col, &c->row);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g->rank, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &g->local_rank);
    MPI_Comm_size(local, &g->local_size);
    MPI_Comm_free(&local);
    return 0;
}

bool tl_grid_agree(tl_grid *g, bool ok)
{
    int mine = ok, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return all != 0;
}

int tl_grid_reduce(void *grid, float *slab, size_t n, char *err, size_t errlen)
{
    tl_grid *g = grid;
    comms *c = g->comms;
    double t0 = tl_cli_now();
    MPI_Barrier(c->row);
    double t1 = tl_cli_now();
    g->wait_s += t1 - t0;
    /* MPI counts are ints: a slab of 2048 slices of 4096^2 is far past them */
    const size_t step = (size_t)1 << 28;
    for (size_t at = 0; at < n; at += step) {
        int count = (int)(n - at < step ? n - at : step);
        int rc = g->col == 0
                     ? MPI_Reduce(MPI_IN_PLACE, slab + at, count, MPI_FLOAT, MPI_SUM, 0, c->row)
                     : MPI_Reduce(slab + at, NULL, count, MPI_FLOAT, MPI_SUM, 0, c->row);
        if (rc != MPI_SUCCESS)
            return tl_cli_errf(err, errlen, "--grid: MPI_Reduce over grid row %u failed (%d)",
                               g->row, rc);
    }
    g->reduce_s += tl_cli_now() - t1;
    return 0;
}

void tl_grid_bcast(tl_grid *g, double *v, int n)
{
    MPI_Bcast(v, n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
}

uint32_t tl_grid_row_bcast(tl_grid *g, uint32_t v)
{
    comms *c = g->comms;
    MPI_Bcast(&v, 1, MPI_UINT32_T, 0, c->row);
    return v;
}

uint32_t tl_grid_row_min(tl_grid *g, uint32_t v)
{
    comms *c = g->comms;
    uint32_t out = v;
    MPI_Allreduce(&v, &out, 1, MPI_UINT32_T, MPI_MIN, c->row);
    return out;
}

double tl_grid_max(tl_grid *g, double v)
{
    double out = v;
    MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return out;
}

void tl_grid_barrier(tl_grid *g)
{
    MPI_Barrier(MPI_COMM_WORLD);
}

#define RATE_REPEATS 5

double tl_grid_reduce_rate(tl_grid *g, size_t bytes)
{
    size_t n = bytes / sizeof(float);
    float *buf = calloc(n ? n : 1, sizeof *buf);
    double t[RATE_REPEATS];
    if (!tl_grid_agree(g, buf != NULL)) {
        free(buf);
        return 0;
    }
    char err[128];
    for (int i = 0; i < RATE_REPEATS; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = tl_cli_now();
        if (tl_grid_reduce(g, buf, n, err, sizeof err) != 0)
            tl_grid_abort(g, 1);
        t[i] = tl_grid_max(g, tl_cli_now() - t0);
    }
    g->reduce_s = g->wait_s = 0; /* the probe is not the run's */
    free(buf);
    double med = tl_cli_median(t, RATE_REPEATS);
    return med > 0 ? bytes / med : 0;
}

const char *tl_grid_cuda_aware(void)
{
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    return MPIX_Query_cuda_support() ? "yes" : "no (built with it, not at run time)";
#elif defined(MPIX_CUDA_AWARE_SUPPORT)
    return "no";
#else
    return "unknown";
#endif
}

void tl_grid_abort(tl_grid *g, int rc)
{
    fprintf(stderr, "tomolive recon: rank %d of the grid failed: ending the job\n", g->rank);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, rc);
    exit(rc); /* MPI_Abort does not return; the compiler does not know */
}

void tl_grid_end(tl_grid *g)
{
    comms *c = g->comms;
    if (c) {
        MPI_Comm_free(&c->row);
        free(c);
        g->comms = NULL;
    }
    if (g->started)
        MPI_Finalize();
    g->started = false;
}

#else /* built without MPI */

int tl_grid_start(tl_grid *g, uint32_t rows, uint32_t cols, char *err, size_t errlen)
{
    memset(g, 0, sizeof *g);
    return tl_cli_errf(err, errlen,
                       "--grid needs MPI, and this tomolive was built without it (Debian: "
                       "apt-get install libopenmpi-dev openmpi-bin, then ./configure "
                       "--with-mpi; a site's MPI: ./configure --with-mpi=PREFIX)");
}

bool tl_grid_agree(tl_grid *g, bool ok)
{
    return ok;
}

int tl_grid_reduce(void *grid, float *slab, size_t n, char *err, size_t errlen)
{
    return tl_cli_errf(err, errlen, "--grid: built without MPI");
}

void tl_grid_bcast(tl_grid *g, double *v, int n)
{
}

uint32_t tl_grid_row_bcast(tl_grid *g, uint32_t v)
{
    return v;
}

uint32_t tl_grid_row_min(tl_grid *g, uint32_t v)
{
    return v;
}

double tl_grid_max(tl_grid *g, double v)
{
    return v;
}

void tl_grid_barrier(tl_grid *g)
{
}

double tl_grid_reduce_rate(tl_grid *g, size_t bytes)
{
    return 0;
}

const char *tl_grid_cuda_aware(void)
{
    return "no MPI";
}

void tl_grid_abort(tl_grid *g, int rc)
{
    exit(rc);
}

void tl_grid_end(tl_grid *g)
{
}

#endif
