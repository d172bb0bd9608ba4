/* cone_stack.cu — the cone-beam projection stacks, copies of the rolling window one
 * projection after another: the texture stack, a layered CUDA array (one layer per slot,
 * rows x cols) read through a texture object with hardware bilinear filtering (the
 * cone-tex kernels, bp_cone.cu), and the transposed stack, plain device memory with each
 * projection stored column after column (v the fastest axis; the cone-col kernels,
 * bp_cone_column.cu, whose warps walk detector columns).
 *
 * Why a copy: the window is stored sinogram-major (row, slot, column: cuda_state.cuh), which
 * parallel beam needs and which keeps a projection's rows a whole slab apart, so no texture
 * can interpolate between two detector rows of it. Cone beam reads every projection in two
 * dimensions; Lu, Ino and Hagihara (seed 002, §3.2) and RTK's kernel_fdk_3Dgrid keep the
 * projections in a layered texture for exactly this. The copy of a 1024^2 projection
 * moves 4 MB on the device (a few microseconds), and it is made lazily: a stored slot is
 * marked stale, and every stale slot is copied before anything reads the stack (after the
 * held filter passes, tl_cuda_flush), so batched filtering is untouched and a slot is
 * copied once however often it is read. A ring-removal update that rewrote the window
 * marks every slot stale. Each stack costs the window's memory again: the transposed one is
 * made for every cone-beam engine (its kernels are exact and the fastest), the texture
 * one only for an engine whose quality mode lets the texture kernels (`fast`) serve it;
 * estimate() counts both.
 *
 * A `fast` engine also keeps the texture stack in float16 (DESIGN.md §3: `fast` allows
 * 16-bit storage; the issue's "fp16 storage variants"), read by the kernels named cone-*16:
 * half the bytes per texel through L1 and L2 for the same filtered fetch. float16 holds
 * 65504 at most and 11 significant bits, so each slot is multiplied by a power of two that
 * puts its max |value| just under 2^14 (exact in float, and a factor the kernels fold into
 * the projection's weight): data in any unit keep float16's relative precision, and no
 * value overflows. The max is found on the device while the slot is copied.
 *
 * The quad stacks hold, in the transposed stack's layout, the four bilinear taps of every
 * (column, row) in one element: a float4, and in `fast` engines four float16 (scaled as
 * the float16 texture stack). A column kernel's update is then one
 * 16- or 8-byte load instead of four 4-byte ones (bp_cone_column.cu): on Hopper the
 * cone-col kernels issue instructions at the SM's limit, and three of every four loads
 * and their address arithmetic are gone. The price is memory, 16 + 8 bytes a pixel: four
 * times the window and more, which a large window cannot spare. So the quad stacks are the
 * one optional part: made last (after every buffer the engine needs), only where they fit
 * with a quarter of the device's memory still free for what comes later (tracked slices'
 * accumulators, other engines), and not counted by estimate(), so that a window which fits
 * without them is never refused for them. Where they are not made, the kernels that read
 * them say so by name and size (tl_cuda_cone_can_serve) and selection passes them over.
 *
 * The mirror stack (`fast` engines) holds each texel of the float16 stack beside the texel
 * of the mirrored row (rows - 1 - r, same column): half2 texels, filtered together, so one
 * fetch at (u, v) gives the samples at v and at rows - 1 - v with mirrored fractions. Where
 * the source's plane meets the detector in its middle row, those are the samples of a
 * voxel and of its mirror image about that plane (bp_cone_column.cu, cone-colmir16).
 * Optional as the quads, and made before them: 4 bytes a pixel, and its kernels are the
 * faster where both can serve.
 */
#define OPTIONAL_FREE_SHARE 4 /* optional stacks leave 1 / OPTIONAL_FREE_SHARE free */
#include "config.h"

#include "gpu/base/backend.h"

#include <stdlib.h>
#include <string.h>

#include <cuda_fp16.h>

#include "gpu/cuda/cuda_state.cuh"

#define TRANSPOSE_TILE 32 /* a 32 x 32 tile through shared memory, 32 x 8 threads */
#define HALF_TOP_EXP 14   /* a float16 slot's max |value| is scaled to below 2^14 */
#define HALF_THREADS 256  /* the float16 copy: threads per block */

/* Whether an engine of configuration c gets the transposed stack, and the texture stack. */
static bool wants_transposed(const tl_engine_config *c)
{
    return c->geometry == TL_GEOMETRY_CONE;
}
static bool wants_texture(const tl_engine_config *c)
{
    return wants_transposed(c) && c->quality >= TL_QUALITY_FAST;
}

