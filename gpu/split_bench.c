/* split_bench.c — benchmarks of a split engine: every part times its share at once, on
 * its own device, and the time is the slowest part's (when the whole job is done). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "gpu/base/sort.h"
#include "gpu/split_impl.h"

/* The slowest busy part's time for kernel `name` in the last OP_BENCH; false when a busy
 * part could not run it. */
static bool slowest(const tl_split *sp, const char *name, tl_bench_row *row)
{
    bool found = false;
    for (uint32_t k = 0; k < sp->np; k++) {
        const tl_split_part *p = &sp->p[k];
        if (!tl_split_busy(sp, k))
            continue;
        size_t m = 0;
        while (m < p->nrows && strcmp(p->rows[m].kernel, name) != 0)
            m++;
        if (m == p->nrows)
            return false;
        if (!found || p->rows[m].ms > row->ms)
            *row = p->rows[m];
        found = true;
    }
    return found;
}

/* Kernel by kernel (part 0's list, or the forced one), every part times its share of the
 * job at once, on its own device, after a warm-up; the kernel's time is the slowest
 * part's, which is when the whole job is done. A kernel counts only if every part with a
 * share could run it. */
tl_status tl_split_bench(void *state, tl_bp_job *job, int reps, tl_bench_row *rows, size_t cap,
                         size_t *n)
{
    tl_split *sp = state;
    *n = 0;
    tl_status st = tl_split_route(sp, job->slices, job->nslices, NULL);
    if (st != TL_OK)
        return st;
    double updates = 0;
    for (size_t i = 0; i < job->nslices; i++)
        updates += (double)job->slices[i].height * job->slices[i].width * (double)job->nproj;
    tl_kernel_info kern[TL_SPLIT_BENCH_ROWS];
    bool forced = job->force && job->force[0];
    size_t nk = forced ? 1 : tl_split_kernels(sp, kern, TL_SPLIT_BENCH_ROWS);
    tl_bp_job j = *job;
    sp->job = &j;
    sp->reps = reps;
    for (size_t i = 0; i < nk && i < TL_SPLIT_BENCH_ROWS && *n < cap; i++) {
        if (!forced)
            j.force = kern[i].name;
        st = tl_split_run(sp, OP_BENCH);
        if (st != TL_OK)
            return st;
        tl_bench_row row;
        if (!slowest(sp, j.force, &row))
            continue;
        row.updates_per_s = row.ms > 0 ? updates / (row.ms * 1e-3) : 0;
        rows[(*n)++] = row;
    }
    job->kernel = *n ? rows[0].kernel : "none";
    return TL_OK;
}

/* Every part stores its rows of the frame at once, and the frame is stored when the
 * slowest part is done: that is the per-frame time (the ingest capacity). Each repetition
 * starts all parts together (each times one call after its own warm-up), so their work
 * overlaps as it does in a stream, also where parts share a GPU or a bus; the result is the
 * median over repetitions of the slowest part's time. */
tl_status tl_split_bench_store(void *state, const tl_frame *f, int reps, double *ms)
{
    tl_split *sp = state;
    *ms = 0;
    double *t = malloc((size_t)reps * sizeof *t);
    if (!t)
        return tl_fail(sp->eb, TL_ENOMEM, "out of memory for %d timings", reps);
    sp->f = f;
    sp->reps = 1;
    tl_status st = TL_OK;
    for (int r = 0; r < reps && st == TL_OK; r++) {
        st = tl_split_run(sp, OP_BENCH_STORE);
        t[r] = 0;
        for (uint32_t k = 0; k < sp->np; k++)
            t[r] = sp->p[k].ms > t[r] ? sp->p[k].ms : t[r];
    }
    if (st == TL_OK) {
        tl_sort_doubles(t, (size_t)reps);
        *ms = t[reps / 2];
    }
    free(t);
    return st;
}
