/* stream_bench.c — `tomolive bench --stream`: the daemon under a camera's stream.
 *
 * It starts its own tomolived (backend as asked, ingest.overflow = drop, so a daemon that
 * falls behind loses frames instead of slowing the camera; engine.tune = cached, so kernels
 * come from `tomolive tune`'s cache and are never timed mid-stream), defines a horizontal slice
 * through the middle row and three ortho-slices, subscribes to all four, and for each rate
 * pushes paced frames over loopback TCP for a few seconds — from several PUSH sockets
 * (one TCP connection each: a single ZeroMQ connection moves only ~3.5 GB/s) with t_acq
 * stamped at send time. It reports what a control system sees: frames lost (dropped by the
 * daemon, or sent more than one frame period late because the daemon pushed back), the
 * ingest rate achieved, and the latency of each slice received — its arrival time minus
 * the t_acq of the newest frame it contains — as percentiles. With --search it raises the rate until
 * frames are lost and reports the highest loss-free rate.
 *
 * Frames are synthetic (a few distinct smooth patterns cycled): the benchmark measures
 * transport, the per-frame pipeline and publishing, not reconstruction quality.
 */
#include "config.h"

#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "clients/cli.h"
#include "clients/commands.h"
#include "protocol/protocol.h"

#define ME "tomolive bench --stream"
#define fail(rc, ...) tl_cli_fail(ME, (rc), __VA_ARGS__)
#define NPATTERN 8       /* distinct frames cycled */
#define MAX_CONN 16
#define MAX_LAT 200000   /* latency samples kept per run */

extern char **environ;

typedef struct {
    char daemon[1024];
    const char *backend;
    int port;
    uint32_t rows, cols, window;
    double seconds;
    int connections;
    int incremental;      /* 1 on, 0 off, -1 both (off is the in-run baseline) */
    double rates[32];
    int nrates;
    bool search;
    double max_rate;
} options;

typedef struct {
    /* the run */
    const options *o;
    double rate;
    uint64_t nframes;
    uint64_t base;        /* index of this run's first frame: indices go on across runs */
    uint16_t *pattern[NPATTERN];
    size_t frame_bytes;
    void *zctx;
    char ingest[64], control[64], slices[64];
    /* sender results */
    atomic_uint_least64_t sent, late;
    double t_start, t_end;
    atomic_uint_least64_t t_run_ns; /* CLOCK_REALTIME at the start of the run */
    /* subscriber results */
    atomic_bool stop_sub;
    double *lat;          /* ms */
    size_t nlat;
    uint64_t received, missed; /* slices */
} run;

static uint64_t realtime_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void sleep_until(double t)
{
    double now = tl_cli_now();
    if (t > now) {
        struct timespec ts = {(time_t)(t - now), (long)((t - now - (time_t)(t - now)) * 1e9)};
        nanosleep(&ts, NULL);
    }
}

/* ---- the daemon -------------------------------------------------------------------------- */

