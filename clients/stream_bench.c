/* stream_bench.c — `tomolive bench --stream`: the daemon under a camera's stream.
 *
 * It starts its own tomolived (backend as asked, ingest.overflow = drop, so a daemon that
 * falls behind loses frames instead of slowing the camera; engine.tune = cached, so kernels
 * come from `tomolive tune`'s cache and are never timed mid-stream), defines a horizontal slice
 * through the middle row and three ortho-slices, subscribes to all four, and for each rate
 * pushes paced frames over loopback TCP for a few seconds — from several PUSH sockets
 * (one TCP connection each: a single ZeroMQ connection moves only ~3.5 GB/s), each
 * frame's t_acq its slot of the schedule in realtime, as a camera's exposure would be.
 * With --bands N each frame goes as N row bands (PROTOCOL.md §8.2) spread over the
 * connections, so that its bands travel at once and it arrives sooner; all of them carry
 * its one t_acq. It reports what a control system sees: frames lost (dropped by the
 * daemon, or late: its send blocked for more than a frame period because the daemon pushed back), the
 * ingest rate achieved, and the latency of each slice received — its arrival time minus
 * the t_acq of the newest frame it contains — as percentiles. Each rate is measured --repeat
 * times (default 3) and the spread (min-max) of p50, p99, loss and rate over the repeats is
 * printed after their lines: one run of a few seconds on a shared host says little about
 * the next, and figures are quoted as such ranges (BENCHMARKS.md). With --search it raises
 * the rate until a repeat loses frames and reports the highest rate that every repeat held
 * without loss. Each rate's stream goes on for
 * TL_BENCH_TAIL_S after its measured seconds, and slices whose newest frame is from that
 * tail are not timed: a slice published after the last frame says how long its update
 * policy waited (up to 1 / max_rate), not how fast the pipeline is.
 *
 * Frames are synthetic (a few distinct smooth patterns cycled): the benchmark measures
 * transport, the per-frame pipeline and publishing, not reconstruction quality.
 *
 * With --cuda-ipc the frames are in GPU memory instead, as from a camera that writes into
 * the GPU (PROTOCOL.md §8.4): one producer thread (clients/push_ipc.h) copies each frame
 * from a bank of the patterns on the GPU into a slot of its ring and sends the header
 * alone over one connection; the daemon, on the same GPU, reads the slot and releases it.
 * A frame is late when waiting for a free slot and sending took more than a frame period:
 * the daemon's push-back in this mode, since frames in GPU memory are never dropped.
 */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
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
#include "clients/corr_opts.h"
#include "clients/push_ipc.h"
#include "protocol/protocol.h"
#include "protocol/pixels.h"
#include "protocol/shm.h"
#include "gpu/base/clock.h"

#define ME "tomolive bench --stream"
#define fail(rc, ...) tl_cli_fail(ME, (rc), __VA_ARGS__)
#define NPATTERN 8 /* distinct frames cycled */
#define MAX_CONN 16
#define MAX_LAT 200000        /* latency samples kept per run */
#define TL_BENCH_WARMUP_S 1.0 /* seconds of frames before the measured rates */
#define TL_BENCH_TAIL_S 0.25  /* frames go on this long after the measured ones (below) */
#define IPC_TIMEOUT_S 10.0    /* --cuda-ipc: a release that takes longer is an error */
#define MAX_REPEAT 100        /* --repeat */

extern char **environ;

typedef struct {
    char daemon[1024];
    const char *backend;
    int port;
    uint32_t rows, cols, window;
    double seconds;
    int repeat; /* runs per rate */
    int connections;
    uint32_t bands;  /* messages per frame, a row band each (1: whole frames) */
    int incremental; /* 1 on, 0 off, -1 both (off is the in-run baseline) */
    double rates[32];
    int nrates;
    bool search;
    double max_rate;
    bool shm;            /* slices through shared memory (topic shm/), else over TCP */
    int nslices;         /* of the four (row, ortho x, y, z), the first N */
    tl_proto_dtype wire; /* --encoding: how slices go over TCP (PROTOCOL.md §10.3) */
    bool lz4;            /* --lz4 */
    bool cuda_ipc;       /* frames in GPU memory (one producer) instead of payloads */
    int device;          /* --cuda-ipc: the GPU of the ring and of the daemon */
    uint32_t ring;       /* --cuda-ipc: slots */
    const char *gpus;    /* --gpus: the daemon's daemon.gpus, or NULL */
    int mpi;             /* --mpi N: the daemon on N MPI ranks (mpirun -n N tomolived --mpi) */
    bool prefilled;      /* --cuda-ipc --prefilled: slots written once, lent as they are */
    tl_corrections corr; /* --dezinger, --paganin: the scan's per-frame corrections */
    const char *rings;   /* --rings, as the scan sends it */
    const char *iterative; /* --iterative: the row slice's method (engine.iterative on) */
    bool cone;           /* --cone: a circular cone-beam scan (PROTOCOL.md 8.1.1) */
    double cone_mm[3];   /* ... source-axis, source-detector distance, pixel pitch */
} options;

/* One timed slice: its latency, and where it went, from the slice header's times (ms).
 * `daemon` is the daemon's frame_to_publish stage over the same slices the latency counts
 * (its status histogram covers the whole life of the daemon, warm-up and pauses too). */
typedef struct {
    double total;   /* arrival - t_acq: what the bench reports */
    double ingest;  /* t_recv - t_acq: the frame's way to the daemon */
    double compute; /* t_done - t_recv: queue, reconstruction and read-out */
    double outbox;  /* t_pub - t_done: waiting to be sent */
    double deliver; /* arrival - t_pub: transport (and decoding, when compact) */
    double daemon;  /* t_pub - t_recv: the daemon's frame_to_publish */
} sample;

#define SAMPLE_FIELDS 6

static double *sample_field(sample *s, int f)
{
    double *const v[SAMPLE_FIELDS] = {&s->total,  &s->ingest,  &s->compute,
                                      &s->outbox, &s->deliver, &s->daemon};
    return v[f];
}

static const char *const sample_names[SAMPLE_FIELDS] = {"total",  "ingest",  "compute",
                                                        "outbox", "deliver", "frame_to_publish"};

