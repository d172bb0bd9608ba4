/* host.c — host memory for the engine's callers (engine.h, tl_host_alloc): page-locked by
 * the CUDA backend where it runs, plain malloc elsewhere. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "gpu/engine.h"
#ifdef HAVE_CUDA
#include "gpu/cuda/cuda_backend.h"

/* Which backend's memory tl_host_alloc hands out: CUDA's for CUDA, and for AUTO where a
 * GPU is usable (as tl_engine_pick_backend decides). */
static bool host_pinned(tl_backend_kind b)
{
    return b == TL_BACKEND_CUDA ||
           (b == TL_BACKEND_AUTO && tl_backend_available(TL_BACKEND_CUDA, NULL, 0));
}
#endif

tl_status tl_host_alloc(tl_backend_kind b, size_t bytes, void **out, char *why, size_t why_len)
{
#ifdef HAVE_CUDA
    if (host_pinned(b))
        return tl_cuda_host_alloc(bytes, out, why, why_len);
#endif
    *out = malloc(bytes ? bytes : 1);
    if (*out)
        return TL_OK;
    snprintf(why, why_len, "out of host memory (%.1f MiB)", bytes / 1048576.0);
    return TL_ENOMEM;
}

void tl_host_free(tl_backend_kind b, void *p)
{
#ifdef HAVE_CUDA
    if (host_pinned(b)) {
        tl_cuda_host_free(p);
        return;
    }
#endif
    free(p);
}

tl_status tl_host_register(tl_backend_kind b, void *p, size_t bytes, char *why, size_t why_len)
{
#ifdef HAVE_CUDA
    if (host_pinned(b))
        return tl_cuda_host_register(p, bytes, why, why_len);
#endif
    (void)b, (void)p, (void)bytes, (void)why, (void)why_len;
    return TL_OK;
}

void tl_host_unregister(tl_backend_kind b, void *p)
{
#ifdef HAVE_CUDA
    if (host_pinned(b))
        tl_cuda_host_unregister(p);
#endif
    (void)b, (void)p;
}
