/* microbench.cu — the card's own "Table 10 row" (engine.h, tl_engine_hw_rates): the unit
 * rates that decide which back-projection kernel family wins on this GPU.
 *
 * Why: Chilingaryan et al. 2020, J. Real-Time Image Proc. 17:1331, Sects. 3.4 and 3.7
 * (ARCHITECTURE.md §4.3 and §6.2 AP-2), show that the winner between the texture kernels
 * and the ALU + shared-memory kernels is set by a few ratios: FP32 flops per texel,
 * shared-memory words per texel, conversions per texel, and whether conversions overlap
 * with FP32 work. The performance model (ARCHITECTURE.md §4.3) must use the installed
 * card's measured values, not datasheet numbers; the tuner prints this row next to its
 * timings. Measured here, on the engine's device and stream:
 *
 *   - texture filter rate (G texels/s = fetches per second) of 2-D textures over pitched
 *     memory, with the access pattern of back projection: every thread loops over
 *     MB_TEX_PROJ projections and fetches at (x cos p - y sin p + c, p + 0.5). Formats:
 *     float, float2 and half4 (16-bit float channels, returned as float4) with linear
 *     filtering, float and float2 with nearest (point) sampling; thread layouts: linear
 *     (row-major pixels) and the Z-order of Chilingaryan et al. 2020, Sect. 5.5 (4x4
 *     squares of 2x2 sub-squares). Each thread owns MB_TEX_PIX pixels so that several
 *     fetches are in flight per warp (one pixel per thread is latency-bound on the H100;
 *     bp_texture.cu);
 *   - FP32 FMA rate (G FMA/s) and the conversions the ALU kernels use, floorf (FRND),
 *     __float2int_rd (F2I) and __half2float (G ops/s), each alone, and each interleaved
 *     with FMAs: "overlap" = time(mixed) / (time(FMA alone) + time(conversions alone)),
 *     1 when they share a pipe, less when they overlap. The mix is balanced at
 *     MB_FMA_PER_CVT FMAs per conversion (128 : 16 lanes on sm_90), so two fully
 *     independent pipes would give 0.5; one warp instruction per clock per scheduler (no
 *     dual issue) puts the floor at (64 FMA + 8 cvt + 8 XOR) / 128 = 0.625;
 *   - shared-memory load bandwidth (GB/s) for 32-, 64- and 128-bit loads (conflict-free:
 *     each warp reads consecutive words);
 *   - the SM clock (MHz) during a long FP32 kernel: clock64() cycles over event time.
 *
 * Method (Chilingaryan et al. 2020, Sect. 2.3; ARCHITECTURE.md §4.2; like bench.cu): one
 * warm-up launch, then the median of MB_REPS launches timed with CUDA events; the ALU,
 * shared-memory and clock kernels run exactly one full wave (blocks per SM from the occupancy
 * calculator). All buffers (about 32 MB) are allocated first and freed on every path. About
 * 0.35 s on an H100.
 *
 * Expected: the per-SM rates of ARCHITECTURE.md §4.3 (on an H100, per SM and clock: 4
 * texels, 128 FMAs, 16 conversions, 128 bytes of shared memory) times SMs and clock.
 * Measured, the 64-bit texel formats fall short with the linear thread layout (the
 * locality effect of Sect. 5.5) and __half2float compiles to HADD2.F32 on the FP32
 * pipe, so it overlaps FP32 work hardly at all (figures: BENCHMARKS.md).
 *
 * Rows, in this order (at most cap of them are measured and written): 8 texture rows,
 * FP32 FMA, 3 conversions, 3 overlaps, 3 shared-memory widths, the SM clock: 19 in all.
 *
 * The cos/sin table lives in __constant__ memory, one per process and device, like the
 * texture kernel's; two engines measuring at once write the same values into it.
 */
#include "config.h"

#include "gpu/base/backend.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include <cuda_fp16.h>

#include "gpu/cuda/cuda_state.cuh"

#define MB_REPS 5 /* timed launches per rate; the median is reported */

/* ---- texture filter rate ------------------------------------------------------------------ */

#define MB_TEX_W 4096   /* texture: detector bins (x) ... */
#define MB_TEX_PROJ 512 /* ... by projections (y), also the projections per launch */
#define MB_TEX_TEXEL 8  /* bytes of the widest texel (float2, half4): the buffer's pitch */
#define MB_TEX_IMG \
    2048                 /* the grid covers a 2048 x 2048 slice: every u lies inside the
                              texture (|u - c| < 1449 < W / 2), and its 16384 blocks spread
                              evenly over the SMs (1024 x 1024 = 4096 blocks left 4 SMs with
                              32 blocks and the rest with 31: a 3 % tail) */
