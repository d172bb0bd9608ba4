/* push.c — `tomolive push`: the simulated camera. Sends a scan to tomolived's ingest
 * socket the way an acquisition system would: a `scan` message, darks, flats, projections
 * (from the analytic phantom or from TIFF stacks), then `end`. It doubles as load
 * generator and test fixture, so it can pace frames (absolute deadlines, no drift), send
 * some out of order, lose some on purpose (deterministically from a seed, with the lost
 * indices written to a file) and report the rate it achieved.
 *
 * PUSH blocks when the receiver's queue is full (back-pressure: nothing is dropped by
 * ZeroMQ), payloads go zero-copy from a ring of pre-produced frames (push_source.h), and
 * ZMQ_LINGER -1 makes the exit wait until every frame has been handed to the network.
 * With --bands N each frame goes as N messages of a row band each (PROTOCOL.md §8.2),
 * every one with the frame's header and a zero-copy slice of its buffer, which returns to
 * the ring when the last band is out.
 *
 * With --dectris DIR it replays recorded DECTRIS Stream V2 messages instead
 * (push_dectris.h).
 *
 * With --cuda-ipc it is a producer of frames in GPU memory instead (PROTOCOL.md §8.4,
 * clients/push_ipc.h): each frame is written into a slot of a ring on the GPU and only its
 * header is sent; the daemon's `release` hands the slot back. The pixels are exactly those
 * the host path sends for the same options. To reach a camera's rates the distinct frames
 * of the scan are uploaded once into a bank on the GPU, and each frame sent is then one
 * device-to-device copy; a scan whose distinct frames exceed --bank-mb is uploaded frame
 * by frame from host memory instead (slower, and said so).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clients/angles.h"
#include "clients/cli.h"
#include "clients/commands.h"
#include "clients/cone_opts.h"
#include "clients/cone_read.h"
#include "clients/hdf5.h"
#include "clients/push_dectris.h"
#include "clients/push_ipc.h"
#include "clients/push_socket.h"
#include "clients/push_source.h"
#include "gpu/phantom.h"
#include "protocol/protocol.h"
#include "gpu/base/clock.h"

#define ME "tomolive push"

static const char usage_text[] =
    "usage: tomolive push [--endpoint E] [--bind] [--key F --server-key F] [--series N]\n"
    "                     [--rate FPS] [--shuffle PCT] [--drop PCT] [--seed S] [--drop-list FILE] "
    "[--no-end] [--sndhwm N]\n"
    "                     [--buffer-mb MB] [--window N] [--center C] [--bands N] [--quiet]\n"
    "                     [--cuda-ipc [--device N] [--ring SLOTS] [--bank-mb MB] [--pitch B]\n"
    "                      [--release-endpoint E] [--release-timeout S]]\n"
    "                     [--geometry cone --source-origin MM --source-detector MM\n"
    "                      --pixel-size MM[,MM] [--offset U,V]] [SOURCE]\n"
    "SOURCE, the simulated camera (default):\n"
    "       [--rows 64] [--cols 256] [--projections 720] [--darks 10] [--flats 10]\n"
    "       [--angles-deg START:STOP (0:180; cone 0:360)] [--dtype u16|f32] [--flux 10000]\n"
    "       [--noise]\n"
    "       [--attenuation 2.0] [--turns 1]\n"
    "or TIFF stacks:\n"
    "       --tiff P.tif [--tiff-darks D.tif] [--tiff-flats F.tif] [--already-linear]\n"
    "       (--angles-deg START:STOP[:COUNT] | --angles FILE)\n"
    "or a data file, replayed (pace it with --rate):\n"
    "       --file SCAN.h5 | P.tif   HDF5 (APS Data Exchange or NeXus NXtomo: darks, flats,\n"
    "       projections and angles from the file; --angles-deg/--angles override the\n"
    "       angles) or a TIFF stack as with --tiff\n"
    "or recorded DECTRIS Stream V2 messages, replayed (with --endpoint, --bind, --rate,\n"
    "--sndhwm, --quiet only):\n"
    "       --dectris DIR   one message per DIR/*.cbor, sent in name order as they are, at\n"
    "       --rate messages/s; a set without a start message gets one synthesised from\n"
    "       its first image (series, image size, channels, number of images), sent first\n"
    "\n"
    "Sends a scan to tomolived's ingest socket: scan, darks, flats, projections, end.\n"
    "\n"
    "      --endpoint E       where to send (default tcp://localhost:5600; with --bind\n"
    "                         tcp://*:5600)\n"
    "      --bind             bind the endpoint and wait for the receiver to connect\n"
    "      --key F            this client's secret CURVE certificate (role ingest; default\n"
    "                         $TOMOLIVE_KEY), for a daemon with [security] curve\n"
    "      --server-key F     the daemon's public certificate (default $TOMOLIVE_SERVER_KEY)\n"
    "      --series N         series id (default 1)\n"
    "      --rate FPS         frames per second, paced from absolute deadlines; 0 = as fast\n"
    "                         as possible (default). Lost frames keep their time slot\n"
    "      --shuffle PCT      swap each projection with probability PCT %% with one up to 8\n"
    "                         positions later\n"
    "      --drop PCT         do not send a projection, with probability PCT %%\n"
    "      --seed S           seed of shuffle, drop and noise (default 1)\n"
    "      --drop-list FILE   write the indices of the dropped projections, one per line\n"
    "      --no-end           do not send the end message\n"
    "      --sndhwm N         send high-water mark in messages (default 1000)\n"
    "      --buffer-mb MB     memory for frames produced ahead (default 1024); when the scan\n"
    "                         fits, every frame is made before the clock starts\n"
    "      --window N         projections in the daemon's rolling window (default: all)\n"
    "      --center C         rotation axis column, sent in the scan (phantom: where the\n"
    "                         simulated axis projects; default (cols - 1) / 2, not sent)\n"
    "      --bands N          send each frame as N messages of a row band each (PROTOCOL.md\n"
    "                         8.2): band b holds rows b R / N to (b + 1) R / N - 1 of the R\n"
    "                         rows, with the frame's header; N <= R (default 1: whole\n"
    "                         frames, no band key); not with --cuda-ipc\n"
    "      --quiet            no progress on stderr\n"
    "  cone beam (PROTOCOL.md 8.1.1; the scan carries them, and the simulated camera is a\n"
    "  cone-beam one):\n" TL_CONE_OPTS_HELP
    "  frames in GPU memory (CUDA IPC; the daemon on the same host):\n"
    "      --cuda-ipc         write each frame into a ring of slots on the GPU and send its\n"
    "                         header alone; the daemon's release messages free the slots\n"
    "      --device N         CUDA device of the ring (default 0)\n"
    "      --ring SLOTS       frames in the ring (default 16)\n"
    "      --bank-mb MB       GPU memory for the scan's distinct frames, uploaded once so\n"
    "                         that a frame is a device-to-device copy (default 2048); a scan\n"
    "                         with more is uploaded frame by frame from host memory\n"
    "      --pitch B          bytes between rows in the ring (default: a row rounded up to\n"
    "                         512)\n"
    "      --release-endpoint E  where release messages are received (default\n"
    "                         tcp://127.0.0.1 on a free port)\n"
    "      --release-timeout S  seconds to wait for a release before failing (default 10)\n"
    "  phantom: 3-D Shepp-Logan, scaled so the largest line integral is --attenuation;\n"
    "      camera counts = flux x gain pattern x exp(-line integral) + dark offset 100;\n"
    "      in cone beam its line integrals are exact along the rays from the source, and it\n"
    "      is as large (in mm, centred on the isocentre) as fits 0.9 of the detector from\n"
    "      every angle\n"
    "      --dtype u16|f32    sample type of the frames (default u16)\n"
    "      --noise            Poisson noise on the counts\n"
    "      --turns N          send the projections N times, indices going on (projection\n"
    "                         i has the angle of i mod the count: with 0:360 a rotation\n"
    "                         of N turns; the window defaults to one turn)\n"
    "  TIFF: page i of each file is frame index i of its kind; --angles-deg with COUNT (or\n"
    "      the lines of --angles) must match the projection pages\n"
    "\n"
    "Prints on stdout: pushed N frames (D darks, F flats, P projections, X dropped) in T s:\n"
    "R frames/s, G GB/s; with --cuda-ipc also: cuda-ipc: N frames lent through a ring of\n"
    "S slots on GPU-...: K released, J rejected [(first: CODE: message)].\n"
    "Exit status: 0 done, 1 failed, 2 usage error.\n";

typedef struct {
    const char *endpoint, *drop_list, *angles_deg, *angles_file;
    const char *tiff, *tiff_darks, *tiff_flats;
    const char *phantom_opt, *tiff_opt; /* one option of each kind given, for messages */
    const char *dectris;                /* --dectris DIR */
    const char *other_opt;              /* an option --dectris does not take, for messages */
    bool h5;                            /* --file names an HDF5 file (its path is in tiff) */
    bool bind, no_end, quiet, noise, already_linear, has_center, has_projections;
    uint64_t series, seed;
    double rate, shuffle, drop, flux, attenuation, center;
    uint32_t rows, cols, projections, darks, flats, window, turns;
    uint32_t bands; /* --bands: messages per frame, one row band each */
    bool has_bands;
    int sndhwm;
    size_t buffer_mb;
    tl_dtype dtype;
    /* --cuda-ipc */
    bool cuda_ipc;
    const char *ipc_opt; /* an option that needs --cuda-ipc, for the message */
    const char *release_endpoint;
    const char *key, *server_key; /* CURVE certificates (protocol/zcert.h), NULL: environment */
    uint32_t device, ring;
    size_t bank_mb, pitch;
    double release_timeout;
    tl_cone_opts cone; /* --geometry cone and its options */
} options;

