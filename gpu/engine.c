/* engine.c — an engine's life: the configuration checks every backend shares, creation
 * (geometry, method and backend chosen, the memory need checked before anything large is
 * allocated), parameters and state. What happens to frames and slices lives in the files
 * engine_impl.h lists; the numbers are the backend's (gpu/base/backend.h), so every
 * backend behaves identically by construction. An engine on several devices gets the
 * split backend (gpu/split.c), which spreads detector rows over child backends behind the
 * same table: nothing here depends on it.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/base/link.h"
#include "gpu/base/sort.h"
#include "gpu/engine_impl.h"
#include "gpu/method/filter.h"
#include "gpu/method/paganin.h"
#include "gpu/base/rings.h"

static _Thread_local tl_errbuf create_error;

tl_errbuf *tl_engine_create_error(void)
{
    return &create_error;
}

const char *tl_engine_last_error(const tl_engine *e)
{
    return e ? e->err.msg : create_error.msg;
}

void tl_engine_config_init(tl_engine_config *c, uint32_t rows, uint32_t cols, uint32_t window)
{
    memset(c, 0, sizeof *c);
    c->backend = TL_BACKEND_AUTO;
    c->geometry = TL_GEOMETRY_PARALLEL;
    c->rows = rows;
    c->cols = cols;
    c->dtype = TL_DTYPE_U16;
    c->window = window;
    c->center = cols > 0 ? (cols - 1) / 2.0 : 0.0;
    c->filter = TL_FILTER_RAMLAK;
    c->weights = TL_WEIGHTS_UNIFORM;
    c->quality = TL_QUALITY_EXACT;
    c->precision = TL_PRECISION_F32;
}

/* Per-frame corrections (types.h, tl_corrections). They need whole frames (neighbouring
 * rows, a 2-D transform), which a split engine's parts do not have. */
static tl_status check_corrections(const tl_engine_config *c, tl_errbuf *eb)
{
    const tl_corrections *k = &c->corr;
    if ((unsigned)k->rings > TL_RINGS_FW)
        return tl_fail(eb, TL_EINVAL, "unknown ring removal method %d", (int)k->rings);
    if (k->ring_size &&
        (k->ring_size % 2 == 0 || k->ring_size < 3 || k->ring_size > TL_RINGS_MAX_SIZE))
        return tl_fail(eb, TL_EINVAL, "rings vo: median width %u must be odd, 3..%d", k->ring_size,
                       TL_RINGS_MAX_SIZE);
    if (k->ring_level > TL_RINGS_MAX_LEVEL)
        return tl_fail(eb, TL_EINVAL, "rings fw: %u wavelet levels, at most %d", k->ring_level,
                       TL_RINGS_MAX_LEVEL);
    if (!(k->ring_tolerance >= 0) || !isfinite(k->ring_tolerance))
        return tl_fail(eb, TL_EINVAL, "rings: tolerance must be >= 0, not %g", k->ring_tolerance);
    if (!(k->dezinger >= 0) || !isfinite(k->dezinger))
        return tl_fail(eb, TL_EINVAL, "dezinger threshold must be >= 0 (0: off), not %g",
                       k->dezinger);
    bool phase = tl_phase_on(k);
    if (phase) {
        tl_phase_filter f;
        tl_status st = tl_phase_shape(k, c->rows, c->cols, &f, eb);
        if (st != TL_OK)
            return st;
        if (c->already_linear)
            return tl_fail(eb, TL_EINVAL,
                           "paganin needs transmission images, not already linear input");
    }
    if ((phase || k->dezinger > 0 || k->rings) && c->ndevices >= 2 &&
        c->geometry != TL_GEOMETRY_CONE) /* cone beam splits no rows (backends.c) */
        return tl_fail(eb, TL_EUNSUPPORTED,
                       "per-frame corrections (dezinger, paganin, rings) need whole frames: "
                       "not on an engine split over %u devices",
                       c->ndevices);
    return TL_OK;
}

/* Ring removal's parameters left 0: their defaults (gpu/base/rings.h). */
static void ring_defaults(tl_corrections *k)
{
    if (!k->rings)
        return;
    if (!k->ring_size)
        k->ring_size = TL_RINGS_DEFAULT_SIZE;
    if (!k->ring_level)
        k->ring_level = TL_RINGS_DEFAULT_LEVEL;
    if (!k->ring_tolerance)
        k->ring_tolerance = TL_RINGS_DEFAULT_TOLERANCE;
}

