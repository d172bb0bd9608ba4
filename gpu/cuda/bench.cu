/* bench.cu — the benchmarks behind `tomolive bench` (engine.h, tl_engine_bench and
 * tl_engine_bench_store), following ARCHITECTURE.md §4.2 and §6.2 AP-1:
 * CUDA events around the timed work only, one warm-up call, the median of reps calls,
 * no host I/O. Back projection writes into the device output buffer and never copies
 * back; the store path writes into a scratch slot, so the window is not disturbed.
 */
#include "config.h"

#include "gpu/base/backend.h"
#include "gpu/base/sort.h"

#include <stdlib.h>

#include "gpu/cuda/kernels.cuh"

double tl_cuda_median(double *t, int n)
{
    tl_sort_doubles(t, (size_t)n);
    return t[n / 2];
}

/* Milliseconds between s->t0 and s->t1, once t1 has completed. */
static tl_status elapsed_ms(tl_cuda_state *s, double *ms)
{
    float e = 0.f;
    TL_CUDA(s->eb, cudaEventSynchronize(s->t1));
    TL_CUDA(s->eb, cudaEventElapsedTime(&e, s->t0, s->t1));
    *ms = e;
    return TL_OK;
}

/* Times job with kernel k forced for every slice (batched as backproject() would). */
static tl_status time_kernel(tl_cuda_state *s, const tl_bp_job *job, int k, int reps, double *t,
                             double *ms)
{
    bool constant;
    TL_TRY(tl_cuda_job_choose(s, job, k, &constant));
    tl_cuda_constant_guard guard(constant, s->device);
    TL_TRY(tl_cuda_job_launch(s, job)); /* warm-up */
    TL_CUDA(s->eb, cudaStreamSynchronize(s->stream));
    for (int r = 0; r < reps; r++) {
        TL_CUDA(s->eb, cudaEventRecord(s->t0, s->stream));
        TL_TRY(tl_cuda_job_launch(s, job));
        TL_CUDA(s->eb, cudaEventRecord(s->t1, s->stream));
        TL_TRY(elapsed_ms(s, &t[r]));
    }
    *ms = tl_cuda_median(t, reps);
    return TL_OK;
}

/* Every kernel able to serve all slices of the job (or only job->force when set), in
 * tl_engine_kernels order; *n is the number of rows written (at most cap). */
tl_status tl_cuda_op_bench(void *state, tl_bp_job *job, int reps, tl_bench_row *rows, size_t cap,
                           size_t *n)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    *n = 0;
    TL_TRY(tl_cuda_use_device(s));
    TL_TRY(tl_cuda_flush(s)); /* the held frames first (store.cu) */
    TL_TRY(tl_cuda_cone_stack_sync(s));
    if (reps < 1)
        reps = 1;
    double updates = 0;
    for (size_t i = 0; i < job->nslices; i++)
        updates += (double)job->slices[i].height * job->slices[i].width * (double)job->nproj;
    int only = tl_cuda_kernel_find(job->force);
    if (job->force && job->force[0] && only < 0)
        return tl_fail(s->eb, TL_EINVAL, "the cuda backend has no kernel \"%s\"", job->force);
    TL_TRY(tl_cuda_job_reserve(s, job->nslices));
    TL_TRY(tl_cuda_job_prepare(s, job));
    double *t = (double *)malloc((size_t)reps * sizeof *t);
    if (!t)
        return tl_fail(s->eb, TL_ENOMEM, "out of memory for %d timings", reps);
    tl_status st = TL_OK;
    for (int k = 0; k < tl_cuda_kernel_count() && st == TL_OK && *n < cap && job->nslices > 0;
         k++) {
        if (only >= 0 && k != only)
            continue;
        const tl_cuda_kernel *kern = tl_cuda_kernel_at(k);
        char why[256];
        bool serves = true;
        for (size_t i = 0; i < job->nslices && serves; i++)
            serves = tl_cuda_can_serve(s, kern, &job->slices[i], job, why, sizeof why);
        if (!serves && only >= 0) { /* the one asked for: say why */
            st = tl_fail(s->eb, TL_EUNSUPPORTED, "%s", why);
            break;
        }
        if (!serves)
            continue;
        double ms = 0;
        st = time_kernel(s, job, k, reps, t, &ms);
        if (st != TL_OK)
            break;
        rows[*n].kernel = kern->name;
        rows[*n].quality = kern->quality;
        rows[*n].ms = ms;
        rows[*n].updates_per_s = ms > 0 ? updates / (ms * 1e-3) : 0;
        job->kernel = kern->name;
        (*n)++;
    }
    free(t);
    return st;
}

