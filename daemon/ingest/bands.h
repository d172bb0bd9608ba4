/* bands.h — frames sent in row bands (PROTOCOL.md §8.2), put back together.
 *
 * Over loopback TCP one connection moves ~3 GB/s, so an 8 MB frame takes ~2.5 ms to
 * arrive whole; sent as four bands on four connections it arrives in under 1 ms. The
 * worker copies each band, as it comes, into the buffer of its frame; when the bands have
 * covered every row once, the frame goes to the engine from that buffer. The buffers are
 * host memory of the engine's backend (tl_host_alloc: page-locked for CUDA), so the bands'
 * copies replace the staging copy a whole frame gets, and the upload reads them directly.
 * A large band is copied by a few threads (one core copies ~8 GB/s: 1 ms of an 8 MB frame
 * on the worker per frame would be half its time at 500 frames/s).
 *
 * A few frames may be in assembly at once (bands of consecutive frames interleave on the
 * connections). A frame whose bands stop coming is dropped, never applied in part: when a
 * new frame needs its buffer (the oldest in assembly goes), when it is older than the
 * timeout, or when the series ends. The buffers are made at the first band of a scan, for
 * its frame size, and kept for later scans of the same size. Worker thread, lock held:
 *
 *   tl_bands_init(&b, n, memory, on_drop, ctx)     on_drop: each frame dropped, and why
 *   tl_bands_add(&b, &frame, t_recv, t_recv_mono, &done, why, len)
 *       -1: a bad band (why says what), 0: taken, 1: *done is a complete frame
 *   ... submit done->frame with data = done->data ...
 *   tl_bands_free(&b, done);
 *   tl_bands_expire(&b, now_mono, timeout_ns)      each turn
 *   tl_bands_clear(&b, "the series ended")         at the end of a series
 */
#ifndef TL_BANDS_H
#define TL_BANDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu/engine.h"
#include "protocol/protocol.h"

typedef struct {
    bool used;
    tl_proto_frame frame;  /* the first band's header (payload and band fields cleared) */
    uint64_t t_recv;       /* realtime receipt of the band that came last */
    uint64_t t_recv_mono;  /* ... and monotonic */
    uint64_t t_first_mono; /* monotonic receipt of its first band (the timeout runs from it) */
    uint32_t rows_in;      /* rows received */
    uint8_t *have;         /* per row: received */
    void *data;            /* rows x cols samples, packed */
} tl_bands_frame;

struct tl_pool;

/* A frame dropped before all its bands came: its header, the rows that did, and why. */
typedef void (*tl_bands_drop_fn)(void *ctx, const tl_proto_frame *f, uint32_t rows_in,
                                 const char *why);

typedef struct {
    tl_backend_kind memory; /* whose host memory the buffers are (tl_host_alloc) */
    struct tl_pool *pool;   /* copies large bands; made with the buffers */
    int n;                  /* frames in assembly at most */
    tl_bands_frame *v;      /* n of them; buffers made at the first band */
    size_t frame_bytes;     /* size the buffers were made for (0: none yet) */
    uint32_t rows;
    tl_bands_drop_fn drop; /* told of every frame dropped */
    void *drop_ctx;
} tl_bands;

/* No buffers yet; n frames at most in assembly, their buffers from `memory`; drop (may be
 * NULL) is told of each frame dropped incomplete. */
void tl_bands_init(tl_bands *b, int n, tl_backend_kind memory, tl_bands_drop_fn drop,
                   void *drop_ctx);
void tl_bands_destroy(tl_bands *b);

/* Takes band f (decoded, payload set, has_band). Returns -1 for a band that cannot be
 * taken (its header differs from its frame's first band, it overlaps rows received, its
 * payload is not its rows, no memory for the buffers): why says which, nothing changes.
 * Returns 1 and *done when it completed its frame, else 0. A new frame with every buffer
 * taken drops the oldest frame in assembly. */
int tl_bands_add(tl_bands *b, const tl_proto_frame *f, uint64_t t_recv, uint64_t t_recv_mono,
                 tl_bands_frame **done, char *why, size_t why_len);
/* Frees a complete frame's buffer once the engine has taken the frame. */
void tl_bands_free(tl_bands *b, tl_bands_frame *f);
/* Drops frames whose first band came more than timeout_ns before now; returns how many. */
int tl_bands_expire(tl_bands *b, uint64_t now_mono, uint64_t timeout_ns);
/* Drops every frame in assembly, saying why; returns how many. */
int tl_bands_clear(tl_bands *b, const char *why);
/* Frames in assembly now. */
int tl_bands_pending(const tl_bands *b);

#endif