/* The checks every geometry and backend share, then the geometry's own. */
tl_status tl_engine_check_config(const tl_engine_config *c, tl_errbuf *eb)
{
    if (!c)
        return tl_fail(eb, TL_EINVAL, "no configuration");
    const tl_geometry_ops *geometry;
    tl_status st = tl_geometry_find(c->geometry, eb, &geometry);
    if (st != TL_OK)
        return st;
    if (c->rows == 0 || c->cols == 0 || c->rows > 65536 || c->cols > 65536)
        return tl_fail(eb, TL_EINVAL, "detector shape %u x %u out of range 1..65536", c->rows,
                       c->cols);
    if (c->window == 0 || c->window > (1u << 20))
        return tl_fail(eb, TL_EINVAL, "window %u out of range 1..%u", c->window, 1u << 20);
    if (tl_dtype_size(c->dtype) == 0)
        return tl_fail(eb, TL_EINVAL, "unknown dtype %d", (int)c->dtype);
    if ((unsigned)c->filter >= TL_FILTER_COUNT)
        return tl_fail(eb, TL_EINVAL, "unknown filter %d", (int)c->filter);
    if (!isfinite(c->center))
        return tl_fail(eb, TL_EINVAL, "center is not finite");
    if (c->weights != TL_WEIGHTS_UNIFORM && c->weights != TL_WEIGHTS_ANGLES)
        return tl_fail(eb, TL_EINVAL, "unknown weighting %d", (int)c->weights);
    if (c->weight_angles && (c->weights != TL_WEIGHTS_ANGLES || c->nweight_angles == 0))
        return tl_fail(eb, TL_EINVAL,
                       "weight_angles: %u angles for %s weights (need ANGLES and at least one)",
                       c->nweight_angles, c->weights == TL_WEIGHTS_ANGLES ? "ANGLES" : "UNIFORM");
    for (uint32_t i = 0; c->weight_angles && i < c->nweight_angles; i++)
        if (!isfinite(c->weight_angles[i]))
            return tl_fail(eb, TL_EINVAL, "weight_angles[%u] is not finite", i);
    if ((unsigned)c->quality > TL_QUALITY_PREVIEW)
        return tl_fail(eb, TL_EINVAL, "unknown quality mode %d", (int)c->quality);
    if (c->precision != TL_PRECISION_F32 && c->precision != TL_PRECISION_F64)
        return tl_fail(eb, TL_EINVAL, "unknown precision %d", (int)c->precision);
    if (c->threads < 0)
        return tl_fail(eb, TL_EINVAL, "threads must be >= 0");
    if (c->ndevices > TL_ENGINE_MAX_DEVICES)
        return tl_fail(eb, TL_EINVAL, "%u devices: an engine spans at most %d", c->ndevices,
                       TL_ENGINE_MAX_DEVICES);
    if (c->link && (c->ndevices != (uint32_t)c->link->size || c->link->size < 2))
        return tl_fail(eb, TL_EINVAL, "a job of %d ranks needs as many parts, not %u",
                       c->link->size, c->ndevices);
    if (c->link && c->geometry == TL_GEOMETRY_CONE)
        return tl_fail(eb, TL_EUNSUPPORTED,
                       "cone beam over MPI ranks: a voxel reads every detector row, so the rows "
                       "cannot be split over hosts (reconstruct it on one rank)");
    if (c->ndevices >= 2 && c->ndevices > c->rows)
        return tl_fail(eb, TL_EINVAL,
                       "%u devices for %u detector rows: each device needs a row of its own",
                       c->ndevices, c->rows);
    if (c->keep_measurements && c->half_acquisition)
        return tl_fail(eb, TL_EINVAL,
                       "keep_measurements: iterative slices are without half acquisition (its "
                       "column weights are FBP's)");
    st = check_corrections(c, eb);
    if (st != TL_OK)
        return st;
    return geometry->check(c, eb);
}