#define MB_TEX_TILE 16   /* a block covers 16 x 16 pixels (Alg. 1's block) ... */
#define MB_TEX_PIX 4     /* ... with 16 x 4 threads of 4 pixels each: 4 fetches in flight */
#define MB_TEX_FILL 0x3C /* byte pattern of the texels: 0.0115f, half 1.06; no NaN, no denormal */

static_assert(MB_TEX_IMG % MB_TEX_TILE == 0, "the grid must cover the slice exactly");
static_assert(MB_TEX_TILE % MB_TEX_PIX == 0, "pixels per thread must divide the tile");

__constant__ float2 c_mb_trig[MB_TEX_PROJ]; /* (cos, sin) of projection p, angles over pi */

/* Accumulation and reduction of the fetched values, per texel type. */
__device__ __forceinline__ void mb_add(float &a, float v)
{
    a += v;
}
__device__ __forceinline__ void mb_add(float2 &a, float2 v)
{
    a.x += v.x;
    a.y += v.y;
}
__device__ __forceinline__ void mb_add(float4 &a, float4 v)
{
    a.x += v.x;
    a.y += v.y;
    a.z += v.z;
    a.w += v.w;
}
__device__ __forceinline__ float mb_sum(float a)
{
    return a;
}
__device__ __forceinline__ float mb_sum(float2 a)
{
    return a.x + a.y;
}
__device__ __forceinline__ float mb_sum(float4 a)
{
    return (a.x + a.y) + (a.z + a.w);
}
template <typename T> __device__ __forceinline__ T mb_zero();
template <> __device__ __forceinline__ float mb_zero<float>()
{
    return 0.f;
}
template <> __device__ __forceinline__ float2 mb_zero<float2>()
{
    return make_float2(0.f, 0.f);
}
template <> __device__ __forceinline__ float4 mb_zero<float4>()
{
    return make_float4(0.f, 0.f, 0.f, 0.f);
}

/* Back projection without weights: thread (tx, ty) of a 16 x 4 block owns pixels m = 0..3,
 * which are the pixels of virtual thread (tx, ty + 4 m) of a 16 x 16 block. Linear layout:
 * that pixel is (tx, ty + 4 m), so a warp covers 16 x 2 pixels. Z-order (Chilingaryan et al.
 * 2020, Sect. 5.5): square (vy mod 4, vy div 4), sub-square ((tx div 4) mod 2, (tx div 4) div
 * 2), pixel ((tx mod 4) mod 2, (tx mod 4) div 2), offset 4 square + 2 sub-square + pixel, so
 * a warp covers two neighbouring 4 x 4 squares. Every sum is written, so no fetch can be
 * dropped. */
template <typename T, bool ZORDER>
__global__ void __launch_bounds__(MB_TEX_TILE *MB_TEX_TILE / MB_TEX_PIX)
    mb_tex_kernel(cudaTextureObject_t tex, int nproj, float center, float *__restrict__ out)
{
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int step = MB_TEX_TILE / MB_TEX_PIX;
    int gx[MB_TEX_PIX], gy[MB_TEX_PIX];
    float x[MB_TEX_PIX], y[MB_TEX_PIX];
    T acc[MB_TEX_PIX];
#pragma unroll
    for (int m = 0; m < MB_TEX_PIX; m++) {
        const int vy = ty + m * step;
        int px = tx, py = vy;
        if (ZORDER) {
            const int q = tx >> 2, r = tx & 3;
            px = 4 * (vy & 3) + 2 * (q & 1) + (r & 1);
            py = 4 * (vy >> 2) + 2 * (q >> 1) + (r >> 1);
        }
        gx[m] = blockIdx.x * MB_TEX_TILE + px;
        gy[m] = blockIdx.y * MB_TEX_TILE + py;
        x[m] = (float)gx[m] - 0.5f * (MB_TEX_IMG - 1); /* centred on the rotation axis */
        y[m] = (float)gy[m] - 0.5f * (MB_TEX_IMG - 1);
        acc[m] = mb_zero<T>();
    }
    float v = 0.5f; /* texel centre of row p, counted in float: no int -> float conversion */
    for (int p = 0; p < nproj; p++, v += 1.f) {
        const float2 cs = c_mb_trig[p]; /* warp-uniform: a constant-cache broadcast */
#pragma unroll
        for (int m = 0; m < MB_TEX_PIX; m++)
            mb_add(acc[m], tex2D<T>(tex, fmaf(x[m], cs.x, fmaf(-y[m], cs.y, center)), v));
    }
#pragma unroll
    for (int m = 0; m < MB_TEX_PIX; m++)
        out[(size_t)gy[m] * MB_TEX_IMG + gx[m]] = mb_sum(acc[m]);
}

