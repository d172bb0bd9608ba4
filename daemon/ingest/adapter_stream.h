/* adapter_stream.h — what every foreign-format adapter keeps per ingest socket: the
 * frame pool, the scan it last sent, and scan synthesis.
 *
 * Formats without scan messages synthesise one (tl_proto_scan from the configuration and
 * what the stream says) before the first frame that needs it; the frame then waits here
 * for the adapter's next op. Every adapter's state embeds a tl_adapter_stream and is
 * created with tl_adapter_alloc. Also here: the names of dtypes and frame kinds that the
 * formats' headers use.
 */
#ifndef TL_ADAPTER_STREAM_H
#define TL_ADAPTER_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "daemon/ingest/adapter.h"
#include "daemon/ingest/framepool.h"

typedef struct {
    const tl_settings *cfg;
    tl_framepool *pool;
    bool open;            /* a scan was sent */
    tl_proto_scan scan;   /* the last scan sent */
    bool scan_has_proj;   /* projections (or a projection series) joined it */
    uint64_t next_series; /* series ids for formats without them */
    bool pending;         /* a frame waits behind the scan item that opened its scan */
    tl_item pend;
    tl_item_detector detector; /* what the detector said: goes with the next scan opened */
    uint64_t masked_filled;    /* masked pixels filled in the frame emitted next */
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
 * scan item (recorded as the open scan, with s->detector) and the frame waits for
 * tl_adapter_stream_next; otherwise out gets the frame. Either frame item carries
 * s->masked_filled. Returns 1. */
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

/* "uint16", "<u2", "u16", "float32", "float", "<f4", ...: true with *t for the four dtypes
 * the engine takes. */
bool tl_adapter_dtype(const char *name, tl_proto_dtype *t);
/* "dark", "flat", "proj"/"projection": true with *k. */
bool tl_adapter_kind(const char *name, size_t len, tl_proto_kind *k);

#endif
