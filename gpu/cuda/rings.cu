/* rings.cu — ring removal on the rolling sinograms (types.h, tl_rings; the estimate's
 * definition and the papers are gpu/base/rings.h): a per-column correction that keeps
 * incremental updates exact. Each frame, fused into its last correction kernel
 * (preprocess.cu, correct_kernel), the column profile m learns the frame and the
 * correction c in use is subtracted. Every window/16 frames ring_update recomputes the
 * estimate on the device — VO: the median of `size` columns by rank counting, one
 * thread per pixel; FW: one block per detector row running the periodised db5 transform
 * in a scratch row — takes the largest change (an atomic max over float bits, read back
 * through pinned memory: the one wait of the update), and, beyond the tolerance, moves
 * c and every slot of the window to the new estimate: the change is filtered like a
 * projection (filter.cu, in the first batch area of the FFT input) and subtracted from
 * every slot. The CPU reference is gpu/cpu/rings.c.
 */
#include "config.h"

#include "gpu/base/backend.h"
#include "gpu/base/rings.h"

#include "gpu/cuda/cuda_state.cuh"

#define TL_RINGS_FW_BLOCK 256 /* threads of the per-row wavelet kernel */
#define TL_RINGS_VO_TILE 256  /* columns (threads) per block of the median kernel */

__constant__ float tl_rings_db5_f[TL_RINGS_DB5_TAPS];

/* Index i reflected into [0, n) without repeating the edge, at any distance. */
__device__ __forceinline__ long ring_mirror(long i, long n)
{
    if (n == 1)
        return 0;
    const long period = 2 * n - 2;
    i = (i < 0 ? -i : i) % period;
    return i < n ? i : period - i;
}

/* VO: est = m − the median of `size` columns around each pixel (rank counting: the value
 * with fewer than half below it and at least half at or below it). One block per tile of
 * TL_RINGS_VO_TILE columns of a row: the tile and its mirrored margins are read once into
 * shared memory, so the size² comparisons read shared memory and compute no index (the
 * mirror's 64-bit modulo per comparison made this the whole 4 ms of an update at 2048²). */
__global__ void __launch_bounds__(TL_RINGS_VO_TILE)
    ring_vo_kernel(const float *__restrict__ m, float *__restrict__ est, uint32_t rows,
                   uint32_t cols, int size)
{
    __shared__ float sh[TL_RINGS_VO_TILE + TL_RINGS_MAX_SIZE];
    const int half = size / 2;
    const long first = (long)blockIdx.x * TL_RINGS_VO_TILE;
    const uint32_t u = (uint32_t)first + threadIdx.x;
    for (uint32_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const float *row = m + (size_t)r * cols;
        for (int i = threadIdx.x; i < TL_RINGS_VO_TILE + 2 * half; i += blockDim.x)
            sh[i] = row[ring_mirror(first - half + i, cols)];
        __syncthreads();
        if (u < cols) {
            const float *win = sh + threadIdx.x; /* columns u − half .. u + half */
            float med = win[half];
            for (int i = 0; i < size; i++) {
                const float v = win[i];
                int below = 0, same = 0;
                for (int j = 0; j < size; j++) {
                    below += win[j] < v;
                    same += win[j] == v;
                }
                if (below <= half && below + same > half) {
                    med = v;
                    break;
                }
            }
            est[(size_t)r * cols + u] = win[half] - med;
        }
        __syncthreads();
    }
}

/* FW: one block per row: the symmetric extension into x (P long), `level` analysis steps
 * keeping the approximations, as many synthesis steps with zero details, est = m − x. */
