/* main.c — tomolived's command line: options, --check-config / --print-config, then one
 * daemon's life (lifecycle.h) on the event loop until SIGTERM or SIGINT. With --mpi, under
 * mpirun, rank 0 is that daemon and every other rank serves it a part of each scan's rows
 * (gpu/remote.h) until rank 0 ends.
 */
#include <config.h>

#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "daemon/base/mpilink.h"
#include "daemon/lifecycle.h"
#include "gpu/remote.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tomolived [-c FILE] [--set SECTION.KEY=VALUE]... [options]\n"
            "  -c, --config FILE     configuration file (INI; see tomolive.conf(5))\n"
            "      --set KEY=VALUE   override one key, e.g. --set ingest.endpoint=tcp://*:6000\n"
            "      --log-level L     error, warn, info or debug (= --set daemon.log_level=L)\n"
            "      --backend B       auto, cpu or cuda (= --set daemon.backend=B)\n"
            "      --mpi             one daemon over the ranks of an MPI job (mpirun -n N): rank\n"
            "                        0 serves, every rank holds a part of the detector rows\n"
            "      --check-config    check the configuration, print it, and exit\n"
            "      --print-config    print the effective configuration with help, and exit\n"
            "  -V, --version         print the version and exit\n"
            "  -h, --help            this help\n");
}

#define TL_FRAME_HEAP_MAX (32 << 20) /* glibc's largest mmap threshold */

/* ZeroMQ allocates every received frame (8 MB for a 2048² uint16 camera) and the worker
 * frees it after the upload. By default glibc serves such sizes with mmap and gives them
 * back with munmap, so every frame page-faults 2,000 fresh pages (~1 ms of an I/O thread)
 * and the kernel zeroes them. Raised thresholds keep freed frames in the heap for the next;
 * heap.h gives them back once ingest is idle. One arena for all threads: malloc_trim gives
 * back the top of the main arena only, so frames that ZeroMQ's I/O threads had allocated
 * in arenas of their own stayed resident after every trim (the H100 soak: +14 MiB in one
 * thread arena, the heap in use flat). The threads allocate a few blocks per frame, and
 * glibc's per-thread cache serves the small ones without the arena's lock. */
static void keep_frame_memory(void)
{
#ifdef M_MMAP_THRESHOLD
    mallopt(M_MMAP_THRESHOLD, TL_FRAME_HEAP_MAX);
    mallopt(M_TRIM_THRESHOLD, 8 * TL_FRAME_HEAP_MAX);
    mallopt(M_ARENA_MAX, 1);
#endif
}

/* A rank other than 0 (--mpi): serves rank 0's parts of the rows on this host's GPU (its
 * local rank's, round robin) or CPU cores until rank 0 stops it. Signals are rank 0's to
 * act on (mpirun forwards them to every rank): this rank ends when rank 0 says so, or
 * with the job if rank 0 dies. */
static int serve_rank(const tl_settings *c, tl_link *link)
{
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    tl_remote_host host = {.device = 0, .threads = c->threads};
    char why[256] = "";
    if (c->backend != TL_SETTINGS_BACKEND_CPU) {
        int gpus = tl_backend_device_count(TL_BACKEND_CUDA, why, sizeof why);
        host.device = gpus > 0 ? link->local_rank % gpus : 0;
    }
    char name[64] = "?";
    gethostname(name, sizeof name - 1);
    tl_log(TL_LOG_INFO, "mpi_serving", "rank=%d ranks=%d host=%s local_rank=%d device=%d pid=%d",
           link->rank, link->size, tl_logq(name), link->local_rank, host.device, (int)getpid());
    tl_errbuf eb = {{0}};
    tl_status st = tl_remote_serve(link, &host, &eb);
    if (st != TL_OK)
        tl_log(TL_LOG_ERROR, "mpi_serve_failed", "rank=%d error=%s", link->rank, tl_logq(eb.msg));
    tl_log(TL_LOG_INFO, "mpi_served", "rank=%d", link->rank);
    tl_mpilink_end(link);
    return st == TL_OK ? 0 : 1;
}

