/* cone_beam.c — circular cone-beam geometry (geometry.h) for FDK: L. A. Feldkamp,
 * L. C. Davis, J. W. Kress, "Practical cone-beam algorithm", JOSA A 1(6):612-619, 1984,
 * with the projection-matrix form of Chen et al. 2019 (seed 004, §1.2) in the conventions
 * of cone.h and tl_cone_config (gpu/base/types.h).
 *
 * What FDK adds to parallel-beam FBP, and where each part lives:
 *   - the cosine weight of every detector pixel before the ramp filter: pixel_weights,
 *     applied by the backend after the other per-frame corrections (set_pixel_weights);
 *   - the ramp filter along detector rows: unchanged (gpu/method/filter.c);
 *   - back projection along the rays from the source, weighed (d / depth)^2: the matrix
 *     `projection` hands to the backend (backend.h, tl_bp_proj.cone).
 * The matrix maps volume coordinates (slice.h: x, y in pixels at the axis, z the detector
 * row) to the detector, so slices mean in cone beam what they mean in parallel beam and
 * the engine's slice registry, tracking and publishing need no change. It is the world
 * matrix of cone.h times the scaling from volume coordinates to mm, divided by the
 * isocentre's depth (source_origin), so its third row is the relative depth whose inverse
 * square is FDK's weight. Values come out, as in parallel beam, as attenuation per volume
 * unit (per pixel at the axis), and the uniform weight pi / N suits N projections spread
 * over a full turn, which is what FDK reconstructs from.
 *
 * Arbitrary trajectories come as one world matrix per projection (tl_cone_config.matrices,
 * cone.h conventions), taken as they are (a frame's centre correction shifts its columns);
 * the circular fields still define the volume unit and the isocentre's row, and one
 * detector (the same intrinsics) serves every view, so the cosine weights stay one map.
 *
 * Short scans (less than a turn, at least half a turn plus the fan): Parker's weights per
 * column of each view (gpu/base/parker.h, applied by the backends with the other per-frame
 * weights) and a view weight of scan_range / window.
 *
 * Not served here: several devices (the split by detector rows of gpu/split.c assumes a
 * horizontal slice reads its own row), half acquisition and centre estimation (both rest
 * on opposite projections being mirror images, true for parallel rays only).
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "gpu/base/parker.h"
#include "gpu/geometry/cone.h"
#include "gpu/geometry/geometry.h"

/* The circular trajectory of configuration c with its axis at column `center`. */
static tl_cone_circular circular(const tl_engine_config *c, double center, const double *angle)
{
    const tl_cone_config *k = &c->cone;
    return (tl_cone_circular){.sad = k->source_origin,
                              .sdd = k->source_detector,
                              .pitch_u = k->pixel_u,
                              .pitch_v = k->pixel_v,
                              .offset_u = center - 0.5 * (c->cols - 1.0),
                              .offset_v = k->offset_v,
                              .rows = c->rows,
                              .cols = c->cols,
                              .n = 1,
                              .angles = angle};
}

/* mm per volume unit: along x and y (a detector column at the axis), along z (a row). */
static void volume_units(const tl_cone_config *k, double *xy, double *z)
{
    *xy = k->pixel_u * k->source_origin / k->source_detector;
    *z = k->pixel_v * k->source_origin / k->source_detector;
}

/* The volume the detector sees at the axis, in world mm: cols x cols x rows volume units
 * (volume coordinates, types.h), for the checks of given matrices. */
static tl_cone_box seen_box(const tl_engine_config *c)
{
    double xy, z, v0 = 0.5 * (c->rows - 1.0) + c->cone.offset_v;
    volume_units(&c->cone, &xy, &z);
    return (tl_cone_box){{-0.5 * c->cols * xy, -0.5 * c->cols * xy, (-0.5 - v0) * z},
                         {0.5 * c->cols * xy, 0.5 * c->cols * xy, (c->rows - 0.5 - v0) * z}};
}

