/* main.c — tomolived's command line: options, --check-config / --print-config, then one
 * daemon's life (lifecycle.h) on the event loop until SIGTERM or SIGINT.
 */
#include <config.h>

#include <getopt.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "daemon/lifecycle.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tomolived [-c FILE] [--set SECTION.KEY=VALUE]... [options]\n"
            "  -c, --config FILE     configuration file (INI; see tomolive.conf(5))\n"
            "      --set KEY=VALUE   override one key, e.g. --set ingest.endpoint=tcp://*:6000\n"
            "      --log-level L     error, warn, info or debug (= --set daemon.log_level=L)\n"
            "      --backend B       auto, cpu or cuda (= --set daemon.backend=B)\n"
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

int main(int argc, char **argv)
{
    static tl_daemon daemon; /* large, and zero-initialised */
    tl_daemon *d = &daemon;
    keep_frame_memory();
    tl_log_init();
    d->overrides = calloc((size_t)argc, sizeof *d->overrides);
    bool check = false, print = false;
    static char lvl[64], be[64];
    enum { O_SET = 256, O_LOG, O_BACKEND, O_CHECK, O_PRINT };
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"set", required_argument, NULL, O_SET},
                                         {"log-level", required_argument, NULL, O_LOG},
                                         {"backend", required_argument, NULL, O_BACKEND},
                                         {"check-config", no_argument, NULL, O_CHECK},
                                         {"print-config", no_argument, NULL, O_PRINT},
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
    tl_daemon_init(d);
    if (tl_daemon_start(d, err, sizeof err) != 0) {
        tl_log(TL_LOG_ERROR, "start_failed", "error=%s", tl_logq(err));
        fprintf(stderr, "tomolived: %s\n", err);
        return 1; /* the OS reclaims the rest; systemd sees the failure */
    }
    uv_run(&d->loop, UV_RUN_DEFAULT);
    tl_daemon_destroy(d);
    free(d->overrides);
    /* A kernel timing the stop left behind (tuning.c) may still use the device: leave
     * without the exit handlers that would tear the GPU runtime down under it. */
    if (atomic_load(&d->tuning.threads) > 0)
        _exit(0);
    return 0;
}
