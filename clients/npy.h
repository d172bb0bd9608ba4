/* npy.h — a strict reader of NumPy's .npy files (format versions 1.0, 2.0 and 3.0, as
 * numpy.save writes them), for arrays of numbers users hand to the tools, such as the
 * projection matrices of `tomolive recon --matrices` (cone_read.h).
 *
 * Only what numpy.save writes for a plain float array is taken: dtype float64 or float32
 * ('<f8', '<f4': little-endian; numpy writes '<' on every little-endian machine), C order
 * (fortran_order False), any shape. Everything else (big-endian, integers, structured
 * dtypes, Fortran order, a header that is not the dict numpy writes, a file whose size is
 * not the header plus the data) is refused with a message naming the file and what is
 * wrong, rather than guessed at. The values come back as float64 in C order, decoded byte
 * by byte, so the host's byte order does not matter.
 *
 *   tl_npy a;
 *   if (tl_npy_read(path, &a, err, sizeof err) != 0) ...;
 *   ... a.ndim, a.shape[0..ndim-1], a.data[0..a.count-1] ...
 *   tl_npy_free(&a);
 */
#ifndef TL_NPY_H
#define TL_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TL_NPY_MAX_DIMS 8

typedef struct {
    uint32_t ndim;
    uint64_t shape[TL_NPY_MAX_DIMS];
    size_t count;  /* product of the shape */
    double *data;  /* count values, C order (malloc'ed) */
    int item_size; /* in the file: 8 (float64) or 4 (float32) */
} tl_npy;

/* Whether the file at path starts with the .npy magic ("\x93NUMPY"). */
bool tl_npy_is(const char *path);

/* Reads the whole array; 0, or -1 with a message in err (a is then empty). */
int tl_npy_read(const char *path, tl_npy *a, char *err, size_t errlen);

void tl_npy_free(tl_npy *a);

#endif
