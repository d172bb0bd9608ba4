/* cuda_backend.cu — the CUDA backend's operation table (gpu/base/backend.h): device discovery,
 * the memory estimate, creation and destruction of an engine's GPU state, the filter
 * response, calibration batches, and the kernel list.
 *
 * The numbers follow the CPU backend (gpu/cpu/kernels_impl.h) operation for operation, so
 * the two agree to float rounding. Everything large is allocated here, in create(); the
 * per-frame path is store.cu, the reconstruct path backproject.cu, benchmarks bench.cu.
 * Each operation first selects the engine's device (cudaSetDevice): an engine is driven by
 * one thread at a time, but not always the same thread.
 */
#include "config.h"

#include <mutex>

#include "gpu/cuda/cuda_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cuda/kernels.cuh"
#include "gpu/cuda/cuda_state.cuh"

/* ---- errors ------------------------------------------------------------------------------ */

/* "gpu/cuda/x.cu" from whatever path nvcc was given. */
static const char *short_file(const char *file)
{
    const char *p = strstr(file, "gpu/cuda/");
    return p ? p : file;
}

tl_status tl_cuda_fail_call(tl_errbuf *eb, cudaError_t e, const char *call, const char *file,
                            int line)
{
    cudaGetLastError(); /* clear the (non-sticky) error so the next call starts clean */
    return tl_fail(eb, e == cudaErrorMemoryAllocation ? TL_ENOMEM : TL_EDEVICE,
                   "CUDA: %s failed: %s (%s) [%s:%d]", call, cudaGetErrorString(e),
                   cudaGetErrorName(e), short_file(file), line);
}

static const char *cufft_name(cufftResult r)
{
    switch (r) {
        case CUFFT_SUCCESS: return "CUFFT_SUCCESS";
        case CUFFT_INVALID_PLAN: return "CUFFT_INVALID_PLAN";
        case CUFFT_ALLOC_FAILED: return "CUFFT_ALLOC_FAILED";
        case CUFFT_INVALID_TYPE: return "CUFFT_INVALID_TYPE";
        case CUFFT_INVALID_VALUE: return "CUFFT_INVALID_VALUE";
        case CUFFT_INTERNAL_ERROR: return "CUFFT_INTERNAL_ERROR";
        case CUFFT_EXEC_FAILED: return "CUFFT_EXEC_FAILED";
        case CUFFT_SETUP_FAILED: return "CUFFT_SETUP_FAILED";
        case CUFFT_INVALID_SIZE: return "CUFFT_INVALID_SIZE";
        case CUFFT_UNALIGNED_DATA: return "CUFFT_UNALIGNED_DATA";
        case CUFFT_INVALID_DEVICE: return "CUFFT_INVALID_DEVICE";
        case CUFFT_NO_WORKSPACE: return "CUFFT_NO_WORKSPACE";
        case CUFFT_NOT_IMPLEMENTED: return "CUFFT_NOT_IMPLEMENTED";
        case CUFFT_NOT_SUPPORTED: return "CUFFT_NOT_SUPPORTED";
        default: return "cuFFT error";
    }
}

tl_status tl_cuda_fail_fft(tl_errbuf *eb, cufftResult r, const char *call, const char *file,
                           int line)
{
    cudaGetLastError();
    return tl_fail(eb, r == CUFFT_ALLOC_FAILED ? TL_ENOMEM : TL_EDEVICE,
                   "cuFFT: %s failed: %s (%d) [%s:%d]", call, cufft_name(r), (int)r,
                   short_file(file), line);
}

/* ---- devices ----------------------------------------------------------------------------- */

extern "C" int tl_cuda_device_count(char *why, size_t why_len)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        /* 35 (cudaErrorInsufficientDriver) without a driver, 100 (cudaErrorNoDevice)
         * without a device: both mean "no usable GPU here", never a crash */
        if (why && why_len)
            snprintf(why, why_len, "cudaGetDeviceCount failed: %s (%s, error %d)",
                     cudaGetErrorString(e), cudaGetErrorName(e), (int)e);
        cudaGetLastError();
        return -1;
    }
    if (n == 0 && why && why_len)
        snprintf(why, why_len, "no CUDA device found");
    return n;
}

extern "C" tl_status tl_cuda_host_alloc(size_t bytes, void **out, char *why, size_t why_len)
{
    cudaError_t e = cudaHostAlloc(out, bytes ? bytes : 1, cudaHostAllocPortable);
    if (e == cudaSuccess)
        return TL_OK;
    *out = NULL;
    cudaGetLastError();
    snprintf(why, why_len, "CUDA: cudaHostAlloc of %.1f MiB of pinned memory failed: %s",
             bytes / 1048576.0, cudaGetErrorString(e));
    return TL_ENOMEM;
}