/* Elements of the transposed (and of each quad) stack, border included. */
static size_t transposed_elements(uint32_t window, uint32_t rows, uint32_t cols)
{
    return (size_t)window * (rows + TL_CUDA_TSTACK_PAD_ROWS) * (cols + TL_CUDA_TSTACK_PAD_COLS);
}

size_t tl_cuda_cone_stack_bytes(const tl_engine_config *c)
{
    if (!wants_transposed(c))
        return 0;
    const size_t pixels = (size_t)c->window * c->rows * c->cols;
    const size_t padded = transposed_elements(c->window, c->rows, c->cols);
    const size_t textures = pixels * (sizeof(float) + sizeof(__half)) +
                            (size_t)c->window * (sizeof(float) + sizeof(unsigned));
    return padded * sizeof(float) + (wants_texture(c) ? textures : 0) +
           c->window; /* + stale flags; the quads are optional (above) */
}

size_t tl_cuda_cone_mirror_bytes(const tl_engine_config *c)
{
    return wants_texture(c) ? (size_t)c->window * c->rows * c->cols * sizeof(__half2) : 0;
}

size_t tl_cuda_cone_quad_bytes(const tl_engine_config *c)
{
    if (!wants_transposed(c))
        return 0;
    return transposed_elements(c->window, c->rows, c->cols) *
           (sizeof(float4) + (wants_texture(c) ? sizeof(uint2) : 0));
}

/* A texture object reading layered array a, bilinear, zero off the detector. */
static tl_status make_texture(tl_cuda_state *s, cudaArray_t a, cudaTextureObject_t *tex)
{
    cudaResourceDesc res;
    memset(&res, 0, sizeof res);
    res.resType = cudaResourceTypeArray;
    res.res.array.array = a;
    cudaTextureDesc td;
    memset(&td, 0, sizeof td);
    td.addressMode[0] = td.addressMode[1] = cudaAddressModeBorder; /* zero off the detector */
    td.filterMode = cudaFilterModeLinear;
    td.readMode = cudaReadModeElementType; /* float16 texels are read as float */
    td.normalizedCoords = 0;
    TL_CUDA(s->eb, cudaCreateTextureObject(tex, &res, &td, NULL));
    return TL_OK;
}

/* A layered array of one layer per slot, texel `texel` bytes of format fmt, written through
 * *surf by the copy kernels and read through *tex. */
static tl_status make_surface_stack(tl_cuda_state *s, cudaChannelFormatDesc fmt, size_t texel,
                                    cudaArray_t *array, cudaTextureObject_t *tex,
                                    cudaSurfaceObject_t *surf)
{
    TL_CUDA(s->eb, cudaMalloc3DArray(array, &fmt, make_cudaExtent(s->cols, s->rows, s->n),
                                     cudaArrayLayered | cudaArraySurfaceLoadStore));
    s->mem += (size_t)s->n * s->rows * s->cols * texel;
    TL_TRY(make_texture(s, *array, tex));
    cudaResourceDesc res;
    memset(&res, 0, sizeof res);
    res.resType = cudaResourceTypeArray;
    res.res.array.array = *array;
    TL_CUDA(s->eb, cudaCreateSurfaceObject(surf, &res));
    return TL_OK;
}

static tl_status create_half_stack(tl_cuda_state *s)
{
    TL_TRY(make_surface_stack(s, cudaCreateChannelDescHalf(), sizeof(__half), &s->stack16,
                              &s->stack16_tex, &s->stack16_surf));
    TL_TRY(tl_cuda_alloc(s, (void **)&s->stack16_scale, (size_t)s->n * sizeof(float),
                         "float16 stack scales"));
    TL_TRY(tl_cuda_alloc(s, (void **)&s->stack16_maxabs, (size_t)s->n * sizeof(unsigned),
                         "float16 stack scales"));
    return TL_OK;
}

tl_status tl_cuda_cone_stack_create(tl_cuda_state *s)
{
    if (!wants_transposed(&s->cfg))
        return TL_OK;
    s->stack_stale = (bool *)calloc(s->n, sizeof *s->stack_stale);
    if (!s->stack_stale)
        return tl_fail(s->eb, TL_ENOMEM, "out of host memory for the projection stack's flags");
    const size_t padded = transposed_elements(s->n, s->rows, s->cols);
    TL_CUDA(s->eb, cudaMalloc(&s->tstack, padded * sizeof(float)));
    TL_CUDA(s->eb, cudaMemset(s->tstack, 0, padded * sizeof(float))); /* the border, once */
    s->mem += padded * sizeof(float);
    if (!wants_texture(&s->cfg))
        return TL_OK;
    cudaChannelFormatDesc fmt = cudaCreateChannelDesc<float>();
    TL_CUDA(s->eb, cudaMalloc3DArray(&s->stack, &fmt, make_cudaExtent(s->cols, s->rows, s->n),
                                     cudaArrayLayered));
    s->mem += (size_t)s->n * s->rows * s->cols * sizeof(float);
    TL_TRY(make_texture(s, s->stack, &s->stack_tex));
    return create_half_stack(s);
}

