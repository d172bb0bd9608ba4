/* phantom.c — `tomolive phantom`: the true slice of the simulated sample, and how far a
 * reconstruction is from it.
 *
 * The sample is the one `tomolive push` simulates for the same detector shape, centre and
 * attenuation (push_phantom_build), so a slice published by the daemon during a simulated
 * scan can be checked against the truth without knowing anything else about the scan. Each
 * truth pixel is the average of 4 x 4 point samples over its area, which is what a
 * reconstructed pixel stands for (sharp phantom edges would otherwise be charged to the
 * reconstruction).
 */
#include "config.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/cli.h"
#include "clients/commands.h"
#include "clients/push_source.h"
#include "clients/tiff.h"

static const char usage_text[] =
    "usage: tomolive phantom --rows R --cols W [--attenuation A] [--center C]\n"
    "           (--row Z | --ortho AXIS:POSITION | --plane a,b,c,d,e,f,g,h,i)\n"
    "           [--size H,W] [--scale S] [--output TRUTH.tif] [--compare SLICE.tif]\n"
    "The true slice of the sample `tomolive push` simulates for this detector (same --rows,\n"
    "--cols, --center, --attenuation), as a float32 TIFF, and/or the relative L2 error of a\n"
    "reconstructed slice against it (inside the reconstruction circle for rows).\n"
    "tomolive phantom --scan OUT.h5 ...: a whole simulated scan (see --scan x --help).\n";

#define ME "tomolive phantom"
#define fail(rc, ...) tl_cli_fail(ME, (rc), __VA_ARGS__)

/* Reads a one-page float32 TIFF of h x w. */
static float *read_slice(const char *path, uint32_t h, uint32_t w, char *err, size_t n)
{
    tl_tiff_reader r;
    if (tl_tiff_open(&r, path, err, n) != 0)
        return NULL;
    float *v = NULL;
    if (r.dtype != TL_DTYPE_F32 || r.rows != h || r.cols != w)
        snprintf(err, n, "%s: expected a float32 image of %u x %u", path, h, w);
    else if ((v = malloc((size_t)h * w * sizeof *v)) && tl_tiff_read_page(&r, 0, v, err, n) != 0) {
        free(v);
        v = NULL;
    }
    tl_tiff_close(&r);
    return v;
}

