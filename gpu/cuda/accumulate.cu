/* accumulate.cu — accumulators of tracked slices on the GPU (backend.h acc_*; engine.h
 * tl_engine_track): the live-streaming path, where each new projection costs one
 * projection of work per slice instead of N.
 *
 * An accumulator is a float buffer of the slice's pixels in device memory, allocated when
 * the slice starts being tracked (never per frame). A rebuild runs the slice through the
 * normal kernel selection (backproject.cu) and copies the result device to device; an
 * update adds sign * weight * (the projection's interpolated value) to every pixel with a
 * one-projection kernel that takes the projection's constants as arguments, so nothing is
 * uploaded and the host never waits: the update is ordered on the engine's stream before
 * the store that overwrites the slot (subtraction) or after it (addition). Interpolation
 * is the exact one of plane-exact (bilinear across columns and detector rows), so tracked
 * slices are `exact` whatever kernel rebuilt them last.
 */
#include "config.h"

#include "gpu/backend.h"

#include <stdlib.h>
#include <string.h>

#include "gpu/cuda/bp_common.cuh"

#define ACC_BLOCK 16 /* 16 x 16 threads, one pixel each: the update is memory-bound */

__global__ void __launch_bounds__(ACC_BLOCK * ACC_BLOCK)
acc_delta_kernel(const float *__restrict__ window, size_t pitch_el, size_t slab_el, int W, int H,
                 float4 q, int slot, float sign, tl_cuda_geom g, float *__restrict__ acc)
{
    const int j = blockIdx.x * ACC_BLOCK + threadIdx.x;
    const int i = blockIdx.y * ACC_BLOCK + threadIdx.y;
    if (i >= g.h || j >= g.w)
        return;
    const float x = tl_geom_x(g, i, j), y = tl_geom_y(g, i, j), z = tl_geom_z(g, i, j);
    if (!(z > -1.f && z < (float)H))
        return; /* above or below the detector: contributes 0 */
    const float fl = floorf(z);
    const int r0 = (int)fl;
    const float gz = z - fl;
    const size_t so = (size_t)slot * pitch_el;
    const float u = tl_ray_u(x, y, q);
    const float a = r0 >= 0 ? tl_sample_row(window + (size_t)r0 * slab_el + so, W, u) : 0.f;
    const float b = gz != 0.f && r0 + 1 < H
                        ? tl_sample_row(window + (size_t)(r0 + 1) * slab_el + so, W, u)
                        : 0.f;
    float *o = acc + (size_t)i * g.w + j;
    *o = fmaf(sign * q.w, tl_lerp(a, b, gz), *o);
}

tl_status tl_cuda_op_acc_alloc(void *state, int id, uint32_t height, uint32_t width)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    TL_TRY(tl_cuda_use_device(s));
    if (id >= s->nacc) {
        int n = id + 8;
        float **a = (float **)realloc(s->acc, (size_t)n * sizeof *a);
        if (a)
            s->acc = a;
        size_t *z = (size_t *)realloc(s->acc_size, (size_t)n * sizeof *z);
        if (z)
            s->acc_size = z;
        if (!a || !z)
            return tl_fail(s->eb, TL_ENOMEM, "out of host memory for accumulators");
        for (int k = s->nacc; k < n; k++) {
            s->acc[k] = NULL;
            s->acc_size[k] = 0;
        }
        s->nacc = n;
    }
    tl_cuda_op_acc_free(s, id);
    size_t n = (size_t)height * width;
    TL_TRY(tl_cuda_alloc(s, (void **)&s->acc[id], n * sizeof(float), "a tracked slice's accumulator"));
    s->acc_size[id] = n;
    return TL_OK;
}

void tl_cuda_op_acc_free(void *state, int id)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    if (id < 0 || id >= s->nacc || !s->acc[id])
        return;
    if (tl_cuda_use_device(s) == TL_OK) {
        cudaStreamSynchronize(s->stream); /* no update may still be writing it */
        cudaFree(s->acc[id]);
    }
    s->mem -= s->acc_size[id] * sizeof(float);
    s->acc[id] = NULL;
    s->acc_size[id] = 0;
}

void tl_cuda_acc_destroy(tl_cuda_state *s)
{
    for (int k = 0; k < s->nacc; k++)
        if (s->acc[k])
            cudaFree(s->acc[k]);
    free(s->acc);
    free(s->acc_size);
    s->acc = NULL;
    s->acc_size = NULL;
    s->nacc = 0;
}

tl_status tl_cuda_op_acc_update(void *state, tl_bp_job *job, const int *ids, bool add, double sign)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    TL_TRY(tl_cuda_use_device(s));
    for (size_t i = 0; i < job->nslices; i++)
        if (ids[i] < 0 || ids[i] >= s->nacc || !s->acc[ids[i]] ||
            s->acc_size[ids[i]] != (size_t)job->slices[i].height * job->slices[i].width)
            return tl_fail(s->eb, TL_EINTERNAL, "slice %d has no accumulator of its size", ids[i]);
    if (!add) {
        /* a rebuild: the normal kernels into the job buffer, then into the accumulators */
        TL_TRY(tl_cuda_op_backproject(s, job));
        size_t off = 0;
        for (size_t i = 0; i < job->nslices; i++) {
            size_t npx = (size_t)job->slices[i].height * job->slices[i].width;
            TL_CUDA(s->eb, cudaMemcpyAsync(s->acc[ids[i]], s->out + off, npx * sizeof(float),
                                           cudaMemcpyDeviceToDevice, s->stream));
            off += npx;
        }
        return TL_OK;
    }
    for (size_t k = 0; k < job->nproj; k++) {
        const tl_bp_proj *p = &job->proj[k];
        const float4 q = make_float4((float)p->cos_t, (float)p->sin_t, (float)p->center,
                                     (float)p->weight);
        for (size_t i = 0; i < job->nslices; i++) {
            tl_cuda_geom g = tl_cuda_make_geom(&job->slices[i]);
            const dim3 block(ACC_BLOCK, ACC_BLOCK);
            const dim3 grid((unsigned)((g.w + ACC_BLOCK - 1) / ACC_BLOCK),
                            (unsigned)((g.h + ACC_BLOCK - 1) / ACC_BLOCK));
            acc_delta_kernel<<<grid, block, 0, s->stream>>>(
                s->window, s->pitch_el, s->slab_el, (int)s->cols, (int)s->rows, q, (int)p->slot,
                (float)sign, g, s->acc[ids[i]]);
            TL_CUDA_LAUNCHED(s->eb, "acc_delta_kernel");
        }
    }
    job->kernel = "delta-exact";
    return TL_OK;
}

tl_status tl_cuda_op_acc_read(void *state, const int *ids, size_t n, float *const *out)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    TL_TRY(tl_cuda_use_device(s));
    for (size_t k = 0; k < n; k++) {
        if (ids[k] < 0 || ids[k] >= s->nacc || !s->acc[ids[k]])
            return tl_fail(s->eb, TL_EINTERNAL, "slice %d has no accumulator", ids[k]);
        TL_CUDA(s->eb, cudaMemcpyAsync(out[k], s->acc[ids[k]], s->acc_size[ids[k]] * sizeof(float),
                                       cudaMemcpyDeviceToHost, s->stream));
    }
    TL_CUDA(s->eb, cudaStreamSynchronize(s->stream));
    return TL_OK;
}
