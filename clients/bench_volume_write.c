/* bench_volume_write.c — `tomolive bench --volume-write`: how fast `tomolive recon` writes a
 * volume, alone: no reading, no GPU, only the output (clients/volume_output.h) that the
 * pipeline's writer thread runs slab after slab, with its conversions, syncs and progress
 * records.
 *
 * One slab of --slab-rows x SIZE x SIZE float32 (a disc with noise, like a reconstructed
 * slice: the values decide what deflate achieves, not what conversion costs) is written
 * --slabs times, as rows 0 .. slabs x slab-rows of a new volume, for each form (HDF5, TIFF
 * stack, multi-page TIFF) and dtype asked, and for HDF5 also deflated (--deflate, on
 * --deflate-slabs slabs: zlib costs tens of CPU seconds per GB). Each measurement is a
 * fresh file, timed from open to close and a syncfs of the directory (so that what a
 * writer leaves in the page cache, as the multi-page TIFF of before does, is counted:
 * every run ends with its file on disk), first by the single-threaded
 * writer of before (spec.serial: the baseline of the same run) and then by the threaded
 * one, alternately, --reps times each, so a machine whose load drifts disturbs both alike.
 * Printed: the median (and the range) of GB/s of the file's samples (rows x SIZE^2 x the
 * dtype's size) and the median CPU seconds per GB (user + system, all threads: getrusage),
 * which says how many cores a rate needs. The disk's own speed is the scale:
 * `dd if=/dev/zero of=FILE bs=16M count=128 oflag=direct`.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "clients/cli.h"
#include "clients/commands.h"
#include "clients/volume_convert.h"
#include "clients/volume_output.h"
#include "clients/volume_pool.h"

#define ME "tomolive bench --volume-write"
#define MAX_REPS 64

static const char usage_text[] =
    "usage: tomolive bench --volume-write [--size N] [--slab-rows H] [--slabs S] [--reps R]\n"
    "                                     [--dtype LIST] [--form LIST] [--deflate L]\n"
    "                                     [--deflate-slabs S] [--threads N] [--dir DIR]\n"
    "                                     [--no-baseline]\n"
    "\n"
    "Writes S slabs of H x N x N float32 samples through recon's volume output (conversion,\n"
    "file format, syncs and progress records) into a new file in DIR, for each form and\n"
    "dtype, first by the single-threaded writer of before (the baseline), then by the\n"
    "threaded one, R times each, alternately, and prints the median GB/s of the file's\n"
    "samples (timed from open to close and a syncfs) and CPU seconds per GB of each, and\n"
    "the speedup.\n"
    "\n"
    "      --size N          slices of N x N (default 2048)\n"
    "      --slab-rows H     slices per slab (default 16)\n"
    "      --slabs S         slabs per file (default 8)\n"
    "      --reps R          runs per measurement and writer (default 3)\n"
    "      --dtype LIST      float32,float16,uint16 (default all; float16 is HDF5 only)\n"
    "      --form LIST       hdf5,tiff,pages (default hdf5,tiff; tiff: a directory of\n"
    "                        slices, pages: one multi-page file)\n"
    "      --deflate L       HDF5 also deflated at level L (default 4; 0: not)\n"
    "      --deflate-slabs S  slabs per deflated file (default 1)\n"
    "      --threads N       the threaded writer's threads (default: as recon, the CPUs\n"
    "                        less 2, 2 .. 16)\n"
    "      --dir DIR         where the files go (default .); each is removed after its run\n"
    "      --no-baseline     the threaded writer only\n";

enum { F32, F16, U16, NDTYPES };
enum { HDF5, TIFF, PAGES, NFORMS };

typedef struct {
    uint32_t size, rows, slabs, zslabs;
    int reps, deflate;
    unsigned threads; /* 0: the output's default */
    bool dtypes[NDTYPES], forms[NFORMS], baseline;
    const char *dir;
} options;

static const char *const dtype_names[NDTYPES] = {"float32", "float16", "uint16"};
static const tl_out_dtype dtypes[NDTYPES] = {TL_OUT_F32, TL_OUT_F16, TL_OUT_U16};
static const char *const form_names[NFORMS] = {"hdf5", "tiff", "pages"};

static bool parse_list(const char *s, const char *const *names, int n, bool *on)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    memset(on, 0, (size_t)n * sizeof *on);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int i = 0;
        while (i < n && strcmp(t, names[i]) != 0)
            i++;
        if (i == n)
            return false;
        on[i] = true;
    }
    return true;
}