/* Whether `bytes` more leave the device a share of its memory free (0: nothing wanted). */
static tl_status leaves_room(tl_cuda_state *s, size_t bytes, bool *room)
{
    size_t free_b = 0, total_b = 0;
    *room = false;
    if (bytes == 0)
        return TL_OK;
    TL_CUDA(s->eb, cudaMemGetInfo(&free_b, &total_b));
    *room = free_b >= bytes && free_b - bytes >= total_b / OPTIONAL_FREE_SHARE;
    return TL_OK;
}

static tl_status create_mirror_stack(tl_cuda_state *s)
{
    return make_surface_stack(s, cudaCreateChannelDescHalf2(), sizeof(__half2), &s->stackm16,
                              &s->stackm16_tex, &s->stackm16_surf);
}

tl_status tl_cuda_cone_optional_create(tl_cuda_state *s)
{
    bool room;
    TL_TRY(leaves_room(s, tl_cuda_cone_mirror_bytes(&s->cfg), &room));
    if (room) /* else tl_cuda_cone_can_serve names what is missing */
        TL_TRY(create_mirror_stack(s));
    TL_TRY(leaves_room(s, tl_cuda_cone_quad_bytes(&s->cfg), &room));
    if (!room)
        return TL_OK;
    const size_t padded = transposed_elements(s->n, s->rows, s->cols);
    TL_TRY(tl_cuda_alloc(s, (void **)&s->tquad, padded * sizeof(float4), "quad stack"));
    if (wants_texture(&s->cfg))
        TL_TRY(tl_cuda_alloc(s, (void **)&s->tquad16, padded * sizeof(uint2),
                             "float16 quad stack"));
    return TL_OK;
}

void tl_cuda_cone_stack_destroy(tl_cuda_state *s)
{
    if (s->stack_tex)
        cudaDestroyTextureObject(s->stack_tex);
    if (s->stack)
        cudaFreeArray(s->stack);
    if (s->stack16_tex)
        cudaDestroyTextureObject(s->stack16_tex);
    if (s->stack16_surf)
        cudaDestroySurfaceObject(s->stack16_surf);
    if (s->stack16)
        cudaFreeArray(s->stack16);
    if (s->stackm16_tex)
        cudaDestroyTextureObject(s->stackm16_tex);
    if (s->stackm16_surf)
        cudaDestroySurfaceObject(s->stackm16_surf);
    if (s->stackm16)
        cudaFreeArray(s->stackm16);
    cudaFree(s->stack16_scale);
    cudaFree(s->stack16_maxabs);
    cudaFree(s->tstack);
    cudaFree(s->tquad);
    cudaFree(s->tquad16);
    free(s->stack_stale);
    s->stack_tex = s->stack16_tex = s->stackm16_tex = 0;
    s->stack16_surf = s->stackm16_surf = 0;
    s->stack = s->stack16 = s->stackm16 = NULL;
    s->stack16_scale = NULL;
    s->stack16_maxabs = NULL;
    s->tstack = NULL;
    s->tquad = NULL;
    s->tquad16 = NULL;
    s->stack_stale = NULL;
}

void tl_cuda_cone_stack_mark(tl_cuda_state *s, int32_t slot)
{
    if (!s->stack_stale)
        return;
    if (slot >= 0) {
        s->stack_stale[slot] = true;
        return;
    }
    for (uint32_t k = 0; k < s->n; k++) /* every slot */
        s->stack_stale[k] = true;
}

/* Slot `slot` of the window (row r, column c at r * slab_el + slot * pitch_el + c) into
 * the inside of its projection of the transposed stack (cuda_state.cuh), a tile at a time. */
