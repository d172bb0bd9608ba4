/* iterative.h — iterative reconstruction (issue #28): SIRT, SART, ordered-subsets SART and
 * OS-EM, with non-negativity and total-variation steps, run over a backend's iterative
 * primitives (gpu/base/backend.h, tl_it_problem). The algorithm is written once, here,
 * and is the float64 reference's (gpu/iterative_ref.h, whose comment gives the updates
 * and the papers); the backends only do the arithmetic on their own memory.
 *
 *   tl_iter_options o = {.method = TL_ITER_SIRT, .iterations = 50, .relaxation = 1};
 *   tl_iterative_run(ops, state, &problem, &o, start, out, residual, &done, NULL, eb);
 */
#ifndef TL_ITERATIVE_H
#define TL_ITERATIVE_H

#include "gpu/base/backend.h"

/* Whether o can run on nviews views (TL_EINVAL naming what is wrong). */
tl_status tl_iter_check_options(const tl_iter_options *o, uint32_t nviews, tl_errbuf *eb);

/* Runs o on problem p: x starts at `start` (height x width, host; NULL: zeros, or ones for
 * OS-EM, which needs a start above 0) and ends in `out`. residual[i] (o->iterations
 * entries; NULL: not wanted) gets ||b - A x|| / ||b|| after iteration i, *done the
 * iterations run (fewer than asked when the tolerance stopped them). Checks: the options,
 * and for OS-EM b >= 0 and a start above 0. *sweeps (NULL: not wanted) counts the SART
 * iterations the backend swept in one go (backend.h, it_sweep). The backend's problem is
 * ended on return. */
tl_status tl_iterative_run(const tl_backend_ops *ops, void *be, const tl_it_problem *p,
                           const tl_iter_options *o, const float *start, float *out,
                           double *residual, uint32_t *done, uint32_t *sweeps, tl_errbuf *eb);

#endif
