/* cpu_backend.c — the portable C backend: the engine on the host, multi-threaded.
 *
 * It is the reference every GPU kernel is checked against and the backend the daemon uses
 * where there is no GPU (CI is such a machine). Everything large is allocated in create();
 * store() and backproject() only split work over the thread pool (by detector row and by
 * output row) and run the kernels of kernels_impl.h in float32, or in float64 for the
 * reference mode. FFTW plans are made once per engine.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/base/clock.h"
#include "gpu/base/sort.h"
#include "gpu/cpu/cpu_backend.h"
#include "gpu/cpu/cpu_state.h"

/* FFTW's planner is not thread-safe; engines may be created on several threads. */
pthread_mutex_t tl_cpu_planner_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t available_ram(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    fclose(f);
    return (size_t)kb * 1024;
}

static size_t real_size(const tl_engine_config *c)
{
    return c->precision == TL_PRECISION_F64 ? sizeof(double) : sizeof(float);
}

static tl_status cpu_estimate(const tl_engine_config *c, size_t padded, tl_memory_estimate *m,
                              tl_errbuf *eb)
{
    size_t rs = real_size(c), npix = (size_t)c->rows * c->cols;
    memset(m, 0, sizeof *m);
    m->window_bytes = npix * c->window * rs * (c->keep_measurements ? 2 : 1);
    /* batch sums (double), dark/flat averages and gain, per-thread FFT buffers */
    m->buffer_bytes = 2 * npix * sizeof(double) + 3 * npix * rs + 64 * padded * 2 * rs;
    m->buffer_bytes += tl_cpu_corr_estimate(c);
    if (c->center_estimate)
        m->buffer_bytes += (size_t)tl_center_profiles(c->window) * c->cols * sizeof(float) +
                           64 * (size_t)c->cols * sizeof(double);
    m->total_bytes = m->window_bytes + m->buffer_bytes;
    m->available_bytes = available_ram();
    return TL_OK;
}

static void cpu_destroy(void *state)
{
    tl_cpu_state *s = state;
    if (!s)
        return;
    if (s->pool)
        tl_pool_destroy(s->pool);
    tl_cpu_it_end(s);
    tl_cpu_corr_destroy(s);
    tl_cpu_profile_destroy(s);
    pthread_mutex_lock(&tl_cpu_planner_lock);
    if (s->r2c_f)
        fftwf_destroy_plan(s->r2c_f);
    if (s->c2r_f)
        fftwf_destroy_plan(s->c2r_f);
    if (s->r2c_d)
        fftw_destroy_plan(s->r2c_d);
    if (s->c2r_d)
        fftw_destroy_plan(s->c2r_d);
    pthread_mutex_unlock(&tl_cpu_planner_lock);
    for (int i = 0; i < s->nthreads; i++) {
        if (s->pad)
            fftw_free(s->pad[i]);
        if (s->spec)
            fftw_free(s->spec[i]);
        if (s->rowbuf)
            free(s->rowbuf[i]);
    }
    free(s->pad);
    free(s->spec);
    free(s->rowbuf);
    for (int k = 0; k < s->nacc; k++)
        free(s->acc[k]);
    free(s->acc);
    free(s->acc_size);
    free(s->window);
    free(s->meas);
    for (int k = 0; k < 2; k++) {
        free(s->sum[k]);
        free(s->avg[k]);
    }
    free(s->gain);
    free(s->response);
    free(s);
}

static void *alloc_counted(tl_cpu_state *s, size_t bytes)
{
    void *p = calloc(1, bytes ? bytes : 1);
    if (p)
        s->mem += bytes;
    return p;
}