/* ---- conversions and FP32 ------------------------------------------------------------------ */

#define MB_ALU_BLOCK 256  /* threads per block of the ALU, shared-memory and clock kernels */
#define MB_CVT_ILP 8      /* independent conversion chains per thread (latency hiding) */
#define MB_FMA_ILP 8      /* independent FMA chains per thread */
#define MB_FMA_PER_CVT 8  /* FMAs per conversion in a step: 128 FP32 : 16 conversion lanes */
#define MB_ALU_ITERS 4096 /* steps per thread: ~2 ms per kernel on an H100 */
#define MB_CLOCK_ITERS (8 * MB_ALU_ITERS) /* the clock kernel runs ~16 ms */
#define MB_FMA_MUL 0.999f /* a = a * 0.999 + 0.001 stays near 1: no overflow, no denormal */
#define MB_FMA_ADD 0.001f

enum { MB_CVT_FRND = 0, MB_CVT_F2I, MB_CVT_H2F };

/* One conversion of a chain. The value passes through an XOR with a run-time key (0):
 * without it the compiler could fold floorf(floorf(x)); the XOR is an integer op (LOP3),
 * not an FP32 or conversion op, so it does not load the pipes being measured. */
template <int CVT> __device__ __forceinline__ uint32_t mb_cvt(uint32_t v, uint32_t key)
{
    v ^= key;
    if (CVT == MB_CVT_FRND)
        return __float_as_uint(floorf(__uint_as_float(v)));
    if (CVT == MB_CVT_F2I)
        return (uint32_t)__float2int_rd(__uint_as_float(v));
    return __float_as_uint(__half2float(__ushort_as_half((unsigned short)(v & 0xffffu))));
}

/* One step = MB_CVT_ILP conversions (if DO_CVT) and MB_CVT_ILP x MB_FMA_ILP FMAs (if DO_FMA),
 * interleaved; n steps (a run-time count, so nothing is folded). Results are written. */
template <int CVT, bool DO_FMA, bool DO_CVT>
__global__ void __launch_bounds__(MB_ALU_BLOCK)
    mb_alu_kernel(int n, float mul, float add, uint32_t key, float *__restrict__ out)
{
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    float a[MB_FMA_ILP];
    uint32_t c[MB_CVT_ILP];
#pragma unroll
    for (int i = 0; i < MB_FMA_ILP; i++)
        a[i] = (float)(threadIdx.x & 15) * 1e-3f + (float)i;
#pragma unroll
    for (int j = 0; j < MB_CVT_ILP; j++)
        c[j] = __float_as_uint((float)(threadIdx.x + j) + 0.5f);
    for (int it = 0; it < n; it++) {
#pragma unroll
        for (int j = 0; j < MB_CVT_ILP; j++) {
            if (DO_CVT)
                c[j] = mb_cvt<CVT>(c[j], key);
            if (DO_FMA) {
#pragma unroll
                for (int i = 0; i < MB_FMA_ILP; i++)
                    a[i] = fmaf(a[i], mul, add);
            }
        }
    }
    float r = 0.f;
    uint32_t x = 0;
#pragma unroll
    for (int i = 0; i < MB_FMA_ILP; i++)
        r += a[i];
#pragma unroll
    for (int j = 0; j < MB_CVT_ILP; j++)
        x ^= c[j];
    out[tid] = r + __uint_as_float(x);
}

/* FMA chains as above for n steps between two clock64() reads; thread 0 of each block writes
 * the block's cycles. The chains start from the first read and their sum is stored before
 * the barrier that precedes the second, so the loop cannot move outside the two reads. */