tl_status tl_engine_estimate(const tl_engine_config *c, tl_memory_estimate *m)
{
    const tl_backend_ops *ops;
    const char *kind;
    tl_engine_config rc, dc = *c;
    tl_status st = tl_engine_check_config(c, &create_error);
    ring_defaults(&dc.corr);
    tl_halfacq *h = NULL; /* the virtual detector's needs */
    if (st == TL_OK)
        st = tl_halfacq_setup(&dc, &create_error, &h);
    tl_halfacq_free(h);
    if (st == TL_OK)
        st = tl_engine_pick_backend(&dc, &create_error, &rc, &ops, &kind);
    if (st == TL_OK)
        st = ops->estimate(&rc, tl_filter_padded_length(dc.cols), m, &create_error);
    return st;
}

/* ---- creation ----------------------------------------------------------------------------- */

static tl_status apply_filter(tl_engine *e, tl_filter f)
{
    const double *response;
    tl_status st = e->method->filter(f, e->padded, e->response, &response);
    if (st != TL_OK)
        return tl_fail(&e->err, st, "cannot design filter %s", tl_filter_name(f));
    return e->ops->set_filter(e->be, response);
}

/* The Paganin filter, designed here for every backend (gpu/method/paganin.h). */
static tl_status apply_phase(tl_engine *e)
{
    const tl_corrections *k = &e->cfg.corr;
    if (!tl_phase_on(k) && !(k->dezinger > 0) && !k->rings)
        return TL_OK;
    if (!e->ops->set_phase || !e->ops->corr_counts || !e->ops->ring_update)
        return tl_fail(&e->err, TL_EUNSUPPORTED, "the %s backend has no per-frame corrections",
                       e->backend);
    if (!tl_phase_on(k))
        return TL_OK;
    tl_phase_filter f;
    tl_status st = tl_phase_shape(k, e->cfg.rows, e->cfg.cols, &f, &e->err);
    if (st != TL_OK)
        return st;
    double *h = malloc((size_t)f.prow * (f.pcol / 2 + 1) * sizeof *h);
    if (!h)
        return tl_fail(&e->err, TL_ENOMEM, "out of memory for the %u x %u Paganin filter", f.prow,
                       f.pcol);
    tl_paganin_response(k, &f, h);
    f.response = h;
    st = e->ops->set_phase(e->be, &f);
    free(h);
    return st;
}

/* The geometry's per-pixel weights (FDK's cosine weights), computed here for every
 * backend. */
static tl_status apply_pixel_weights(tl_engine *e)
{
    if (!e->geometry->pixel_weights)
        return TL_OK;
    if (!e->ops->set_pixel_weights)
        return tl_fail(&e->err, TL_EUNSUPPORTED, "the %s backend has no %s-beam weights",
                       e->backend, e->geometry->name);
    double *w = malloc((size_t)e->cfg.rows * e->cfg.cols * sizeof *w);
    if (!w)
        return tl_fail(&e->err, TL_ENOMEM, "out of memory for %u x %u pixel weights",
                       e->cfg.rows, e->cfg.cols);
    e->geometry->pixel_weights(&e->cfg, w);
    tl_status st = e->ops->set_pixel_weights(e->be, w);
    free(w);
    return st;
}

/* The whole memory need is checked before anything large is allocated, so a scan that
 * does not fit is refused with both numbers instead of failing half-way. */
static tl_status check_memory(const tl_engine *e, const tl_engine_config *rc, tl_errbuf *eb)
{
    const tl_engine_config *c = &e->cfg;
    tl_memory_estimate m;
    tl_status st = e->ops->estimate(rc, e->padded, &m, eb);
    if (st != TL_OK || !m.available_bytes || m.total_bytes <= m.available_bytes)
        return st;
    return tl_fail(eb, TL_ENOMEM,
                   "scan needs %.2f GiB on the %s backend (window %u x %u rows x %u cols: "
                   "%.2f GiB, buffers %.2f GiB) but only %.2f GiB are free; reconstruct fewer "
                   "rows or shorten the window",
                   m.total_bytes / 1073741824.0, e->backend, c->window, c->rows, c->cols,
                   m.window_bytes / 1073741824.0, m.buffer_bytes / 1073741824.0,
                   m.available_bytes / 1073741824.0);
}

/* The window's bookkeeping and the scratch sized by it. */
static tl_status alloc_window(tl_engine *e, tl_errbuf *eb)
{
    size_t n = e->cfg.window;
    e->response = malloc((e->padded / 2 + 1) * sizeof *e->response);
    e->slot = calloc(n, sizeof *e->slot);
    e->job.proj = malloc(n * sizeof *e->job.proj);
    e->job.order = malloc(n * sizeof *e->job.order);
    if (!e->response || !e->slot || !e->job.proj || !e->job.order ||
        tl_window_init(&e->win, e->cfg.window, e->cfg.first_index) != 0)
        return tl_fail(eb, TL_ENOMEM, "out of memory for the window's bookkeeping (%zu slots)", n);
    return TL_OK;
}