static tl_status cpu_create(const tl_engine_config *c, size_t padded, tl_errbuf *eb, void **state)
{
    tl_cpu_state *s = calloc(1, sizeof *s);
    if (!s)
        return tl_fail(eb, TL_ENOMEM, "out of memory");
    s->cfg = *c;
    s->eb = eb;
    s->f64 = c->precision == TL_PRECISION_F64;
    s->real_size = real_size(c);
    s->padded = padded;
    s->rows = c->rows;
    s->cols = c->cols;
    s->n = c->window;
    size_t npix = (size_t)c->rows * c->cols, rs = s->real_size;

    s->pool = tl_pool_create(c->threads);
    if (!s->pool) {
        cpu_destroy(s);
        return tl_fail(eb, TL_ENOMEM, "cannot start the CPU backend's threads");
    }
    s->nthreads = tl_pool_size(s->pool);
    snprintf(s->device_name, sizeof s->device_name, "CPU (%d threads%s)", s->nthreads,
             s->f64 ? ", float64" : "");

    s->window = alloc_counted(s, npix * s->n * rs);
    if (c->keep_measurements)
        s->meas = alloc_counted(s, npix * s->n * rs);
    for (int k = 0; k < 2; k++) {
        s->sum[k] = alloc_counted(s, npix * sizeof(double));
        s->avg[k] = alloc_counted(s, npix * rs);
    }
    s->gain = alloc_counted(s, npix * rs);
    s->response = alloc_counted(s, (padded / 2 + 1) * rs);
    s->pad = calloc((size_t)s->nthreads, sizeof *s->pad);
    s->spec = calloc((size_t)s->nthreads, sizeof *s->spec);
    s->rowbuf = calloc((size_t)s->nthreads, sizeof *s->rowbuf);
    if (!s->window || (c->keep_measurements && !s->meas) || !s->sum[0] || !s->sum[1] ||
        !s->avg[0] || !s->avg[1] || !s->gain || !s->response || !s->pad || !s->spec ||
        !s->rowbuf) {
        size_t need = npix * s->n * rs * (c->keep_measurements ? 2 : 1);
        cpu_destroy(s);
        return tl_fail(eb, TL_ENOMEM, "cannot allocate %.2f GiB for the window in host memory",
                       need / 1073741824.0);
    }
    for (int i = 0; i < s->nthreads; i++) {
        s->pad[i] = fftw_malloc(padded * rs);
        s->spec[i] = fftw_malloc((padded / 2 + 1) * 2 * rs);
        if (!s->pad[i] || !s->spec[i]) {
            cpu_destroy(s);
            return tl_fail(eb, TL_ENOMEM, "fftw_malloc failed for the filter buffers");
        }
        s->mem += padded * rs * 2;
    }

    /* Plans are made on thread 0's buffers and executed on every thread's own buffers with
     * the new-array interface (same size and fftw_malloc alignment). */
    pthread_mutex_lock(&tl_cpu_planner_lock);
    if (s->f64) {
        s->r2c_d = fftw_plan_dft_r2c_1d((int)padded, s->pad[0], s->spec[0], FFTW_ESTIMATE);
        s->c2r_d = fftw_plan_dft_c2r_1d((int)padded, s->spec[0], s->pad[0], FFTW_ESTIMATE);
    } else {
        s->r2c_f = fftwf_plan_dft_r2c_1d((int)padded, s->pad[0], s->spec[0], FFTW_ESTIMATE);
        s->c2r_f = fftwf_plan_dft_c2r_1d((int)padded, s->spec[0], s->pad[0], FFTW_ESTIMATE);
    }
    pthread_mutex_unlock(&tl_cpu_planner_lock);
    if (s->f64 ? !s->r2c_d || !s->c2r_d : !s->r2c_f || !s->c2r_f) {
        cpu_destroy(s);
        return tl_fail(eb, TL_EINTERNAL, "FFTW could not plan a %zu-point transform", padded);
    }
    tl_status st = tl_cpu_corr_create(s);
    if (st == TL_OK)
        st = tl_cpu_profile_create(s);
    if (st != TL_OK) {
        cpu_destroy(s);
        return st;
    }
    *state = s;
    return TL_OK;
}

