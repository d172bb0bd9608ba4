/* compress_encode.h — the compressed payloads detectors send, made by the tests: HDF5-framed
 * LZ4 and bitshuffle-LZ4 (as in DECTRIS's compression tag 56500, and HDF5 filters 32004 and
 * 32008), so the decoders (daemon/ingest/bitshuffle.h) are tested against an encoder of our
 * own rather than against themselves. The bit transposition is the straightforward
 * reference, one bit at a time.
 *
 *   uint8_t buf[...];
 *   size_t n = tlt_bslz4(px, npix, 2, buf);                     uint16 pixels, 128 per block
 *   size_t m = tlt_lz4_hdf5(px, bytes, 8192, buf, sizeof buf);   0 if it did not fit
 */
#ifndef TL_TESTS_COMPRESS_ENCODE_H
#define TL_TESTS_COMPRESS_ENCODE_H

#include <stddef.h>
#include <stdint.h>

/* v as n big-endian bytes at p. */
void tlt_put_be(uint8_t *p, uint64_t v, int n);
/* n elements of elem bytes, bitshuffled in blocks of 128 (a short last block, and the
 * elements beyond a multiple of 8 copied as they are) and each block LZ4-compressed, after
 * the 12-byte header (total bytes, block bytes). Returns the length written. */
size_t tlt_bslz4(const void *data, size_t n, size_t elem, uint8_t *out);
/* bytes of data as one LZ4 block after the 16-byte HDF5 header (total bytes, the block size
 * it declares, compressed bytes). Returns the length written, or 0 when cap is too small. */
size_t tlt_lz4_hdf5(const void *data, size_t bytes, uint32_t block, uint8_t *out, size_t cap);

#endif
