/* json_arena.h — JSON message headers parsed by jansson into a per-thread arena.
 *
 * The JSON formats (DECTRIS Stream V1, the JSON header + blob presets) parse every message
 * header; the arena is reset when the last parse of a message is released, so headers
 * allocate nothing in the steady state; a thread's arena (1 MiB) is freed when the thread
 * exits. The typed getters turn missing keys, wrong types and out-of-range values into the
 * protocol's error codes.
 *
 *   json_t *h = tl_json_parse(data, len, "header", &err);
 *   if (!h) reject(err);
 *   if (tl_json_get_u64(h, "series", &id, &err) < 0) ...
 *   tl_json_done(h);
 */
#ifndef TL_JSON_ARENA_H
#define TL_JSON_ARENA_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/protocol.h"

/* Parses a JSON object from a message part into the calling thread's arena (installed on
 * first use); NULL with err set (E_MALFORMED, E_NOT_MAP) otherwise. Release every parse
 * with tl_json_done (nested parses too); the arena is reset when the last one is done. */
json_t *tl_json_parse(const void *data, size_t len, const char *what, tl_proto_error *err);
void tl_json_done(json_t *j);

/* Typed getters: absent -> 0 (out untouched), wrong type or range -> -1 with err
 * (E_KEY_TYPE, E_RANGE), present -> 1. Dotted paths look into nested objects. */
int tl_json_get_u64(json_t *o, const char *path, uint64_t *out, tl_proto_error *err);
int tl_json_get_num(json_t *o, const char *path, double *out, tl_proto_error *err);
int tl_json_get_str(json_t *o, const char *path, const char **out, tl_proto_error *err);
int tl_json_get_bool(json_t *o, const char *path, bool *out, tl_proto_error *err);
/* A [rows, cols] array of positive integers within the protocol's limits. */
int tl_json_get_shape(json_t *o, const char *path, uint32_t out[2], tl_proto_error *err);

#endif
