/* json_arena.c — see json_arena.h. */
#include <config.h>

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/ingest/json_arena.h"

#define ARENA_BYTES (1u << 20)

static _Thread_local struct {
    char *base;
    size_t used;
    int depth; /* parses not yet done: the arena resets when none is left */
} arena;

static void *arena_alloc(size_t n)
{
    size_t need = (n + 15) & ~(size_t)15;
    if (arena.base && need <= ARENA_BYTES - arena.used) {
        void *p = arena.base + arena.used;
        arena.used += need;
        return p;
    }
    return malloc(n); /* a header larger than the arena: correct, just not free of malloc */
}

static void arena_free(void *p)
{
    if (arena.base && (char *)p >= arena.base && (char *)p < arena.base + ARENA_BYTES)
        return; /* reset wholesale by tl_json_done */
    free(p);
}

static pthread_once_t arena_once = PTHREAD_ONCE_INIT;
static pthread_key_t arena_key;
static bool arena_key_ok;

/* A thread's arena lives as long as the thread, not as an adapter: an adapter made and
 * destroyed per input (the fuzz harness) would otherwise map and unmap 1 MiB per input,
 * which under ASan is nearly all of the fuzzer's time. */
static void arena_thread_exit(void *base)
{
    free(base);
}

static void arena_install(void)
{
    /* process-wide, but only this thread's arena is ever active: other threads' jansson
     * calls fall through to malloc and free */
    json_set_alloc_funcs(arena_alloc, arena_free);
    arena_key_ok = pthread_key_create(&arena_key, arena_thread_exit) == 0;
}

json_t *tl_json_parse(const void *data, size_t len, const char *what, tl_proto_error *err)
{
    pthread_once(&arena_once, arena_install);
    if (!arena.base) {
        /* without the key no destructor would free it: then no arena, headers use malloc */
        arena.base = arena_key_ok ? malloc(ARENA_BYTES) : NULL;
        if (arena.base && pthread_setspecific(arena_key, arena.base) != 0) {
            free(arena.base);
            arena.base = NULL;
        }
    }
    json_error_t je;
    json_t *j = json_loadb(data, len, JSON_REJECT_DUPLICATES, &je);
    if (j)
        arena.depth++;
    else if (arena.depth == 0)
        arena.used = 0; /* what the failed parse took */
    if (!j) {
        tl_proto_fail(err, TL_PROTO_E_MALFORMED, "%s is not JSON: %s (column %d)", what, je.text,
                      je.column);
        return NULL;
    }
    if (!json_is_object(j)) {
        tl_json_done(j);
        tl_proto_fail(err, TL_PROTO_E_NOT_MAP, "%s is not a JSON object", what);
        return NULL;
    }
    return j;
}

void tl_json_done(json_t *j)
{
    json_decref(j);
    if (j && --arena.depth <= 0) {
        arena.depth = 0;
        arena.used = 0;
    }
}

static json_t *lookup(json_t *o, const char *path)
{
    char key[64];
    while (o && *path) {
        const char *dot = strchr(path, '.');
        size_t n = dot ? (size_t)(dot - path) : strlen(path);
        if (n >= sizeof key)
            return NULL;
        memcpy(key, path, n);
        key[n] = 0;
        o = json_is_object(o) ? json_object_get(o, key) : NULL;
        path += n + (dot ? 1 : 0);
    }
    return o;
}

int tl_json_get_u64(json_t *o, const char *path, uint64_t *out, tl_proto_error *err)
{
    json_t *v = lookup(o, path);
    if (!v)
        return 0;
    if (!json_is_integer(v)) {
        tl_proto_fail(err, TL_PROTO_E_KEY_TYPE, "\"%s\" must be an integer", path);
        return -1;
    }
    if (json_integer_value(v) < 0) {
        tl_proto_fail(err, TL_PROTO_E_RANGE, "\"%s\" is negative", path);
        return -1;
    }
    *out = (uint64_t)json_integer_value(v);
    return 1;
}

int tl_json_get_num(json_t *o, const char *path, double *out, tl_proto_error *err)
{
    json_t *v = lookup(o, path);
    if (!v)
        return 0;
    if (!json_is_number(v)) {
        tl_proto_fail(err, TL_PROTO_E_KEY_TYPE, "\"%s\" must be a number", path);
        return -1;
    }
    *out = json_number_value(v);
    if (!isfinite(*out)) {
        tl_proto_fail(err, TL_PROTO_E_NOT_FINITE, "\"%s\" is not finite", path);
        return -1;
    }
    return 1;
}

int tl_json_get_str(json_t *o, const char *path, const char **out, tl_proto_error *err)
{
    json_t *v = lookup(o, path);
    if (!v)
        return 0;
    if (!json_is_string(v)) {
        tl_proto_fail(err, TL_PROTO_E_KEY_TYPE, "\"%s\" must be a string", path);
        return -1;
    }
    *out = json_string_value(v);
    return 1;
}

int tl_json_get_bool(json_t *o, const char *path, bool *out, tl_proto_error *err)
{
    json_t *v = lookup(o, path);
    if (!v)
        return 0;
    if (!json_is_boolean(v)) {
        tl_proto_fail(err, TL_PROTO_E_KEY_TYPE, "\"%s\" must be true or false", path);
        return -1;
    }
    *out = json_is_true(v);
    return 1;
}

int tl_json_get_shape(json_t *o, const char *path, uint32_t out[2], tl_proto_error *err)
{
    json_t *v = lookup(o, path);
    if (!v)
        return 0;
    if (!json_is_array(v) || json_array_size(v) != 2) {
        tl_proto_fail(err, TL_PROTO_E_KEY_TYPE, "\"%s\" must be an array of 2 integers", path);
        return -1;
    }
    for (int i = 0; i < 2; i++) {
        json_t *d = json_array_get(v, (size_t)i);
        if (!json_is_integer(d)) {
            tl_proto_fail(err, TL_PROTO_E_KEY_TYPE, "\"%s\"[%d] must be an integer", path, i);
            return -1;
        }
        json_int_t x = json_integer_value(d);
        if (x < 1 || x > (json_int_t)TL_PROTO_MAX_DIM) {
            tl_proto_fail(err, TL_PROTO_E_RANGE, "\"%s\"[%d] = %lld is out of range 1..%u", path,
                          i, (long long)x, TL_PROTO_MAX_DIM);
            return -1;
        }
        out[i] = (uint32_t)x;
    }
    return 1;
}
