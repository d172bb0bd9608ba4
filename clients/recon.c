/* recon.c — `tomolive recon`: filtered back projection of TIFF stacks or HDF5 files (APS
 * Data Exchange, NeXus NXtomo: clients/hdf5.h), offline.
 *
 * The same engine the daemon runs, driven from files: the window is the whole scan (or, with
 * --window N and --indices, the N projections of a scan whose stream lost some, so a
 * daemon's slice can be reproduced offline with the same pi / N weights), darks
 * and flats are submitted first (one batch each, averaged by the engine), then every
 * projection, then horizontal slices are reconstructed in batches and written as they come
 * (a 2048-row reconstruction does not fit in memory at once). Only the requested detector
 * rows are submitted, through the frame pitch, so a few slices of a large scan need a
 * small window. Every input is checked (files, shapes, angle count) and the output created
 * before the engine is, and a failed run removes its partial output.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clients/angles.h"
#include "clients/cli.h"
#include "clients/commands.h"
#include "clients/corr_opts.h"
#include "clients/hdf5.h"
#include "clients/tiff.h"
#include "gpu/engine.h"

#define ME "tomolive recon"

typedef struct {
    const char *input, *darks, *flats, *angles_deg, *angles_file, *output;
    const char *filter, *rows, *backend, *center, *size, *window, *indices;
    bool already_linear, verbose, half_acquisition;
    const char *dezinger, *paganin, *rings; /* per-frame corrections (corr_opts.h) */
} options;

static const char usage_text[] =
    "usage: tomolive recon --input P.tif|SCAN.h5 [--darks D.tif] [--flats F.tif]\n"
    "                      (--angles-deg START:STOP:COUNT | --angles FILE)\n"
    "                      [--center C] [--filter NAME] [--rows A:B] [--already-linear]\n"
    "                      [--backend cpu|cuda|auto] [--size N] [--window N]\n"
    "                      [--indices FILE] [--dezinger T] [--paganin E,D,P,R]\n"
    "                      [--rings vo|fw[:PARAM[,TOL]]] [--half-acquisition]\n"
    "                      [-v] --output OUT.tif\n"
    "\n"
    "Reconstructs horizontal slices from a multi-page TIFF of projections (one page per\n"
    "projection; uint8/16/32 or float32) by filtered back projection, or from an HDF5\n"
    "file (recognised by its signature or name) in the APS Data Exchange layout\n"
    "(/exchange/data, data_white, data_dark, theta in degrees) or NeXus NXtomo\n"
    "(/entry/data/data with image_key 0 projection, 1 flat, 2 dark, 3 skipped;\n"
    "/entry/sample/rotation_angle in degrees): its darks, flats and angles are used unless\n"
    "--darks, --flats, --angles-deg or --angles say otherwise.\n"
    "\n"
    "  -i, --input FILE      projections (TIFF), or the whole scan (HDF5)\n"
    "      --darks FILE      dark frames, averaged\n"
    "      --flats FILE      flat fields, averaged\n"
    "      --angles-deg S:E:N  N angles START + i (STOP - START) / N in degrees, i < N\n"
    "      --angles FILE     one angle in degrees per line (# comments, blank lines ignored);\n"
    "                        non-uniform angles are weighted by their angular spacing\n"
    "      --center C|auto   rotation axis column (default (cols - 1) / 2); auto: found\n"
    "                        from opposite projections (angles 180 degrees apart, or one\n"
    "                        step short), printed as center=C confidence=Q on stderr\n"
    "      --filter NAME     ram-lak (default), shepp-logan, cosine, hamming, hann, parzen,\n"
    "                        none\n"
    "      --rows A:B        reconstruct detector rows A .. B-1 (default all)\n"
    "      --already-linear  input is line integrals already: no -log\n"
    "      --backend NAME    cpu, cuda or auto (default)\n"
    "      --size N          slices of N x N pixels (default cols)\n"
    "      --window N        the window the FBP weights assume: each projection weighs\n"
    "                        pi / N (default N = the number of pages; also with --angles).\n"
    "                        With --indices it reproduces a stream of an N-projection scan\n"
    "                        in which some projections were lost\n"
    "      --indices FILE    frame index of each page, one per line in page order (default\n"
    "                        0 .. pages-1); all within N of the largest. The angles are then\n"
    "                        one per page, or one per frame index (e.g. --angles-deg\n"
    "                        0:180:N, the whole scan's schedule)\n"
    TL_CORR_OPTS_HELP
    "                        (with a correction the engine takes whole frames: --rows\n"
    "                        then only selects the slices)\n"
    "      --half-acquisition  a 360-degree scan with the axis (--center C) off the middle:\n"
    "                        opposite projections stitched (overlap weighted) into a field\n"
    "                        of view twice as wide; --size defaults to its width\n"
    "  -o, --output FILE     float32 TIFF, one page per row\n"
    "  -v, --verbose         say which backend and kernel ran\n"
    "\n"
    "Exit status: 0 done, 1 failed (bad input, bad or missing option values), 2 usage\n"
    "error (unknown option, option without its argument).\n";

