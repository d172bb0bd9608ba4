/* iterative_ref.h — float64 reference iterative reconstruction (issue #28): SIRT, SART and
 * ordered-subsets SART, and OS-EM, with optional non-negativity and total-variation steps,
 * over the reference projectors of project_ref.h. Like fdk_ref.h it is the yardstick the
 * backends' iterative methods are checked against, so it favours plain arithmetic.
 *
 * One update serves the SART family: for each subset S of views in turn (A_S its rows),
 *     x <- x + lambda C_S A_S^T R_S (b_S - A_S x),  R_S = 1 / (A_S 1), C_S = 1 / (A_S^T 1)
 * (A. H. Andersen, A. C. Kak, "Simultaneous algebraic reconstruction technique (SART)",
 * Ultrasonic Imaging 6:81-94, 1984; ordered subsets: H. M. Hudson, R. S. Larkin, IEEE TMI
 * 13(4):601-609, 1994). SIRT is one subset of every view, SART one view per subset. Rays
 * and pixels the operator does not link (zero sums) are left alone. OS-EM (Hudson and
 * Larkin) multiplies instead, for data b >= 0 of the model b ~ Poisson(A x):
 *     x <- x / (A_S^T 1) * A_S^T (b_S / A_S x),
 * which keeps x >= 0 from a positive start. Subsets interleave the views (view k in subset
 * k mod m), the usual order that keeps each subset spread over the arc.
 * After each iteration: non-negativity (x = max(x, 0)) and, with tv_weight > 0, tv_steps
 * steps of steepest descent on the smoothed total variation sum sqrt(|grad x|^2 + eps^2)
 * (eps: TL_TV_SMOOTHING of max |x|),
 * each of length tv_weight times the size of that iteration's update (the ASD-POCS rule of
 * E. Y. Sidky, X. Pan, Phys. Med. Biol. 53:4777, 2008, simplified), so the TV step scales
 * with the data step and fades as the iterations converge.
 *
 *   tl_iter_problem pb;  tl_iter_parallel(&pb, &slice, sinogram, TL_PROJECTOR_JOSEPH);
 *   tl_iter_options o = {.method = TL_ITER_SIRT, .iterations = 50, .relaxation = 1};
 *   double residual[50];  x = FBP or zeros;
 *   tl_iter_run(&pb, &o, x, residual, &done, eb);
 */
#ifndef TL_ITERATIVE_REF_H
#define TL_ITERATIVE_REF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu/base/fail.h"
#include "gpu/base/types.h"
#include "gpu/project_ref.h"

/* tl_iter_method and tl_iter_options: gpu/base/types.h (the engine takes them too). */

/* A linear problem b = A x over views: an image of nx x ny x nz (nz = 1: a slice) and
 * nviews views of view_len measurements each, through a reference projector pair. */
typedef struct {
    uint32_t nx, ny, nz;
    uint32_t nviews;
    size_t view_len;
    const double *b; /* nviews * view_len measurements */
    tl_projector projector;
    bool cone;
    tl_pb_slice pb;  /* parallel beam */
    tl_cb_volume cb; /* cone beam */
} tl_iter_problem;

/* The problem of a parallel-beam slice g and its sinogram b (n * cols). */
void tl_iter_parallel(tl_iter_problem *pb, const tl_pb_slice *g, const double *b, tl_projector p);
/* The problem of a cone-beam volume g and its projections b (n * rows * cols). */
void tl_iter_cone(tl_iter_problem *pb, const tl_cb_volume *g, const double *b, tl_projector p);

/* Runs o on x (in: the start, e.g. zeros or FBP; out: the result). residual[i] (at least
 * o->iterations entries) gets ||b - A x|| / ||b|| after iteration i; *done the iterations
 * run. TL_EINVAL for bad options (naming them) or an OS-EM start or data below 0, TL_ENOMEM. */
tl_status tl_iter_run(const tl_iter_problem *pb, const tl_iter_options *o, double *x,
                      double *residual, uint32_t *done, tl_errbuf *eb);

#endif