typedef struct {
    /* the run */
    const options *o;
    double rate;
    uint64_t nframes;
    uint64_t base; /* index of this run's first frame: indices go on across runs */
    uint16_t *pattern[NPATTERN];
    size_t frame_bytes;
    void *zctx;
    void *push_ctx[MAX_CONN], *push[MAX_CONN]; /* a context (I/O thread) per connection */
    pthread_mutex_t mu;                        /* the subscriber's results, shared with one_rate */
    char ingest[64], control[64], slices[64];
    char shm_prefix[32];
    /* sender results */
    atomic_uint_least64_t sent, late;   /* frames: every band sent; a band's send was late */
    atomic_uint_least64_t sent_msgs;    /* messages (bands) sent, as the daemon counts them */
    atomic_uint_least32_t *frame_state; /* by frame of the run: bands done and flags */
    uint64_t t_start_ns; /* CLOCK_REALTIME of t_start: t_acq of frame k is k periods on */
    atomic_uint_least64_t late_ring; /* --cuda-ipc: late ones that waited for a free slot */
    double t_start, t_end;
    atomic_uint_least64_t t_run_ns; /* CLOCK_REALTIME at the start of the run */
    uint64_t t_tail_ns;             /* CLOCK_REALTIME of the first frame of its tail */
    /* subscriber results */
    atomic_bool stop_sub;
    sample *lat; /* one per timed slice */
    size_t nlat;
    uint64_t received, missed; /* slices */
    uint64_t stale;            /* shm: slots rewritten before the copy finished */
    pid_t daemon_pid;
    bool incremental;
    /* --cuda-ipc */
    tl_push_ipc *ring;  /* the producer's ring, with the patterns in its bank */
    char ipc_err[1200]; /* why the producer thread stopped, "" while it did not */
} run;

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
    char set[14][256];
    snprintf(set[0], sizeof set[0], "ingest.endpoint=%s", r->ingest);
    snprintf(set[1], sizeof set[1], "control.endpoint=%s", r->control);
    snprintf(set[2], sizeof set[2], "slices.endpoint=%s", r->slices);
    snprintf(set[3], sizeof set[3], "ingest.overflow=drop");
    snprintf(set[4], sizeof set[4], "ingest.io_threads=%d",
             o->connections < 2 ? 2 : o->connections);
    snprintf(set[5], sizeof set[5], "slices.incremental=%s", incremental ? "true" : "false");
    snprintf(set[6], sizeof set[6], "http.listen=");
    snprintf(set[7], sizeof set[7], "slices.sndhwm=4");
    /* kernels as `tomolive tune` left them in the cache, never timed mid-stream (timing a
     * new slice size would share the device with the stream and skew its figures) */
    snprintf(set[8], sizeof set[8], "engine.tune=cached");
    snprintf(set[9], sizeof set[9], "slices.shm=%s", o->shm ? r->shm_prefix : "");
    /* --cuda-ipc: the daemon on the ring's GPU (the same ordinal: it inherits our
     * CUDA_VISIBLE_DEVICES), so that it reads the frames in place */
    int nset = 10;
    /* the queue holds messages: as many frames in bands as the default holds whole */
    if (o->bands > 1)
        snprintf(set[nset++], sizeof set[0], "ingest.queue=%u", 64u * o->bands);
    if (o->cuda_ipc)
        snprintf(set[nset++], sizeof set[0], "daemon.device=%d", o->device);
    if (o->gpus) /* detector rows split across these GPUs */
        snprintf(set[nset++], sizeof set[0], "daemon.gpus=%s", o->gpus);
    if (o->iterative) /* the measurements kept for the iterative row slice */
        snprintf(set[nset++], sizeof set[0], "engine.iterative=true");
    /* --mpi N: mpirun (PATH's, or TL_MPIRUN) starts the daemon on N ranks */
    const char *mpirun = getenv("TL_MPIRUN");
    char ranks[16];
    snprintf(ranks, sizeof ranks, "%d", o->mpi);
    const char *argv[40] = {mpirun && *mpirun ? mpirun : "mpirun", "--oversubscribe", "-n", ranks};
    int argc = o->mpi > 0 ? 4 : 0;
    const char *daemon[] = {o->daemon, "--backend", o->backend, "--log-level", "warn", "--mpi"};
    for (int i = 0; i < (o->mpi > 0 ? 6 : 5); i++)
        argv[argc++] = daemon[i];
    for (int i = 0; i < nset; i++) {
        argv[argc++] = "--set";
        argv[argc++] = set[i];
    }
    argv[argc] = NULL;
    snprintf(log, loglen, "/tmp/tomolive-stream-bench-%d.log", (int)getpid());
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    return rc == 0 ? pid : -1;
}

static uint64_t last_id; /* request ids: a reply is matched to its request by id */

/* Sends the request in sb (packed with id) and waits up to timeout seconds for the reply
 * with that id, discarding late replies to earlier requests (wait_ready gives up on a
 * slow daemon and asks again). *m points into parts, which the caller closes when the
 * result is > 0 (the number of parts); -1 without a reply. */
static int exchange(void *ctl, tl_proto_decoder *dec, msgpack_sbuffer *sb, uint64_t id,
                    double timeout, zmq_msg_t *parts, tl_proto_msg *m)
{
    if (zmq_send(ctl, "", 0, ZMQ_SNDMORE) < 0 || zmq_send(ctl, sb->data, sb->size, 0) < 0)
        return -1;
    double deadline = tl_cli_now() + timeout;
    for (;;) {
        double left = deadline - tl_cli_now();
        zmq_pollitem_t it = {ctl, 0, ZMQ_POLLIN, 0};
        if (left <= 0 || zmq_poll(&it, 1, (long)(left * 1000) + 1) <= 0)
            return -1;
        tl_proto_error err;
        int n = tl_proto_recv(ctl, parts, 4, 0, &err);
        if (n >= 2 &&
            tl_proto_decode(dec, zmq_msg_data(&parts[n - 1]), zmq_msg_size(&parts[n - 1]),
                            TL_MSG_REP, m, &err) == TL_PROTO_OK &&
            m->rep.id == id)
            return n;
        tl_proto_close(parts, n < 0 ? 0 : n);
    }
}

/* One control request; args is packed by the caller. Returns 0 when the reply is ok. */
static int request(void *ctl, tl_proto_decoder *dec, msgpack_sbuffer *sb, uint64_t id,
                   double timeout)
{
    zmq_msg_t parts[4];
    tl_proto_msg m;
    int n = exchange(ctl, dec, sb, id, timeout, parts, &m);
    if (n < 0)
        return -1;
    bool ok = m.rep.ok;
    if (!ok)
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
    int rc = -1;
    for (int i = 0; i < 100 && rc != 0; i++) {
        msgpack_sbuffer_clear(&sb);
        tl_proto_begin_req(&pk, ++last_id, "status", false);
        rc = request(ctl, dec, &sb, last_id, 0.2);
    }
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

static int set_slice(void *ctl, tl_proto_decoder *dec, const options *o, const char *id,
                     const char *kind, const char *key, const char *axis, double value)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    tl_proto_begin_req(&pk, ++last_id, "set_slice", true);
    bool compact = o->wire != TL_PROTO_F32; /* only then the keys: older daemons run too */
    bool iterative = o->iterative && strcmp(kind, "row") == 0;
    msgpack_pack_map(&pk, 3 + (axis != NULL) + compact + o->lz4 + iterative);
    tl_proto_pack_kv_str(&pk, "id", id);
    tl_proto_pack_kv_str(&pk, "kind", kind);
    tl_proto_pack_kv_double(&pk, key, value);
    if (compact)
        tl_proto_pack_kv_str(&pk, "dtype", tl_proto_dtype_name(o->wire));
    if (o->lz4)
        tl_proto_pack_kv_str(&pk, "compression", "lz4");
    if (axis)
        tl_proto_pack_kv_str(&pk, "axis", axis);
    if (iterative) /* one iteration per read-out, refining between frames */
        tl_proto_pack_kv_str(&pk, "method", o->iterative);
    int rc = request(ctl, dec, &sb, last_id, 5);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

/* A status reply: *m points into parts (n of them), which the caller closes. Returns the
 * number of parts, or -1 without a reply. */
static int status(void *ctl, tl_proto_decoder *dec, zmq_msg_t *parts, tl_proto_msg *m)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    tl_proto_begin_req(&pk, ++last_id, "status", false);
    /* a daemon creating a large engine holds its lock for seconds: be patient */
    int n = exchange(ctl, dec, &sb, last_id, 30, parts, m);
    if (n > 0 && !m->rep.ok) {
        tl_proto_close(parts, n);
        n = -1;
    }
    msgpack_sbuffer_destroy(&sb);
    return n;
}

/* status.frames.accepted.proj and rejected.queue_full, from a status reply. */
/* The daemon's projections accepted, frames dropped and messages received. Dropped: for
 * the full queue (status.frames.rejected.queue_full), or with bands, frames whose bands did
 * not all get in (.incomplete: a band the full queue dropped leaves its frame so). */
static int read_counts(void *ctl, tl_proto_decoder *dec, bool bands, uint64_t *accepted,
                       uint64_t *dropped, uint64_t *messages)
{
    zmq_msg_t parts[4];
    tl_proto_msg m;
    tl_proto_error err;
    int n = status(ctl, dec, parts, &m), rc = -1;
    if (n < 0)
        return -1;
    const msgpack_object *fr = tl_proto_map_get(m.rep.result, "frames");
    const msgpack_object *acc = fr ? tl_proto_map_get(fr, "accepted") : NULL;
    const msgpack_object *rej = fr ? tl_proto_map_get(fr, "rejected") : NULL;
    if (acc && rej && tl_proto_get_u64(acc, "proj", true, accepted, &err) == TL_PROTO_OK &&
        tl_proto_get_u64(rej, bands ? "incomplete" : "queue_full", true, dropped, &err) ==
            TL_PROTO_OK &&
        tl_proto_get_u64(fr, "messages", true, messages, &err) == TL_PROTO_OK)
        rc = 0;
    tl_proto_close(parts, n);
    return rc;
}

