/* sub.c — `tomolive sub`: the slice viewer/recorder. Subscribes to slices published by
 * tomolived, prints one line per slice (sequence, projections used and missing, window,
 * end-to-end latency, kernel), keeps the latest image of each slice as a float32 TIFF (and
 * an 8-bit PNG preview), counts sequence gaps (slices the publisher sent that we missed:
 * PUB drops at the high-water mark) and summarises latencies at exit.
 *
 * On a terminal, where a line per slice would scroll past faster than anyone reads it,
 * one status line (slices, slices/s, latency p50 of the recent slices, the last slice) is
 * redrawn in place instead, at most 10 times a second; pipes and files still get a line
 * per slice (scripts and tests parse them), and so does a terminal with --lines.
 *
 * Latest-image files are written under a temporary name and renamed, so a viewer that
 * reloads DIR/<id>.tif never reads a half-written file.
 *
 * With --shm (a subscriber on the daemon's own host) the slices come on "shm/<id>/": the
 * message carries the header only, and the pixels are copied out of the daemon's shared
 * memory (protocol/shm.h) into one buffer, which then stands in for the payload, so every
 * output works as over TCP. A slot the daemon rewrote before the copy was done (we fell
 * behind) is a missed slice, counted as stale.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clients/cli.h"
#include "clients/commands.h"
#include "clients/png.h"
#include "clients/tiff.h"
#include "protocol/protocol.h"
#include "protocol/pixels.h"
#include "protocol/shm.h"
#include "protocol/zcert.h"

#define ME "tomolive sub"

static const char usage_text[] =
    "usage: tomolive sub [--endpoint E] [--out DIR [--png] [--every-seq]] [--count N]\n"
    "                    [--until-final] [--timeout S] [--latency] [--lines] [--quiet]\n"
    "                    [--shm] [--key F --server-key F] (--all | ID...)\n"
    "\n"
    "Receives the slices ID... (or every slice with --all) from tomolived and prints one\n"
    "line per slice (on a terminal, one status line redrawn in place instead):\n"
    "  id=row0 seq=12 shape=256x256 projections=718 missing=2 window=0..719 "
    "latency_ms=3.21 kernel=cpu-f32[ final]\n"
    "(shape is rows x columns; latency is the receive time minus the acquisition time of\n"
    "the newest projection used, both CLOCK_REALTIME).\n"
    "\n"
    "      --endpoint E   the daemon's slice socket (default tcp://localhost:5602)\n"
    "      --key F        this client's secret CURVE certificate (a viewer or above;\n"
    "                     default $TOMOLIVE_KEY), for a daemon with [security] curve\n"
    "      --server-key F the daemon's public certificate (default $TOMOLIVE_SERVER_KEY)\n"
    "      --all          every slice (subscribes to the prefix slice/, with --shm shm/)\n"
    "      --out DIR      keep the latest image of each slice as DIR/<id>.tif (float32;\n"
    "                     a box: a page per plane)\n"
    "      --png          ... and as an 8-bit preview DIR/<id>.png\n"
    "      --every-seq    ... and every image as DIR/<id>-<seq>.tif\n"
    "      --count N      exit after N slices\n"
    "      --until-final  exit once every ID (with --all: every slice seen) has received\n"
    "                     its final slice (published when the scan ends)\n"
    "      --timeout S    exit with status 3 after S seconds without a slice\n"
    "      --latency      add latency percentiles (p50 p90 p99 max) to the summary\n"
    "      --lines        one line per slice even on a terminal\n"
    "      --quiet        no per-slice lines or status line (the summary is still printed)\n"
    "      --shm          take the pixels from the daemon's shared memory (topics shm/<id>/;\n"
    "                     on the daemon's host, with slices.shm set in its configuration)\n"
    "\n"
    "At exit (also on Ctrl-C) a summary per slice: received, missed (gaps in seq), last seq;\n"
    "with --shm also stale: slices missed because the daemon had already reused their\n"
    "shared memory when we read it (they count in missed too).\n"
    "Exit status: 0 done, 1 failed (e.g. cannot write DIR), 2 usage error, 3 timeout.\n";

typedef struct {
    const char *endpoint, *out;
    const char *key, *server_key; /* CURVE certificates (protocol/zcert.h), NULL: environment */
    bool png, every_seq, until_final, latency, quiet, all, lines, shm;
    uint64_t count;
    double timeout; /* seconds; 0 = none */
} options;

