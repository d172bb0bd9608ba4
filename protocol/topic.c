/* topic.c — the subscription topic of a slice: "slice/<id>/".
 *
 * ZeroMQ SUB filters by byte prefix, so "slice/1" would also match "slice/10"; the trailing
 * '/' terminates the id (which cannot contain '/') and makes every topic prefix-free.
 */
#include "config.h"

#include <string.h>

#include "protocol/protocol.h"
#include "protocol/proto_internal.h"

#define PREFIX "slice/"

size_t tl_proto_slice_topic(char *buf, size_t cap, const char *id, size_t id_len)
{
    size_t n = strlen(PREFIX) + id_len + 1;
    if (!buf || !tlp_slice_id_valid(id, id_len) || n + 1 > cap)
        return 0;
    memcpy(buf, PREFIX, strlen(PREFIX));
    memcpy(buf + strlen(PREFIX), id, id_len);
    buf[n - 1] = '/';
    buf[n] = '\0'; /* convenient for logs; the topic itself is the n bytes before it */
    return n;
}