__global__ void __launch_bounds__(MB_ALU_BLOCK)
    mb_clock_kernel(int n, float mul, float add, long long *__restrict__ cycles,
                    float *__restrict__ out)
{
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    __syncthreads();
    const long long t0 = clock64();
    float a[MB_FMA_ILP];
#pragma unroll
    for (int i = 0; i < MB_FMA_ILP; i++)
        a[i] = (float)(t0 & 15) * 1e-3f + (float)i;
    for (int it = 0; it < n; it++) {
#pragma unroll
        for (int r = 0; r < MB_FMA_PER_CVT; r++) {
#pragma unroll
            for (int i = 0; i < MB_FMA_ILP; i++)
                a[i] = fmaf(a[i], mul, add);
        }
    }
    float r = 0.f;
#pragma unroll
    for (int i = 0; i < MB_FMA_ILP; i++)
        r += a[i];
    out[tid] = r;
    __syncthreads();
    const long long t1 = clock64();
    if (threadIdx.x == 0)
        cycles[blockIdx.x] = t1 - t0;
}

/* ---- shared memory ------------------------------------------------------------------------ */

#define MB_SH_BYTES 32768             /* static shared array per block */
#define MB_SH_UNROLL 8                /* loads per thread per step, MB_ALU_BLOCK elements apart */
#define MB_SH_PER_THREAD (256 * 1024) /* bytes each thread loads: ~2 ms per kernel on an H100 */

/* Step it reads part (it & rmask) of the array, MB_SH_UNROLL x MB_ALU_BLOCK elements: each
 * warp reads 32 consecutive elements (conflict-free for every width). rmask is a run-time
 * value, so the addresses depend on the loop variable and the loads cannot be hoisted. */
template <typename T>
__global__ void __launch_bounds__(MB_ALU_BLOCK)
    mb_shared_kernel(int n, unsigned rmask, float *__restrict__ out)
{
    constexpr unsigned N = MB_SH_BYTES / sizeof(T);
    static_assert(N % (MB_SH_UNROLL * MB_ALU_BLOCK) == 0, "whole parts of the array");
    __shared__ T buf[N];
    for (unsigned e = threadIdx.x; e < MB_SH_BYTES / 4; e += MB_ALU_BLOCK)
        ((float *)buf)[e] = (float)(e & 1023) * 1e-3f;
    __syncthreads();
    T acc[MB_SH_UNROLL];
#pragma unroll
    for (int j = 0; j < MB_SH_UNROLL; j++)
        acc[j] = mb_zero<T>();
    for (int it = 0; it < n; it++) {
        const T *b = buf + ((unsigned)it & rmask) * (MB_SH_UNROLL * MB_ALU_BLOCK) + threadIdx.x;
#pragma unroll
        for (int j = 0; j < MB_SH_UNROLL; j++)
            mb_add(acc[j], b[j * MB_ALU_BLOCK]);
    }
    float r = 0.f;
#pragma unroll
    for (int j = 0; j < MB_SH_UNROLL; j++)
        r += mb_sum(acc[j]);
    out[blockIdx.x * blockDim.x + threadIdx.x] = r;
}

/* ---- host side ----------------------------------------------------------------------------- */

/* The texture objects: one per (format, filter). */
enum { MB_T_F1_LIN = 0, MB_T_F2_LIN, MB_T_H4_LIN, MB_T_F1_NN, MB_T_F2_NN, MB_NTEX };

typedef struct {
    tl_cuda_state *s;
    tl_hw_rate *rows;
    size_t cap, *n;
    int sms;      /* multiprocessors */
    void *texbuf; /* MB_TEX_PROJ rows of MB_TEX_W texels, pitched */
    size_t pitch;
    float *out;        /* every kernel's results */
    long long *cycles; /* clock kernel: cycles per block */
    long long *cycles_host;
    size_t max_blocks; /* entries of cycles */
    float2 *trig_host;
    cudaTextureObject_t tex[MB_NTEX];
    bool have_tex[MB_NTEX];
} mb_ctx;

static bool room(const mb_ctx *c, size_t rows)
{
    return *c->n + rows <= c->cap;
}