tl_status tl_engine_create(const tl_engine_config *c, tl_engine **out)
{
    *out = NULL;
    tl_errbuf *eb = &create_error;
    tl_status st = tl_engine_check_config(c, eb);
    if (st != TL_OK)
        return st;
    tl_engine *e = calloc(1, sizeof *e);
    if (!e)
        return tl_fail(eb, TL_ENOMEM, "out of memory for the engine");
    e->cfg = *c;
    if (c->geometry == TL_GEOMETRY_CONE && c->cone.matrices) { /* the caller's may go */
        size_t bytes = (size_t)c->cone.nmatrices * sizeof *e->matrices;
        if (!(e->matrices = malloc(bytes))) {
            free(e);
            return tl_fail(eb, TL_ENOMEM, "out of memory for %u cone-beam matrices",
                           c->cone.nmatrices);
        }
        memcpy(e->matrices, c->cone.matrices, bytes);
        e->cfg.cone.matrices = (const double(*)[12])e->matrices;
    }
    if (c->weight_angles) { /* sorted once: weights.c looks each held angle up */
        if (!(e->weight_angles = malloc(c->nweight_angles * sizeof *e->weight_angles))) {
            free(e->matrices);
            free(e);
            return tl_fail(eb, TL_ENOMEM, "out of memory for %u angles", c->nweight_angles);
        }
        memcpy(e->weight_angles, c->weight_angles, c->nweight_angles * sizeof *e->weight_angles);
        tl_sort_doubles(e->weight_angles, c->nweight_angles);
        e->cfg.weight_angles = e->weight_angles;
    }
    ring_defaults(&e->cfg.corr);
    e->cfg.center_estimate |= e->cfg.center_auto;
    e->given = e->cfg;
    st = tl_halfacq_setup(&e->cfg, eb, &e->halfacq); /* from here on the virtual detector */
    if (st != TL_OK)
        goto fail;
    e->padded = tl_filter_padded_length(e->cfg.cols);
    (void)tl_geometry_find(c->geometry, NULL, &e->geometry); /* check_config found it */
    e->no_fbp = e->geometry->no_fbp ? e->geometry->no_fbp(&e->cfg) : NULL;
    e->method = tl_method_find(c);
    tl_engine_config rc; /* what the backend gets */
    st = tl_engine_pick_backend(&e->cfg, eb, &rc, &e->ops, &e->backend);
    if (st == TL_OK)
        st = check_memory(e, &rc, eb);
    if (st == TL_OK)
        st = alloc_window(e, eb);
    if (st != TL_OK)
        goto fail;
    st = e->ops->create(&rc, e->padded, &e->err, &e->be);
    if (st == TL_OK)
        st = apply_filter(e, c->filter);
    if (st == TL_OK)
        st = apply_phase(e);
    if (st == TL_OK)
        st = apply_pixel_weights(e);
    if (st == TL_OK)
        st = tl_center_init(e);
    if (st == TL_OK && e->halfacq)
        st = tl_halfacq_weights(e->halfacq, &e->cfg, e->ops, e->be, &e->err);
    if (st != TL_OK) {
        tl_fail(eb, st, "%s", e->err.msg);
        goto fail;
    }
    if (c->kernel[0] && !tl_engine_has_kernel(e, c->kernel)) {
        st = tl_fail(eb, TL_EINVAL, "the %s backend has no kernel \"%.32s\"", e->backend,
                     c->kernel);
        goto fail;
    }
    *out = e;
    return TL_OK;
fail:
    tl_engine_destroy(e);
    return st;
}

void tl_engine_destroy(tl_engine *e)
{
    if (!e)
        return;
    tl_center_free(e);
    tl_halfacq_free(e->halfacq);
    if (e->be)
        e->ops->destroy(e->be);
    tl_window_free(&e->win);
    free(e->matrices);
    free(e->weight_angles);
    free(e->response);
    free(e->slot);
    free(e->slices); /* the backend's destroy freed the accumulators */
    free(e->job.slices);
    free(e->job.kernel);
    free(e->job.proj);
    free(e->job.order);
    free(e->recon.rebuild.ids);
    free(e->recon.read.ids);
    free(e->recon.read.out);
    free(e->recon.fresh.ids);
    free(e->recon.fresh.out);
    free(e->recon.kernel_of);
    free(e->track.slices);
    free(e->track.ids);
    free(e);
}