/* Upload from pinned memory (host frames; device frames are read in place, or copied from
 * another GPU, which is timed too), conversion,
 * correction, -log and filter into a scratch slot. The host-side copy into the pinned
 * buffer happens once, before timing. */
tl_status tl_cuda_op_bench_store(void *state, const tl_frame *f, int reps, double *ms)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    *ms = 0;
    TL_TRY(tl_cuda_use_device(s));
    TL_TRY(tl_cuda_flush(s)); /* the held frames first (store.cu) */
    if (reps < 1)
        reps = 1;
    const char *src = NULL;
    size_t pitch = 0;
    TL_TRY(tl_cuda_stage(s, f, &src, &pitch));
    bool host = f->memory == TL_MEMORY_HOST;
    /* a device frame on another GPU was copied into a peer buffer by stage(): timed again
     * below, into the same buffer */
    bool peer = !host && src != (const char *)f->data;
    size_t row = (size_t)s->cols * s->dsize, fpitch = f->pitch ? f->pitch : row;
    unsigned ring = (s->ring_next - 1) % TL_CUDA_RING; /* the buffer stage() just filled */
    size_t bytes = (size_t)s->rows * s->cols * s->dsize;
    double *t = (double *)malloc((size_t)(reps + 1) * sizeof *t);
    if (!t)
        return tl_fail(s->eb, TL_ENOMEM, "out of memory for %d timings", reps);
    tl_status st = TL_OK;
    for (int r = 0; r <= reps && st == TL_OK; r++) { /* r = 0: warm-up */
        cudaError_t e = cudaEventRecord(s->t0, s->stream);
        if (e == cudaSuccess && host)
            e = cudaMemcpyAsync(s->raw, s->pinned[ring], bytes, cudaMemcpyHostToDevice, s->stream);
        if (e == cudaSuccess && peer)
            e = cudaMemcpy2DAsync((void *)src, row, f->data, fpitch, row, s->rows,
                                  cudaMemcpyDefault, s->stream);
        if (e != cudaSuccess) {
            st = tl_cuda_fail_call(s->eb, e, "cudaMemcpyAsync (timed upload)", __FILE__, __LINE__);
            break;
        }
        st = tl_cuda_process(s, src, pitch, f->dtype, s->scratch, NULL, s->pitch_el, false);
        if (st == TL_OK) {
            e = cudaEventRecord(s->t1, s->stream);
            st = e == cudaSuccess
                     ? elapsed_ms(s, &t[r])
                     : tl_cuda_fail_call(s->eb, e, "cudaEventRecord", __FILE__, __LINE__);
        }
    }
    if (host && st == TL_OK) {
        cudaError_t e =
            cudaEventRecord(s->ring_ev[ring], s->stream); /* buffer in use until here */
        if (e != cudaSuccess)
            st = tl_cuda_fail_call(s->eb, e, "cudaEventRecord", __FILE__, __LINE__);
    }
    if (st == TL_OK)
        st = tl_cuda_staged_read(s);
    if (st == TL_OK)
        *ms = tl_cuda_median(t + 1, reps);
    free(t);
    return st;
}