/* What one slice id has seen. */
typedef struct {
    char id[TL_PROTO_MAX_ID + 1];
    bool requested, have_seq, final;
    uint64_t received, missed, last_seq;
    uint64_t stale; /* --shm: of the missed, those whose slot was rewritten first */
    double *lat;    /* latencies in ms, for the summary */
    size_t nlat, cap;
} track;

/* The status line of a terminal: the most recent slices' receive times and latencies. */
enum { RECENT = 128 };
typedef struct {
    bool on, drawn; /* stdout is a terminal (and no --lines/--quiet); line shown */
    double next;    /* monotonic time of the next redraw */
    double t[RECENT], lat[RECENT];
    size_t n; /* slices recorded so far (the ring holds the last RECENT) */
    char last[TL_PROTO_MAX_ID + 48];
} status_line;

typedef struct {
    track *t;
    size_t n, cap;
    status_line st;
    float *img; /* an aligned copy of the current payload, as float32 */
    size_t img_cap;
    uint64_t total, rejected;
    /* --shm: the daemon's object mapped, and the pixels copied out of it (the payload) */
    tl_shm_reader shm;
    void *pixels;
    size_t pixels_cap;
    uint64_t unreadable; /* slices whose shared memory could not be read (not stale) */
} state;

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

#define fail(rc, ...) tl_cli_fail(ME, (rc), __VA_ARGS__)

