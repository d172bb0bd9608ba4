/* fdk_ref.h — a float64 CPU reference of FDK cone-beam reconstruction (L. A. Feldkamp,
 * L. C. Davis, J. W. Kress, "Practical cone-beam algorithm", JOSA A 1(6):612-619, 1984)
 * for a full circular scan, from per-view projection matrices (issue #21).
 * It is the yardstick future GPU kernels are measured against, so it favours plain,
 * checkable arithmetic over speed: a direct convolution, one voxel at a time.
 *
 * Pipeline per projection, in the conventions of gpu/geometry/cone.h (ARCHITECTURE.md
 * §3.10), for a normalised matrix P with intrinsics fu, fv, u0, v0 (pixels) and d = the
 * isocentre's depth (P[11], the source-axis distance):
 *   1. cosine weight  p(u, v) / sqrt(1 + ((u - u0)/fu)^2 + ((v - v0)/fv)^2);
 *   2. ramp filter along each detector row: the windowed filter of gpu/method/filter.h,
 *      applied as the circular convolution of the zero-padded row with the inverse DFT of
 *      its response (the same discretisation as the backends' FFT), divided by
 *      tau = d / fu, the detector pitch at the isocentre (mm);
 *   3. voxel-driven back projection: every voxel centre (cone.h placement) projects to
 *      (u, v, w); it adds (d / w)^2 times the bilinear sample of the filtered projection
 *      (floor-based, zero outside the detector: ARCHITECTURE.md §3.1's rule in 2-D).
 * The sum is scaled by pi / n (n views equally spaced over 360 degrees: the 1/2 of a full
 * turn times 2 pi / n; A. C. Kak, M. Slaney, "Principles of computerized tomographic
 * imaging", IEEE Press 1988, ch. 3), so a phantom of density mu per mm reconstructs to
 * mu. FDK is exact only in the mid-plane (z = 0); elsewhere it carries the cone-beam
 * approximation error.
 *
 *   tl_fdk_volume vol = {64, 64, 64, 1.0};
 *   if (tl_fdk_reference(P, n, proj, rows, cols, TL_FILTER_RAMLAK, &vol, out, eb)) ...
 */
#ifndef TL_FDK_REF_H
#define TL_FDK_REF_H

#include <stdint.h>

#include "gpu/base/fail.h"

typedef struct {
    uint32_t nx, ny, nz; /* voxels */
    double voxel;        /* mm, isotropic; the volume is centred on the isocentre */
} tl_fdk_volume;

/* Reconstructs out[(k * ny + j) * nx + i] from n projections proj[(s * rows + v) * cols
 * + u] (line integrals) taken with the normalised matrices P[s]. Every matrix is checked
 * against the volume's box (tl_cone_matrix_check); TL_EINVAL names what is wrong,
 * TL_ENOMEM when the working rows cannot be allocated. */
tl_status tl_fdk_reference(const double (*P)[12], uint32_t n, const double *proj, uint32_t rows,
                           uint32_t cols, tl_filter filter, const tl_fdk_volume *vol, double *out,
                           tl_errbuf *eb);

#endif