#define fail(rc, ...) tl_cli_fail(ME, (rc), __VA_ARGS__)

/* ---- options ------------------------------------------------------------------------- */

static bool parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end || errno || *s == '-' || v < min || v > max)
        return false;
    *out = v;
    return true;
}

static bool parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
    uint64_t v;
    if (!parse_u64(s, min, max, &v))
        return false;
    *out = (uint32_t)v;
    return true;
}

static bool parse_double(const char *s, double min, double max, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || v < min || v > max)
        return false;
    *out = v;
    return true;
}

enum {
    O_ENDPOINT = 256,
    O_BIND,
    O_SERIES,
    O_RATE,
    O_SHUFFLE,
    O_DROP,
    O_SEED,
    O_DROPLIST,
    O_NOEND,
    O_SNDHWM,
    O_QUIET,
    O_BUFFER,
    O_WINDOW,
    O_CENTER,
    O_ANGLESDEG,
    O_BANDS,
    O_CUDAIPC,
    /* --cuda-ipc only */
    O_DEVICE,
    O_RING,
    O_BANK,
    O_PITCH,
    O_RELEP,
    O_RELTIMEOUT,
    /* phantom only */
    O_ROWS,
    O_COLS,
    O_PROJ,
    O_DARKS,
    O_FLATS,
    O_DTYPE,
    O_FLUX,
    O_NOISE,
    O_ATTEN,
    O_TURNS,
    /* TIFF only */
    O_TIFF,
    O_TDARKS,
    O_TFLATS,
    O_ANGLES,
    O_LINEAR,
    /* a data file */
    O_FILE,
    /* recorded DECTRIS Stream V2 messages */
    O_DECTRIS,
    /* the geometry: for every source */
    O_GEOMETRY,
    O_SOURCE_ORIGIN,
    O_SOURCE_DETECTOR,
    O_PIXEL_SIZE,
    O_OFFSET,
    O_MATRICES,
    /* CURVE keys (last: the ranges above group options by mode) */
    O_KEY,
    O_SERVER_KEY
};

