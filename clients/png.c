/* png.c — grayscale PNG previews (see png.h).
 *
 * Percentiles use quickselect on a copy of the finite values (linear time; a 2048² slice
 * is 4 M floats, where sorting would dominate the preview's cost). libpng reports errors
 * by longjmp; its message is kept in a struct handed to the error callback so it can be
 * returned to the caller rather than printed.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <png.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/png.h"

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t errlen, const char *fmt,
                                                      ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* The k-th smallest of v[0..n-1] (0-based); reorders v. */
static float select_kth(float *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        float pivot = v[lo + (hi - lo) / 2];
        size_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                float t = v[i];
                v[i] = v[j];
                v[j] = t;
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return v[k];
    }
    return v[k];
}

static double percentile(float *v, size_t n, double p)
{
    double pos = p / 100.0 * (double)(n - 1);
    if (pos < 0)
        pos = 0;
    if (pos > (double)(n - 1))
        pos = (double)(n - 1);
    size_t k = (size_t)floor(pos);
    double f = pos - (double)k;
    double a = select_kth(v, n, k);
    if (f == 0 || k + 1 >= n)
        return a;
    /* after selecting k, the (k+1)-th smallest is the minimum of the upper part */
    float b = v[k + 1];
    for (size_t i = k + 2; i < n; i++)
        if (v[i] < b)
            b = v[i];
    return a + f * ((double)b - a);
}

int tl_png_percentiles(const float *img, size_t n, double p_lo, double p_hi, double *lo,
                       double *hi)
{
    float *v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return -1;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(img[i]))
            v[m++] = img[i];
    if (m == 0) {
        free(v);
        return -1;
    }
    *lo = percentile(v, m, p_lo);
    *hi = percentile(v, m, p_hi);
    free(v);
    return 0;
}

typedef struct {
    jmp_buf jmp;
    char msg[256];
} png_failure;

static void on_png_error(png_structp png, png_const_charp msg)
{
    png_failure *f = png_get_error_ptr(png);
    snprintf(f->msg, sizeof f->msg, "%s", msg);
    longjmp(f->jmp, 1);
}

static void on_png_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

int tl_png_write_preview(const char *path, const float *img, uint32_t rows, uint32_t cols,
                         const double *limits, char *err, size_t errlen)
{
    if (rows == 0 || cols == 0)
        return fail(err, errlen, "'%s': empty image", path);
    double lo = 0, hi = 0;
    if (limits) {
        lo = limits[0];
        hi = limits[1];
    } else if (tl_png_percentiles(img, (size_t)rows * cols, 0.5, 99.5, &lo, &hi) != 0) {
        lo = hi = 0; /* no finite pixel: a black image says so */
    }
    double scale = hi > lo ? 255.0 / (hi - lo) : 0.0;
    uint8_t *px = malloc((size_t)rows * cols);
    if (!px)
        return fail(err, errlen, "'%s': out of memory", path);
    for (size_t k = 0; k < (size_t)rows * cols; k++) {
        double g = isnan(img[k]) ? 0.0 : ((double)img[k] - lo) * scale;
        px[k] = g <= 0 ? 0 : g >= 255.0 ? 255 : (uint8_t)lrint(g);
    }
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        free(px);
        return fail(err, errlen, "cannot create '%s': %s", path, strerror(errno));
    }
    /* volatile: these are read after longjmp */
    png_failure failure = {.msg = ""};
    png_structp volatile png =
        png_create_write_struct(PNG_LIBPNG_VER_STRING, &failure, on_png_error, on_png_warning);
    png_infop volatile info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info) {
        if (png) {
            png_structp p = png;
            png_destroy_write_struct(&p, NULL);
        }
        fclose(fp);
        free(px);
        return fail(err, errlen, "'%s': libpng initialisation failed", path);
    }
    if (setjmp(failure.jmp)) {
        png_structp p = png;
        png_infop i = info;
        png_destroy_write_struct(&p, &i);
        fclose(fp);
        free(px);
        return fail(err, errlen, "'%s': %s", path, failure.msg);
    }
    png_init_io(png, fp);
    png_set_IHDR(png, info, cols, rows, 8, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (uint32_t r = 0; r < rows; r++)
        png_write_row(png, px + (size_t)r * cols);
    png_write_end(png, NULL);
    png_structp p = png;
    png_infop i = info;
    png_destroy_write_struct(&p, &i);
    free(px);
    if (fclose(fp) != 0)
        return fail(err, errlen, "'%s': write failed: %s", path, strerror(errno));
    return 0;
}
