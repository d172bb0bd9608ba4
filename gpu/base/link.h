/* link.h — messages between the processes of one job (the ranks of `mpirun -n N tomolived
 * --mpi`), as the engine sees them: numbered peers, tagged messages, nothing about how they
 * travel. The daemon implements it on MPI (daemon/base/mpilink.c); gpu/remote.c carries a
 * backend's operations over it, so gpu/ knows neither MPI nor sockets.
 *
 * Messages between two peers under one tag arrive in the order they were sent (MPI's
 * rule), and a link may be used by several threads at once, each with its own tags.
 *
 *   tl_link_msg m = {0};                    // its buffer grows, and is kept
 *   l->send(l, 1, tag, req, len, eb);
 *   l->recv(l, 1, tag, &m, eb);              // m.data, m.len; free(m.data) at the end
 */
#ifndef TL_LINK_H
#define TL_LINK_H

#include <stddef.h>

#include "gpu/base/fail.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TL_LINK_ANY (-1)      /* recv: from any peer, under any tag */
#define TL_LINK_MAX_TAG 32767 /* the least upper bound MPI guarantees */

/* A received message: its bytes in data (cap allocated, grown by recv), from peer src
 * under tag. */
typedef struct {
    void *data;
    size_t len, cap;
    int src, tag;
} tl_link_msg;

typedef struct tl_link tl_link;
struct tl_link {
    int rank;        /* this process, 0 .. size - 1 */
    int size;        /* processes in the job */
    int local_ranks; /* of them on this host (they share its cores and GPUs) */
    int local_rank;  /* this one among them, 0 .. local_ranks - 1 */
    /* Sends len bytes to peer `to` under tag (0 .. TL_LINK_MAX_TAG). */
    tl_status (*send)(const tl_link *l, int to, int tag, const void *buf, size_t len,
                      tl_errbuf *eb);
    /* Waits for the next message from peer `from` under tag (either TL_LINK_ANY) into m. */
    tl_status (*recv)(const tl_link *l, int from, int tag, tl_link_msg *m, tl_errbuf *eb);
    void *ctx; /* the implementation's */
};

#ifdef __cplusplus
}
#endif
#endif
