/* store.cu — the per-frame path: one raw frame, from host or device memory, to one filtered
 * projection in a window slot (DESIGN.md §2: staging ▸ convert ▸ dark/flat ▸ −log ▸ filter ▸
 * rolling sinograms), and the calibration frames that feed the correction.
 *
 * Host frames are copied by the CPU into the next buffer of a small ring of pinned buffers
 * (after waiting for that buffer's previous upload to finish; the copy is split over a few
 * threads, since one core cannot copy 8 MB frames at camera rate) and uploaded asynchronously on
 * the engine's stream, followed by the kernels. store() returns once the work is enqueued:
 * the next frame's host copy overlaps this frame's GPU work, stream order guarantees that
 * every kernel sees the frames and calibration submitted before it, and backproject()
 * synchronises before it returns. Nothing is allocated here.
 *
 * Device frames (TL_MEMORY_DEVICE) on the engine's device are read in place. A frame on
 * another device (a frame on GPU 0 reaching the rows an engine keeps on GPU 1, gpu/split.c;
 * a producer's CUDA IPC frame on another GPU than the engine's) is first copied
 * peer-to-peer into s->raw on the engine's stream (cudaMemcpyDefault: the driver uses
 * NVLink or PCIe peer access where the GPUs have it, else it stages through the host) and
 * read from there. Frames must be complete when submitted (written by finished work, or,
 * on the engine's own device only, on the legacy default stream, which the engine's
 * blocking stream waits for: the stream of another device waits for nothing there);
 * submit returns once the GPU has read them, so the caller may reuse the buffer at once.
 */
#include "config.h"

#include "gpu/backend.h"

#include <stdint.h>
#include <string.h>

#include "gpu/cuda/cuda_state.cuh"

/* Checks a device frame; *peer tells whether it lives on another device than the
 * engine's (managed memory is read in place wherever it lives). */
static tl_status check_device_frame(tl_cuda_state *s, const tl_frame *f, size_t pitch, bool *peer)
{
    cudaPointerAttributes a;
    TL_CUDA(s->eb, cudaPointerGetAttributes(&a, f->data));
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
        return tl_fail(s->eb, TL_EINVAL,
                       "frame marked as device memory, but its pointer is not CUDA device "
                       "memory (memory type %d)", (int)a.type);
    *peer = a.type == cudaMemoryTypeDevice && a.device != s->device;
    if ((uintptr_t)f->data % s->dsize || pitch % s->dsize)
        return tl_fail(s->eb, TL_EINVAL,
                       "device frame pointer or pitch (%zu) not a multiple of the pixel size %zu",
                       pitch, s->dsize);
    return TL_OK;
}

/* One host frame's copy into its staging buffer, in TL_CUDA_STAGE_PIECES row ranges. */
typedef struct {
    const char *src;
    char *dst;
    size_t pitch, row; /* source pitch and packed row, bytes */
    uint32_t rows;
} stage_copy;

static void copy_piece(void *ctx, size_t piece, int thread)
{
    (void)thread;
    const stage_copy *c = (const stage_copy *)ctx;
    const size_t r0 = piece * c->rows / TL_CUDA_STAGE_PIECES;
    const size_t r1 = (piece + 1) * c->rows / TL_CUDA_STAGE_PIECES;
    if (c->pitch == c->row) {
        memcpy(c->dst + r0 * c->row, c->src + r0 * c->row, (r1 - r0) * c->row);
        return;
    }
    for (size_t r = r0; r < r1; r++)
        memcpy(c->dst + r * c->row, c->src + r * c->pitch, c->row);
}