__global__ void __launch_bounds__(TL_RINGS_FW_BLOCK)
    ring_fw_kernel(const float *__restrict__ m, float *__restrict__ est, float *tmp, uint32_t rows,
                   uint32_t cols, uint32_t P, uint32_t level)
{
    for (uint32_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *row = m + (size_t)r * cols;
        float *x = tmp + (size_t)blockIdx.x * 2 * P, *y = x + P;
        for (uint32_t i = threadIdx.x; i < P; i += blockDim.x) {
            const uint32_t j = i % (2 * cols);
            x[i] = j < cols ? row[j] : row[2 * cols - 1 - j];
        }
        __syncthreads();
        for (uint32_t l = 0; l < level; l++) {
            const uint32_t n = P >> l;
            for (uint32_t k = threadIdx.x; k < n / 2; k += blockDim.x) {
                float a = 0.f;
                for (int t = 0; t < TL_RINGS_DB5_TAPS; t++)
                    a += tl_rings_db5_f[t] * x[(2 * k + t) % n];
                y[k] = a;
            }
            __syncthreads();
            for (uint32_t k = threadIdx.x; k < n / 2; k += blockDim.x)
                x[k] = y[k];
            __syncthreads();
        }
        for (uint32_t l = level; l-- > 0;) {
            const uint32_t n = P >> l;
            /* y[i] = sum over k, t with 2k + t = i (mod n) of h[t] x[k]: gathered per i */
            for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
                float v = 0.f;
                for (int t = 0; t < TL_RINGS_DB5_TAPS; t++) {
                    const uint32_t d = (i + n * TL_RINGS_DB5_TAPS - t) % n; /* = 2k mod n */
                    if (d % 2 == 0)
                        v += tl_rings_db5_f[t] * x[d / 2];
                }
                y[i] = v;
            }
            __syncthreads();
            for (uint32_t i = threadIdx.x; i < n; i += blockDim.x)
                x[i] = y[i];
            __syncthreads();
        }
        for (uint32_t u = threadIdx.x; u < cols; u += blockDim.x)
            est[(size_t)r * cols + u] = row[u] - x[u];
        __syncthreads();
    }
}

/* The largest |est − c| as float bits (non-negative floats order like their bits). */
__global__ void __launch_bounds__(TL_CUDA_ELEM_BLOCK)
    ring_change_kernel(const float *__restrict__ est, const float *__restrict__ c, size_t n,
                       unsigned *max_bits)
{
    float worst = 0.f;
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < n;
         k += (size_t)gridDim.x * blockDim.x)
        worst = fmaxf(worst, fabsf(est[k] - c[k]));
    for (int off = 16; off > 0; off >>= 1)
        worst = fmaxf(worst, __shfl_down_sync(0xffffffffu, worst, off));
    if ((threadIdx.x & 31) == 0 && worst > 0.f)
        atomicMax(max_bits, __float_as_uint(worst));
}

/* delta = est − c into dst rows (dst_stride apart), c = est. */
__global__ void __launch_bounds__(TL_CUDA_ELEM_BLOCK)
    ring_delta_kernel(const float *__restrict__ est, float *c, uint32_t rows, uint32_t cols,
                      float *dst, size_t dst_stride)
{
    for (uint32_t r = blockIdx.y; r < rows; r += gridDim.y)
        for (uint32_t u = blockIdx.x * blockDim.x + threadIdx.x; u < cols;
             u += gridDim.x * blockDim.x) {
            const size_t k = (size_t)r * cols + u;
            const float e = est[k];
            dst[(size_t)r * dst_stride + u] = e - c[k];
            c[k] = e;
        }
}

/* Every slot of every row: window −= the change of its row (filtered for the window,
 * as measured for the kept measurements), rows fd_stride apart in fd. */
__global__ void __launch_bounds__(TL_CUDA_ELEM_BLOCK)
    ring_window_kernel(float *window, size_t slab_el, size_t pitch_el, uint32_t rows,
                       uint32_t slots, uint32_t cols, const float *__restrict__ fd,
                       size_t fd_stride)
{
    const size_t pairs = (size_t)rows * slots;
    for (size_t q = blockIdx.y; q < pairs; q += gridDim.y) {
        const uint32_t r = (uint32_t)(q / slots), k = (uint32_t)(q % slots);
        float *w = window + r * slab_el + k * pitch_el;
        const float *d = fd + (size_t)r * fd_stride;
        for (uint32_t u = blockIdx.x * blockDim.x + threadIdx.x; u < cols;
             u += gridDim.x * blockDim.x)
            w[u] -= d[u];
    }
}