static bool valid_id(const char *s)
{
    size_t n = strlen(s);
    return n >= 1 && n <= TL_PROTO_MAX_ID &&
           strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

static track *find(state *S, const char *id, size_t len)
{
    for (size_t i = 0; i < S->n; i++)
        if (strlen(S->t[i].id) == len && !memcmp(S->t[i].id, id, len))
            return &S->t[i];
    return NULL;
}

static track *add(state *S, const char *id, size_t len)
{
    if (S->n == S->cap) {
        size_t cap = S->cap ? 2 * S->cap : 8;
        track *t = realloc(S->t, cap * sizeof *t);
        if (!t)
            return NULL;
        S->t = t;
        S->cap = cap;
    }
    track *t = &S->t[S->n++];
    memset(t, 0, sizeof *t);
    memcpy(t->id, id, len < TL_PROTO_MAX_ID ? len : TL_PROTO_MAX_ID);
    return t;
}

/* ---- files --------------------------------------------------------------------------- */

static tl_dtype engine_dtype(tl_proto_dtype t)
{
    switch (t) {
        case TL_PROTO_U8: return TL_DTYPE_U8;
        case TL_PROTO_U16: return TL_DTYPE_U16;
        case TL_PROTO_U32: return TL_DTYPE_U32;
        default: return TL_DTYPE_F32;
    }
}

/* The payload as float32 in S->img (ZeroMQ may hand it over at any alignment). */
static int payload_floats(state *S, const tl_proto_slice *s)
{
    size_t n = (size_t)s->shape[0] * s->shape[1];
    if (n > S->img_cap) {
        float *p = realloc(S->img, n * sizeof *p);
        if (!p)
            return fail(1, "out of memory for a %u x %u slice", s->shape[0], s->shape[1]);
        S->img = p;
        S->img_cap = n;
    }
    tl_proto_error e;
    if (tl_proto_pixels_decode(s, S->img, &e) != TL_PROTO_OK)
        return fail(1, "slice %.*s seq %llu: %s", (int)s->id.len, s->id.ptr,
                    (unsigned long long)s->seq, e.message);
    return 0;
}

/* The slice as TIFF: its samples as sent, or float32 when they came compact (§10.3); a
 * box (§10 "planes") a page per plane, plane 0 first. */
static int write_tiff(const char *path, state *S, const tl_proto_slice *s)
{
    char err[512];
    tl_tiff_writer w;
    bool compact = s->lz4 || s->dtype == TL_PROTO_F16 || s->dtype == TL_PROTO_Q16;
    if (compact && payload_floats(S, s) != 0)
        return 1;
    const void *px = compact ? (const void *)S->img : s->payload;
    tl_dtype dtype = compact ? TL_DTYPE_F32 : engine_dtype(s->dtype);
    size_t bytes = compact ? (size_t)s->shape[0] * s->shape[1] * sizeof(float) : s->payload_len;
    if (tl_tiff_create(&w, path, bytes, err, sizeof err) != 0)
        return fail(1, "%s", err);
    const uint32_t pages = s->planes ? s->planes : 1, rows = s->shape[0] / pages;
    const size_t page_bytes = bytes / pages;
    for (uint32_t k = 0; k < pages; k++)
        if (tl_tiff_write_page(&w, dtype, (const char *)px + k * page_bytes, rows, s->shape[1],
                               err, sizeof err) != 0) {
            tl_tiff_finish(&w, NULL, 0);
            return fail(1, "%s", err);
        }
    return tl_tiff_finish(&w, err, sizeof err) != 0 ? fail(1, "%s", err) : 0;
}

/* Writes a file under a temporary name and renames it into place. */
static int replace_file(const char *dir, const char *id, const char *ext, state *S,
                        const tl_proto_slice *s)
{
    char tmp[4096], path[4096];
    snprintf(path, sizeof path, "%s/%s.%s", dir, id, ext);
    snprintf(tmp, sizeof tmp, "%s/.%s.%s.tmp", dir, id, ext);
    int rc;
    char err[512];
    if (!strcmp(ext, "tif"))
        rc = write_tiff(tmp, S, s);
    else if ((rc = payload_floats(S, s)) == 0 &&
             tl_png_write_preview(tmp, S->img, s->shape[0], s->shape[1], NULL, err, sizeof err) !=
                 0)
        rc = fail(1, "%s", err);
    if (rc == 0 && rename(tmp, path) != 0)
        rc = fail(1, "cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
    if (rc)
        remove(tmp);
    return rc;
}

static int save(const options *o, state *S, const track *t, const tl_proto_slice *s)
{
    if (!o->out)
        return 0;
    if (replace_file(o->out, t->id, "tif", S, s) ||
        (o->png && replace_file(o->out, t->id, "png", S, s)))
        return 1;
    if (o->every_seq) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s-%llu.tif", o->out, t->id, (unsigned long long)s->seq);
        return write_tiff(path, S, s);
    }
    return 0;
}

/* ---- slices -------------------------------------------------------------------------- */

static void print_str(tl_proto_str s)
{
    for (size_t i = 0; i < s.len; i++) /* network text: printable ASCII only */
        putchar(s.ptr[i] > 0x20 && s.ptr[i] < 0x7f ? s.ptr[i] : '?');
}

/* Redraws the status line (always when force, else at most 10 times a second). */
static void status_draw(status_line *st, bool force)
{
    double now = tl_cli_now();
    if (!st->on || (!force && now < st->next))
        return;
    st->next = now + 0.1;
    size_t k = st->n < RECENT ? st->n : RECENT, recent = 0, nl = 0;
    double lat[RECENT], span = 2.0;
    for (size_t i = 0; i < k; i++) {
        recent += now - st->t[i] <= span;
        if (isfinite(st->lat[i]))
            lat[nl++] = st->lat[i];
    }
    /* slices/s over the last 2 s (less just after the first slice), so it falls to 0
     * when the stream stops */
    double first = st->n ? st->t[st->n > RECENT ? st->n % RECENT : 0] : now;
    double win = now - first < span ? now - first : span;
    printf("\r%zu slices  %.1f slices/s", st->n, win > 0.05 ? (double)recent / win : 0.0);
    if (nl) {
        tl_cli_sort(lat, nl);
        printf("  latency p50 %.1f ms", lat[(nl - 1) / 2]);
    }
    printf("  %s%s\033[K", st->n ? "last " : "(waiting for slices)", st->last);
    fflush(stdout);
    st->drawn = true;
}

static void status_record(status_line *st, const char *id, const tl_proto_slice *s, double lat)
{
    size_t i = st->n++ % RECENT;
    st->t[i] = tl_cli_now();
    st->lat[i] = lat;
    snprintf(st->last, sizeof st->last, "%s seq=%llu%s", id, (unsigned long long)s->seq,
             s->final ? " final" : "");
    status_draw(st, false);
}

/* The track of s's id (added on first sight), with s's seq noted: a gap since the last
 * seq counts as missed. NULL when out of memory. */
static track *note(state *S, const tl_proto_slice *s)
{
    track *t = find(S, s->id.ptr, s->id.len);
    if (!t && !(t = add(S, s->id.ptr, s->id.len)))
        return NULL;
    if (t->have_seq && s->seq > t->last_seq + 1)
        t->missed += s->seq - t->last_seq - 1;
    t->have_seq = true;
    t->last_seq = s->seq;
    t->final |= s->final;
    return t;
}

/* Handles one decoded slice; returns 0, or the exit status to stop with. */
static int on_slice(const options *o, state *S, const tl_proto_slice *s)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    double recv_ns = (double)now.tv_sec * 1e9 + (double)now.tv_nsec;
    double lat = s->t_acq ? (recv_ns - (double)s->t_acq) * 1e-6 : NAN;

    track *t = note(S, s);
    if (!t)
        return fail(1, "out of memory");
    t->received++;
    S->total++;
    if (isfinite(lat)) {
        if (t->nlat == t->cap) {
            size_t cap = t->cap ? 2 * t->cap : 256;
            double *l = realloc(t->lat, cap * sizeof *l);
            if (!l)
                return fail(1, "out of memory");
            t->lat = l;
            t->cap = cap;
        }
        t->lat[t->nlat++] = lat;
    }
    if (S->st.on) {
        status_record(&S->st, t->id, s, lat);
    } else if (!o->quiet) {
        printf("id=%s seq=%llu shape=%ux%u projections=%u missing=%u window=%llu..%llu "
               "latency_ms=%.2f kernel=",
               t->id, (unsigned long long)s->seq, s->shape[0], s->shape[1], s->projections_used,
               s->missing, (unsigned long long)s->window_first, (unsigned long long)s->window_last,
               lat);
        print_str(s->kernel);
        puts(s->final ? " final" : "");
        fflush(stdout);
    }
    return save(o, S, t, s);
}