static int parse(int argc, char **argv, options *o)
{
    static const struct option longopts[] = {
        {"volume-write", no_argument, NULL, 'W'},
        {"size", required_argument, NULL, 'n'},
        {"slab-rows", required_argument, NULL, 'H'},
        {"slabs", required_argument, NULL, 's'},
        {"reps", required_argument, NULL, 'r'},
        {"dtype", required_argument, NULL, 't'},
        {"form", required_argument, NULL, 'f'},
        {"deflate", required_argument, NULL, 'z'},
        {"deflate-slabs", required_argument, NULL, 'Z'},
        {"threads", required_argument, NULL, 'j'},
        {"dir", required_argument, NULL, 'd'},
        {"no-baseline", no_argument, NULL, 'B'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (options){.size = 2048, .rows = 16, .slabs = 8, .zslabs = 1, .reps = 3, .deflate = 4,
                   .baseline = true, .dir = "."};
    o->dtypes[F32] = o->dtypes[F16] = o->dtypes[U16] = o->forms[HDF5] = o->forms[TIFF] = true;
    optind = 1;
    opterr = 0;
    int c, li = 0;
    long v;
    while ((c = getopt_long(argc, argv, ":h", longopts, &li)) != -1) {
        switch (c) {
            case 'W': break;
            case 'n':
            case 'H':
            case 's':
            case 'Z':
            case 'r':
            case 'z':
            case 'j': {
                long lo = c == 'z' ? 0 : 1;
                long hi = c == 'z' ? 9 : c == 'r' ? MAX_REPS : c == 'j' ? 64 : 65536;
                if (!tl_cli_long(optarg, lo, hi, &v))
                    return tl_cli_fail(ME, 2, "bad value '%s' for --%s (%ld .. %ld)", optarg,
                                       longopts[li].name, lo, hi);
                if (c == 'n')
                    o->size = (uint32_t)v;
                else if (c == 'H')
                    o->rows = (uint32_t)v;
                else if (c == 's')
                    o->slabs = (uint32_t)v;
                else if (c == 'Z')
                    o->zslabs = (uint32_t)v;
                else if (c == 'r')
                    o->reps = (int)v;
                else if (c == 'z')
                    o->deflate = (int)v;
                else
                    o->threads = (unsigned)v;
                break;
            }
            case 't':
                if (!parse_list(optarg, dtype_names, NDTYPES, o->dtypes))
                    return tl_cli_fail(ME, 2, "bad --dtype '%s'", optarg);
                break;
            case 'f':
                if (!parse_list(optarg, form_names, NFORMS, o->forms))
                    return tl_cli_fail(ME, 2, "bad --form '%s'", optarg);
                break;
            case 'd': o->dir = optarg; break;
            case 'B': o->baseline = false; break;
            case 'h': fputs(usage_text, stdout); return 0;
            default:
                return tl_cli_fail(ME, 2, "%s '%s' (see " ME " --help)",
                                   c == ':' ? "option needs a value" : "unknown option",
                                   argv[optind - 1]);
        }
    }
    if (optind < argc)
        return tl_cli_fail(ME, 2, "unexpected argument '%s'", argv[optind]);
    return -1;
}

/* A disc of 0.02 with noise around it, slice after slice (xorshift: the same every run). */
static void fill(float *slab, uint32_t rows, uint32_t size)
{
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    double r2 = 0.2 * size * size;
    for (uint32_t z = 0; z < rows; z++)
        for (uint32_t i = 0; i < size; i++)
            for (uint32_t j = 0; j < size; j++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                double dy = i - size / 2.0, dx = j - size / 2.0, noise = (x >> 40) * 0x1p-24;
                slab[((size_t)z * size + i) * size + j] =
                    (float)((dx * dx + dy * dy < r2 ? 0.02 : 0.0) + 0.002 * (noise - 0.5));
            }
}

/* CPU seconds of the process so far, user and system, all threads. */
static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

static void remove_output(const char *path, int form, uint32_t rows)
{
    if (form != TIFF) {
        unlink(path);
        return;
    }
    char p[1200];
    for (uint32_t z = 0; z < rows; z++) {
        snprintf(p, sizeof p, "%s/slice_%05u.tif", path, z);
        unlink(p);
    }
    snprintf(p, sizeof p, "%s/tomolive-progress", path);
    unlink(p);
    rmdir(path);
}

typedef struct {
    double gbs[MAX_REPS], cpu[MAX_REPS]; /* per run, sorted at the end */
} series;

/* One run: a fresh file, written and closed; its rate and CPU cost into s[r]. */
static int run_once(const options *o, const float *slab, int form, tl_out_dtype dt, int deflate,
                    uint32_t slabs, bool serial, series *s, int r)
{
    char path[1100], err[1024];
    snprintf(path, sizeof path, "%s/tlbench-write%s", o->dir,
             form == HDF5 ? ".h5" : form == TIFF ? "/" : ".tif");
    uint32_t rows = o->rows * slabs;
    double bytes = (double)rows * o->size * o->size * tl_out_dtype_size(dt);
    remove_output(path, form, rows);
    int dfd = open(o->dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) { /* the last run's writeback and removal are not this one's work */
        syncfs(dfd);
        close(dfd);
    }
    tl_volume_output_spec spec = {.path = path,
                                  .rows = rows,
                                  .size = o->size,
                                  .dtype = dt,
                                  .deflate = deflate,
                                  .have_range = true,
                                  .lo = -0.001,
                                  .hi = 0.021,
                                  .job = "tomolive bench --volume-write",
                                  .threads = o->threads,
                                  .serial = serial};
    tl_volume_output out;
    double t0 = tl_cli_now(), c0 = cpu_seconds();
    int rc = tl_volume_output_open(&out, &spec, err, sizeof err);
    for (uint32_t k = 0; rc == 0 && k < slabs; k++)
        rc = tl_volume_output_write(&out, k * o->rows, o->rows, slab, err, sizeof err);
    if (rc == 0)
        rc = tl_volume_output_close(&out, TL_OUTPUT_DONE, err, sizeof err);
    else
        tl_volume_output_close(&out, TL_OUTPUT_REMOVE, NULL, 0);
    if (rc == 0) { /* the file on disk, whatever the writer left in the page cache */
        dfd = open(o->dir, O_RDONLY | O_DIRECTORY);
        if (dfd < 0 || syncfs(dfd) != 0) {
            snprintf(err, sizeof err, "cannot sync '%s': %s", o->dir, strerror(errno));
            rc = -1;
        }
        if (dfd >= 0)
            close(dfd);
    }
    double t = tl_cli_now() - t0, c = cpu_seconds() - c0;
    remove_output(path, form, rows);
    if (rc != 0)
        return tl_cli_fail(ME, 1, "%s", err);
    s->gbs[r] = bytes / t * 1e-9;
    s->cpu[r] = c / (bytes * 1e-9);
    return 0;
}

static void print_series(series *s, int reps)
{
    tl_cli_sort(s->gbs, (size_t)reps);
    tl_cli_sort(s->cpu, (size_t)reps);
    printf(" | %6.3f (%5.3f..%5.3f) | %7.2f", s->gbs[reps / 2], s->gbs[0], s->gbs[reps - 1],
           s->cpu[reps / 2]);
}

/* One row of the table: both writers, alternately, reps runs each. */
static int measure(const options *o, const float *slab, int form, int t, int deflate)
{
    uint32_t slabs = deflate ? o->zslabs : o->slabs;
    series base, mine;
    for (int r = 0; r < o->reps; r++) {
        if (o->baseline &&
            run_once(o, slab, form, dtypes[t], deflate, slabs, true, &base, r) != 0)
            return -1;
        if (run_once(o, slab, form, dtypes[t], deflate, slabs, false, &mine, r) != 0)
            return -1;
    }
    printf("%-5s | %7d | %-7s | %7.1f", form_names[form], deflate, dtype_names[t],
           (double)o->rows * slabs * o->size * o->size * tl_out_dtype_size(dtypes[t]) /
               1048576.0);
    if (o->baseline)
        print_series(&base, o->reps);
    print_series(&mine, o->reps);
    if (o->baseline)
        printf(" | %5.2fx", mine.gbs[o->reps / 2] / base.gbs[o->reps / 2]);
    printf("\n");
    fflush(stdout);
    return 0;
}

int tl_cmd_volume_write_bench(int argc, char **argv)
{
    options o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    size_t n = (size_t)o.rows * o.size * o.size;
    float *slab = malloc(n * sizeof *slab);
    if (!slab)
        return tl_cli_fail(ME, 1, "out of memory for a slab of %zu MiB", n * 4 >> 20);
    fill(slab, o.rows, o.size);
    unsigned threads = o.threads ? o.threads : tl_vpool_default_threads();
    printf("volume write into %s: slabs of %u x %u x %u float32, %u per file (%u deflated); "
           "median (min..max) of %d runs, open to close + syncfs\n",
           o.dir, o.rows, o.size, o.size, o.slabs, o.zslabs, o.reps);
    printf("writers: %s%u threads, conversion %s; %ld CPUs online\n",
           o.baseline ? "serial (the baseline) and " : "", threads, tl_convert_paths(),
           sysconf(_SC_NPROCESSORS_ONLN));
    char head[2][32];
    snprintf(head[0], sizeof head[0], "serial GB/s");
    snprintf(head[1], sizeof head[1], "%u threads GB/s", threads);
    printf("%-5s | %-7s | %-7s | %7s", "form", "deflate", "dtype", "MiB");
    for (int w = o.baseline ? 0 : 1; w < 2; w++)
        printf(" | %-21s | %7s", head[w], "CPU s/GB");
    printf("%s\n", o.baseline ? " | speedup" : "");
    rc = 0;
    for (int f = 0; rc == 0 && f < NFORMS; f++)
        for (int z = 0; rc == 0 && z < (f == HDF5 && o.deflate ? 2 : 1); z++)
            for (int t = 0; rc == 0 && t < NDTYPES; t++)
                if (o.forms[f] && o.dtypes[t] && (f == HDF5 || t != F16))
                    rc = measure(&o, slab, f, t, z ? o.deflate : 0) == 0 ? 0 : 1;
    free(slab);
    return rc;
}