static void emit(mb_ctx *c, const char *name, const char *unit, double value)
{
    if (*c->n < c->cap) {
        c->rows[*c->n].name = name;
        c->rows[*c->n].unit = unit;
        c->rows[*c->n].value = value;
        (*c->n)++;
    }
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

/* One warm-up launch, then the median of MB_REPS timed ones. launch() enqueues the kernel on
 * s->stream and returns a tl_status. */
template <class Launch> static tl_status time_launch(tl_cuda_state *s, Launch launch, double *ms)
{
    double t[MB_REPS];
    TL_TRY(launch());
    TL_CUDA(s->eb, cudaStreamSynchronize(s->stream));
    for (int r = 0; r < MB_REPS; r++) {
        TL_CUDA(s->eb, cudaEventRecord(s->t0, s->stream));
        TL_TRY(launch());
        TL_CUDA(s->eb, cudaEventRecord(s->t1, s->stream));
        TL_TRY(elapsed_ms(s, &t[r]));
    }
    *ms = tl_cuda_median(t, MB_REPS);
    return TL_OK;
}

/* Rate in G per second of `count` things done in ms milliseconds. */
static double giga_per_s(double count, double ms)
{
    return ms > 0 ? count / (ms * 1e-3) / 1e9 : 0;
}

/* Blocks of MB_ALU_BLOCK threads that fill every SM once (one wave). */
template <class K> static tl_status full_wave(mb_ctx *c, K kernel, unsigned *grid)
{
    int per_sm = 0;
    TL_CUDA(c->s->eb,
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, MB_ALU_BLOCK, 0));
    if (per_sm < 1)
        return tl_fail(c->s->eb, TL_EDEVICE,
                       "CUDA: micro-benchmark kernel cannot run a block of %d threads",
                       MB_ALU_BLOCK);
    size_t g = (size_t)c->sms * (size_t)per_sm;
    if (g > c->max_blocks)
        g = c->max_blocks; /* never: the buffers are sized for the device's maximum */
    *grid = (unsigned)g;
    return TL_OK;
}

template <typename T, bool ZORDER> static tl_status tex_rate(mb_ctx *c, int t, double *gtexels)
{
    tl_cuda_state *s = c->s;
    const dim3 block(MB_TEX_TILE, MB_TEX_TILE / MB_TEX_PIX);
    const dim3 grid(MB_TEX_IMG / MB_TEX_TILE, MB_TEX_IMG / MB_TEX_TILE);
    const cudaTextureObject_t tex = c->tex[t];
    double ms = 0;
    TL_TRY(time_launch(
        s,
        [&]() -> tl_status {
            mb_tex_kernel<T, ZORDER>
                <<<grid, block, 0, s->stream>>>(tex, MB_TEX_PROJ, 0.5f * MB_TEX_W, c->out);
            TL_CUDA_LAUNCHED(s->eb, "mb_tex_kernel");
            return TL_OK;
        },
        &ms));
    *gtexels = giga_per_s((double)MB_TEX_IMG * MB_TEX_IMG * MB_TEX_PROJ, ms);
    return TL_OK;
}

template <int CVT, bool DO_FMA, bool DO_CVT>
static tl_status alu_ms(mb_ctx *c, double *ms, double *threads)
{
    tl_cuda_state *s = c->s;
    unsigned grid = 0;
    TL_TRY(full_wave(c, mb_alu_kernel<CVT, DO_FMA, DO_CVT>, &grid));
    *threads = (double)grid * MB_ALU_BLOCK;
    return time_launch(
        s,
        [&]() -> tl_status {
            mb_alu_kernel<CVT, DO_FMA, DO_CVT>
                <<<grid, MB_ALU_BLOCK, 0, s->stream>>>(MB_ALU_ITERS, MB_FMA_MUL, MB_FMA_ADD, 0u,
                                                       c->out);
            TL_CUDA_LAUNCHED(s->eb, "mb_alu_kernel");
            return TL_OK;
        },
        ms);
}

/* Conversions of kind CVT alone (rate) and mixed with FMAs (overlap ratio). */
template <int CVT>
static tl_status cvt_rates(mb_ctx *c, double fma_ms, double *rate, double *overlap)
{
    double cvt_ms = 0, mix_ms = 0, threads = 0;
    TL_TRY((alu_ms<CVT, false, true>(c, &cvt_ms, &threads)));
    *rate = giga_per_s(threads * MB_ALU_ITERS * MB_CVT_ILP, cvt_ms);
    if (overlap) { /* NULL: no room for the overlap rows */
        TL_TRY((alu_ms<CVT, true, true>(c, &mix_ms, &threads)));
        *overlap = fma_ms + cvt_ms > 0 ? mix_ms / (fma_ms + cvt_ms) : 0;
    }
    return TL_OK;
}