static pid_t start_daemon(const options *o, run *r, bool incremental, char *log, size_t loglen)
{
    char set[9][256];
    snprintf(set[0], sizeof set[0], "ingest.endpoint=%s", r->ingest);
    snprintf(set[1], sizeof set[1], "control.endpoint=%s", r->control);
    snprintf(set[2], sizeof set[2], "slices.endpoint=%s", r->slices);
    snprintf(set[3], sizeof set[3], "ingest.overflow=drop");
    snprintf(set[4], sizeof set[4], "ingest.io_threads=%d", o->connections < 2 ? 2 : o->connections);
    snprintf(set[5], sizeof set[5], "slices.incremental=%s", incremental ? "true" : "false");
    snprintf(set[6], sizeof set[6], "http.listen=");
    snprintf(set[7], sizeof set[7], "slices.sndhwm=4");
    /* kernels as `tomolive tune` left them in the cache, never timed mid-stream (timing a
     * new slice size would stall the engine for the tuning budget and drop frames) */
    snprintf(set[8], sizeof set[8], "engine.tune=cached");
    const char *argv[32] = {o->daemon, "--backend", o->backend, "--log-level", "warn"};
    int argc = 5;
    for (int i = 0; i < 9; i++) {
        argv[argc++] = "--set";
        argv[argc++] = set[i];
    }
    argv[argc] = NULL;
    snprintf(log, loglen, "/tmp/tomolive-stream-bench-%d.log", (int)getpid());
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    int rc = posix_spawnp(&pid, o->daemon, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    return rc == 0 ? pid : -1;
}

/* One control request; args is packed by the caller into pk after begin. Returns 0 when
 * the reply is ok. */
static int request(void *ctl, tl_proto_decoder *dec, msgpack_sbuffer *sb, double timeout)
{
    if (zmq_send(ctl, "", 0, ZMQ_SNDMORE) < 0 || zmq_send(ctl, sb->data, sb->size, 0) < 0)
        return -1;
    zmq_pollitem_t it = {ctl, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, (long)(timeout * 1000)) <= 0)
        return -1;
    zmq_msg_t parts[4];
    tl_proto_error err;
    int n = tl_proto_recv(ctl, parts, 4, 0, &err);
    if (n < 2) {
        tl_proto_close(parts, n < 0 ? 0 : n);
        return -1;
    }
    tl_proto_msg m;
    int ok = tl_proto_decode(dec, zmq_msg_data(&parts[n - 1]), zmq_msg_size(&parts[n - 1]),
                             TL_MSG_REP, &m, &err) == TL_PROTO_OK && m.rep.ok;
    if (!ok && n >= 2 && m.type == TL_MSG_REP && !m.rep.ok)
        fprintf(stderr, ME ": daemon: %.*s\n", (int)m.rep.message.len, m.rep.message.ptr);
    tl_proto_close(parts, n);
    return ok ? 0 : -1;
}

/* Waits until the daemon answers "status". */
static int wait_ready(void *ctl, tl_proto_decoder *dec)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    tl_proto_begin_req(&pk, 1, "status", false);
    int rc = -1;
    for (int i = 0; i < 100 && rc != 0; i++)
        rc = request(ctl, dec, &sb, 0.2);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

static int set_slice(void *ctl, tl_proto_decoder *dec, const char *id, const char *kind,
                     const char *key, const char *axis, double value)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    tl_proto_begin_req(&pk, 2, "set_slice", true);
    msgpack_pack_map(&pk, axis ? 4 : 3);
    tl_proto_pack_kv_str(&pk, "id", id);
    tl_proto_pack_kv_str(&pk, "kind", kind);
    tl_proto_pack_kv_double(&pk, key, value);
    if (axis)
        tl_proto_pack_kv_str(&pk, "axis", axis);
    int rc = request(ctl, dec, &sb, 5);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

/* status.frames.accepted.proj and rejected.queue_full, from a status reply. */
static int read_counts(void *ctl, tl_proto_decoder *dec, uint64_t *accepted, uint64_t *dropped,
                       uint64_t *messages)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    tl_proto_begin_req(&pk, 3, "status", false);
    int rc = -1;
    if (zmq_send(ctl, "", 0, ZMQ_SNDMORE) >= 0 && zmq_send(ctl, sb.data, sb.size, 0) >= 0) {
        zmq_pollitem_t it = {ctl, 0, ZMQ_POLLIN, 0};
        zmq_msg_t parts[4];
        tl_proto_error err;
        /* a daemon creating a large engine holds its lock for seconds: be patient */
        int n = zmq_poll(&it, 1, 30000) > 0 ? tl_proto_recv(ctl, parts, 4, 0, &err) : -1;
        tl_proto_msg m;
        if (n >= 2 && tl_proto_decode(dec, zmq_msg_data(&parts[n - 1]), zmq_msg_size(&parts[n - 1]),
                                      TL_MSG_REP, &m, &err) == TL_PROTO_OK && m.rep.ok) {
            const msgpack_object *fr = tl_proto_map_get(m.rep.result, "frames");
            const msgpack_object *acc = fr ? tl_proto_map_get(fr, "accepted") : NULL;
            const msgpack_object *rej = fr ? tl_proto_map_get(fr, "rejected") : NULL;
            if (acc && rej && tl_proto_get_u64(acc, "proj", true, accepted, &err) == TL_PROTO_OK &&
                tl_proto_get_u64(rej, "queue_full", true, dropped, &err) == TL_PROTO_OK &&
                tl_proto_get_u64(fr, "messages", true, messages, &err) == TL_PROTO_OK)
                rc = 0;
        }
        if (n > 0)
            tl_proto_close(parts, n);
    }
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

