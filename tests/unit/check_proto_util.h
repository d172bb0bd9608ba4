/* check_proto_util.h — helpers for the protocol tests: build msgpack headers from a compact
 * JSON-like text, so that each test case reads as the header it sends.
 *
 * Syntax (a JSON superset, whitespace ignored):
 *   {k: v, ...}   map; keys may be any value (so non-string keys can be written)
 *   [a, b, ...]   array
 *   "text"        str (escapes: \" \\ \n)      b"text"  bin
 *   123 -5        integers: unsigned when >= 0, signed when negative (shortest encoding)
 *   1.5 -2e3      float64        f32(1.5)  float32
 *   true false null   NaN Infinity -Infinity (float64)
 * The text is trusted (test code): a syntax error aborts the test.
 */
#ifndef TL_CHECK_PROTO_UTIL_H
#define TL_CHECK_PROTO_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

/* Appends the msgpack encoding of text to buf. */
void tlt_pack_text(msgpack_sbuffer *buf, const char *text);

/* Decodes hex text ("c4 ff 00", spaces ignored) into out (cap bytes); returns the length. */
size_t tlt_hex(uint8_t *out, size_t cap, const char *hex);

/* A frame/scan/slice header written as text with one key changed: the base header's entry
 * for key is replaced by `value` (text), removed when value is NULL, or appended when the
 * base has no such key. Returns a static buffer (tests are single-threaded). */
const char *tlt_with(const char *base, const char *key, const char *value);

#endif
