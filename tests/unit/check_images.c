/* check_images.c — TIFF stacks and PNG previews (clients/tiff.h, clients/png.h).
 *
 * Round trips go through our writer and reader; layouts our writer never produces (tiles,
 * compressed strips, signed or 64-bit samples, RGB) are written with libtiff directly, and
 * PNGs are read back with libpng's own simplified API, so neither side only checks itself.
 */
#include "config.h"

#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tiffio.h>

#include "clients/png.h"
#include "clients/tiff.h"
#include "tests/testutil.h"

static char *dir;

static void setup(void)
{
    dir = tl_tmpdir("images");
    ck_assert_ptr_nonnull(dir);
}

static void teardown(void)
{
    tl_rm_rf(dir);
    free(dir);
}

static const char *path_in(const char *name)
{
    return tl_path_in(dir, name);
}

/* Writes `pages` pages of rows x cols samples of dtype, page p filled by value(p, k). */
static void fill(tl_dtype t, void *buf, size_t n, int page)
{
    for (size_t k = 0; k < n; k++) {
        uint32_t v = (uint32_t)(k * 2654435761u + (uint32_t)page * 40503u);
        switch (t) {
            case TL_DTYPE_U8: ((uint8_t *)buf)[k] = (uint8_t)v; break;
            case TL_DTYPE_U16: ((uint16_t *)buf)[k] = (uint16_t)v; break;
            case TL_DTYPE_U32: ((uint32_t *)buf)[k] = v; break;
            default: ((float *)buf)[k] = (float)((double)(int32_t)v * 1e-7) - 0.5f * page; break;
        }
    }
}

static void roundtrip(tl_dtype t, uint32_t pages, uint32_t rows, uint32_t cols)
{
    const char *p = path_in("rt.tif");
    char err[512] = "";
    size_t n = (size_t)rows * cols, bytes = n * tl_dtype_size(t);
    uint8_t *a = malloc(bytes), *b = malloc(bytes);
    tl_tiff_writer w;
    ck_assert_msg(tl_tiff_create(&w, p, (uint64_t)pages * bytes, err, sizeof err) == 0, "%s", err);
    for (uint32_t i = 0; i < pages; i++) {
        fill(t, a, n, (int)i);
        ck_assert_msg(tl_tiff_write_page(&w, t, a, rows, cols, err, sizeof err) == 0, "%s", err);
    }
    ck_assert_uint_eq(w.pages, pages);
    ck_assert_msg(tl_tiff_finish(&w, err, sizeof err) == 0, "%s", err);

    tl_tiff_reader r;
    ck_assert_msg(tl_tiff_open(&r, p, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(r.pages, pages);
    ck_assert_uint_eq(r.rows, rows);
    ck_assert_uint_eq(r.cols, cols);
    ck_assert_int_eq(r.dtype, t);
    /* backwards, to exercise random access */
    for (uint32_t i = pages; i-- > 0;) {
        fill(t, a, n, (int)i);
        memset(b, 0xA5, bytes);
        ck_assert_msg(tl_tiff_read_page(&r, i, b, err, sizeof err) == 0, "%s", err);
        ck_assert_msg(memcmp(a, b, bytes) == 0, "page %u differs (dtype %d)", i, (int)t);
    }
    ck_assert_int_ne(tl_tiff_read_page(&r, pages, b, err, sizeof err), 0);
    ck_assert_ptr_nonnull(strstr(err, "no page"));
    tl_tiff_close(&r);
    free(a);
    free(b);
}

START_TEST(test_tiff_roundtrip)
{
    roundtrip(TL_DTYPE_U16, 5, 37, 53);
    roundtrip(TL_DTYPE_F32, 4, 64, 129);
    roundtrip(TL_DTYPE_U8, 3, 11, 7);
    roundtrip(TL_DTYPE_U32, 2, 300, 301); /* several strips per page */
    roundtrip(TL_DTYPE_F32, 1, 1, 1);
}
END_TEST

/* A page written with libtiff directly: tiled or in compressed strips. */
static void write_raw(const char *p, uint32_t rows, uint32_t cols, uint16_t bps, uint16_t fmt,
                      uint16_t spp, bool tiled, const void *data)
{
    TIFF *tif = TIFFOpen(p, "w");
    ck_assert_ptr_nonnull(tif);
    TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, cols);
    TIFFSetField(tif, TIFFTAG_IMAGELENGTH, rows);
    TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, spp);
    TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, bps);
    TIFFSetField(tif, TIFFTAG_SAMPLEFORMAT, fmt);
    TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, spp == 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK);
    TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    TIFFSetField(tif, TIFFTAG_COMPRESSION, COMPRESSION_LZW);
    size_t ss = bps / 8 * spp, rowbytes = cols * ss;
    const uint8_t *src = data;
    if (tiled) {
        TIFFSetField(tif, TIFFTAG_TILEWIDTH, 16);
        TIFFSetField(tif, TIFFTAG_TILELENGTH, 16);
        uint8_t *tile = calloc(16 * 16, ss);
        for (uint32_t y = 0; y < rows; y += 16)
            for (uint32_t x = 0; x < cols; x += 16) {
                memset(tile, 0, 16 * 16 * ss);
                for (uint32_t i = 0; i < 16 && y + i < rows; i++)
                    for (uint32_t j = 0; j < 16 && x + j < cols; j++)
                        memcpy(tile + (i * 16 + j) * ss, src + (y + i) * rowbytes + (x + j) * ss,
                               ss);
                ck_assert_int_ge(TIFFWriteTile(tif, tile, x, y, 0, 0), 0);
            }
        free(tile);
    } else {
        TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, 7); /* the last strip is partial */
        for (uint32_t y = 0; y < rows; y++)
            ck_assert_int_ge(TIFFWriteScanline(tif, (void *)(src + y * rowbytes), y, 0), 0);
    }
    TIFFClose(tif);
}

