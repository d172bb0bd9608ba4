/* multipart.c — receiving and sending whole multipart messages over zmq_msg_t.
 *
 * Receive: parts are received into caller-provided zmq_msg_t, so a payload is never copied
 * (the caller reads it in place with zmq_msg_data). A message longer than the caller's
 * array is read to its last part and the surplus discarded, because ZeroMQ delivers parts
 * one at a time and leaving them would make the next receive start mid-message.
 *
 * Send: topic and header are small and copied; the payload goes zero-copy through
 * zmq_msg_init_data when the caller gives a free function. The payload message is built
 * first, so from then on exactly one party owns the buffer: ZeroMQ (which calls ffn when the
 * message is gone, including when we close an unsent message on an error path), or, if even
 * zmq_msg_init_data fails, this function, which calls ffn itself. Either way the caller's
 * buffer is released exactly once.
 *
 * ZeroMQ applies the high-water mark (and so EAGAIN under ZMQ_DONTWAIT) to the first part
 * of a message only; once it is queued the remaining parts are accepted, so a send fails
 * either before anything was queued or not at all (short of ETERM, when the socket is dead).
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "protocol/protocol.h"
#include "protocol/proto_internal.h"

void tl_proto_close(zmq_msg_t *parts, int n)
{
    for (int i = 0; parts && i < n; i++)
        zmq_msg_close(&parts[i]);
}

static bool more(zmq_msg_t *m)
{
    return zmq_msg_more(m) != 0;
}

/* Receives and drops the rest of a message whose part `last` had the more flag. */
static int drain(void *sock, zmq_msg_t *last, int *count)
{
    zmq_msg_t junk;
    bool go = more(last);
    while (go) {
        zmq_msg_init(&junk);
        if (zmq_msg_recv(&junk, sock, 0) < 0) {
            int e = errno;
            zmq_msg_close(&junk);
            errno = e;
            return -1;
        }
        (*count)++;
        go = more(&junk);
        zmq_msg_close(&junk);
    }
    return 0;
}

int tl_proto_recv(void *sock, zmq_msg_t *parts, int max, int flags, tl_proto_error *err)
{
    if (!sock || !parts || max < 1) {
        errno = EINVAL;
        return -1;
    }
    int n = 0;
    for (;;) {
        zmq_msg_init(&parts[n]);
        /* later parts of a message are already here (delivery is atomic): never wait */
        if (zmq_msg_recv(&parts[n], sock, n == 0 ? flags : 0) < 0) {
            int e = errno;
            tl_proto_close(parts, n + 1);
            errno = e;
            return -1;
        }
        n++;
        if (!more(&parts[n - 1]))
            return n;
        if (n == max)
            break;
    }
    int total = n;
    if (drain(sock, &parts[n - 1], &total) < 0) {
        int e = errno;
        tl_proto_close(parts, n);
        errno = e;
        return -1;
    }
    tl_proto_fail(err, TL_PROTO_E_PARTS, "message has %d parts, at most %d are kept", total, max);
    return -2;
}

/* Sends one copied part. */
static int send_copy(void *sock, const void *data, size_t len, int flags)
{
    return zmq_send(sock, data, len, flags) < 0 ? -1 : 0;
}

int tl_proto_send(void *sock, const void *topic, size_t topic_len, const void *hdr, size_t hdr_len,
                  void *payload, size_t payload_len, zmq_free_fn *ffn, void *hint, int flags)
{
    zmq_msg_t pay;
    bool has_pay = payload != NULL;
    if (has_pay) {
        int rc = ffn ? zmq_msg_init_data(&pay, payload, payload_len, ffn, hint)
                     : zmq_msg_init_size(&pay, payload_len);
        if (rc < 0) {
            int e = errno;
            if (ffn)
                ffn(payload, hint); /* ZeroMQ did not take it: release it here */
            errno = e;
            return -1;
        }
        if (!ffn && payload_len)
            memcpy(zmq_msg_data(&pay), payload, payload_len);
    }
    if (!sock || !hdr) {
        if (has_pay)
            zmq_msg_close(&pay);
        errno = EINVAL;
        return -1;
    }
    int f = flags & ZMQ_DONTWAIT;
    int rc = 0;
    if (topic)
        rc = send_copy(sock, topic, topic_len, f | ZMQ_SNDMORE);
    if (rc == 0)
        rc = send_copy(sock, hdr, hdr_len, f | (has_pay ? ZMQ_SNDMORE : 0));
    if (rc == 0 && has_pay)
        rc = zmq_msg_send(&pay, sock, f) < 0 ? -1 : 0;
    if (rc < 0) {
        int e = errno;
        if (has_pay)
            zmq_msg_close(&pay); /* unsent: runs ffn (zero-copy) or frees the copy */
        errno = e;
        return -1;
    }
    return 0;
}