extern "C" void tl_cuda_host_free(void *p)
{
    if (p)
        cudaFreeHost(p);
}

extern "C" tl_status tl_cuda_host_register(void *p, size_t bytes, char *why, size_t why_len)
{
    cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterPortable);
    if (e == cudaSuccess)
        return TL_OK;
    cudaGetLastError();
    snprintf(why, why_len, "CUDA: cudaHostRegister of %.1f MiB failed: %s", bytes / 1048576.0,
             cudaGetErrorString(e));
    return TL_ENOMEM;
}

extern "C" void tl_cuda_host_unregister(void *p)
{
    if (p && cudaHostUnregister(p) != cudaSuccess)
        cudaGetLastError(); /* teardown: nothing to do about it */
}

size_t tl_cuda_dtype_size(tl_dtype t)
{
    switch (t) {
        case TL_DTYPE_U8: return 1;
        case TL_DTYPE_U16: return 2;
        case TL_DTYPE_U32: return 4;
        case TL_DTYPE_F32: return 4;
    }
    return 0;
}

tl_status tl_cuda_use_device(tl_cuda_state *s)
{
    TL_CUDA(s->eb, cudaSetDevice(s->device));
    return TL_OK;
}

tl_status tl_cuda_alloc(tl_cuda_state *s, void **p, size_t bytes, const char *what)
{
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        *p = NULL;
        cudaGetLastError();
        return tl_fail(s->eb, e == cudaErrorMemoryAllocation ? TL_ENOMEM : TL_EDEVICE,
                       "CUDA: cudaMalloc of %.1f MiB for the %s failed: %s (%s)",
                       bytes / 1048576.0, what, cudaGetErrorString(e), cudaGetErrorName(e));
    }
    s->mem += bytes;
    return TL_OK;
}

/* Checks what the CUDA backend cannot do and that the device ordinal exists, then selects
 * the device. */
static tl_status check_device(const tl_engine_config *c, tl_errbuf *eb)
{
    if (c->precision != TL_PRECISION_F32)
        return tl_fail(eb, TL_EUNSUPPORTED,
                       "the float64 reference mode runs on the CPU backend only (backend cpu)");
    char why[256] = "";
    int n = tl_cuda_device_count(why, sizeof why);
    if (n <= 0)
        return tl_fail(eb, TL_EDEVICE, "no usable CUDA device: %s", why);
    if (c->device < 0 || c->device >= n)
        return tl_fail(eb, TL_EDEVICE, "CUDA device %d requested, but there %s %d (0..%d)",
                       c->device, n == 1 ? "is" : "are", n, n - 1);
    TL_CUDA(eb, cudaSetDevice(c->device));
    return TL_OK;
}

static size_t round_up(size_t x, size_t a)
{
    return a > 1 ? (x + a - 1) / a * a : x;
}

typedef struct {
    size_t tex_align, tex_pitch_align;
    int max_linear[3];
} device_limits;

static tl_status get_limits(int dev, tl_errbuf *eb, device_limits *d)
{
    int a = 0, pa = 0;
    TL_CUDA(eb, cudaDeviceGetAttribute(&a, cudaDevAttrTextureAlignment, dev));
    TL_CUDA(eb, cudaDeviceGetAttribute(&pa, cudaDevAttrTexturePitchAlignment, dev));
    TL_CUDA(eb,
            cudaDeviceGetAttribute(&d->max_linear[0], cudaDevAttrMaxTexture2DLinearWidth, dev));
    TL_CUDA(eb,
            cudaDeviceGetAttribute(&d->max_linear[1], cudaDevAttrMaxTexture2DLinearHeight, dev));
    TL_CUDA(eb,
            cudaDeviceGetAttribute(&d->max_linear[2], cudaDevAttrMaxTexture2DLinearPitch, dev));
    d->tex_align = a > 0 ? (size_t)a : 1;
    d->tex_pitch_align = pa > 0 ? (size_t)pa : 1;
    return TL_OK;
}

