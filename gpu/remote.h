/* remote.h — backends on the other ranks of one job: how `mpirun -n N tomolived --mpi`
 * spreads a scan's detector rows over hosts (issue 23, item 3).
 *
 * Rank 0 runs the daemon. Its engines are split by rows as over the GPUs of one host
 * (split.c), with one part per rank: part 0 on rank 0 itself, part k on rank k through
 * tl_remote_backend, which sends each operation of the backend table over the link
 * (link.h) and waits for its answer. Every other rank runs tl_remote_serve: it creates the
 * backends rank 0 asks for on its own device and runs the operations they receive, until
 * rank 0 calls tl_remote_stop. Frames travel as the rows a rank holds; slices come back
 * as the planes it computed. All ranks run the same build (checked at each creation).
 *
 *   rank 0:  cfg.link = link; cfg.ndevices = link->size; ...  tl_engine_create(&cfg, ...)
 *            ...  tl_remote_stop(link, &eb);
 *   rank k:  tl_remote_serve(link, &(tl_remote_host){.device = 0}, &eb);
 *
 * A rank that dies takes the job with it (MPI ends every rank with a message naming it),
 * so no operation waits forever for a dead peer.
 */
#ifndef TL_REMOTE_H
#define TL_REMOTE_H

#include "gpu/base/backend.h"
#include "gpu/base/link.h"

extern const tl_backend_ops tl_remote_backend;

/* What a serving rank runs its backends on: its CUDA ordinal (CUDA backends), and its CPU
 * threads (0: its host's cores shared among the link's local ranks). */
typedef struct {
    int device;
    int threads;
} tl_remote_host;

/* Serves rank 0's backends on this rank until rank 0 says stop (TL_OK then). A request
 * that fails is answered with its error and serving goes on; only a broken link ends it
 * with an error. */
tl_status tl_remote_serve(const tl_link *l, const tl_remote_host *host, tl_errbuf *eb);

/* Rank 0, at the end: every other rank's tl_remote_serve returns. */
tl_status tl_remote_stop(const tl_link *l, tl_errbuf *eb);

#endif
