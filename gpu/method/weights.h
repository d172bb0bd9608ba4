/* weights.h — angular weights of the FBP sum (tl_weights, gpu/base/types.h): uniform, or
 * each held projection's share of the angular range.
 *
 *   order[k] = (tl_angle_key){angle of proj[k], k};   for each of the n held projections
 *   tl_weights_apply(TL_WEIGHTS_ANGLES, proj, order, n);
 */
#ifndef TL_WEIGHTS_H
#define TL_WEIGHTS_H

#include "gpu/base/backend.h"

/* A held projection's angle and its position in the job's list. */
typedef struct {
    double angle;
    uint32_t k;
} tl_angle_key;

/* Sets proj[k].weight for the n held projections: unchanged for UNIFORM (pi / N, as the
 * geometry made them); for ANGLES, each one's share of the angular range,
 * (theta[k+1] - theta[k-1]) / 2 over the sorted angles with the ends mirrored, scaled so
 * the weights sum to pi (a single projection weighs pi). order holds each projection's
 * angle and is sorted in place. With ref (nref angles sorted ascending, as
 * tl_sort_doubles sorts them: the whole scan, of which the held projections are a part)
 * the shares are of ref's range, at the ref angle nearest each held one, scaled so that
 * ref's sum to pi. */
void tl_weights_apply(tl_weights mode, tl_bp_proj *proj, tl_angle_key *order, size_t n,
                      const double *ref, size_t nref);

#endif
