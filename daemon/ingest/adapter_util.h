/* adapter_util.h — what the foreign-format adapters (adapter_dectris2.c, adapter_dectris1.c,
 * adapter_json.c, adapter_tomopackets.c) share.
 *
 *  - A pool of frame buffers handed to ZeroMQ with zmq_msg_init_data: a decoded frame
 *    travels to the engine worker in a buffer that comes back to the pool when the worker
 *    closes the payload, so steady streaming allocates no pixels. The pool can also wrap a
 *    frame that lies inside a received message (a CBOR byte string, a tomopackets float
 *    array) without copying: the message moves into the pool entry and lives as long as
 *    the payload. The pool outlives its adapter until the last buffer is back.
 *  - jansson with an arena: JSON headers parse into a per-thread arena that is reset per
 *    message, so they allocate nothing in the steady state either.
 *  - The stream: formats without scan messages synthesise one (tl_proto_scan from the
 *    configuration and what the stream says) before the first frame that needs it; the
 *    frame then waits here for the adapter's next op.
 *  - Detector series (DECTRIS start/image/end, V1 and V2): the kind of each series (from
 *    user data, else ingest.series_kinds cycled), which frames are darks/flats/projections,
 *    the projection index and angle of each image, and which tomolive scan a series joins:
 *    a calibration series joins the open scan of its shape; a projection series joins a
 *    scan that has no projections yet, else opens a new one. Images of a series without a
 *    start, or after its end, are refused (counted), never put into another scan.
 */
#ifndef TL_ADAPTER_UTIL_H
#define TL_ADAPTER_UTIL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <zmq.h>

#include "daemon/ingest/adapter.h"

/* ---- frame buffers ------------------------------------------------------------------- */

typedef struct tl_framepool tl_framepool;

tl_framepool *tl_framepool_new(void);
/* The adapter is done with the pool; it is freed when the last buffer comes back. */
void tl_framepool_drop(tl_framepool *p);
/* A buffer of n bytes, made the content of payload (which must be closed or empty). NULL
 * when out of memory. */
void *tl_framepool_payload(tl_framepool *p, size_t n, zmq_msg_t *payload);
/* payload = the n bytes at data, which lie inside msg: msg moves into the pool (left empty
 * here) and is closed when payload is. 0, or -1 when out of memory (msg untouched). */
int tl_framepool_wrap(tl_framepool *p, zmq_msg_t *msg, const void *data, size_t n,
                      zmq_msg_t *payload);
/* Buffers handed out and not yet back (tests). */
size_t tl_framepool_live(tl_framepool *p);

/* ---- JSON ------------------------------------------------------------------------------ */

/* Parses a JSON object from a message part into the calling thread's arena (installed on
 * first use); NULL with err set (E_MALFORMED, E_NOT_MAP) otherwise. Release every parse
 * with tl_json_done (nested parses too); the arena is reset when the last one is done. */
json_t *tl_json_parse(const void *data, size_t len, const char *what, tl_proto_error *err);
void tl_json_done(json_t *j);
/* Frees this thread's arena (adapter destroy). */
void tl_json_arena_free(void);

/* Typed getters: absent -> 0 (out untouched), wrong type or range -> -1 with err
 * (E_KEY_TYPE, E_RANGE), present -> 1. Dotted paths look into nested objects. */
int tl_json_get_u64(json_t *o, const char *path, uint64_t *out, tl_proto_error *err);
int tl_json_get_num(json_t *o, const char *path, double *out, tl_proto_error *err);
int tl_json_get_str(json_t *o, const char *path, const char **out, tl_proto_error *err);
int tl_json_get_bool(json_t *o, const char *path, bool *out, tl_proto_error *err);
/* A [rows, cols] array of positive integers within the protocol's limits. */
int tl_json_get_shape(json_t *o, const char *path, uint32_t out[2], tl_proto_error *err);

/* "uint16", "<u2", "u16", "float32", "float", "<f4", ...: true with *t for the four dtypes
 * the engine takes. */
bool tl_adapter_dtype(const char *name, tl_proto_dtype *t);
/* "dark", "flat", "proj"/"projection": true with *k. */
bool tl_adapter_kind(const char *name, size_t len, tl_proto_kind *k);

/* ---- the stream ---------------------------------------------------------------------- */

typedef struct {
    const tl_settings *cfg;
    tl_framepool *pool;
    bool open;                  /* a scan was sent */
    tl_proto_scan scan;         /* the last scan sent */
    bool scan_has_proj;         /* projections (or a projection series) joined it */
    uint64_t next_series;       /* series ids for formats without them */
    bool pending;               /* a frame waits behind the scan item that opened its scan */
    tl_item pend;
} tl_adapter_stream;