/* The daemon's own per-stage latency histograms (status.latency_ms, since it started). */
static void print_stages(void *ctl, tl_proto_decoder *dec, bool incremental)
{
    static const char *const stage[] = {"acquisition_to_receive",
                                        "queue",
                                        "submit",
                                        "reconstruct",
                                        "frame_to_publish",
                                        "acquisition_to_publish",
                                        "dezinger",
                                        "paganin",
                                        "rings"};
    zmq_msg_t parts[4];
    tl_proto_msg m;
    tl_proto_error err;
    int n = status(ctl, dec, parts, &m);
    if (n < 0)
        return;
    const msgpack_object *lat = tl_proto_map_get(m.rep.result, "latency_ms");
    /* the whole run, not the timed windows: at each stop of the stream (the end of the
     * warm-up, of each rate) the slices pacing held back (pacing.h: read out once the
     * stream has paused for two frame intervals) go out late, which a stream that keeps
     * going never sees; those few per stop are the p99 of a short run */
    if (lat)
        printf("%-11s | daemon stages over the whole run, stream stops included:\n",
               incremental ? "incremental" : "recompute");
    for (size_t i = 0; lat && i < sizeof stage / sizeof *stage; i++) {
        const msgpack_object *h = tl_proto_map_get(lat, stage[i]);
        double p50, p99, max;
        uint64_t count = 1;
        if (h && tl_proto_get_u64(h, "count", false, &count, &err) == TL_PROTO_OK && count &&
            tl_proto_get_double(h, "p50", true, &p50, &err) == TL_PROTO_OK &&
            tl_proto_get_double(h, "p99", true, &p99, &err) == TL_PROTO_OK &&
            tl_proto_get_double(h, "max", true, &max, &err) == TL_PROTO_OK)
            printf("%-11s | daemon stage %-22s p50 %8.3f  p99 %8.3f  max %8.3f ms\n",
                   incremental ? "incremental" : "recompute", stage[i], p50, p99, max);
    }
    /* ring removal's estimate updates, and how many moved the window (each rebuilds the
     * tracked slices: a latency spike), of the last scan */
    const msgpack_object *scan = tl_proto_map_get(m.rep.result, "scan");
    const msgpack_object *corr = scan ? tl_proto_map_get(scan, "corrections") : NULL;
    uint64_t updates, rebuilds;
    if (corr && tl_proto_get_u64(corr, "ring_updates", false, &updates, &err) == TL_PROTO_OK &&
        tl_proto_get_u64(corr, "ring_rebuilds", false, &rebuilds, &err) == TL_PROTO_OK &&
        updates)
        printf("%-11s | daemon rings: %llu estimate updates, %llu moved the window\n",
               incremental ? "incremental" : "recompute", (unsigned long long)updates,
               (unsigned long long)rebuilds);
    /* an iterative row slice (--iterative): the iterations it ran, and failed read-outs */
    const msgpack_object *sl = tl_proto_map_get(m.rep.result, "slices");
    uint64_t iterations, failed;
    if (sl && tl_proto_get_u64(sl, "iterations", false, &iterations, &err) == TL_PROTO_OK &&
        tl_proto_get_u64(sl, "failed", false, &failed, &err) == TL_PROTO_OK && iterations)
        printf("%-11s | daemon iterative slice: %llu iterations, %llu read-outs failed\n",
               incremental ? "incremental" : "recompute", (unsigned long long)iterations,
               (unsigned long long)failed);
    tl_proto_close(parts, n);
}

/* ---- where the CPU goes: per-thread CPU time of a process (/proc/PID/task/TID/stat) ------- */

#define MAX_THREADS 256

typedef struct {
    int n;
    int tid[MAX_THREADS];
    char name[MAX_THREADS][24];
    double cpu[MAX_THREADS]; /* seconds of user + system time */
} cpu_snap;

static void cpu_sample(pid_t pid, cpu_snap *s)
{
    s->n = 0;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *dir = opendir(path);
    if (!dir)
        return;
    const double tick = (double)sysconf(_SC_CLK_TCK);
    struct dirent *e;
    while ((e = readdir(dir)) && s->n < MAX_THREADS) {
        if (e->d_name[0] == '.')
            continue;
        char file[512], line[1024];
        snprintf(file, sizeof file, "/proc/%d/task/%s/stat", (int)pid, e->d_name);
        FILE *f = fopen(file, "r");
        if (!f)
            continue;
        size_t len = fread(line, 1, sizeof line - 1, f);
        fclose(f);
        line[len] = 0;
        char *open = strchr(line, '('), *close = strrchr(line, ')');
        unsigned long ut, st;
        /* after the name: state ppid pgrp session tty tpgid flags minflt cminflt majflt
         * cmajflt utime stime */
        if (!open || !close ||
            sscanf(close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) !=
                2)
            continue;
        int k = s->n++;
        s->tid[k] = atoi(e->d_name);
        snprintf(s->name[k], sizeof s->name[k], "%.*s", (int)(close - open - 1), open + 1);
        s->cpu[k] = (double)(ut + st) / tick;
    }
    closedir(dir);
}

