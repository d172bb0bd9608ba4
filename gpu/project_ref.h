/* project_ref.h — float64 CPU reference projectors for iterative reconstruction (issue #28):
 * the forward operator A (a volume to projections) and its exact transpose A^T, for both
 * geometries, in two pairs:
 *   joseph   ray-driven (P. M. Joseph, "An improved algorithm for reprojecting rays through
 *            pixel images", IEEE TMI 1(3):192-196, 1982): each ray steps through the planes
 *            of the axis it runs most along and interpolates linearly (bilinearly in 3-D)
 *            within each plane, times the path length per plane; its transpose spreads a
 *            ray's value back with the same weights.
 *   matched  the transpose of our pixel-driven back projection (ARCHITECTURE.md §3.1 in
 *            parallel beam: linear between bins, zero outside the detector; for cone beam
 *            the bilinear, (d / w)^2-weighed back projection of gpu/fdk_ref.h), so that
 *            SIRT-type updates A^T (b - A x) use exactly the back projector the engine has.
 * They are the yardstick the backends' projectors are checked against (as fdk_ref.h is
 * for FDK), so they favour plain arithmetic over speed: one ray or one voxel at a time.
 *
 * Geometry, as the rest of the engine:
 * - Parallel beam, one row slice: an nx x ny image out[j * nx + i] whose pixel (i, j) is
 *   at x = (i - (nx - 1) / 2) s, y = (j - (ny - 1) / 2) s (s: pixel size in detector
 *   pixels); projection k at angle theta[k] with axis column center[k] sees it at
 *   u = center + x cos(theta) - y sin(theta) (ARCHITECTURE.md §3.1), the ray running along
 *   r = (sin theta, cos theta); a sinogram is proj[k * cols + u].
 * - Cone beam: normalised projection matrices (gpu/geometry/cone.h) and the volume of
 *   tl_fdk_volume (voxel (i, j, k) centred on the isocentre, out[(k * ny + j) * nx + i]);
 *   projections proj[(k * rows + v) * cols + u].
 * Line integrals are in the image's units times length in pixels (parallel) or mm (cone):
 * a uniform disc of value 1 and radius R pixels projects to 2 sqrt(R^2 - u^2) at offset u.
 *
 *   tl_pb_slice g = {.nx = 256, .ny = 256, .pixel = 1, .cols = 367, .n = 180,
 *                    .theta = theta, .center = center};
 *   tl_project_parallel(&g, TL_PROJECTOR_JOSEPH, image, sinogram);
 *   tl_backproject_parallel(&g, TL_PROJECTOR_JOSEPH, sinogram, image);   (A^T)
 */
#ifndef TL_PROJECT_REF_H
#define TL_PROJECT_REF_H

#include <stdint.h>

#include "gpu/base/fail.h"
#include "gpu/base/types.h"
#include "gpu/fdk_ref.h"

/* tl_projector: gpu/base/types.h (the engine's iterative methods take it too). */

/* A parallel-beam row slice and its projections. */
typedef struct {
    uint32_t nx, ny;      /* image pixels */
    double pixel;         /* pixel size in detector pixels (> 0) */
    uint32_t cols;        /* detector bins */
    uint32_t n;           /* projections */
    const double *theta;  /* n angles, radians */
    const double *center; /* n axis columns (bins) */
} tl_pb_slice;

/* A cone-beam volume and its projections. */
typedef struct {
    tl_fdk_volume vol;
    uint32_t rows, cols;   /* detector */
    uint32_t n;            /* projections */
    const double (*P)[12]; /* n normalised matrices (gpu/geometry/cone.h) */
} tl_cb_volume;

/* A: image (nx * ny) to sinogram (n * cols), overwritten. */
void tl_project_parallel(const tl_pb_slice *g, tl_projector p, const double *image,
                         double *sinogram);
/* A^T: sinogram to image, overwritten. */
void tl_backproject_parallel(const tl_pb_slice *g, tl_projector p, const double *sinogram,
                             double *image);

/* A: volume (nx * ny * nz) to projections (n * rows * cols), overwritten. TL_EINVAL when a
 * matrix has no finite source (tl_cone_matrix_source) or its volume check fails. */
tl_status tl_project_cone(const tl_cb_volume *g, tl_projector p, const double *volume,
                          double *proj, tl_errbuf *eb);
/* A^T: projections to volume, overwritten; the same checks. */
tl_status tl_backproject_cone(const tl_cb_volume *g, tl_projector p, const double *proj,
                              double *volume, tl_errbuf *eb);

#endif