/* Relative: one detector for every view. Matrices from float32 numbers (RECAST3D's
 * ConeVecGeometry, float32 .npy files) put a circle's principal point ~1e-6 apart (measured
 * 3.3e-5 px at u0 = 31.5 from vectors of ~300 mm), so 1e-6 refused them; the cosine weights
 * of matrix 0 are then off by far less than float32 rounding (their slope in u0 is
 * (u - u0) pitch^2 / sdd^2 per pixel). */
#define INTRINSICS_TOL 1e-5

/* Whether given matrices i and 0 have other detector intrinsics (*in gets i's, ref 0's). */
static bool other_detector(const tl_cone_config *k, uint32_t i, double in[4], double ref[4])
{
    tl_cone_matrix_intrinsics(k->matrices[0], &ref[0], &ref[1], &ref[2], &ref[3]);
    tl_cone_matrix_intrinsics(k->matrices[i], &in[0], &in[1], &in[2], &in[3]);
    for (int a = 0; a < 4; a++)
        if (fabs(in[a] - ref[a]) > INTRINSICS_TOL * (fabs(ref[a]) + 1))
            return true;
    return false;
}

/* FDK weighs every pixel by one map of cosine weights, so it needs one detector: views
 * whose intrinsics differ (a tomosynthesis detector that stays while the source moves,
 * tl_cone_tomosynthesis_matrices) are served to iterative slices alone. */
static const char *cone_no_fbp(const tl_engine_config *c)
{
    double in[4], ref[4];
    for (uint32_t i = 1; c->cone.matrices && i < c->cone.nmatrices; i++)
        if (other_detector(&c->cone, i, in, ref))
            return "FDK: the views' detector intrinsics differ (e.g. a stationary tomosynthesis "
                   "detector): iterative slices only (tl_engine_iterate)";
    return NULL;
}

/* Given matrices: each usable for the volume (cone.h, tl_cone_matrix_check), all with the
 * intrinsics of the first (the cosine weights are one map), unless the engine keeps the
 * measurements for iterative slices (cone_no_fbp). */
static tl_status check_matrices(const tl_engine_config *c, tl_errbuf *eb)
{
    const tl_cone_config *k = &c->cone;
    if (!k->matrices || k->nmatrices == 0)
        return tl_fail(eb, TL_EINVAL, "cone geometry: %s",
                       k->matrices ? "no matrices given (nmatrices 0)"
                                   : "nmatrices without matrices");
    tl_cone_box box = seen_box(c);
    double ref[4];
    for (uint32_t i = 0; i < k->nmatrices; i++) {
        tl_errbuf mb;
        if (tl_cone_matrix_check(k->matrices[i], &box, &mb) != TL_OK)
            return tl_fail(eb, TL_EINVAL, "cone geometry: matrix %u (projection %llu): %s", i,
                           (unsigned long long)(c->first_index + i), mb.msg);
        double in[4];
        if (!c->keep_measurements && other_detector(k, i, in, ref))
            return tl_fail(
                eb, TL_EUNSUPPORTED,
                "cone geometry: matrix %u has other detector intrinsics than "
                "matrix 0 (fu, fv, u0, v0: %.9g, %.9g, %.9g, %.9g against %.9g, %.9g, %.9g, "
                "%.9g): FDK serves one detector (iterative slices, with keep_measurements, "
                "any)",
                i, in[0], in[1], in[2], in[3], ref[0], ref[1], ref[2], ref[3]);
    }
    return TL_OK;
}

/* A short scan (gpu/base/parker.h): at least pi plus the fan angle, a circle, uniform
 * weights (the view weight scan_range / window is what a short scan needs). */