START_TEST(test_tiff_layouts)
{
    const uint32_t rows = 40, cols = 50;
    uint16_t a[40 * 50], b[40 * 50];
    fill(TL_DTYPE_U16, a, rows * cols, 3);
    char err[512] = "";
    for (int tiled = 0; tiled < 2; tiled++) {
        const char *p = path_in(tiled ? "tiled.tif" : "lzw.tif");
        write_raw(p, rows, cols, 16, SAMPLEFORMAT_UINT, 1, tiled, a);
        tl_tiff_reader r;
        ck_assert_msg(tl_tiff_open(&r, p, err, sizeof err) == 0, "%s", err);
        ck_assert_uint_eq(r.pages, 1);
        ck_assert_int_eq(r.dtype, TL_DTYPE_U16);
        memset(b, 0, sizeof b);
        ck_assert_msg(tl_tiff_read_page(&r, 0, b, err, sizeof err) == 0, "%s", err);
        ck_assert_msg(memcmp(a, b, sizeof a) == 0, "%s layout differs", tiled ? "tiled" : "strip");
        tl_tiff_close(&r);
    }
}
END_TEST

START_TEST(test_tiff_bigtiff)
{
    /* a large expected size switches to BigTIFF (magic 43 instead of 42) */
    char err[512] = "";
    float px[4] = {1, 2, 3, 4}, back[4];
    for (int big = 0; big < 2; big++) {
        const char *p = path_in("big.tif");
        tl_tiff_writer w;
        ck_assert_int_eq(tl_tiff_create(&w, p, big ? 5ull << 30 : 16, err, sizeof err), 0);
        ck_assert_int_eq(tl_tiff_write_page(&w, TL_DTYPE_F32, px, 2, 2, err, sizeof err), 0);
        ck_assert_int_eq(tl_tiff_finish(&w, err, sizeof err), 0);
        FILE *f = fopen(p, "rb");
        unsigned char hdr[4];
        ck_assert_uint_eq(fread(hdr, 1, 4, f), 4);
        fclose(f);
        int magic = hdr[0] == 'I' ? hdr[2] | hdr[3] << 8 : hdr[3] | hdr[2] << 8;
        ck_assert_int_eq(magic, big ? 43 : 42);
        tl_tiff_reader r;
        ck_assert_int_eq(tl_tiff_open(&r, p, err, sizeof err), 0);
        ck_assert_int_eq(tl_tiff_read_page(&r, 0, back, err, sizeof err), 0);
        ck_assert(memcmp(px, back, sizeof px) == 0);
        tl_tiff_close(&r);
    }
}
END_TEST

