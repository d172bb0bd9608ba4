/* cone_stack.cu — the cone-beam projection stack: a copy of the rolling window as a layered
 * CUDA array, one layer per slot, each layer a whole projection (rows x cols), read
 * through a texture object with hardware bilinear filtering (the cone-tex kernels,
 * bp_cone.cu).
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
 * marks every slot stale. The stack doubles the window's memory, so it is made only for
 * an engine whose quality mode lets the texture kernels (`fast`) serve it; estimate()
 * counts it.
 */
#include "config.h"

#include "gpu/base/backend.h"

#include <stdlib.h>
#include <string.h>

#include "gpu/cuda/cuda_state.cuh"

/* Whether an engine of configuration c gets the stack. */
static bool wants_stack(const tl_engine_config *c)
{
    return c->geometry == TL_GEOMETRY_CONE && c->quality >= TL_QUALITY_FAST;
}

size_t tl_cuda_cone_stack_bytes(const tl_engine_config *c)
{
    if (!wants_stack(c))
        return 0;
    return (size_t)c->window * c->rows * c->cols * sizeof(float) + c->window; /* + stale flags */
}

tl_status tl_cuda_cone_stack_create(tl_cuda_state *s)
{
    if (!wants_stack(&s->cfg))
        return TL_OK;
    s->stack_stale = (bool *)calloc(s->n, sizeof *s->stack_stale);
    if (!s->stack_stale)
        return tl_fail(s->eb, TL_ENOMEM, "out of host memory for the projection stack's flags");
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
    free(s->stack_stale);
    s->stack_tex = 0;
    s->stack = NULL;
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

tl_status tl_cuda_cone_stack_sync(tl_cuda_state *s)
{
    if (!s->stack_stale)
        return TL_OK;
    for (uint32_t k = 0; k < s->n; k++) {
        if (!s->stack_stale[k])
            continue;
        cudaMemcpy3DParms p;
        memset(&p, 0, sizeof p);
        /* slot k: rows slab_el floats apart, starting at its column run of row 0 */
        p.srcPtr = make_cudaPitchedPtr(s->window + (size_t)k * s->pitch_el,
                                       s->slab_el * sizeof(float), s->cols, s->rows);
        p.dstArray = s->stack;
        p.dstPos = make_cudaPos(0, 0, k);
        p.extent = make_cudaExtent(s->cols, s->rows, 1);
        p.kind = cudaMemcpyDeviceToDevice;
        TL_CUDA(s->eb, cudaMemcpy3DAsync(&p, s->stream));
        s->stack_stale[k] = false;
    }
    return TL_OK;
}