static tl_status cpu_set_filter(void *state, const double *H)
{
    tl_cpu_state *s = state;
    s->filter_on = H != NULL;
    if (!H)
        return TL_OK;
    for (size_t k = 0; k <= s->padded / 2; k++) {
        double v = H[k] / (double)s->padded;
        if (s->f64)
            ((double *)s->response)[k] = v;
        else
            ((float *)s->response)[k] = (float)v;
    }
    return TL_OK;
}

static tl_status cpu_calib_reset(void *state, tl_frame_kind kind)
{
    tl_cpu_state *s = state;
    memset(s->sum[kind == TL_FRAME_DARK ? 0 : 1], 0, (size_t)s->rows * s->cols * sizeof(double));
    return TL_OK;
}

static tl_status check_host(tl_cpu_state *s, const tl_frame *f)
{
    if (f->memory != TL_MEMORY_HOST)
        return tl_fail(s->eb, TL_EUNSUPPORTED,
                       "the CPU backend takes frames in host memory only (use the CUDA backend "
                       "for device-resident frames)");
    return TL_OK;
}

typedef struct {
    tl_cpu_state *s;
    const tl_frame *f;
    int kind;
    uint32_t count, slot;
    const tl_bp_job *job;
    tl_cpu_dst dst; /* back projection: where rows go */
    const int *ids; /* ... the accumulators of these slice ids */
} job_ctx;

/* Small jobs run on the calling thread: waking the pool costs tens of microseconds, more
 * than an incremental update of a small slice or a small frame is worth. */
#define TL_CPU_INLINE_WORK 200000.0 /* operations, roughly */

void tl_cpu_run_jobs(tl_cpu_state *s, size_t njobs, double work, tl_pool_fn fn, void *ctx)
{
    if (work < TL_CPU_INLINE_WORK) {
        for (size_t j = 0; j < njobs; j++)
            fn(ctx, j, 0);
        return;
    }
    tl_pool_run(s->pool, njobs, fn, ctx);
}

static void calib_job(void *ctx, size_t row, int thread)
{
    job_ctx *j = ctx;
    if (j->s->f64)
        tl_cpu_calib_row_f64(j->s, j->f, j->kind, j->count, (uint32_t)row);
    else
        tl_cpu_calib_row_f32(j->s, j->f, j->kind, j->count, (uint32_t)row);
}

static tl_status cpu_calib_add(void *state, const tl_frame *f, uint32_t count)
{
    tl_cpu_state *s = state;
    tl_status st = check_host(s, f);
    if (st != TL_OK)
        return st;
    job_ctx j = {.s = s, .f = f, .kind = f->kind == TL_FRAME_DARK ? 0 : 1, .count = count};
    tl_cpu_run_jobs(s, s->rows, (double)s->rows * s->cols, calib_job, &j);
    s->have[j.kind] = true;
    return TL_OK;
}

static void store_job(void *ctx, size_t row, int thread)
{
    job_ctx *j = ctx;
    if (j->s->f64)
        tl_cpu_store_row_f64(j->s, j->f, j->slot, (uint32_t)row, thread);
    else
        tl_cpu_store_row_f32(j->s, j->f, j->slot, (uint32_t)row, thread);
}

static tl_status cpu_store(void *state, const tl_frame *f, uint32_t slot)
{
    tl_cpu_state *s = state;
    tl_status st = check_host(s, f);
    if (st != TL_OK)
        return st;
    if (s->corr_on)
        st = tl_cpu_corr_store(s, f, slot);
    else {
        job_ctx j = {.s = s, .f = f, .slot = slot};
        tl_cpu_run_jobs(s, s->rows, (double)s->rows * s->padded * 8, store_job, &j);
    }
    tl_cpu_profile_finish(s);
    return st;
}

