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
 * small window. Cone beam (--geometry cone, FDK: cone_opts.h) needs every detector row for
 * any slice, so its engine holds whole frames and the slabs only cut the output, as with
 * the corrections that see neighbouring rows (volume_pipeline.h); an arbitrary trajectory
 * comes as one matrix per projection (--matrices, cone_read.h), read once the projections'
 * shape is known (ASTRA and RTK files need it) and handed to the engine. Every input is
 * checked (files, shapes, angle and matrix counts) and the output created before the
 * engine is, and a failed run removes its partial output.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>

#include "clients/angles.h"
#include "clients/cli.h"
#include "clients/commands.h"
#include "clients/cone_opts.h"
#include "clients/cone_read.h"
#include "clients/grid.h"
#include "clients/grid_model.h"
#include "clients/corr_opts.h"
#include "clients/hdf5.h"
#include "clients/tiff.h"
#include "clients/iter_opts.h"
#include "clients/volume_output.h"
#include "clients/volume_pipeline.h"
#include "clients/volume_plan.h"
#include "clients/volume_stack.h"
#include "clients/volume_vds.h"
#include "gpu/engine.h"

#define ME "tomolive recon"
#define CENTER_ROWS 64 /* --center auto: rows in the middle of --rows it is estimated from */

typedef struct {
    const char *input, *darks, *flats, *angles_deg, *angles_file, *output;
    const char *filter, *rows, *backend, *center, *size, *window, *indices;
    const char *gpu_memory, *host_memory, *slab_rows, *output_dtype, *compress, *range, *kernel;
    const char *write_threads, *quality;
    const char *grid, *gpus_per_node;       /* --grid RxC: an MPI job (grid.h) */
    const char *dezinger, *paganin, *rings; /* per-frame corrections (corr_opts.h) */
    bool already_linear, verbose, plan_only, resume, half_acquisition;
    tl_cone_opts cone;  /* --geometry cone and its options */
    char cone_bad[256]; /* the first bad value among them (refused in run) */
    tl_iter_opts iter;  /* --method and its options */
    char iter_bad[256]; /* likewise */
} options;

static const char usage_text[] =
    "usage: tomolive recon --input P.tif|SCAN.h5 [--darks D.tif] [--flats F.tif]\n"
    "                      (--angles-deg START:STOP:COUNT | --angles FILE)\n"
    "                      [--center C|auto] [--filter NAME] [--rows A:B] [--already-linear]\n"
    "                      [--backend cpu|cuda|auto] [--size N] [--window N]\n"
    "                      [--indices FILE] [--dezinger T] [--paganin E,D,P,R]\n"
    "                      [--rings vo|fw[:PARAM[,TOL]]] [--half-acquisition]\n"
    "                      [--method sirt|sart|os-sart|osem [--projector matched|joseph]\n"
    "                       [--iterations N] [--subsets M]\n"
    "                       [--relaxation L] [--nonneg] [--tv W [--tv-steps K]]\n"
    "                       [--tolerance T] [--start fbp|zero]]\n"
    "                      [-v] --output OUT.tif|OUT.h5|DIR/\n"
    "                      [--gpu-memory SIZE] [--host-memory SIZE] [--slab-rows N] [--plan]\n"
    "                      [--resume] [--output-dtype float32|uint16|float16]\n"
    "                      [--output-range LO:HI] [--compress deflate[:LEVEL]]\n"
    "                      [--write-threads N] [--quality exact|fast]\n"
    "                      [--geometry cone --source-origin MM --source-detector MM\n"
    "                       --pixel-size MM[,MM] [--offset U,V] [--matrices FILE[:FORMAT]]]\n"
    "                      [--grid RxC [--gpus-per-node N]]   (under mpirun -n R*C)\n"
    "\n"
    "Reconstructs horizontal slices from a multi-page TIFF of projections (one page per\n"
    "projection; uint8/16/32 or float32) by filtered back projection, or from an HDF5\n"
    "file (recognised by its signature or name) in the APS Data Exchange layout\n"
    "(/exchange/data, data_white, data_dark, theta in degrees) or NeXus NXtomo\n"
    "(/entry/data/data with image_key 0 projection, 1 flat, 2 dark, 3 skipped;\n"
    "/entry/sample/rotation_angle in degrees): its darks, flats and angles are used unless\n"
    "--darks, --flats, --angles-deg or --angles say otherwise.\n"
    "\n"
    "  -i, --input PATH      projections: a multi-page TIFF, a TIFF stack (a directory of\n"
    "                        single-page TIFFs, or a quoted glob such as 'scan/p_*.tif', in\n"
    "                        name order), or the whole scan (HDF5)\n"
    "      --darks FILE      dark frames, averaged\n"
    "      --flats FILE      flat fields, averaged\n"
    "      --angles-deg S:E:N  N angles START + i (STOP - START) / N in degrees, i < N\n"
    "      --angles FILE     one angle in degrees per line (# comments, blank lines ignored);\n"
    "                        non-uniform angles are weighted by their angular spacing\n"
    "      --center C|auto   rotation axis column (default (cols - 1) / 2); auto: found\n"
    "                        from opposite projections (angles 180 degrees apart, or one\n"
    "                        step short), printed as center=C confidence=Q on stderr\n"
    "                        once, before the slabs: from whole frames with --dezinger or\n"
    "                        --paganin, else from the middle 64 rows of --rows\n"
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
    "                        0:180:N, the whole scan's schedule)\n" TL_CORR_OPTS_HELP
    "                        (dezinger and Paganin see neighbouring rows: the engine then\n"
    "                        holds whole frames, read once; --rows and the slabs only\n"
    "                        select the slices)\n"
    "      --half-acquisition  a 360-degree scan with the axis off the middle (--center C\n"
    "                        or auto): opposite projections stitched (overlap weighted)\n"
    "                        into a field of view twice as wide; --size defaults to its width\n"
    "  -o, --output PATH     OUT.tif: a multi-page TIFF, one page per row; OUT.h5 (.hdf5,\n"
    "                        .nxs): a chunked HDF5 dataset /volume [z, y, x]; DIR/ (or an\n"
    "                        existing directory): a TIFF stack DIR/slice_00000.tif, ...\n"
    "  -v, --verbose         say which backend and kernel ran, and each stage's time\n"
    "\n"
    "Cone beam (FDK; PROTOCOL.md 8.1.1 gives the conventions): the volume is measured in\n"
    "detector pixels at the rotation axis (pitch x source-origin / source-detector mm),\n"
    "slice z is the detector row its plane projects to at the axis, --rows and --size as\n"
    "above; the engine holds whole frames (every row of every projection). --center\n"
    "auto and --half-acquisition are parallel beam only. With --matrices: one matrix per\n"
    "page (with --indices: per page, or per frame index), world mm with the rotation axis\n"
    "z (ASTRA's axes as they are; a point (x, y, z) is RTK's (x, z, -y)); the angles are\n"
    "then optional (default a turn; they order views for --angles weights only; a short\n"
    "scan is refused with matrices).\n" TL_CONE_OPTS_HELP "\n"
    "Iterative reconstruction (few or limited angles): each slice (cone beam: the whole\n"
    "volume) by SIRT, SART, OS-SART or OS-EM from the unfiltered projections, instead of\n"
    "by FBP or FDK.\n" TL_ITER_OPTS_HELP
    "Out of core: the rows are reconstructed in slabs that fit both memory budgets, reading\n"
    "the next slab and writing the last one while the GPU works on this one.\n"
    "      --gpu-memory SIZE   device memory to use (e.g. 8G, 512M; default: what is free,\n"
    "                        less 10% and 256 MiB)\n"
    "      --host-memory SIZE  host memory for the slab buffers (default: MemAvailable less\n"
    "                        10% and 256 MiB)\n"
    "      --slab-rows N     rows per slab (default: the tallest that fits, at most 1/16 of\n"
    "                        the rows so reading and writing overlap the GPU work)\n"
    "      --plan            print the plan (slabs, memory, bytes moved) and exit\n"
    "      --resume          continue an interrupted run of the same job into the same\n"
    "                        HDF5 file or TIFF stack at its first unwritten slab\n"
    "      --output-dtype T  float32 (default), uint16 (value = stored / scale + offset,\n"
    "                        stated in the file) or float16 (HDF5 only)\n"
    "      --output-range LO:HI  uint16: the values mapped to 0 .. 65535 (default: the\n"
    "                        first slab's minimum .. maximum)\n"
    "      --compress deflate[:LEVEL]  HDF5 output compressed with deflate (default level 4)\n"
    "      --write-threads N  threads that convert, compress and write the slabs (1 .. 64;\n"
    "                        default: the CPUs less 2, 2 .. 16); the file is the same for\n"
    "                        any N\n"
    "      --quality MODE    exact (default): float32 bilinear interpolation, as the\n"
    "                        reference; fast: the fastest kernels within 1e-3 of it\n"
    "                        (hardware texture interpolation, half-precision storage;\n"
    "                        ARCHITECTURE.md 3.6)\n"
    "      --kernel NAME     force a back-projection kernel (tests, benchmarks)\n"
    "\n"
    "On a cluster (seed 004's 2-D grid; README \"On a cluster\"): mpirun -n R*C tomolive\n"
    "recon --grid RxC ... runs R x C processes. Grid row r reconstructs part r of the\n"
    "rows (reading only the detector rows they need), grid column c back-projects part c\n"
    "of the projections, and the C partial sub-volumes of a row are summed (MPI_Reduce)\n"
    "into its column 0, which writes them: an HDF5 output as NAME-partK.h5 with NAME.h5 a\n"
    "virtual dataset of them all, a TIFF stack as its own slices of DIR/. A multi-page\n"
    "TIFF takes R = 1. With C > 1: no --method, --rings or --half-acquisition\n"
    "(non-uniform --angles are weighed as shares of the whole scan's); with R > 1 uint16\n"
    "output needs --output-range. --resume continues each grid row's part where it\n"
    "stopped. A rank that fails or dies ends the job.\n"
    "      --grid RxC        R rows (volume parts) x C columns (projection parts)\n"
    "      --gpus-per-node N  ranks of a host use GPU (local rank mod N) (default: the\n"
    "                        GPUs visible; ranks sharing one split its memory)\n"
    "      --plan            with --grid: also seed 004's model of the run, from rates\n"
    "                        measured on a sample of it; -v prints the measured stages\n"
    "\n"
    "Progress: a bar on a terminal, else one line per slab on stdout:\n"
    "  progress slab=K/S rows=R/T in_GBps=X out_GBps=Y elapsed_s=E eta_s=Z\n"
    "\n"
    "Exit status: 0 done, 1 failed (bad input, bad or missing option values, nothing\n"
    "fits, a write that failed), 2 usage error (unknown option, option without its\n"
    "argument), 130 interrupted (SIGINT or SIGTERM; what was written is kept: --resume).\n";