static uint32_t fw_length(const tl_cuda_state *s)
{
    return tl_rings_fw_length(s->cols, s->cfg.corr.ring_level);
}

size_t tl_cuda_rings_bytes(const tl_engine_config *c)
{
    if (!c->corr.rings)
        return 0;
    const size_t npix = (size_t)c->rows * c->cols;
    size_t tmp = c->corr.rings == TL_RINGS_FW
                     ? (size_t)c->rows * 2 * tl_rings_fw_length(c->cols, c->corr.ring_level)
                     : 0;
    return (4 * npix + tmp) * sizeof(float) + sizeof(unsigned);
}

tl_status tl_cuda_rings_create(tl_cuda_state *s)
{
    s->ring_update_s = -1;
    if (!s->cfg.corr.rings)
        return TL_OK;
    const size_t frame = (size_t)s->rows * s->cols * sizeof(float);
    TL_TRY(tl_cuda_alloc(s, (void **)&s->ring_m, frame, "ring profile"));
    TL_TRY(tl_cuda_alloc(s, (void **)&s->ring_c, frame, "ring correction"));
    TL_TRY(tl_cuda_alloc(s, (void **)&s->ring_est, frame, "ring estimate"));
    TL_TRY(tl_cuda_alloc(s, (void **)&s->ring_fd, frame, "ring change"));
    if (s->cfg.corr.rings == TL_RINGS_FW)
        TL_TRY(tl_cuda_alloc(s, (void **)&s->ring_tmp,
                             (size_t)s->rows * 2 * fw_length(s) * sizeof(float),
                             "ring wavelet rows"));
    TL_TRY(tl_cuda_alloc(s, (void **)&s->d_ringmax, sizeof(unsigned), "ring change maximum"));
    TL_CUDA(s->eb, cudaHostAlloc((void **)&s->h_ringmax, sizeof(unsigned), cudaHostAllocDefault));
    TL_CUDA(s->eb, cudaMemsetAsync(s->ring_m, 0, frame, s->stream));
    TL_CUDA(s->eb, cudaMemsetAsync(s->ring_c, 0, frame, s->stream));
    float h[TL_RINGS_DB5_TAPS];
    for (int t = 0; t < TL_RINGS_DB5_TAPS; t++)
        h[t] = (float)tl_rings_db5[t];
    TL_CUDA(s->eb, cudaMemcpyToSymbol(tl_rings_db5_f, h, sizeof h));
    TL_CUDA(s->eb, cudaEventCreate(&s->rings_ev[0]));
    TL_CUDA(s->eb, cudaEventCreate(&s->rings_ev[1]));
    s->ring_events = 2;
    return TL_OK;
}

void tl_cuda_rings_destroy(tl_cuda_state *s)
{
    void *dev[] = {s->ring_m, s->ring_c, s->ring_est, s->ring_fd, s->ring_tmp, s->d_ringmax};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
        if (dev[i])
            cudaFree(dev[i]);
    if (s->h_ringmax)
        cudaFreeHost(s->h_ringmax);
    for (int i = 0; i < s->ring_events; i++)
        cudaEventDestroy(s->rings_ev[i]);
}

float tl_cuda_ring_next_weight(tl_cuda_state *s)
{
    return (float)tl_rings_weight(++s->ring_frames, s->n);
}

