/* adapter_native.c — the tomolive wire protocol as an ingest format (adapter.h). The
 * protocol module does all the checking; this only moves the decoded fields and the
 * payload part into the daemon's record. */
#include <config.h>

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/ingest/adapter.h"

static void *native_create(const tl_settings *c, char *err, size_t errlen)
{
    tl_proto_decoder *d = tl_proto_decoder_new();
    if (!d)
        snprintf(err, errlen, "out of memory for the protocol decoder");
    return d;
}

static void native_destroy(void *state)
{
    tl_proto_decoder_free(state);
}

/* A string of the header, NUL-terminated into dst (truncated to fit). */
static void copy_str(char *dst, size_t cap, tl_proto_str s)
{
    size_t n = s.len < cap - 1 ? s.len : cap - 1;
    if (n)
        memcpy(dst, s.ptr, n);
    dst[n] = 0;
}

static int native_decode(void *state, zmq_msg_t *parts, int nparts, tl_item *it,
                         tl_proto_error *err)
{
    tl_proto_msg m;
    if (tl_proto_decode_parts(state, parts, nparts, TL_PROTO_INGEST, &m, err) != TL_PROTO_OK)
        return -1;
    it->type = m.type;
    if (m.type == TL_MSG_SCAN) {
        it->scan = m.scan;
        copy_str(it->filter, sizeof it->filter, m.scan.filter);
        copy_str(it->rings, sizeof it->rings, m.scan.rings);
        copy_str(it->release, sizeof it->release, m.scan.release);
        it->scan.filter = (tl_proto_str){NULL, 0}; /* the header part is about to go */
        it->scan.release = (tl_proto_str){NULL, 0};
    } else if (m.type == TL_MSG_FRAME && m.frame.has_ipc) {
        /* no payload: the header names the producer's GPU memory (PROTOCOL.md §8.4); the
         * handle and device travel in the item, since the header part is about to go */
        it->frame = m.frame;
        memcpy(it->ipc_handle, m.frame.ipc.handle, sizeof it->ipc_handle);
        copy_str(it->ipc_device, sizeof it->ipc_device, m.frame.ipc.device);
        it->frame.ipc.handle = NULL;
        it->frame.ipc.device = (tl_proto_str){NULL, 0};
        it->frame.payload = NULL;
    } else if (m.type == TL_MSG_FRAME) {
        it->frame = m.frame;
        zmq_msg_move(&it->payload, &parts[1]); /* the pixels travel zero-copy */
        it->frame.payload = NULL;              /* the worker reads them from it->payload */
    } else {
        it->end = m.end;
    }
    return 1;
}

const tl_adapter_ops tl_adapter_native = {
    .name = "tomolive",
    .create = native_create,
    .destroy = native_destroy,
    .decode = native_decode,
};