#define fail(...) tl_cli_fail(ME, 1, __VA_ARGS__)

/* ---- option values ------------------------------------------------------------------- */

/* "A:B", either side may be empty (0 and rows). */
/* Half acquisition: the stitched field of an axis at column c of a detector of cols. */
static uint32_t stitched_size(double c, uint32_t cols)
{
    return (uint32_t)(2 * fmax(c, cols - 1 - c) + 1);
}

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

/* What the pipeline's reader calls: a band of one kind's frames, in the engine's dtype
 * (through float32 when the files' own differs). */
typedef struct {
    tl_volume_stack *stacks[3]; /* by tl_frame_kind */
    tl_dtype dtype;             /* the engine's */
    void *scratch;              /* TL_VOLUME_READ_FRAMES bands in a file's dtype */
    uint32_t proj_first;        /* projection 0 is this page (a grid column's share) */
} band_reader;

static int read_band(void *ctx, tl_frame_kind kind, uint32_t first, uint32_t n, uint32_t row0,
                     uint32_t nrows, void *buf, char *err, size_t errlen)
{
    band_reader *br = ctx;
    tl_volume_stack *s = br->stacks[kind];
    if (kind == TL_FRAME_PROJ)
        first += br->proj_first;
    if (s->dtype == br->dtype)
        return tl_volume_stack_read(s, first, n, row0, nrows, buf, err, errlen);
    if (tl_volume_stack_read(s, first, n, row0, nrows, br->scratch, err, errlen) != 0)
        return -1;
    to_f32(br->scratch, s->dtype, (size_t)n * nrows * s->cols, buf);
    return 0;
}