int tl_adapter_stream_init(tl_adapter_stream *s, const tl_settings *c, char *err, size_t errlen);
/* An adapter's state: size zeroed bytes whose tl_adapter_stream sits at offset, initialised
 * (what every adapter's create does first). NULL with a message in err. */
void *tl_adapter_alloc(size_t size, size_t offset, const tl_settings *c, char *err, size_t errlen);
void tl_adapter_stream_destroy(tl_adapter_stream *s);

/* A scan of this series, shape and dtype, with the configuration's darks/flats counts and
 * angle schedule (ingest.angle_start + index * ingest.angle_step, or 180 degrees over the
 * window) and the given window (0: ingest.window). */
void tl_adapter_scan_init(const tl_settings *c, tl_proto_scan *scan, uint64_t series,
                          uint32_t rows, uint32_t cols, tl_proto_dtype dtype, uint32_t window);
/* Whether the open scan takes frames of this shape and dtype. */
bool tl_adapter_stream_fits(const tl_adapter_stream *s, uint32_t rows, uint32_t cols,
                            tl_proto_dtype dtype);
/* Delivers frame f with its pixels in *payload (moved). With open_first, out gets that
 * scan item (recorded as the open scan) and the frame waits for tl_adapter_stream_next;
 * otherwise out gets the frame. Returns 1. */
int tl_adapter_stream_emit(tl_adapter_stream *s, const tl_proto_scan *open_first,
                           const tl_proto_frame *f, zmq_msg_t *payload, tl_item *out);
/* An end of the open scan's series into out; 1, or 0 when no scan is open. */
int tl_adapter_stream_end(tl_adapter_stream *s, tl_item *out);
/* The adapters' next op: the waiting frame, 1; or 0. */
int tl_adapter_stream_next(tl_adapter_stream *s, tl_item *out);

/* Frame k of a series whose first `darks` frames are darks and next `flats` flats: its
 * kind and its index within that kind. */
void tl_adapter_classify(uint64_t k, uint32_t darks, uint32_t flats, tl_proto_kind *kind,
                         uint64_t *index);

/* ---- detector series (DECTRIS) ------------------------------------------------------------ */

typedef struct {
    bool active;                /* start seen, end not yet */
    uint64_t id;
    tl_proto_kind kind;         /* DARK, FLAT, or PROJ (after a darks + flats prefix) */
    uint32_t darks, flats;      /* the prefix of a PROJ series */
    uint64_t window;            /* projections; 0 = unknown */
    bool has_gonio;
    double g_start, g_step;     /* degrees */
    uint32_t size_x, size_y;    /* declared image size, 0 = unknown */
    bool joined;                /* its first frame has found its scan */
    uint64_t scan_series;       /* that scan */
    uint64_t started;           /* start messages so far (cycles ingest.series_kinds) */
} tl_det_series;

/* What a start message (or its user data) may say; unset fields are -1 / NAN / NULL. */
typedef struct {
    uint64_t id;
    const char *kind; size_t kind_len;  /* user data "kind" */
    int64_t darks, flats, window;       /* user data; window also number_of_images - prefix */
    int64_t nimages;                    /* number_of_images */
    double g_start, g_step;             /* goniometer axis, degrees (NAN = absent) */
    int64_t size_x, size_y;
} tl_det_start;

void tl_det_start_init(tl_det_start *st);
/* A series starts (a start message, or a V1 header). 0, or -1 with err (unknown kind). */
int tl_det_series_start(tl_det_series *ds, const tl_settings *c, const tl_det_start *st,
                        tl_proto_error *err);

/* What an image says beyond its pixels; unset: kind NULL, angle NAN, index -1. */
typedef struct {
    uint64_t series, image_id;
    const char *kind; size_t kind_len;
    double angle_deg;
    int64_t index;
    uint32_t rows, cols;
    tl_proto_dtype dtype;
    bool has_t_acq;
    uint64_t t_acq;
} tl_det_image;

void tl_det_image_init(tl_det_image *im);
/* Places an image of series ds (its pixels in *payload, moved on success) into out. 1, or
 * -1 with err (no series, another series, unknown kind, no window). */
int tl_det_series_image(tl_det_series *ds, tl_adapter_stream *s, const tl_det_image *im,
                        zmq_msg_t *payload, tl_item *out, tl_proto_error *err);
/* The series ended: out gets the end of its scan when it was a projection series (1), or
 * nothing (0); -1 with err for an end of a series that is not running. */
int tl_det_series_end(tl_det_series *ds, tl_adapter_stream *s, uint64_t id, tl_item *out,
                      tl_proto_error *err);

#endif
