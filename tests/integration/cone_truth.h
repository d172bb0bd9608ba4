/* cone_truth.h — what the cone-beam tool tests (check_cone_tools, check_cone_daemon) compare
 * a reconstructed slice with: the simulated sample's density in the plane of the source's
 * orbit, where FDK is exact (PROTOCOL.md §8.1.1), in the engine's units.
 *
 * A row slice of h x w pixels at scale 1 has pixel (r, c) at x = c - (w - 1) / 2 and
 * y = (h - 1) / 2 - r volume units (rows run from +y down: gpu/geometry/slice.h), a unit
 * being `unit` mm (tl_cone_opts_unit); its value is attenuation per unit, i.e. the density
 * (1/mm) times unit. Each truth pixel is the mean of 4 x 4 point samples over its area, as
 * a reconstructed pixel stands for an area (sharp phantom edges would otherwise be charged
 * to the reconstruction).
 *
 *   float *slice = tl_cone_read_slice(path, h, w);
 *   tl_cone_truth(&ph, unit, h, w, truth);
 *   tl_cone_diff d = tl_cone_compare(slice, truth, h, w, radius);
 */
#ifndef TL_CONE_TRUTH_H
#define TL_CONE_TRUTH_H

#include <stdint.h>

#include "gpu/phantom.h"

void tl_cone_truth(const tl_phantom *ph, double unit, uint32_t h, uint32_t w, float *out);

/* Over the pixels within `radius` units of the axis: the relative L2 error of rec against
 * truth and their Pearson correlation; over the flat pixels of the sample only (inside it,
 * with a uniform 3 x 3 neighbourhood of truth: away from its edges, where a band-limited
 * reconstruction cannot follow a step, and from the streaks outside it) the relative L2
 * error and the ratio of the sums (the scale). */
typedef struct {
    double rel, corr, rel_flat, scale_flat;
    uint32_t pixels, flat_pixels;
} tl_cone_diff;
tl_cone_diff tl_cone_compare(const float *rec, const float *truth, uint32_t h, uint32_t w,
                             double radius);

/* The float32 slice a tool wrote (page 0 of the TIFF at path; recon, sub), malloc'ed; the
 * test fails unless it is h x w. */
float *tl_cone_read_slice(const char *path, uint32_t h, uint32_t w);

#endif
