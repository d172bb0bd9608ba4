/* cone_truth.c — the true mid-plane slice of a cone-beam sample (cone_truth.h). */
#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "clients/tiff.h"
#include "tests/integration/cone_truth.h"
#include "tests/testutil.h"

float *tl_cone_read_slice(const char *path, uint32_t h, uint32_t w)
{
    tl_tiff_reader r;
    char err[256];
    ck_assert_msg(tl_tiff_open(&r, path, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(r.rows, h);
    ck_assert_uint_eq(r.cols, w);
    float *px = malloc((size_t)h * w * sizeof *px);
    ck_assert_msg(px && tl_tiff_read_page(&r, 0, px, err, sizeof err) == 0, "%s", err);
    tl_tiff_close(&r);
    return px;
}

void tl_cone_truth(const tl_phantom *ph, double unit, uint32_t h, uint32_t w, float *out)
{
    for (uint32_t r = 0; r < h; r++)
        for (uint32_t c = 0; c < w; c++) {
            double sum = 0;
            for (int a = 0; a < 4; a++)
                for (int b = 0; b < 4; b++) {
                    double x = c - (w - 1) / 2.0 + (b - 1.5) / 4.0;
                    double y = (h - 1) / 2.0 - r + (a - 1.5) / 4.0;
                    sum += tl_phantom_value(ph, x * unit, y * unit, 0.0);
                }
            out[(size_t)r * w + c] = (float)(sum / 16 * unit);
        }
}

/* Whether truth is the same over the 3 x 3 pixels around (r, c). */
static int flat(const float *t, uint32_t h, uint32_t w, uint32_t r, uint32_t c)
{
    if (r == 0 || c == 0 || r + 1 >= h || c + 1 >= w)
        return 0;
    float v = t[(size_t)r * w + c];
    for (int dr = -1; dr <= 1; dr++)
        for (int dc = -1; dc <= 1; dc++)
            if (fabsf(t[(size_t)(r + dr) * w + c + dc] - v) > 1e-6f * fabsf(v) + 1e-12f)
                return 0;
    return 1;
}

tl_cone_diff tl_cone_compare(const float *rec, const float *truth, uint32_t h, uint32_t w,
                             double radius)
{
    tl_cone_diff d = {0};
    double se = 0, st = 0, fe = 0, ft = 0, fa = 0, fb = 0;
    double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;
    for (uint32_t r = 0; r < h; r++)
        for (uint32_t c = 0; c < w; c++) {
            double x = c - (w - 1) / 2.0, y = (h - 1) / 2.0 - r;
            if (x * x + y * y > radius * radius)
                continue;
            double a = rec[(size_t)r * w + c], b = truth[(size_t)r * w + c];
            d.pixels++;
            se += (a - b) * (a - b);
            st += b * b;
            sa += a, sb += b, saa += a * a, sbb += b * b, sab += a * b;
            if (b > 0 && flat(truth, h, w, r, c)) {
                d.flat_pixels++;
                fe += (a - b) * (a - b);
                ft += b * b;
                fa += a;
                fb += b;
            }
        }
    double n = d.pixels, va = saa - sa * sa / n, vb = sbb - sb * sb / n;
    d.rel = st > 0 ? sqrt(se / st) : INFINITY;
    d.rel_flat = ft > 0 ? sqrt(fe / ft) : INFINITY;
    d.scale_flat = fb > 0 ? fa / fb : INFINITY;
    d.corr = va > 0 && vb > 0 ? (sab - sa * sb / n) / sqrt(va * vb) : 0;
    return d;
}