static void compute_sizes(const tl_engine_config *c, size_t P, const device_limits *d,
                          size_t fft_work, tl_cuda_sizes *z)
{
    size_t npix = (size_t)c->rows * c->cols, nf = P / 2 + 1;
    size_t batch = tl_cuda_batch_frames(c->rows);
    size_t pa = d->tex_pitch_align > TL_CUDA_COALESCE ? d->tex_pitch_align : TL_CUDA_COALESCE;
    memset(z, 0, sizeof *z);
    z->pitch = round_up((size_t)c->cols * sizeof(float), pa);
    z->slab = round_up((size_t)c->window * z->pitch, d->tex_align);
    z->window = (size_t)c->rows * z->slab;
    z->raw = npix * tl_cuda_dtype_size(c->dtype);
    z->pad = batch * c->rows * P * sizeof(float);
    z->spec = batch * c->rows * nf * sizeof(cufftComplex);
    z->fft_work = fft_work;
    z->response = nf * sizeof(float);
    z->calib = 2 * npix * sizeof(double) + 3 * npix * sizeof(float);
    z->proj = (size_t)c->window * (sizeof(float4) + sizeof(int) + sizeof(float));
    z->scratch = (size_t)c->rows * z->pitch;
    z->out = (size_t)c->cols * c->cols * sizeof(float);
    z->pack_pitch = round_up((size_t)c->cols * 2 * sizeof(float), pa);
    z->pack = (size_t)c->window * z->pack_pitch;
    z->buffers = z->raw * (1 + TL_CUDA_PEER_BUFS) + z->pad + z->spec + z->fft_work + z->response +
                 z->calib + z->proj + z->scratch + z->out + z->pack;
}

/* ---- estimate, create, destroy ----------------------------------------------------------- */

/* What create_corrections allocates. */
static tl_status corrections_size(const tl_engine_config *c, tl_errbuf *eb, tl_cuda_sizes *z)
{
    const size_t frame = (size_t)c->rows * c->cols * sizeof(float);
    z->buffers += tl_cuda_rings_bytes(c);
    if (c->geometry == TL_GEOMETRY_CONE) {
        /* the pixel weights, the matrices and, unless a correction counts it below, the
         * staged path's frame */
        const bool staged = c->half_acquisition || c->corr.rings || c->corr.dezinger > 0 ||
                            tl_phase_on(&c->corr);
        z->buffers += frame + (size_t)c->window * 12 * sizeof(float) + (staged ? 0 : frame) +
                      tl_cuda_cone_stack_bytes(c);
    }
    if (c->half_acquisition)
        z->buffers += (size_t)c->cols * sizeof(float) + (c->corr.rings || c->corr.dezinger > 0 ||
                                                          tl_phase_on(&c->corr)
                                                      ? 0
                                                      : frame);
    if (c->corr.rings && !(c->corr.dezinger > 0))
        z->buffers += frame; /* the staged path's frame */
    if (c->corr.dezinger > 0)
        z->buffers += 2 * frame + sizeof(unsigned long long);
    if (!tl_phase_on(&c->corr))
        return TL_OK;
    if (!(c->corr.dezinger > 0))
        z->buffers += frame;
    tl_phase_filter f;
    TL_TRY(tl_phase_shape(&c->corr, c->rows, c->cols, &f, eb));
    size_t work = 0, nspec = (size_t)f.prow * (f.pcol / 2 + 1);
    TL_TRY(tl_cuda_phase_work_estimate(&f, &work));
    z->buffers += (size_t)f.prow * f.pcol * sizeof(float) + nspec * sizeof(cufftComplex) +
                  nspec * sizeof(float) + work;
    return TL_OK;
}

static tl_status cuda_estimate(const tl_engine_config *c, size_t padded, tl_memory_estimate *m,
                               tl_errbuf *eb)
{
    memset(m, 0, sizeof *m);
    TL_TRY(check_device(c, eb));
    device_limits d;
    TL_TRY(get_limits(c->device, eb, &d));
    size_t work = 0;
    TL_TRY(tl_cuda_fft_work_estimate(c->rows * tl_cuda_batch_frames(c->rows), padded, &work));
    tl_cuda_sizes z;
    compute_sizes(c, padded, &d, work, &z);
    TL_TRY(corrections_size(c, eb, &z));
    z.buffers += tl_cuda_profile_bytes(c);
    size_t free_b = 0, total_b = 0;
    TL_CUDA(eb, cudaMemGetInfo(&free_b, &total_b));
    m->window_bytes = z.window * (c->keep_measurements ? 2 : 1);
    m->buffer_bytes = z.buffers;
    m->total_bytes = m->window_bytes + z.buffers;
    m->available_bytes = free_b;
    return TL_OK;
}