/* ---- shared memory ---------------------------------------------------------------------- */

/* A slice whose header came but whose pixels did not: its seq is noted, so it counts as
 * missed once (not again as a gap before the next one). A lost final slice still ends
 * --until-final: the daemon will not send another. Returns 0, or the exit status. */
static int lost(state *S, const tl_proto_slice *s, bool stale)
{
    track *t = note(S, s);
    if (!t)
        return fail(1, "out of memory");
    t->missed++;
    t->stale += stale;
    return 0;
}

/* Room for bytes of pixels in S->pixels: allocated once, and again only when a larger
 * slice comes (the old pixels are not needed: no realloc copy). */
static int grow_pixels(state *S, size_t bytes)
{
    if (bytes <= S->pixels_cap)
        return 0;
    free(S->pixels);
    S->pixels_cap = 0;
    if (!(S->pixels = malloc(bytes)))
        return -1;
    S->pixels_cap = bytes;
    return 0;
}

/* Copies the pixels of a slice announced on "shm/<id>/" into S->pixels and makes them the
 * slice's payload, so that on_slice treats it exactly as one that came over TCP. Returns
 * 0, -1 when the pixels are lost (counted; the first unreadable one is said), or the exit
 * status to stop with. */
static int shm_pixels(state *S, tl_proto_slice *s)
{
    size_t bytes;
    tl_proto_error perr;
    char err[512];
    int rc = -1;
    if (tl_proto_frame_bytes(s->shape[0], s->shape[1], s->dtype, &bytes, &perr) != TL_PROTO_OK)
        snprintf(err, sizeof err, "%s", perr.message);
    else if (grow_pixels(S, bytes) != 0)
        return fail(1, "out of memory for a %u x %u slice", s->shape[0], s->shape[1]);
    else
        rc = tl_shm_read(&S->shm, s, S->pixels, err, sizeof err);
    if (rc == 0) {
        s->payload = S->pixels;
        s->payload_len = bytes;
        return 0;
    }
    if (rc < 0 && S->unreadable++ == 0) /* once: the same cause would repeat for each slice */
        fprintf(stderr,
                ME ": cannot read a slice from shared memory (%s); further ones are "
                   "only counted\n",
                err);
    rc = lost(S, s, rc == TL_SHM_STALE);
    return rc ? rc : -1;
}

