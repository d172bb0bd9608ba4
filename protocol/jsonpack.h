/* jsonpack.h — JSON <-> msgpack for `tomolive ctl`, the daemon's page and the test fixtures
 * (jansson on one side, msgpack-c on the other): command-line arguments become a request's
 * args map, a reply's result becomes pretty-printed JSON. In its own file so the unit tests can check the rules
 * without a daemon.
 *
 * JSON -> msgpack: objects -> maps (keys in order), arrays -> arrays, integers -> the
 * shortest unsigned encoding when >= 0 (the protocol's u64/u32 accept any integer
 * encoding), signed otherwise, reals -> float64, strings -> str, true/false/null.
 *
 * msgpack -> JSON: as above, and for what JSON cannot say directly: unsigned integers
 * above 2^63 - 1 become reals (jansson integers are signed 64-bit), NaN and infinities
 * become null, bin becomes {"$bin": "<base64>"}, ext {"$ext": type, "$data": "<base64>"},
 * a map key that is not a string its JSON text, a string that is not UTF-8 has its
 * offending bytes replaced by '?'.
 */
#ifndef TL_JSONPACK_H
#define TL_JSONPACK_H

#include <stddef.h>

#include <jansson.h>
#include <msgpack.h>

/* Packs one JSON value as one msgpack object. Returns 0, or -1 when out of memory. */
int tl_json_pack(msgpack_packer *pk, const json_t *v);

/* A new JSON value for a msgpack object (NULL only when out of memory). */
json_t *tl_json_from_msgpack(const msgpack_object *o);

/* The value of a key=value argument: the text parsed as JSON when it is valid JSON
 * (numbers, arrays, objects, true/false/null, "quoted strings"), the text itself as a
 * string otherwise. NULL (with err) when the text is not UTF-8. */
json_t *tl_json_value_or_string(const char *text, char *err, size_t errlen);

/* The args of a request from command-line arguments: either exactly one JSON object
 * (an argument beginning with '{'), or key=value pairs (the key non-empty, split at the
 * first '=', each key once). argc == 0 gives an empty object. A new object, or NULL with
 * a message in err. */
json_t *tl_json_args(int argc, char *const *argv, char *err, size_t errlen);

/* Writes the base64 (RFC 4648, padded) of n bytes into a new NUL-terminated string. */
char *tl_base64(const void *data, size_t n);

#endif