template <typename T> static tl_status shared_rate(mb_ctx *c, double *gbs)
{
    tl_cuda_state *s = c->s;
    constexpr unsigned parts = MB_SH_BYTES / (MB_SH_UNROLL * MB_ALU_BLOCK * sizeof(T));
    static_assert((parts & (parts - 1)) == 0, "a power of two of parts");
    const int n = (int)(MB_SH_PER_THREAD / (MB_SH_UNROLL * sizeof(T)));
    /* as much shared memory as possible, so the grid of full_wave is one wave */
    TL_CUDA(s->eb, cudaFuncSetAttribute(mb_shared_kernel<T>,
                                        cudaFuncAttributePreferredSharedMemoryCarveout,
                                        (int)cudaSharedmemCarveoutMaxShared));
    unsigned grid = 0;
    TL_TRY(full_wave(c, mb_shared_kernel<T>, &grid));
    double ms = 0;
    TL_TRY(time_launch(
        s,
        [&]() -> tl_status {
            mb_shared_kernel<T><<<grid, MB_ALU_BLOCK, 0, s->stream>>>(n, parts - 1, c->out);
            TL_CUDA_LAUNCHED(s->eb, "mb_shared_kernel");
            return TL_OK;
        },
        &ms));
    double bytes = (double)grid * MB_ALU_BLOCK * n * MB_SH_UNROLL * sizeof(T);
    *gbs = giga_per_s(bytes, ms);
    return TL_OK;
}

/* Cycles of the slowest block over event time, median of MB_REPS launches after a warm-up. */
static tl_status clock_mhz(mb_ctx *c, double *mhz)
{
    tl_cuda_state *s = c->s;
    unsigned grid = 0;
    TL_TRY(full_wave(c, mb_clock_kernel, &grid));
    double f[MB_REPS];
    for (int r = -1; r < MB_REPS; r++) { /* r = -1: warm-up */
        TL_CUDA(s->eb, cudaEventRecord(s->t0, s->stream));
        mb_clock_kernel<<<grid, MB_ALU_BLOCK, 0, s->stream>>>(MB_CLOCK_ITERS, MB_FMA_MUL,
                                                              MB_FMA_ADD, c->cycles, c->out);
        TL_CUDA_LAUNCHED(s->eb, "mb_clock_kernel");
        TL_CUDA(s->eb, cudaEventRecord(s->t1, s->stream));
        TL_CUDA(s->eb, cudaMemcpyAsync(c->cycles_host, c->cycles, grid * sizeof(long long),
                                       cudaMemcpyDeviceToHost, s->stream));
        double ms = 0;
        TL_TRY(elapsed_ms(s, &ms));
        TL_CUDA(s->eb, cudaStreamSynchronize(s->stream)); /* the cycles have arrived */
        long long most = 0;
        for (unsigned b = 0; b < grid; b++)
            if (c->cycles_host[b] > most)
                most = c->cycles_host[b];
        if (r >= 0)
            f[r] = ms > 0 ? (double)most / (ms * 1e3) : 0; /* cycles per microsecond */
    }
    *mhz = tl_cuda_median(f, MB_REPS);
    return TL_OK;
}