static void cuda_destroy(void *state)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    if (!s)
        return;
    /* Teardown must not stop half-way: errors are ignored (a failed engine is being freed,
     * and a sticky device error would make every call below fail anyway). */
    if (cudaSetDevice(s->device) == cudaSuccess && s->stream)
        cudaStreamSynchronize(s->stream);
    tl_cuda_it_free(s);
    tl_cuda_itc_free(s);
    tl_cuda_tex_destroy(s);
    tl_cuda_cone_stack_destroy(s);
    tl_cuda_fft_destroy(s);
    tl_cuda_phase_destroy(s);
    tl_cuda_stages_destroy(s);
    tl_cuda_rings_destroy(s);
    tl_cuda_acc_destroy(s);
    void *dev[] = {s->window,  s->meas,   s->sum[0], s->sum[1],   s->avg[0],  s->avg[1],   s->gain,   s->raw,
                   s->pad,     s->spec,   s->response, s->d_par,   s->d_slot,   s->d_texy, s->out,
                   s->scratch, s->pack,   s->d_maxabs, s->d_scale, s->d_tickets,
                   s->frame[0], s->frame[1], s->d_replaced, s->d_prof, s->colw, s->pixw,
                   s->d_cone};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
        if (dev[i])
            cudaFree(dev[i]);
    for (int i = 0; i < TL_CUDA_PEER_BUFS; i++)
        if (s->peer[i])
            cudaFree(s->peer[i]);
    void *host[] = {s->pinned[0], s->pinned[1], s->pinned[2], s->pinned[3],
                    s->h_par,     s->h_slot,    s->h_texy,    s->h_replaced, s->h_cone};
    static_assert(TL_CUDA_RING == 4, "list every ring buffer above");
    for (size_t i = 0; i < sizeof host / sizeof *host; i++)
        if (host[i])
            cudaFreeHost(host[i]);
    cudaEvent_t ev[] = {s->t0,         s->t1,         s->consumed,   s->proj_done,
                        s->ring_ev[0], s->ring_ev[1], s->ring_ev[2], s->ring_ev[3]};
    for (size_t i = 0; i < sizeof ev / sizeof *ev; i++)
        if (ev[i])
            cudaEventDestroy(ev[i]);
    for (int i = 0; i < TL_BACKEND_FENCES; i++)
        if (s->fence_ev[i])
            cudaEventDestroy(s->fence_ev[i]);
    for (int i = 0; i < TL_CUDA_PEER_BUFS; i++) {
        if (s->peer_ready[i])
            cudaEventDestroy(s->peer_ready[i]);
        if (s->peer_free[i])
            cudaEventDestroy(s->peer_free[i]);
    }
    if (s->copy_stream)
        cudaStreamDestroy(s->copy_stream);
    if (s->stream)
        cudaStreamDestroy(s->stream);
    cudaGetLastError();
    if (s->stage_pool)
        tl_pool_destroy(s->stage_pool);
    free(s->response_host);
    free(s->job_kernel);
    free(s->job_off);
    free(s->job_done);
    free(s);
}

static tl_status host_alloc(tl_cuda_state *s, void **p, size_t bytes, const char *what)
{
    cudaError_t e = cudaHostAlloc(p, bytes ? bytes : 1, cudaHostAllocDefault);
    if (e != cudaSuccess) {
        *p = NULL;
        cudaGetLastError();
        return tl_fail(s->eb, TL_ENOMEM,
                       "CUDA: cudaHostAlloc of %.1f MiB of pinned memory for the %s failed: %s",
                       bytes / 1048576.0, what, cudaGetErrorString(e));
    }
    return TL_OK;
}

/* Lets the engine's device read the memory of every peer it can: frames on another GPU (a
 * partition's rows, gpu/split.c; a CUDA IPC producer's ring) are then copied over NVLink or
 * PCIe peer to peer, not staged through host memory by the driver (a frame split across
 * two GPUs is copied in well under half the time; figures: BENCHMARKS.md). Without it
 * the copies still work, only slower, so a refusal is no error. Access is per context
 * and enabling it twice is an error, hence the table of pairs already asked for. */
#define TL_CUDA_PEER_MAX 64
void tl_cuda_enable_peers(int device)
{
    static std::mutex mu;
    static bool asked[TL_CUDA_PEER_MAX][TL_CUDA_PEER_MAX];
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || device < 0 || device >= TL_CUDA_PEER_MAX)
        n = 0;
    std::lock_guard<std::mutex> hold(mu);
    for (int p = 0; p < n && p < TL_CUDA_PEER_MAX; p++) {
        int can = 0;
        if (p == device || asked[device][p] ||
            cudaDeviceCanAccessPeer(&can, device, p) != cudaSuccess || !can)
            continue;
        asked[device][p] = true;
        cudaDeviceEnablePeerAccess(p, 0);
    }
    cudaGetLastError(); /* none of these failures is sticky or ours to report */
}

/* Per-frame corrections (types.h, tl_corrections): the frame buffers of the staged path,
 * the dezinger's counter, the phase filter's buffers and plans (paganin.cu). */
