/* protocol.h — the tomolive wire protocol, version 1 (normative text: protocol/PROTOCOL.md).
 *
 * Every message is a ZeroMQ multipart message: one msgpack map (the header, at most
 * 64 KiB) and, for frames and slices, one part of raw little-endian C-order payload.
 * Slices are preceded by a topic part "slice/<id>/". This module turns headers into C
 * structs and back, validates untrusted input strictly (each defect has its own error
 * code) and frames messages over zmq_msg_t. It knows nothing of reconstruction.
 *
 * Decoding is zero-copy and allocation-free in the steady state: a tl_proto_decoder owns a
 * msgpack zone that is reused from message to message, strings in decoded structs point
 * into the header bytes, and a header is pre-validated (container counts against the bytes
 * left, nesting depth) before msgpack-c sees it, so a 5-byte header cannot make it
 * allocate megabytes. A decoded message stays valid until the next decode on the same
 * decoder and while the header bytes live.
 *
 *   tl_proto_decoder *d = tl_proto_decoder_new();
 *   tl_proto_msg m; tl_proto_error err;
 *   if (tl_proto_decode_parts(d, parts, nparts, TL_PROTO_INGEST, &m, &err) != TL_PROTO_OK)
 *       fprintf(stderr, "%s: %s\n", tl_proto_err_name(err.code), err.message);
 *
 * Encoding writes into a caller-owned msgpack_sbuffer, which the caller may reuse
 * (msgpack_sbuffer_clear) so that steady-state encoding does not allocate either.
 */
#ifndef TL_PROTOCOL_H
#define TL_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>
#include <zmq.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TL_PROTO_VERSION 1
#define TL_PROTO_MAX_HEADER (64u * 1024u)   /* bytes in a header part */
#define TL_PROTO_MAX_DEPTH 8                /* nesting of maps/arrays in a header */
#define TL_PROTO_MAX_DIM 65536u             /* detector rows/cols, slice sides */
#define TL_PROTO_MAX_FRAME_BYTES (1u << 31) /* rows * cols * dtype size, exclusive */
#define TL_PROTO_MAX_WINDOW (1u << 20)      /* projections in a rolling window */
#define TL_PROTO_MAX_ID 64                  /* bytes in a slice id */
#define TL_PROTO_SHM_NAME_MAX 255           /* bytes in a shared-memory object name (NAME_MAX) */
#define TL_PROTO_SHM_ALIGN 64               /* shm_offset is a positive multiple of this */
#define TL_PROTO_MAX_PARTS 4                /* parts a reader keeps; more is an error */
/* Projection matrices in a cone-beam scan (§8.1.1): each takes 109 bytes of msgpack (an
 * array of 12 float64), so 512 take 55.8 KB and leave ~9.7 KB of the 64 KiB header for
 * every other key (whose strings are bounded far below that). */
#define TL_PROTO_MAX_MATRICES 512