/* Job k is output row r of slice i, with k running over the rows of all slices. */
static void bp_job(void *ctx, size_t k, int thread)
{
    job_ctx *j = ctx;
    const tl_bp_job *job = j->job;
    size_t i = 0;
    while (k >= job->slices[i].height)
        k -= job->slices[i++].height;
    double *acc = j->dst == TL_CPU_OUT ? NULL : j->s->acc[j->ids[i]];
    if (job->geometry == TL_GEOMETRY_CONE && j->s->f64)
        tl_cpu_bp_cone_row_f64(j->s, &job->slices[i], (uint32_t)k, job->proj, job->nproj,
                               thread, j->dst, acc);
    else if (job->geometry == TL_GEOMETRY_CONE)
        tl_cpu_bp_cone_row_f32(j->s, &job->slices[i], (uint32_t)k, job->proj, job->nproj,
                               thread, j->dst, acc);
    else if (j->s->f64)
        tl_cpu_bp_row_f64(j->s, &job->slices[i], (uint32_t)k, job->proj, job->nproj, thread,
                          j->dst, acc);
    else
        tl_cpu_bp_row_f32(j->s, &job->slices[i], (uint32_t)k, job->proj, job->nproj, thread,
                          j->dst, acc);
}

/* Runs the back projection of job over the pool, rows going to dst. */
static tl_status run_bp(tl_cpu_state *s, tl_bp_job *job, tl_cpu_dst dst, const int *ids)
{
    size_t rows = 0, width = 0;
    for (size_t i = 0; i < job->nslices; i++) {
        rows += job->slices[i].height;
        if (job->slices[i].width > width)
            width = job->slices[i].width;
    }
    if (width > s->row_cap) {
        /* per-thread row buffers grow only when a wider slice appears */
        for (int t = 0; t < s->nthreads; t++) {
            void *a = realloc(s->rowbuf[t], width * s->real_size);
            if (!a)
                return tl_fail(s->eb, TL_ENOMEM, "out of memory for a %zu-wide slice", width);
            s->rowbuf[t] = a;
        }
        s->mem += (width - s->row_cap) * s->real_size * (size_t)s->nthreads;
        s->row_cap = width;
    }
    job_ctx j = {.s = s, .job = job, .dst = dst, .ids = ids};
    tl_cpu_run_jobs(s, rows, (double)width * rows * job->nproj, bp_job, &j);
    job->kernel = dst == TL_CPU_ACC_ADD ? (s->f64 ? "cpu-f64-incremental" : "cpu-f32-incremental")
                                        : (s->f64 ? "cpu-f64" : "cpu-f32");
    return TL_OK;
}

static tl_status cpu_backproject(void *state, tl_bp_job *job)
{
    return run_bp(state, job, TL_CPU_OUT, NULL);
}

/* ---- accumulators of tracked slices -------------------------------------------------------- */

/* Accumulators are double whatever the precision (cpu_state.h); read-outs round to float. */

static tl_status cpu_acc_alloc(void *state, int id, uint32_t h, uint32_t w)
{
    tl_cpu_state *s = state;
    if (id >= s->nacc) {
        int n = id + 8;
        double **a = realloc(s->acc, (size_t)n * sizeof *a);
        if (a)
            s->acc = a;
        size_t *z = realloc(s->acc_size, (size_t)n * sizeof *z);
        if (z)
            s->acc_size = z;
        if (!a || !z)
            return tl_fail(s->eb, TL_ENOMEM, "out of memory for accumulators");
        for (int k = s->nacc; k < n; k++) {
            s->acc[k] = NULL;
            s->acc_size[k] = 0;
        }
        s->nacc = n;
    }
    free(s->acc[id]);
    s->acc[id] = malloc((size_t)h * w * sizeof **s->acc);
    s->acc_size[id] = s->acc[id] ? (size_t)h * w : 0;
    if (!s->acc[id])
        return tl_fail(s->eb, TL_ENOMEM, "out of memory for a %u x %u accumulator", h, w);
    return TL_OK;
}