static tl_status create_corrections(tl_cuda_state *s)
{
    const tl_corrections *k = &s->cfg.corr;
    const bool cone = s->cfg.geometry == TL_GEOMETRY_CONE;
    s->parker = tl_parker_of(&s->cfg); /* applied in correct_kernel (preprocess.cu) */
    s->corr_on = k->dezinger > 0 || tl_phase_on(k) || k->rings || s->cfg.half_acquisition || cone;
    if (!s->corr_on)
        return TL_OK;
    const size_t frame = (size_t)s->rows * s->cols * sizeof(float);
    TL_TRY(tl_cuda_alloc(s, (void **)&s->frame[0], frame, "correction frame"));
    if (k->dezinger > 0) {
        TL_TRY(tl_cuda_alloc(s, (void **)&s->frame[1], frame, "dezingered frame"));
        TL_TRY(tl_cuda_alloc(s, (void **)&s->d_replaced, sizeof *s->d_replaced,
                             "dezinger counter"));
        TL_CUDA(s->eb, cudaMemsetAsync(s->d_replaced, 0, sizeof *s->d_replaced, s->stream));
        TL_TRY(host_alloc(s, (void **)&s->h_replaced, sizeof *s->h_replaced, "dezinger count"));
        *s->h_replaced = 0;
    }
    TL_TRY(tl_cuda_stages_create(s));
    TL_TRY(tl_cuda_rings_create(s));
    if (s->cfg.half_acquisition)
        TL_TRY(tl_cuda_alloc(s, (void **)&s->colw, s->cols * sizeof(float), "column weights"));
    if (cone)
        TL_TRY(tl_cuda_alloc(s, (void **)&s->pixw, frame, "cone-beam pixel weights"));
    return tl_cuda_phase_create(s);
}

