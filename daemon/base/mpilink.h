/* mpilink.h — tomolived's ranks on MPI (`mpirun -n N tomolived --mpi`, issue 23): MPI
 * started at the thread level the engine needs, and the link (gpu/base/link.h) that
 * carries rank 0's backends to the other ranks (gpu/remote.h) over MPI_COMM_WORLD.
 *
 *   tl_link link;
 *   if (tl_mpilink_start(&argc, &argv, &link, why, sizeof why) != 0) ...   // every rank
 *   ...                       // rank 0: the daemon; others: tl_remote_serve(&link, ...)
 *   tl_mpilink_end(&link);
 *
 * In a build without MPI, start says so and fails.
 */
#ifndef TL_MPILINK_H
#define TL_MPILINK_H

#include <stddef.h>

#include "gpu/base/link.h"

/* Starts MPI with MPI_THREAD_MULTIPLE (a split engine's parts talk to their ranks at once,
 * each from its own thread) and fills l; -1 and why when MPI is missing, or offers less. */
int tl_mpilink_start(int *argc, char ***argv, tl_link *l, char *why, size_t why_len);
/* Ends MPI (collective: every rank calls it once). */
void tl_mpilink_end(tl_link *l);

#endif
