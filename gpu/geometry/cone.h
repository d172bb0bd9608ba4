/* cone.h — cone-beam geometry as 3x4 projection matrices (issue #21): the arithmetic
 * under the engine's cone-beam geometry (cone_beam.c), the phantom's exact projections and
 * the float64 FDK reference.
 *
 * Conventions (ARCHITECTURE.md §3.10; the matrix form of Chen et al. 2019, Eqs. 1-3, with
 * our own axes, chosen to extend the parallel-beam ones of ARCHITECTURE.md §3.1):
 * - World coordinates in mm, origin at the isocentre, z along the rotation axis.
 * - A projection matrix P (3x4, row-major, P[4 r + c]) maps a homogeneous world point
 *   (x, y, z, 1) to (u w, v w, w): u = detector column, v = detector row, both in pixel
 *   indices (pixel k's centre is at k), and w the depth of the point in mm along the
 *   central ray, measured from the source. That w is a true depth only for a NORMALISED
 *   matrix: the rotation part of row 3 has unit norm and points sharing the volume's side
 *   of the source have w > 0 (tl_cone_matrix_normalize). FDK's (d/w)^2 weight needs it.
 * - Circular trajectory at angle b (radians): central-ray direction r = (sin b, cos b, 0)
 *   from source to detector, source at -sad r, detector axes e_u = (cos b, -sin b, 0) and
 *   e_v = (0, 0, 1), principal point (where the central ray meets the detector) at
 *   u0 = (cols - 1)/2 + offset_u, v0 = (rows - 1)/2 + offset_v. Then
 *       w = sad + x.r,   u = u0 + (sdd/pitch_u) (x.e_u) / w,   v = v0 + (sdd/pitch_v) z / w,
 *   i.e. P = [ (sdd/pitch_u) e_u + u0 r , u0 sad ; (sdd/pitch_v) e_v + v0 r , v0 sad ;
 *              r , sad ].
 * - Relation to parallel beam (gpu/geometry/parallel.c, ARCHITECTURE.md §3.1): the axes
 *   are chosen so that the parallel ray direction of angle theta is r and the parallel
 *   detector axis is e_u. In the limit sad -> infinity with sdd = sad and pitch 1 mm, the
 *   matrix gives u = center + x cos(b) - y sin(b) and v = v0 + z: the parallel formula
 *   with center = u0, volume units of one detector pixel, and parallel volume height
 *   z_par = v0 + z (the parallel volume counts z from detector row 0; the cone world
 *   counts it from the principal row, in mm).
 * - Voxel placement: an nx x ny x nz volume of isotropic pitch `voxel` mm, centred on the
 *   isocentre, puts voxel (i, j, k) (i fastest) at ((i - (nx-1)/2) voxel,
 *   (j - (ny-1)/2) voxel, (k - (nz-1)/2) voxel) — no axis flips, unlike Chen et al.'s M_0.
 * - Distances (sad: source-axis, sdd: source-detector) and pitches must be finite and > 0;
 *   sdd may be below sad (a virtual detector at the axis has sdd = sad).
 *
 *   double (*P)[12] = malloc(g.n * sizeof *P);
 *   if (tl_cone_circular_matrices(&g, P, eb) != TL_OK) ...
 *   double u, v, w; if (tl_cone_project(P[i], x, &u, &v, &w)) ...
 */
#ifndef TL_CONE_H
#define TL_CONE_H

#include <stdbool.h>
#include <stdint.h>

#include "gpu/base/fail.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    double sad, sdd;           /* source-axis and source-detector distance, mm */
    double pitch_u, pitch_v;   /* detector pixel pitch, mm per column / per row */
    double offset_u, offset_v; /* principal point minus detector centre, pixels */
    uint32_t rows, cols;       /* detector shape */
    uint32_t n;                /* projections */
    const double *angles;      /* n gantry angles, radians */
} tl_cone_circular;

/* An axis-aligned box in world mm (the reconstructed volume). */
typedef struct {
    double lo[3], hi[3];
} tl_cone_box;

/* The box of an nx x ny x nz volume of pitch `voxel` centred on the isocentre, reaching
 * to the outer faces of its edge voxels. */
tl_cone_box tl_cone_volume_box(uint32_t nx, uint32_t ny, uint32_t nz, double voxel);

/* Checks g (every value finite, distances and pitches > 0, shape and n >= 1) and writes
 * its n normalised matrices to P. TL_EINVAL names the offending value. */
tl_status tl_cone_circular_check(const tl_cone_circular *g, tl_errbuf *eb);
tl_status tl_cone_circular_matrices(const tl_cone_circular *g, double (*P)[12], tl_errbuf *eb);

/* Magnification at the rotation axis, sdd / sad (a point at depth w: sdd / w). */
double tl_cone_circular_magnification(const tl_cone_circular *g);

