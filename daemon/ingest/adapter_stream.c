/* adapter_stream.c — see adapter_stream.h. */
#include <config.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/ingest/adapter_stream.h"
#include "daemon/base/log.h"

void *tl_adapter_alloc(size_t size, size_t offset, const tl_settings *c, char *err, size_t errlen)
{
    char *a = calloc(1, size);
    if (!a) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (tl_adapter_stream_init((tl_adapter_stream *)(a + offset), c, err, errlen) != 0) {
        free(a);
        return NULL;
    }
    return a;
}

int tl_adapter_stream_init(tl_adapter_stream *s, const tl_settings *c, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->cfg = c;
    s->next_series = 1;
    zmq_msg_init(&s->pend.payload);
    s->pool = tl_framepool_new();
    if (!s->pool) {
        snprintf(err, errlen, "out of memory for the frame pool");
        return -1;
    }
    return 0;
}

void tl_adapter_stream_destroy(tl_adapter_stream *s)
{
    zmq_msg_close(&s->pend.payload);
    tl_framepool_drop(s->pool);
    s->pool = NULL;
}

void tl_adapter_scan_init(const tl_settings *c, tl_proto_scan *scan, uint64_t series,
                          uint32_t rows, uint32_t cols, tl_proto_dtype dtype, uint32_t window)
{
    memset(scan, 0, sizeof *scan);
    scan->series = series;
    scan->geometry = TL_PROTO_PARALLEL;
    scan->rows = rows;
    scan->cols = cols;
    scan->dtype = dtype;
    scan->window = window ? window : (uint32_t)c->ingest_window;
    if (scan->window == 0)
        scan->window = 1;
    scan->darks = (uint32_t)c->ingest_darks;
    scan->flats = (uint32_t)c->ingest_flats;
    scan->has_angles = true;
    scan->angle_start = c->ingest_angle_start * M_PI / 180;
    scan->angle_step =
        c->ingest_angle_step != 0 ? c->ingest_angle_step * M_PI / 180 : M_PI / scan->window;
}

bool tl_adapter_stream_fits(const tl_adapter_stream *s, uint32_t rows, uint32_t cols,
                            tl_proto_dtype dtype)
{
    return s->open && s->scan.rows == rows && s->scan.cols == cols && s->scan.dtype == dtype;
}

int tl_adapter_stream_emit(tl_adapter_stream *s, const tl_proto_scan *open_first,
                           const tl_proto_frame *f, zmq_msg_t *payload, tl_item *out)
{
    if (open_first) {
        out->type = TL_MSG_SCAN;
        out->scan = *open_first;
        out->filter[0] = 0;
        out->detector = s->detector;
        s->open = true;
        s->scan = *open_first;
        s->scan_has_proj = false;
        s->pend.type = TL_MSG_FRAME;
        s->pend.frame = *f;
        s->pend.masked_filled = s->masked_filled;
        zmq_msg_move(&s->pend.payload, payload);
        s->pending = true;
        tl_log(TL_LOG_INFO, "scan_synthesised", "series=%llu rows=%u cols=%u dtype=%s window=%u",
               (unsigned long long)open_first->series, open_first->rows, open_first->cols,
               tl_proto_dtype_name(open_first->dtype), open_first->window);
    } else {
        out->type = TL_MSG_FRAME;
        out->frame = *f;
        out->masked_filled = s->masked_filled;
        zmq_msg_move(&out->payload, payload);
    }
    if (f->kind == TL_PROTO_PROJ)
        s->scan_has_proj = true;
    return 1;
}

int tl_adapter_stream_end(tl_adapter_stream *s, tl_item *out)
{
    if (!s->open)
        return 0;
    out->type = TL_MSG_END;
    out->end.series = s->scan.series;
    s->open = false; /* the next frame opens a new scan */
    return 1;
}

int tl_adapter_stream_next(tl_adapter_stream *s, tl_item *out)
{
    if (!s->pending)
        return 0;
    s->pending = false;
    out->type = TL_MSG_FRAME;
    out->frame = s->pend.frame;
    out->masked_filled = s->pend.masked_filled;
    zmq_msg_move(&out->payload, &s->pend.payload);
    return 1;
}

void tl_adapter_classify(uint64_t k, uint32_t darks, uint32_t flats, tl_proto_kind *kind,
                         uint64_t *index)
{
    if (k < darks) {
        *kind = TL_PROTO_DARK;
        *index = k;
    } else if (k - darks < flats) {
        *kind = TL_PROTO_FLAT;
        *index = k - darks;
    } else {
        *kind = TL_PROTO_PROJ;
        *index = k - darks - flats;
    }
}

bool tl_adapter_dtype(const char *name, tl_proto_dtype *t)
{
    static const struct {
        const char *name;
        tl_proto_dtype t;
    } names[] = {
        {"uint8", TL_PROTO_U8}, {"u8", TL_PROTO_U8},       {"<u1", TL_PROTO_U8},
        {"|u1", TL_PROTO_U8},   {"uint16", TL_PROTO_U16},  {"u16", TL_PROTO_U16},
        {"<u2", TL_PROTO_U16},  {"uint32", TL_PROTO_U32},  {"u32", TL_PROTO_U32},
        {"<u4", TL_PROTO_U32},  {"float32", TL_PROTO_F32}, {"f32", TL_PROTO_F32},
        {"<f4", TL_PROTO_F32},  {"float", TL_PROTO_F32},
    };
    for (size_t i = 0; name && i < sizeof names / sizeof *names; i++)
        if (strcmp(name, names[i].name) == 0) {
            *t = names[i].t;
            return true;
        }
    return false;
}

bool tl_adapter_kind(const char *name, size_t len, tl_proto_kind *k)
{
    if (len == 10 && strncmp(name, "projection", 10) == 0) {
        *k = TL_PROTO_PROJ;
        return true;
    }
    return tl_proto_kind_parse(name, len, k);
}
