/* cone_scan.c — the tests' cone-beam scan (cone_scan.h). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/fdk_ref.h"
#include "gpu/geometry/cone.h"
#include "gpu/phantom_cone.h"
#include "tests/cone_scan.h"

double tl_cone_scan_unit(const tl_cone_scan *s)
{
    return s->pitch * TL_CONE_SCAN_SAD / TL_CONE_SCAN_SDD;
}

static tl_cone_circular circular(const tl_cone_scan *s)
{
    return (tl_cone_circular){.sad = TL_CONE_SCAN_SAD,
                              .sdd = TL_CONE_SCAN_SDD,
                              .pitch_u = s->pitch,
                              .pitch_v = s->pitch,
                              .offset_u = s->center - 0.5 * (s->cols - 1.0),
                              .offset_v = s->offset_v,
                              .rows = s->rows,
                              .cols = s->cols,
                              .n = s->nv,
                              .angles = s->angles};
}

int tl_cone_scan_make(tl_cone_scan *s, uint32_t rows, uint32_t cols, uint32_t nv, double du,
                      double dv, bool jitter)
{
    double *angles = malloc(nv * sizeof *angles);
    if (!angles)
        return -1;
    for (uint32_t i = 0; i < nv; i++) /* a deterministic jitter of up to a third of a step */
        angles[i] = 2 * M_PI * (i + (jitter ? (((i * 7919u) % 13u) / 13.0 - 0.5) / 1.5 : 0)) / nv;
    int rc = tl_cone_scan_make_angles(s, rows, cols, nv, du, dv, angles);
    free(angles);
    return rc;
}

int tl_cone_scan_make_angles(tl_cone_scan *s, uint32_t rows, uint32_t cols, uint32_t nv, double du,
                             double dv, const double *angles)
{
    memset(s, 0, sizeof *s);
    s->rows = rows;
    s->cols = cols;
    s->nv = nv;
    s->pitch = TL_CONE_SCAN_WIDTH / cols;
    s->center = 0.5 * (cols - 1.0) + du;
    s->offset_v = dv;
    size_t npix = (size_t)rows * cols;
    s->angles = malloc(nv * sizeof *s->angles);
    s->proj = malloc(nv * npix * sizeof *s->proj);
    double(*P)[12] = malloc(nv * sizeof *P);
    double *line = malloc(npix * sizeof *line);
    tl_phantom ph;
    int rc = -1;
    if (!s->angles || !s->proj || !P || !line ||
        tl_phantom_shepp_logan(&ph, TL_CONE_SCAN_PHANTOM, 0.0, TL_CONE_SCAN_PHANTOM) != 0)
        goto out;
    memcpy(s->angles, angles, nv * sizeof *angles);
    tl_cone_circular g = circular(s);
    tl_errbuf eb;
    if (tl_cone_circular_matrices(&g, P, &eb) != TL_OK) {
        fprintf(stderr, "cone scan: %s\n", eb.msg);
        goto free_phantom;
    }
    for (uint32_t i = 0; i < nv; i++) {
        if (tl_phantom_cone_project(&ph, P[i], rows, cols, line, &eb) != TL_OK) {
            fprintf(stderr, "cone scan: %s\n", eb.msg);
            goto free_phantom;
        }
        for (size_t k = 0; k < npix; k++)
            s->proj[i * npix + k] = (float)line[k];
    }
    rc = 0;
free_phantom:
    tl_phantom_free(&ph);
out:
    free(P);
    free(line);
    if (rc != 0)
        tl_cone_scan_free(s);
    return rc;
}

void tl_cone_scan_free(tl_cone_scan *s)
{
    free(s->angles);
    free(s->proj);
    s->angles = NULL;
    s->proj = NULL;
}

tl_engine_config tl_cone_scan_config(const tl_cone_scan *s, tl_backend_kind b)
{
    tl_engine_config c;
    tl_engine_config_init(&c, s->rows, s->cols, s->nv);
    c.backend = b;
    c.dtype = TL_DTYPE_F32;
    c.already_linear = true;
    c.threads = 2;
    c.geometry = TL_GEOMETRY_CONE;
    c.cone = (tl_cone_config){.source_origin = TL_CONE_SCAN_SAD,
                              .source_detector = TL_CONE_SCAN_SDD,
                              .pixel_u = s->pitch,
                              .pixel_v = s->pitch,
                              .offset_v = s->offset_v};
    c.center = s->center;
    return c;
}