/* SIGINT and SIGTERM stop the run cleanly (volume_pipeline.h). */
static volatile sig_atomic_t stop_requested;
static void on_stop(int sig)
{
    (void)sig;
    stop_requested = 1;
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
        O_GPU_MEMORY,
        O_HOST_MEMORY,
        O_SLAB_ROWS,
        O_PLAN,
        O_RESUME,
        O_OUTPUT_DTYPE,
        O_RANGE,
        O_COMPRESS,
        O_WRITE_THREADS,
        O_KERNEL,
        O_QUALITY,
        O_DEZINGER,
        O_PAGANIN,
        O_RINGS,
        O_HALF,
        O_GEOMETRY,
        O_SOURCE_ORIGIN,
        O_SOURCE_DETECTOR,
        O_PIXEL_SIZE,
        O_OFFSET,
        O_MATRICES,
        O_GRID,
        O_GPUS_PER_NODE,
        O_ITERATIVE /* --method and its options: the name says which */
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
        {"gpu-memory", required_argument, NULL, O_GPU_MEMORY},
        {"host-memory", required_argument, NULL, O_HOST_MEMORY},
        {"slab-rows", required_argument, NULL, O_SLAB_ROWS},
        {"plan", no_argument, NULL, O_PLAN},
        {"resume", no_argument, NULL, O_RESUME},
        {"output-dtype", required_argument, NULL, O_OUTPUT_DTYPE},
        {"output-range", required_argument, NULL, O_RANGE},
        {"compress", required_argument, NULL, O_COMPRESS},
        {"write-threads", required_argument, NULL, O_WRITE_THREADS},
        {"kernel", required_argument, NULL, O_KERNEL},
        {"quality", required_argument, NULL, O_QUALITY},
        {"dezinger", required_argument, NULL, O_DEZINGER},
        {"paganin", required_argument, NULL, O_PAGANIN},
        {"rings", required_argument, NULL, O_RINGS},
        {"half-acquisition", no_argument, NULL, O_HALF},
        {"geometry", required_argument, NULL, O_GEOMETRY},
        {"source-origin", required_argument, NULL, O_SOURCE_ORIGIN},
        {"source-detector", required_argument, NULL, O_SOURCE_DETECTOR},
        {"pixel-size", required_argument, NULL, O_PIXEL_SIZE},
        {"offset", required_argument, NULL, O_OFFSET},
        {"grid", required_argument, NULL, O_GRID},
        {"gpus-per-node", required_argument, NULL, O_GPUS_PER_NODE},
        {"matrices", required_argument, NULL, O_MATRICES},
        {"method", required_argument, NULL, O_ITERATIVE},
        {"projector", required_argument, NULL, O_ITERATIVE},
        {"iterations", required_argument, NULL, O_ITERATIVE},
        {"subsets", required_argument, NULL, O_ITERATIVE},
        {"relaxation", required_argument, NULL, O_ITERATIVE},
        {"nonneg", no_argument, NULL, O_ITERATIVE},
        {"tv", required_argument, NULL, O_ITERATIVE},
        {"tv-steps", required_argument, NULL, O_ITERATIVE},
        {"tolerance", required_argument, NULL, O_ITERATIVE},
        {"start", required_argument, NULL, O_ITERATIVE},
        {"output", required_argument, NULL, 'o'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    optind = 1;
    opterr = 0; /* our own messages, prefixed like every other error */
    int c;
    int at;
    while ((c = getopt_long(argc, argv, ":i:o:vh", longopts, &at)) != -1) {
        switch (c) {
            case O_ITERATIVE: {
                char why[256];
                if (!tl_iter_opt(&o->iter, longopts[at].name, optarg, why, sizeof why) &&
                    !o->iter_bad[0])
                    snprintf(o->iter_bad, sizeof o->iter_bad, "%s", why);
                break;
            }
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
            case O_GPU_MEMORY: o->gpu_memory = optarg; break;
            case O_HOST_MEMORY: o->host_memory = optarg; break;
            case O_SLAB_ROWS: o->slab_rows = optarg; break;
            case O_PLAN: o->plan_only = true; break;
            case O_RESUME: o->resume = true; break;
            case O_OUTPUT_DTYPE: o->output_dtype = optarg; break;
            case O_RANGE: o->range = optarg; break;
            case O_COMPRESS: o->compress = optarg; break;
            case O_WRITE_THREADS: o->write_threads = optarg; break;
            case O_KERNEL: o->kernel = optarg; break;
            case O_QUALITY: o->quality = optarg; break;
            case O_DEZINGER: o->dezinger = optarg; break;
            case O_PAGANIN: o->paganin = optarg; break;
            case O_RINGS: o->rings = optarg; break;
            case O_HALF: o->half_acquisition = true; break;
            case O_GRID: o->grid = optarg; break;
            case O_GPUS_PER_NODE: o->gpus_per_node = optarg; break;
            case O_GEOMETRY:
            case O_SOURCE_ORIGIN:
            case O_SOURCE_DETECTOR:
            case O_PIXEL_SIZE:
            case O_OFFSET:
            case O_MATRICES: {
                char why[256];
                const char *name = longopts[0].name;
                for (const struct option *l = longopts; l->name; l++)
                    if (l->val == c)
                        name = l->name;
                if (!tl_cone_opt(&o->cone, name, optarg, why, sizeof why) && !o->cone_bad[0])
                    snprintf(o->cone_bad, sizeof o->cone_bad, "%s", why);
                break;
            }
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
    tl_volume_stack proj, darks, flats;
    tl_hdf5_reader h5;
    bool has_h5;
    double *angles;
    uint64_t *indices;
    tl_cone_matrix_file mfile; /* --matrices */
    double (*matrices)[12];    /* one per frame index from 0 (the engine's first_index) */
    uint32_t nmatrices;
    void *scratch;
    tl_volume_bands bands; /* cone beam: the detector rows of each slice */
    tl_volume_output out;
    bool writing;
    /* --grid (grid.h): NULL without; agreed once the ranks said they are ready */
    tl_grid *grid;
    bool agreed, running;   /* tl_grid_agree called; and every rank was ready */
    uint64_t *part_indices; /* the global frame index of each of this column's pages */
    char part_path[1100];   /* this row's part of an HDF5 output */
    char progress_name[64]; /* this row's progress record in a TIFF stack */
} resources;

static void release(resources *r)
{
    tl_volume_stack_close(&r->proj);
    tl_volume_stack_close(&r->darks);
    tl_volume_stack_close(&r->flats);
    if (r->has_h5)
        tl_hdf5_close(&r->h5);
    free(r->angles);
    free(r->indices);
    tl_cone_matrix_file_free(&r->mfile);
    free(r->matrices);
    free(r->scratch);
    free(r->part_indices);
    tl_volume_bands_free(&r->bands);
}

static int open_stack(tl_volume_stack *r, const char *path, const char *what,
                      const tl_volume_stack *proj)
{
    char err[512];
    if (tl_volume_stack_open(r, path, err, sizeof err) != 0)
        return fail("%s: %s", what, err);
    if (proj && (r->rows != proj->rows || r->cols != proj->cols))
        return fail("shape mismatch: %s '%s' are %u x %u (rows x cols), projections '%s' "
                    "are %u x %u",
                    what, path, r->rows, r->cols, proj->path, proj->rows, proj->cols);
    return 0;
}

/* Cone beam over less than a turn (the n angles, in any order, cover less than 2 pi): a
 * short scan, weighed with Parker's weights (gpu/base/parker.h), which take the views as
 * equally spaced, so uniform view weights. */
static int cone_short_scan(const double *angles, uint32_t n, bool verbose, tl_engine_config *c)
{
    double *a = malloc((n ? n : 1) * sizeof *a), start, range;
    bool full = true;
    if (!a)
        return fail("out of memory");
    memcpy(a, angles, n * sizeof *a);
    tl_cli_sort(a, n);
    if (tl_angles_arc(a, n, &start, &range, &full) && !full) {
        c->cone.scan_start = start;
        c->cone.scan_range = range;
        c->weights = TL_WEIGHTS_UNIFORM;
        if (verbose)
            fprintf(stderr, ME ": a short scan of %.2f degrees from %.2f: Parker's weights\n",
                    range * 180 / M_PI, start * 180 / M_PI);
    }
    free(a);
    return 0;
}

/* The output options: dtype, range, compression, threads. */
static int output_options(const options *o, tl_volume_output_spec *spec)
{
    if (o->output_dtype && !tl_out_dtype_parse(o->output_dtype, &spec->dtype))
        return fail("bad --output-dtype '%s' (float32, uint16, float16)", o->output_dtype);
    if (o->range) {
        char *end;
        spec->lo = strtod(o->range, &end);
        if (*end != ':' || (spec->hi = strtod(end + 1, &end), *end) || !(spec->hi > spec->lo))
            return fail("bad --output-range '%s': need LO:HI with LO < HI", o->range);
        spec->have_range = true;
    }
    if (o->compress) {
        long level = 4;
        if (strncmp(o->compress, "deflate", 7) != 0 ||
            (o->compress[7] &&
             (o->compress[7] != ':' || !tl_cli_long(o->compress + 8, 1, 9, &level))))
            return fail("bad --compress '%s': need deflate or deflate:LEVEL (1 .. 9)",
                        o->compress);
        spec->deflate = (int)level;
    }
    long threads = 0;
    if (o->write_threads && !tl_cli_long(o->write_threads, 1, 64, &threads))
        return fail("bad --write-threads '%s': need 1 .. 64", o->write_threads);
    spec->threads = (unsigned)threads;
    return 0;
}

/* --matrices for the projections of P (their frame indices: R->indices, or the pages):
 * one per page, or with --indices one per frame index up to the newest; per page with
 * --indices is laid out by frame index (the unused indices repeat the first matrix, so
 * the engine's checks of every matrix hold). */
static int load_matrices(const options *o, resources *R, const tl_volume_stack *P, uint64_t newest)
{
    char err[1024];
    tl_cone_detector d = {P->rows, P->cols, o->cone.pixel_u, o->cone.pixel_v};
    double(*m)[12];
    uint32_t n;
    if (tl_cone_read(&R->mfile, &d, &m, &n, err, sizeof err) != 0)
        return fail("--matrices: %s", err);
    R->matrices = m;
    R->nmatrices = n;
    if (R->indices && n == P->frames) {
        if (newest >= (1u << 24))
            return fail("--matrices: frame index %llu is too large to lay the matrices out by "
                        "frame index (give one per frame index)",
                        (unsigned long long)newest);
        double(*e)[12] = malloc((size_t)(newest + 1) * sizeof *e);
        if (!e)
            return fail("out of memory for %llu matrices", (unsigned long long)newest + 1);
        for (uint64_t k = 0; k <= newest; k++)
            memcpy(e[k], m[0], sizeof e[k]);
        for (uint32_t i = 0; i < P->frames; i++)
            memcpy(e[R->indices[i]], m[i], sizeof e[0]);
        free(m);
        R->matrices = e;
        R->nmatrices = (uint32_t)newest + 1;
    } else if (R->indices ? n <= newest : n != P->frames) {
        return fail("matrix count mismatch: '%s' has %u projections but '%s' holds %u "
                    "matrices%s",
                    P->path, P->frames, R->mfile.path, n,
                    R->indices ? " (with --indices: one per page, or one per frame index)" : "");
    }
    return 0;
}

/* A fingerprint of the matrices for --resume's job identity (FNV-1a of their bytes). */
static unsigned long long matrices_hash(const resources *R)
{
    unsigned long long h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)R->matrices;
    for (size_t i = 0; i < (size_t)R->nmatrices * sizeof *R->matrices; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* What the iterative slices did: iterations and final residuals over the slices, and the
 * middle row's residual after each iteration; in cone beam the volume's, one problem. */
static void print_iterative(const tl_iter_options *o, const tl_volume_iterative *s, uint32_t row0,
                            bool cone)
{
    if (s->slices == 0)
        return;
    if (cone) {
        fprintf(stderr, ME ": %s, the volume (%u slices) as one problem, %u iterations; residual:",
                tl_iter_method_name(o->method), s->slices, s->max_iterations);
        for (uint32_t i = 0; i < s->ncurve; i++)
            fprintf(stderr, " %.5f", s->curve[i]);
        fputc('\n', stderr);
        return;
    }
    fprintf(stderr,
            ME ": %s, %u slices, %u..%u iterations each; relative residual ||b - Ax|| / ||b|| "
               "at the end: mean %.5f, max %.5f\n",
            tl_iter_method_name(o->method), s->slices, s->min_iterations, s->max_iterations,
            s->residual_sum / s->slices, s->residual_max);
    if (s->ncurve == 0)
        return;
    fprintf(stderr, ME ": residual of row %u after each iteration:", row0 + s->middle_row);
    for (uint32_t i = 0; i < s->ncurve; i++)
        fprintf(stderr, " %.5f", s->curve[i]);
    fputc('\n', stderr);
}

/* ---- --grid (grid.h) ------------------------------------------------------------------- */

/* What a grid cannot do: columns sum partial back projections, so only what is a sum over
 * projections with weights fixed by the whole scan splits over them; rows write parts. */
static int grid_check(const options *o, const tl_grid *G, const tl_iter_opts *iter,
                      const tl_volume_output_spec *spec)
{
    if (G->cols > 1) {
        const char *what = iter->on              ? "--method (not a sum over projections)"
                           : o->rings            ? "--rings (estimated from every projection)"
                           : o->half_acquisition ? "--half-acquisition (opposite views pair up)"
                                                 : NULL;
        if (what)
            return fail("--grid %ux%u: %s needs one grid column (--grid %ux1)", G->rows, G->cols,
                        what, G->rows * G->cols);
    }
    if (G->rows > 1 && iter->on && o->cone.cone)
        return fail("--grid %ux%u: iterative cone beam solves the volume as one problem "
                    "(--grid 1x1)",
                    G->rows, G->cols);
    if (G->rows > 1 && o->output && tl_out_form_of(o->output) == TL_OUT_TIFF_PAGES)
        return fail("--grid %ux%u: the multi-page TIFF '%s' cannot be written in parts: give an "
                    "HDF5 file (.h5) or a directory",
                    G->rows, G->cols, o->output);
    if (G->rows > 1 && spec->dtype == TL_OUT_U16 && !spec->have_range)
        return fail("--grid %ux%u: uint16 output needs --output-range LO:HI (each part would "
                    "choose its own scale)",
                    G->rows, G->cols);
    return 0;
}

/* This rank's part: rows [*row0, *row0 + *nrows) of the volume's, pages [*first, *first +
 * *count) of the projections, with their global frame indices in R->part_indices. */
static int grid_part(const tl_grid *G, resources *R, uint32_t pages, uint32_t *row0,
                     uint32_t *nrows, uint32_t *first, uint32_t *count)
{
    uint32_t a, b, p, q;
    tl_engine_split_rows(*nrows, G->rows, G->row, &a, &b);
    tl_engine_split_rows(pages, G->cols, G->col, &p, &q);
    if (b == a)
        return fail("--grid %ux%u: %u grid rows for %u slices", G->rows, G->cols, G->rows, *nrows);
    if (q == p)
        return fail("--grid %ux%u: %u grid columns for %u projections", G->rows, G->cols, G->cols,
                    pages);
    if (!(R->part_indices = malloc((q - p) * sizeof *R->part_indices)))
        return fail("out of memory");
    for (uint32_t i = p; i < q; i++)
        R->part_indices[i - p] = R->indices ? R->indices[i] : i;
    *row0 += a;
    *nrows = b - a;
    *first = p;
    *count = q - p;
    return 0;
}

/* Where this row's part of the output goes: a file of its own (HDF5, volume_vds.h), its
 * slices of a shared TIFF stack, or the output itself with one grid row. */
static void grid_output(const tl_grid *G, resources *R, uint32_t z_base,
                        tl_volume_output_spec *spec)
{
    if (G->rows == 1)
        return;
    if (tl_out_form_of(spec->path) == TL_OUT_HDF5) {
        tl_volume_vds_part(spec->path, G->row, G->rows, R->part_path, sizeof R->part_path);
        spec->path = R->part_path;
    } else {
        snprintf(R->progress_name, sizeof R->progress_name, "tomolive-progress-part%u", G->row);
        spec->progress_name = R->progress_name;
        spec->z_base = z_base;
    }
}

/* Ranks of this host that share a GPU's memory, and the device this rank takes. */
static int grid_device(const options *o, const tl_grid *G, tl_engine_config *c, uint32_t *sharing)
{
    *sharing = (uint32_t)G->local_size;
    if (c->backend == TL_BACKEND_CPU)
        return 0;
    long gpus = 0;
    char why[256];
    if (o->gpus_per_node && !tl_cli_long(o->gpus_per_node, 1, 1024, &gpus))
        return fail("bad --gpus-per-node '%s': need 1 .. 1024", o->gpus_per_node);
    if (!o->gpus_per_node) {
        int n = tl_backend_device_count(TL_BACKEND_CUDA, why, sizeof why);
        if (n < 1 && c->backend == TL_BACKEND_CUDA)
            return fail("--grid: no CUDA device on this host (%s)", why);
        if (n < 1)
            return 0; /* auto: the CPU backend then */
        gpus = n;
    }
    c->device = G->local_rank % (int)gpus;
    *sharing = (uint32_t)((G->local_size + gpus - 1 - c->device) / gpus);
    return 0;
}

/* Seed 004's model of this job (grid_model.h), the slowest rank's stages, printed by rank
 * 0 with --plan; false where there is none (iterative methods: not a pipeline of these
 * stages) or a rank's sample failed. Collective: every rank calls it. */
static bool grid_model(const options *o, tl_grid *G, const tl_volume_job *jb, tl_grid_rates *rates,
                       tl_grid_stages *model)
{
    if (jb->iterative) { /* the same on every rank: no collective to skip */
        if (G->rank == 0)
            fprintf(stderr, ME ": the grid's model covers FBP and FDK, not --method\n");
        return false;
    }
    char err[1024];
    int rc = tl_grid_calibrate(G, jb, o->output, rates, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, ME ": rank %d: no model: %s\n", G->rank, err);
    tl_grid_stages mine;
    memset(&mine, 0, sizeof mine);
    if (rc == 0) {
        const tl_volume_plan *plan = jb->plan;
        const double npx = (double)jb->size * jb->size;
        tl_grid_work w = {
            .load = (double)plan->bytes_uploaded, /* what the reader hands over */
            .filter = (double)plan->bytes_uploaded,
            .bp = jb->rows * npx * jb->count[TL_FRAME_PROJ],
            .reduce = G->cols > 1 ? jb->rows * npx * sizeof(float) : 0,
            .store = G->col == 0 ? (double)plan->bytes_written : 0,
            .slabs = plan->slabs,
            /* volume_output.h: HDF5 two per slab; a TIFF stack a file's each and two */
            .syncs =
                plan->slabs *
                (o->output && tl_out_form_of(o->output) == TL_OUT_HDF5 ? 2 : plan->slab_rows + 2),
        };
        tl_grid_model(&w, rates, &mine);
    }
    tl_grid_stages_max(G, &mine, model);
    bool all = tl_grid_agree(G, rc == 0);
    if (all && o->plan_only && G->rank == 0)
        tl_grid_model_print(stdout, rates, model, NULL);
    return all;
}

/* After every part is written: the measured stages (the slowest rank's, with -v; beside
 * the model when there is one) and the virtual volume of an HDF5 output's parts. */
static int grid_finish(const options *o, tl_grid *G, const tl_volume_times *t, uint32_t rows,
                       uint32_t size, const tl_grid_rates *rates, const tl_grid_stages *model)
{
    if (o->verbose) {
        tl_grid_stages mine, measured;
        tl_grid_stages_measured(t, G, &mine);
        tl_grid_stages_max(G, &mine, &measured); /* a collective: every rank */
        if (G->rank == 0 && model)
            tl_grid_model_print(stderr, rates, model, &measured);
        else if (G->rank == 0)
            fprintf(stderr,
                    "grid stages (slowest rank), busy s: read %.3f, upload+filter %.3f, back "
                    "projection %.3f, reduce %.3f (+ waiting %.3f), write %.3f, wall %.3f\n",
                    measured.load, measured.filter, measured.bp, measured.reduce, measured.wait,
                    measured.store, measured.total);
    }
    tl_grid_barrier(G); /* every part complete */
    char err[1024];
    if (G->rank == 0 && G->rows > 1 && tl_out_form_of(o->output) == TL_OUT_HDF5 &&
        tl_volume_vds_create(o->output, G->rows, rows, size, err, sizeof err) != 0)
        return fail("%s", err);
    return 0;
}

static int run(const options *o, resources *R)
{
    /* required options and their values, before touching any file */
    if (!o->input)
        return fail("missing required option --input (see tomolive recon --help)");
    if (!o->output && !o->plan_only)
        return fail("missing required option --output (see tomolive recon --help)");
    bool hdf5 = !tl_volume_stack_is_multi(o->input) && tl_hdf5_is_hdf5(o->input);
    bool matrices = o->cone.cone && o->cone.matrices; /* the angles only order the views */
    if (!o->angles_deg && !o->angles_file && !hdf5 && !matrices)
        return fail("missing required option --angles-deg or --angles");
    if (o->angles_deg && o->angles_file)
        return fail("give either --angles-deg or --angles, not both");
    tl_filter filter = TL_FILTER_RAMLAK;
    if (o->filter && !tl_filter_parse(o->filter, &filter))
        return fail("unknown filter '%s' (ram-lak, shepp-logan, cosine, hamming, hann, "
                    "parzen, none)",
                    o->filter);
    if (o->cone_bad[0])
        return fail("%s", o->cone_bad);
    if (o->iter_bad[0])
        return fail("%s", o->iter_bad);
    char why[256];
    tl_iter_opts iter = o->iter;
    if (!tl_iter_opts_finish(&iter, why, sizeof why))
        return fail("%s", why);
    if (iter.on && o->filter)
        return fail("--filter is FBP's: --method reconstructs from the unfiltered projections");
    if (iter.on && o->half_acquisition)
        return fail("--method: not with --half-acquisition (its column weights are FBP's)");
    if (iter.on && !iter.start_fbp) /* the window holds the measurements */
        filter = TL_FILTER_NONE;
    tl_backend_kind backend = TL_BACKEND_AUTO;
    if (o->backend && !tl_backend_parse(o->backend, &backend))
        return fail("unknown backend '%s' (cpu, cuda, auto)", o->backend);
    char *end;
    double center = NAN;
    bool center_auto = o->center && strcmp(o->center, "auto") == 0; /* gpu/center.c */
    if (o->center && !center_auto &&
        (center = strtod(o->center, &end), end == o->center || *end || !isfinite(center)))
        return fail("bad --center '%s': not a number (or auto)", o->center);
    bool has_center = o->center && !center_auto;
    if (!tl_cone_opts_check(&o->cone, has_center, why, sizeof why))
        return fail("%s", why);
    if (matrices && tl_cone_matrix_spec(o->cone.matrices, &R->mfile, why, sizeof why) != 0)
        return fail("%s", why);
    long long size = 0;
    if (o->size &&
        (size = strtoll(o->size, &end, 10), end == o->size || *end || size < 1 || size > 65536))
        return fail("bad --size '%s': need a whole number of pixels, 1 .. 65536", o->size);

    long long window = 0;
    if (o->window && (window = strtoll(o->window, &end, 10),
                      end == o->window || *end || window < 1 || window > (1 << 24)))
        return fail("bad --window '%s': need a whole number of projections, 1 .. %d", o->window,
                    1 << 24);
    tl_volume_budget budget = {0, 0};
    if (o->gpu_memory && !tl_volume_parse_bytes(o->gpu_memory, &budget.gpu))
        return fail("bad --gpu-memory '%s': need a size such as 8G or 512M", o->gpu_memory);
    if (o->host_memory && !tl_volume_parse_bytes(o->host_memory, &budget.host))
        return fail("bad --host-memory '%s': need a size such as 8G or 512M", o->host_memory);
    long slab_rows = 0;
    if (o->slab_rows && !tl_cli_long(o->slab_rows, 1, 65536, &slab_rows))
        return fail("bad --slab-rows '%s': need 1 .. 65536", o->slab_rows);
    tl_volume_output_spec spec = {.path = o->output, .resume = o->resume};
    if (output_options(o, &spec) != 0)
        return 1;
    const tl_grid *G = R->grid;
    if (G && grid_check(o, G, &iter, &spec) != 0)
        return 1;

    uint32_t nangles = 0, nindices = 0;
    char err[1024];
    tl_corrections corr = {0};
    if ((o->dezinger && !tl_corr_opt_dezinger(o->dezinger, &corr, err, sizeof err)) ||
        (o->paganin && !tl_corr_opt_paganin(o->paganin, &corr, err, sizeof err)) ||
        (o->rings && !tl_corr_opt_rings(o->rings, &corr, err, sizeof err)))
        return fail("%s", err);
    /* corrections see neighbouring rows (dezinger) or the whole frame (Paganin): the
     * engine then holds whole frames (volume_pipeline.h); so does cone beam where they fit
     * the GPU, and else bands of rows (volume_bands.h) */
    bool frame_corr = corr.dezinger > 0 || corr.delta_beta > 0;
    bool whole_frames = frame_corr || o->cone.cone;
    /* iterative cone beam solves the volume as one problem: whole frames only */
    bool cone_bands = o->cone.cone && !frame_corr && !iter.on;
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
        tl_volume_stack_hdf5(&R->proj, &R->h5, TL_FRAME_PROJ);
        tl_volume_stack_hdf5(&R->darks, &R->h5, TL_FRAME_DARK);
        tl_volume_stack_hdf5(&R->flats, &R->h5, TL_FRAME_FLAT);
        if (!o->angles_deg && !o->angles_file && !(matrices && !R->h5.angles)) {
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
    bool have_darks = R->darks.frames > 0, have_flats = R->flats.frames > 0;
    const tl_volume_stack *P = &R->proj;
    if (o->indices && P->frames != nindices)
        return fail("page count mismatch: '%s' has %u projections but '%s' holds %u indices",
                    P->path, P->frames, o->indices, nindices);
    /* the window is N long: every index must be within N of the newest, or the engine
     * would reject it as stale half-way through */
    uint32_t nwin = window ? (uint32_t)window : P->frames;
    uint64_t newest = 0, oldest = UINT64_MAX;
    for (uint32_t i = 0; i < P->frames; i++) {
        uint64_t k = R->indices ? R->indices[i] : i;
        newest = k > newest ? k : newest;
        oldest = k < oldest ? k : oldest;
    }
    if (newest - oldest >= nwin)
        return fail("the frame indices span %llu .. %llu, more than the window of %u "
                    "projections (--window)",
                    (unsigned long long)oldest, (unsigned long long)newest, nwin);
    if (matrices && load_matrices(o, R, P, newest) != 0)
        return 1;
    if (matrices && !R->angles) { /* none given: a turn, in page order */
        if (!(R->angles = malloc(P->frames * sizeof *R->angles)))
            return fail("out of memory");
        for (uint32_t i = 0; i < P->frames; i++)
            R->angles[i] = 2 * M_PI * i / P->frames;
        nangles = P->frames;
    }
    /* one angle per page; with --indices also one per frame index of the whole scan (its
     * schedule, e.g. --angles-deg 0:180:N), from which each page takes its index's angle */
    bool by_index = o->indices && nangles != P->frames && newest < nangles;
    if (nangles != P->frames && !by_index)
        return fail("page count mismatch: '%s' has %u projections but %u angles were given%s",
                    P->path, P->frames, nangles,
                    o->indices ? " (with --indices: one per page, or one per frame index)" : "");
    if (by_index) {
        double *a = malloc(P->frames * sizeof *a);
        if (!a)
            return fail("out of memory");
        for (uint32_t i = 0; i < P->frames; i++)
            a[i] = R->angles[R->indices[i]];
        free(R->angles);
        R->angles = a;
    }
    uint32_t row0 = 0, row1 = P->rows;
    if (o->rows && !parse_rows(o->rows, P->rows, &row0, &row1))
        return fail("bad --rows '%s': need A:B with 0 <= A < B <= %u (the detector has %u "
                    "rows; B is excluded)",
                    o->rows, P->rows, P->rows);
    uint32_t n = size ? (uint32_t)size : P->cols, nrows = row1 - row0;
    /* the whole volume's rows, and this rank's part of them and of the pages (--grid) */
    const uint32_t grow0 = row0, gnrows = nrows;
    uint32_t proj_first = 0, nproj = P->frames;
    if (G && grid_part(G, R, P->frames, &row0, &nrows, &proj_first, &nproj) != 0)
        return 1;
    row1 = row0 + nrows;
    const uint64_t *part_indices = R->part_indices ? R->part_indices : R->indices;
    const double *part_angles = R->angles + proj_first;
    if (o->half_acquisition && !o->center)
        return fail("--half-acquisition needs --center C (the axis column on the detector) or "
                    "--center auto");
    if (o->half_acquisition && !size && center_auto)
        n = 2 * P->cols - 1; /* planned for the widest field (the axis at an edge) until the
                                estimate below gives the stitched one */
    else if (o->half_acquisition && !size && center >= 0 && center <= P->cols - 1)
        n = stitched_size(center, P->cols);

    /* one dtype for the engine: the files' own, or float32 when they differ */
    tl_dtype dtype = P->dtype;
    if ((have_darks && R->darks.dtype != dtype) || (have_flats && R->flats.dtype != dtype))
        dtype = TL_DTYPE_F32;

    uint32_t erows = whole_frames ? P->rows : nrows; /* the engine's rows (volume_pipeline.h) */
    tl_engine_config c;
    tl_engine_config_init(&c, erows, P->cols, nwin);
    c.corr = corr;
    c.backend = backend;
    uint32_t sharing = 1; /* ranks of this host on the engine's device (--grid) */
    if (G && grid_device(o, G, &c, &sharing) != 0)
        return 1;
    c.dtype = dtype;
    c.center = has_center ? center : (P->cols - 1) / 2.0;
    tl_cone_opts_engine(&o->cone, has_center, center, &c); /* cone beam: FDK */
    c.cone.matrices = (const double(*)[12])R->matrices;    /* --matrices (the engine copies) */
    c.cone.nmatrices = R->nmatrices;
    c.center_estimate = center_auto;
    c.half_acquisition = o->half_acquisition;
    c.filter = filter;
    /* --start fbp: the window filtered for each slice's FBP, the measurements beside it;
     * cone beam keeps them always (its window is weighed for FDK) */
    c.keep_measurements = iter.on && (iter.start_fbp || o->cone.cone);
    /* equally spaced angles weigh pi / N each; a file may hold any angles, unless --window
     * says the scan was N equally spaced ones (some lost) */
    c.weights = o->angles_file && !o->window ? TL_WEIGHTS_ANGLES : TL_WEIGHTS_UNIFORM;
    if (c.weights == TL_WEIGHTS_ANGLES && G && G->cols > 1) { /* a part of every angle */
        c.weight_angles = R->angles;
        c.nweight_angles = P->frames;
    }
    c.already_linear = o->already_linear;
    if (o->cone.cone && cone_short_scan(R->angles, P->frames, o->verbose, &c) != 0)
        return 1;
    if (o->kernel)
        snprintf(c.kernel, sizeof c.kernel, "%s", o->kernel);
    if (o->quality && (!tl_quality_parse(o->quality, &c.quality) ||
                       c.quality == TL_QUALITY_PREVIEW)) /* a volume is kept: not previews */
        return fail("bad --quality '%s' (exact, fast)", o->quality);

    /* the plan: budgets default to what is free, less a margin */
    tl_volume_engine_cost ec = {.c = c};
    tl_memory_estimate m1;
    c.rows = whole_frames ? erows : 1;
    tl_status st = tl_engine_estimate(&c, &m1);
    c.rows = erows;
    if (st != TL_OK)
        return fail("cannot create the engine: %s (%s)", tl_engine_last_error(NULL),
                    tl_status_name(st));
    if (!o->gpu_memory) /* shared by the grid's ranks on the device */
        budget.gpu = tl_volume_less_margin(m1.available_bytes) / sharing;
    if (!o->host_memory)
        budget.host =
            tl_volume_less_margin(tl_volume_host_available()) / (G ? (uint32_t)G->local_size : 1);
    uint32_t read_rows = tl_volume_stack_read_rows(P);
    if (cone_bands && tl_volume_bands_init(&R->bands, &c, nproj, part_indices, part_angles, n,
                                           row0, nrows, err, sizeof err) != 0)
        return fail("%s", err);
    spec.size = n; /* what the writer's buffers take */
    tl_volume_problem prob = {.projections = nproj,
                              .darks = R->darks.frames,
                              .flats = R->flats.frames,
                              .rows = nrows,
                              .cols = P->cols,
                              .size = n,
                              .in_sample = tl_dtype_size(dtype),
                              .out_sample = tl_out_dtype_size(spec.dtype),
                              .writer_bytes = tl_volume_output_buffer_bytes(&spec),
                              .read_rows = read_rows,
                              /* a grid rank's slabs as tall as one process's: short slabs
                                 multiply the per-frame submissions */
                              .cap_rows = gnrows,
                              .frame_rows = whole_frames ? P->rows : 0,
                              .chunk_frames = TL_VOLUME_READ_FRAMES,
                              .band_rows = cone_bands ? tl_volume_bands_rows : NULL,
                              .band_ctx = &R->bands,
                              .engine_bytes = tl_volume_engine_bytes,
                              .ctx = &ec};
    tl_volume_plan plan;
    if (tl_volume_plan_make(&prob, &budget, (uint32_t)slab_rows, &plan, err, sizeof err) != 0)
        return fail("%s", ec.failed ? ec.why : err);
    if (G) { /* from here on, a failing rank ends the job (tl_grid_abort) */
        R->agreed = true;
        if (!tl_grid_agree(R->grid, true))
            return fail("another rank of the grid failed (its message above)");
        R->running = true;
        /* a grid row's ranks reduce slab by slab: they take the same slabs, the shortest
         * any of them plans (their projections, and so their host buffers, differ) */
        uint32_t h = tl_grid_row_min(R->grid, plan.slab_rows);
        if (h != plan.slab_rows &&
            tl_volume_plan_make(&prob, &budget, h, &plan, err, sizeof err) != 0)
            return fail("%s", ec.failed ? ec.why : err);
        if (G->rank == 0)
            fprintf(stderr,
                    ME ": grid %ux%u: %u slices in %u parts, %u projections in %u; MPI with "
                       "device memory: %s\n",
                    G->rows, G->cols, gnrows, G->rows, P->frames, G->cols, tl_grid_cuda_aware());
    }
    FILE *planf = o->plan_only ? stdout : stderr;
    if ((o->plan_only || o->verbose) && (!G || G->rank == 0)) /* a grid's: rank 0's part */
        tl_volume_plan_print(&plan, &prob, &budget, planf);
    if (o->plan_only && !G)
        return 0;
    /* a scratch band for the float32 conversion */
    size_t scratch = (size_t)TL_VOLUME_READ_FRAMES * plan.engine_rows * P->cols * sizeof(uint32_t);
    if (dtype == TL_DTYPE_F32 && !(R->scratch = malloc(scratch)))
        return fail("out of memory for a read buffer of %zu MiB", scratch >> 20);

    band_reader br = {{&R->darks, &R->flats, &R->proj}, dtype, R->scratch, 0};
    tl_volume_job jb = {
        .count = {R->darks.frames, R->flats.frames, P->frames},
        .read = read_band,
        .ctx = &br,
        .angles = R->angles,
        .indices = R->indices,
        .row0 = row0,
        .rows = nrows,
        .size = n,
        .engine = c,
        .whole_frames = plan.whole,
        .bands = cone_bands && !plan.whole ? &R->bands : NULL,
        .plan = &plan,
        .iterative = iter.on ? &iter.o : NULL,
        .progress = tl_progress_auto(),
        .stop = &stop_requested,
        .verbose = o->verbose,
    };
    if (center_auto && !o->plan_only) {
        /* once, before the slabs, for all of them (and the same again on --resume): from
         * whole frames when the engine takes them, else from the middle CENTER_ROWS rows */
        uint32_t band = gnrows < CENTER_ROWS ? gnrows : CENTER_ROWS;
        band = band < plan.slab_rows ? band : plan.slab_rows;
        tl_center_estimate est;
        memset(&est, 0, sizeof est);
        /* a grid's rank 0 estimates for every rank (the others wait in the broadcast; a
         * failure ends the job) */
        int crc = G && G->rank != 0 ? 0
                                    : tl_volume_center(&jb, grow0 + (gnrows - band) / 2, band,
                                                       &est, err, sizeof err);
        if (G && crc == 0) {
            double v[2] = {est.center, est.confidence};
            tl_grid_bcast(R->grid, v, 2);
            est.center = v[0];
            est.confidence = v[1];
        }
        if (crc != 0) {
            if (crc > 0) {
                fprintf(stderr, ME ": interrupted\n");
                return 130;
            }
            return fail("--center auto: %s", err);
        }
        if (!G || G->rank == 0)
            fprintf(stderr, "center=%.3f confidence=%.3f\n", est.center, est.confidence);
        if (o->half_acquisition && !(est.center >= 0 && est.center <= P->cols - 1))
            return fail("--center auto: the estimated axis %.3f is not a column of the detector "
                        "(0..%u): give --center C",
                        est.center, P->cols - 1);
        if (o->half_acquisition && !size)
            n = jb.size = stitched_size(est.center, P->cols);
        jb.engine.center = c.center = est.center;
        jb.engine.center_estimate = false; /* done: the slabs need not keep estimating */
    }
    /* a grid column's share of the pages (the centre above saw them all) */
    br.proj_first = proj_first;
    jb.count[TL_FRAME_PROJ] = nproj;
    jb.angles = part_angles;
    jb.indices = part_indices;
    if (G && G->cols > 1) {
        jb.combine = tl_grid_reduce;
        jb.combine_ctx = R->grid;
    }
    if (G && G->rank != 0)
        jb.progress = TL_PROGRESS_NONE;
    tl_grid_rates rates;
    tl_grid_stages model;
    bool modelled = false;
    if (G && (o->plan_only || o->verbose))
        modelled = grid_model(o, R->grid, &jb, &rates, &model);
    if (G && o->plan_only)
        return 0;

    /* the output is created before the long part, so a bad path fails at once; creating it
     * truncates, so it must not be one of the inputs */
    const char *inputs[] = {o->input,       o->darks,   o->flats,
                            o->angles_file, o->indices, R->mfile.path};
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++)
        if (inputs[i] && same_file(inputs[i], o->output))
            return fail("the output '%s' is also an input: refusing to overwrite it", o->output);
    char job[2048];
    snprintf(job, sizeof job,
             "input=%s rows=%u:%u size=%u center=%.17g filter=%s projections=%u "
             "window=%u dtype=%s linear=%d quality=%s",
             o->input, row0, row1, n, c.center, tl_filter_name(filter), P->frames, nwin,
             o->output_dtype ? o->output_dtype : "float32", o->already_linear,
             tl_quality_name(c.quality));
    /* appended where the text ends: a long input path may have filled the buffer */
    size_t jn = strlen(job);
    tl_cone_opts_describe(&o->cone, job + jn, sizeof job - jn);
    jn = strlen(job);
    tl_iter_opts_describe(&iter, job + jn, sizeof job - jn);
    jn = strlen(job);
    if (R->matrices) /* their content, not only the file's name */
        snprintf(job + jn, sizeof job - jn, " nmatrices=%u matrices_fnv=%016llx", R->nmatrices,
                 matrices_hash(R));
    jn = strlen(job);
    if (corr.dezinger > 0 || corr.delta_beta > 0 || corr.rings || o->half_acquisition)
        snprintf(job + jn, sizeof job - jn,
                 " dezinger=%.17g paganin=%.17g,%.17g,%.17g,%.17g rings=%s:%u,%u,%.17g half=%d",
                 corr.dezinger, corr.energy_kev, corr.distance_m, corr.pixel_um, corr.delta_beta,
                 tl_rings_name(corr.rings), corr.ring_size, corr.ring_level, corr.ring_tolerance,
                 o->half_acquisition);
    spec.rows = nrows;
    spec.size = n;
    spec.job = job;
    bool writes = !G || G->col == 0; /* a grid row's column 0 writes its sum */
    if (G)
        grid_output(G, R, row0 - grow0, &spec);
    if (writes && tl_volume_output_open(&R->out, &spec, err, sizeof err) != 0) {
        if (!o->resume)
            tl_volume_output_close(&R->out, TL_OUTPUT_REMOVE, NULL, 0);
        return fail("%s", err);
    }
    R->writing = writes;
    uint32_t first_row = writes ? R->out.rows_done : 0;
    if (G && G->cols > 1) /* a grid row's columns start where its writer stopped */
        first_row = tl_grid_row_bcast(R->grid, first_row);
    if (o->resume && writes)
        fprintf(stderr, ME ": %sresuming at row %u of %u\n", G ? "this grid row's part: " : "",
                first_row, nrows);
    jb.first_row = first_row;
    jb.out = writes ? &R->out : NULL;
    tl_volume_times t;
    tl_volume_result res = tl_volume_run(&jb, &t, err, sizeof err);
    if (o->verbose && !G) {
        fprintf(stderr,
                ME ": backend %s, %u projections of rows %u..%u x %u cols, slices %u x %u, "
                   "filter %s, center %.3f, kernel %s\n",
                t.device, P->frames, row0, row1 - 1, P->cols, n, n, tl_filter_name(filter),
                c.center, t.kernel[0] ? t.kernel : "?");
        tl_volume_times_print(&t, stderr);
    }
    if (iter.on && (!G || G->rank == 0))
        print_iterative(&iter.o, &t.iterative, row0, o->cone.cone);
    if (res != TL_VOLUME_DONE) {
        bool resumable = writes && R->out.form != TL_OUT_TIFF_PAGES && R->out.rows_done > 0;
        if (writes)
            tl_volume_output_close(&R->out, resumable ? TL_OUTPUT_KEEP : TL_OUTPUT_REMOVE, NULL,
                                   0);
        R->writing = false;
        if (resumable)
            fprintf(stderr, ME ": %u of %u rows are written to '%s'; --resume continues\n",
                    R->out.rows_done, nrows, R->out.spec.path);
        if (res == TL_VOLUME_STOPPED) {
            fprintf(stderr, ME ": interrupted\n");
            return 130;
        }
        return fail("%s", err);
    }
    R->writing = false;
    if (writes && tl_volume_output_close(&R->out, TL_OUTPUT_DONE, err, sizeof err) != 0)
        return fail("%s", err);
    return G ? grid_finish(o, R->grid, &t, gnrows, n, &rates, modelled ? &model : NULL) : 0;
}

int tl_cmd_recon(int argc, char **argv)
{
    /* libhdf5's exit handler crashes on a file whose close failed (a full disk): every file
     * is closed explicitly, so the handler has nothing to do */
    H5dont_atexit();
    options o;
    int rc = parse_options(argc, argv, &o);
    if (rc >= 0)
        return rc;
    resources R;
    memset(&R, 0, sizeof R);
    tl_grid grid;
    if (o.grid) { /* an MPI job from here on (grid.h) */
        uint32_t rows, cols;
        char err[1024];
        if (!tl_grid_parse(o.grid, &rows, &cols))
            return fail("bad --grid '%s': need RxC (rows x columns, each 1 .. 65536), e.g. 2x2",
                        o.grid);
        if (tl_grid_start(&grid, rows, cols, err, sizeof err) != 0) {
            if (!grid.started || grid.rank == 0) /* every rank knows; one says */
                fprintf(stderr, ME ": %s\n", err);
            tl_grid_end(&grid);
            return 1;
        }
        R.grid = &grid;
    } else if (o.gpus_per_node) {
        return fail("--gpus-per-node: only with --grid");
    }
    stop_requested = 0;
    signal(SIGXFSZ, SIG_IGN); /* a file-size limit is a write error, not a kill */
    /* a stop request is a flag, acted on by the long parts (the centre's pass, the slabs) */
    struct sigaction sa = {.sa_handler = on_stop}, old_int, old_term;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    rc = run(&o, &R);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (R.writing) /* failed after the output was created, before any slab */
        tl_volume_output_close(&R.out, o.resume ? TL_OUTPUT_KEEP : TL_OUTPUT_REMOVE, NULL, 0);
    release(&R);
    if (R.grid) {
        /* every rank says once whether it got ready; after that a failure ends the job,
         * since the others may be waiting for this rank in a reduction */
        if (!R.agreed && !tl_grid_agree(R.grid, rc == 0) && rc == 0)
            rc = fail("another rank of the grid failed (its message above)");
        if (R.running && rc != 0)
            tl_grid_abort(R.grid, rc);
        tl_grid_end(R.grid);
    }
    return rc;
}