/* Takes one decoded slice: its pixels from shared memory first if they are there. Returns
 * 0 when it was handled, -1 when its pixels were lost, or the exit status to stop with. */
static int deliver(const options *o, state *S, tl_proto_msg *m)
{
    int rc = m->slice.has_shm ? shm_pixels(S, &m->slice) : 0;
    return rc ? rc : on_slice(o, S, &m->slice);
}

static bool all_final(const options *o, const state *S)
{
    if (S->n == 0)
        return false;
    for (size_t i = 0; i < S->n; i++)
        if ((o->all || S->t[i].requested) && !S->t[i].final)
            return false;
    return true;
}

/* Nearest-rank percentile of sorted v[0..n-1]. */
static double percentile(const double *v, size_t n, double p)
{
    size_t k = (size_t)ceil(p / 100.0 * (double)n);
    return v[k ? k - 1 : 0];
}

static void summary(const options *o, state *S)
{
    if (S->st.on) { /* the last state of the status line stays on the screen */
        status_draw(&S->st, true);
        putchar('\n');
    }
    for (size_t i = 0; i < S->n; i++) {
        track *t = &S->t[i];
        printf("summary id=%s received=%llu missed=%llu last_seq=", t->id,
               (unsigned long long)t->received, (unsigned long long)t->missed);
        if (t->have_seq)
            printf("%llu", (unsigned long long)t->last_seq);
        else
            putchar('-');
        if (o->shm)
            printf(" stale=%llu", (unsigned long long)t->stale);
        if (o->latency && t->nlat) {
            tl_cli_sort(t->lat, t->nlat);
            printf(" latency_ms p50=%.2f p90=%.2f p99=%.2f max=%.2f",
                   percentile(t->lat, t->nlat, 50), percentile(t->lat, t->nlat, 90),
                   percentile(t->lat, t->nlat, 99), t->lat[t->nlat - 1]);
        }
        putchar('\n');
    }
    fflush(stdout);
    if (S->rejected)
        fprintf(stderr, ME ": %llu malformed messages rejected\n",
                (unsigned long long)S->rejected);
    if (S->unreadable)
        fprintf(stderr, ME ": %llu slices could not be read from shared memory\n",
                (unsigned long long)S->unreadable);
}

