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

/* Bilinear sample at (u, v), zero outside the rows x cols detector. */
static double sample(const double *q, uint32_t rows, uint32_t cols, double u, double v)
{
    if (!(u > -1.0 && u < cols && v > -1.0 && v < rows))
        return 0.0;
    double fu = floor(u), fv = floor(v);
    long i = (long)fu, j = (long)fv;
    double a = u - fu, b = v - fv, s = 0;
    for (int dj = 0; dj < 2; dj++)
        for (int di = 0; di < 2; di++) {
            long ii = i + di, jj = j + dj;
            if (ii < 0 || jj < 0 || ii >= (long)cols || jj >= (long)rows)
                continue;
            s += (di ? a : 1 - a) * (dj ? b : 1 - b) * q[(size_t)jj * cols + ii];
        }
    return s;
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
    size_t padded = tl_filter_padded_length(cols);
    double *H = malloc((padded / 2 + 1) * sizeof *H), *k = malloc(padded * sizeof *k);
    double *row = malloc(cols * sizeof *row), *q = malloc((size_t)rows * cols * sizeof *q);
    tl_status st = TL_OK;
    if (!H || !k || !row || !q) {
        st = tl_fail(eb, TL_ENOMEM, "fdk: no memory for %u x %u filtered rows", rows, cols);
        goto done;
    }
    if ((st = tl_filter_response(filter, padded, H)) != TL_OK) {
        st = tl_fail(eb, st, "fdk: filter design failed for %zu-point rows", padded);
        goto done;
    }
    spatial_kernel(H, padded, k);

    size_t nvox = (size_t)vol->nx * vol->ny * vol->nz;
    memset(out, 0, nvox * sizeof *out);
    double cx = 0.5 * (vol->nx - 1.0), cy = 0.5 * (vol->ny - 1.0), cz = 0.5 * (vol->nz - 1.0);
    for (uint32_t s = 0; s < n; s++) {
        filter_projection(P[s], proj + (size_t)s * rows * cols, rows, cols, k, padded, row, q);
        double d = P[s][11];
        for (uint32_t kk = 0; kk < vol->nz; kk++)
            for (uint32_t j = 0; j < vol->ny; j++)
                for (uint32_t i = 0; i < vol->nx; i++) {
                    double x[3] = {(i - cx) * vol->voxel, (j - cy) * vol->voxel,
                                   (kk - cz) * vol->voxel};
                    double u, v, w;
                    if (!tl_cone_project(P[s], x, &u, &v, &w))
                        continue; /* cannot happen: the check put the box in front */
                    out[((size_t)kk * vol->ny + j) * vol->nx + i] +=
                        (d / w) * (d / w) * sample(q, rows, cols, u, v);
                }
    }
    for (size_t m = 0; m < nvox; m++)
        out[m] *= M_PI / n;
done:
    free(H);
    free(k);
    free(row);
    free(q);
    return st;
}
