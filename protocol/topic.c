/* topic.c — the subscription topics of a slice: "slice/<id>/" (pixels in the message) and
 * "shm/<id>/" (pixels in shared memory, PROTOCOL.md §10.1).
 *
 * ZeroMQ SUB filters by byte prefix, so "slice/1" would also match "slice/10"; the trailing
 * '/' terminates the id (which cannot contain '/') and makes every topic prefix-free.
 */
#include "config.h"

#include <string.h>

#include "protocol/protocol.h"
#include "protocol/proto_internal.h"

static size_t topic(const char *prefix, char *buf, size_t cap, const char *id, size_t id_len)
{
    size_t n = strlen(prefix) + id_len + 1;
    if (!buf || !tlp_slice_id_valid(id, id_len) || n + 1 > cap)
        return 0;
    memcpy(buf, prefix, strlen(prefix));
    memcpy(buf + strlen(prefix), id, id_len);
    buf[n - 1] = '/';
    buf[n] = '\0'; /* convenient for logs; the topic itself is the n bytes before it */
    return n;
}

size_t tl_proto_slice_topic(char *buf, size_t cap, const char *id, size_t id_len)
{
    return topic("slice/", buf, cap, id, id_len);
}

size_t tl_proto_shm_topic(char *buf, size_t cap, const char *id, size_t id_len)
{
    return topic("shm/", buf, cap, id, id_len);
}