#define fail(...) tl_cli_fail(ME, 1, __VA_ARGS__)

/* ---- option values ------------------------------------------------------------------- */

/* "A:B", either side may be empty (0 and rows). */
static bool parse_rows(const char *s, uint32_t rows, uint32_t *a, uint32_t *b)
{
    const char *colon = strchr(s, ':');
    if (!colon)
        return false;
    long long lo = 0, hi = rows;
    char *end;
    if (colon != s) {
        lo = strtoll(s, &end, 10);
        if (end != colon)
            return false;
    }
    if (colon[1]) {
        hi = strtoll(colon + 1, &end, 10);
        if (*end)
            return false;
    }
    if (lo < 0 || hi > (long long)rows || lo >= hi)
        return false;
    *a = (uint32_t)lo;
    *b = (uint32_t)hi;
    return true;
}

static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* ---- frames -------------------------------------------------------------------------- */

static void to_f32(const void *src, tl_dtype t, size_t n, float *dst)
{
    for (size_t i = 0; i < n; i++)
        switch (t) {
            case TL_DTYPE_U8: dst[i] = ((const uint8_t *)src)[i]; break;
            case TL_DTYPE_U16: dst[i] = ((const uint16_t *)src)[i]; break;
            case TL_DTYPE_U32: dst[i] = (float)((const uint32_t *)src)[i]; break;
            default: dst[i] = ((const float *)src)[i]; break;
        }
}

/* Frames of one kind: the pages of a TIFF stack, or one kind of an HDF5 file's frames. */
typedef struct {
    tl_tiff_reader tif;
    tl_hdf5_reader *h5; /* non-NULL: read kind from this file */
    tl_frame_kind kind;
    const char *path;
    uint32_t pages, rows, cols;
    tl_dtype dtype;
} stack;

static int stack_read(stack *s, uint32_t i, void *buf, char *err, size_t errlen)
{
    return s->h5 ? tl_hdf5_read(s->h5, s->kind, i, buf, err, errlen)
                 : tl_tiff_read_page(&s->tif, i, buf, err, errlen);
}

typedef struct {
    tl_engine *engine;
    tl_dtype dtype; /* what the engine takes */
    uint32_t row0, nrows, cols;
    void *page;  /* one full page in the file's dtype */
    float *conv; /* the page in float32, when the engine takes f32 and the file
                                does not */
    bool progress;
} feeder;