static tl_status create_all(tl_cuda_state *s, const tl_engine_config *c)
{
    tl_errbuf *eb = s->eb;
    TL_TRY(check_device(c, eb));
    tl_cuda_enable_peers(s->device);
    cudaDeviceProp prop;
    TL_CUDA(eb, cudaGetDeviceProperties(&prop, s->device));
    int n = snprintf(s->device_name, sizeof s->device_name, "%.100s (sm_%d%d, %d SMs)",
                     prop.name, prop.major, prop.minor, prop.multiProcessorCount);
    if (c->ndevices >= 2 && n > 0 && (size_t)n < sizeof s->device_name) /* cone beam (backends.c) */
        snprintf(s->device_name + n, sizeof s->device_name - (size_t)n,
                 ", iterative problems over %u devices", c->ndevices);
    device_limits d;
    TL_TRY(get_limits(s->device, eb, &d));
    s->tex_align = d.tex_align;
    s->tex_pitch_align = d.tex_pitch_align;
    memcpy(s->max_tex2d_linear, d.max_linear, sizeof d.max_linear);
    compute_sizes(c, s->padded, &d, 0, &s->sz);
    s->pitch_el = s->sz.pitch / sizeof(float);
    s->slab_el = s->sz.slab / sizeof(float);

    TL_CUDA(eb, cudaStreamCreate(&s->stream));
    TL_CUDA(eb, cudaEventCreate(&s->t0));
    TL_CUDA(eb, cudaEventCreate(&s->t1));
    TL_CUDA(eb, cudaEventCreateWithFlags(&s->consumed, cudaEventDisableTiming));
    TL_CUDA(eb, cudaEventCreateWithFlags(&s->proj_done, cudaEventDisableTiming));
    for (int i = 0; i < TL_CUDA_RING; i++)
        TL_CUDA(eb, cudaEventCreateWithFlags(&s->ring_ev[i], cudaEventDisableTiming));
    for (int i = 0; i < TL_BACKEND_FENCES; i++)
        TL_CUDA(eb, cudaEventCreateWithFlags(&s->fence_ev[i], cudaEventDisableTiming));
    TL_CUDA(eb, cudaStreamCreateWithFlags(&s->copy_stream, cudaStreamNonBlocking));
    for (int i = 0; i < TL_CUDA_PEER_BUFS; i++) {
        TL_CUDA(eb, cudaEventCreateWithFlags(&s->peer_ready[i], cudaEventDisableTiming));
        TL_CUDA(eb, cudaEventCreateWithFlags(&s->peer_free[i], cudaEventDisableTiming));
    }

    size_t npix = (size_t)s->rows * s->cols;
    TL_TRY(tl_cuda_alloc(s, (void **)&s->window, s->sz.window, "window"));
    TL_CUDA(eb, cudaMemsetAsync(s->window, 0, s->sz.window, s->stream));
    if (c->keep_measurements) {
        TL_TRY(tl_cuda_alloc(s, (void **)&s->meas, s->sz.window, "measurement window"));
        TL_CUDA(eb, cudaMemsetAsync(s->meas, 0, s->sz.window, s->stream));
    }
    for (int k = 0; k < 2; k++) {
        TL_TRY(tl_cuda_alloc(s, (void **)&s->sum[k], npix * sizeof(double), "calibration sums"));
        TL_TRY(
            tl_cuda_alloc(s, (void **)&s->avg[k], npix * sizeof(float), "calibration averages"));
        TL_CUDA(eb, cudaMemsetAsync(s->sum[k], 0, npix * sizeof(double), s->stream));
        TL_CUDA(eb, cudaMemsetAsync(s->avg[k], 0, npix * sizeof(float), s->stream));
    }
    TL_TRY(tl_cuda_alloc(s, (void **)&s->gain, npix * sizeof(float), "flat-field gain"));
    TL_CUDA(eb, cudaMemsetAsync(s->gain, 0, npix * sizeof(float), s->stream));
    TL_TRY(tl_cuda_alloc(s, &s->raw, s->sz.raw, "raw frame"));
    for (int i = 0; i < TL_CUDA_PEER_BUFS; i++)
        TL_TRY(tl_cuda_alloc(s, &s->peer[i], s->sz.raw, "frames from other GPUs"));
    TL_TRY(tl_cuda_alloc(s, (void **)&s->pad, s->sz.pad, "filter rows"));
    /* the zero padding of the filter rows: written here once, never overwritten (filter.cu) */
    TL_CUDA(eb, cudaMemsetAsync(s->pad, 0, s->sz.pad, s->stream));
    TL_TRY(tl_cuda_alloc(s, (void **)&s->spec, s->sz.spec, "filter spectra"));
    TL_TRY(tl_cuda_alloc(s, (void **)&s->response, s->sz.response, "filter response"));
    TL_TRY(
        tl_cuda_alloc(s, (void **)&s->d_par, (size_t)s->n * sizeof(float4), "projection table"));
    TL_TRY(tl_cuda_alloc(s, (void **)&s->d_slot, (size_t)s->n * sizeof(int), "projection table"));
    TL_TRY(
        tl_cuda_alloc(s, (void **)&s->d_texy, (size_t)s->n * sizeof(float), "projection table"));
    TL_TRY(tl_cuda_alloc(s, (void **)&s->scratch, s->sz.scratch, "benchmark slot"));
    TL_TRY(tl_cuda_alloc(s, (void **)&s->out, s->sz.out, "slice outputs"));
    s->out_cap = s->sz.out / sizeof(float);

    for (int i = 0; i < TL_CUDA_RING; i++)
        TL_TRY(host_alloc(s, &s->pinned[i], s->sz.raw, "frame staging ring"));
    s->stage_pool = tl_pool_create(TL_CUDA_STAGE_THREADS);
    if (!s->stage_pool)
        return tl_fail(eb, TL_ENOMEM, "cannot start the %d frame staging threads",
                       TL_CUDA_STAGE_THREADS);
    tl_pool_set_spin(s->stage_pool, TL_CUDA_STAGE_SPIN_NS);
    TL_TRY(host_alloc(s, (void **)&s->h_par, (size_t)s->n * sizeof(float4), "projection table"));
    TL_TRY(host_alloc(s, (void **)&s->h_slot, (size_t)s->n * sizeof(int), "projection table"));
    TL_TRY(host_alloc(s, (void **)&s->h_texy, (size_t)s->n * sizeof(float), "projection table"));
    if (c->geometry == TL_GEOMETRY_CONE) {
        const size_t cone_bytes = (size_t)s->n * 12 * sizeof(float);
        TL_TRY(tl_cuda_alloc(s, (void **)&s->d_cone, cone_bytes, "cone-beam matrices"));
        TL_TRY(host_alloc(s, (void **)&s->h_cone, cone_bytes, "cone-beam matrices"));
    }
    s->response_host = (float *)malloc(s->sz.response);
    if (!s->response_host)
        return tl_fail(eb, TL_ENOMEM, "out of host memory for the filter response");

    TL_TRY(tl_cuda_fft_create(s));
    TL_TRY(create_corrections(s));
    TL_TRY(tl_cuda_profile_create(s));
    TL_TRY(tl_cuda_tex_create(s));
    TL_TRY(tl_cuda_cone_stack_create(s));
    TL_TRY(tl_cuda_bp_create(s));
    TL_TRY(tl_cuda_cone_optional_create(s)); /* optional, so last */
    /* the memsets above must be done before the first frame can be trusted */
    TL_CUDA(eb, cudaStreamSynchronize(s->stream));
    return TL_OK;
}