/* Allocations and texture objects; the caller frees them (mb_free) whatever happens. */
static tl_status mb_setup(mb_ctx *c)
{
    tl_cuda_state *s = c->s;
    int dev = s->device, threads_per_sm = 0, blocks_per_sm = 0;
    TL_CUDA(s->eb, cudaDeviceGetAttribute(&c->sms, cudaDevAttrMultiProcessorCount, dev));
    TL_CUDA(s->eb,
            cudaDeviceGetAttribute(&threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, dev));
    TL_CUDA(s->eb,
            cudaDeviceGetAttribute(&blocks_per_sm, cudaDevAttrMaxBlocksPerMultiprocessor, dev));
    if (c->sms < 1 || threads_per_sm < MB_ALU_BLOCK || blocks_per_sm < 1)
        return tl_fail(s->eb, TL_EDEVICE, "CUDA: device %d reports %d SMs of %d threads", dev,
                       c->sms, threads_per_sm);
    int alu_blocks_per_sm = threads_per_sm / MB_ALU_BLOCK;
    if (alu_blocks_per_sm > blocks_per_sm)
        alu_blocks_per_sm = blocks_per_sm;
    c->max_blocks = (size_t)c->sms * (size_t)alu_blocks_per_sm;

    size_t out_floats = (size_t)MB_TEX_IMG * MB_TEX_IMG;
    if (c->max_blocks * MB_ALU_BLOCK > out_floats)
        out_floats = c->max_blocks * MB_ALU_BLOCK;
    /* plain cudaMalloc, not tl_cuda_alloc: these are freed on return, so they stay out of
     * the engine's memory_used */
    TL_CUDA(s->eb, cudaMalloc((void **)&c->out, out_floats * sizeof(float)));
    TL_CUDA(s->eb, cudaMalloc((void **)&c->cycles, c->max_blocks * sizeof(long long)));
    TL_CUDA(s->eb,
            cudaMallocPitch(&c->texbuf, &c->pitch, (size_t)MB_TEX_W * MB_TEX_TEXEL, MB_TEX_PROJ));
    c->cycles_host = (long long *)malloc(c->max_blocks * sizeof(long long));
    c->trig_host = (float2 *)malloc(MB_TEX_PROJ * sizeof(float2));
    if (!c->cycles_host || !c->trig_host)
        return tl_fail(s->eb, TL_ENOMEM, "out of host memory for the micro-benchmarks");

    /* every texture reads the same bytes: 0x3C3C3C3C is 0.0115f, 0x3C3C is half 1.06 */
    TL_CUDA(s->eb, cudaMemset2DAsync(c->texbuf, c->pitch, MB_TEX_FILL,
                                     (size_t)MB_TEX_W * MB_TEX_TEXEL, MB_TEX_PROJ, s->stream));
    const double pi = 3.14159265358979323846;
    for (int p = 0; p < MB_TEX_PROJ; p++) {
        double a = pi * p / MB_TEX_PROJ;
        c->trig_host[p] = make_float2((float)cos(a), (float)sin(a));
    }
    /* pageable source: the call returns once the table has been staged */
    TL_CUDA(s->eb, cudaMemcpyToSymbolAsync(c_mb_trig, c->trig_host, MB_TEX_PROJ * sizeof(float2),
                                           0, cudaMemcpyHostToDevice, s->stream));

    static const struct {
        int kind; /* 0 float, 1 float2, 2 half4 */
        cudaTextureFilterMode filter;
    } spec[MB_NTEX] = {
        {0, cudaFilterModeLinear}, {1, cudaFilterModeLinear}, {2, cudaFilterModeLinear},
        {0, cudaFilterModePoint},  {1, cudaFilterModePoint},
    };
    for (int t = 0; t < MB_NTEX; t++) {
        cudaResourceDesc res = {};
        res.resType = cudaResourceTypePitch2D;
        res.res.pitch2D.devPtr = c->texbuf;
        res.res.pitch2D.desc = spec[t].kind == 0   ? cudaCreateChannelDesc<float>()
                               : spec[t].kind == 1 ? cudaCreateChannelDesc<float2>()
                                                   : cudaCreateChannelDescHalf4();
        res.res.pitch2D.width = MB_TEX_W;
        res.res.pitch2D.height = MB_TEX_PROJ;
        res.res.pitch2D.pitchInBytes = c->pitch;
        cudaTextureDesc td = {};
        td.addressMode[0] = cudaAddressModeBorder;
        td.addressMode[1] = cudaAddressModeBorder;
        td.filterMode = spec[t].filter;
        td.readMode = cudaReadModeElementType; /* half channels come back as float */
        td.normalizedCoords = 0;
        TL_CUDA(s->eb, cudaCreateTextureObject(&c->tex[t], &res, &td, NULL));
        c->have_tex[t] = true;
    }
    return TL_OK;
}

/* Frees everything mb_setup made, after the stream has drained; keeps st's message. */
static tl_status mb_free(mb_ctx *c, tl_status st)
{
    tl_cuda_state *s = c->s;
    cudaError_t e = cudaStreamSynchronize(s->stream);
    const char *call = "cudaStreamSynchronize";
    for (int t = 0; t < MB_NTEX; t++) {
        if (!c->have_tex[t])
            continue;
        cudaError_t e2 = cudaDestroyTextureObject(c->tex[t]);
        if (e == cudaSuccess && e2 != cudaSuccess) {
            e = e2;
            call = "cudaDestroyTextureObject";
        }
    }
    void *dev[3] = {c->texbuf, c->out, c->cycles};
    for (int i = 0; i < 3; i++) {
        if (!dev[i])
            continue;
        cudaError_t e2 = cudaFree(dev[i]);
        if (e == cudaSuccess && e2 != cudaSuccess) {
            e = e2;
            call = "cudaFree";
        }
    }
    free(c->cycles_host);
    free(c->trig_host);
    if (st == TL_OK && e != cudaSuccess)
        return tl_cuda_fail_call(s->eb, e, call, __FILE__, __LINE__);
    if (e != cudaSuccess)
        cudaGetLastError(); /* the first failure's message stands */
    return st;
}

