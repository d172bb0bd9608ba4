/* volume_convert.h — float32 samples into a volume file's 16-bit types (volume_output.h),
 * vectorised where the CPU allows, bit for bit the scalar definitions:
 *
 *   half  IEEE binary16, round to nearest even, subnormals kept, overflow to infinity, signed
 *         zeros kept, NaN as the quiet NaN of its sign with no payload (0x7e00 | sign).
 *   u16   nearbyint((v - offset) * scale) in double, clamped to 0 .. 65535, NaN -> 0 (the
 *         current rounding mode: round to nearest even unless a caller changed it).
 *
 * The vector paths (x86-64: F16C for half, AVX for u16) are chosen at run time
 * (__builtin_cpu_supports), so one binary runs on any x86-64 and uses what it finds; the
 * scalar functions are the definitions, for other CPUs and for the tests
 * (tests/unit/check_volume_convert.c holds the two paths to each other and the scalar one
 * to known values). Each call converts n samples of one buffer: the callers split a slab
 * across threads (volume_slab.c).
 */
#ifndef TL_VOLUME_CONVERT_H
#define TL_VOLUME_CONVERT_H

#include <stddef.h>
#include <stdint.h>

void tl_half_of_floats(uint16_t *dst, const float *src, size_t n);
void tl_half_of_floats_scalar(uint16_t *dst, const float *src, size_t n);

void tl_u16_of_floats(uint16_t *dst, const float *src, size_t n, double offset, double scale);
void tl_u16_of_floats_scalar(uint16_t *dst, const float *src, size_t n, double offset,
                             double scale);

/* Widens [*lo, *hi] to the finite samples of src (NaN and infinities skipped). An earlier
 * extreme is kept over an equal later one (-0 and 0), so scanning a slab in consecutive
 * pieces, in order, gives what one scan of the whole gives. */
void tl_finite_range(const float *src, size_t n, float *lo, float *hi);

/* "f16c+avx", "avx" or "scalar": the paths this CPU runs. */
const char *tl_convert_paths(void);

#endif
