/* store.cu — the per-frame path: one raw frame, from host or device memory, to one filtered
 * projection in a window slot (ARCHITECTURE.md §2: staging ▸ convert ▸ dark/flat ▸ −log
 * ▸ filter ▸ rolling sinograms), and the calibration frames that feed the correction.
 *
 * Host frames are copied by the CPU into the next buffer of a small ring of pinned buffers
 * (after waiting for that buffer's previous upload to finish; the copy is split over a few
 * threads, since one core cannot copy 8 MB frames at camera rate) and uploaded asynchronously on
 * the engine's stream, followed by the kernels. A frame already in page-locked memory
 * (tl_frame.pinned: the daemon assembles frames sent in row bands there) is uploaded from
 * where it is, and submit waits for that upload, so the caller may reuse the buffer. store() returns once the work is enqueued:
 * the next frame's host copy overlaps this frame's GPU work, stream order guarantees that
 * every kernel sees the frames and calibration submitted before it, and backproject()
 * synchronises before it returns. Nothing is allocated here.
 *
 * Device frames (TL_MEMORY_DEVICE) on the engine's device are read in place. A frame on
 * another device (a frame on GPU 0 reaching the rows an engine keeps on GPU 1, gpu/split.c;
 * a producer's CUDA IPC frame on another GPU than the engine's) is first copied
 * peer-to-peer (cudaMemcpyDefault: the driver uses NVLink or PCIe peer access where the
 * GPUs have it, else it stages through the host) into one of two peer buffers, on a copy
 * stream of its own, and read from there: the copy of one frame overlaps the kernels of
 * the frame before. Frames must be complete when submitted (written by finished work, or,
 * on the engine's own device only, on the legacy default stream, which the engine's
 * blocking stream waits for: the stream of another device waits for nothing there);
 * submit returns once the GPU has read them, so the caller may reuse the buffer at once,
 * unless the frame is read_later (engine.h): then the engine's fences say when.
 *
 * Batches (engine.h, tl_engine_flush): a projection submitted with `more` is corrected into
 * the next of s->batch areas of the FFT input and its filter pass is held; the pass runs
 * for all held frames at once when the batch is full, at a frame without `more`, before a
 * frame bound for a slot a held one is bound for, and at the start of every other
 * operation (tl_cuda_flush). The frame itself has been read once it is corrected, so
 * staging and release are as above; only its fence waits for the pass.
 */
#include "config.h"

#include "gpu/base/backend.h"

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
                       "memory (memory type %d)",
                       (int)a.type);
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
        /* from another GPU: on the copy stream, once the kernels that read this buffer
         * last are done; the engine's stream waits for the copy */
        unsigned i = s->peer_next++ % TL_CUDA_PEER_BUFS;
        TL_CUDA(s->eb, cudaStreamWaitEvent(s->copy_stream, s->peer_free[i], 0));
        TL_CUDA(s->eb, cudaMemcpy2DAsync(s->peer[i], row, f->data, *pitch, row, s->rows,
                                         cudaMemcpyDefault, s->copy_stream));
        TL_CUDA(s->eb, cudaEventRecord(s->peer_ready[i], s->copy_stream));
        TL_CUDA(s->eb, cudaStreamWaitEvent(s->stream, s->peer_ready[i], 0));
        s->peer_used = (int)i;
        *src = (const char *)s->peer[i];
        *pitch = row;
        return TL_OK;
    }
    if (f->memory != TL_MEMORY_HOST)
        return tl_fail(s->eb, TL_EINVAL, "unknown frame memory kind %d", (int)f->memory);
    if (f->pinned) { /* page-locked already: straight up; release_frame waits for it */
        TL_CUDA(s->eb, cudaMemcpy2DAsync(s->raw, row, f->data, *pitch, row, s->rows,
                                         cudaMemcpyHostToDevice, s->stream));
        TL_CUDA(s->eb, cudaEventRecord(s->consumed, s->stream));
        *src = (const char *)s->raw;
        *pitch = row;
        return TL_OK;
    }

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

tl_status tl_cuda_staged_read(tl_cuda_state *s)
{
    if (s->peer_used < 0)
        return TL_OK;
    TL_CUDA(s->eb, cudaEventRecord(s->peer_free[s->peer_used], s->stream));
    s->peer_used = -1;
    return TL_OK;
}

