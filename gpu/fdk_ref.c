/* fdk_ref.c — float64 CPU FDK reference (fdk_ref.h).
 *
 * Design choice: the filter is applied as a direct circular convolution with the spatial
 * kernel k[m] = IDFT(H)[m] over the padded length, computed once. That is exactly what
 * irfft(rfft(padded row) * H / P) computes, without an FFT library, and it is cheap at
 * reference sizes (cols^2 per row).
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/fdk_ref.h"
#include "gpu/geometry/cone.h"
#include "gpu/method/filter.h"
#include "gpu/project_ref.h"

/* k[m] for m = 0 .. padded - 1: the real, even inverse DFT of the half spectrum H. */
static void spatial_kernel(const double *H, size_t padded, double *k)
{
    size_t half = padded / 2;
    for (size_t m = 0; m < padded; m++) {
        double s = H[0] + H[half] * ((m & 1) ? -1.0 : 1.0);
        for (size_t j = 1; j < half; j++)
            s += 2.0 * H[j] * cos(2.0 * M_PI * (double)j * (double)m / (double)padded);
        k[m] = s / (double)padded;
    }
}

/* Cosine weight and ramp filter of one projection into q. */
static void filter_projection(const double P[12], const double *p, uint32_t rows, uint32_t cols,
                              const double *k, size_t padded, double *row, double *q)
{
    double fu, fv, u0, v0;
    tl_cone_matrix_intrinsics(P, &fu, &fv, &u0, &v0);
    double tau = P[11] / fu;
    for (uint32_t v = 0; v < rows; v++) {
        for (uint32_t u = 0; u < cols; u++) {
            double a = (u - u0) / fu, b = (v - v0) / fv;
            row[u] = p[(size_t)v * cols + u] / sqrt(1.0 + a * a + b * b);
        }
        for (uint32_t u = 0; u < cols; u++) {
            double s = 0;
            for (uint32_t j = 0; j < cols; j++)
                s += row[j] * k[((size_t)u + padded - j) % padded];
            q[(size_t)v * cols + u] = s / tau;
        }
    }
}

tl_status tl_fdk_reference(const double (*P)[12], uint32_t n, const double *proj, uint32_t rows,
                           uint32_t cols, tl_filter filter, const tl_fdk_volume *vol, double *out,
                           tl_errbuf *eb)
{
    if (n == 0 || rows == 0 || cols == 0 || vol->nx == 0 || vol->ny == 0 || vol->nz == 0)
        return tl_fail(eb, TL_EINVAL,
                       "fdk: empty input (%u views of %u x %u, volume %u x %u x %u)", n, rows,
                       cols, vol->nx, vol->ny, vol->nz);
    if (!(isfinite(vol->voxel) && vol->voxel > 0))
        return tl_fail(eb, TL_EINVAL, "fdk: voxel size %g mm must be finite and > 0", vol->voxel);
    if ((unsigned)filter >= TL_FILTER_COUNT)
        return tl_fail(eb, TL_EINVAL, "fdk: unknown filter %d", (int)filter);
    tl_cone_box box = tl_cone_volume_box(vol->nx, vol->ny, vol->nz, vol->voxel);
    for (uint32_t s = 0; s < n; s++) {
        tl_status st = tl_cone_matrix_check(P[s], &box, eb);
        if (st != TL_OK) {
            char why[sizeof eb->msg];
            memcpy(why, eb->msg, sizeof why);
            return tl_fail(eb, st, "fdk: view %u: %s", s, why);
        }
    }
    size_t padded = tl_filter_padded_length(cols), npix = (size_t)rows * cols;
    double *H = malloc((padded / 2 + 1) * sizeof *H), *k = malloc(padded * sizeof *k);
    double *row = malloc(cols * sizeof *row), *q = malloc(n * npix * sizeof *q);
    tl_status st = TL_OK;
    if (!H || !k || !row || !q) {
        st = tl_fail(eb, TL_ENOMEM, "fdk: no memory for %u views of %u x %u filtered rows", n,
                     rows, cols);
        goto done;
    }
    if ((st = tl_filter_response(filter, padded, H)) != TL_OK) {
        st = tl_fail(eb, st, "fdk: filter design failed for %zu-point rows", padded);
        goto done;
    }
    spatial_kernel(H, padded, k);
    for (uint32_t s = 0; s < n; s++)
        filter_projection(P[s], proj + (size_t)s * npix, rows, cols, k, padded, row,
                          q + (size_t)s * npix);
    /* step 3: the voxel-driven back projection, which the matched projector transposes */
    tl_cb_volume g = {.vol = *vol, .rows = rows, .cols = cols, .n = n, .P = P};
    if ((st = tl_backproject_cone(&g, TL_PROJECTOR_MATCHED, q, out, eb)) != TL_OK)
        goto done;
    size_t nvox = (size_t)vol->nx * vol->ny * vol->nz;
    for (size_t m = 0; m < nvox; m++)
        out[m] *= M_PI / n;
done:
    free(H);
    free(k);
    free(row);
    free(q);
    return st;
}