static const struct option longopts[] = {
    {"endpoint", required_argument, NULL, O_ENDPOINT},
    {"bind", no_argument, NULL, O_BIND},
    {"key", required_argument, NULL, O_KEY},
    {"server-key", required_argument, NULL, O_SERVER_KEY},
    {"series", required_argument, NULL, O_SERIES},
    {"rate", required_argument, NULL, O_RATE},
    {"shuffle", required_argument, NULL, O_SHUFFLE},
    {"drop", required_argument, NULL, O_DROP},
    {"seed", required_argument, NULL, O_SEED},
    {"drop-list", required_argument, NULL, O_DROPLIST},
    {"no-end", no_argument, NULL, O_NOEND},
    {"sndhwm", required_argument, NULL, O_SNDHWM},
    {"quiet", no_argument, NULL, O_QUIET},
    {"buffer-mb", required_argument, NULL, O_BUFFER},
    {"window", required_argument, NULL, O_WINDOW},
    {"center", required_argument, NULL, O_CENTER},
    {"angles-deg", required_argument, NULL, O_ANGLESDEG},
    {"bands", required_argument, NULL, O_BANDS},
    {"cuda-ipc", no_argument, NULL, O_CUDAIPC},
    {"device", required_argument, NULL, O_DEVICE},
    {"ring", required_argument, NULL, O_RING},
    {"bank-mb", required_argument, NULL, O_BANK},
    {"pitch", required_argument, NULL, O_PITCH},
    {"release-endpoint", required_argument, NULL, O_RELEP},
    {"release-timeout", required_argument, NULL, O_RELTIMEOUT},
    {"turns", required_argument, NULL, O_TURNS},
    {"rows", required_argument, NULL, O_ROWS},
    {"cols", required_argument, NULL, O_COLS},
    {"projections", required_argument, NULL, O_PROJ},
    {"darks", required_argument, NULL, O_DARKS},
    {"flats", required_argument, NULL, O_FLATS},
    {"dtype", required_argument, NULL, O_DTYPE},
    {"flux", required_argument, NULL, O_FLUX},
    {"noise", no_argument, NULL, O_NOISE},
    {"attenuation", required_argument, NULL, O_ATTEN},
    {"tiff", required_argument, NULL, O_TIFF},
    {"tiff-darks", required_argument, NULL, O_TDARKS},
    {"tiff-flats", required_argument, NULL, O_TFLATS},
    {"angles", required_argument, NULL, O_ANGLES},
    {"already-linear", no_argument, NULL, O_LINEAR},
    {"file", required_argument, NULL, O_FILE},
    {"dectris", required_argument, NULL, O_DECTRIS},
    {"geometry", required_argument, NULL, O_GEOMETRY},
    {"source-origin", required_argument, NULL, O_SOURCE_ORIGIN},
    {"source-detector", required_argument, NULL, O_SOURCE_DETECTOR},
    {"pixel-size", required_argument, NULL, O_PIXEL_SIZE},
    {"offset", required_argument, NULL, O_OFFSET},
    {"matrices", required_argument, NULL, O_MATRICES},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Applies one option; false when its value is bad. */
static bool apply(options *o, int c, const char *v)
{
    uint64_t u;
    switch (c) {
        case O_ENDPOINT: o->endpoint = v; return true;
        case O_BIND: o->bind = true; return true;
        case O_KEY: o->key = v; return true;
        case O_SERVER_KEY: o->server_key = v; return true;
        case O_SERIES: return parse_u64(v, 0, UINT64_MAX, &o->series);
        case O_RATE: return parse_double(v, 0, 1e9, &o->rate);
        case O_SHUFFLE: return parse_double(v, 0, 100, &o->shuffle);
        case O_DROP: return parse_double(v, 0, 100, &o->drop);
        case O_SEED: return parse_u64(v, 0, UINT64_MAX, &o->seed);
        case O_DROPLIST: o->drop_list = v; return true;
        case O_NOEND: o->no_end = true; return true;
        case O_SNDHWM:
            if (!parse_u64(v, 0, INT32_MAX, &u))
                return false;
            o->sndhwm = (int)u;
            return true;
        case O_QUIET: o->quiet = true; return true;
        case O_BUFFER:
            if (!parse_u64(v, 0, 1u << 30, &u))
                return false;
            o->buffer_mb = u;
            return true;
        case O_WINDOW: return parse_u32(v, 1, TL_PROTO_MAX_WINDOW, &o->window);
        case O_CENTER: o->has_center = true; return parse_double(v, -1e9, 1e9, &o->center);
        case O_ANGLESDEG: o->angles_deg = v; return true;
        case O_BANDS:
            o->has_bands = true; /* at most the rows: checked once the source says how many */
            return parse_u32(v, 1, TL_PROTO_MAX_DIM, &o->bands);
        case O_CUDAIPC: o->cuda_ipc = true; return true;
        case O_DEVICE: return parse_u32(v, 0, 1023, &o->device);
        case O_RING: return parse_u32(v, 1, 65536, &o->ring);
        case O_BANK:
            if (!parse_u64(v, 0, 1u << 30, &u))
                return false;
            o->bank_mb = u;
            return true;
        case O_PITCH:
            if (!parse_u64(v, 1, (uint64_t)1 << 31, &u))
                return false;
            o->pitch = u;
            return true;
        case O_RELEP: o->release_endpoint = v; return *v && strlen(v) <= TL_PROTO_MAX_ENDPOINT;
        case O_RELTIMEOUT: return parse_double(v, 0.001, 1e6, &o->release_timeout);
        case O_TURNS: return parse_u32(v, 1, 1000000, &o->turns);
        case O_ROWS: return parse_u32(v, 1, TL_PROTO_MAX_DIM, &o->rows);
        case O_COLS: return parse_u32(v, 1, TL_PROTO_MAX_DIM, &o->cols);
        case O_PROJ: o->has_projections = true; return parse_u32(v, 1, 10000000, &o->projections);
        case O_DARKS: return parse_u32(v, 0, 1000000, &o->darks);
        case O_FLATS: return parse_u32(v, 0, 1000000, &o->flats);
        case O_DTYPE:
            if (!strcmp(v, "u16"))
                o->dtype = TL_DTYPE_U16;
            else if (!strcmp(v, "f32"))
                o->dtype = TL_DTYPE_F32;
            else
                return false;
            return true;
        case O_FLUX: return parse_double(v, 1e-9, 1e15, &o->flux);
        case O_NOISE: o->noise = true; return true;
        case O_ATTEN: return parse_double(v, 0, 1e6, &o->attenuation);
        case O_TIFF: o->tiff = v; return true;
        case O_TDARKS: o->tiff_darks = v; return true;
        case O_TFLATS: o->tiff_flats = v; return true;
        case O_ANGLES: o->angles_file = v; return true;
        case O_LINEAR: o->already_linear = true; return true;
        case O_FILE:
            o->tiff = v;
            o->h5 = tl_hdf5_is_hdf5(v);
            return true;
        case O_DECTRIS: o->dectris = v; return true;
    }
    return false;
}

static const char *option_name(int c)
{
    for (const struct option *p = longopts; p->name; p++)
        if (p->val == c)
            return p->name;
    return "?";
}

static int parse_options(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->series = 1;
    o->seed = 1;
    o->sndhwm = 1000;
    o->buffer_mb = 1024;
    o->rows = 64, o->cols = 256, o->projections = 720, o->darks = 10, o->flats = 10;
    o->dtype = TL_DTYPE_U16;
    o->flux = 10000;
    o->attenuation = 2.0;
    o->turns = 1;
    o->bands = 1;
    o->ring = 16;
    o->bank_mb = 2048;
    o->release_timeout = 10;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        if (c == 'h') {
            fputs(usage_text, stdout);
            return 0;
        }
        if (c == '?' || c == ':')
            return fail(2, "%s '%s' (see tomolive push --help)",
                        c == ':' ? "option needs a value" : "unknown option", argv[optind - 1]);
        char why[256];
        if (c >= O_GEOMETRY && c <= O_MATRICES) {
            if (!tl_cone_opt(&o->cone, option_name(c), optarg, why, sizeof why))
                return fail(2, "%s (see tomolive push --help)", why);
        } else if (!apply(o, c, optarg))
            return fail(2, "bad --%s '%s' (see tomolive push --help)", option_name(c), optarg);
        if (c >= O_ROWS && c <= O_TURNS)
            o->phantom_opt = option_name(c);
        if (c >= O_DEVICE && c <= O_RELTIMEOUT)
            o->ipc_opt = option_name(c);
        if (c >= O_TDARKS && c <= O_LINEAR)
            o->tiff_opt = option_name(c);
        if (c != O_ENDPOINT && c != O_BIND && c != O_RATE && c != O_SNDHWM && c != O_QUIET &&
            c != O_DECTRIS)
            o->other_opt = option_name(c);
    }
    if (optind < argc)
        return fail(2, "unexpected argument '%s' (see tomolive push --help)", argv[optind]);
    if (o->dectris && o->other_opt)
        return fail(2,
                    "--%s is not for --dectris (which takes --endpoint, --bind, --rate, "
                    "--sndhwm and --quiet)",
                    o->other_opt);
    if (o->tiff && o->phantom_opt)
        return fail(2, "--%s is for the simulated camera, not for --tiff", o->phantom_opt);
    if (!o->tiff && o->tiff_opt)
        return fail(2, "--%s needs --tiff", o->tiff_opt);
    if (o->h5 && (o->tiff_darks || o->tiff_flats))
        return fail(2, "an HDF5 --file holds its own darks and flats (--tiff-darks and "
                       "--tiff-flats are for TIFF)");
    if (o->tiff && !o->h5 && !o->angles_deg && !o->angles_file)
        return fail(2, "--tiff needs --angles-deg or --angles");
    if (o->angles_deg && o->angles_file)
        return fail(2, "give either --angles-deg or --angles, not both");
    if (o->ipc_opt && !o->cuda_ipc)
        return fail(2, "--%s needs --cuda-ipc", o->ipc_opt);
    if (o->has_bands && o->cuda_ipc)
        return fail(2, "--bands is not for --cuda-ipc: a frame in GPU memory is lent whole");
    char why[256];
    if (!tl_cone_opts_check(&o->cone, o->has_center, why, sizeof why))
        return fail(2, "%s", why);
    if (o->cone.matrices && o->turns > 1) /* an index past the file has no matrix */
        return fail(2,
                    "--matrices with --turns %u: the matrices give one projection each "
                    "(frame index i has matrix i)",
                    o->turns);
    if (!o->endpoint)
        o->endpoint = o->bind ? "tcp://*:5600" : "tcp://localhost:5600";
    return -1;
}