/* The measurement kept for iterative slices (tl_engine_config.keep_measurements) where no
 * weight is applied: the corrected rows, from where they wait for the filter, into meas. */
static tl_status keep_measurement(tl_cuda_state *s, const float *rows, size_t stride, float *meas,
                                  size_t meas_stride)
{
    if (!meas)
        return TL_OK;
    TL_CUDA(s->eb, cudaMemcpy2DAsync(meas, meas_stride * sizeof(float), rows,
                                     stride * sizeof(float), (size_t)s->cols * sizeof(float),
                                     s->rows, cudaMemcpyDeviceToDevice, s->stream));
    return TL_OK;
}

/* Convert ▸ correct ▸ −log of a staged frame into dst: one fused kernel (preprocess.cu), or,
 * with per-frame corrections, their stages (types.h, tl_corrections): convert ▸ dezinger
 * (dezinger.cu) ▸ dark/flat ▸ Paganin (paganin.cu) ▸ −log ▸ ring correction (rings.cu,
 * fused into the last kernel) ▸ weights. The projection as measured (before the weights)
 * goes to meas (NULL: not kept; rows meas_stride apart). */
static tl_status correct_into(tl_cuda_state *s, const char *src, size_t pitch, tl_dtype dt,
                              float *dst, size_t dst_stride, float *meas, size_t meas_stride)
{
    if (!s->corr_on) { /* no weights on this path */
        TL_TRY(tl_cuda_preprocess(s, src, pitch, dt, dst, dst_stride));
        return keep_measurement(s, dst, dst_stride, meas, meas_stride);
    }
    const bool log = !s->cfg.already_linear;
    const float *cur = s->frame[0];
    TL_TRY(tl_cuda_convert(s, src, pitch, dt, s->frame[0]));
    if (s->d_replaced) {
        TL_TRY(tl_cuda_stage_mark(s, TL_STAGE_DEZINGER, false));
        TL_TRY(tl_cuda_dezinger(s, s->frame[0], s->frame[1]));
        TL_TRY(tl_cuda_stage_mark(s, TL_STAGE_DEZINGER, true));
        cur = s->frame[1];
    }
    if (!s->phase_buf) {
        TL_TRY(tl_cuda_correct(s, cur, s->cols, true, log, true, dst, dst_stride, meas,
                               meas_stride));
        tl_cuda_stage_next(s);
        return TL_OK;
    }
    float *frame = tl_cuda_phase_frame(s);
    TL_TRY(tl_cuda_stage_mark(s, TL_STAGE_PAGANIN, false));
    TL_TRY(tl_cuda_correct(s, cur, s->cols, true, false, false, frame, s->phase.pcol, NULL, 0));
    TL_TRY(tl_cuda_phase(s));
    TL_TRY(tl_cuda_stage_mark(s, TL_STAGE_PAGANIN, true));
    TL_TRY(tl_cuda_correct(s, frame, s->phase.pcol, false, log, true, dst, dst_stride, meas,
                           meas_stride));
    tl_cuda_stage_next(s);
    return TL_OK;
}

tl_status tl_cuda_process(tl_cuda_state *s, const char *src, size_t pitch, tl_dtype dt, float *dst,
                          float *meas, size_t dst_stride, bool hold)
{
    if (!s->filter_on) { /* straight into the window (set_filter ran what was held) */
        TL_TRY(correct_into(s, src, pitch, dt, dst, dst_stride, meas, dst_stride));
        return tl_cuda_profile_add(s, dst, dst_stride);
    }
    /* a held frame bound for the same place is written first: the pass writes its frames
     * in no particular order */
    bool clash = s->held && s->held_stride != dst_stride;
    for (uint32_t k = 0; k < s->held && !clash; k++)
        clash = s->held_dst.p[k] == dst;
    if (clash)
        TL_TRY(tl_cuda_flush(s));
    /* into the next FFT input rows (zero-padded to P), filtered into dst by the pass */
    float *pad = s->pad + (size_t)s->held * s->rows * s->padded;
    TL_TRY(correct_into(s, src, pitch, dt, pad, s->padded, meas, dst_stride));
    TL_TRY(tl_cuda_profile_add(s, pad, s->padded)); /* before the filter pass reads pad */
    s->held_dst.p[s->held++] = dst;
    s->held_stride = dst_stride;
    return hold && s->held < s->batch ? TL_OK : tl_cuda_flush(s);
}

