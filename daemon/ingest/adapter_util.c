/* adapter_util.c — see adapter_util.h. */
#include <config.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/ingest/adapter_util.h"
#include "daemon/base/log.h"

/* ---- frame buffers ------------------------------------------------------------------- */

#define POOL_KEEP 64 /* free buffers kept for reuse: the queue rarely holds more frames */

typedef struct entry {
    tl_framepool *pool;
    struct entry *next;
    void *buf;
    size_t cap;
    zmq_msg_t keep;             /* a wrapped message, while wrapped */
    bool wrapped;
} entry;

struct tl_framepool {
    pthread_mutex_t mu;
    entry *free;
    size_t nfree, live;
    bool dropped;
};

tl_framepool *tl_framepool_new(void)
{
    tl_framepool *p = calloc(1, sizeof *p);
    if (p)
        pthread_mutex_init(&p->mu, NULL);
    return p;
}

static void destroy_entry(entry *e)
{
    free(e->buf);
    free(e);
}

static void destroy_pool(tl_framepool *p)
{
    while (p->free) {
        entry *e = p->free;
        p->free = e->next;
        destroy_entry(e);
    }
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* ZeroMQ's free function: runs on whichever thread closes the payload (the worker). */
static void give_back(void *data, void *hint)
{
    (void)data;
    entry *e = hint;
    tl_framepool *p = e->pool;
    if (e->wrapped) {
        zmq_msg_close(&e->keep);
        e->wrapped = false;
    }
    pthread_mutex_lock(&p->mu);
    p->live--;
    bool keep = !p->dropped && p->nfree < POOL_KEEP;
    if (keep) {
        e->next = p->free;
        p->free = e;
        p->nfree++;
    }
    bool last = p->dropped && p->live == 0;
    pthread_mutex_unlock(&p->mu);
    if (!keep)
        destroy_entry(e);
    if (last)
        destroy_pool(p);
}

void tl_framepool_drop(tl_framepool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->dropped = true;
    bool last = p->live == 0;
    pthread_mutex_unlock(&p->mu);
    if (last)
        destroy_pool(p);
}

size_t tl_framepool_live(tl_framepool *p)
{
    pthread_mutex_lock(&p->mu);
    size_t n = p->live;
    pthread_mutex_unlock(&p->mu);
    return n;
}

/* An entry, preferably one whose buffer holds n bytes already. */
static entry *take(tl_framepool *p, size_t n)
{
    pthread_mutex_lock(&p->mu);
    entry **pp = &p->free, *e = NULL;
    for (; *pp; pp = &(*pp)->next)
        if ((*pp)->cap >= n)
            break;
    if (!*pp)
        pp = &p->free;
    if (*pp) {
        e = *pp;
        *pp = e->next;
        p->nfree--;
    }
    p->live++;
    pthread_mutex_unlock(&p->mu);
    if (!e && (e = calloc(1, sizeof *e)) != NULL)
        e->pool = p;
    if (!e) {
        pthread_mutex_lock(&p->mu);
        p->live--;
        pthread_mutex_unlock(&p->mu);
    }
    return e;
}

void *tl_framepool_payload(tl_framepool *p, size_t n, zmq_msg_t *payload)
{
    entry *e = take(p, n);
    if (!e)
        return NULL;
    if (e->cap < n) { /* grows only while the frame size is new */
        free(e->buf);
        e->cap = 0;
        e->buf = malloc(n ? n : 1);
        if (e->buf)
            e->cap = n;
    }
    zmq_msg_close(payload);
    if (!e->buf || zmq_msg_init_data(payload, e->buf, n, give_back, e) != 0) {
        zmq_msg_init(payload);
        give_back(NULL, e);
        return NULL;
    }
    return e->buf;
}

int tl_framepool_wrap(tl_framepool *p, zmq_msg_t *msg, const void *data, size_t n,
                      zmq_msg_t *payload)
{
    entry *e = take(p, 0);
    if (!e)
        return -1;
    size_t off = (size_t)((const char *)data - (const char *)zmq_msg_data(msg));
    zmq_msg_init(&e->keep);
    zmq_msg_move(&e->keep, msg);
    e->wrapped = true;
    /* a very small message lives inside the zmq_msg_t itself, and moved with it */
    void *moved = (char *)zmq_msg_data(&e->keep) + off;
    zmq_msg_close(payload);
    if (zmq_msg_init_data(payload, moved, n, give_back, e) != 0) {
        zmq_msg_init(payload);
        zmq_msg_move(msg, &e->keep); /* untouched for the caller */
        e->wrapped = false;
        give_back(NULL, e);
        return -1;
    }
    return 0;
}

/* ---- JSON ---------------------------------------------------------------------------- */

#define ARENA_BYTES (1u << 20)

static _Thread_local struct {
    char *base;
    size_t used;
    int depth;                  /* parses not yet done: the arena resets when none is left */
} arena;

static void *arena_alloc(size_t n)
{
    size_t need = (n + 15) & ~(size_t)15;
    if (arena.base && need <= ARENA_BYTES - arena.used) {
        void *p = arena.base + arena.used;
        arena.used += need;
        return p;
    }
    return malloc(n); /* a header larger than the arena: correct, just not free of malloc */
}

static void arena_free(void *p)
{
    if (arena.base && (char *)p >= arena.base && (char *)p < arena.base + ARENA_BYTES)
        return; /* reset wholesale by tl_json_done */
    free(p);
}

static pthread_once_t arena_once = PTHREAD_ONCE_INIT;

static void arena_install(void)
{
    /* process-wide, but only this thread's arena is ever active: other threads' jansson
     * calls fall through to malloc and free */
    json_set_alloc_funcs(arena_alloc, arena_free);
}

json_t *tl_json_parse(const void *data, size_t len, const char *what, tl_proto_error *err)
{
    pthread_once(&arena_once, arena_install);
    if (!arena.base)
        arena.base = malloc(ARENA_BYTES);
    json_error_t je;
    json_t *j = json_loadb(data, len, JSON_REJECT_DUPLICATES, &je);
    if (j)
        arena.depth++;
    else if (arena.depth == 0)
        arena.used = 0; /* what the failed parse took */
    if (!j) {
        tl_proto_fail(err, TL_PROTO_E_MALFORMED, "%s is not JSON: %s (column %d)", what, je.text,
                      je.column);
        return NULL;
    }
    if (!json_is_object(j)) {
        tl_json_done(j);
        tl_proto_fail(err, TL_PROTO_E_NOT_MAP, "%s is not a JSON object", what);
        return NULL;
    }
    return j;
}

void tl_json_done(json_t *j)
{
    json_decref(j);
    if (j && --arena.depth <= 0) {
        arena.depth = 0;
        arena.used = 0;
    }
}

void tl_json_arena_free(void)
{
    free(arena.base);
    arena.base = NULL;
    arena.used = 0;
}

static json_t *lookup(json_t *o, const char *path)
{
    char key[64];
    while (o && *path) {
        const char *dot = strchr(path, '.');
        size_t n = dot ? (size_t)(dot - path) : strlen(path);
        if (n >= sizeof key)
            return NULL;
        memcpy(key, path, n);
        key[n] = 0;
        o = json_is_object(o) ? json_object_get(o, key) : NULL;
        path += n + (dot ? 1 : 0);
    }
    return o;
}

int tl_json_get_u64(json_t *o, const char *path, uint64_t *out, tl_proto_error *err)
{
    json_t *v = lookup(o, path);
    if (!v)
        return 0;
    if (!json_is_integer(v)) {
        tl_proto_fail(err, TL_PROTO_E_KEY_TYPE, "\"%s\" must be an integer", path);
        return -1;
    }
    if (json_integer_value(v) < 0) {
        tl_proto_fail(err, TL_PROTO_E_RANGE, "\"%s\" is negative", path);
        return -1;
    }
    *out = (uint64_t)json_integer_value(v);
    return 1;
}

int tl_json_get_num(json_t *o, const char *path, double *out, tl_proto_error *err)
{
    json_t *v = lookup(o, path);
    if (!v)
        return 0;
    if (!json_is_number(v)) {
        tl_proto_fail(err, TL_PROTO_E_KEY_TYPE, "\"%s\" must be a number", path);
        return -1;
    }
    *out = json_number_value(v);
    if (!isfinite(*out)) {
        tl_proto_fail(err, TL_PROTO_E_NOT_FINITE, "\"%s\" is not finite", path);
        return -1;
    }
    return 1;
}

int tl_json_get_str(json_t *o, const char *path, const char **out, tl_proto_error *err)
{
    json_t *v = lookup(o, path);
    if (!v)
        return 0;
    if (!json_is_string(v)) {
        tl_proto_fail(err, TL_PROTO_E_KEY_TYPE, "\"%s\" must be a string", path);
        return -1;
    }
    *out = json_string_value(v);
    return 1;
}

int tl_json_get_bool(json_t *o, const char *path, bool *out, tl_proto_error *err)
{
    json_t *v = lookup(o, path);
    if (!v)
        return 0;
    if (!json_is_boolean(v)) {
        tl_proto_fail(err, TL_PROTO_E_KEY_TYPE, "\"%s\" must be true or false", path);
        return -1;
    }
    *out = json_is_true(v);
    return 1;
}

int tl_json_get_shape(json_t *o, const char *path, uint32_t out[2], tl_proto_error *err)
{
    json_t *v = lookup(o, path);
    if (!v)
        return 0;
    if (!json_is_array(v) || json_array_size(v) != 2) {
        tl_proto_fail(err, TL_PROTO_E_KEY_TYPE, "\"%s\" must be an array of 2 integers", path);
        return -1;
    }
    for (int i = 0; i < 2; i++) {
        json_t *d = json_array_get(v, (size_t)i);
        if (!json_is_integer(d)) {
            tl_proto_fail(err, TL_PROTO_E_KEY_TYPE, "\"%s\"[%d] must be an integer", path, i);
            return -1;
        }
        json_int_t x = json_integer_value(d);
        if (x < 1 || x > (json_int_t)TL_PROTO_MAX_DIM) {
            tl_proto_fail(err, TL_PROTO_E_RANGE, "\"%s\"[%d] = %lld is out of range 1..%u", path,
                          i, (long long)x, TL_PROTO_MAX_DIM);
            return -1;
        }
        out[i] = (uint32_t)x;
    }
    return 1;
}

bool tl_adapter_dtype(const char *name, tl_proto_dtype *t)
{
    static const struct {
        const char *name;
        tl_proto_dtype t;
    } names[] = {
        {"uint8", TL_PROTO_U8},    {"u8", TL_PROTO_U8},     {"<u1", TL_PROTO_U8},
        {"|u1", TL_PROTO_U8},      {"uint16", TL_PROTO_U16}, {"u16", TL_PROTO_U16},
        {"<u2", TL_PROTO_U16},     {"uint32", TL_PROTO_U32}, {"u32", TL_PROTO_U32},
        {"<u4", TL_PROTO_U32},     {"float32", TL_PROTO_F32}, {"f32", TL_PROTO_F32},
        {"<f4", TL_PROTO_F32},     {"float", TL_PROTO_F32},
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

/* ---- the stream ---------------------------------------------------------------------- */

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
    scan->angle_step = c->ingest_angle_step != 0 ? c->ingest_angle_step * M_PI / 180
                                                 : M_PI / scan->window;
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
        s->open = true;
        s->scan = *open_first;
        s->scan_has_proj = false;
        s->pend.type = TL_MSG_FRAME;
        s->pend.frame = *f;
        zmq_msg_move(&s->pend.payload, payload);
        s->pending = true;
        tl_log(TL_LOG_INFO, "scan_synthesised", "series=%llu rows=%u cols=%u dtype=%s window=%u",
               (unsigned long long)open_first->series, open_first->rows, open_first->cols,
               tl_proto_dtype_name(open_first->dtype), open_first->window);
    } else {
        out->type = TL_MSG_FRAME;
        out->frame = *f;
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

/* ---- detector series ------------------------------------------------------------------- */

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
            tl_proto_fail(err, TL_PROTO_E_KIND, "series %llu: user_data kind \"%.*s\" is not "
                          "dark, flat or proj", (unsigned long long)st->id,
                          (int)(st->kind_len < 32 ? st->kind_len : 32), st->kind);
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
    tl_log(TL_LOG_INFO, "series_started", "series=%llu kind=%s darks=%u flats=%u window=%llu "
           "goniometer=%d", (unsigned long long)ds->id, tl_proto_kind_name(kind), ds->darks,
           ds->flats, (unsigned long long)ds->window, ds->has_gonio);
    return 0;
}

int tl_det_series_image(tl_det_series *ds, tl_adapter_stream *s, const tl_det_image *im,
                        zmq_msg_t *payload, tl_item *out, tl_proto_error *err)
{
    const tl_settings *c = s->cfg;
    if (!ds->active || ds->id != im->series) {
        if (ds->active)
            tl_proto_fail(err, TL_PROTO_E_STATE, "image %llu of series %llu while series %llu "
                          "runs", (unsigned long long)im->image_id,
                          (unsigned long long)im->series, (unsigned long long)ds->id);
        else
            tl_proto_fail(err, TL_PROTO_E_STATE, "image %llu of series %llu, which has no "
                          "start message or has ended", (unsigned long long)im->image_id,
                          (unsigned long long)im->series);
        return -1;
    }
    if ((ds->size_x && ds->size_x != im->cols) || (ds->size_y && ds->size_y != im->rows)) {
        tl_proto_fail(err, TL_PROTO_E_RANGE, "image of %u x %u (rows x cols) in a series "
                      "declared %u x %u", im->rows, im->cols, ds->size_y, ds->size_x);
        return -1;
    }
    tl_proto_kind kind;
    uint64_t index;
    if (im->kind) {
        if (!tl_adapter_kind(im->kind, im->kind_len, &kind)) {
            tl_proto_fail(err, TL_PROTO_E_KIND, "user_data kind \"%.*s\" is not dark, flat or "
                          "proj", (int)(im->kind_len < 32 ? im->kind_len : 32), im->kind);
            return -1;
        }
        uint64_t prefix = (uint64_t)ds->darks + ds->flats;
        index = kind == TL_PROTO_PROJ && im->image_id >= prefix ? im->image_id - prefix
                                                                 : im->image_id;
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
                tl_proto_fail(err, TL_PROTO_E_MISSING, "series %llu has no projection count "
                              "(number_of_images, user_data window or ingest.window)",
                              (unsigned long long)ds->id);
                return -1;
            }
            join = fits && !s->scan_has_proj && s->scan.window == window;
            if (fits && !s->scan_has_proj && !join)
                tl_log(TL_LOG_WARN, "calibration_dropped", "series=%llu reason=window "
                       "scan_window=%u series_window=%llu hint=set_ingest.window",
                       (unsigned long long)ds->id, s->scan.window, (unsigned long long)window);
        } else {
            join = fits;
            window = c->ingest_window ? (uint64_t)c->ingest_window
                     : s->open ? s->scan.window : ds->window ? ds->window : 1;
        }
        if (!join) {
            tl_adapter_scan_init(c, &scan, ds->id, im->rows, im->cols, im->dtype, (uint32_t)window);
            scan.darks = ds->darks;
            scan.flats = ds->flats;
            open_first = &scan;
        }
        ds->joined = true;
        ds->scan_series = join ? s->scan.series : ds->id;
    } else if (!s->open || s->scan.series != ds->scan_series) {
        tl_proto_fail(err, TL_PROTO_E_STATE, "image %llu of series %llu, whose scan has been "
                      "closed", (unsigned long long)im->image_id, (unsigned long long)im->series);
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
