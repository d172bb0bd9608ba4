/* bitshuffle.h — decoding of the compressed frames detectors send: bitshuffle + LZ4
 * ("bslz4") and plain LZ4, both in the HDF5 filter framing that DECTRIS streams use
 * (cbor/dectris-compression-tag.md), and a bare LZ4 block.
 *
 * Pure functions: the caller owns every buffer (the output is exactly the frame the shape
 * declares, the scratch one block), so decoding allocates nothing. Every input is
 * untrusted: the declared sizes must match what the caller expects, every block must
 * decode to exactly its size, and a payload too small to expand to the declared size (LZ4
 * cannot expand a byte into more than 255) is refused before any work, so a compression
 * bomb costs nothing. Errors return -1 with the reason in why.
 *
 * Framing (HDF5 filters 32008 bitshuffle and 32004 LZ4): a 12-byte header, big-endian
 * uint64 total decompressed bytes and uint32 block bytes, then per block a big-endian
 * uint32 compressed size and that many bytes of LZ4 block data. bslz4 blocks hold
 * bit-transposed groups of elements: bit k of byte j of element i is bit i of bit-row
 * 8j + k (rows of n/8 bytes, least significant bit first); a trailing group of fewer than 8
 * elements is stored raw after the last block. LZ4 framing stores a block raw when its
 * compressed size equals its decompressed size.
 */
#ifndef TL_BITSHUFFLE_H
#define TL_BITSHUFFLE_H

#include <stddef.h>
#include <stdint.h>

/* LZ4 expands one input byte into at most 255 output bytes: larger claims are bombs. */
#define TL_LZ4_MAX_RATIO 255u

/* Undoes the bit transposition of one block of n elements (n a multiple of 8) of elem
 * bytes each (1, 2, 4 or 8): in and out are n * elem bytes and must not overlap. */
int tl_bitshuffle_untranspose(const void *in, void *out, size_t n, size_t elem);

/* The 12-byte header of either framing: total bytes and block bytes. 0 or -1. */
int tl_bitshuffle_header(const void *in, size_t len, uint64_t *total, uint32_t *block, char *why,
                         size_t whylen);

/* Decodes a bslz4 payload of elements of elem bytes into out (outlen bytes: what the shape
 * declares). scratch holds at least one block (*scratch_need says how much a payload
 * wants: call tl_bitshuffle_scratch first). 0, or -1 with why. */
int tl_bitshuffle_decode_bslz4(const void *in, size_t len, size_t elem, void *out, size_t outlen,
                               void *scratch, size_t scratch_len, char *why, size_t whylen);
/* Scratch bytes a bslz4 payload needs (its block size), or 0 if its header is unusable. */
size_t tl_bitshuffle_scratch(const void *in, size_t len);

/* Decodes an LZ4 payload in HDF5 framing into out (outlen bytes). 0 or -1. */
int tl_lz4_decode_hdf5(const void *in, size_t len, void *out, size_t outlen, char *why,
                       size_t whylen);

/* Decodes one bare LZ4 block that must expand to exactly outlen bytes. 0 or -1. */
int tl_lz4_decode_block(const void *in, size_t len, void *out, size_t outlen, char *why,
                        size_t whylen);

#endif