tl_status tl_cuda_stage(tl_cuda_state *s, const tl_frame *f, const char **src, size_t *pitch)
{
    size_t row = (size_t)s->cols * s->dsize;
    if (f->dtype != s->cfg.dtype || f->rows != s->rows || f->cols != s->cols)
        return tl_fail(s->eb, TL_EINTERNAL, "frame shape or dtype differs from the engine's");
    *pitch = f->pitch ? f->pitch : row;
    if (f->memory == TL_MEMORY_DEVICE) {
        bool peer = false;
        TL_TRY(check_device_frame(s, f, *pitch, &peer));
        *src = (const char *)f->data;
        if (!peer)
            return TL_OK;
        /* from another GPU: into s->raw, in stream order like a host frame's upload */
        TL_CUDA(s->eb, cudaMemcpy2DAsync(s->raw, row, f->data, *pitch, row, s->rows,
                                         cudaMemcpyDefault, s->stream));
        *src = (const char *)s->raw;
        *pitch = row;
        return TL_OK;
    }
    if (f->memory != TL_MEMORY_HOST)
        return tl_fail(s->eb, TL_EINVAL, "unknown frame memory kind %d", (int)f->memory);

    unsigned i = s->ring_next++ % TL_CUDA_RING;
    TL_CUDA(s->eb, cudaEventSynchronize(s->ring_ev[i])); /* its last upload has finished */
    char *dst = (char *)s->pinned[i];
    stage_copy c = {(const char *)f->data, dst, *pitch, row, s->rows};
    tl_pool_run(s->stage_pool, TL_CUDA_STAGE_PIECES, copy_piece, &c);
    TL_CUDA(s->eb, cudaMemcpyAsync(s->raw, dst, row * s->rows, cudaMemcpyHostToDevice, s->stream));
    TL_CUDA(s->eb, cudaEventRecord(s->ring_ev[i], s->stream));
    *src = (const char *)s->raw;
    *pitch = row;
    return TL_OK;
}

tl_status tl_cuda_process(tl_cuda_state *s, const char *src, size_t pitch, tl_dtype dt,
                          float *dst, size_t dst_stride)
{
    if (!s->filter_on) /* straight into the window */
        return tl_cuda_preprocess(s, src, pitch, dt, dst, dst_stride, s->cols);
    /* rows zero-padded to P for the FFT, then filtered into the window */
    TL_TRY(tl_cuda_preprocess(s, src, pitch, dt, s->pad, s->padded, (uint32_t)s->padded));
    return tl_cuda_filter_rows(s, dst, dst_stride);
}

/* Device frames: wait until the GPU has read the caller's buffer. */
static tl_status release_frame(tl_cuda_state *s, const tl_frame *f)
{
    if (f->memory != TL_MEMORY_DEVICE)
        return TL_OK;
    TL_CUDA(s->eb, cudaEventRecord(s->consumed, s->stream));
    TL_CUDA(s->eb, cudaEventSynchronize(s->consumed));
    return TL_OK;
}

tl_status tl_cuda_op_store(void *state, const tl_frame *f, uint32_t slot)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    TL_TRY(tl_cuda_use_device(s));
    if (slot >= s->n)
        return tl_fail(s->eb, TL_EINTERNAL, "slot %u outside the window of %u", slot, s->n);
    const char *src = NULL;
    size_t pitch = 0;
    TL_TRY(tl_cuda_stage(s, f, &src, &pitch));
    TL_TRY(tl_cuda_process(s, src, pitch, f->dtype, s->window + (size_t)slot * s->pitch_el,
                           s->slab_el));
    return release_frame(s, f);
}

tl_status tl_cuda_op_calib_add(void *state, const tl_frame *f, uint32_t count)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    TL_TRY(tl_cuda_use_device(s));
    if (count == 0)
        return tl_fail(s->eb, TL_EINTERNAL, "calibration batch of 0 frames");
    int kind = f->kind == TL_FRAME_DARK ? 0 : 1;
    const char *src = NULL;
    size_t pitch = 0;
    TL_TRY(tl_cuda_stage(s, f, &src, &pitch));
    TL_TRY(tl_cuda_calib_accumulate(s, src, pitch, f->dtype, kind, count));
    TL_TRY(release_frame(s, f));
    s->have[kind] = true; /* after the kernel was enqueued: it saw the state before this frame */
    return TL_OK;
}