__global__ void transpose_kernel(const float *__restrict__ window, size_t pitch_el,
                                 size_t slab_el, int slot, int rows, int cols,
                                 float *__restrict__ tstack)
{
    __shared__ float tile[TRANSPOSE_TILE][TRANSPOSE_TILE + 1]; /* +1: no bank conflicts */
    const int c0 = blockIdx.x * TRANSPOSE_TILE, r0 = blockIdx.y * TRANSPOSE_TILE;
    const float *src = window + (size_t)slot * pitch_el;
    const int ld = rows + TL_CUDA_TSTACK_PAD_ROWS;
    float *dst = tstack + (size_t)slot * (cols + TL_CUDA_TSTACK_PAD_COLS) * ld + ld + 1;
    for (int k = threadIdx.y; k < TRANSPOSE_TILE; k += blockDim.y) {
        const int r = r0 + k, c = c0 + threadIdx.x;
        if (r < rows && c < cols)
            tile[k][threadIdx.x] = src[(size_t)r * slab_el + c];
    }
    __syncthreads();
    for (int k = threadIdx.y; k < TRANSPOSE_TILE; k += blockDim.y) {
        const int c = c0 + k, r = r0 + threadIdx.x;
        if (r < rows && c < cols)
            dst[(size_t)c * ld + r] = tile[threadIdx.x][k];
    }
}

/* Slot `slot`'s max |value| into *maxabs (as uint bits: they order as the floats do). */
__global__ void half_maxabs_kernel(const float *__restrict__ window, size_t pitch_el,
                                   size_t slab_el, int slot, int rows, int cols,
                                   unsigned *maxabs)
{
    const float *src = window + (size_t)slot * pitch_el;
    float m = 0.f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)rows * cols;
         i += (size_t)gridDim.x * blockDim.x)
        m = fmaxf(m, fabsf(src[(i / cols) * slab_el + i % cols]));
    for (int d = 16; d > 0; d /= 2)
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, d));
    if ((threadIdx.x & 31) == 0)
        atomicMax(maxabs + slot, __float_as_uint(m));
}

/* The power of two that takes max |value| m to below 2^HALF_TOP_EXP (1 for 0, inf, NaN). */
__device__ __forceinline__ float half_scale(float m)
{
    if (!(m > 0.f) || !isfinite(m))
        return 1.f;
    int e;
    frexpf(m, &e); /* m < 2^e */
    return ldexpf(1.f, max(-126, min(127, HALF_TOP_EXP - e)));
}

/* Slot `slot`, scaled into float16's range, into its layer of the float16 stack and, where
 * msurf is not 0, with its mirrored rows into its layer of the mirror stack. */
__global__ void half_copy_kernel(const float *__restrict__ window, size_t pitch_el,
                                 size_t slab_el, int slot, int rows, int cols,
                                 const unsigned *__restrict__ maxabs, cudaSurfaceObject_t surf,
                                 cudaSurfaceObject_t msurf, float *scale_out)
{
    const float *src = window + (size_t)slot * pitch_el;
    const float scale = half_scale(__uint_as_float(maxabs[slot]));
    if (blockIdx.x == 0 && threadIdx.x == 0)
        scale_out[slot] = 1.f / scale; /* exact: a power of two */
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)rows * cols;
         i += (size_t)gridDim.x * blockDim.x) {
        const int r = (int)(i / cols), c = (int)(i % cols);
        const __half h = __float2half_rn(src[(size_t)r * slab_el + c] * scale);
        surf2DLayeredwrite(__half_as_ushort(h), surf, c * (int)sizeof(__half), r, slot);
        if (!msurf)
            continue;
        const __half m = __float2half_rn(src[(size_t)(rows - 1 - r) * slab_el + c] * scale);
        const __half2 both = __halves2half2(h, m);
        surf2DLayeredwrite(*reinterpret_cast<const unsigned *>(&both), msurf,
                           c * (int)sizeof(__half2), r, slot);
    }
}

/* Slot `slot`'s quads from its (bordered) projection of the transposed stack: the taps of
 * (pc, pr) are at pc and pc + 1, pr and pr + 1; the last padded column and row, whose
 * taps would leave the projection, are zero (no kernel reads them). q16: NULL, or the
 * float16 quads, scaled as the float16 texture stack (maxabs: its max |value|). */