/* ---- the scan ------------------------------------------------------------------------ */

typedef struct {
    uint32_t rows, cols, ndark, nflat, nproj; /* nproj: of one turn (--turns) */
    uint32_t turns;
    tl_dtype dtype;
    double *angles;         /* by projection index */
    double (*matrices)[12]; /* --matrices: by projection index (nproj of them), or NULL */
    push_item *items;       /* what is sent, in order */
    uint64_t *slot;         /* each item's time slot (lost frames keep theirs) */
    size_t nsent;
    uint32_t dropped;
} scan;

/* Builds the send order: darks, flats, projections (of every turn) with the requested
 * disorder. */
static int schedule(const options *o, scan *sc)
{
    sc->turns = o->turns;
    uint64_t nall = (uint64_t)sc->nproj * sc->turns; /* projections of every turn */
    if (nall > UINT32_MAX)
        return fail(2, "%u projections x %u turns: too many frames", sc->nproj, sc->turns);
    size_t total = (size_t)sc->ndark + sc->nflat + nall;
    uint32_t *order = malloc((nall ? nall : 1) * sizeof *order);
    bool *lost = calloc(nall ? nall : 1, sizeof *lost);
    sc->items = malloc(total * sizeof *sc->items);
    sc->slot = malloc(total * sizeof *sc->slot);
    if (!order || !lost || !sc->items || !sc->slot) {
        free(order);
        free(lost);
        return fail(1, "out of memory for a scan of %zu frames", total);
    }
    tl_rng rng;
    tl_rng_seed(&rng, o->seed);
    for (uint32_t k = 0; k < nall; k++)
        order[k] = k;
    for (uint32_t k = 0; k < nall; k++)
        if (o->shuffle > 0 && tl_rng_uniform(&rng) * 100 < o->shuffle) {
            uint64_t j = k + 1 + tl_rng_next(&rng) % 8;
            if (j < nall) {
                uint32_t t = order[k];
                order[k] = order[j];
                order[j] = t;
            }
        }
    for (uint32_t k = 0; k < nall; k++)
        lost[k] = o->drop > 0 && tl_rng_uniform(&rng) * 100 < o->drop;
    size_t pos = 0;
    for (uint32_t i = 0; i < sc->ndark; i++, pos++)
        sc->slot[sc->nsent] = pos, sc->items[sc->nsent++] = (push_item){TL_FRAME_DARK, i, 0};
    for (uint32_t i = 0; i < sc->nflat; i++, pos++)
        sc->slot[sc->nsent] = pos, sc->items[sc->nsent++] = (push_item){TL_FRAME_FLAT, i, 0};
    for (uint32_t i = 0; i < nall; i++, pos++) {
        uint32_t k = order[i];
        if (lost[k]) {
            sc->dropped++;
            continue;
        }
        sc->slot[sc->nsent] = pos;
        /* a later turn repeats the first one's angles exactly (same bits), so that its
         * frames are the same frames: what makes the schedule periodic for --cuda-ipc */
        sc->items[sc->nsent++] = (push_item){TL_FRAME_PROJ, k, sc->angles[k % sc->nproj]};
    }
    int rc = 0;
    FILE *f = o->drop_list ? fopen(o->drop_list, "w") : NULL;
    if (o->drop_list && !f)
        rc = fail(1, "cannot create '%s': %s", o->drop_list, strerror(errno));
    for (uint32_t k = 0; f && k < nall; k++)
        if (lost[k])
            fprintf(f, "%u\n", k);
    if (f && fclose(f) != 0)
        rc = fail(1, "cannot write '%s': %s", o->drop_list, strerror(errno));
    free(order);
    free(lost);
    return rc;
}

static tl_proto_dtype proto_dtype(tl_dtype t)
{
    switch (t) {
        case TL_DTYPE_U8: return TL_PROTO_U8;
        case TL_DTYPE_U16: return TL_PROTO_U16;
        case TL_DTYPE_U32: return TL_PROTO_U32;
        default: return TL_PROTO_F32;
    }
}

/* --matrices FILE[:FORMAT] for a rows x cols detector into sc (cone_read.h, as recon
 * reads them): at most what one scan message carries (PROTOCOL.md 8.1.1). */
static int read_matrices(const options *o, uint32_t rows, uint32_t cols, scan *sc, uint32_t *n)
{
    char err[768];
    tl_cone_matrix_file mf;
    if (tl_cone_matrix_spec(o->cone.matrices, &mf, err, sizeof err) != 0)
        return fail(2, "--matrices: %s", err);
    tl_cone_detector det = {rows, cols, o->cone.pixel_u, o->cone.pixel_v};
    int rc = tl_cone_read(&mf, &det, &sc->matrices, n, err, sizeof err);
    tl_cone_matrix_file_free(&mf);
    if (rc != 0)
        return fail(1, "--matrices: %s", err);
    if (*n > TL_PROTO_MAX_MATRICES)
        return fail(2,
                    "--matrices '%s': %u matrices, a scan message carries at most %u "
                    "(PROTOCOL.md 8.1.1)",
                    o->cone.matrices, *n, TL_PROTO_MAX_MATRICES);
    return 0;
}

