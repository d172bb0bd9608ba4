/* adapter_native.c — the tomolive wire protocol as an ingest format (adapter.h). The
 * protocol module does all the checking; this only moves the decoded fields and the
 * payload part into the daemon's record. */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/adapter.h"

static void *native_create(const tl_config *c, char *err, size_t errlen)
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

static int native_decode(void *state, zmq_msg_t *parts, int nparts, tl_item *it,
                         tl_proto_error *err)
{
    tl_proto_msg m;
    if (tl_proto_decode_parts(state, parts, nparts, TL_PROTO_INGEST, &m, err) != TL_PROTO_OK)
        return -1;
    it->type = m.type;
    if (m.type == TL_MSG_SCAN) {
        it->scan = m.scan;
        size_t fl = m.scan.filter.len < sizeof it->filter - 1 ? m.scan.filter.len : sizeof it->filter - 1;
        memcpy(it->filter, m.scan.filter.ptr ? m.scan.filter.ptr : "", fl);
        it->filter[fl] = 0;
        it->scan.filter = (tl_proto_str){NULL, 0}; /* the header part is about to go */
        it->scan.release = (tl_proto_str){NULL, 0};
    } else if (m.type == TL_MSG_FRAME && m.frame.has_ipc) {
        /* the protocol describes frames in GPU memory (PROTOCOL.md §8.4); this daemon
         * cannot consume them yet: a clear, counted rejection, never a silent drop */
        tl_proto_fail(err, TL_PROTO_E_UNSUPPORTED, "frame %" PRIu64 " of series %" PRIu64
                      " is in GPU memory (CUDA IPC): not supported by this daemon yet",
                      m.frame.index, m.frame.series);
        return -1;
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