/* Error codes. Numeric values are part of the wire protocol (error replies carry them). */
typedef enum {
    TL_PROTO_OK = 0,
    /* framing and syntax */
    TL_PROTO_E_PARTS = 1,     /* too many or too few message parts for the type */
    TL_PROTO_E_TOO_BIG = 2,   /* header part over TL_PROTO_MAX_HEADER */
    TL_PROTO_E_MALFORMED = 3, /* not msgpack, truncated, or trailing bytes after the map */
    TL_PROTO_E_LIMIT = 4,     /* container larger than the bytes left, or nested too deep */
    TL_PROTO_E_NOT_MAP = 5,   /* header is not a map, or a key is not a string */
    TL_PROTO_E_DUP_KEY = 6,   /* a key appears twice */
    /* semantics */
    TL_PROTO_E_VERSION = 7,     /* "v" is not a major version this reader speaks */
    TL_PROTO_E_TYPE = 8,        /* unknown "type", or a type not accepted on this socket */
    TL_PROTO_E_MISSING = 9,     /* required key missing */
    TL_PROTO_E_KEY_TYPE = 10,   /* value of the wrong msgpack type */
    TL_PROTO_E_NOT_FINITE = 11, /* NaN or infinity where a finite number is required */
    TL_PROTO_E_RANGE = 12,      /* number out of range: zero or huge dimension, negative, ... */
    TL_PROTO_E_DTYPE = 13,      /* unknown dtype name */
    TL_PROTO_E_KIND = 14,       /* unknown enumerated name (frame kind, geometry, slice kind) */
    TL_PROTO_E_OVERFLOW = 15,   /* rows * cols * dtype size overflows the frame size limit */
    TL_PROTO_E_PAYLOAD = 16,    /* payload length differs from shape * dtype size */
    /* errors the daemon answers control requests with */
    TL_PROTO_E_UNKNOWN_CMD = 32,
    TL_PROTO_E_BAD_ARG = 33,
    TL_PROTO_E_NOT_FOUND = 34,
    TL_PROTO_E_STATE = 35,       /* not possible in the current state (e.g. no scan) */
    TL_PROTO_E_UNSUPPORTED = 36, /* valid request for something not implemented here */
    TL_PROTO_E_RESOURCE = 37,    /* a requested resource (GPU, memory) is not there */
    TL_PROTO_E_INTERNAL = 38,
    TL_PROTO_E_DENIED = 39 /* the client's role may not run this command ([security], #27) */
} tl_proto_err;

typedef struct {
    tl_proto_err code;
    char message[200]; /* human readable, names the key and the offending value */
} tl_proto_error;

/* "E_PAYLOAD" etc.; "E_?" for values outside the enum. */
const char *tl_proto_err_name(tl_proto_err code);

