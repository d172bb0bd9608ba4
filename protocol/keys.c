/* keys.c — a map's keys must be strings and unique.
 *
 * Duplicate keys would make a header mean different things to different readers (first wins
 * here, last wins in Python), so they are an error, not a tie to break. Small maps (every
 * ordinary header) are checked pairwise with no memory at all; large ones (a hostile 64 KiB
 * header holds up to ~16k entries) are sorted, so the check stays O(n log n) whatever keys an
 * attacker picks. The sort is an in-place heapsort over key pointers borrowed from the
 * decoder's zone: no malloc, no recursion, no worst case.
 */
#include "config.h"

#include <string.h>

#include "protocol/protocol.h"
#include "protocol/proto_internal.h"

#define PAIRWISE_MAX 32

static int key_cmp(const msgpack_object_str *a, const msgpack_object_str *b)
{
    if (a->size != b->size)
        return a->size < b->size ? -1 : 1;
    return a->size ? memcmp(a->ptr, b->ptr, a->size) : 0;
}

static void sift_down(const msgpack_object_str **k, size_t root, size_t n)
{
    for (;;) {
        size_t child = 2 * root + 1;
        if (child >= n)
            return;
        if (child + 1 < n && key_cmp(k[child], k[child + 1]) < 0)
            child++;
        if (key_cmp(k[root], k[child]) >= 0)
            return;
        const msgpack_object_str *t = k[root];
        k[root] = k[child];
        k[child] = t;
        root = child;
    }
}

static void heapsort_keys(const msgpack_object_str **k, size_t n)
{
    for (size_t i = n / 2; i-- > 0;)
        sift_down(k, i, n);
    for (size_t end = n; end-- > 1;) {
        const msgpack_object_str *t = k[0];
        k[0] = k[end];
        k[end] = t;
        sift_down(k, 0, end);
    }
}

static tl_proto_err dup(const msgpack_object_str *k, const char *what, tl_proto_error *err)
{
    char q[48];
    tlp_quote(q, sizeof q, k->ptr, k->size, 40);
    return tl_proto_fail(err, TL_PROTO_E_DUP_KEY, "%s: duplicate key \"%s\"", what, q);
}

tl_proto_err tlp_check_keys(const msgpack_object *map, msgpack_zone *zone, const char *what,
                            tl_proto_error *err)
{
    const msgpack_object_map *m = &map->via.map;
    for (uint32_t i = 0; i < m->size; i++) {
        if (m->ptr[i].key.type != MSGPACK_OBJECT_STR)
            return tl_proto_fail(err, TL_PROTO_E_NOT_MAP, "%s: key #%u is a %s, not a str", what,
                                 (unsigned)i + 1, tlp_object_type_name(&m->ptr[i].key));
    }
    if (m->size <= PAIRWISE_MAX) {
        for (uint32_t i = 1; i < m->size; i++)
            for (uint32_t j = 0; j < i; j++)
                if (key_cmp(&m->ptr[i].key.via.str, &m->ptr[j].key.via.str) == 0)
                    return dup(&m->ptr[i].key.via.str, what, err);
        return TL_PROTO_OK;
    }
    const msgpack_object_str **k = msgpack_zone_malloc(zone, m->size * sizeof *k);
    if (!k)
        return tl_proto_fail(err, TL_PROTO_E_RESOURCE, "%s: out of memory checking keys", what);
    for (uint32_t i = 0; i < m->size; i++)
        k[i] = &m->ptr[i].key.via.str;
    heapsort_keys(k, m->size);
    for (uint32_t i = 1; i < m->size; i++)
        if (key_cmp(k[i - 1], k[i]) == 0)
            return dup(k[i], what, err);
    return TL_PROTO_OK;
}