/* The source of frames and the scan's shape, counts and angles. */
static int open_source(const options *o, push_source **src, scan *sc)
{
    char err[512];
    uint32_t pages[3], nmat = 0;
    double center = tl_cone_opts_center(&o->cone, o->cols, o->has_center, o->center);
    /* the simulated camera projects along them, so they come first; files: their shape */
    if (o->cone.matrices && !o->tiff && read_matrices(o, o->rows, o->cols, sc, &nmat) != 0)
        return 1;
    if (o->h5) {
        *src = push_source_hdf5(o->tiff, err, sizeof err);
    } else if (o->tiff) {
        *src = push_source_tiff(o->tiff, o->tiff_darks, o->tiff_flats, err, sizeof err);
    } else {
        push_phantom_opts po = {o->rows,        o->cols,      o->dtype, o->flux,
                                o->attenuation, center,       o->noise, o->seed,
                                &o->cone,       sc->matrices, nmat};
        *src = push_source_phantom(&po, err, sizeof err);
    }
    if (!*src)
        return fail(1, "%s", err);
    push_source_info(*src, &sc->rows, &sc->cols, &sc->dtype, pages);
    sc->ndark = o->tiff ? pages[TL_FRAME_DARK] : o->darks;
    sc->nflat = o->tiff ? pages[TL_FRAME_FLAT] : o->flats;
    sc->nproj = o->tiff ? pages[TL_FRAME_PROJ] : o->projections;
    if (o->cone.matrices && o->tiff && read_matrices(o, sc->rows, sc->cols, sc, &nmat) != 0)
        return 1;
    if (o->cone.matrices && !o->tiff && !o->has_projections)
        sc->nproj = nmat; /* one projection per matrix */
    uint32_t n = 0;
    const double *file_angles = o->h5 ? push_source_angles(*src) : NULL;
    if (o->h5 && !o->angles_deg && !o->angles_file) { /* the file's own */
        if (!file_angles)
            return fail(1, "'%s' holds no angles: give --angles-deg or --angles", o->tiff);
        n = sc->nproj;
        if (!(sc->angles = malloc((n ? n : 1) * sizeof *sc->angles)))
            return fail(1, "out of memory");
        memcpy(sc->angles, file_angles, n * sizeof *sc->angles);
    }
    /* the phantom's default: half a turn, or in cone beam (FDK) a whole one */
    const char *deg = o->angles_deg  ? o->angles_deg
                      : o->tiff      ? NULL
                      : o->cone.cone ? "0:360"
                                     : "0:180";
    if (deg && !tl_angles_parse_deg(deg, sc->nproj, &sc->angles, &n))
        return fail(2, "bad --angles-deg '%s': need START:STOP[:COUNT] in degrees", deg);
    if (o->angles_file &&
        tl_angles_read_file(o->angles_file, &sc->angles, &n, err, sizeof err) != 0)
        return fail(1, "%s", err);
    if (n != sc->nproj && (o->tiff || o->has_projections))
        return fail(1, "%u angles for %u projections%s%s", n, sc->nproj, o->tiff ? " in " : "",
                    o->tiff ? o->tiff : "");
    sc->nproj = n; /* the phantom takes its projection count from COUNT */
    if (o->cone.matrices && nmat != n)
        return fail(1, "--matrices '%s': %u matrices for %u projections (one each)",
                    o->cone.matrices, nmat, n);
    return 0;
}

/* ---- sending ------------------------------------------------------------------------- */

/* Progress on stderr. On a terminal: one line redrawn in place (carriage return, then
 * erase to the end of the line), at most 10 times a second, because redrawing per frame
 * at thousands of frames/s would cost more than the sending. Otherwise (a log file, a
 * pipe): a plain line at most once a second, so logs stay readable. --quiet: nothing. */
typedef struct {
    bool tty, quiet, drawn;
    uint64_t t0, next_ns; /* monotonic: start of the clock, time of the next report */
} progress;