/* Projects world point x: (u, v) in pixel indices and the depth w (mm for a normalised
 * matrix). Returns false, leaving u and v unset, when w <= 0 (at or behind the source). */
bool tl_cone_project(const double P[12], const double x[3], double *u, double *v, double *w);

/* The source (camera centre): the null space of P, -M^-1 p4 with P = [M | p4].
 * TL_EINVAL when M is singular (a parallel/affine camera or a rank-deficient matrix). */
tl_status tl_cone_matrix_source(const double P[12], double s[3], tl_errbuf *eb);

/* Scales P (by a positive or negative factor) so the rotation part of row 3 has unit norm
 * and `in_front` (a point of the volume, e.g. its centre) has positive depth. TL_EINVAL
 * for non-finite entries, a zero third row or in_front on the source plane. */
tl_status tl_cone_matrix_normalize(double P[12], const double in_front[3], tl_errbuf *eb);

/* Whether an arbitrary matrix is a usable cone-beam matrix for volume box b: finite
 * entries, rank 3, a non-singular left 3x3 block (finite source), normalised (row 3's
 * rotation part of unit norm within 1e-9), the source outside the box and every corner of
 * the box in front of it (w > 0). TL_EINVAL, naming the value, otherwise. */
tl_status tl_cone_matrix_check(const double P[12], const tl_cone_box *b, tl_errbuf *eb);

/* A matrix as a sender writes it (any non-zero scale, either sign): normalised with the
 * isocentre in front (tl_cone_matrix_normalize), with a finite source and every entry
 * finite after. This is what `tomolive recon --matrices FILE:p` and the daemon's "matrices"
 * (PROTOCOL.md 8.1.1) do to each matrix, so both mean the same. TL_EINVAL saying why. */
tl_status tl_cone_matrix_prepare(double P[12], tl_errbuf *eb);

/* One ASTRA cone_vec row (srcX, srcY, srcZ, dX, dY, dZ, uX, uY, uZ, vX, vY, vZ: the
 * source, the detector's centre, the vectors from pixel (0,0) to (0,1) and to (1,0), mm)
 * of a rows x cols detector to a prepared matrix. ASTRA puts d at the middle of the
 * detector, pixel ((cols-1)/2, (rows-1)/2) in our index convention, and its world axes
 * are ours (clients/cone_read.h). TL_EINVAL when the vectors give no camera. */
tl_status tl_cone_from_astra_vec(const double vec[12], uint32_t rows, uint32_t cols, double P[12],
                                 tl_errbuf *eb);

/* Tomosynthesis (issue #28; seed 003: digital breast tomosynthesis from 15 views): the
 * source on an ARC around the z axis (radius sad, the circular trajectory's) or on a LINE
 * along x at y = -sad, n views equally spaced in angle from -span/2 to +span/2 as seen from
 * the isocentre (the line's source at x = -sad tan(angle)); one view: angle 0. The
 * detector STATIONARY (the plane y = sdd - sad, centred on the y axis, columns along +x
 * and rows along +z: a breast support) or ROTATING with an arc source (a limited arc of
 * the circular trajectory). Angle 0 is the circular trajectory's angle 0 in every case;
 * planes parallel to a stationary detector are planes of constant y. */
typedef enum { TL_TOMO_ARC = 0, TL_TOMO_LINE } tl_tomo_source;
typedef enum { TL_TOMO_STATIONARY = 0, TL_TOMO_ROTATING } tl_tomo_detector;
typedef struct {
    tl_tomo_source source;
    tl_tomo_detector detector;
    double span;             /* radians, 0 .. < pi */
    double sad, sdd;         /* mm: source to isocentre, source to detector at angle 0 */
    double pitch_u, pitch_v; /* mm */
    uint32_t rows, cols, n;
} tl_cone_tomosynthesis;

/* The view angles of g (n of them) and its n prepared matrices. TL_EINVAL names a bad
 * value (non-finite or non-positive distances and pitches, a span outside 0 .. < pi, no
 * views) or a line source with a rotating detector. */
void tl_cone_tomosynthesis_angles(const tl_cone_tomosynthesis *g, double *angles);
tl_status tl_cone_tomosynthesis_matrices(const tl_cone_tomosynthesis *g, double (*P)[12],
                                         tl_errbuf *eb);

/* Intrinsics of a normalised, skew-free matrix (any circular one): focal lengths in pixels
 * fu = sdd / pitch_u, fv = sdd / pitch_v, and the principal point (u0, v0). Valid when the
 * detector axes are orthogonal to the central ray, which circular matrices guarantee. */
void tl_cone_matrix_intrinsics(const double P[12], double *fu, double *fv, double *u0, double *v0);

#ifdef __cplusplus
}
#endif
#endif