/* Receives until done; returns the exit status. */
static int receive(const options *o, state *S, void *sock)
{
    tl_proto_decoder *d = tl_proto_decoder_new();
    if (!d)
        return fail(1, "out of memory");
    double last = tl_cli_now();
    int rc = -1;
    while (rc < 0) {
        if (interrupted) {
            rc = 0;
            break;
        }
        long ms = -1;
        if (o->timeout > 0) {
            double left = last + o->timeout - tl_cli_now();
            ms = left > 0 ? (long)ceil(left * 1000) : 0;
        }
        if (S->st.on && (ms < 0 || ms > 500))
            ms = 500; /* the status line's rate decays while nothing arrives */
        zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
        int n = zmq_poll(&it, 1, ms);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = fail(1, "zmq_poll: %s", zmq_strerror(errno));
            break;
        }
        if (n == 0) {
            status_draw(&S->st, false);
            if (o->timeout > 0 && tl_cli_now() - last >= o->timeout) {
                if (S->st.drawn)
                    putchar('\n');
                S->st.drawn = false;
                fflush(stdout);
                rc = fail(3, "no slice for %g s: giving up", o->timeout);
            }
            continue;
        }
        zmq_msg_t parts[TL_PROTO_MAX_PARTS];
        tl_proto_error err;
        tl_proto_msg m;
        int np = tl_proto_recv(sock, parts, TL_PROTO_MAX_PARTS, ZMQ_DONTWAIT, &err);
        if (np == -1)
            continue;
        int kept = np == -2 ? TL_PROTO_MAX_PARTS : np;
        if (np == -2 ||
            tl_proto_decode_parts(d, parts, np, TL_MSG_SLICE, &m, &err) != TL_PROTO_OK) {
            if (S->rejected++ == 0) /* once: a broken publisher would flood the terminal */
                fprintf(stderr,
                        ME ": rejected a malformed message (%s: %s); further ones "
                           "are only counted\n",
                        tl_proto_err_name(err.code), err.message);
        } else {
            int r = deliver(o, S, &m);
            if (r == 0) /* a slice whose pixels were lost does not reset the timeout */
                last = tl_cli_now();
            if (r > 0)
                rc = r;
            else if ((o->count && S->total >= o->count) || (o->until_final && all_final(o, S)))
                rc = 0;
        }
        tl_proto_close(parts, kept);
    }
    tl_proto_decoder_free(d);
    return rc;
}

static int parse_options(int argc, char **argv, options *o)
{
    enum {
        O_ENDPOINT = 256,
        O_OUT,
        O_PNG,
        O_EVERY,
        O_COUNT,
        O_FINAL,
        O_TIMEOUT,
        O_LATENCY,
        O_QUIET,
        O_ALL,
        O_LINES,
        O_SHM,
        O_KEY,
        O_SERVER_KEY
    };
    static const struct option longopts[] = {
        {"endpoint", required_argument, NULL, O_ENDPOINT},
        {"out", required_argument, NULL, O_OUT},
        {"png", no_argument, NULL, O_PNG},
        {"every-seq", no_argument, NULL, O_EVERY},
        {"count", required_argument, NULL, O_COUNT},
        {"until-final", no_argument, NULL, O_FINAL},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {"latency", no_argument, NULL, O_LATENCY},
        {"quiet", no_argument, NULL, O_QUIET},
        {"all", no_argument, NULL, O_ALL},
        {"lines", no_argument, NULL, O_LINES},
        {"shm", no_argument, NULL, O_SHM},
        {"key", required_argument, NULL, O_KEY},
        {"server-key", required_argument, NULL, O_SERVER_KEY},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    o->endpoint = "tcp://localhost:5602";
    optind = 1;
    opterr = 0;
    int c;
    char *end;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
            case O_ENDPOINT: o->endpoint = optarg; break;
            case O_OUT: o->out = optarg; break;
            case O_PNG: o->png = true; break;
            case O_EVERY: o->every_seq = true; break;
            case O_COUNT:
                errno = 0;
                o->count = strtoull(optarg, &end, 10);
                if (end == optarg || *end || errno || o->count == 0 || *optarg == '-')
                    return fail(2, "bad --count '%s': need a whole number >= 1", optarg);
                break;
            case O_FINAL: o->until_final = true; break;
            case O_TIMEOUT:
                o->timeout = strtod(optarg, &end);
                if (end == optarg || *end || !(o->timeout > 0) || o->timeout > 1e9)
                    return fail(2, "bad --timeout '%s': need seconds > 0", optarg);
                break;
            case O_LATENCY: o->latency = true; break;
            case O_QUIET: o->quiet = true; break;
            case O_ALL: o->all = true; break;
            case O_LINES: o->lines = true; break;
            case O_SHM: o->shm = true; break;
            case O_KEY: o->key = optarg; break;
            case O_SERVER_KEY: o->server_key = optarg; break;
            case 'h': fputs(usage_text, stdout); return 0;
            default:
                return fail(2, "%s '%s' (see tomolive sub --help)",
                            c == ':' ? "option needs a value" : "unknown option",
                            argv[optind - 1]);
        }
    }
    if (optind == argc && !o->all)
        return fail(2, "name the slices to receive, or --all (see tomolive sub --help)");
    for (int i = optind; i < argc; i++)
        if (!valid_id(argv[i]))
            return fail(2, "bad slice id '%s': 1 to %d of [A-Za-z0-9_.-]", argv[i],
                        TL_PROTO_MAX_ID);
    if ((o->png || o->every_seq) && !o->out)
        return fail(2, "--png and --every-seq need --out DIR");
    return -1;
}

