/* adapter.h — stream formats the ingest socket can speak.
 *
 * The ingest thread receives whole multipart messages and gives each to the adapter of its
 * endpoint's format (config ingest.format), which turns it into the daemon's one internal
 * record, a tl_item: a scan, a frame (its pixels in item->payload, moved zero-copy or
 * decoded into a buffer the adapter owns), or an end; or rejects it with a protocol error
 * code and a reason, which the ingest thread counts and logs. An adapter instance belongs
 * to the ingest thread alone, so it may keep state across messages (a series opened by a
 * start message, decompression buffers).
 *
 * The native format is the tomolive wire protocol (protocol/PROTOCOL.md).
 */
#ifndef TL_ADAPTER_H
#define TL_ADAPTER_H

#include <stddef.h>
#include <zmq.h>

#include "daemon/base/settings.h"
#include "daemon/base/queue.h"
#include "protocol/protocol.h"

typedef struct {
    const char *name; /* the value of ingest.format */
    /* A new instance, or NULL with a message in err. */
    void *(*create)(const tl_settings *c, char *err, size_t errlen);
    void (*destroy)(void *state);
    /* 1: *out is filled (for a frame, out->payload holds the pixels); 0: the message
     * carries nothing for the engine (a heartbeat, a status message); -1: rejected, err set.
     * The adapter closes none of parts; the caller does. */
    int (*decode)(void *state, zmq_msg_t *parts, int nparts, tl_item *out, tl_proto_error *err);
    /* Optional (NULL: never more than one). After decode returned 1, the caller calls next
     * until it returns 0: further items the same message produced, in order — a format
     * without scan messages answers its first frame with a synthesised scan from decode
     * and the frame itself from next. next fills the type, the message fields and the
     * payload; the receive times stay the caller's. */
    int (*next)(void *state, tl_item *out);
} tl_adapter_ops;

/* The adapter named name, or NULL. */
const tl_adapter_ops *tl_adapter_find(const char *name);

/* The formats (adapter_*.c); adapter.c lists them for tl_adapter_find. */
extern const tl_adapter_ops tl_adapter_native;
extern const tl_adapter_ops tl_adapter_dectris2;
extern const tl_adapter_ops tl_adapter_dectris1;
extern const tl_adapter_ops tl_adapter_std_daq;
extern const tl_adapter_ops tl_adapter_concert;
extern const tl_adapter_ops tl_adapter_array10;
extern const tl_adapter_ops tl_adapter_tomopackets;

#endif