static tl_status cuda_create(const tl_engine_config *c, size_t padded, tl_errbuf *eb, void **state)
{
    *state = NULL;
    tl_cuda_state *s = (tl_cuda_state *)calloc(1, sizeof *s);
    if (!s)
        return tl_fail(eb, TL_ENOMEM, "out of memory");
    s->cfg = *c;
    s->eb = eb;
    s->device = c->device;
    s->peer_used = -1;
    s->rows = c->rows;
    s->cols = c->cols;
    s->n = c->window;
    s->padded = padded;
    s->dsize = tl_cuda_dtype_size(c->dtype);
    s->batch = tl_cuda_batch_frames(c->rows);
    tl_status st = create_all(s, c);
    if (st != TL_OK) {
        cuda_destroy(s);
        return st;
    }
    *state = s;
    return TL_OK;
}

/* ---- filter and calibration -------------------------------------------------------------- */

/* H[k] / P as float, like the CPU backend. The copy is ordered on the engine's stream, so
 * projections submitted before keep the filter they were stored with. */
static tl_status cuda_set_filter(void *state, const double *H)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    TL_TRY(tl_cuda_use_device(s));
    TL_TRY(tl_cuda_flush(s)); /* the held frames first (store.cu) */
    if (!H) {
        s->filter_on = false;
        return TL_OK;
    }
    size_t nf = s->padded / 2 + 1;
    /* the previous upload from response_host must be finished before it is rewritten */
    TL_CUDA(s->eb, cudaStreamSynchronize(s->stream));
    for (size_t k = 0; k < nf; k++)
        s->response_host[k] = (float)(H[k] / (double)s->padded);
    TL_CUDA(s->eb, cudaMemcpyAsync(s->response, s->response_host, nf * sizeof(float),
                                   cudaMemcpyHostToDevice, s->stream));
    TL_CUDA(s->eb, cudaStreamSynchronize(s->stream));
    s->filter_on = true;
    return TL_OK;
}

/* A new batch: the sum restarts, the average in use stays until the batch's first frame. */
static tl_status cuda_calib_reset(void *state, tl_frame_kind kind)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    TL_TRY(tl_cuda_use_device(s));
    TL_TRY(tl_cuda_flush(s)); /* the held frames first (store.cu) */
    int k = kind == TL_FRAME_DARK ? 0 : 1;
    TL_CUDA(s->eb,
            cudaMemsetAsync(s->sum[k], 0, (size_t)s->rows * s->cols * sizeof(double), s->stream));
    return TL_OK;
}

/* ---- introspection ----------------------------------------------------------------------- */

/* The kernels of the engine's geometry: a parallel-beam engine cannot run a cone-beam
 * kernel nor the other way round, so neither lists, tunes nor accepts the other's. */
static size_t cuda_kernels(const void *state, tl_kernel_info *out, size_t cap)
{
    const tl_cuda_state *s = (const tl_cuda_state *)state;
    const bool cone = s->cfg.geometry == TL_GEOMETRY_CONE;
    size_t n = 0;
    for (int i = 0; i < tl_cuda_kernel_count(); i++) {
        const tl_cuda_kernel *k = tl_cuda_kernel_at(i);
        if ((k->family == TL_KF_CONE) != cone)
            continue;
        if (n < cap) {
            out[n].name = k->name;
            out[n].quality = k->quality;
            /* the others serve horizontal rows only */
            out[n].planes =
                k->family == TL_KF_PLANE || (k->family == TL_KF_CONE && k->slices == 1);
            out[n].slices = (uint32_t)k->slices;
            out[n].params = k->params;
        }
        n++;
    }
    return n;
}

static size_t cuda_memory_used(const void *state)
{
    return ((const tl_cuda_state *)state)->mem;
}

static const char *cuda_device_name(const void *state)
{
    return ((const tl_cuda_state *)state)->device_name;
}

static void cuda_device_id(const void *state, tl_device_id *id)
{
    const tl_cuda_state *s = (const tl_cuda_state *)state;
    cudaDeviceProp p;
    int drv = 0, rt = 0;
    snprintf(id->name, sizeof id->name, "%s", s->device_name);
    if (cudaGetDeviceProperties(&p, s->device) == cudaSuccess) {
        snprintf(id->name, sizeof id->name, "%.159s", p.name);
        tl_cuda_format_uuid(&p.uuid, id->uuid);
        id->cc_major = p.major;
        id->cc_minor = p.minor;
        id->sm_count = p.multiProcessorCount;
    }
    /* the kernel module's version ("580.65.06"), which changes more often than the CUDA
     * driver API version it implements; that one where /proc does not say */
    char line[256] = "", ver[32] = "";
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (f) {
        if (fgets(line, sizeof line, f)) {
            const char *m = strstr(line, "Kernel Module");
            if (m && sscanf(m + strlen("Kernel Module"), " %31s", ver) != 1)
                ver[0] = '\0';
        }
        fclose(f);
    }
    if (cudaDriverGetVersion(&drv) == cudaSuccess)
        snprintf(id->driver, sizeof id->driver, "%s%sCUDA %d.%d", ver, ver[0] ? " " : "",
                 drv / 1000, drv % 1000 / 10);
    else
        snprintf(id->driver, sizeof id->driver, "%s", ver);
    if (cudaRuntimeGetVersion(&rt) == cudaSuccess)
        snprintf(id->runtime, sizeof id->runtime, "%d.%d", rt / 1000, rt % 1000 / 10);
}