START_TEST(test_tiff_errors)
{
    char err[512] = "";
    tl_tiff_reader r;
    ck_assert_int_ne(tl_tiff_open(&r, path_in("missing.tif"), err, sizeof err), 0);
    ck_assert_msg(strstr(err, "cannot open") && strstr(err, "missing.tif"), "%s", err);

    const char *txt = path_in("text.tif");
    FILE *f = fopen(txt, "w");
    fputs("this is not a TIFF file\n", f);
    fclose(f);
    ck_assert_int_ne(tl_tiff_open(&r, txt, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "cannot read") != NULL, "%s", err);

    /* signed 16-bit, float64 and RGB are not sample formats a projection comes in */
    int16_t s16[6 * 5] = {0};
    double f64[6 * 5] = {0};
    uint8_t rgb[6 * 5 * 3] = {0};
    write_raw(path_in("s16.tif"), 6, 5, 16, SAMPLEFORMAT_INT, 1, false, s16);
    write_raw(path_in("f64.tif"), 6, 5, 64, SAMPLEFORMAT_IEEEFP, 1, false, f64);
    write_raw(path_in("rgb.tif"), 6, 5, 8, SAMPLEFORMAT_UINT, 3, false, rgb);
    const char *bad[] = {"s16.tif", "f64.tif", "rgb.tif"};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_ne(tl_tiff_open(&r, path_in(bad[i]), err, sizeof err), 0);
        ck_assert_msg(strstr(err, "unsupported sample format") != NULL, "%s: %s", bad[i], err);
    }

    /* pages of different shapes */
    tl_tiff_writer w;
    uint16_t px[12] = {0};
    const char *mixed = path_in("mixed.tif");
    ck_assert_int_eq(tl_tiff_create(&w, mixed, 0, err, sizeof err), 0);
    ck_assert_int_eq(tl_tiff_write_page(&w, TL_DTYPE_U16, px, 3, 4, err, sizeof err), 0);
    ck_assert_int_eq(tl_tiff_write_page(&w, TL_DTYPE_U16, px, 4, 3, err, sizeof err), 0);
    ck_assert_int_eq(tl_tiff_finish(&w, err, sizeof err), 0);
    ck_assert_int_ne(tl_tiff_open(&r, mixed, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "different shapes") != NULL, "%s", err);

    ck_assert_int_ne(tl_tiff_create(&w, path_in("no/such/dir/x.tif"), 0, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "cannot create") != NULL, "%s", err);
}
END_TEST

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

START_TEST(test_percentiles)
{
    /* quickselect percentiles vs a sorted copy, with duplicates and NaN */
    const size_t sizes[] = {1, 2, 3, 10, 201, 4096, 10007};
    srand(3);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        float *v = malloc((n + 1) * sizeof *v), *sorted = malloc(n * sizeof *sorted);
        for (size_t i = 0; i < n; i++)
            v[i] = (float)(rand() % 97) - 40.0f;
        memcpy(sorted, v, n * sizeof *v);
        v[n] = NAN; /* ignored */
        qsort(sorted, n, sizeof *sorted, cmp_float);
        const double ps[] = {0, 0.5, 25, 50, 99.5, 100};
        for (size_t k = 0; k < 6; k++) {
            double pos = ps[k] / 100 * (double)(n - 1);
            size_t i = (size_t)floor(pos);
            double want =
                i + 1 < n ? sorted[i] + (pos - i) * (sorted[i + 1] - sorted[i]) : sorted[i];
            double lo, hi;
            ck_assert_int_eq(tl_png_percentiles(v, n + 1, ps[k], ps[k], &lo, &hi), 0);
            ck_assert_msg(fabs(lo - want) <= 1e-9 && fabs(hi - want) <= 1e-9,
                          "n %zu p %g: %g, want %g", n, ps[k], lo, want);
        }
        free(v);
        free(sorted);
    }
    float nan1 = NAN;
    double lo, hi;
    ck_assert_int_ne(tl_png_percentiles(&nan1, 1, 0.5, 99.5, &lo, &hi), 0);
}
END_TEST

