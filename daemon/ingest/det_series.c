/* det_series.c — see det_series.h. */
#include <config.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/ingest/det_series.h"
#include "daemon/base/log.h"

void tl_det_start_init(tl_det_start *st)
{
    memset(st, 0, sizeof *st);
    st->darks = st->flats = st->window = st->nimages = st->size_x = st->size_y = -1;
    st->g_start = st->g_step = NAN;
}

void tl_det_image_init(tl_det_image *im)
{
    memset(im, 0, sizeof *im);
    im->angle_deg = NAN;
    im->index = -1;
}

/* Entry i (cycled) of ingest.series_kinds. */
static tl_proto_kind configured_kind(const tl_settings *c, uint64_t i)
{
    int n = 1;
    for (const char *p = c->ingest_series_kinds; *p; p++)
        n += *p == ',';
    uint64_t want = i % (uint64_t)n;
    const char *w = c->ingest_series_kinds;
    for (uint64_t k = 0; k < want; k++)
        w = strchr(w, ',') + 1;
    size_t len = strcspn(w, ",");
    tl_proto_kind kind = TL_PROTO_PROJ;
    tl_adapter_kind(w, len, &kind); /* the configuration was checked */
    return kind;
}

int tl_det_series_start(tl_det_series *ds, const tl_settings *c, const tl_det_start *st,
                        tl_proto_error *err)
{
    tl_proto_kind kind;
    if (st->kind) {
        if (!tl_adapter_kind(st->kind, st->kind_len, &kind)) {
            tl_proto_fail(err, TL_PROTO_E_KIND,
                          "series %llu: user_data kind \"%.*s\" is not "
                          "dark, flat or proj",
                          (unsigned long long)st->id, (int)(st->kind_len < 32 ? st->kind_len : 32),
                          st->kind);
            return -1;
        }
    } else {
        kind = configured_kind(c, ds->started);
    }
    uint64_t started = ds->started + 1;
    memset(ds, 0, sizeof *ds);
    ds->started = started;
    ds->active = true;
    ds->id = st->id;
    ds->kind = kind;
    if (kind == TL_PROTO_PROJ) {
        ds->darks = (uint32_t)(st->darks >= 0 ? st->darks : c->ingest_darks);
        ds->flats = (uint32_t)(st->flats >= 0 ? st->flats : c->ingest_flats);
    }
    int64_t prefix = (int64_t)ds->darks + ds->flats;
    if (st->window > 0)
        ds->window = (uint64_t)st->window;
    else if (c->ingest_window > 0)
        ds->window = (uint64_t)c->ingest_window;
    else if (st->nimages > prefix)
        ds->window = (uint64_t)(st->nimages - prefix);
    if (ds->window > TL_PROTO_MAX_WINDOW)
        ds->window = TL_PROTO_MAX_WINDOW;
    ds->has_gonio = isfinite(st->g_start) && isfinite(st->g_step) && st->g_step != 0;
    ds->g_start = ds->has_gonio ? st->g_start : 0;
    ds->g_step = ds->has_gonio ? st->g_step : 0;
    ds->size_x = st->size_x > 0 ? (uint32_t)st->size_x : 0;
    ds->size_y = st->size_y > 0 ? (uint32_t)st->size_y : 0;
    tl_log(TL_LOG_INFO, "series_started",
           "series=%llu kind=%s darks=%u flats=%u window=%llu "
           "goniometer=%d",
           (unsigned long long)ds->id, tl_proto_kind_name(kind), ds->darks, ds->flats,
           (unsigned long long)ds->window, ds->has_gonio);
    return 0;
}