tl_status tl_cone_scan_submit(const tl_cone_scan *s, tl_engine *e, uint64_t first, uint32_t count)
{
    size_t npix = (size_t)s->rows * s->cols;
    for (uint64_t i = first; i < first + count; i++) {
        tl_frame f = {.kind = TL_FRAME_PROJ,
                      .index = i,
                      .angle = s->angles[i % s->nv],
                      .dtype = TL_DTYPE_F32,
                      .rows = s->rows,
                      .cols = s->cols,
                      .data = s->proj + (i % s->nv) * npix};
        tl_status st = tl_engine_submit(e, &f);
        if (st != TL_OK)
            return st;
    }
    return TL_OK;
}

void tl_cone_scan_slice(const tl_cone_scan *s, uint32_t nx, uint32_t ny, uint32_t nz, uint32_t k,
                        tl_slice_spec *spec)
{
    /* the plane of height z_k = (k - (nz-1)/2) units projects, at the axis, to that many
     * rows from the principal row (square pixels: units are the same in z) */
    double row = 0.5 * (s->rows - 1.0) + s->offset_v + (k - 0.5 * (nz - 1.0));
    tl_slice_spec_row(spec, row, ny, nx);
}

tl_status tl_cone_scan_engine(const tl_cone_scan *s, const tl_engine_config *c, uint32_t nx,
                              uint32_t ny, uint32_t nz, float *vol)
{
    tl_engine *e;
    tl_status st = tl_engine_create(c, &e);
    if (st != TL_OK) {
        fprintf(stderr, "cone scan: %s\n", tl_engine_last_error(NULL));
        return st;
    }
    st = tl_cone_scan_submit(s, e, 0, s->nv);
    for (uint32_t k = 0; k < nz && st == TL_OK; k++) {
        tl_slice_spec spec;
        tl_cone_scan_slice(s, nx, ny, nz, k, &spec);
        int id;
        float *out = vol + (size_t)k * nx * ny;
        st = tl_engine_add_slice(e, &spec, &id);
        if (st == TL_OK)
            st = tl_engine_reconstruct(e, &id, 1, &out, NULL);
    }
    if (st != TL_OK)
        fprintf(stderr, "cone scan: %s\n", tl_engine_last_error(e));
    tl_engine_destroy(e);
    /* slice rows run from +y down; the reference's j from -y up */
    float *row = malloc(nx * sizeof *row);
    if (!row)
        return TL_ENOMEM;
    for (uint32_t k = 0; k < nz && st == TL_OK; k++)
        for (uint32_t i = 0; i < ny / 2; i++) {
            float *a = vol + ((size_t)k * ny + i) * nx,
                  *b = vol + ((size_t)k * ny + ny - 1 - i) * nx;
            memcpy(row, a, nx * sizeof *row);
            memcpy(a, b, nx * sizeof *row);
            memcpy(b, row, nx * sizeof *row);
        }
    free(row);
    return st;
}

tl_status tl_cone_scan_reference(const tl_cone_scan *s, uint32_t nx, uint32_t ny, uint32_t nz,
                                 double *vol)
{
    size_t npix = (size_t)s->rows * s->cols, nvox = (size_t)nx * ny * nz;
    double(*P)[12] = malloc(s->nv * sizeof *P);
    double *proj = malloc(s->nv * npix * sizeof *proj);
    tl_status st = TL_ENOMEM;
    tl_errbuf eb = {0};
    if (P && proj) {
        for (size_t k = 0; k < s->nv * npix; k++)
            proj[k] = s->proj[k];
        tl_cone_circular g = circular(s);
        tl_fdk_volume v = {nx, ny, nz, tl_cone_scan_unit(s)};
        st = tl_cone_circular_matrices(&g, P, &eb);
        if (st == TL_OK)
            st = tl_fdk_reference((const double(*)[12])P, s->nv, proj, s->rows, s->cols,
                                  TL_FILTER_RAMLAK, &v, vol, &eb);
    }
    if (st != TL_OK)
        fprintf(stderr, "cone scan reference: %s\n", eb.msg);
    for (size_t k = 0; st == TL_OK && k < nvox; k++) /* 1/mm to 1/unit */
        vol[k] *= tl_cone_scan_unit(s);
    free(P);
    free(proj);
    return st;
}

