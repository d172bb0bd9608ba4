/* adapters_seeds.h — writing inputs of the ingest adapters' fuzz harness (fuzz_adapters.h)
 * and the messages in them: what the seed generator (gen_adapters_corpus.c) and the replay
 * driver (check_adapters_corpus.c) share.
 *
 *   tlt_fz_buf in = {0}, msg = {0};
 *   tlt_fz_begin(&in, TLT_FZ_DECTRIS2);
 *   tlt_d2_start(&msg, 1, 514, 1030, 10);
 *   tlt_fz_msg1(&in, msg.data, msg.len);       // a one-part message
 *   ...; tlt_fz_write(&in, "dir/name"); tlt_fz_free(&in);
 *
 * CBOR is written head by head (RFC 8949 §3): enough for DECTRIS Stream V2 messages, with
 * the tags detectors send (55799 self-describe, 40 MultiDimArray, 64..85 typed arrays,
 * 56500 DECTRIS compression). The compressors write the HDF5 filter framings that
 * daemon/ingest/bitshuffle.h reads.
 */
#ifndef TL_ADAPTERS_SEEDS_H
#define TL_ADAPTERS_SEEDS_H

#include <stddef.h>
#include <stdint.h>

#include "tests/fuzz/fuzz_adapters.h"

typedef struct {
    uint8_t *data;
    size_t len, cap;
} tlt_fz_buf;

void tlt_fz_put(tlt_fz_buf *b, const void *data, size_t n);
void tlt_fz_clear(tlt_fz_buf *b);
void tlt_fz_free(tlt_fz_buf *b);
/* Writes the buffer to path; exits on failure. */
void tlt_fz_write(const tlt_fz_buf *b, const char *path);

/* An input: the selector, then messages of 1..4 parts. */
void tlt_fz_begin(tlt_fz_buf *in, uint8_t selector);
void tlt_fz_msg(tlt_fz_buf *in, int nparts, const void *const *parts, const size_t *lens);
void tlt_fz_msg1(tlt_fz_buf *in, const void *data, size_t len);

/* CBOR: a head of major type major (0 uint, 2 bytes, 3 text, 4 array, 5 map, 6 tag, 7
 * simple/float) with argument v; a text; a byte string; a double. */
void tlt_cb_head(tlt_fz_buf *b, int major, uint64_t v);
void tlt_cb_text(tlt_fz_buf *b, const char *s);
void tlt_cb_bytes(tlt_fz_buf *b, const void *p, size_t n);
void tlt_cb_double(tlt_fz_buf *b, double v);

/* A DECTRIS Stream V2 start message as detectors open it (tag 55799, the keys tomolive
 * reads and one it skips), with extra_keys more key/value pairs written after it by the
 * caller. */
void tlt_d2_start(tlt_fz_buf *b, uint64_t series, uint32_t rows, uint32_t cols, uint32_t nimages,
                  int extra_keys);
/* An image message of one channel "threshold_1": rows x cols samples of elem bytes under
 * typed-array tag, raw (content NULL) or the given compressed content (the 56500 tag's
 * [algorithm, elem, bytes]: algorithm "bslz4" or "lz4"). */
void tlt_d2_image(tlt_fz_buf *b, uint64_t series, uint64_t id, uint32_t rows, uint32_t cols,
                  uint64_t tag, const void *px, size_t elem, const char *algorithm,
                  const tlt_fz_buf *content);
/* A MultiDimArray (tag 40 [[rows, cols], tag(typed) ...]) as tlt_d2_image writes it. */
void tlt_d2_array(tlt_fz_buf *b, uint32_t rows, uint32_t cols, uint64_t tag, const void *px,
                  size_t elem, const char *algorithm, const tlt_fz_buf *content);

/* n elements of elem bytes in bitshuffle + LZ4 (HDF5 filter 32008) with blocks of block
 * elements (a multiple of 8); LZ4 (32004) with blocks of block bytes; into out (cleared). */
void tlt_bslz4(const void *px, size_t n, size_t elem, size_t block, tlt_fz_buf *out);
void tlt_lz4_hdf5(const void *px, size_t bytes, size_t block, tlt_fz_buf *out);

#endif