int tl_det_series_image(tl_det_series *ds, tl_adapter_stream *s, const tl_det_image *im,
                        zmq_msg_t *payload, tl_item *out, tl_proto_error *err)
{
    const tl_settings *c = s->cfg;
    if (!ds->active || ds->id != im->series) {
        if (ds->active)
            tl_proto_fail(err, TL_PROTO_E_STATE,
                          "image %llu of series %llu while series %llu "
                          "runs",
                          (unsigned long long)im->image_id, (unsigned long long)im->series,
                          (unsigned long long)ds->id);
        else
            tl_proto_fail(err, TL_PROTO_E_STATE,
                          "image %llu of series %llu, which has no "
                          "start message or has ended",
                          (unsigned long long)im->image_id, (unsigned long long)im->series);
        return -1;
    }
    if ((ds->size_x && ds->size_x != im->cols) || (ds->size_y && ds->size_y != im->rows)) {
        tl_proto_fail(err, TL_PROTO_E_RANGE,
                      "image of %u x %u (rows x cols) in a series "
                      "declared %u x %u",
                      im->rows, im->cols, ds->size_y, ds->size_x);
        return -1;
    }
    tl_proto_kind kind;
    uint64_t index;
    if (im->kind) {
        if (!tl_adapter_kind(im->kind, im->kind_len, &kind)) {
            tl_proto_fail(err, TL_PROTO_E_KIND,
                          "user_data kind \"%.*s\" is not dark, flat or "
                          "proj",
                          (int)(im->kind_len < 32 ? im->kind_len : 32), im->kind);
            return -1;
        }
        uint64_t prefix = (uint64_t)ds->darks + ds->flats;
        index =
            kind == TL_PROTO_PROJ && im->image_id >= prefix ? im->image_id - prefix : im->image_id;
    } else if (ds->kind == TL_PROTO_PROJ) {
        tl_adapter_classify(im->image_id, ds->darks, ds->flats, &kind, &index);
    } else {
        kind = ds->kind;
        index = im->image_id;
    }
    if (im->index >= 0)
        index = (uint64_t)im->index;

    tl_proto_scan scan, *open_first = NULL;
    if (!ds->joined) {
        bool fits = tl_adapter_stream_fits(s, im->rows, im->cols, im->dtype), join;
        uint64_t window;
        if (ds->kind == TL_PROTO_PROJ) {
            window = ds->window;
            if (window == 0) {
                tl_proto_fail(err, TL_PROTO_E_MISSING,
                              "series %llu has no projection count "
                              "(number_of_images, user_data window or ingest.window)",
                              (unsigned long long)ds->id);
                return -1;
            }
            join = fits && !s->scan_has_proj && s->scan.window == window;
            if (fits && !s->scan_has_proj && !join)
                tl_log(TL_LOG_WARN, "calibration_dropped",
                       "series=%llu reason=window "
                       "scan_window=%u series_window=%llu hint=set_ingest.window",
                       (unsigned long long)ds->id, s->scan.window, (unsigned long long)window);
        } else {
            join = fits;
            window = c->ingest_window ? (uint64_t)c->ingest_window
                     : s->open        ? s->scan.window
                     : ds->window     ? ds->window
                                      : 1;
        }
        if (!join) {
            tl_adapter_scan_init(c, &scan, ds->id, im->rows, im->cols, im->dtype,
                                 (uint32_t)window);
            scan.darks = ds->darks;
            scan.flats = ds->flats;
            open_first = &scan;
        }
        ds->joined = true;
        ds->scan_series = join ? s->scan.series : ds->id;
    } else if (!s->open || s->scan.series != ds->scan_series) {
        tl_proto_fail(err, TL_PROTO_E_STATE,
                      "image %llu of series %llu, whose scan has been "
                      "closed",
                      (unsigned long long)im->image_id, (unsigned long long)im->series);
        return -1;
    } else if (!tl_adapter_stream_fits(s, im->rows, im->cols, im->dtype)) {
        tl_proto_fail(err, TL_PROTO_E_RANGE,
                      "image %llu of %u x %u %s in a scan of %u x %u %s (rows x cols)",
                      (unsigned long long)im->image_id, im->rows, im->cols,
                      tl_proto_dtype_name(im->dtype), s->scan.rows, s->scan.cols,
                      tl_proto_dtype_name(s->scan.dtype));
        return -1;
    }
    tl_proto_frame f = {
        .series = ds->scan_series,
        .index = index,
        .kind = kind,
        .dtype = im->dtype,
        .rows = im->rows,
        .cols = im->cols,
        .has_t_acq = im->has_t_acq,
        .t_acq = im->t_acq,
    };
    if (kind == TL_PROTO_PROJ) {
        if (isfinite(im->angle_deg)) {
            f.has_angle = true;
            f.angle = im->angle_deg * M_PI / 180;
        } else if (ds->has_gonio) {
            f.has_angle = true; /* the goniometer moves per image, calibration ones included */
            f.angle = (ds->g_start + (double)im->image_id * ds->g_step) * M_PI / 180;
        }
        /* a finite start and increment can still overflow at a later image */
        if (f.has_angle && !isfinite(f.angle)) {
            tl_proto_fail(err, TL_PROTO_E_NOT_FINITE,
                          "image %llu: its angle (goniometer start %g + image %llu x "
                          "increment %g degrees) is not finite",
                          (unsigned long long)im->image_id, ds->g_start,
                          (unsigned long long)im->image_id, ds->g_step);
            return -1;
        }
    }
    int rc = tl_adapter_stream_emit(s, open_first, &f, payload, out);
    if (ds->kind == TL_PROTO_PROJ)
        s->scan_has_proj = true;
    return rc;
}

int tl_det_series_end(tl_det_series *ds, tl_adapter_stream *s, uint64_t id, tl_item *out,
                      tl_proto_error *err)
{
    if (!ds->active || ds->id != id) {
        tl_proto_fail(err, TL_PROTO_E_STATE, "end of series %llu, which is not running",
                      (unsigned long long)id);
        return -1;
    }
    ds->active = false;
    tl_log(TL_LOG_INFO, "series_ended", "series=%llu kind=%s", (unsigned long long)id,
           tl_proto_kind_name(ds->kind));
    if (ds->kind == TL_PROTO_PROJ && ds->joined && s->open && s->scan.series == ds->scan_series)
        return tl_adapter_stream_end(s, out);
    return 0;
}