int tl_cmd_phantom(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) /* a whole scan as HDF5: phantom_scan.c */
        if (!strcmp(argv[i], "--scan") || !strncmp(argv[i], "--scan=", 7))
            return tl_cmd_phantom_scan(argc, argv);
    uint32_t rows = 0, cols = 0, h = 0, w = 0;
    double att = 2.0, center = NAN, scale = 1.0;
    const char *out = NULL, *cmp = NULL, *row = NULL, *ortho = NULL, *plane = NULL, *size = NULL;
    static const struct option opts[] = {{"rows", required_argument, NULL, 'r'},
                                         {"cols", required_argument, NULL, 'c'},
                                         {"attenuation", required_argument, NULL, 'a'},
                                         {"center", required_argument, NULL, 'C'},
                                         {"row", required_argument, NULL, 'z'},
                                         {"ortho", required_argument, NULL, 'o'},
                                         {"plane", required_argument, NULL, 'p'},
                                         {"size", required_argument, NULL, 's'},
                                         {"scale", required_argument, NULL, 'S'},
                                         {"output", required_argument, NULL, 'O'},
                                         {"compare", required_argument, NULL, 'm'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int o;
    optind = 1;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (o) {
            case 'r': rows = (uint32_t)strtoul(optarg, NULL, 10); break;
            case 'c': cols = (uint32_t)strtoul(optarg, NULL, 10); break;
            case 'a': att = strtod(optarg, NULL); break;
            case 'C': center = strtod(optarg, NULL); break;
            case 'z': row = optarg; break;
            case 'o': ortho = optarg; break;
            case 'p': plane = optarg; break;
            case 's': size = optarg; break;
            case 'S': scale = strtod(optarg, NULL); break;
            case 'O': out = optarg; break;
            case 'm': cmp = optarg; break;
            case 'h': fputs(usage_text, stdout); return 0;
            default: fputs(usage_text, stderr); return 2;
        }
    }
    if (!rows || !cols || optind < argc || (!row + !ortho + !plane) != 2 || (!out && !cmp) ||
        !(scale > 0) || !(att > 0)) {
        fputs(usage_text, stderr);
        return 2;
    }
    if (size && sscanf(size, "%u,%u", &h, &w) != 2)
        return fail(2, "--size wants H,W, not '%s'", size);
    if (isnan(center))
        center = (cols - 1) / 2.0;

    tl_slice_spec sp;
    if (row) {
        tl_slice_spec_row(&sp, strtod(row, NULL), h ? h : cols, w ? w : cols);
    } else if (ortho) {
        char axis;
        double pos;
        if (sscanf(ortho, "%c:%lf", &axis, &pos) != 2 ||
            (axis != 'x' && axis != 'y' && axis != 'z'))
            return fail(2, "--ortho wants x|y|z:POSITION, not '%s'", ortho);
        tl_axis ax = axis == 'x' ? TL_AXIS_X : axis == 'y' ? TL_AXIS_Y : TL_AXIS_Z;
        tl_slice_spec_ortho(&sp, ax, pos, h ? h : ax == TL_AXIS_Z ? cols : rows, w ? w : cols);
    } else {
        float v[9];
        if (sscanf(plane, "%f,%f,%f,%f,%f,%f,%f,%f,%f", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                   &v[6], &v[7], &v[8]) != 9 ||
            !h)
            return fail(2, "--plane wants 9 comma-separated numbers and --size H,W (%s)", plane);
        tl_slice_spec_plane(&sp, v, h, w);
    }
    sp.scale = scale;
    h = sp.height;
    w = sp.width;
    float pl[9];
    tl_slice_plane(&sp, rows, pl);

    tl_phantom ph;
    if (push_phantom_build(&ph, rows, cols, center, att) != 0)
        return fail(1, "out of memory");
    float *truth = malloc((size_t)h * w * sizeof *truth);
    const int q = 4;
    for (uint32_t i = 0; i < h; i++)
        for (uint32_t j = 0; j < w; j++) {
            double sum = 0;
            for (int a = 0; a < q; a++)
                for (int b = 0; b < q; b++) {
                    double s = (j + (a + 0.5) / q) / w, t = 1 - (i + (b + 0.5) / q) / h;
                    sum += tl_phantom_value(&ph, pl[6] + s * pl[0] + t * pl[3],
                                            pl[7] + s * pl[1] + t * pl[4],
                                            pl[8] + s * pl[2] + t * pl[5]);
                }
            truth[(size_t)i * w + j] = (float)(sum / (q * q));
        }
    tl_phantom_free(&ph);
    char err[512];
    int status = 0;
    if (out) {
        tl_tiff_writer tw;
        if (tl_tiff_create(&tw, out, (uint64_t)h * w * 4, err, sizeof err) != 0 ||
            tl_tiff_write_page(&tw, TL_DTYPE_F32, truth, h, w, err, sizeof err) != 0 ||
            tl_tiff_finish(&tw, err, sizeof err) != 0)
            status = fail(1, "%s", err);
    }
    if (cmp && status == 0) {
        float *rec = read_slice(cmp, h, w, err, sizeof err);
        if (!rec) {
            status = fail(1, "%s", err);
        } else {
            /* rows: inside the reconstruction circle, where FBP is defined */
            double num = 0, den = 0, r = (cols / 2.0 - 1) / scale;
            for (uint32_t i = 0; i < h; i++)
                for (uint32_t j = 0; j < w; j++) {
                    double x = j + 0.5 - w / 2.0, y = h / 2.0 - i - 0.5;
                    if (row && x * x + y * y > r * r)
                        continue;
                    double d = rec[(size_t)i * w + j] - truth[(size_t)i * w + j];
                    num += d * d;
                    den += (double)truth[(size_t)i * w + j] * truth[(size_t)i * w + j];
                }
            printf("rel_l2=%.4f%s\n", den > 0 ? sqrt(num / den) : sqrt(num),
                   row ? " (inside the reconstruction circle)" : "");
            free(rec);
        }
    }
    free(truth);
    return status;
}