static void cpu_acc_free(void *state, int id)
{
    tl_cpu_state *s = state;
    if (id < s->nacc) {
        free(s->acc[id]);
        s->acc[id] = NULL;
        s->acc_size[id] = 0;
    }
}

static tl_status cpu_acc_update(void *state, tl_bp_job *job, const int *ids, bool add)
{
    if (!add)
        return run_bp(state, job, TL_CPU_ACC_SET, ids);
    /* one projection at a time: the row kernel sums a job's projections in REAL before
     * adding to the double accumulator, and a projection must be rounded on its own to
     * cancel exactly when it is removed in another batch (gpu/track.c) */
    tl_bp_job one = *job;
    one.nproj = 1;
    for (size_t k = 0; k < job->nproj; k++) {
        one.proj = &job->proj[k];
        tl_status st = run_bp(state, &one, TL_CPU_ACC_ADD, ids);
        if (st != TL_OK)
            return st;
        job->kernel = one.kernel;
    }
    return TL_OK;
}

static tl_status cpu_acc_read(void *state, const int *ids, size_t n, float *const *out)
{
    tl_cpu_state *s = state;
    for (size_t k = 0; k < n; k++) {
        /* the size is the slice's, which the engine allocated the accumulator with */
        size_t cnt = s->acc_size[ids[k]];
        const double *a = s->acc[ids[k]];
        for (size_t i = 0; i < cnt; i++)
            out[k][i] = (float)a[i];
    }
    return TL_OK;
}

static size_t cpu_kernels(const void *state, tl_kernel_info *out, size_t cap)
{
    const tl_cpu_state *s = state;
    if (cap > 0)
        out[0] = (tl_kernel_info){s->f64 ? "cpu-f64" : "cpu-f32", TL_QUALITY_EXACT, true, 1,
                                  "pixel-driven, slice-parallel threads, exact linear"};
    return 1;
}

/* Median of reps timed calls of fn after one warm-up call. */
static double median_ms(int reps, tl_status (*fn)(void *), void *ctx, tl_status *st)
{
    double *t = malloc((size_t)reps * sizeof *t);
    if (!t) {
        *st = TL_ENOMEM;
        return 0;
    }
    *st = fn(ctx);
    for (int r = 0; r < reps && *st == TL_OK; r++) {
        uint64_t t0 = tl_clock_ns();
        *st = fn(ctx);
        t[r] = (double)(tl_clock_ns() - t0) * 1e-6;
    }
    tl_sort_doubles(t, (size_t)reps);
    double m = t[reps / 2];
    free(t);
    return m;
}

typedef struct {
    tl_cpu_state *s;
    tl_bp_job *job;
    const tl_frame *f;
} bench_ctx;

static tl_status bench_bp(void *ctx)
{
    bench_ctx *b = ctx;
    return cpu_backproject(b->s, b->job);
}

static tl_status cpu_bench(void *state, tl_bp_job *job, int reps, tl_bench_row *rows, size_t cap,
                           size_t *n)
{
    tl_cpu_state *s = state;
    /* the benchmark writes into scratch outputs, the caller gave none */
    size_t total = 0;
    for (size_t i = 0; i < job->nslices; i++)
        total += (size_t)job->slices[i].height * job->slices[i].width;
    float *scratch = malloc(total * sizeof *scratch);
    tl_bp_slice *sl = malloc(job->nslices * sizeof *sl);
    if (!scratch || !sl) {
        free(scratch);
        free(sl);
        return tl_fail(s->eb, TL_ENOMEM, "out of memory for benchmark outputs");
    }
    size_t off = 0;
    double updates = 0;
    for (size_t i = 0; i < job->nslices; i++) {
        sl[i] = job->slices[i];
        sl[i].out = scratch + off;
        off += (size_t)sl[i].height * sl[i].width;
        updates += (double)sl[i].height * sl[i].width * job->nproj;
    }
    tl_bp_job j = *job;
    j.slices = sl;
    bench_ctx b = {.s = s, .job = &j};
    tl_status st;
    double ms = median_ms(reps, bench_bp, &b, &st);
    free(scratch);
    free(sl);
    if (st != TL_OK)
        return st;
    *n = 1;
    if (cap > 0)
        rows[0] = (tl_bench_row){j.kernel, TL_QUALITY_EXACT, ms, updates / (ms * 1e-3)};
    return TL_OK;
}