static uint8_t *read_png(const char *p, uint32_t *rows, uint32_t *cols)
{
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    ck_assert_msg(png_image_begin_read_from_file(&img, p), "%s", img.message);
    ck_assert_int_eq(img.format & PNG_FORMAT_FLAG_COLOR, 0);
    img.format = PNG_FORMAT_GRAY;
    uint8_t *buf = malloc(PNG_IMAGE_SIZE(img));
    ck_assert_msg(png_image_finish_read(&img, NULL, buf, 0, NULL), "%s", img.message);
    *rows = img.height;
    *cols = img.width;
    return buf;
}

START_TEST(test_png)
{
    const uint32_t rows = 40, cols = 60;
    float *im = malloc(sizeof(float) * rows * cols);
    /* a ramp along columns from -3 to 9, with a hot pixel the percentiles must ignore */
    for (uint32_t i = 0; i < rows; i++)
        for (uint32_t j = 0; j < cols; j++)
            im[i * cols + j] = -3.0f + 12.0f * j / (cols - 1);
    im[5 * cols + 5] = 1e6f;
    im[6 * cols + 6] = NAN;
    char err[512] = "";
    const char *p = path_in("auto.png");
    ck_assert_msg(tl_png_write_preview(p, im, rows, cols, NULL, err, sizeof err) == 0, "%s", err);
    uint32_t r2, c2;
    uint8_t *g = read_png(p, &r2, &c2);
    ck_assert_uint_eq(r2, rows);
    ck_assert_uint_eq(c2, cols);
    ck_assert_uint_eq(g[0], 0);              /* 0.5 percentile and below: black */
    ck_assert_uint_eq(g[cols - 1], 255);     /* 99.5 percentile and above: white */
    ck_assert_uint_eq(g[6 * cols + 6], 0);   /* NaN is black */
    ck_assert_uint_eq(g[5 * cols + 5], 255); /* the hot pixel clamps */
    int mid = g[10 * cols + cols / 2];
    ck_assert_msg(mid > 100 && mid < 155, "middle grey %d", mid);
    for (uint32_t j = 1; j < cols; j++) /* the ramp stays a ramp */
        ck_assert_uint_ge(g[20 * cols + j], g[20 * cols + j - 1]);
    free(g);

    /* explicit limits map lo to 0, hi to 255, halfway to 127 or 128 */
    const double lim[2] = {-3.0, 9.0};
    im[0] = -3.0f;
    im[1] = 3.0f;
    im[2] = 9.0f;
    im[3] = -100.0f;
    p = path_in("fixed.png");
    ck_assert_msg(tl_png_write_preview(p, im, rows, cols, lim, err, sizeof err) == 0, "%s", err);
    g = read_png(p, &r2, &c2);
    ck_assert_uint_eq(g[0], 0);
    ck_assert(g[1] == 127 || g[1] == 128);
    ck_assert_uint_eq(g[2], 255);
    ck_assert_uint_eq(g[3], 0);
    free(g);

    ck_assert_int_ne(tl_png_write_preview(path_in("no/dir/x.png"), im, rows, cols, NULL, err,
                                          sizeof err),
                     0);
    ck_assert_msg(strstr(err, "cannot create") != NULL, "%s", err);
    free(im);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("images");
    TCase *tc = tcase_create("images");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_tiff_roundtrip);
    tcase_add_test(tc, test_tiff_layouts);
    tcase_add_test(tc, test_tiff_bigtiff);
    tcase_add_test(tc, test_tiff_errors);
    tcase_add_test(tc, test_percentiles);
    tcase_add_test(tc, test_png);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