/* Subscribes to slice id (NULL: every slice) on the topic of the delivery asked for:
 * "slice/<id>/" with the pixels in the message, or "shm/<id>/" with them in shared memory. */
static int subscribe(const options *o, void *sock, const char *id)
{
    char topic[TL_PROTO_MAX_ID + 16];
    size_t len = !id      ? strlen(strcpy(topic, o->shm ? "shm/" : "slice/"))
                 : o->shm ? tl_proto_shm_topic(topic, sizeof topic, id, strlen(id))
                          : tl_proto_slice_topic(topic, sizeof topic, id, strlen(id));
    return zmq_setsockopt(sock, ZMQ_SUBSCRIBE, topic, len);
}

int tl_cmd_sub(int argc, char **argv)
{
    options o;
    int rc = parse_options(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (o.out && mkdir(o.out, 0777) != 0 && errno != EEXIST)
        return fail(1, "cannot create '%s': %s", o.out, strerror(errno));
    state S;
    memset(&S, 0, sizeof S);
    S.st.on = !o.quiet && !o.lines && isatty(STDOUT_FILENO) == 1;
    for (int i = optind; i < argc; i++)
        if (!find(&S, argv[i], strlen(argv[i]))) {
            track *t = add(&S, argv[i], strlen(argv[i]));
            if (!t)
                return fail(1, "out of memory");
            t->requested = true;
        }
    void *ctx = zmq_ctx_new();
    void *sock = ctx ? zmq_socket(ctx, ZMQ_SUB) : NULL;
    char kerr[600];
    if (!sock)
        rc = fail(1, "cannot create a socket: %s", zmq_strerror(errno));
    else if (tl_zcert_client_from(sock, o.key, o.server_key, kerr, sizeof kerr) != 0)
        rc = fail(2, "%s", kerr);
    else if (zmq_connect(sock, o.endpoint) != 0)
        rc = fail(2, "bad --endpoint '%s': %s", o.endpoint, zmq_strerror(errno));
    for (size_t i = 0; rc < 0 && i < (o.all ? 1 : S.n); i++)
        if (subscribe(&o, sock, o.all ? NULL : S.t[i].id) != 0)
            rc = fail(1, "cannot subscribe: %s", zmq_strerror(errno));
    if (rc < 0) {
        /* Ctrl-C and kill end the loop with a summary; no SA_RESTART, so zmq_poll wakes */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        rc = receive(&o, &S, sock);
        summary(&o, &S);
    }
    int linger = 0;
    if (sock) {
        zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
        zmq_close(sock);
    }
    if (ctx)
        zmq_ctx_term(ctx);
    for (size_t i = 0; i < S.n; i++)
        free(S.t[i].lat);
    free(S.t);
    free(S.img);
    tl_shm_reader_close(&S.shm);
    free(S.pixels);
    return rc;
}