/* "4 s", "2:05", "1:02:03": the time left, short. */
static void format_eta(char *b, size_t n, double s)
{
    long t = (long)ceil(s);
    if (!isfinite(s) || s < 0)
        snprintf(b, n, "--");
    else if (t < 60)
        snprintf(b, n, "%ld s", t);
    else if (t < 3600)
        snprintf(b, n, "%ld:%02ld", t / 60, t % 60);
    else
        snprintf(b, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
}

static void report(progress *pr, size_t done, size_t total, bool last)
{
    uint64_t now = tl_clock_ns();
    if (pr->quiet || (!last && now < pr->next_ns))
        return;
    pr->next_ns = now + (pr->tty ? 100000000u : 1000000000u);
    double s = (double)(now - pr->t0) * 1e-9;
    double rate = s > 0 ? (double)done / s : 0.0;
    double frac = total ? (double)done / (double)total : 1.0;
    char eta[32] = "";
    if (!last) {
        char t[24];
        format_eta(t, sizeof t, rate > 0 ? (double)(total - done) / rate : NAN);
        snprintf(eta, sizeof eta, " ETA %s", t);
    }
    if (pr->tty) {
        enum { BAR = 20 };
        char bar[BAR + 1];
        int fill = (int)(frac * BAR);
        for (int i = 0; i < BAR; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[BAR] = '\0';
        fprintf(stderr, "\r[%s] %3d%% %.0f frames/s%s\033[K%s", bar, (int)(frac * 100), rate, eta,
                last ? "\n" : "");
        pr->drawn = !last;
    } else {
        fprintf(stderr, ME ": %zu/%zu frames (%d%%), %.1f frames/s%s%s\n", done, total,
                (int)(frac * 100), rate, *eta ? "," : "", eta);
    }
}

/* Ends a half-drawn progress line, so that an error message starts on a line of its own. */
static void report_break(progress *pr)
{
    if (pr->drawn)
        fputc('\n', stderr);
    pr->drawn = false;
}

static void sleep_until(uint64_t t)
{
    struct timespec ts = {(time_t)(t / 1000000000u), (long)(t % 1000000000u)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static int send_header(void *sock, msgpack_sbuffer *sb, const char *what)
{
    if (tl_proto_send(sock, NULL, 0, sb->data, sb->size, NULL, 0, NULL, NULL, 0) != 0)
        return fail(1, "cannot send the %s message: %s", what, zmq_strerror(errno));
    return 0;
}

/* ---- frames in GPU memory (--cuda-ipc) ----------------------------------------------- */

typedef struct {
    tl_push_ipc *ring;
    size_t *bank_of; /* each sent frame's bank entry; NULL: uploaded frame by frame */
    size_t nbank;
    double timeout; /* --release-timeout */
} gpu_frames;

/* The ring on the GPU, first of all: without CUDA or without the device nothing else is
 * worth doing. */
static int gpu_open(const options *o, const scan *sc, gpu_frames *g)
{
    char err[512];
    tl_push_ipc_opts io = {.key = o->key,
                           .device = (int)o->device,
                           .rows = sc->rows,
                           .cols = sc->cols,
                           .dtype = proto_dtype(sc->dtype),
                           .slots = o->ring,
                           .pitch = o->pitch,
                           .endpoint = o->release_endpoint};
    if (!(g->ring = tl_push_ipc_create(&io, err, sizeof err)))
        return fail(1, "--cuda-ipc: %s", err);
    g->timeout = o->release_timeout;
    return 0;
}

typedef struct {
    uint64_t kind, bits; /* what determines the frame */
    size_t p;            /* its position in the send order */
} frame_key;

static int cmp_key(const void *a, const void *b)
{
    const frame_key *x = a, *y = b;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    if (x->bits != y->bits)
        return x->bits < y->bits ? -1 : 1;
    return (x->p > y->p) - (x->p < y->p);
}

/* Which of the frames sent are the same frame, so that the bank holds each once. The
 * simulated camera without noise makes a frame from its kind and, for a projection, its
 * angle alone (the index only seeds the noise): frames of equal kind and bit-identical
 * angle are equal, byte for byte — the same function of the same input. Equal bits, not
 * equal angles modulo 2 pi: a frame made at another angle of the same direction may differ
 * in a rounding, and the frames must be exactly those of the host path. With noise, or
 * from files, every frame is its own. Fills bank_of[p] and uniq[] (one item per entry, to
 * make it from) and returns the number of entries; 0 when out of memory. */
static size_t distinct_frames(const options *o, const scan *sc, size_t *bank_of, push_item *uniq)
{
    size_t n = sc->nsent;
    if (o->tiff || o->noise) {
        for (size_t p = 0; p < n; p++)
            bank_of[p] = p, uniq[p] = sc->items[p];
        return n;
    }
    frame_key *k = malloc(n * sizeof *k);
    if (!k)
        return 0;
    for (size_t p = 0; p < n; p++) {
        const push_item *it = &sc->items[p];
        uint64_t bits = 0;
        if (it->kind == TL_FRAME_PROJ)
            memcpy(&bits, &it->angle, sizeof bits);
        k[p] = (frame_key){(uint64_t)it->kind, bits, p};
    }
    qsort(k, n, sizeof *k, cmp_key);
    size_t d = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || k[i].kind != k[i - 1].kind || k[i].bits != k[i - 1].bits)
            uniq[d++] = sc->items[k[i].p];
        bank_of[k[i].p] = d - 1;
    }
    free(k);
    return d;
}

/* Frames buffered ahead by the source: --buffer-mb worth, at least 4. */
static size_t ahead_buffers(const options *o, size_t frame_bytes)
{
    size_t nbuf = (o->buffer_mb << 20) / (frame_bytes ? frame_bytes : 1);
    return nbuf < 4 ? 4 : nbuf;
}

/* Waits until the source has made the first `ahead` frames, saying so on a big scan. */
static void make_ahead(const options *o, push_source *src, size_t ahead)
{
    size_t made;
    bool tty = isatty(STDERR_FILENO) == 1, said = false;
    while ((made = push_source_wait(src, ahead, 1.0)) < ahead && !push_source_failed(src))
        if (!o->quiet) {
            fprintf(stderr, "%s" ME ": making frames %zu/%zu%s", tty ? "\r" : "", made, ahead,
                    tty ? "" : "\n");
            said = true;
        }
    if (said && tty)
        fputc('\n', stderr);
}

/* Makes each distinct frame once and uploads it into the bank. */
static int gpu_fill_bank(const options *o, push_source *src, gpu_frames *g, const push_item *uniq,
                         size_t d, size_t frame_bytes)
{
    char err[512];
    if (push_source_start(src, uniq, d, ahead_buffers(o, frame_bytes), err, sizeof err) != 0)
        return fail(1, "%s", err);
    bool tty = isatty(STDERR_FILENO) == 1, said = false;
    double next = tl_cli_now() + 1.0;
    for (size_t i = 0; i < d; i++) {
        void *px = push_source_frame(src, i, err, sizeof err);
        if (!px)
            return fail(1, "%s", err);
        int rc = tl_push_ipc_bank_put(g->ring, i, px, err, sizeof err);
        push_source_release(px, push_source_hint(src, i)); /* the upload is complete */
        if (rc != 0)
            return fail(1, "--cuda-ipc: %s", err);
        if (!o->quiet && (tl_cli_now() > next || (said && i + 1 == d))) {
            fprintf(stderr, "%s" ME ": frames to GPU %u: %zu/%zu%s", tty ? "\r" : "", o->device,
                    i + 1, d, tty ? "" : "\n");
            said = true;
            next = tl_cli_now() + (tty ? 0.1 : 1.0);
        }
    }
    if (said && tty)
        fputc('\n', stderr);
    return 0;
}

/* Gets the frames ready: into the bank when the scan's distinct frames fit --bank-mb,
 * otherwise made ahead in host memory as for the host path and uploaded frame by frame. */
static int gpu_prepare(const options *o, const scan *sc, push_source *src, gpu_frames *g)
{
    char err[512];
    size_t n = sc->nsent, frame_bytes = (size_t)sc->rows * sc->cols * tl_dtype_size(sc->dtype);
    size_t slot_bytes = tl_push_ipc_slot_bytes(g->ring);
    size_t *bank_of = malloc((n ? n : 1) * sizeof *bank_of);
    push_item *uniq = malloc((n ? n : 1) * sizeof *uniq);
    size_t d = bank_of && uniq && n ? distinct_frames(o, sc, bank_of, uniq) : 0;
    if (n && !d) {
        free(bank_of);
        free(uniq);
        return fail(1, "out of memory for a scan of %zu frames", n);
    }
    int rc = 0;
    bool fits = d <= (o->bank_mb << 20) / slot_bytes;
    if (n == 0) {
        /* nothing to send: neither bank nor source */
    } else if (fits && tl_push_ipc_bank_alloc(g->ring, d, err, sizeof err) == 0) {
        if (!o->quiet)
            fprintf(stderr,
                    ME ": --cuda-ipc: %zu distinct frames (%.1f MB) go to GPU %u once; "
                       "each frame sent is a device-to-device copy into a ring of %u slots\n",
                    d, (double)d * (double)slot_bytes / 1e6, o->device, o->ring);
        rc = gpu_fill_bank(o, src, g, uniq, d, frame_bytes);
        g->bank_of = bank_of;
        g->nbank = d;
        bank_of = NULL;
    } else {
        if (!o->quiet && fits)
            fprintf(stderr,
                    ME ": --cuda-ipc: no bank on the GPU (%s): each frame is uploaded "
                       "from host memory as it is sent, which may limit the rate\n",
                    err);
        else if (!o->quiet)
            fprintf(stderr,
                    ME ": --cuda-ipc: the scan's %zu distinct frames (%.1f MB) exceed "
                       "--bank-mb %zu: each frame is uploaded from host memory as it is sent, "
                       "which may limit the rate\n",
                    d, (double)d * (double)slot_bytes / 1e6, o->bank_mb);
        size_t nbuf = ahead_buffers(o, frame_bytes);
        if (push_source_start(src, sc->items, n, nbuf, err, sizeof err) != 0)
            rc = fail(1, "%s", err);
        else
            make_ahead(o, src, nbuf < n ? nbuf : n);
    }
    free(bank_of);
    free(uniq);
    return rc;
}

/* Frame p into a ring slot: a free slot (waiting for a release if need be), then the
 * pixels, copied from the bank or uploaded from the source's host buffer. */
static int gpu_frame(gpu_frames *g, push_source *src, size_t p, uint32_t *slot, char *err,
                     size_t errlen)
{
    if (tl_push_ipc_acquire(g->ring, g->timeout, slot, err, errlen) != 0)
        return -1;
    int rc;
    if (g->bank_of) {
        rc = tl_push_ipc_fill_bank(g->ring, *slot, g->bank_of[p], err, errlen);
    } else {
        void *px = push_source_frame(src, p, err, errlen);
        rc = px ? tl_push_ipc_fill_host(g->ring, *slot, px, err, errlen) : -1;
        if (px) /* the copy is complete: the host buffer may be reused */
            push_source_release(px, push_source_hint(src, p));
    }
    if (rc != 0)
        tl_push_ipc_cancel(g->ring, *slot);
    return rc;
}

/* ---- the scan on the wire ------------------------------------------------------------ */

/* Sends the header f of a frame lent from ring slot `slot`. Returns 0, or -1 with err set
 * and the slot back in the ring (not sent: the daemon will not release it). */
static int send_lent(void *sock, msgpack_sbuffer *sb, const tl_proto_frame *f, gpu_frames *g,
                     uint32_t slot, size_t p, char *err, size_t errlen)
{
    msgpack_sbuffer_clear(sb);
    if (tl_proto_encode_frame(sb, f) != 0) {
        tl_push_ipc_cancel(g->ring, slot);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (tl_proto_send(sock, NULL, 0, sb->data, sb->size, NULL, 0, NULL, NULL, 0) != 0) {
        tl_push_ipc_cancel(g->ring, slot);
        snprintf(err, errlen, "cannot send frame %zu: %s", p, zmq_strerror(errno));
        return -1;
    }
    return 0;
}

/* Sends frame p, header f and pixels px, zero-copy: whole with --bands 1, else as
 * o->bands messages, band b holding rows [b R / N, (b + 1) R / N) — the same header with
 * its band, and that slice of px. The buffer goes back to the source at the last band's
 * release. Returns 0, or -1 with err set; either way every band's release is done or due. */
static int send_bands(const options *o, void *sock, msgpack_sbuffer *sb, tl_proto_frame *f,
                      push_source *src, size_t p, void *px, char *err, size_t errlen)
{
    uint32_t n = o->bands;
    size_t row = (size_t)f->cols * tl_proto_dtype_size(f->dtype);
    void *hint = push_source_hint(src, p);
    if (n > 1)
        push_source_share(src, p, n);
    for (uint32_t b = 0; b < n; b++) {
        uint32_t first = (uint32_t)((uint64_t)b * f->rows / n);
        uint32_t end = (uint32_t)((uint64_t)(b + 1) * f->rows / n);
        f->has_band = n > 1; /* one band is the whole frame: no band key, as before */
        f->band_first = first;
        f->band_rows = end - first;
        msgpack_sbuffer_clear(sb);
        int rc = tl_proto_encode_frame(sb, f);
        if (rc == 0 &&
            tl_proto_send(sock, NULL, 0, sb->data, sb->size, (char *)px + first * row,
                          (size_t)(end - first) * row, push_source_release, hint, 0) == 0)
            continue;
        if (rc != 0)
            snprintf(err, errlen, "out of memory");
        else if (n > 1)
            snprintf(err, errlen, "cannot send band %u of frame %zu: %s", b, p,
                     zmq_strerror(errno));
        else
            snprintf(err, errlen, "cannot send frame %zu: %s", p, zmq_strerror(errno));
        /* the failed send has released its band (tl_proto_send); the bands after it too */
        for (uint32_t rest = b + (rc == 0); rest < n; rest++)
            push_source_release(px, hint);
        return -1;
    }
    return 0;
}

/* Sends everything; *t0 gets the start of the clock. g: frames in GPU memory, or NULL. */
static int send_scan(const options *o, const scan *sc, push_source *src, gpu_frames *g, void *sock,
                     uint64_t *t0, uint64_t *bytes)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    tl_proto_scan s = {.series = o->series,
                       .geometry = TL_PROTO_PARALLEL,
                       .rows = sc->rows,
                       .cols = sc->cols,
                       .dtype = proto_dtype(sc->dtype),
                       .window = o->window ? o->window : sc->nproj,
                       .darks = sc->ndark,
                       .flats = sc->nflat,
                       .first_index = 0,
                       .has_center = o->has_center,
                       .center = o->center,
                       .already_linear = o->already_linear};
    tl_cone_opts_scan(&o->cone, &s); /* cone beam: the trajectory (PROTOCOL.md 8.1.1) */
    s.matrices = sc->matrices;       /* --matrices: the trajectory instead of the circle's */
    s.nmatrices = sc->matrices ? sc->nproj : 0;
    bool full = true; /* cone beam over less than a turn: a short scan (Parker's weights) */
    if (o->cone.cone && !sc->matrices &&
        tl_angles_arc(sc->angles, sc->nproj, &s.short_scan[0], &s.short_scan[1], &full))
        s.has_short_scan = !full;
    if (g) /* where the daemon sends its releases */
        s.release =
            (tl_proto_str){tl_push_ipc_endpoint(g->ring), strlen(tl_push_ipc_endpoint(g->ring))};
    int rc = tl_proto_encode_scan(&sb, &s) ? fail(1, "out of memory") : 0;
    /* blocks until a receiver is there: the clock starts after */
    if (rc == 0)
        rc = send_header(sock, &sb, "scan");
    *t0 = tl_clock_ns();
    progress pr = {.tty = isatty(STDERR_FILENO) == 1, .quiet = o->quiet, .t0 = *t0};
    pr.next_ns = *t0 + (pr.tty ? 100000000u : 1000000000u);
    size_t frame_bytes = (size_t)sc->rows * sc->cols * tl_dtype_size(sc->dtype);
    char err[1024];
    for (size_t p = 0; rc == 0 && p < sc->nsent; p++) {
        if (o->rate > 0)
            sleep_until(*t0 + (uint64_t)llround((double)sc->slot[p] * 1e9 / o->rate));
        void *px = NULL;   /* host path: the payload */
        uint32_t slot = 0; /* --cuda-ipc: the ring slot that holds the frame */
        if (g ? gpu_frame(g, src, p, &slot, err, sizeof err) != 0
              : !(px = push_source_frame(src, p, err, sizeof err))) {
            report_break(&pr);
            rc = fail(1, "%s", err);
            break;
        }
        const push_item *it = &sc->items[p];
        tl_proto_frame f = {.series = o->series,
                            .index = it->index,
                            .kind = (tl_proto_kind)it->kind,
                            .has_angle = it->kind == TL_FRAME_PROJ,
                            .angle = it->angle,
                            .dtype = proto_dtype(sc->dtype),
                            .rows = sc->rows,
                            .cols = sc->cols,
                            .has_t_acq = true,
                            .t_acq = tl_clock_realtime_ns()};
        if (g)
            tl_push_ipc_lend(g->ring, slot, &f);
        if ((g ? send_lent(sock, &sb, &f, g, slot, p, err, sizeof err)
               : send_bands(o, sock, &sb, &f, src, p, px, err, sizeof err)) != 0) {
            report_break(&pr);
            rc = fail(1, "%s", err);
        } else {
            *bytes += frame_bytes;
            report(&pr, p + 1, sc->nsent, false);
        }
    }
    /* every slot back before the end: the daemon has read every frame, and a daemon that
     * closes the series' mappings at the end closes none still in use */
    if (rc == 0 && g && tl_push_ipc_drain(g->ring, g->timeout, err, sizeof err) != 0) {
        report_break(&pr);
        rc = fail(1, "--cuda-ipc: %s", err);
    }
    if (rc == 0 && !o->no_end) {
        msgpack_sbuffer_clear(&sb);
        tl_proto_end e = {o->series};
        if (tl_proto_encode_end(&sb, &e) != 0) {
            report_break(&pr);
            rc = fail(1, "out of memory");
        } else if (tl_proto_send(sock, NULL, 0, sb.data, sb.size, NULL, 0, NULL, NULL, 0) != 0) {
            report_break(&pr);
            rc = fail(1, "cannot send the end message: %s", zmq_strerror(errno));
        } else if (g && tl_push_ipc_wait_consumers(g->ring, g->timeout) != 0 && !o->quiet) {
            /* the daemon disconnects from the release endpoint when it has applied the end
             * (and unmapped the ring); closing before would look like a producer lost */
            report_break(&pr);
            fprintf(stderr,
                    ME ": --cuda-ipc: the daemon still holds its release connection "
                       "%.1f s after the end; closing the ring anyway\n",
                    g->timeout);
        }
    }
    if (rc == 0)
        report(&pr, sc->nsent, sc->nsent, true);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

int tl_cmd_push(int argc, char **argv)
{
    options o;
    int rc = parse_options(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (o.dectris)
        return tl_push_dectris(&(tl_push_dectris_opts){.dir = o.dectris,
                                                       .endpoint = o.endpoint,
                                                       .bind = o.bind,
                                                       .quiet = o.quiet,
                                                       .rate = o.rate,
                                                       .sndhwm = o.sndhwm});
    scan sc;
    memset(&sc, 0, sizeof sc);
    push_source *src = NULL;
    gpu_frames gpu = {0}, *g = o.cuda_ipc ? &gpu : NULL;
    void *ctx = NULL, *sock = NULL;
    uint64_t t0 = 0, bytes = 0;
    char err[512];
    rc = open_source(&o, &src, &sc);
    if (rc == 0 && o.bands > sc.rows)
        rc = fail(2, "--bands %u: more bands than the frames' %u rows", o.bands, sc.rows);
    if (rc == 0)
        rc = schedule(&o, &sc);
    if (rc == 0 && g)
        rc = gpu_open(&o, &sc, g);
    if (rc == 0)
        rc = tl_push_socket_open(o.endpoint, o.bind, o.sndhwm, o.key, o.server_key, &ctx, &sock);
    size_t frame_bytes = (size_t)sc.rows * sc.cols * tl_dtype_size(sc.dtype);
    size_t nbuf = ahead_buffers(&o, frame_bytes);
    if (rc == 0 && g) {
        rc = gpu_prepare(&o, &sc, src, g);
    } else if (rc == 0) {
        if (push_source_start(src, sc.items, sc.nsent, nbuf, err, sizeof err) != 0)
            rc = fail(1, "%s", err);
        else if (nbuf < sc.nsent && !o.quiet)
            fprintf(stderr,
                    ME ": the scan (%.1f MB) exceeds --buffer-mb %zu: frames are made "
                       "while sending, which may limit the rate\n",
                    (double)frame_bytes * (double)sc.nsent / 1048576.0, o.buffer_mb);
        /* frames are made before the clock starts; a big scan takes a while: say so */
        if (rc == 0)
            make_ahead(&o, src, nbuf < sc.nsent ? nbuf : sc.nsent);
    }
    if (rc == 0)
        rc = send_scan(&o, &sc, src, g, sock, &t0, &bytes);
    tl_push_socket_close(ctx, sock, rc != 0); /* then every frame is out: all buffers back */
    double secs = (double)(tl_clock_ns() - t0) * 1e-9;
    if (rc == 0)
        printf("pushed %zu frames (%u darks, %u flats, %zu projections, %u dropped) in %.3f s: "
               "%.1f frames/s, %.3f GB/s\n",
               sc.nsent, sc.ndark, sc.nflat, sc.nsent - sc.ndark - sc.nflat, sc.dropped, secs,
               (double)sc.nsent / secs, (double)bytes / secs * 1e-9);
    if (rc == 0 && g) {
        tl_push_ipc_stats st;
        tl_push_ipc_get_stats(g->ring, &st);
        printf("cuda-ipc: %llu frames lent through a ring of %u slots on %s: %llu released, "
               "%llu rejected",
               (unsigned long long)st.lent, o.ring, tl_push_ipc_device_uuid(g->ring),
               (unsigned long long)st.released, (unsigned long long)st.rejected);
        if (st.rejected)
            printf(" (first: %s: %s)", tl_proto_err_name(st.first_code), st.first_message);
        printf("\n");
        if (st.bad)
            fprintf(stderr,
                    ME ": --cuda-ipc: %llu messages on the release socket released "
                       "nothing; the first: %s\n",
                    (unsigned long long)st.bad, st.first_bad);
    }
    /* after the context: the end has been handed over before the release socket closes
     * (a daemon may take that close for its producer gone) */
    tl_push_ipc_destroy(gpu.ring);
    free(gpu.bank_of);
    push_source_free(src);
    free(sc.angles);
    free(sc.matrices);
    free(sc.items);
    free(sc.slot);
    return rc;
}