/* Half acquisition's column weights (gpu/halfacq.c), once per engine. */
static tl_status cuda_set_column_weights(void *state, const double *w)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    if (!s->colw)
        return tl_fail(s->eb, TL_EINTERNAL, "column weights without half acquisition");
    TL_TRY(tl_cuda_use_device(s));
    float *h = (float *)malloc(s->cols * sizeof *h);
    if (!h)
        return tl_fail(s->eb, TL_ENOMEM, "out of host memory for the column weights");
    for (uint32_t c = 0; c < s->cols; c++)
        h[c] = (float)w[c];
    cudaError_t e = cudaMemcpy(s->colw, h, s->cols * sizeof *h, cudaMemcpyHostToDevice);
    free(h);
    TL_CUDA(s->eb, e);
    return TL_OK;
}

/* Cone beam's cosine weights (gpu/geometry/cone_beam.c), once per engine. */
static tl_status cuda_set_pixel_weights(void *state, const double *w)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    if (!s->pixw)
        return tl_fail(s->eb, TL_EINTERNAL, "pixel weights without cone beam");
    TL_TRY(tl_cuda_use_device(s));
    const size_t npix = (size_t)s->rows * s->cols;
    float *h = (float *)malloc(npix * sizeof *h);
    if (!h)
        return tl_fail(s->eb, TL_ENOMEM, "out of host memory for the pixel weights");
    for (size_t k = 0; k < npix; k++)
        h[k] = (float)w[k];
    cudaError_t e = cudaMemcpy(s->pixw, h, npix * sizeof *h, cudaMemcpyHostToDevice);
    free(h);
    TL_CUDA(s->eb, e);
    return TL_OK;
}

/* Positional, in the order of tl_backend_ops (C++17 has no designated initialisers). */
extern "C" const tl_backend_ops tl_cuda_backend = {
    "cuda",                 /* name */
    cuda_estimate,          /* estimate */
    cuda_create,            /* create */
    cuda_destroy,           /* destroy */
    cuda_set_filter,        /* set_filter */
    cuda_calib_reset,       /* calib_reset */
    tl_cuda_op_calib_add,   /* calib_add (store.cu) */
    tl_cuda_op_store,       /* store (store.cu) */
    tl_cuda_op_backproject, /* backproject (backproject.cu) */
    cuda_memory_used,       /* memory_used */
    cuda_device_name,       /* device_name */
    tl_cuda_op_acc_alloc,   /* acc_alloc (accumulate.cu) */
    tl_cuda_op_acc_free,    /* acc_free */
    tl_cuda_op_acc_update,  /* acc_update */
    tl_cuda_op_acc_read,    /* acc_read */
    cuda_kernels,           /* kernels */
    tl_cuda_op_bench,       /* bench (bench.cu) */
    tl_cuda_op_bench_store, /* bench_store (bench.cu) */
    cuda_device_id,         /* device_id */
    tl_cuda_op_hw_rates,    /* hw_rates (microbench.cu) */
    tl_cuda_op_fence,       /* fence (store.cu) */
    tl_cuda_op_fence_done,  /* fence_done (store.cu) */
    tl_cuda_op_flush,       /* flush (store.cu) */
    tl_cuda_op_set_phase,   /* set_phase (paganin.cu) */
    tl_cuda_op_corr_counts, /* corr_counts (dezinger.cu) */
    tl_cuda_op_stage_times, /* stage_times (stages.cu) */
    tl_cuda_op_ring_update, /* ring_update (rings.cu) */
    cuda_set_column_weights, /* set_column_weights */
    cuda_set_pixel_weights, /* set_pixel_weights */
    tl_cuda_op_profile_slot, /* profile_slot (profile.cu) */
    tl_cuda_op_profiles,    /* profiles (profile.cu) */
    tl_cuda_op_it_begin,    /* it_begin (iterative.cu) */
    tl_cuda_op_it_image,    /* it_image */
    tl_cuda_op_it_forward,  /* it_forward */
    tl_cuda_op_it_backward, /* it_backward */
    tl_cuda_op_it_sweep,    /* it_sweep (iterative_sweep.cu) */
    tl_cuda_op_it_mark,     /* it_mark */
    tl_cuda_op_it_regularise, /* it_regularise */
    tl_cuda_op_it_end,      /* it_end */
};