tl_status tl_cuda_flush(tl_cuda_state *s)
{
    if (!s->held)
        return TL_OK;
    uint32_t n = s->held;
    s->held = 0; /* a failed pass is not run again: the failure is reported once */
    tl_status st = tl_cuda_filter_rows(s, n, &s->held_dst, s->held_stride);
    /* the fences are recorded even after a failure, so that nobody waits for them forever */
    for (unsigned i = 0; i < TL_BACKEND_FENCES; i++) {
        if (!(s->held_fences >> i & 1))
            continue;
        cudaError_t e = cudaEventRecord(s->fence_ev[i], s->stream);
        if (e != cudaSuccess && st == TL_OK)
            st = tl_cuda_fail_call(s->eb, e, "cudaEventRecord (fence)", __FILE__, __LINE__);
    }
    s->held_fences = 0;
    return st;
}

tl_status tl_cuda_op_flush(void *state)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    if (!s->held)
        return TL_OK;
    TL_TRY(tl_cuda_use_device(s));
    return tl_cuda_flush(s);
}

/* Device frames and pinned host frames: wait until the GPU has read the caller's buffer
 * (unless the caller follows the read with the engine's fences instead). */
static tl_status release_frame(tl_cuda_state *s, const tl_frame *f)
{
    if (f->read_later)
        return TL_OK;
    if (f->memory == TL_MEMORY_DEVICE) /* read by the kernels just enqueued */
        TL_CUDA(s->eb, cudaEventRecord(s->consumed, s->stream));
    else if (!f->pinned)
        return TL_OK; /* copied into the staging ring before store() returned */
    /* (pinned: recorded after its upload in tl_cuda_stage, so the kernels run on) */
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
    s->view_angle = f->angle; /* corrected before process() returns, even when held */
    const size_t at = (size_t)slot * s->pitch_el;
    TL_TRY(tl_cuda_process(s, src, pitch, f->dtype, s->window + at, s->meas ? s->meas + at : NULL,
                           s->slab_el, f->more));
    tl_cuda_cone_stack_mark(s, (int32_t)slot);
    TL_TRY(tl_cuda_staged_read(s));
    return release_frame(s, f);
}

static_assert(TL_BACKEND_FENCES <= 64, "held_fences is a 64-bit mask");

tl_status tl_cuda_op_fence(void *state, unsigned i)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    i %= TL_BACKEND_FENCES;
    if (s->held) { /* reached after the pass of the held frames: recorded by it */
        s->held_fences |= 1ull << i;
        return TL_OK;
    }
    TL_TRY(tl_cuda_use_device(s));
    TL_CUDA(s->eb, cudaEventRecord(s->fence_ev[i], s->stream));
    return TL_OK;
}

tl_status tl_cuda_op_fence_done(void *state, unsigned i, bool wait, bool *done)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    i %= TL_BACKEND_FENCES;
    cudaEvent_t ev = s->fence_ev[i];
    *done = false;
    if (s->held_fences >> i & 1) { /* its frame's pass is held: not reached before it runs */
        if (!wait)
            return TL_OK;
        TL_TRY(tl_cuda_op_flush(s));
    }
    if (wait)
        TL_CUDA(s->eb, cudaEventSynchronize(ev));
    cudaError_t e = cudaEventQuery(ev);
    if (e == cudaErrorNotReady) { /* not an error: never left for a later launch check */
        if (cudaPeekAtLastError() == cudaErrorNotReady)
            cudaGetLastError();
        return TL_OK;
    }
    TL_CUDA(s->eb, e);
    *done = true;
    return TL_OK;
}

tl_status tl_cuda_op_calib_add(void *state, const tl_frame *f, uint32_t count)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    TL_TRY(tl_cuda_use_device(s));
    TL_TRY(tl_cuda_flush(s));
    if (count == 0)
        return tl_fail(s->eb, TL_EINTERNAL, "calibration batch of 0 frames");
    int kind = f->kind == TL_FRAME_DARK ? 0 : 1;
    const char *src = NULL;
    size_t pitch = 0;
    TL_TRY(tl_cuda_stage(s, f, &src, &pitch));
    TL_TRY(tl_cuda_calib_accumulate(s, src, pitch, f->dtype, kind, count));
    TL_TRY(tl_cuda_staged_read(s));
    TL_TRY(release_frame(s, f));
    s->have[kind] = true; /* after the kernel was enqueued: it saw the state before this frame */
    return TL_OK;
}