/* Prints the threads that used more than 10 % of a core between a and b (dt seconds). */
static void cpu_report(const char *who, const cpu_snap *a, const cpu_snap *b, double dt)
{
    printf("            | %s CPU (%% of a core):", who);
    for (int i = 0; i < b->n; i++) {
        double before = 0;
        for (int j = 0; j < a->n; j++)
            if (a->tid[j] == b->tid[i])
                before = a->cpu[j];
        double pct = 100 * (b->cpu[i] - before) / dt;
        if (pct >= 10)
            printf(" %s %.0f", b->name[i], pct);
    }
    printf("\n");
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

/* A frame's state while its bands go out on several threads: bands done, and whether one
 * failed or was late. The thread that does its last band counts the frame. */
#define BAND_COUNT 0x00ffffffu /* holds up to TL_PROTO_MAX_DIM bands */
#define BAND_LATE 0x40000000u
#define BAND_FAILED 0x80000000u

static void band_done(run *r, uint64_t k, bool ok, bool late)
{
    atomic_uint_least32_t *st = &r->frame_state[k];
    if (ok)
        atomic_fetch_add(&r->sent_msgs, 1);
    if (late || !ok) /* before the count: the last band's add sees every flag */
        atomic_fetch_or(st, (late ? BAND_LATE : 0u) | (ok ? 0u : BAND_FAILED));
    uint32_t v = atomic_fetch_add(st, 1);
    if ((v & BAND_COUNT) + 1 < r->o->bands)
        return;
    if (!(v & BAND_FAILED))
        atomic_fetch_add(&r->sent, 1);
    if (v & BAND_LATE)
        atomic_fetch_add(&r->late, 1);
}

/* Band b of frame k is message j = k N + b of the run (N bands a frame, whole frames when
 * N is 1); connection c sends messages c, c + C, c + 2C, ... each at its frame's slot of
 * the schedule, stamped with that slot as t_acq: the same in every band of a frame,
 * whichever thread sends it. */
static void *sender(void *arg)
{
    sender_arg *a = arg;
    pthread_setname_np(pthread_self(), "bench-send");
    run *r = a->r;
    const options *o = r->o;
    void *push = r->push[a->conn];
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    double period = 1.0 / r->rate;
    uint64_t n = o->bands;
    for (uint64_t j = (uint64_t)a->conn; j < r->nframes * n; j += (uint64_t)o->connections) {
        uint64_t k = j / n, b = j % n;
        double slot = r->t_start + (double)k * period;
        sleep_until(slot);
        uint32_t first = (uint32_t)(b * o->rows / n), end = (uint32_t)((b + 1) * o->rows / n);
        tl_proto_frame h = {.series = 1,
                            .index = r->base + k,
                            .kind = TL_PROTO_PROJ,
                            .has_angle = true,
                            .angle = M_PI * (double)(r->base + k) / o->window,
                            .dtype = TL_PROTO_U16,
                            .rows = o->rows,
                            .cols = o->cols,
                            .has_t_acq = true,
                            .t_acq = r->t_start_ns + (uint64_t)llround((double)k * period * 1e9),
                            .has_band = n > 1,
                            .band_first = first,
                            .band_rows = end - first};
        msgpack_sbuffer_clear(&sb);
        tl_proto_encode_frame(&sb, &h);
        double t0 = tl_cli_now();
        bool ok = tl_proto_send(push, NULL, 0, sb.data, sb.size,
                                r->pattern[k % NPATTERN] + (size_t)first * o->cols,
                                (size_t)(end - first) * o->cols * sizeof(uint16_t), no_free, NULL,
                                0) == 0;
        /* a send that blocks (the connection's high-water mark reached) is the daemon
         * pushing back; a late wake-up of this thread is the bench's own jitter, caught up
         * at once, and not counted */
        band_done(r, k, ok, tl_cli_now() - t0 > period);
    }
    msgpack_sbuffer_destroy(&sb);
    return NULL;
}

/* --cuda-ipc: the one producer. Frame k is a device-to-device copy of pattern k % NPATTERN
 * from the bank into a free slot (waiting for a release when none is), then its header
 * alone on connection 0. With --prefilled the slot is lent as it is (it holds the pattern
 * of its number): a frame grabber writing by DMA uses neither the GPU's engines nor a CUDA
 * context, whereas a copy from this process competes with the daemon's work for the GPU
 * (contexts of two processes take turns on it). */
static void *ipc_sender(void *arg)
{
    run *r = arg;
    pthread_setname_np(pthread_self(), "bench-ipc");
    const options *o = r->o;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    double period = 1.0 / r->rate;
    char err[1024];
    for (uint64_t k = 0; k < r->nframes; k++) {
        sleep_until(r->t_start + (double)k * period);
        uint32_t slot;
        double t0 = tl_cli_now();
        if (tl_push_ipc_acquire(r->ring, IPC_TIMEOUT_S, &slot, err, sizeof err) != 0) {
            snprintf(r->ipc_err, sizeof r->ipc_err, "frame %" PRIu64 ": %s", r->base + k, err);
            break;
        }
        double waited = tl_cli_now() - t0; /* the daemon holding every slot */
        if (!o->prefilled &&
            tl_push_ipc_fill_bank(r->ring, slot, k % NPATTERN, err, sizeof err) != 0) {
            tl_push_ipc_cancel(r->ring, slot);
            snprintf(r->ipc_err, sizeof r->ipc_err, "%s", err);
            break;
        }
        tl_proto_frame h = {.series = 1,
                            .index = r->base + k,
                            .kind = TL_PROTO_PROJ,
                            .has_angle = true,
                            .angle = M_PI * (double)(r->base + k) / o->window,
                            .dtype = TL_PROTO_U16,
                            .rows = o->rows,
                            .cols = o->cols,
                            .has_t_acq = true,
                            .t_acq = tl_clock_realtime_ns()};
        tl_push_ipc_lend(r->ring, slot, &h);
        msgpack_sbuffer_clear(&sb);
        tl_proto_encode_frame(&sb, &h);
        double t1 = tl_cli_now();
        if (tl_proto_send(r->push[0], NULL, 0, sb.data, sb.size, NULL, 0, NULL, NULL, 0) != 0) {
            tl_push_ipc_cancel(r->ring, slot);
            snprintf(r->ipc_err, sizeof r->ipc_err, "cannot send frame %" PRIu64 ": %s",
                     r->base + k, zmq_strerror(zmq_errno()));
            break;
        }
        atomic_fetch_add(&r->sent, 1);
        atomic_fetch_add(&r->sent_msgs, 1);
        if (waited + (tl_cli_now() - t1) > period) {
            atomic_fetch_add(&r->late, 1);
            if (waited > 0.5 * period) /* mostly the ring's fault, not the send's */
                atomic_fetch_add(&r->late_ring, 1);
        }
    }
    msgpack_sbuffer_destroy(&sb);
    return NULL;
}

/* --cuda-ipc: the ring on the GPU, its bank holding the patterns. Made before the daemon
 * starts, so that a machine without a GPU fails at once. */
static int ipc_open(run *r)
{
    const options *o = r->o;
    char err[1024];
    tl_push_ipc_opts io = {.device = o->device,
                           .rows = o->rows,
                           .cols = o->cols,
                           .dtype = TL_PROTO_U16,
                           .slots = o->ring};
    if (!(r->ring = tl_push_ipc_create(&io, err, sizeof err)))
        return fail(1, "--cuda-ipc: %s", err);
    if (tl_push_ipc_bank_alloc(r->ring, NPATTERN, err, sizeof err) != 0)
        return fail(1, "--cuda-ipc: %s", err);
    for (int p = 0; p < NPATTERN; p++)
        if (tl_push_ipc_bank_put(r->ring, (size_t)p, r->pattern[p], err, sizeof err) != 0)
            return fail(1, "--cuda-ipc: %s", err);
    for (uint32_t s = 0; o->prefilled && s < o->ring; s++) /* each slot keeps its pattern */
        if (tl_push_ipc_fill_bank(r->ring, s, s % NPATTERN, err, sizeof err) != 0)
            return fail(1, "--cuda-ipc: %s", err);
    return 0;
}

/* The connections, made once per daemon and kept across rates, as a camera's are. Each has
 * its own context, hence its own I/O thread: connections made at the same instant in one
 * context all land on one I/O thread, which then caps the sender near 3 GB/s; and they are
 * made one at a time so that the daemon, too, spreads them over its I/O threads. */
static int connect_senders(run *r)
{
    for (int c = 0; c < r->o->connections; c++) {
        int hwm = 4, linger = 10000;
        r->push_ctx[c] = zmq_ctx_new();
        r->push[c] = r->push_ctx[c] ? zmq_socket(r->push_ctx[c], ZMQ_PUSH) : NULL;
        if (!r->push[c] || zmq_setsockopt(r->push[c], ZMQ_SNDHWM, &hwm, sizeof hwm) != 0 ||
            zmq_setsockopt(r->push[c], ZMQ_LINGER, &linger, sizeof linger) != 0 ||
            zmq_connect(r->push[c], r->ingest) != 0)
            return -1;
        usleep(50000);
    }
    return 0;
}

static void close_senders(run *r)
{
    for (int c = 0; c < r->o->connections; c++) {
        if (r->push[c])
            zmq_close(r->push[c]);
        if (r->push_ctx[c])
            zmq_ctx_term(r->push_ctx[c]);
        r->push[c] = r->push_ctx[c] = NULL;
    }
}

/* ---- subscriber -------------------------------------------------------------------------- */

static double span_ms(uint64_t from, uint64_t to)
{
    return from && to ? (double)(int64_t)(to - from) / 1e6 : NAN;
}

static sample slice_sample(const tl_proto_slice *h, uint64_t arrival)
{
    return (sample){.total = span_ms(h->t_acq, arrival),
                    .ingest = span_ms(h->t_acq, h->t_recv),
                    .compute = span_ms(h->t_recv, h->t_done),
                    .outbox = span_ms(h->t_done, h->t_pub),
                    .deliver = span_ms(h->t_pub, arrival),
                    .daemon = span_ms(h->t_recv, h->t_pub)};
}

static void *subscriber(void *arg)
{
    run *r = arg;
    pthread_setname_np(pthread_self(), "bench-sub");
    void *sub = zmq_socket(r->zctx, ZMQ_SUB);
    int hwm = 64;
    zmq_setsockopt(sub, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_connect(sub, r->slices);
    const char *topic = r->o->shm ? "shm/bench-" : "slice/bench-";
    zmq_setsockopt(sub, ZMQ_SUBSCRIBE, topic, strlen(topic));
    tl_proto_decoder *dec = tl_proto_decoder_new();
    tl_shm_reader rd = {0};
    uint64_t last_seq[4] = {0};
    /* compact slices (§10.3) have arrived once decoded: a user needs them as floats */
    bool decode = !r->o->shm && (r->o->wire != TL_PROTO_F32 || r->o->lz4);
    size_t side = r->o->rows > r->o->cols ? r->o->rows : r->o->cols;
    float *pixels = decode ? malloc(side * side * sizeof *pixels) : NULL;
    while (!atomic_load(&r->stop_sub)) {
        zmq_pollitem_t it = {sub, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 100) <= 0)
            continue;
        zmq_msg_t parts[4];
        tl_proto_error err;
        int n = tl_proto_recv(sub, parts, 4, 0, &err);
        if (n < 0)
            continue;
        tl_proto_msg m;
        int got = tl_proto_decode_parts(dec, parts, n, TL_MSG_SLICE, &m, &err) == TL_PROTO_OK;
        if (got && m.slice.has_shm) {
            /* the slice has arrived when its pixels can be read in place (a control loop
             * reads them there; copying 16 MB out is a choice, not part of delivery); a
             * pixel is read and the slot checked after, as a user of the view would */
            char why[256];
            const void *px;
            volatile float first = 0;
            int rc = tl_shm_view(&rd, &m.slice, &px, why, sizeof why);
            if (rc == 0) {
                first = *(const float *)px;
                rc = tl_shm_valid(&rd, &m.slice) ? 0 : TL_SHM_STALE;
            }
            (void)first;
            pthread_mutex_lock(&r->mu);
            if (rc == TL_SHM_STALE)
                r->stale++;
            else if (rc < 0 && r->stale++ == 0)
                fprintf(stderr, ME ": %s\n", why);
            pthread_mutex_unlock(&r->mu);
            got = rc == 0;
        }
        if (got && pixels && (size_t)m.slice.shape[0] * m.slice.shape[1] <= side * side &&
            tl_proto_pixels_decode(&m.slice, pixels, &err) != TL_PROTO_OK) {
            pthread_mutex_lock(&r->mu);
            if (r->stale++ == 0)
                fprintf(stderr, ME ": %s\n", err.message);
            pthread_mutex_unlock(&r->mu);
            got = 0;
        }
        uint64_t now = tl_clock_realtime_ns();
        pthread_mutex_lock(&r->mu);
        if (got) {
            int which = (int)(m.slice.id.ptr[m.slice.id.len - 1] - '0') & 3;
            if (last_seq[which] && m.slice.seq > last_seq[which] + 1)
                r->missed += m.slice.seq - last_seq[which] - 1;
            last_seq[which] = m.slice.seq;
            r->received++;
            /* a slice whose newest frame is older than this run (a new subscriber's first
             * slice, computed from the last run's window) says nothing about this rate,
             * nor one from the tail: its frames are there so that every slice counted was
             * published while frames still came (a rate-limited slice due after the last
             * frame would hold one up to 1 / max_rate old) */
            if (m.slice.t_acq >= atomic_load(&r->t_run_ns) && m.slice.t_acq < r->t_tail_ns &&
                r->nlat < MAX_LAT)
                r->lat[r->nlat++] = slice_sample(&m.slice, now);
        }
        pthread_mutex_unlock(&r->mu);
        tl_proto_close(parts, n);
    }
    free(pixels);
    tl_proto_decoder_free(dec);
    tl_shm_reader_close(&rd);
    zmq_close(sub);
    return NULL;
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
    double stage_p50[SAMPLE_FIELDS], stage_p99[SAMPLE_FIELDS]; /* by sample field */
    uint64_t sent, lost, dropped, late, slices, stale;
    uint64_t released, rejected; /* --cuda-ipc */
} result;

static void print_result(const result *s, bool incremental)
{
    printf("%-11s | %7.0f | %8.1f | %6.2f | %6llu | %6llu | %6llu | %6llu | %7.2f | %7.2f | %7.2f "
           "| %7.2f | %6llu | %5llu\n",
           incremental ? "incremental" : "recompute", s->rate, s->achieved, s->gbs,
           (unsigned long long)s->sent, (unsigned long long)s->lost,
           (unsigned long long)s->dropped, (unsigned long long)s->late, s->p50, s->p90, s->p99,
           s->max, (unsigned long long)s->slices, (unsigned long long)s->stale);
    fflush(stdout);
}

/* Where the timed slices' latency went (sample): p50 / p99 of each part, in ms. */
static void print_stage_split(const result *s, bool incremental)
{
    printf("%-11s | where it went (p50/p99 ms):", incremental ? "incremental" : "recompute");
    for (int f = 1; f < SAMPLE_FIELDS; f++)
        printf(" %s %.2f/%.2f", sample_names[f], s->stage_p50[f], s->stage_p99[f]);
    printf("\n");
}

static int one_rate(run *r, void *ctl, tl_proto_decoder *dec, double seconds, bool report,
                    result *out)
{
    static cpu_snap cd0, cd1, cs0, cs1; /* daemon and bench threads, before and after */
    const options *o = r->o;
    uint64_t acc0, drop0, msg0, acc1, drop1, msg1;
    if (read_counts(ctl, dec, r->o->bands > 1, &acc0, &drop0, &msg0) != 0)
        return fail(1, "no status from the daemon");
    /* the measured frames, then a tail of TL_BENCH_TAIL_S whose slices are not counted */
    uint64_t measured = (uint64_t)(r->rate * seconds);
    r->nframes = measured + (uint64_t)ceil(r->rate * TL_BENCH_TAIL_S);
    atomic_store(&r->sent, 0);
    atomic_store(&r->sent_msgs, 0);
    atomic_store(&r->late, 0);
    atomic_store(&r->late_ring, 0);
    pthread_t snd[MAX_CONN];
    sender_arg args[MAX_CONN];
    free(r->frame_state); /* one state per frame of this rate, made once for it */
    r->frame_state = r->ring ? NULL : calloc(r->nframes ? r->nframes : 1, sizeof *r->frame_state);
    if (!r->ring && !r->frame_state)
        return fail(1, "out of memory for %" PRIu64 " frames", r->nframes);
    double now = tl_cli_now();
    r->t_start = now + 0.05;
    r->t_start_ns = tl_clock_realtime_ns() + (uint64_t)llround((r->t_start - tl_cli_now()) * 1e9);
    pthread_mutex_lock(&r->mu);
    r->nlat = 0;
    r->received = r->missed = r->stale = 0;
    uint64_t t_run = tl_clock_realtime_ns();
    r->t_tail_ns = t_run + (uint64_t)((r->t_start - now + (double)measured / r->rate) * 1e9);
    atomic_store(&r->t_run_ns, t_run);
    pthread_mutex_unlock(&r->mu);
    cpu_sample(r->daemon_pid, &cd0);
    cpu_sample(getpid(), &cs0);
    tl_push_ipc_stats ipc0 = {0}, ipc1 = {0};
    char err[1024];
    if (r->ring) {
        tl_push_ipc_get_stats(r->ring, &ipc0);
        r->ipc_err[0] = 0;
        if (pthread_create(&snd[0], NULL, ipc_sender, r) != 0)
            return fail(1, "cannot start the producer thread");
        pthread_join(snd[0], NULL);
    } else {
        for (int c = 0; c < o->connections; c++) {
            args[c] = (sender_arg){r, c};
            pthread_create(&snd[c], NULL, sender, &args[c]);
        }
        for (int c = 0; c < o->connections; c++)
            pthread_join(snd[c], NULL);
    }
    r->t_end = tl_cli_now();
    cpu_sample(r->daemon_pid, &cd1);
    cpu_sample(getpid(), &cs1);
    if (r->ring) {
        if (r->ipc_err[0])
            return fail(1, "--cuda-ipc: %s", r->ipc_err);
        /* every frame of this rate read by the daemon: its counters are complete, and the
         * next rate starts with the whole ring free */
        if (tl_push_ipc_drain(r->ring, IPC_TIMEOUT_S, err, sizeof err) != 0)
            return fail(1, "--cuda-ipc: %s", err);
        tl_push_ipc_get_stats(r->ring, &ipc1);
        out->released = ipc1.released - ipc0.released;
        out->rejected = ipc1.rejected - ipc0.rejected;
    }
    /* let the daemon take what is queued, then read its counters */
    uint64_t sent = atomic_load(&r->sent), sent_msgs = atomic_load(&r->sent_msgs);
    for (int i = 0; i < 100; i++) {
        if (read_counts(ctl, dec, r->o->bands > 1, &acc1, &drop1, &msg1) == 0 &&
            msg1 - msg0 >= sent_msgs)
            break;
        usleep(50000);
    }
    usleep(300000);
    read_counts(ctl, dec, r->o->bands > 1, &acc1, &drop1, &msg1);
    pthread_mutex_lock(&r->mu); /* the samples of this rate end here */
    atomic_store(&r->t_run_ns, UINT64_MAX);
    r->base += r->nframes;
    double *sorted = malloc((r->nlat ? r->nlat : 1) * sizeof *sorted);
    for (int f = 0; f < SAMPLE_FIELDS; f++) {
        size_t n = 0; /* the header times a slice carries (t_recv, t_done are optional) */
        for (size_t k = 0; sorted && k < r->nlat; k++)
            if (!isnan(*sample_field(&r->lat[k], f)))
                sorted[n++] = *sample_field(&r->lat[k], f);
        tl_cli_sort(sorted, n);
        out->stage_p50[f] = pct(sorted, n, 0.50);
        out->stage_p99[f] = pct(sorted, n, 0.99);
        if (f == 0) {
            out->p90 = pct(sorted, n, 0.90);
            out->max = n ? sorted[n - 1] : NAN;
        }
    }
    free(sorted);
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
    out->p50 = out->stage_p50[0];
    out->p99 = out->stage_p99[0];
    out->slices = r->received;
    out->stale = r->stale;
    pthread_mutex_unlock(&r->mu);
    if (!report)
        return 0;
    print_result(out, r->incremental);
    print_stage_split(out, r->incremental);
    cpu_report("daemon", &cd0, &cd1, dt);
    cpu_report("bench", &cs0, &cs1, dt);
    if (r->ring) {
        printf("            | cuda-ipc: %llu released, %llu rejected; of the late, %llu waited "
               "for a free slot",
               (unsigned long long)out->released, (unsigned long long)out->rejected,
               (unsigned long long)atomic_load(&r->late_ring));
        if (out->rejected && ipc1.first_message[0])
            printf(" (the first of all: %s: %s)", tl_proto_err_name(ipc1.first_code),
                   ipc1.first_message);
        printf("\n");
    }
    return 0;
}

/* The spread of one statistic over the repeats: NaN (no slices timed) is passed over. */
typedef struct {
    double lo, hi;
} span;

static void span_add(span *sp, double v)
{
    sp->lo = fmin(sp->lo, v); /* fmin and fmax skip a NaN operand */
    sp->hi = fmax(sp->hi, v);
}

/* After the repeats of one rate: each statistic's minimum and maximum over them. */
static void print_spread(const result *res, int n, bool incremental)
{
    span p50 = {NAN, NAN}, p99 = {NAN, NAN}, achieved = {NAN, NAN};
    uint64_t lost_lo = UINT64_MAX, lost_hi = 0;
    for (int k = 0; k < n; k++) {
        span_add(&p50, res[k].p50);
        span_add(&p99, res[k].p99);
        span_add(&achieved, res[k].achieved);
        lost_lo = res[k].lost < lost_lo ? res[k].lost : lost_lo;
        lost_hi = res[k].lost > lost_hi ? res[k].lost : lost_hi;
    }
    printf("%-11s | spread  | %.0f frames/s, min-max of %d repeats: p50 %.2f-%.2f ms, "
           "p99 %.2f-%.2f ms, lost %llu-%llu, achieved %.1f-%.1f frames/s\n",
           incremental ? "incremental" : "recompute", res[0].rate, n, p50.lo, p50.hi, p99.lo,
           p99.hi, (unsigned long long)lost_lo, (unsigned long long)lost_hi, achieved.lo,
           achieved.hi);
    fflush(stdout);
}

/* Measures r->rate o->repeat times, a line each, then (for two or more) their spread.
 * *lost_max: the most frames one repeat lost. */
static int repeat_rate(run *r, void *ctl, tl_proto_decoder *dec, uint64_t *lost_max)
{
    result res[MAX_REPEAT];
    int n = r->o->repeat;
    *lost_max = 0;
    for (int k = 0; k < n; k++) {
        if (one_rate(r, ctl, dec, r->o->seconds, true, &res[k]) != 0)
            return 1;
        if (res[k].lost > *lost_max)
            *lost_max = res[k].lost;
    }
    if (n > 1)
        print_spread(res, n, r->incremental);
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
    snprintf(r.shm_prefix, sizeof r.shm_prefix, "tlbench%d", (int)getpid());
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
    if (o->cuda_ipc && ipc_open(&r) != 0) {
        tl_push_ipc_destroy(r.ring);
        for (int p = 0; p < NPATTERN; p++)
            free(r.pattern[p]);
        free(r.lat);
        return 1;
    }
    pthread_mutex_init(&r.mu, NULL);
    char log[256];
    pid_t pid = start_daemon(o, &r, incremental, log, sizeof log);
    if (pid < 0)
        return fail(1, "cannot start %s", o->daemon);
    r.daemon_pid = pid;
    r.incremental = incremental;
    r.zctx = zmq_ctx_new();
    zmq_ctx_set(r.zctx, ZMQ_IO_THREADS, o->connections < 2 ? 2 : o->connections);
    void *ctl = zmq_socket(r.zctx, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(ctl, ZMQ_LINGER, &linger, sizeof linger);
    zmq_connect(ctl, r.control);
    tl_proto_decoder *dec = tl_proto_decoder_new();
    int rc = 0;
    bool subscribed = false;
    pthread_t sub;
    if (wait_ready(ctl, dec) != 0) {
        rc = fail(1, "the daemon did not start (log: %s)", log);
        goto out;
    }
    /* the scan and the four slices */
    void *push = zmq_socket(r.zctx, ZMQ_PUSH);
    zmq_connect(push, r.ingest);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    tl_proto_scan scan = {.series = 1,
                          .geometry = TL_PROTO_PARALLEL,
                          .rows = o->rows,
                          .cols = o->cols,
                          .dtype = TL_PROTO_U16,
                          .window = o->window,
                          .dezinger = o->corr.dezinger,
                          .has_paganin = o->corr.delta_beta > 0,
                          .paganin = {(float)o->corr.energy_kev, (float)o->corr.distance_m,
                                      (float)o->corr.pixel_um, (float)o->corr.delta_beta},
                          .rings = {o->rings, o->rings ? strlen(o->rings) : 0}};
    if (o->cone) { /* the frames are the same; the daemon back-projects along cone rays */
        scan.geometry = TL_PROTO_CONE;
        scan.source_origin = o->cone_mm[0];
        scan.source_detector = o->cone_mm[1];
        scan.pixel_size[0] = scan.pixel_size[1] = o->cone_mm[2];
    }
    if (r.ring) /* where the daemon hands the ring's slots back */
        scan.release =
            (tl_proto_str){tl_push_ipc_endpoint(r.ring), strlen(tl_push_ipc_endpoint(r.ring))};
    tl_proto_encode_scan(&sb, &scan);
    zmq_send(push, sb.data, sb.size, 0);
    msgpack_sbuffer_destroy(&sb);
    zmq_close(push);
    usleep(200000);
    if (set_slice(ctl, dec, o, "bench-0", "row", "z", NULL, o->rows / 2) != 0 ||
        (o->nslices > 1 && set_slice(ctl, dec, o, "bench-1", "ortho", "position", "x", 0) != 0) ||
        (o->nslices > 2 && set_slice(ctl, dec, o, "bench-2", "ortho", "position", "y", 0) != 0) ||
        (o->nslices > 3 &&
         set_slice(ctl, dec, o, "bench-3", "ortho", "position", "z", o->rows / 2 + 0.5) != 0)) {
        rc = fail(1, "the daemon refused the slices (log: %s)", log);
        goto out;
    }
    if (connect_senders(&r) != 0) {
        rc = fail(1, "cannot connect to %s: %s", r.ingest, zmq_strerror(zmq_errno()));
        goto out;
    }
    /* one subscriber for all rates, as a control system would keep it */
    atomic_store(&r.t_run_ns, UINT64_MAX);
    atomic_store(&r.stop_sub, false);
    if (pthread_create(&sub, NULL, subscriber, &r) != 0) {
        rc = fail(1, "cannot start the subscriber thread");
        goto out;
    }
    subscribed = true;
    usleep(300000); /* the subscription reaches the daemon */
    /* A warm-up second at the first rate, not reported: the daemon allocates its slice
     * buffers (page-locked) on the first publications, as it would when a control system
     * subscribes before its scan; the rates measure the stream, not that. */
    result warm;
    r.rate = o->rates[0];
    if (one_rate(&r, ctl, dec, TL_BENCH_WARMUP_S, false, &warm) != 0) {
        rc = 1;
        goto out;
    }
    uint64_t lost;
    if (o->search) {
        double rate = o->rates[0], best = 0;
        r.rate = rate;
        for (int i = 0; i < 12 && rate <= o->max_rate; i++) {
            if (repeat_rate(&r, ctl, dec, &lost) != 0) {
                rc = 1;
                break;
            }
            if (lost > 0)
                break;
            best = rate;
            rate *= 1.25;
            r.rate = rate;
        }
        printf("%-11s | highest loss-free rate (in each of %d repeats): %.0f frames/s, %.2f "
               "GB/s\n",
               incremental ? "incremental" : "recompute", o->repeat, best,
               best * (double)r.frame_bytes / 1e9);
    } else {
        for (int i = 0; i < o->nrates; i++) {
            r.rate = o->rates[i];
            if (repeat_rate(&r, ctl, dec, &lost) != 0) {
                rc = 1;
                break;
            }
        }
    }
    print_stages(ctl, dec, incremental);
out:
    if (subscribed) {
        atomic_store(&r.stop_sub, true);
        pthread_join(sub, NULL);
    }
    close_senders(&r);
    tl_proto_decoder_free(dec);
    zmq_close(ctl);
    kill(pid, SIGTERM);
    int status;
    waitpid(pid, &status, 0);
    zmq_ctx_term(r.zctx);
    tl_push_ipc_destroy(r.ring); /* the daemon is gone: nothing maps the ring any more */
    for (int p = 0; p < NPATTERN; p++)
        free(r.pattern[p]);
    free(r.lat);
    free(r.frame_state);
    pthread_mutex_destroy(&r.mu);
    unlink(log);
    return rc;
}

static const char usage_text[] =
    "usage: tomolive bench --stream [--backend B] [--rows R] [--cols C] [--window N]\n"
    "                      [--rate FPS ...] [--search] [--max-rate FPS] [--seconds S]\n"
    "                      [--repeat N]\n"
    "                      [--connections K] [--bands N] [--incremental on|off|both]\n"
    "                      [--port P] [--delivery tcp|shm] [--daemon PATH]\n"
    "                      [--slices N] [--encoding f32|f16|q16] [--lz4]\n"
    "                      [--cuda-ipc [--device N] [--ring SLOTS] [--prefilled]]\n"
    "                      [--gpus LIST] [--mpi N] [--dezinger T] [--paganin E,D,P,R]\n"
    "                      [--rings vo|fw[:PARAM[,TOL]]] [--cone SAD,SDD,PITCH]\n"
    "                      [--iterative METHOD]\n"
    "\n"
    "Starts tomolived (ingest.overflow = drop) on 127.0.0.1 ports P, P+1, P+2 (default\n"
    "57600), defines a row slice and three ortho-slices, subscribes to them, and pushes\n"
    "paced uint16 frames of R x C (default 2048 x 2048; window N, default 1800) over K TCP\n"
    "connections (default 4) for S seconds per rate (default 5), then 0.25 s more whose\n"
    "slices are not timed (so that each slice timed was published while frames came).\n"
    "Prints per rate: frames\n"
    "sent and lost (dropped by the daemon, or late: its send blocked for more than a frame\n"
    "period because the daemon pushed back), the achieved\n"
    "rate in frames/s and GB/s, and the latency of each slice received: its arrival minus the\n"
    "t_acq of the newest frame in it (ms: p50, p90, p99, max). Each rate runs N times\n"
    "(--repeat, default 3), a line each, then a 'spread' line: the min-max over the repeats\n"
    "of p50, p99, lost frames and the achieved rate. --search raises the rate by 25 % from\n"
    "the first --rate until a repeat loses frames. --incremental both (the default) runs the\n"
    "daemon with and without incremental slice updates (the latter as the baseline).\n"
    "--delivery shm (the default) subscribes to the slices through shared memory (topic\n"
    "shm/<id>/, slices.shm set): a slice has arrived when its pixels can be read in place\n"
    "(mapped, and its slot holds it); tcp takes them over the slices socket.\n"
    "--slices N: only the first N of the four slices (row, ortho x, y, z; default 4).\n"
    "--encoding, --lz4: the slices go over TCP as f16 or q16 and/or LZ4-compressed\n"
    "(PROTOCOL.md 10.3; with --delivery tcp); a slice has arrived once decoded to float32.\n"
    "--cuda-ipc: the frames are in GPU memory instead (CUDA IPC, the daemon on GPU N,\n"
    "default 0): one producer copies each from a bank on the GPU into a ring of SLOTS\n"
    "(default 16) and sends its header alone; the daemon releases the slot once it has read\n"
    "the frame. Late then means waiting for a free slot (and sending) took more than a\n"
    "frame period. Each rate adds a line: frames released and rejected by the daemon, and\n"
    "how many of the late frames waited for a free slot (the others were slow to send).\n"
    "--prefilled: the slots are written once before the run and each frame is lent as its\n"
    "slot holds it (a frame grabber writing by DMA): no GPU copy of the producer's\n"
    "competes with the daemon, so the numbers are the daemon's alone.\n"
    "--gpus LIST: the daemon splits the detector rows across these GPUs (daemon.gpus).\n"
    "--mpi N: the daemon runs as an MPI job of N ranks (mpirun -n N tomolived --mpi; mpirun\n"
    "from PATH, or TL_MPIRUN), the rows split over the ranks.\n"
    "--bands N: each frame goes as N messages of a row band each (rows b R / N to\n"
    "(b + 1) R / N - 1, with the frame's header; N <= R), band b of frame k on connection\n"
    "(k N + b) mod K, so that a frame's bands travel at once (default 1: whole frames; not\n"
    "with --cuda-ipc). Every band carries the frame's t_acq, its slot of the schedule.\n"
    "Sent, lost and late count frames (late: the send of one of its bands blocked for more\n"
    "than a frame period); dropped counts the frames the daemon dropped because their\n"
    "bands did not all get in (status.frames.rejected.incomplete).\n"
    "--dezinger T, --paganin E,D,P,R, --rings M: the scan asks for these corrections\n"
    "(ARCHITECTURE.md 3.11; as tomolive recon); each correction's own time per frame is\n"
    "printed with the daemon's stages. Compare with a run without them for their cost.\n"
    "--cone SAD,SDD,PITCH: the scan is a circular cone-beam scan (source-axis and\n"
    "source-detector distances and the pixel pitch, mm): the same frames, back-projected\n"
    "along cone rays (FDK), on one GPU.\n"
    "--iterative METHOD: the row slice is iterative (sirt, sart, os-sart, osem; one\n"
    "iteration per read-out, refining between frames; engine.iterative on): compare the\n"
    "lost frames and the other slices' latency with a run without it.\n";

int tl_cmd_stream_bench(int argc, char **argv)
{
    options o = {.backend = "auto",
                 .port = 57600,
                 .rows = 2048,
                 .cols = 2048,
                 .window = 1800,
                 .seconds = 5,
                 .repeat = 3,
                 .connections = 4,
                 .incremental = -1,
                 .max_rate = 20000,
                 .shm = true,
                 .nslices = 4,
                 .wire = TL_PROTO_F32,
                 .ring = 16,
                 .bands = 1};
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
    enum {
        O_BACKEND = 256,
        O_ROWS,
        O_COLS,
        O_WINDOW,
        O_RATE,
        O_SEARCH,
        O_MAX,
        O_SECONDS,
        O_CONN,
        O_INC,
        O_PORT,
        O_DAEMON,
        O_STREAM,
        O_DELIVERY,
        O_CUDAIPC,
        O_DEVICE,
        O_RING,
        O_GPUS,
        O_MPI,
        O_PREFILLED,
        O_BANDS,
        O_REPEAT,
        O_SLICES,
        O_ENCODING,
        O_LZ4,
        O_DEZINGER,
        O_PAGANIN,
        O_RINGS,
        O_ITERATIVE,
        O_CONE
    };
    static const struct option opts[] = {{"stream", no_argument, NULL, O_STREAM},
                                         {"backend", required_argument, NULL, O_BACKEND},
                                         {"rows", required_argument, NULL, O_ROWS},
                                         {"cols", required_argument, NULL, O_COLS},
                                         {"window", required_argument, NULL, O_WINDOW},
                                         {"rate", required_argument, NULL, O_RATE},
                                         {"search", no_argument, NULL, O_SEARCH},
                                         {"max-rate", required_argument, NULL, O_MAX},
                                         {"seconds", required_argument, NULL, O_SECONDS},
                                         {"connections", required_argument, NULL, O_CONN},
                                         {"incremental", required_argument, NULL, O_INC},
                                         {"port", required_argument, NULL, O_PORT},
                                         {"daemon", required_argument, NULL, O_DAEMON},
                                         {"help", no_argument, NULL, 'h'},
                                         {"delivery", required_argument, NULL, O_DELIVERY},
                                         {"cuda-ipc", no_argument, NULL, O_CUDAIPC},
                                         {"device", required_argument, NULL, O_DEVICE},
                                         {"ring", required_argument, NULL, O_RING},
                                         {"gpus", required_argument, NULL, O_GPUS},
                                         {"mpi", required_argument, NULL, O_MPI},
                                         {"prefilled", no_argument, NULL, O_PREFILLED},
                                         {"bands", required_argument, NULL, O_BANDS},
                                         {"repeat", required_argument, NULL, O_REPEAT},
                                         {"slices", required_argument, NULL, O_SLICES},
                                         {"encoding", required_argument, NULL, O_ENCODING},
                                         {"lz4", no_argument, NULL, O_LZ4},
                                         {"dezinger", required_argument, NULL, O_DEZINGER},
                                         {"paganin", required_argument, NULL, O_PAGANIN},
                                         {"rings", required_argument, NULL, O_RINGS},
                                         {"iterative", required_argument, NULL, O_ITERATIVE},
                                         {"cone", required_argument, NULL, O_CONE},
                                         {NULL, 0, NULL, 0}};
    bool device_or_ring = false, has_bands = false;
    long v;
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
                o.incremental = strcmp(optarg, "on") == 0    ? 1
                                : strcmp(optarg, "off") == 0 ? 0
                                                             : -1;
                break;
            case O_PORT: o.port = atoi(optarg); break;
            case O_DAEMON: snprintf(o.daemon, sizeof o.daemon, "%s", optarg); break;
            case O_DELIVERY:
                if (strcmp(optarg, "shm") != 0 && strcmp(optarg, "tcp") != 0) {
                    fputs(usage_text, stderr);
                    return 2;
                }
                o.shm = strcmp(optarg, "shm") == 0;
                break;
            case O_CUDAIPC: o.cuda_ipc = true; break;
            case O_GPUS: o.gpus = optarg; break;
            case O_MPI:
                if (!tl_cli_long(optarg, 2, TL_ENGINE_MAX_DEVICES, &v))
                    return fail(2, "bad --mpi '%s': need 2 .. %d ranks", optarg,
                                TL_ENGINE_MAX_DEVICES);
                o.mpi = (int)v;
                break;
            case O_PREFILLED: o.prefilled = device_or_ring = true; break;
            case O_DEVICE:
            case O_RING:
                if (!tl_cli_long(optarg, c == O_RING ? 1 : 0, c == O_RING ? 65536 : 1023, &v)) {
                    fputs(usage_text, stderr);
                    return 2;
                }
                if (c == O_RING)
                    o.ring = (uint32_t)v;
                else
                    o.device = (int)v;
                device_or_ring = true;
                break;
            case O_BANDS:
                if (!tl_cli_long(optarg, 1, TL_PROTO_MAX_DIM, &v))
                    return fail(2, "bad --bands '%s': need 1 to the frames' rows", optarg);
                o.bands = (uint32_t)v;
                has_bands = true;
                break;
            case O_CONE:
                if (sscanf(optarg, "%lf,%lf,%lf", &o.cone_mm[0], &o.cone_mm[1], &o.cone_mm[2]) !=
                        3 ||
                    !(o.cone_mm[0] > 0 && o.cone_mm[1] > 0 && o.cone_mm[2] > 0))
                    return fail(2, "bad --cone '%s': need SAD,SDD,PITCH in mm, each > 0", optarg);
                o.cone = true;
                break;
            case O_REPEAT:
                if (!tl_cli_long(optarg, 1, MAX_REPEAT, &v))
                    return fail(2, "bad --repeat '%s': need 1 to %d", optarg, MAX_REPEAT);
                o.repeat = (int)v;
                break;
            case O_SLICES:
                if (!tl_cli_long(optarg, 1, 4, &v))
                    return fail(2, "bad --slices '%s': need 1 to 4", optarg);
                o.nslices = (int)v;
                break;
            case O_ENCODING:
                if (!tl_proto_slice_dtype_parse(optarg, strlen(optarg), &o.wire) ||
                    (o.wire != TL_PROTO_F32 && o.wire != TL_PROTO_F16 && o.wire != TL_PROTO_Q16))
                    return fail(2, "bad --encoding '%s': f32, f16 or q16", optarg);
                break;
            case O_LZ4: o.lz4 = true; break;
            case O_DEZINGER:
            case O_PAGANIN:
            case O_RINGS: {
                char why[256];
                bool ok = c == O_DEZINGER  ? tl_corr_opt_dezinger(optarg, &o.corr, why, sizeof why)
                          : c == O_PAGANIN ? tl_corr_opt_paganin(optarg, &o.corr, why, sizeof why)
                                           : tl_corr_opt_rings(optarg, &o.corr, why, sizeof why);
                if (!ok)
                    return fail(2, "%s", why);
                if (c == O_RINGS)
                    o.rings = optarg;
                break;
            }
            case O_ITERATIVE: {
                tl_iter_method m;
                if (!tl_iter_method_parse(optarg, &m))
                    return fail(2, "bad --iterative '%s': sirt, sart, os-sart or osem", optarg);
                o.iterative = optarg;
                break;
            }
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
    if (device_or_ring && !o.cuda_ipc)
        return fail(2, "--device, --ring and --prefilled are for --cuda-ipc");
    if (has_bands && o.cuda_ipc)
        return fail(2, "--bands is not for --cuda-ipc: a frame in GPU memory is lent whole");
    if (o.bands > o.rows)
        return fail(2, "--bands %u: more bands than the frames' %u rows", o.bands, o.rows);
    if ((o.wire != TL_PROTO_F32 || o.lz4) && o.shm)
        return fail(2, "--encoding and --lz4 are for --delivery tcp (shared memory is f32)");
    if (o.cuda_ipc && strcmp(o.backend, "cpu") == 0)
        return fail(2, "--cuda-ipc needs the daemon's cuda backend (frames in GPU memory)");
    char transport[160];
    if (o.cuda_ipc) {
        /* no CUDA, no such GPU: say so once, before any daemon is started */
        char uuid[TL_IPC_UUID_LEN + 1], why[512];
        tl_status st = tl_ipc_device_uuid(o.device, uuid, why, sizeof why);
        if (st != TL_OK)
            return st == TL_EUNSUPPORTED ? fail(1, "--cuda-ipc: %s", why)
                                         : fail(1, "--cuda-ipc: GPU %d: %s", o.device, why);
        o.connections = 1; /* headers only: one connection carries them all */
        snprintf(transport, sizeof transport,
                 "frames in GPU memory (CUDA IPC, a ring of %u "
                 "slots on GPU %d, %s, %s)",
                 o.ring, o.device, uuid,
                 o.prefilled ? "prefilled: lent as written once" : "a GPU copy per frame");
    } else {
        int len = snprintf(transport, sizeof transport, "%d TCP connections", o.connections);
        if (o.bands > 1)
            snprintf(transport + len, sizeof transport - (size_t)len,
                     ", frames in %u row "
                     "bands (dropped: frames whose bands did not all get in)",
                     o.bands);
    }
    signal(SIGPIPE, SIG_IGN);
    printf(
        "streaming: %u x %u uint16 frames (%.1f MB), window %u, slices: 1 row %u^2 + %d ortho, "
        "%s, %.0f s per rate x %d repeat%s, backend %s%s%s, overflow drop, slices by %s%s%s%s\n",
        o.rows, o.cols, o.rows * (double)o.cols * 2 / 1e6, o.window, o.cols, o.nslices - 1,
        transport, o.seconds, o.repeat, o.repeat == 1 ? "" : "s", o.backend,
        o.gpus ? " on GPUs " : "", o.gpus ? o.gpus : "", o.shm ? "shared memory" : "TCP",
        o.shm ? "" : " as ", o.shm ? "" : tl_proto_dtype_name(o.wire), o.lz4 ? " + LZ4" : "");
    printf("latency: t_acq of the newest frame in a slice -> slice received by the subscriber\n");
    printf("mode        | target  | achieved | GB/s   | sent   | lost   | dropped| late   | p50 "
           "ms  | p90 ms  | p99 ms  | max ms  | slices | stale\n");
    int rc = 0;
    if (o.incremental != 1)
        rc |= run_mode(&o, false);
    if (o.incremental != 0)
        rc |= run_mode(&o, true);
    return rc;
}