static tl_status check_short_scan(const tl_engine_config *c, tl_errbuf *eb)
{
    const tl_cone_config *k = &c->cone;
    if (!isfinite(k->scan_start) || !isfinite(k->scan_range) || k->scan_range < 0 ||
        k->scan_range > 2 * M_PI)
        return tl_fail(eb, TL_EINVAL,
                       "cone geometry: scan start %g, range %g rad: need finite values and a "
                       "range in 0..2 pi (0: a full turn)",
                       k->scan_start, k->scan_range);
    if (!tl_parker_short(k))
        return TL_OK;
    if (k->matrices)
        return tl_fail(eb, TL_EUNSUPPORTED,
                       "cone geometry: a short scan (Parker weights) needs a circular "
                       "trajectory, not given matrices");
    if (c->weights != TL_WEIGHTS_UNIFORM)
        return tl_fail(eb, TL_EUNSUPPORTED,
                       "cone geometry: a short scan weighs views uniformly (scan range / "
                       "window), not by their angles");
    tl_parker p = tl_parker_of(c);
    double fan = fmax(fabs(atan((-0.5 - p.u0) / p.fu)), fabs(atan((c->cols - 0.5 - p.u0) / p.fu)));
    if (k->scan_range < M_PI + 2 * fan)
        return tl_fail(eb, TL_EINVAL,
                       "cone geometry: a short scan of %.2f degrees is less than 180 degrees "
                       "plus the fan angle (%.2f degrees): some rays are never seen",
                       k->scan_range * 180 / M_PI, 2 * fan * 180 / M_PI);
    return TL_OK;
}

static tl_status cone_check(const tl_engine_config *c, tl_errbuf *eb)
{
    const tl_cone_config *k = &c->cone;
    double angle = 0;
    tl_cone_circular g = circular(c, c->center, &angle);
    tl_status st = tl_cone_circular_check(&g, eb);
    if (st != TL_OK)
        return st;
    double xy, z;
    volume_units(k, &xy, &z);
    /* the corners of the cols x cols volume at the axis must stay in front of the source */
    double corner = M_SQRT2 * 0.5 * c->cols * xy;
    if (k->source_origin <= corner)
        return tl_fail(eb, TL_EINVAL,
                       "cone geometry: the source (%g mm from the axis) lies inside the volume "
                       "the detector sees (corners %g mm from the axis): the fan is too wide "
                       "for FDK",
                       k->source_origin, corner);
    if (c->ndevices >= 2 && !c->keep_measurements)
        return tl_fail(eb, TL_EUNSUPPORTED,
                       "cone beam's FDK runs on one device (%u asked for): its slices read "
                       "every detector row; several devices share iterative problems, which "
                       "need keep_measurements",
                       c->ndevices);
    if (c->half_acquisition)
        return tl_fail(eb, TL_EUNSUPPORTED, "half acquisition is parallel beam only");
    if (c->center_estimate || c->center_auto)
        return tl_fail(eb, TL_EUNSUPPORTED,
                       "centre estimation is parallel beam only (it pairs mirror-image "
                       "projections)");
    if ((st = check_short_scan(c, eb)) != TL_OK)
        return st;
    return k->matrices || k->nmatrices ? check_matrices(c, eb) : TL_OK;
}

/* The world matrix of frame `index`: given (its columns shifted by center_offset), or
 * the circular trajectory's at `angle` with the axis at the engine's centre. */
static void world_matrix(const tl_engine_config *c, uint64_t index, double angle,
                         double center_offset, double P[12])
{
    const tl_cone_config *k = &c->cone;
    if (k->matrices) { /* frames.c refuses an index without a matrix */
        memcpy(P, k->matrices[index - c->first_index], 12 * sizeof *P);
        for (int col = 0; col < 4; col++) /* u + offset: row 1 += offset row 3 */
            P[col] += center_offset * P[8 + col];
        return;
    }
    tl_cone_circular g = circular(c, c->center + center_offset, &angle);
    (void)tl_cone_circular_matrices(&g, (double(*)[12])P, NULL); /* cone_check accepted it */
}

static tl_bp_proj cone_projection(const tl_engine_config *c, uint32_t slot, uint64_t index,
                                  double angle, double center_offset)
{
    const tl_cone_config *k = &c->cone;
    double center = c->center + center_offset, P[1][12];
    world_matrix(c, index, angle, center_offset, P[0]);
    double xy, z, v0 = 0.5 * (c->rows - 1.0) + k->offset_v;
    volume_units(k, &xy, &z);
    tl_bp_proj p = {.slot = slot,
                    .cos_t = cos(angle),
                    .sin_t = sin(angle),
                    .center = center,
                    /* a turn: each ray twice, half each; a short scan: Parker's weights
                     * count each once, and a view stands for its share of the range */
                    .weight = tl_parker_short(k) ? k->scan_range / c->window : M_PI / c->window};
    /* world (X, Y, Z) = (x xy, y xy, (z - v0) z_mm), then / depth of the isocentre (of a
     * normalised matrix: its last entry; source_origin for a circular one) */
    double d = P[0][11];
    for (int r = 0; r < 3; r++) {
        const double *w = P[0] + 4 * r;
        double *o = p.cone + 4 * r;
        o[0] = w[0] * xy / d;
        o[1] = w[1] * xy / d;
        o[2] = w[2] * z / d;
        o[3] = (w[3] - w[2] * v0 * z) / d;
    }
    return p;
}

