/* grid_calibrate.c — the rates of seed 004's model (grid_model.h), measured on a sample
 * of this rank's own problem: its pipeline on the first slabs, a reduction over its grid
 * row, a slab written and synced beside the output. */
#include "config.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clients/cli.h"
#include "clients/grid_model.h"

#define PROBE_MIN ((size_t)16 << 20)  /* bytes the store probe writes, at least */
#define PROBE_MAX ((size_t)256 << 20) /* ... and at most */
#define SYNC_PROBES 4                 /* small writes timed with their sync */

/* Writes `bytes` beside the output and syncs them: the store rate (bytes/s); and the
 * seconds a small write and its sync take (*sync), as the output syncs every slab. */
static double store_rate(const tl_grid *g, const char *output, size_t bytes, double *sync,
                         char *err, size_t errlen)
{
    char path[1200];
    size_t n = output ? strlen(output) : 0;
    while (n > 1 && output[n - 1] == '/') /* a TIFF stack's directory: beside it */
        n--;
    snprintf(path, sizeof path, "%.*s%s.tomolive-probe-%d", (int)n, output ? output : "",
             output ? "" : "tomolive", g->rank);
    bytes = bytes < PROBE_MIN ? PROBE_MIN : bytes > PROBE_MAX ? PROBE_MAX : bytes;
    char *buf = calloc(1, bytes);
    int fd = buf ? open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644) : -1;
    if (fd < 0) {
        free(buf);
        tl_cli_errf(err, errlen, "the store probe: cannot write '%s'", path);
        return -1;
    }
    for (size_t i = 0; i < bytes; i += 4096) /* not a sparse file */
        buf[i] = (char)(i >> 12);
    double t0 = tl_cli_now();
    size_t done = 0;
    ssize_t w = 1;
    while (done < bytes && (w = write(fd, buf + done, bytes - done)) > 0)
        done += (size_t)w;
    bool ok = done == bytes && fdatasync(fd) == 0;
    double s = tl_cli_now() - t0;
    double syncs[SYNC_PROBES];
    for (int i = 0; ok && i < SYNC_PROBES; i++) {
        double t1 = tl_cli_now();
        ok = pwrite(fd, buf, 4096, (off_t)i * 4096) == 4096 && fdatasync(fd) == 0;
        syncs[i] = tl_cli_now() - t1;
    }
    *sync = ok ? tl_cli_median(syncs, SYNC_PROBES) : 0;
    close(fd);
    unlink(path);
    free(buf);
    if (!ok) {
        tl_cli_errf(err, errlen, "the store probe: cannot write %zu MiB to '%s'", bytes >> 20,
                    path);
        return -1;
    }
    return s > 0 ? bytes / s : 0;
}

int tl_grid_calibrate(tl_grid *g, const tl_volume_job *job, const char *output, tl_grid_rates *r,
                      char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    const tl_volume_plan *plan = job->plan;
    const size_t npx = (size_t)job->size * job->size;
    /* the sample: the first slab from every projection, nothing written; with whole
     * frames (filled once for every slab) from the first TL_GRID_SAMPLE_PROJ */
    tl_volume_job sample = *job;
    uint32_t proj = job->whole_frames ? TL_GRID_SAMPLE_PROJ : job->count[TL_FRAME_PROJ];
    sample.rows = plan->slab_rows < job->rows ? plan->slab_rows : job->rows;
    sample.count[TL_FRAME_PROJ] =
        proj < job->count[TL_FRAME_PROJ] ? proj : job->count[TL_FRAME_PROJ];
    sample.first_row = 0;
    sample.out = NULL;
    sample.combine = NULL;
    sample.progress = TL_PROGRESS_NONE;
    sample.verbose = false;
    sample.engine.center_estimate = false;
    tl_volume_times t;
    char why[1024];
    bool ok = tl_volume_run(&sample, &t, why, sizeof why) == TL_VOLUME_DONE;
    if (ok) {
        r->load = t.read > 0 ? t.bytes_read / t.read : 0; /* bytes handed to the engine */
        r->filter = t.submit > 0 ? t.bytes_read / t.submit : 0;
        double updates = (double)sample.rows * npx * sample.count[TL_FRAME_PROJ];
        r->bp = t.backproject > 0 ? updates / t.backproject : 0;
    }
    /* every rank reaches the reduction probe, whatever its sample did */
    size_t slab = (size_t)plan->slab_rows * npx * sizeof(float);
    if (g->cols > 1)
        r->reduce = tl_grid_reduce_rate(g, slab);
    if (!ok)
        return tl_cli_errf(err, errlen, "the model's sample run: %s", why);
    if (g->col == 0) {
        double rate = store_rate(g, output, slab, &r->sync, err, errlen);
        if (rate < 0)
            return -1;
        r->store = rate;
    }
    return 0;
}
