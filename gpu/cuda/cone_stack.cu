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
 */
#include "config.h"

#include "gpu/base/backend.h"

#include <stdlib.h>
#include <string.h>

#include "gpu/cuda/cuda_state.cuh"

#define TRANSPOSE_TILE 32 /* a 32 x 32 tile through shared memory, 32 x 8 threads */

/* Whether an engine of configuration c gets the transposed stack, and the texture stack. */
static bool wants_transposed(const tl_engine_config *c)
{
    return c->geometry == TL_GEOMETRY_CONE;
}
static bool wants_texture(const tl_engine_config *c)
{
    return wants_transposed(c) && c->quality >= TL_QUALITY_FAST;
}

static size_t transposed_bytes(uint32_t window, uint32_t rows, uint32_t cols)
{
    return (size_t)window * (rows + TL_CUDA_TSTACK_PAD_ROWS) * (cols + TL_CUDA_TSTACK_PAD_COLS) *
           sizeof(float);
}

size_t tl_cuda_cone_stack_bytes(const tl_engine_config *c)
{
    if (!wants_transposed(c))
        return 0;
    const size_t texture = (size_t)c->window * c->rows * c->cols * sizeof(float);
    return transposed_bytes(c->window, c->rows, c->cols) + (wants_texture(c) ? texture : 0) +
           c->window; /* + stale flags */
}

tl_status tl_cuda_cone_stack_create(tl_cuda_state *s)
{
    if (!wants_transposed(&s->cfg))
        return TL_OK;
    s->stack_stale = (bool *)calloc(s->n, sizeof *s->stack_stale);
    if (!s->stack_stale)
        return tl_fail(s->eb, TL_ENOMEM, "out of host memory for the projection stack's flags");
    const size_t tbytes = transposed_bytes(s->n, s->rows, s->cols);
    TL_CUDA(s->eb, cudaMalloc(&s->tstack, tbytes));
    TL_CUDA(s->eb, cudaMemset(s->tstack, 0, tbytes)); /* the border, written once */
    s->mem += tbytes;
    if (!wants_texture(&s->cfg))
        return TL_OK;
    cudaChannelFormatDesc fmt = cudaCreateChannelDesc<float>();
    TL_CUDA(s->eb, cudaMalloc3DArray(&s->stack, &fmt, make_cudaExtent(s->cols, s->rows, s->n),
                                     cudaArrayLayered));
    s->mem += (size_t)s->n * s->rows * s->cols * sizeof(float);
    cudaResourceDesc res;
    memset(&res, 0, sizeof res);
    res.resType = cudaResourceTypeArray;
    res.res.array.array = s->stack;
    cudaTextureDesc td;
    memset(&td, 0, sizeof td);
    td.addressMode[0] = td.addressMode[1] = cudaAddressModeBorder; /* zero off the detector */
    td.filterMode = cudaFilterModeLinear;
    td.readMode = cudaReadModeElementType;
    td.normalizedCoords = 0;
    TL_CUDA(s->eb, cudaCreateTextureObject(&s->stack_tex, &res, &td, NULL));
    return TL_OK;
}

void tl_cuda_cone_stack_destroy(tl_cuda_state *s)
{
    if (s->stack_tex)
        cudaDestroyTextureObject(s->stack_tex);
    if (s->stack)
        cudaFreeArray(s->stack);
    cudaFree(s->tstack);
    free(s->stack_stale);
    s->stack_tex = 0;
    s->stack = NULL;
    s->tstack = NULL;
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

static tl_status sync_slot(tl_cuda_state *s, uint32_t k)
{
    const dim3 grid((unsigned)((s->cols + TRANSPOSE_TILE - 1) / TRANSPOSE_TILE),
                    (unsigned)((s->rows + TRANSPOSE_TILE - 1) / TRANSPOSE_TILE));
    transpose_kernel<<<grid, dim3(TRANSPOSE_TILE, 8), 0, s->stream>>>(
        s->window, s->pitch_el, s->slab_el, (int)k, (int)s->rows, (int)s->cols, s->tstack);
    TL_CUDA_LAUNCHED(s->eb, "transpose_kernel");
    if (!s->stack)
        return TL_OK;
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
    return TL_OK;
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