/* Sets err (may be NULL) and returns code. printf-style message. */
tl_proto_err tl_proto_fail(tl_proto_error *err, tl_proto_err code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

typedef enum {
    TL_MSG_SCAN = 1 << 0,
    TL_MSG_FRAME = 1 << 1,
    TL_MSG_END = 1 << 2,
    TL_MSG_REQ = 1 << 3,
    TL_MSG_REP = 1 << 4,
    TL_MSG_SLICE = 1 << 5,
    TL_MSG_RELEASE = 1 << 6 /* daemon -> producer: a GPU frame's slot is free again */
} tl_msg_type;

/* What each socket accepts (the `accept` mask of the decoders). */
#define TL_PROTO_INGEST (TL_MSG_SCAN | TL_MSG_FRAME | TL_MSG_END)
#define TL_PROTO_CONTROL (TL_MSG_REQ)

/* F16 and Q16 are slice dtypes only (§10.3): IEEE binary16, and uint16 codes meaning
 * offset + scale x code. Ingest messages refuse them (E_DTYPE). */
typedef enum {
    TL_PROTO_U8 = 0,
    TL_PROTO_U16,
    TL_PROTO_U32,
    TL_PROTO_F32,
    TL_PROTO_F16,
    TL_PROTO_Q16
} tl_proto_dtype;
typedef enum { TL_PROTO_DARK = 0, TL_PROTO_FLAT, TL_PROTO_PROJ } tl_proto_kind;
typedef enum { TL_PROTO_PARALLEL = 0, TL_PROTO_CONE } tl_proto_geometry;

const char *tl_proto_dtype_name(tl_proto_dtype t);       /* "u8" "u16" "u32" "f32" "f16" "q16" */
size_t tl_proto_dtype_size(tl_proto_dtype t);            /* 1 2 4 4 2 2 */
const char *tl_proto_kind_name(tl_proto_kind k);         /* "dark" "flat" "proj" */
const char *tl_proto_geometry_name(tl_proto_geometry g); /* "parallel" "cone" */
/* Name lookups; return false for unknown names. */
bool tl_proto_dtype_parse(const char *s, size_t n, tl_proto_dtype *out);       /* frame dtypes */
bool tl_proto_slice_dtype_parse(const char *s, size_t n, tl_proto_dtype *out); /* + f16, q16 */
bool tl_proto_kind_parse(const char *s, size_t n, tl_proto_kind *out);

/* A string inside a decoded header: not NUL-terminated, points into the header bytes. */
typedef struct {
    const char *ptr;
    size_t len;
} tl_proto_str;

bool tl_proto_str_eq(tl_proto_str s, const char *cstr);

/* ingest: "scan" — opens a series and (re)defines the engine. */
typedef struct {
    uint64_t series;
    tl_proto_geometry geometry;
    uint32_t rows, cols; /* detector shape ("shape": [rows, cols]) */
    tl_proto_dtype dtype;
    uint32_t window;       /* projections kept in the rolling window */
    uint32_t darks, flats; /* expected counts, optional, default 0 */
    uint64_t first_index;  /* optional, default 0 */
    bool has_center;       /* rotation axis column, optional */
    double center;
    bool has_angles; /* optional schedule: angle = angle_start + index * angle_step */
    double angle_start, angle_step; /* radians */
    tl_proto_str filter;  /* optional filter name (len 0 = absent); the engine validates it */
    bool already_linear;  /* optional, default false: skip -log */
    tl_proto_str release; /* optional endpoint (len 0 = absent) where the producer of
                                   frames in GPU memory receives "release" messages */
    double dezinger;      /* optional, default 0 (off): zinger threshold, counts >= 0 */
    bool has_paganin;     /* optional "paganin": [energy keV, distance m, pixel um,
                             delta/beta], finite (the engine checks they are positive) */
    float paganin[4];
    bool half_acquisition; /* optional, default false: 360-degree scan, offset axis */
    bool has_auto_center;  /* optional "auto_center": the centre is estimated from opposite
                              projections (present), and applied (true) */
    bool auto_center;
    tl_proto_str rings; /* optional ring removal "vo[:SIZE[,TOL]]" | "fw[:LEVEL[,TOL]]" |
                           "none" (len 0 = absent); the engine validates it */
    /* geometry cone (PROTOCOL.md §8.1.1): the circular trajectory. Required with cone,
     * refused with parallel; finite, distances and pitches > 0. */
    double source_origin;      /* mm, source to rotation axis */
    double source_detector;    /* mm, source to detector */
    double pixel_size[2];      /* mm, detector pitch [u, v] ("pixel_size": one number = both) */
    bool has_detector_offset;  /* optional "detector_offset" */
    double detector_offset[2]; /* [u, v] detector pixels: the principal point minus the
                                  detector's middle ((cols - 1) / 2, (rows - 1) / 2); a
                                  non-zero u and "center" together are refused */
    bool has_short_scan;       /* optional "short_scan": [start, range] radians, 0 < range
                                  < 2 pi: a circular scan of less than a turn (Parker) */
    double short_scan[2];
    /* optional "matrices" (cone only): one 3x4 projection matrix per projection, row-major
     * (P[4 r + c], gpu/geometry/cone.h), matrices[i] for frame index first_index + i;
     * 1..TL_PROTO_MAX_MATRICES, every number finite. Owned by the scan: malloc'ed by the
     * decoder, released with tl_proto_scan_free (NULL and 0 when absent). */
    double (*matrices)[12];
    uint32_t nmatrices;
} tl_proto_scan;

/* Releases what a decoded scan owns (its matrices) and leaves it without them; safe on a
 * scan without any, and twice. */
void tl_proto_scan_free(tl_proto_scan *m);

/* Where a frame in another process's GPU memory is (CUDA IPC, PROTOCOL.md §8.4): the frame
 * header's ipc_* keys instead of a payload part. */
#define TL_PROTO_IPC_HANDLE 64    /* bytes of a cudaIpcMemHandle_t */
#define TL_PROTO_UUID_LEN 40      /* "GPU-" + 8-4-4-4-12 hex digits, as nvidia-smi -L prints */
#define TL_PROTO_MAX_ENDPOINT 256 /* bytes of an endpoint string */
typedef struct {
    const uint8_t *handle; /* TL_PROTO_IPC_HANDLE bytes (inside the header) */
    uint64_t buffer;       /* the producer's id of the exported allocation */
    uint64_t size;         /* bytes of that allocation */
    uint64_t offset;       /* bytes from its start to the frame's row 0 */
    uint64_t pitch;        /* bytes between rows (>= cols * dtype size) */
    tl_proto_str device;   /* UUID of the GPU that holds it */
    uint32_t slot;         /* the producer's ring slot, handed back in a "release" */
} tl_proto_ipc;

/* ingest: "frame" — one detector frame; the payload is part 1. */
typedef struct {
    uint64_t series;
    uint64_t index;
    tl_proto_kind kind;
    bool has_angle; /* required for kind proj unless the scan has a schedule */
    double angle;   /* radians */
    tl_proto_dtype dtype;
    uint32_t rows, cols; /* "shape": [rows, cols] */
    bool has_t_acq;
    uint64_t t_acq; /* acquisition time, ns since the Unix epoch */
    bool has_center_offset;
    double center_offset; /* per-projection axis correction, detector pixels */
    bool has_ipc;         /* the pixels are in GPU memory (ipc), not in a payload part */
    tl_proto_ipc ipc;
    bool has_band; /* the payload holds rows band_first .. band_first + band_rows
                                   - 1 of the rows x cols frame, not all of it (§8.2) */
    uint32_t band_first, band_rows;
    const void *payload; /* set by tl_proto_decode_parts (NULL from tl_proto_decode) */
    size_t payload_len;
} tl_proto_frame;

/* ingest: "end" — closes a series. */
typedef struct {
    uint64_t series;
} tl_proto_end;

/* daemon -> producer: "release" — the daemon no longer needs the GPU memory of frame
 * (series, index) in ring slot `slot`: it copied the frame (ok), or rejected it (!ok, with
 * the error's code and message). */
typedef struct {
    uint64_t series, index;
    uint32_t slot;
    bool ok;
    tl_proto_err code;    /* when !ok */
    tl_proto_str message; /* when !ok */
} tl_proto_release;

/* control: "req". args is a msgpack map (or NULL when absent) living in the decoder's zone. */
typedef struct {
    uint64_t id;
    tl_proto_str cmd;
    const msgpack_object *args;
} tl_proto_req;

/* control: "rep". On ok, result (may be NULL); otherwise code and message. */
typedef struct {
    uint64_t id;
    bool ok;
    const msgpack_object *result;
    tl_proto_err code;
    tl_proto_str message;
} tl_proto_rep;

/* slices: the header of a published slice (part 1 after the topic; payload is part 2). */
typedef struct {
    tl_proto_str id;
    uint64_t seq;
    uint32_t shape[2];    /* [h, w] */
    tl_proto_dtype dtype; /* f32, or the compact f16 / q16 (§10.3) */
    double scale, offset; /* q16 only: a pixel is offset + scale x code */
    bool lz4;             /* optional "compression": "lz4": the payload is one LZ4 block */
    float orientation[9]; /* x-axis vector, y-axis vector, base point (volume coords) */
    uint32_t projections_used, missing;
    uint64_t window_first, window_last; /* "window": [first, last] frame indices */
    uint64_t t_acq;                     /* acquisition time of the newest frame used, ns */
    uint64_t t_pub;                     /* publish time, ns */
    uint64_t t_recv; /* optional (0 = absent): daemon receive time of that frame */
    uint64_t t_done; /* optional (0 = absent): reconstruction finished */
    bool final;      /* optional (default false): the last slice of a scan, published
                                   when its "end" arrived */
    tl_proto_str kernel;
    /* an iterative slice (§10: "kernel" names its method): the iterations run since its
     * start, optional (0 = absent), and ||b - A x|| / ||b|| after the last of them */
    uint32_t iterations;
    double residual;
    /* a box (an axis-aligned sub-volume, §10): optional (0 = absent, one plane). The image
     * is `planes` planes of shape[0] / planes rows each, plane 0 first, at the orientation
     * above; plane k lies k x box_step volume units above it (+z) */
    uint32_t planes;
    double box_step;
    /* the pixels in shared memory instead of a payload part (topic "shm/<id>/", §10.1) */
    bool has_shm;
    tl_proto_str shm_name; /* POSIX shared-memory object, "/name" */
    uint64_t shm_offset;   /* of the pixels in it; the slot's sequence word is 64 bytes before */
    const void *payload;
    size_t payload_len;
} tl_proto_slice;

typedef struct {
    tl_msg_type type;
    union {
        tl_proto_scan scan;
        tl_proto_frame frame;
        tl_proto_end end;
        tl_proto_req req;
        tl_proto_rep rep;
        tl_proto_slice slice;
        tl_proto_release release;
    };
} tl_proto_msg;

/* ---- decoding -------------------------------------------------------------------------- */

typedef struct tl_proto_decoder tl_proto_decoder;

tl_proto_decoder *tl_proto_decoder_new(void); /* NULL when out of memory */
void tl_proto_decoder_free(tl_proto_decoder *d);

/* Decodes one header. Types not in `accept` are TL_PROTO_E_TYPE. For frames and slices the
 * payload pointer is left NULL; use tl_proto_check_payload to validate a payload length.
 * A "req" that fails after its id was read (cmd, args) leaves out->type == TL_MSG_REQ and
 * out->req.id set, so the error reply can carry the id; on any earlier failure out->type
 * is 0. A "scan" with "matrices" owns them: the caller releases them with
 * tl_proto_scan_free (the decoder allocates nothing else a message keeps). */
tl_proto_err tl_proto_decode(tl_proto_decoder *d, const void *hdr, size_t len, unsigned accept,
                             tl_proto_msg *out, tl_proto_error *err);

/* Decodes a whole multipart message: checks the part count for the type (frame: 2, or 1 for
 * a frame in GPU memory; scan, end, req, rep, release: 1; slice: 3 = topic, header,
 * payload), decodes the header and checks the payload length against shape * dtype size. */
tl_proto_err tl_proto_decode_parts(tl_proto_decoder *d, zmq_msg_t *parts, int nparts,
                                   unsigned accept, tl_proto_msg *out, tl_proto_error *err);

/* rows * cols * dtype size, overflow-checked against TL_PROTO_MAX_FRAME_BYTES. */
tl_proto_err tl_proto_frame_bytes(uint32_t rows, uint32_t cols, tl_proto_dtype dtype,
                                  size_t *bytes, tl_proto_error *err);
tl_proto_err tl_proto_check_payload(uint32_t rows, uint32_t cols, tl_proto_dtype dtype,
                                    size_t payload_len, tl_proto_error *err);
/* The same for a slice payload compressed with LZ4 (§10.3): 1 .. LZ4_compressBound bytes;
 * whether it decompresses to the shape is known only by decompressing (tl_proto_pixels). */
tl_proto_err tl_proto_check_lz4_payload(uint32_t rows, uint32_t cols, tl_proto_dtype dtype,
                                        size_t payload_len, tl_proto_error *err);

/* ---- typed access to maps (request args, reply results) --------------------------------- */

/* The value stored under key, or NULL. */
const msgpack_object *tl_proto_map_get(const msgpack_object *map, const char *key);

/* Each getter: absent and !required -> TL_PROTO_OK with *out untouched; absent and required
 * -> E_MISSING; wrong type -> E_KEY_TYPE; out of range -> E_RANGE; non-finite -> E_NOT_FINITE.
 * The message names the key. */
tl_proto_err tl_proto_get_u64(const msgpack_object *map, const char *key, bool required,
                              uint64_t *out, tl_proto_error *err);
tl_proto_err tl_proto_get_u32(const msgpack_object *map, const char *key, bool required,
                              uint32_t *out, tl_proto_error *err);
tl_proto_err tl_proto_get_double(const msgpack_object *map, const char *key, bool required,
                                 double *out, tl_proto_error *err);
tl_proto_err tl_proto_get_bool(const msgpack_object *map, const char *key, bool required,
                               bool *out, tl_proto_error *err);
tl_proto_err tl_proto_get_str(const msgpack_object *map, const char *key, bool required,
                              tl_proto_str *out, tl_proto_error *err);
/* An array of exactly n finite numbers. */
tl_proto_err tl_proto_get_floats(const msgpack_object *map, const char *key, bool required,
                                 float *out, size_t n, tl_proto_error *err);
/* An array of exactly n unsigned integers each in [1, max]. */
tl_proto_err tl_proto_get_dims(const msgpack_object *map, const char *key, bool required,
                               uint32_t *out, size_t n, uint32_t max, tl_proto_error *err);

/* ---- encoding --------------------------------------------------------------------------- */
/* Each appends one complete header map to buf and returns 0, or -1 when out of memory. */

int tl_proto_encode_scan(msgpack_sbuffer *buf, const tl_proto_scan *m);
int tl_proto_encode_frame(msgpack_sbuffer *buf, const tl_proto_frame *m);
int tl_proto_encode_end(msgpack_sbuffer *buf, const tl_proto_end *m);
int tl_proto_encode_slice(msgpack_sbuffer *buf, const tl_proto_slice *m);
int tl_proto_encode_release(msgpack_sbuffer *buf, const tl_proto_release *m);

/* Requests and replies carry a free-form value: these pack everything but that value, and
 * the caller packs exactly one object (the args map, or the result) with pk right after.
 * For a request without arguments pass has_args = false and pack nothing. */
int tl_proto_begin_req(msgpack_packer *pk, uint64_t id, const char *cmd, bool has_args);
int tl_proto_begin_rep_ok(msgpack_packer *pk, uint64_t id);
int tl_proto_pack_rep_error(msgpack_packer *pk, uint64_t id, tl_proto_err code,
                            const char *message);
/* Small packing helpers used by encoders and by the daemon's result builders. */
int tl_proto_pack_cstr(msgpack_packer *pk, const char *s);
int tl_proto_pack_kv_u64(msgpack_packer *pk, const char *key, uint64_t v);
int tl_proto_pack_kv_double(msgpack_packer *pk, const char *key, double v);
int tl_proto_pack_kv_str(msgpack_packer *pk, const char *key, const char *v);
int tl_proto_pack_kv_bool(msgpack_packer *pk, const char *key, bool v);

/* ---- multipart framing over zmq_msg_t --------------------------------------------------- */

/* Receives one whole multipart message into parts[0..max-1] (each initialised here).
 * Returns the part count, or -1 on a ZeroMQ error (errno: EAGAIN with ZMQ_DONTWAIT and no
 * message, ETERM, ...). A message with more than max parts is received to its end, its
 * extra parts discarded, and -2 returned with err set to E_PARTS; the kept parts must
 * still be closed. On -1 no part is left open (nothing to close). */
int tl_proto_recv(void *sock, zmq_msg_t *parts, int max, int flags, tl_proto_error *err);
void tl_proto_close(zmq_msg_t *parts, int n);

/* Sends [topic?] header [payload?] as one multipart message. The header and topic are
 * copied; the payload is sent zero-copy when ffn is non-NULL (ffn(payload, hint) runs on a
 * ZeroMQ I/O thread once the message is gone), copied otherwise. topic or payload may be
 * NULL. flags: ZMQ_DONTWAIT or 0. Returns 0, or -1 with errno set. On -1 with a zero-copy
 * payload, ffn has been called or will be called (the payload is never leaked). */
int tl_proto_send(void *sock, const void *topic, size_t topic_len, const void *hdr, size_t hdr_len,
                  void *payload, size_t payload_len, zmq_free_fn *ffn, void *hint, int flags);

/* Writes "slice/<id>/" plus a terminating NUL into buf (cap bytes) and returns the topic's
 * length (without the NUL), or 0 if it does not fit or id is not a valid slice id
 * (1..TL_PROTO_MAX_ID bytes of [A-Za-z0-9_.-]). */
size_t tl_proto_slice_topic(char *buf, size_t cap, const char *id, size_t id_len);
/* The same for the topic of a slice delivered through shared memory: "shm/<id>/". */
size_t tl_proto_shm_topic(char *buf, size_t cap, const char *id, size_t id_len);

#ifdef __cplusplus
}
#endif
#endif