/* FDK's cosine weight: the cosine of the angle between a pixel's ray and the central ray,
 * sdd / sqrt(sdd^2 + (u - u0)^2 pu^2 + (v - v0)^2 pv^2). */
static void cone_pixel_weights(const tl_engine_config *c, double *w)
{
    const tl_cone_config *k = &c->cone;
    double fu = k->source_detector / k->pixel_u, fv = k->source_detector / k->pixel_v;
    double u0 = c->center, v0 = 0.5 * (c->rows - 1.0) + k->offset_v;
    if (k->matrices) /* one detector for all (check_matrices): the first matrix's */
        tl_cone_matrix_intrinsics(k->matrices[0], &fu, &fv, &u0, &v0);
    for (uint32_t r = 0; r < c->rows; r++) {
        double b = (r - v0) / fv;
        for (uint32_t col = 0; col < c->cols; col++) {
            double a = (col - u0) / fu;
            w[(size_t)r * c->cols + col] = 1.0 / sqrt(1.0 + a * a + b * b);
        }
    }
}

/* A perspective projection maps the box to the hull of its corners' images (every corner in
 * front of the source: p->cone's third row is the positive relative depth there). */
static void cone_rows_seen(const tl_engine_config *c, const tl_bp_proj *p, const double lo[3],
                           const double hi[3], double v[2])
{
    (void)c;
    v[0] = INFINITY;
    v[1] = -INFINITY;
    for (int corner = 0; corner < 8; corner++) {
        double x[3] = {corner & 1 ? hi[0] : lo[0], corner & 2 ? hi[1] : lo[1],
                       corner & 4 ? hi[2] : lo[2]};
        const double *m = p->cone;
        double vw = m[4] * x[0] + m[5] * x[1] + m[6] * x[2] + m[7];
        double w = m[8] * x[0] + m[9] * x[1] + m[10] * x[2] + m[11];
        if (!(w > 0)) {
            v[0] = v[1] = NAN;
            return;
        }
        v[0] = fmin(v[0], vw / w);
        v[1] = fmax(v[1], vw / w);
    }
}

/* Rows [row0, ...): the principal row moves up by row0 (offset_v counts from the band's
 * middle row), and so does every given matrix's v (its row 2 less row0 times its row 3,
 * which keeps it normalised). Volume z counts rows, so it moves with them. */
static tl_status cone_band(const tl_engine_config *c, uint32_t row0, tl_engine_config *out,
                           double (*matrices)[12], tl_errbuf *eb)
{
    const tl_cone_config *k = &c->cone;
    out->cone.offset_v = k->offset_v + 0.5 * (c->rows - 1.0) - row0 - 0.5 * (out->rows - 1.0);
    if (!k->matrices)
        return TL_OK;
    if (!matrices)
        return tl_fail(eb, TL_EINVAL, "a band of given cone-beam matrices needs room for them");
    for (uint32_t i = 0; i < k->nmatrices; i++) {
        memcpy(matrices[i], k->matrices[i], sizeof matrices[i]);
        for (int col = 0; col < 4; col++)
            matrices[i][4 + col] -= row0 * matrices[i][8 + col];
    }
    out->cone.matrices = (const double(*)[12])matrices;
    return TL_OK;
}

const tl_geometry_ops tl_geometry_cone = {
    .name = "cone",
    .check = cone_check,
    .projection = cone_projection,
    .pixel_weights = cone_pixel_weights,
    .rows_seen = cone_rows_seen,
    .band = cone_band,
    .no_fbp = cone_no_fbp,
    .turn = 2 * M_PI,
};