/* Views of scan s cut to detector rows [first, first + rows), into e. */
static tl_status submit_band(const tl_cone_scan *s, tl_engine *e, uint32_t first, uint32_t rows)
{
    size_t npix = (size_t)s->rows * s->cols;
    tl_status st = TL_OK;
    for (uint32_t i = 0; i < s->nv && st == TL_OK; i++) {
        tl_frame f = {.kind = TL_FRAME_PROJ,
                      .index = i,
                      .angle = s->angles[i],
                      .dtype = TL_DTYPE_F32,
                      .rows = rows,
                      .cols = s->cols,
                      .data = s->proj + i * npix + (size_t)first * s->cols};
        st = tl_engine_submit(e, &f);
    }
    return st;
}

/* Row slices of n x n at heights z0 + k (k < h) of e, in one call, into out. */
static tl_status slab_of(tl_engine *e, double z0, uint32_t h, uint32_t n, float *out)
{
    int *ids = malloc(h * sizeof *ids);
    float **outs = malloc(h * sizeof *outs);
    tl_status st = ids && outs ? TL_OK : TL_ENOMEM;
    uint32_t added = 0;
    while (st == TL_OK && added < h) {
        tl_slice_spec spec;
        tl_slice_spec_row(&spec, z0 + added, n, n);
        outs[added] = out + (size_t)added * n * n;
        if ((st = tl_engine_add_slice(e, &spec, &ids[added])) == TL_OK)
            added++;
    }
    if (st == TL_OK)
        st = tl_engine_reconstruct(e, ids, h, outs, NULL);
    for (uint32_t k = 0; k < added; k++)
        (void)tl_engine_remove_slice(e, ids[k]);
    free(ids);
    free(outs);
    return st;
}

tl_status tl_cone_scan_bands(const tl_cone_scan *s, const tl_engine_config *c, uint32_t n,
                             uint32_t nz, uint32_t slab, float *a, float *b, uint32_t *band_rows)
{
    tl_engine *whole = NULL, *band = NULL;
    uint32_t *first = malloc(nz * sizeof *first), *end = malloc(nz * sizeof *end);
    tl_status st = first && end ? tl_engine_create(c, &whole) : TL_ENOMEM;
    if (st == TL_OK)
        st = tl_cone_scan_submit(s, whole, 0, s->nv);
    tl_slice_spec spec;
    tl_cone_scan_slice(s, n, n, nz, 0, &spec); /* plane k is row spec.z + k */
    if (st == TL_OK)
        st = tl_engine_rows_read(c, s->nv, NULL, s->angles, n, spec.z, nz, first, end);
    *band_rows = 0;
    for (uint32_t k0 = 0; st == TL_OK && k0 < nz; k0 += slab) {
        uint32_t h = nz - k0 < slab ? nz - k0 : slab, lo = s->rows, hi = 0;
        for (uint32_t k = k0; k < k0 + h; k++) {
            lo = first[k] < lo ? first[k] : lo;
            hi = end[k] > hi ? end[k] : hi;
        }
        *band_rows = hi - lo > *band_rows ? hi - lo : *band_rows;
        tl_engine_config bc;
        st = tl_engine_config_band(c, lo, hi - lo, NULL, &bc);
        if (st == TL_OK)
            st = tl_engine_create(&bc, &band);
        if (st == TL_OK)
            st = submit_band(s, band, lo, hi - lo);
        size_t at = (size_t)k0 * n * n;
        if (st == TL_OK)
            st = slab_of(whole, spec.z + k0, h, n, a + at);
        if (st == TL_OK)
            st = slab_of(band, spec.z + k0 - lo, h, n, b + at);
        if (st != TL_OK)
            fprintf(stderr, "cone scan bands, slab at plane %u: %s\n", k0,
                    tl_engine_last_error(band ? band : whole));
        tl_engine_destroy(band);
        band = NULL;
    }
    if (st != TL_OK && !whole)
        fprintf(stderr, "cone scan bands: %s\n", tl_engine_last_error(NULL));
    tl_engine_destroy(whole);
    free(first);
    free(end);
    return st;
}
