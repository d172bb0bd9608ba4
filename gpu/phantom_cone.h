/* phantom_cone.h — exact cone-beam projections of the analytic ellipsoid phantoms of
 * phantom.h (issue #21), for tests and references that must be free of the inverse crime.
 *
 * The phantom is the same tl_phantom (ellipsoid set, value at a point: tl_phantom_value);
 * only its units change: built in cone-beam world coordinates (gpu/geometry/cone.h: mm,
 * origin at the isocentre, z on the rotation axis), with z_center = 0, e.g. the modified
 * 3-D Shepp-Logan phantom (L. A. Shepp, B. F. Logan, "The Fourier reconstruction of a
 * head section", IEEE Trans. Nucl. Sci. 21(3):21-43, 1974; ellipsoids as in A. C. Kak,
 * M. Slaney, "Principles of computerized tomographic imaging", IEEE Press 1988, ch. 3;
 * contrast raised as in P. Toft, "The Radon transform", PhD thesis, DTU 1996,
 * pp. 199-200; the table of phantom3d.m) in a 100 mm ball:
 *   tl_phantom_shepp_logan(&ph, 50.0, 0.0, 50.0);
 * Densities are then per mm, and a line integral is dimensionless.
 *
 * A detector pixel's value is the line integral along the half-line from the source
 * through the pixel centre (u, v): the ray S + t d, t >= 0, with S the matrix's source
 * and d = M^-1 (u, v, 1) (cone.h, P = [M | p4]), clipped at the source, so an ellipsoid
 * behind the source adds nothing. P must give the phantom positive depth (a normalised
 * matrix, cone.h, does); for -P the half-line would point away from the detector.
 * Nothing is clipped at the detector: the matrix does not say where the detector lies
 * in mm, and a phantom behind the detector is not a scan.
 *
 *   double *proj = malloc(rows * cols * sizeof *proj);
 *   if (tl_phantom_cone_project(&ph, P[i], rows, cols, proj, eb) != TL_OK) ...
 */
#ifndef TL_PHANTOM_CONE_H
#define TL_PHANTOM_CONE_H

#include <stdint.h>

#include "gpu/base/fail.h"
#include "gpu/phantom.h"

/* The line integral seen by detector pixel (u, v) (pixel indices, centre at integers) of
 * the projection with matrix P. TL_EINVAL when P has no finite source (cone.h). */
tl_status tl_phantom_cone_pixel(const tl_phantom *p, const double P[12], double u, double v,
                                double *out, tl_errbuf *eb);

/* A whole rows x cols projection: out[v * cols + u] for pixel (u, v). */
tl_status tl_phantom_cone_project(const tl_phantom *p, const double P[12], uint32_t rows,
                                  uint32_t cols, double *out, tl_errbuf *eb);

#endif