/* Submits every page; page i is frame index indices[i] (i when indices is NULL). */
static int submit_stack(feeder *fd, stack *r, tl_frame_kind kind, const double *angles,
                        const uint64_t *indices, const char *what)
{
    char err[512];
    for (uint32_t i = 0; i < r->pages; i++) {
        if (stack_read(r, i, fd->page, err, sizeof err) != 0)
            return fail("%s", err);
        const void *data = fd->page;
        if (fd->dtype != r->dtype) {
            to_f32(fd->page, r->dtype, (size_t)r->rows * r->cols, fd->conv);
            data = fd->conv;
        }
        size_t pitch = (size_t)fd->cols * tl_dtype_size(fd->dtype);
        tl_frame f = {
            .kind = kind,
            .index = indices ? indices[i] : i,
            .angle = angles ? angles[i] : 0.0,
            .dtype = fd->dtype,
            .rows = fd->nrows,
            .cols = fd->cols,
            .pitch = pitch,
            .data = (const uint8_t *)data + (size_t)fd->row0 * pitch,
            .memory = TL_MEMORY_HOST,
        };
        tl_status st = tl_engine_submit(fd->engine, &f);
        if (st != TL_OK)
            return fail("%s page %u of '%s': %s (%s)", what, i, r->path,
                        tl_engine_last_error(fd->engine), tl_status_name(st));
        if (fd->progress)
            fprintf(stderr, "\r" ME ": %s %u/%u", what, i + 1, r->pages);
    }
    if (fd->progress && r->pages)
        fputc('\n', stderr);
    return 0;
}

/* Reconstructs engine rows z = zfirst .. zfirst+nrows-1 into the writer. */
static int reconstruct_rows(tl_engine *e, uint32_t zfirst, uint32_t nrows, uint32_t n,
                            tl_tiff_writer *w, bool progress, bool verbose)
{
    /* batches of about 256 MiB of slices */
    size_t per = (size_t)n * n * sizeof(float);
    size_t batch = per >= (256u << 20) ? 1 : (256u << 20) / per;
    if (batch > nrows)
        batch = nrows;
    float **out = calloc(batch, sizeof *out);
    int *ids = calloc(batch, sizeof *ids);
    /* one info per slice: the engine fills info[0 .. n-1] */
    tl_slice_info *info = calloc(batch, sizeof *info);
    int rc = out && ids && info ? 0 : fail("out of memory for %zu slices of %u x %u", batch, n, n);
    for (size_t k = 0; rc == 0 && k < batch; k++)
        if (!(out[k] = malloc(per)))
            rc = fail("out of memory for %zu slices of %u x %u", batch, n, n);
    char err[512];
    for (uint32_t z0 = 0; rc == 0 && z0 < nrows; z0 += (uint32_t)batch) {
        size_t m = nrows - z0 < batch ? nrows - z0 : batch, added = 0;
        tl_status st = TL_OK;
        for (; added < m && st == TL_OK; added++) {
            tl_slice_spec s;
            tl_slice_spec_row(&s, (double)(zfirst + z0 + added), n, n);
            st = tl_engine_add_slice(e, &s, &ids[added]);
        }
        if (st != TL_OK) {
            added--;
        } else {
            st = tl_engine_reconstruct(e, ids, m, out, info);
            if (st == TL_OK && verbose && z0 == 0)
                fprintf(stderr, ME ": kernel %s, %u projections used, %u missing\n",
                        info[0].kernel ? info[0].kernel : "?", info[0].projections_used,
                        info[0].missing);
        }
        if (st != TL_OK)
            rc = fail("reconstruction failed: %s (%s)", tl_engine_last_error(e),
                      tl_status_name(st));
        for (size_t k = 0; k < added; k++)
            tl_engine_remove_slice(e, ids[k]);
        for (size_t k = 0; rc == 0 && k < m; k++)
            if (tl_tiff_write_page(w, TL_DTYPE_F32, out[k], n, n, err, sizeof err) != 0)
                rc = fail("%s", err);
        if (rc == 0 && progress)
            fprintf(stderr, "\r" ME ": slices %u/%u", z0 + (uint32_t)m, nrows);
    }
    if (progress && rc == 0)
        fputc('\n', stderr);
    for (size_t k = 0; out && k < batch; k++)
        free(out[k]);
    free(out);
    free(ids);
    free(info);
    return rc;
}

/* ---- the command --------------------------------------------------------------------- */

