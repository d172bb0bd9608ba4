/* bands.c — detector row bands (engine.h: tl_engine_rows_read, tl_engine_config_band): which
 * rows a block of slices reads, and an engine that holds only those rows, for volumes
 * reconstructed slab by slab out of core (clients/volume_pipeline.h).
 *
 * Why: seed 002 uploads every detector row for every slab of a cone-beam volume; a slab of
 * height h reads only the rows its voxels project to, v = D z / w (seed-002-004.md §2), a
 * band a little taller than h. The band comes from the geometry (rows_seen: the box's
 * corners through each view's matrix), widened by the interpolation's second tap and one
 * row of slack for the float32 arithmetic of the kernels, so a band engine sees every row
 * the whole detector's engine would read for those slices.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "gpu/engine_impl.h"

/* Slack beyond the rows the box lands on: a row each side (float32 coordinates in the
 * kernels against float64 here), and the second interpolation tap below the last row. */
#define BAND_SLACK_ROWS 1

/* Row band [v_lo, v_hi] (fractional) -> the rows read, clipped to the detector. */
static void rows_of(double v_lo, double v_hi, uint32_t rows, uint32_t *first, uint32_t *end)
{
    double a = floor(v_lo) - BAND_SLACK_ROWS, b = floor(v_hi) + 2 + BAND_SLACK_ROWS;
    if (!isfinite(v_lo) || !isfinite(v_hi)) /* the box reaches behind a source */
        a = -INFINITY, b = INFINITY;
    *first = a <= 0 ? 0 : a >= rows ? rows : (uint32_t)a;
    *end = b >= rows ? rows : b <= *first ? *first : (uint32_t)b;
}

tl_status tl_engine_rows_read(const tl_engine_config *c, uint32_t n, const uint64_t *indices,
                              const double *angles, uint32_t size, double z0, uint32_t count,
                              uint32_t *first, uint32_t *end)
{
    tl_errbuf *eb = tl_engine_create_error();
    tl_status st = tl_engine_check_config(c, eb);
    if (st != TL_OK)
        return st;
    if (!angles || n == 0 || size == 0 || count == 0 || !isfinite(z0))
        return tl_fail(eb, TL_EINVAL, "rows read: %u views, size %u, %u heights from %g", n,
                       size, count, z0);
    double *lo_v = malloc(2 * (size_t)count * sizeof *lo_v), *hi_v = lo_v + count;
    if (!lo_v)
        return tl_fail(eb, TL_ENOMEM, "rows read: no memory for %u heights", count);
    for (uint32_t i = 0; i < count; i++)
        lo_v[i] = INFINITY, hi_v[i] = -INFINITY;
    const tl_geometry_ops *g;
    (void)tl_geometry_find(c->geometry, NULL, &g); /* the check found it */
    /* row slices of size x size at scale 1: pixel centres within (size - 1) / 2 of the axis
     * (gpu/geometry/slice.h) */
    double r = 0.5 * (size - 1.0);
    for (uint32_t k = 0; k < n; k++) {
        uint64_t index = indices ? indices[k] : c->first_index + k;
        tl_bp_proj p = g->projection(c, 0, index, angles[k], 0.0);
        for (uint32_t i = 0; i < count; i++) {
            double lo[3] = {-r, -r, z0 + i}, hi[3] = {r, r, z0 + i}, v[2];
            g->rows_seen(c, &p, lo, hi, v);
            bool finite = isfinite(v[0]) && isfinite(v[1]);
            lo_v[i] = finite ? fmin(lo_v[i], v[0]) : -INFINITY;
            hi_v[i] = finite ? fmax(hi_v[i], v[1]) : INFINITY;
        }
    }
    for (uint32_t i = 0; i < count; i++)
        rows_of(lo_v[i], hi_v[i], c->rows, &first[i], &end[i]);
    free(lo_v);
    return TL_OK;
}

tl_status tl_engine_config_band(const tl_engine_config *c, uint32_t row0, uint32_t rows,
                                double (*matrices)[12], tl_engine_config *out)
{
    tl_errbuf *eb = tl_engine_create_error();
    tl_status st = tl_engine_check_config(c, eb);
    if (st != TL_OK)
        return st;
    if (rows == 0 || row0 > c->rows || rows > c->rows - row0)
        return tl_fail(eb, TL_EINVAL, "band of rows %u .. %u of a detector of %u rows", row0,
                       row0 + rows, c->rows);
    if (c->ndevices >= 2)
        return tl_fail(eb, TL_EUNSUPPORTED, "a band of rows runs on one device");
    const tl_geometry_ops *g;
    (void)tl_geometry_find(c->geometry, NULL, &g);
    *out = *c;
    out->rows = rows;
    return g->band(c, row0, out, matrices, eb);
}
