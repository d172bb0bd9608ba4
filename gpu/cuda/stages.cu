/* stages.cu — per-frame times of the correction stages (engine.h, tl_engine_stage_times):
 * a CUDA event before and after each stage's kernels and FFTs on the engine's stream, in
 * a ring of TL_STAGE_RING frames. Reading never waits: a frame is reported once its last
 * event has completed (cudaEventQuery), and frames the ring has wrapped past are dropped
 * (they are samples for the daemon's latency histograms). Events are created once, with
 * the correction buffers; only engines with corrections have them.
 */
#include "config.h"

#include "gpu/base/backend.h"

#include "gpu/cuda/cuda_state.cuh"

#define TL_STAGE_EVENTS (TL_STAGE_RING * TL_STAGE_COUNT * 2)

tl_status tl_cuda_stages_create(tl_cuda_state *s)
{
    cudaEvent_t *ev = &s->stage_ev[0][0][0];
    for (; s->stage_events < TL_STAGE_EVENTS; s->stage_events++)
        TL_CUDA(s->eb, cudaEventCreate(&ev[s->stage_events]));
    return TL_OK;
}

void tl_cuda_stages_destroy(tl_cuda_state *s)
{
    cudaEvent_t *ev = &s->stage_ev[0][0][0];
    for (int i = 0; i < s->stage_events; i++)
        cudaEventDestroy(ev[i]);
    s->stage_events = 0;
}

tl_status tl_cuda_stage_mark(tl_cuda_state *s, tl_stage st, bool end)
{
    if (s->stage_events < TL_STAGE_EVENTS)
        return TL_OK;
    const unsigned k = (unsigned)(s->stage_written % TL_STAGE_RING);
    TL_CUDA(s->eb, cudaEventRecord(s->stage_ev[k][st][end ? 1 : 0], s->stream));
    if (end)
        s->stage_mask[k] |= 1u << st;
    return TL_OK;
}

void tl_cuda_stage_next(tl_cuda_state *s)
{
    s->stage_written++;
    s->stage_mask[s->stage_written % TL_STAGE_RING] = 0;
}

/* Whether ev has completed: a not-ready event is no error (and leaves none behind). */
static tl_status event_done(tl_cuda_state *s, cudaEvent_t ev, bool *done)
{
    cudaError_t e = cudaEventQuery(ev);
    *done = e == cudaSuccess;
    if (e == cudaErrorNotReady) {
        if (cudaPeekAtLastError() == cudaErrorNotReady)
            cudaGetLastError();
        return TL_OK;
    }
    TL_CUDA(s->eb, e);
    return TL_OK;
}

tl_status tl_cuda_op_stage_times(void *state, tl_stage_time *out, size_t cap, size_t *n)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    *n = 0;
    if (s->ring_update_s >= 0 && cap > 0) { /* the last ring update (rings.cu), when new */
        out[(*n)++] = tl_stage_time{TL_STAGE_RINGS, s->ring_update_s};
        s->ring_update_s = -1;
    }
    if (s->stage_events < TL_STAGE_EVENTS)
        return TL_OK;
    TL_TRY(tl_cuda_use_device(s));
    /* entries the ring wrapped past were re-recorded for newer frames */
    if (s->stage_written - s->stage_read > TL_STAGE_RING - 1)
        s->stage_read = s->stage_written - (TL_STAGE_RING - 1);
    for (; s->stage_read < s->stage_written; s->stage_read++) {
        const unsigned k = (unsigned)(s->stage_read % TL_STAGE_RING);
        for (int st = 0; st < TL_STAGE_COUNT; st++) {
            if (!(s->stage_mask[k] >> st & 1))
                continue;
            bool done = false;
            TL_TRY(event_done(s, s->stage_ev[k][st][1], &done));
            if (!done || *n == cap)
                return TL_OK; /* in order: later frames are not done either */
            float ms = 0;
            TL_CUDA(s->eb,
                    cudaEventElapsedTime(&ms, s->stage_ev[k][st][0], s->stage_ev[k][st][1]));
            out[(*n)++] = tl_stage_time{(tl_stage)st, ms * 1e-3};
            s->stage_mask[k] &= ~(1u << st);
        }
    }
    return TL_OK;
}