tl_status tl_cuda_op_ring_update(void *state, bool *changed)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    *changed = false;
    if (!s->ring_m || !s->ring_frames)
        return TL_OK;
    TL_TRY(tl_cuda_use_device(s));
    TL_TRY(tl_cuda_flush(s)); /* held frames first: their pad rows are about to be reused */
    const tl_corrections *k = &s->cfg.corr;
    TL_CUDA(s->eb, cudaEventRecord(s->rings_ev[0], s->stream));
    if (k->rings == TL_RINGS_VO) {
        const dim3 grid((s->cols + TL_RINGS_VO_TILE - 1) / TL_RINGS_VO_TILE,
                        s->rows < TL_CUDA_ROW_MAX_GRID ? s->rows : TL_CUDA_ROW_MAX_GRID);
        ring_vo_kernel<<<grid, TL_RINGS_VO_TILE, 0, s->stream>>>(s->ring_m, s->ring_est, s->rows,
                                                                 s->cols, (int)k->ring_size);
        TL_CUDA_LAUNCHED(s->eb, "ring_vo_kernel");
    } else {
        const unsigned blocks = s->rows < TL_CUDA_ROW_MAX_GRID ? s->rows : TL_CUDA_ROW_MAX_GRID;
        ring_fw_kernel<<<blocks, TL_RINGS_FW_BLOCK, 0, s->stream>>>(s->ring_m, s->ring_est,
                                                                    s->ring_tmp, s->rows, s->cols,
                                                                    fw_length(s), k->ring_level);
        TL_CUDA_LAUNCHED(s->eb, "ring_fw_kernel");
    }
    const size_t npix = (size_t)s->rows * s->cols;
    TL_CUDA(s->eb, cudaMemsetAsync(s->d_ringmax, 0, sizeof(unsigned), s->stream));
    ring_change_kernel<<<tl_cuda_elem_grid(npix), TL_CUDA_ELEM_BLOCK, 0, s->stream>>>(
        s->ring_est, s->ring_c, npix, s->d_ringmax);
    TL_CUDA_LAUNCHED(s->eb, "ring_change_kernel");
    TL_CUDA(s->eb, cudaMemcpyAsync(s->h_ringmax, s->d_ringmax, sizeof(unsigned),
                                   cudaMemcpyDeviceToHost, s->stream));
    TL_CUDA(s->eb, cudaStreamSynchronize(s->stream));
    unsigned bits = *(volatile unsigned *)s->h_ringmax;
    float worst;
    memcpy(&worst, &bits, sizeof worst);
    if (worst > k->ring_tolerance) {
        /* the change, filtered like a projection (through the first batch area of the FFT
         * input, whose zero padding stays), then off every slot */
        const bool filt = s->filter_on;
        float *dst = filt ? s->pad : s->ring_fd;
        const size_t stride = filt ? s->padded : s->cols;
        ring_delta_kernel<<<tl_cuda_row_grid(s->rows, s->cols), TL_CUDA_ELEM_BLOCK, 0,
                            s->stream>>>(s->ring_est, s->ring_c, s->rows, s->cols, dst, stride);
        TL_CUDA_LAUNCHED(s->eb, "ring_delta_kernel");
        const size_t pairs = (size_t)s->rows * s->n;
        const dim3 grid = tl_cuda_row_grid(1, s->cols);
        const dim3 g(grid.x,
                     (unsigned)(pairs < TL_CUDA_ROW_MAX_GRID ? pairs : TL_CUDA_ROW_MAX_GRID));
        if (s->meas) { /* the kept measurements take the change as it is */
            ring_window_kernel<<<g, TL_CUDA_ELEM_BLOCK, 0, s->stream>>>(
                s->meas, s->slab_el, s->pitch_el, s->rows, s->n, s->cols, dst, stride);
            TL_CUDA_LAUNCHED(s->eb, "ring_window_kernel (measurements)");
        }
        if (filt) {
            tl_cuda_dsts d = {};
            d.p[0] = s->ring_fd;
            TL_TRY(tl_cuda_filter_rows(s, 1, &d, s->cols));
        }
        ring_window_kernel<<<g, TL_CUDA_ELEM_BLOCK, 0, s->stream>>>(
            s->window, s->slab_el, s->pitch_el, s->rows, s->n, s->cols, s->ring_fd, s->cols);
        TL_CUDA_LAUNCHED(s->eb, "ring_window_kernel");
        tl_cuda_cone_stack_mark(s, -1);
        *changed = true;
    }
    TL_CUDA(s->eb, cudaEventRecord(s->rings_ev[1], s->stream));
    TL_CUDA(s->eb, cudaEventSynchronize(s->rings_ev[1]));
    float ms = 0;
    TL_CUDA(s->eb, cudaEventElapsedTime(&ms, s->rings_ev[0], s->rings_ev[1]));
    s->ring_update_s = ms * 1e-3;
    return TL_OK;
}