/* Rank 0 (--mpi), at the end: the serving ranks stop, then MPI. */
static void end_ranks(tl_link *link)
{
    if (!link)
        return;
    tl_errbuf eb = {{0}};
    if (link->size > 1 && tl_remote_stop(link, &eb) != TL_OK)
        tl_log(TL_LOG_ERROR, "mpi_stop_failed", "error=%s", tl_logq(eb.msg));
    tl_mpilink_end(link);
}

int main(int argc, char **argv)
{
    static tl_daemon daemon; /* large, and zero-initialised */
    tl_daemon *d = &daemon;
    keep_frame_memory();
    tl_log_init();
    d->overrides = calloc((size_t)argc, sizeof *d->overrides);
    bool check = false, print = false, mpi = false;
    static char lvl[64], be[64];
    enum { O_SET = 256, O_LOG, O_BACKEND, O_CHECK, O_PRINT, O_MPI };
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"set", required_argument, NULL, O_SET},
                                         {"log-level", required_argument, NULL, O_LOG},
                                         {"backend", required_argument, NULL, O_BACKEND},
                                         {"check-config", no_argument, NULL, O_CHECK},
                                         {"print-config", no_argument, NULL, O_PRINT},
                                         {"mpi", no_argument, NULL, O_MPI},
                                         {"version", no_argument, NULL, 'V'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "c:Vh", opts, NULL)) != -1) {
        switch (o) {
            case 'c': d->config_path = optarg; break;
            case O_SET: d->overrides[d->noverrides++] = optarg; break;
            case O_LOG:
                snprintf(lvl, sizeof lvl, "daemon.log_level=%s", optarg);
                d->overrides[d->noverrides++] = lvl;
                break;
            case O_BACKEND:
                snprintf(be, sizeof be, "daemon.backend=%s", optarg);
                d->overrides[d->noverrides++] = be;
                break;
            case O_CHECK: check = true; break;
            case O_PRINT: print = true; break;
            case O_MPI: mpi = true; break;
            case 'V': printf("tomolived %s\n", PACKAGE_VERSION); return 0;
            case 'h': usage(stdout); return 0;
            default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        usage(stderr);
        return 2;
    }
    char err[512];
    if (tl_daemon_load_config(d, &d->cfg, err, sizeof err) != 0) {
        fprintf(stderr, "tomolived: %s\n", err);
        return 2;
    }
    if (check || print) {
        if (check)
            printf("# configuration OK\n");
        tl_settings_write(&d->cfg, stdout, print);
        return 0;
    }
    tl_log_set_level(d->cfg.log_level);
    static tl_link link;
    tl_link *ranks = NULL;
    if (mpi) {
        if (tl_mpilink_start(&argc, &argv, &link, err, sizeof err) != 0) {
            fprintf(stderr, "tomolived: %s\n", err);
            return 2;
        }
        if (link.rank > 0)
            return serve_rank(&d->cfg, &link);
        ranks = &link;
        d->link = link.size > 1 ? &link : NULL;
        tl_log(TL_LOG_INFO, "mpi_ranks", "ranks=%d local_ranks=%d pid=%d", link.size,
               link.local_ranks, (int)getpid());
    }
    tl_daemon_init(d);
    if (tl_daemon_start(d, err, sizeof err) != 0) {
        tl_log(TL_LOG_ERROR, "start_failed", "error=%s", tl_logq(err));
        fprintf(stderr, "tomolived: %s\n", err);
        end_ranks(ranks);
        return 1; /* the OS reclaims the rest; systemd sees the failure */
    }
    uv_run(&d->loop, UV_RUN_DEFAULT);
    tl_daemon_destroy(d);
    end_ranks(ranks);
    free(d->overrides);
    /* A kernel timing the stop left behind (tuning.c) may still use the device: leave
     * without the exit handlers that would tear the GPU runtime down under it. */
    if (atomic_load(&d->tuning.threads) > 0)
        _exit(0);
    return 0;
}