static tl_status bench_one_store(void *ctx)
{
    bench_ctx *b = ctx;
    return cpu_store(b->s, b->f, 0);
}

/* Times store() into slot 0, then puts slot 0 back as it was. */
static tl_status cpu_bench_store(void *state, const tl_frame *f, int reps, double *ms)
{
    tl_cpu_state *s = state;
    size_t row_bytes = (size_t)s->cols * s->real_size;
    char *saved = malloc(row_bytes * s->rows);
    if (!saved)
        return tl_fail(s->eb, TL_ENOMEM, "out of memory for the benchmark");
    for (uint32_t r = 0; r < s->rows; r++)
        memcpy(saved + r * row_bytes, (char *)s->window + (size_t)r * s->n * row_bytes, row_bytes);
    bench_ctx b = {.s = s, .f = f};
    tl_status st;
    *ms = median_ms(reps, bench_one_store, &b, &st);
    for (uint32_t r = 0; r < s->rows; r++)
        memcpy((char *)s->window + (size_t)r * s->n * row_bytes, saved + r * row_bytes, row_bytes);
    free(saved);
    return st;
}

static size_t cpu_memory_used(const void *state)
{
    return ((const tl_cpu_state *)state)->mem;
}

static const char *cpu_device_name(const void *state)
{
    return ((const tl_cpu_state *)state)->device_name;
}

static void cpu_device_id(const void *state, tl_device_id *id)
{
    const tl_cpu_state *s = state;
    snprintf(id->name, sizeof id->name, "%s", s->device_name);
    snprintf(id->uuid, sizeof id->uuid, "cpu");
    id->sm_count = s->nthreads;
}

void tl_cpu_fftw_plan_lock(void)
{
    pthread_mutex_lock(&tl_cpu_planner_lock);
}

void tl_cpu_fftw_plan_unlock(void)
{
    pthread_mutex_unlock(&tl_cpu_planner_lock);
}

const tl_backend_ops tl_cpu_backend = {
    .name = "cpu",
    .estimate = cpu_estimate,
    .create = cpu_create,
    .destroy = cpu_destroy,
    .set_filter = cpu_set_filter,
    .calib_reset = cpu_calib_reset,
    .calib_add = cpu_calib_add,
    .store = cpu_store,
    .backproject = cpu_backproject,
    .memory_used = cpu_memory_used,
    .device_name = cpu_device_name,
    .acc_alloc = cpu_acc_alloc,
    .acc_free = cpu_acc_free,
    .acc_update = cpu_acc_update,
    .acc_read = cpu_acc_read,
    .kernels = cpu_kernels,
    .bench = cpu_bench,
    .bench_store = cpu_bench_store,
    .device_id = cpu_device_id,
    .hw_rates = NULL, /* the micro-benchmarks are of GPU units */
    .set_phase = tl_cpu_set_phase,
    .corr_counts = tl_cpu_corr_counts,
    .stage_times = tl_cpu_stage_times,
    .ring_update = tl_cpu_ring_update,
    .set_column_weights = tl_cpu_set_column_weights,
    .set_pixel_weights = tl_cpu_set_pixel_weights,
    .profile_slot = tl_cpu_profile_slot,
    .profiles = tl_cpu_profiles,
    .it_begin = tl_cpu_it_begin,
    .it_image = tl_cpu_it_image,
    .it_forward = tl_cpu_it_forward,
    .it_backward = tl_cpu_it_backward,
    .it_mark = tl_cpu_it_mark,
    .it_regularise = tl_cpu_it_regularise,
    .it_end = tl_cpu_it_end,
};