static int parse_options(int argc, char **argv, options *o)
{
    enum {
        O_DARKS = 256,
        O_FLATS,
        O_ANGLES_DEG,
        O_ANGLES,
        O_CENTER,
        O_FILTER,
        O_ROWS,
        O_LINEAR,
        O_BACKEND,
        O_SIZE,
        O_WINDOW,
        O_INDICES,
        O_DEZINGER,
        O_PAGANIN,
        O_RINGS,
        O_HALF
    };
    static const struct option longopts[] = {
        {"input", required_argument, NULL, 'i'},
        {"darks", required_argument, NULL, O_DARKS},
        {"flats", required_argument, NULL, O_FLATS},
        {"angles-deg", required_argument, NULL, O_ANGLES_DEG},
        {"angles", required_argument, NULL, O_ANGLES},
        {"center", required_argument, NULL, O_CENTER},
        {"filter", required_argument, NULL, O_FILTER},
        {"rows", required_argument, NULL, O_ROWS},
        {"already-linear", no_argument, NULL, O_LINEAR},
        {"backend", required_argument, NULL, O_BACKEND},
        {"size", required_argument, NULL, O_SIZE},
        {"window", required_argument, NULL, O_WINDOW},
        {"indices", required_argument, NULL, O_INDICES},
        {"dezinger", required_argument, NULL, O_DEZINGER},
        {"paganin", required_argument, NULL, O_PAGANIN},
        {"rings", required_argument, NULL, O_RINGS},
        {"half-acquisition", no_argument, NULL, O_HALF},
        {"output", required_argument, NULL, 'o'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    optind = 1;
    opterr = 0; /* our own messages, prefixed like every other error */
    int c;
    while ((c = getopt_long(argc, argv, ":i:o:vh", longopts, NULL)) != -1) {
        switch (c) {
            case 'i': o->input = optarg; break;
            case 'o': o->output = optarg; break;
            case 'v': o->verbose = true; break;
            case 'h': fputs(usage_text, stdout); return 0;
            case O_DARKS: o->darks = optarg; break;
            case O_FLATS: o->flats = optarg; break;
            case O_ANGLES_DEG: o->angles_deg = optarg; break;
            case O_ANGLES: o->angles_file = optarg; break;
            case O_CENTER: o->center = optarg; break;
            case O_FILTER: o->filter = optarg; break;
            case O_ROWS: o->rows = optarg; break;
            case O_LINEAR: o->already_linear = true; break;
            case O_BACKEND: o->backend = optarg; break;
            case O_SIZE: o->size = optarg; break;
            case O_WINDOW: o->window = optarg; break;
            case O_INDICES: o->indices = optarg; break;
            case O_DEZINGER: o->dezinger = optarg; break;
            case O_PAGANIN: o->paganin = optarg; break;
            case O_RINGS: o->rings = optarg; break;
            case O_HALF: o->half_acquisition = true; break;
            default:
                fprintf(stderr, ME ": %s '%s' (see tomolive recon --help)\n",
                        c == ':' ? "option needs a value" : "unknown option", argv[optind - 1]);
                return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, ME ": unexpected argument '%s' (see tomolive recon --help)\n",
                argv[optind]);
        return 2;
    }
    return -1; /* go on */
}

typedef struct {
    stack proj, darks, flats;
    tl_hdf5_reader h5;
    bool has_h5;
    double *angles;
    uint64_t *indices;
    void *page;
    float *conv;
    tl_engine *engine;
    tl_tiff_writer out;
    bool writing;
} resources;

static void release(resources *r)
{
    tl_tiff_close(&r->proj.tif);
    tl_tiff_close(&r->darks.tif);
    tl_tiff_close(&r->flats.tif);
    if (r->has_h5)
        tl_hdf5_close(&r->h5);
    free(r->angles);
    free(r->indices);
    free(r->page);
    free(r->conv);
    tl_engine_destroy(r->engine);
}

/* A stack of one kind from the HDF5 file. */
static void h5_stack(stack *s, tl_hdf5_reader *h, tl_frame_kind kind)
{
    *s = (stack){.h5 = h,
                 .kind = kind,
                 .path = h->path,
                 .pages = h->count[kind],
                 .rows = h->rows,
                 .cols = h->cols,
                 .dtype = h->dtype};
}

static int open_stack(stack *r, const char *path, const char *what, const stack *proj)
{
    char err[512];
    if (tl_tiff_open(&r->tif, path, err, sizeof err) != 0)
        return fail("%s: %s", what, err);
    r->path = r->tif.path;
    r->pages = r->tif.pages;
    r->rows = r->tif.rows;
    r->cols = r->tif.cols;
    r->dtype = r->tif.dtype;
    if (proj && (r->rows != proj->rows || r->cols != proj->cols))
        return fail("shape mismatch: %s '%s' are %u x %u (rows x cols), projections '%s' "
                    "are %u x %u",
                    what, path, r->rows, r->cols, proj->path, proj->rows, proj->cols);
    return 0;
}

static int run(const options *o, resources *R)
{
    /* required options and their values, before touching any file */
    if (!o->input)
        return fail("missing required option --input (see tomolive recon --help)");
    if (!o->output)
        return fail("missing required option --output (see tomolive recon --help)");
    bool hdf5 = tl_hdf5_is_hdf5(o->input);
    if (!o->angles_deg && !o->angles_file && !hdf5)
        return fail("missing required option --angles-deg or --angles");
    if (o->angles_deg && o->angles_file)
        return fail("give either --angles-deg or --angles, not both");
    tl_filter filter = TL_FILTER_RAMLAK;
    if (o->filter && !tl_filter_parse(o->filter, &filter))
        return fail("unknown filter '%s' (ram-lak, shepp-logan, cosine, hamming, hann, "
                    "parzen, none)",
                    o->filter);
    tl_backend_kind backend = TL_BACKEND_AUTO;
    if (o->backend && !tl_backend_parse(o->backend, &backend))
        return fail("unknown backend '%s' (cpu, cuda, auto)", o->backend);
    char *end;
    double center = NAN;
    bool center_auto = o->center && strcmp(o->center, "auto") == 0; /* gpu/center.c */
    if (o->center && !center_auto &&
        (center = strtod(o->center, &end), end == o->center || *end || !isfinite(center)))
        return fail("bad --center '%s': not a number (or auto)", o->center);
    long long size = 0;
    if (o->size &&
        (size = strtoll(o->size, &end, 10), end == o->size || *end || size < 1 || size > 65536))
        return fail("bad --size '%s': need a whole number of pixels, 1 .. 65536", o->size);

    long long window = 0;
    if (o->window && (window = strtoll(o->window, &end, 10),
                      end == o->window || *end || window < 1 || window > (1 << 24)))
        return fail("bad --window '%s': need a whole number of projections, 1 .. %d", o->window,
                    1 << 24);

    uint32_t nangles = 0, nindices = 0;
    char err[512];
    tl_corrections corr = {0};
    if ((o->dezinger && !tl_corr_opt_dezinger(o->dezinger, &corr, err, sizeof err)) ||
        (o->paganin && !tl_corr_opt_paganin(o->paganin, &corr, err, sizeof err)) ||
        (o->rings && !tl_corr_opt_rings(o->rings, &corr, err, sizeof err)))
        return fail("%s", err);
    /* corrections see neighbouring rows (dezinger) or the whole frame (Paganin) */
    bool whole_frames = corr.dezinger > 0 || corr.delta_beta > 0;
    if (o->angles_deg && !tl_angles_parse_deg(o->angles_deg, 0, &R->angles, &nangles))
        return fail("bad --angles-deg '%s': need START:STOP:COUNT in degrees, COUNT >= 1",
                    o->angles_deg);
    if (o->angles_file &&
        tl_angles_read_file(o->angles_file, &R->angles, &nangles, err, sizeof err) != 0)
        return fail("%s", err);
    if (o->indices &&
        tl_indices_read_file(o->indices, &R->indices, &nindices, err, sizeof err) != 0)
        return fail("%s", err);

    /* inputs: everything checked before the engine exists */
    if (hdf5) {
        if (tl_hdf5_open(&R->h5, o->input, err, sizeof err) != 0)
            return fail("%s", err);
        R->has_h5 = true;
        h5_stack(&R->proj, &R->h5, TL_FRAME_PROJ);
        h5_stack(&R->darks, &R->h5, TL_FRAME_DARK);
        h5_stack(&R->flats, &R->h5, TL_FRAME_FLAT);
        if (!o->angles_deg && !o->angles_file) {
            if (!R->h5.angles)
                return fail("'%s' holds no angles (/exchange/theta, rotation_angle): give "
                            "--angles-deg or --angles",
                            o->input);
            nangles = R->h5.count[TL_FRAME_PROJ];
            if (!(R->angles = malloc(nangles * sizeof *R->angles)))
                return fail("out of memory");
            memcpy(R->angles, R->h5.angles, nangles * sizeof *R->angles);
        }
    } else if (open_stack(&R->proj, o->input, "projections", NULL)) {
        return 1;
    }
    if ((o->darks && open_stack(&R->darks, o->darks, "darks", &R->proj)) ||
        (o->flats && open_stack(&R->flats, o->flats, "flats", &R->proj)))
        return 1;
    bool have_darks = R->darks.pages > 0, have_flats = R->flats.pages > 0;
    const stack *P = &R->proj;
    if (o->indices && P->pages != nindices)
        return fail("page count mismatch: '%s' has %u projections but '%s' holds %u indices",
                    P->path, P->pages, o->indices, nindices);
    /* the window is N long: every index must be within N of the newest, or the engine
     * would reject it as stale half-way through */
    uint32_t nwin = window ? (uint32_t)window : P->pages;
    uint64_t newest = 0, oldest = UINT64_MAX;
    for (uint32_t i = 0; i < P->pages; i++) {
        uint64_t k = R->indices ? R->indices[i] : i;
        newest = k > newest ? k : newest;
        oldest = k < oldest ? k : oldest;
    }
    if (newest - oldest >= nwin)
        return fail("the frame indices span %llu .. %llu, more than the window of %u "
                    "projections (--window)",
                    (unsigned long long)oldest, (unsigned long long)newest, nwin);
    /* one angle per page; with --indices also one per frame index of the whole scan (its
     * schedule, e.g. --angles-deg 0:180:N), from which each page takes its index's angle */
    bool by_index = o->indices && nangles != P->pages && newest < nangles;
    if (nangles != P->pages && !by_index)
        return fail("page count mismatch: '%s' has %u projections but %u angles were given%s",
                    P->path, P->pages, nangles,
                    o->indices ? " (with --indices: one per page, or one per frame index)" : "");
    if (by_index) {
        double *a = malloc(P->pages * sizeof *a);
        if (!a)
            return fail("out of memory");
        for (uint32_t i = 0; i < P->pages; i++)
            a[i] = R->angles[R->indices[i]];
        free(R->angles);
        R->angles = a;
    }
    uint32_t row0 = 0, row1 = P->rows;
    if (o->rows && !parse_rows(o->rows, P->rows, &row0, &row1))
        return fail("bad --rows '%s': need A:B with 0 <= A < B <= %u (the detector has %u "
                    "rows; B is excluded)",
                    o->rows, P->rows, P->rows);
    uint32_t n = size ? (uint32_t)size : P->cols;
    if (o->half_acquisition && (!o->center || center_auto))
        return fail("--half-acquisition needs --center C (the axis column on the detector)");
    if (o->half_acquisition && !size && center >= 0 && center <= P->cols - 1)
        n = (uint32_t)(2 * fmax(center, P->cols - 1 - center) + 1); /* the stitched field */

    /* one dtype for the engine: the files' own, or float32 when they differ */
    tl_dtype dtype = P->dtype;
    if ((have_darks && R->darks.dtype != dtype) || (have_flats && R->flats.dtype != dtype))
        dtype = TL_DTYPE_F32;
    size_t npix = (size_t)P->rows * P->cols;
    R->page = malloc(npix * sizeof(uint32_t)); /* the widest sample */
    R->conv = dtype == TL_DTYPE_F32 ? malloc(npix * sizeof(float)) : NULL;
    if (!R->page || (dtype == TL_DTYPE_F32 && !R->conv))
        return fail("out of memory for a %u x %u frame", P->rows, P->cols);

    /* the output is created before the long part, so a bad path fails at once; creating it
     * truncates, so it must not be one of the inputs */
    const char *inputs[] = {o->input, o->darks, o->flats, o->angles_file, o->indices};
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++)
        if (inputs[i] && same_file(inputs[i], o->output))
            return fail("the output '%s' is also an input: refusing to overwrite it", o->output);
    if (tl_tiff_create(&R->out, o->output, (uint64_t)(row1 - row0) * n * n * sizeof(float), err,
                       sizeof err) != 0)
        return fail("%s", err);
    R->writing = true;

    uint32_t erow0 = whole_frames ? 0 : row0, erows = whole_frames ? P->rows : row1 - row0;
    tl_engine_config c;
    tl_engine_config_init(&c, erows, P->cols, nwin);
    c.corr = corr;
    c.backend = backend;
    c.dtype = dtype;
    c.center = o->center && !center_auto ? center : (P->cols - 1) / 2.0;
    c.center_estimate = center_auto;
    c.half_acquisition = o->half_acquisition;
    c.filter = filter;
    /* equally spaced angles weigh pi / N each; a file may hold any angles, unless --window
     * says the scan was N equally spaced ones (some lost) */
    c.weights = o->angles_file && !o->window ? TL_WEIGHTS_ANGLES : TL_WEIGHTS_UNIFORM;
    c.already_linear = o->already_linear;
    tl_status st = tl_engine_create(&c, &R->engine);
    if (st != TL_OK)
        return fail("cannot create the engine: %s (%s)", tl_engine_last_error(NULL),
                    tl_status_name(st));
    if (o->verbose) {
        tl_engine_state s;
        tl_engine_get_state(R->engine, &s);
        fprintf(stderr,
                ME ": backend %s (%s), %u projections of rows %u..%u x %u cols, "
                   "slices %u x %u, filter %s, center %.3f\n",
                s.backend, s.device_name, P->pages, row0, row1 - 1, P->cols, n, n,
                tl_filter_name(filter), c.center);
    }

    feeder fd = {R->engine, dtype,   erow0,   erows,
                 P->cols,   R->page, R->conv, isatty(STDERR_FILENO) == 1};
    if ((have_darks && submit_stack(&fd, &R->darks, TL_FRAME_DARK, NULL, NULL, "dark")) ||
        (have_flats && submit_stack(&fd, &R->flats, TL_FRAME_FLAT, NULL, NULL, "flat")) ||
        submit_stack(&fd, &R->proj, TL_FRAME_PROJ, R->angles, R->indices, "projection"))
        return 1;
    if (center_auto) { /* from opposite projections, printed before the reconstruction */
        tl_center_estimate est;
        tl_status cst = tl_engine_center_estimate_now(R->engine, &est);
        if (cst == TL_OK)
            cst = tl_engine_set_center(R->engine, est.center);
        if (cst != TL_OK)
            return fail("--center auto: %s", tl_engine_last_error(R->engine));
        fprintf(stderr, "center=%.3f confidence=%.3f\n", est.center, est.confidence);
    }

    if (reconstruct_rows(R->engine, row0 - erow0, row1 - row0, n, &R->out, fd.progress,
                         o->verbose))
        return 1;
    if (tl_tiff_finish(&R->out, err, sizeof err) != 0)
        return fail("%s", err); /* still "writing": the caller removes the broken file */
    R->writing = false;
    return 0;
}

int tl_cmd_recon(int argc, char **argv)
{
    options o;
    int rc = parse_options(argc, argv, &o);
    if (rc >= 0)
        return rc;
    resources R;
    memset(&R, 0, sizeof R);
    rc = run(&o, &R);
    if (R.writing) {
        /* a half-written reconstruction is worse than none */
        if (R.out.tif)
            tl_tiff_finish(&R.out, NULL, 0);
        unlink(o.output);
    }
    release(&R);
    return rc;
}