/* ---- sender ------------------------------------------------------------------------------ */

typedef struct {
    run *r;
    int conn;
} sender_arg;

static void no_free(void *data, void *hint)
{
    (void)data;
    (void)hint;
}

/* Connection c sends frames c, c + C, c + 2C, ... each at its slot of the schedule. */
static void *sender(void *arg)
{
    sender_arg *a = arg;
    run *r = a->r;
    const options *o = r->o;
    void *push = zmq_socket(r->zctx, ZMQ_PUSH);
    int hwm = 4, linger = 10000;
    zmq_setsockopt(push, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
    zmq_connect(push, r->ingest);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    double period = 1.0 / r->rate;
    for (uint64_t k = (uint64_t)a->conn; k < r->nframes; k += (uint64_t)o->connections) {
        double slot = r->t_start + (double)k * period;
        sleep_until(slot);
        if (tl_cli_now() > slot + period)
            atomic_fetch_add(&r->late, 1); /* the daemon's back-pressure held us up */
        tl_proto_frame h = {.series = 1, .index = r->base + k, .kind = TL_PROTO_PROJ,
                            .has_angle = true, .angle = M_PI * (double)(r->base + k) / o->window, .dtype = TL_PROTO_U16,
                            .rows = o->rows, .cols = o->cols, .has_t_acq = true,
                            .t_acq = realtime_ns()};
        msgpack_sbuffer_clear(&sb);
        tl_proto_encode_frame(&sb, &h);
        if (tl_proto_send(push, NULL, 0, sb.data, sb.size, r->pattern[k % NPATTERN],
                          r->frame_bytes, no_free, NULL, 0) == 0)
            atomic_fetch_add(&r->sent, 1);
    }
    msgpack_sbuffer_destroy(&sb);
    zmq_close(push);
    return NULL;
}

/* ---- subscriber -------------------------------------------------------------------------- */

static void *subscriber(void *arg)
{
    run *r = arg;
    void *sub = zmq_socket(r->zctx, ZMQ_SUB);
    int hwm = 64;
    zmq_setsockopt(sub, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_connect(sub, r->slices);
    zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "slice/bench-", 12);
    tl_proto_decoder *dec = tl_proto_decoder_new();
    uint64_t last_seq[4] = {0};
    while (!atomic_load(&r->stop_sub)) {
        zmq_pollitem_t it = {sub, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 100) <= 0)
            continue;
        zmq_msg_t parts[4];
        tl_proto_error err;
        int n = tl_proto_recv(sub, parts, 4, 0, &err);
        if (n < 0)
            continue;
        uint64_t now = realtime_ns();
        tl_proto_msg m;
        if (tl_proto_decode_parts(dec, parts, n, TL_MSG_SLICE, &m, &err) == TL_PROTO_OK) {
            int which = (int)(m.slice.id.ptr[m.slice.id.len - 1] - '0') & 3;
            if (last_seq[which] && m.slice.seq > last_seq[which] + 1)
                r->missed += m.slice.seq - last_seq[which] - 1;
            last_seq[which] = m.slice.seq;
            r->received++;
            /* a slice whose newest frame is older than this run (a new subscriber's first
             * slice, computed from the last run's window) says nothing about this rate */
            if (m.slice.t_acq >= atomic_load(&r->t_run_ns) && r->nlat < MAX_LAT)
                r->lat[r->nlat++] = (double)(int64_t)(now - m.slice.t_acq) / 1e6;
        }
        tl_proto_close(parts, n);
    }
    tl_proto_decoder_free(dec);
    zmq_close(sub);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(const double *v, size_t n, double q)
{
    if (n == 0)
        return NAN;
    size_t k = (size_t)ceil(q * (double)n);
    return v[k > 0 ? k - 1 : 0];
}

/* ---- one mode: a daemon, several rates ----------------------------------------------------- */

typedef struct {
    double rate, achieved, gbs, p50, p90, p99, max;
    uint64_t sent, lost, dropped, late, slices;
} result;

static void print_result(const result *s, bool incremental)
{
    printf("%-11s | %7.0f | %8.1f | %6.2f | %6llu | %6llu | %6llu | %6llu | %7.2f | %7.2f | %7.2f | %7.2f\n",
           incremental ? "incremental" : "recompute", s->rate, s->achieved, s->gbs,
           (unsigned long long)s->sent, (unsigned long long)s->lost,
           (unsigned long long)s->dropped, (unsigned long long)s->late, s->p50, s->p90, s->p99,
           s->max);
    fflush(stdout);
}

static int one_rate(run *r, void *ctl, tl_proto_decoder *dec, result *out)
{
    const options *o = r->o;
    uint64_t acc0, drop0, msg0, acc1, drop1, msg1;
    if (read_counts(ctl, dec, &acc0, &drop0, &msg0) != 0)
        return fail(1, "no status from the daemon");
    r->nframes = (uint64_t)(r->rate * o->seconds);
    atomic_store(&r->sent, 0);
    atomic_store(&r->late, 0);
    r->nlat = 0;
    r->received = r->missed = 0;
    atomic_store(&r->stop_sub, false);
    atomic_store(&r->t_run_ns, UINT64_MAX); /* nothing counts before the first frame */
    pthread_t sub, snd[MAX_CONN];
    sender_arg args[MAX_CONN];
    pthread_create(&sub, NULL, subscriber, r);
    usleep(300000); /* the subscription reaches the daemon */
    r->t_start = tl_cli_now() + 0.05;
    atomic_store(&r->t_run_ns, realtime_ns());
    for (int c = 0; c < o->connections; c++) {
        args[c] = (sender_arg){r, c};
        pthread_create(&snd[c], NULL, sender, &args[c]);
    }
    for (int c = 0; c < o->connections; c++)
        pthread_join(snd[c], NULL);
    r->t_end = tl_cli_now();
    /* let the daemon take what is queued, then read its counters */
    uint64_t sent = atomic_load(&r->sent);
    for (int i = 0; i < 100; i++) {
        if (read_counts(ctl, dec, &acc1, &drop1, &msg1) == 0 && msg1 - msg0 >= sent)
            break;
        usleep(50000);
    }
    usleep(300000);
    atomic_store(&r->stop_sub, true);
    pthread_join(sub, NULL);
    read_counts(ctl, dec, &acc1, &drop1, &msg1);
    r->base += r->nframes;
    qsort(r->lat, r->nlat, sizeof *r->lat, cmp_double);
    double dt = r->t_end - r->t_start;
    out->rate = r->rate;
    out->sent = sent;
    out->dropped = drop1 - drop0;
    out->late = atomic_load(&r->late);
    out->lost = (r->nframes - (acc1 - acc0)) + out->late; /* not accepted, or not in time */
    if (out->lost > r->nframes)
        out->lost = r->nframes;
    out->achieved = (double)sent / dt;
    out->gbs = (double)sent * (double)r->frame_bytes / dt / 1e9;
    out->p50 = pct(r->lat, r->nlat, 0.50);
    out->p90 = pct(r->lat, r->nlat, 0.90);
    out->p99 = pct(r->lat, r->nlat, 0.99);
    out->max = r->nlat ? r->lat[r->nlat - 1] : NAN;
    out->slices = r->received;
    return 0;
}

static int run_mode(const options *o, bool incremental)
{
    run r;
    memset(&r, 0, sizeof r);
    r.o = o;
    snprintf(r.ingest, sizeof r.ingest, "tcp://127.0.0.1:%d", o->port);
    snprintf(r.control, sizeof r.control, "tcp://127.0.0.1:%d", o->port + 1);
    snprintf(r.slices, sizeof r.slices, "tcp://127.0.0.1:%d", o->port + 2);
    r.frame_bytes = (size_t)o->rows * o->cols * 2;
    for (int p = 0; p < NPATTERN; p++) {
        r.pattern[p] = malloc(r.frame_bytes);
        if (!r.pattern[p])
            return fail(1, "out of memory for frames");
        for (size_t i = 0; i < (size_t)o->rows * o->cols; i++) {
            double u = (double)(i % o->cols) / o->cols - 0.5;
            r.pattern[p][i] = (uint16_t)(30000 + 20000 * exp(-u * u * (40.0 + 5 * p)));
        }
    }
    r.lat = malloc(MAX_LAT * sizeof *r.lat);
    char log[256];
    pid_t pid = start_daemon(o, &r, incremental, log, sizeof log);
    if (pid < 0)
        return fail(1, "cannot start %s", o->daemon);
    r.zctx = zmq_ctx_new();
    zmq_ctx_set(r.zctx, ZMQ_IO_THREADS, o->connections < 2 ? 2 : o->connections);
    void *ctl = zmq_socket(r.zctx, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(ctl, ZMQ_LINGER, &linger, sizeof linger);
    zmq_connect(ctl, r.control);
    tl_proto_decoder *dec = tl_proto_decoder_new();
    int rc = 0;
    if (wait_ready(ctl, dec) != 0) {
        rc = fail(1, "the daemon did not start (log: %s)", log);
        goto out;
    }
    /* the scan and the four slices */
    void *push = zmq_socket(r.zctx, ZMQ_PUSH);
    zmq_connect(push, r.ingest);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    tl_proto_scan scan = {.series = 1, .geometry = TL_PROTO_PARALLEL, .rows = o->rows,
                          .cols = o->cols, .dtype = TL_PROTO_U16, .window = o->window};
    tl_proto_encode_scan(&sb, &scan);
    zmq_send(push, sb.data, sb.size, 0);
    msgpack_sbuffer_destroy(&sb);
    zmq_close(push);
    usleep(200000);
    if (set_slice(ctl, dec, "bench-0", "row", "z", NULL, o->rows / 2) != 0 ||
        set_slice(ctl, dec, "bench-1", "ortho", "position", "x", 0) != 0 ||
        set_slice(ctl, dec, "bench-2", "ortho", "position", "y", 0) != 0 ||
        set_slice(ctl, dec, "bench-3", "ortho", "position", "z", o->rows / 2 + 0.5) != 0) {
        rc = fail(1, "the daemon refused the slices (log: %s)", log);
        goto out;
    }
    if (o->search) {
        double rate = o->rates[0], best = 0;
        result res;
        r.rate = rate;
        for (int i = 0; i < 12 && rate <= o->max_rate; i++) {
            if (one_rate(&r, ctl, dec, &res) != 0) {
                rc = 1;
                break;
            }
            print_result(&res, incremental);
            if (res.lost > 0)
                break;
            best = rate;
            rate *= 1.25;
            r.rate = rate;
        }
        printf("%-11s | highest loss-free rate: %.0f frames/s, %.2f GB/s\n",
               incremental ? "incremental" : "recompute", best,
               best * (double)r.frame_bytes / 1e9);
    } else {
        for (int i = 0; i < o->nrates; i++) {
            result res;
            r.rate = o->rates[i];
            if (one_rate(&r, ctl, dec, &res) != 0) {
                rc = 1;
                break;
            }
            print_result(&res, incremental);
        }
    }
out:
    tl_proto_decoder_free(dec);
    zmq_close(ctl);
    kill(pid, SIGTERM);
    int status;
    waitpid(pid, &status, 0);
    zmq_ctx_term(r.zctx);
    for (int p = 0; p < NPATTERN; p++)
        free(r.pattern[p]);
    free(r.lat);
    unlink(log);
    return rc;
}

static const char usage_text[] =
    "usage: tomolive bench --stream [--backend B] [--rows R] [--cols C] [--window N]\n"
    "                      [--rate FPS ...] [--search] [--max-rate FPS] [--seconds S]\n"
    "                      [--connections K] [--incremental on|off|both] [--port P]\n"
    "                      [--daemon PATH]\n"
    "\n"
    "Starts tomolived (ingest.overflow = drop) on 127.0.0.1 ports P, P+1, P+2 (default\n"
    "57600), defines a row slice and three ortho-slices, subscribes to them, and pushes\n"
    "paced uint16 frames of R x C (default 2048 x 2048; window N, default 1800) over K TCP\n"
    "connections (default 4) for S seconds per rate (default 5). Prints per rate: frames\n"
    "sent and lost (dropped by the daemon, or late because it pushed back), the achieved\n"
    "rate in frames/s and GB/s, and the latency of each slice received: its arrival minus the\n"
    "t_acq of the newest frame in it (ms: p50, p90, p99, max). --search raises the rate by\n"
    "25 % from the\n"
    "first --rate until frames are lost. --incremental both (the default) runs the\n"
    "daemon with and without incremental slice updates (the latter as the baseline).\n";

int tl_cmd_stream_bench(int argc, char **argv)
{
    options o = {.backend = "auto", .port = 57600, .rows = 2048, .cols = 2048, .window = 1800,
                 .seconds = 5, .connections = 4, .incremental = -1, .max_rate = 20000};
    snprintf(o.daemon, sizeof o.daemon, "tomolived");
    /* in a build tree, the daemon is beside clients/ */
    char self[1024];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = 0;
        char *slash = strrchr(self, '/');
        if (slash) {
            snprintf(slash, sizeof self - (size_t)(slash - self), "/../daemon/tomolived");
            if (access(self, X_OK) == 0)
                snprintf(o.daemon, sizeof o.daemon, "%s", self);
        }
    }
    enum { O_BACKEND = 256, O_ROWS, O_COLS, O_WINDOW, O_RATE, O_SEARCH, O_MAX, O_SECONDS,
           O_CONN, O_INC, O_PORT, O_DAEMON, O_STREAM };
    static const struct option opts[] = {
        {"stream", no_argument, NULL, O_STREAM},      {"backend", required_argument, NULL, O_BACKEND},
        {"rows", required_argument, NULL, O_ROWS},    {"cols", required_argument, NULL, O_COLS},
        {"window", required_argument, NULL, O_WINDOW}, {"rate", required_argument, NULL, O_RATE},
        {"search", no_argument, NULL, O_SEARCH},      {"max-rate", required_argument, NULL, O_MAX},
        {"seconds", required_argument, NULL, O_SECONDS},
        {"connections", required_argument, NULL, O_CONN},
        {"incremental", required_argument, NULL, O_INC}, {"port", required_argument, NULL, O_PORT},
        {"daemon", required_argument, NULL, O_DAEMON}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case O_STREAM: break;
        case O_BACKEND: o.backend = optarg; break;
        case O_ROWS: o.rows = (uint32_t)strtoul(optarg, NULL, 10); break;
        case O_COLS: o.cols = (uint32_t)strtoul(optarg, NULL, 10); break;
        case O_WINDOW: o.window = (uint32_t)strtoul(optarg, NULL, 10); break;
        case O_RATE:
            if (o.nrates < 32)
                o.rates[o.nrates++] = strtod(optarg, NULL);
            break;
        case O_SEARCH: o.search = true; break;
        case O_MAX: o.max_rate = strtod(optarg, NULL); break;
        case O_SECONDS: o.seconds = strtod(optarg, NULL); break;
        case O_CONN: o.connections = atoi(optarg); break;
        case O_INC:
            o.incremental = strcmp(optarg, "on") == 0 ? 1 : strcmp(optarg, "off") == 0 ? 0 : -1;
            break;
        case O_PORT: o.port = atoi(optarg); break;
        case O_DAEMON: snprintf(o.daemon, sizeof o.daemon, "%s", optarg); break;
        case 'h': fputs(usage_text, stdout); return 0;
        default: fputs(usage_text, stderr); return 2;
        }
    }
    if (o.nrates == 0)
        o.rates[o.nrates++] = 500;
    if (!o.rows || !o.cols || !o.window || o.seconds <= 0 || o.connections < 1 ||
        o.connections > MAX_CONN || o.port < 1 || o.port > 65533) {
        fputs(usage_text, stderr);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    printf("streaming: %u x %u uint16 frames (%.1f MB), window %u, slices: 1 row %u^2 + 3 ortho, "
           "%d TCP connections, %.0f s per rate, backend %s, overflow drop\n",
           o.rows, o.cols, o.rows * (double)o.cols * 2 / 1e6, o.window, o.cols, o.connections,
           o.seconds, o.backend);
    printf("latency: t_acq of the newest frame in a slice -> slice received by the subscriber\n");
    printf("mode        | target  | achieved | GB/s   | sent   | lost   | dropped| late   | p50 ms  | p90 ms  | p99 ms  | max ms\n");
    int rc = 0;
    if (o.incremental != 1)
        rc |= run_mode(&o, false);
    if (o.incremental != 0)
        rc |= run_mode(&o, true);
    return rc;
}