static tl_status mb_run(mb_ctx *c)
{
    double v = 0;
    /* texture filter rates */
    if (room(c, 1)) {
        TL_TRY((tex_rate<float, false>(c, MB_T_F1_LIN, &v)));
        emit(c, "texture float linear", "G texels/s", v);
    }
    if (room(c, 1)) {
        TL_TRY((tex_rate<float, true>(c, MB_T_F1_LIN, &v)));
        emit(c, "texture float linear z-order", "G texels/s", v);
    }
    if (room(c, 1)) {
        TL_TRY((tex_rate<float2, false>(c, MB_T_F2_LIN, &v)));
        emit(c, "texture float2 linear", "G texels/s", v);
    }
    if (room(c, 1)) {
        TL_TRY((tex_rate<float2, true>(c, MB_T_F2_LIN, &v)));
        emit(c, "texture float2 linear z-order", "G texels/s", v);
    }
    if (room(c, 1)) {
        TL_TRY((tex_rate<float4, false>(c, MB_T_H4_LIN, &v)));
        emit(c, "texture half4 linear", "G texels/s", v);
    }
    if (room(c, 1)) {
        TL_TRY((tex_rate<float4, true>(c, MB_T_H4_LIN, &v)));
        emit(c, "texture half4 linear z-order", "G texels/s", v);
    }
    if (room(c, 1)) {
        TL_TRY((tex_rate<float, false>(c, MB_T_F1_NN, &v)));
        emit(c, "texture float nearest", "G texels/s", v);
    }
    if (room(c, 1)) {
        TL_TRY((tex_rate<float2, false>(c, MB_T_F2_NN, &v)));
        emit(c, "texture float2 nearest", "G texels/s", v);
    }

    /* FP32, conversions alone, conversions with FMAs */
    if (!room(c, 1))
        return TL_OK;
    double fma_ms = 0, threads = 0;
    TL_TRY((alu_ms<MB_CVT_FRND, true, false>(c, &fma_ms, &threads)));
    emit(c, "FP32 FMA", "G FMA/s",
         giga_per_s(threads * MB_ALU_ITERS * MB_CVT_ILP * MB_FMA_ILP, fma_ms));
    double rate[3] = {0, 0, 0}, overlap[3] = {0, 0, 0};
    bool mixed = room(c, 6); /* the three overlap rows after the three conversion rows */
    if (room(c, 1))
        TL_TRY(cvt_rates<MB_CVT_FRND>(c, fma_ms, &rate[0], mixed ? &overlap[0] : NULL));
    if (room(c, 2))
        TL_TRY(cvt_rates<MB_CVT_F2I>(c, fma_ms, &rate[1], mixed ? &overlap[1] : NULL));
    if (room(c, 3))
        TL_TRY(cvt_rates<MB_CVT_H2F>(c, fma_ms, &rate[2], mixed ? &overlap[2] : NULL));
    emit(c, "conversion floorf (FRND)", "G ops/s", rate[0]);
    emit(c, "conversion float->int (F2I)", "G ops/s", rate[1]);
    emit(c, "conversion half->float", "G ops/s", rate[2]);
    if (mixed) {
        emit(c, "conversion + FMA overlap (FRND)", "ratio", overlap[0]);
        emit(c, "conversion + FMA overlap (F2I)", "ratio", overlap[1]);
        emit(c, "conversion + FMA overlap (half->float)", "ratio", overlap[2]);
    }

    /* shared memory */
    if (room(c, 1)) {
        TL_TRY(shared_rate<float>(c, &v));
        emit(c, "shared 32-bit loads", "GB/s", v);
    }
    if (room(c, 1)) {
        TL_TRY(shared_rate<float2>(c, &v));
        emit(c, "shared 64-bit loads", "GB/s", v);
    }
    if (room(c, 1)) {
        TL_TRY(shared_rate<float4>(c, &v));
        emit(c, "shared 128-bit loads", "GB/s", v);
    }

    /* the clock the rates above ran at (under FP32 load) */
    if (room(c, 1)) {
        TL_TRY(clock_mhz(c, &v));
        emit(c, "SM clock (measured)", "MHz", v);
    }
    return TL_OK;
}

tl_status tl_cuda_op_hw_rates(void *state, tl_hw_rate *out, size_t cap, size_t *n)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    *n = 0;
    TL_TRY(tl_cuda_use_device(s));
    TL_TRY(tl_cuda_flush(s)); /* the held frames first (store.cu) */
    mb_ctx c = {};
    c.s = s;
    c.rows = out;
    c.cap = out ? cap : 0;
    c.n = n;
    tl_status st = TL_OK;
    if (c.cap > 0) {
        st = mb_setup(&c);
        if (st == TL_OK)
            st = mb_run(&c);
    }
    return mb_free(&c, st);
}