/* ---- parameters and state ----------------------------------------------------------------- */

tl_status tl_engine_set_center(tl_engine *e, double center)
{
    double cv = center; /* on the engine's detector: the virtual one with half acquisition */
    if (e->cfg.cone.matrices)
        return tl_fail(&e->err, TL_EINVAL,
                       "the centre does not move given cone-beam matrices (shift a frame's "
                       "columns with its centre offset instead)");
    if (e->halfacq) {
        tl_status st = tl_halfacq_center(e->halfacq, center, &cv, &e->err);
        if (st != TL_OK)
            return st;
    } else if (!isfinite(center) || center < -0.5 || center > e->cfg.cols - 0.5)
        return tl_fail(&e->err, TL_EINVAL, "center %g is not a column of the detector (0..%u)",
                       center, e->cfg.cols - 1);
    double was = e->cfg.center;
    e->cfg.center = cv;
    if (e->halfacq) { /* the overlap's weights follow the axis */
        tl_status st = tl_halfacq_weights(e->halfacq, &e->cfg, e->ops, e->be, &e->err);
        if (st != TL_OK) {
            e->cfg.center = was;
            return st;
        }
    }
    e->given.center = center;
    tl_track_invalidate(e); /* every projection moved */
    return TL_OK;
}

tl_status tl_engine_set_filter(tl_engine *e, tl_filter f)
{
    if ((unsigned)f >= TL_FILTER_COUNT)
        return tl_fail(&e->err, TL_EINVAL, "unknown filter %d", (int)f);
    tl_status st = apply_filter(e, f);
    if (st == TL_OK)
        e->cfg.filter = e->given.filter = f;
    return st;
}

tl_status tl_engine_reset(tl_engine *e)
{
    tl_window_clear(&e->win);
    tl_track_invalidate(e);
    for (int k = 0; k < 2; k++) {
        tl_status st = e->ops->calib_reset(e->be, k == 0 ? TL_FRAME_DARK : TL_FRAME_FLAT);
        if (st != TL_OK)
            return st;
        e->batch[k] = 0;
        e->proj_since[k] = false;
    }
    return TL_OK;
}

void tl_engine_get_state(const tl_engine *e, tl_engine_state *st)
{
    memset(st, 0, sizeof *st);
    st->backend = e->backend;
    st->device_name = e->ops->device_name(e->be);
    st->window = e->win.n;
    st->held = e->win.nheld;
    st->missing = tl_window_missing(&e->win);
    st->empty = e->win.empty;
    st->window_first = e->win.empty ? 0 : tl_window_first(&e->win);
    st->window_last = e->win.last;
    st->dark_batch = e->batch[0];
    st->flat_batch = e->batch[1];
    memcpy(st->accepted, e->accepted, sizeof st->accepted);
    st->stale = e->stale;
    st->duplicate = e->duplicate;
    st->shape = e->shape;
    st->memory_bytes = e->ops->memory_used(e->be);
    st->center = e->given.center;
    st->filter = e->cfg.filter;
    st->slices = e->live_slices;
}

size_t tl_engine_missing(const tl_engine *e, uint64_t *out, size_t cap)
{
    return tl_window_missing_list(&e->win, out, cap);
}

const tl_engine_config *tl_engine_get_config(const tl_engine *e)
{
    return &e->given;
}

tl_status tl_engine_corrections(tl_engine *e, tl_engine_corr_state *out)
{
    memset(out, 0, sizeof *out);
    out->corr = e->cfg.corr;
    out->ring_updates = e->ring_updates;
    out->ring_rebuilds = e->ring_rebuilds;
    if (!e->ops->corr_counts || !(e->cfg.corr.dezinger > 0))
        return TL_OK;
    return e->ops->corr_counts(e->be, &out->dezinger_replaced);
}

tl_status tl_engine_stage_times(tl_engine *e, tl_stage_time *out, size_t cap, size_t *n)
{
    *n = 0;
    return e->ops->stage_times ? e->ops->stage_times(e->be, out, cap, n) : TL_OK;
}