__global__ void quad_kernel(const float *__restrict__ tstack, int slot, int ld, int pcols,
                            float4 *__restrict__ q32, uint2 *__restrict__ q16,
                            const unsigned *__restrict__ maxabs)
{
    const size_t base = (size_t)slot * pcols * ld;
    const float *t = tstack + base;
    const float scale = q16 ? half_scale(__uint_as_float(maxabs[slot])) : 1.f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)pcols * ld;
         i += (size_t)gridDim.x * blockDim.x) {
        const int pc = (int)(i / ld), pr = (int)(i % ld);
        float4 q = make_float4(0.f, 0.f, 0.f, 0.f);
        if (pc + 1 < pcols && pr + 1 < ld) {
            const float *tap = t + (size_t)pc * ld + pr;
            q = make_float4(tap[0], tap[ld], tap[1], tap[ld + 1]);
        }
        q32[base + i] = q;
        if (!q16)
            continue;
        /* by column (rows r, r + 1 of c, then of c + 1): both rows lerp in one half2 op */
        const __half2 left = __floats2half2_rn(q.x * scale, q.z * scale);
        const __half2 right = __floats2half2_rn(q.y * scale, q.w * scale);
        q16[base + i] = make_uint2(*(const unsigned *)&left, *(const unsigned *)&right);
    }
}

static tl_status sync_quads(tl_cuda_state *s, uint32_t k)
{
    const int ld = (int)s->rows + TL_CUDA_TSTACK_PAD_ROWS;
    const int pcols = (int)s->cols + TL_CUDA_TSTACK_PAD_COLS;
    const unsigned blocks = (unsigned)(((size_t)ld * pcols + HALF_THREADS - 1) / HALF_THREADS);
    quad_kernel<<<blocks, HALF_THREADS, 0, s->stream>>>(s->tstack, (int)k, ld, pcols, s->tquad,
                                                        s->tquad16, s->stack16_maxabs);
    TL_CUDA_LAUNCHED(s->eb, "quad_kernel");
    return TL_OK;
}

static tl_status sync_half_slot(tl_cuda_state *s, uint32_t k)
{
    const size_t pixels = (size_t)s->rows * s->cols;
    const unsigned blocks = (unsigned)((pixels + HALF_THREADS - 1) / HALF_THREADS);
    TL_CUDA(s->eb, cudaMemsetAsync(s->stack16_maxabs + k, 0, sizeof(unsigned), s->stream));
    half_maxabs_kernel<<<blocks, HALF_THREADS, 0, s->stream>>>(
        s->window, s->pitch_el, s->slab_el, (int)k, (int)s->rows, (int)s->cols,
        s->stack16_maxabs);
    TL_CUDA_LAUNCHED(s->eb, "half_maxabs_kernel");
    half_copy_kernel<<<blocks, HALF_THREADS, 0, s->stream>>>(
        s->window, s->pitch_el, s->slab_el, (int)k, (int)s->rows, (int)s->cols,
        s->stack16_maxabs, s->stack16_surf, s->stackm16_surf, s->stack16_scale);
    TL_CUDA_LAUNCHED(s->eb, "half_copy_kernel");
    return TL_OK;
}

static tl_status sync_slot(tl_cuda_state *s, uint32_t k)
{
    const dim3 grid((unsigned)((s->cols + TRANSPOSE_TILE - 1) / TRANSPOSE_TILE),
                    (unsigned)((s->rows + TRANSPOSE_TILE - 1) / TRANSPOSE_TILE));
    transpose_kernel<<<grid, dim3(TRANSPOSE_TILE, 8), 0, s->stream>>>(
        s->window, s->pitch_el, s->slab_el, (int)k, (int)s->rows, (int)s->cols, s->tstack);
    TL_CUDA_LAUNCHED(s->eb, "transpose_kernel");
    if (!s->stack)
        return s->tquad ? sync_quads(s, k) : TL_OK;
    cudaMemcpy3DParms p;
    memset(&p, 0, sizeof p);
    /* slot k: rows slab_el floats apart, starting at its column run of row 0 */
    p.srcPtr = make_cudaPitchedPtr(s->window + (size_t)k * s->pitch_el, s->slab_el * sizeof(float),
                                   s->cols, s->rows);
    p.dstArray = s->stack;
    p.dstPos = make_cudaPos(0, 0, k);
    p.extent = make_cudaExtent(s->cols, s->rows, 1);
    p.kind = cudaMemcpyDeviceToDevice;
    TL_CUDA(s->eb, cudaMemcpy3DAsync(&p, s->stream));
    TL_TRY(sync_half_slot(s, k));
    return s->tquad ? sync_quads(s, k) : TL_OK; /* after the float16 max */
}

tl_status tl_cuda_cone_stack_sync(tl_cuda_state *s)
{
    if (!s->stack_stale)
        return TL_OK;
    for (uint32_t k = 0; k < s->n; k++) {
        if (!s->stack_stale[k])
            continue;
        TL_TRY(sync_slot(s, k));
        s->stack_stale[k] = false;
    }
    return TL_OK;
}
