/* backends.c — which backend runs an engine: what this build and machine offer (engine.h,
 * tl_backend_available and tl_backend_device_count), and the choice for a configuration.
 * AUTO picks CUDA where a GPU is usable; an explicit choice that cannot run is an error,
 * never a fallback. */
#include "config.h"

#include <stdio.h>

#include "gpu/cpu/cpu_backend.h"
#include "gpu/engine_impl.h"
#include "gpu/split.h"
#ifdef HAVE_CUDA
#include "gpu/cuda/cuda_backend.h"
#endif

bool tl_backend_available(tl_backend_kind b, char *why, size_t why_len)
{
    char scratch[128];
    if (!why) {
        why = scratch;
        why_len = sizeof scratch;
    }
    switch (b) {
        case TL_BACKEND_CPU: return true;
        case TL_BACKEND_CUDA:
#ifdef HAVE_CUDA
            if (tl_cuda_device_count(why, why_len) > 0)
                return true;
            return false;
#else
            snprintf(why, why_len, "this build has no CUDA backend (configure --with-cuda)");
            return false;
#endif
        case TL_BACKEND_AUTO: return true;
    }
    return false;
}

int tl_backend_device_count(tl_backend_kind b, char *why, size_t why_len)
{
    if (b == TL_BACKEND_AUTO)
        b = tl_backend_available(TL_BACKEND_CUDA, NULL, 0) ? TL_BACKEND_CUDA : TL_BACKEND_CPU;
    if (b == TL_BACKEND_CPU)
        return 1;
#ifdef HAVE_CUDA
    int n = tl_cuda_device_count(why, why_len);
    return n > 0 ? n : 0;
#else
    if (why && why_len)
        snprintf(why, why_len, "this build has no CUDA backend (configure --with-cuda)");
    return 0;
#endif
}

/* The operation table of a resolved kind (CPU or CUDA), or NULL where this build has none. */
const tl_backend_ops *tl_engine_backend_ops(tl_backend_kind kind)
{
    if (kind == TL_BACKEND_CPU)
        return &tl_cpu_backend;
#ifdef HAVE_CUDA
    if (kind == TL_BACKEND_CUDA)
        return &tl_cuda_backend;
#endif
    return NULL;
}

/* Two or more devices go to the split backend (gpu/split.c), whose parts are of the
 * resolved kind (*kind names it); in cone beam to one CUDA engine on the first, whose
 * iterative problems use them all. */
tl_status tl_engine_pick_backend(const tl_engine_config *c, tl_errbuf *eb, tl_engine_config *rc,
                                 const tl_backend_ops **ops, const char **kind)
{
    char why[256] = "";
    tl_backend_kind b = c->backend;
    if (b == TL_BACKEND_AUTO) /* the float64 reference mode exists on the CPU only */
        b = c->precision != TL_PRECISION_F64 && tl_backend_available(TL_BACKEND_CUDA, NULL, 0)
                ? TL_BACKEND_CUDA
                : TL_BACKEND_CPU;
    if (!tl_backend_available(b, why, sizeof why))
        return tl_fail(eb, TL_EDEVICE, "backend %s requested but not usable: %s",
                       tl_backend_name(b), why);
    const tl_backend_ops *one = &tl_cpu_backend;
#ifdef HAVE_CUDA
    if (b == TL_BACKEND_CUDA) {
        one = &tl_cuda_backend;
        /* every ordinal must exist: a missing GPU is an error, never fewer partitions */
        int n = tl_cuda_device_count(why, sizeof why);
        for (uint32_t k = 0; k < (c->link ? 1u : c->ndevices); k++) /* others: ranks' own */
            if (c->devices[k] < 0 || c->devices[k] >= n)
                return tl_fail(eb, TL_EDEVICE,
                               "devices[%u] is CUDA device %d, but this machine has %d CUDA "
                               "device%s (0..%d)",
                               k, c->devices[k], n > 0 ? n : 0, n == 1 ? "" : "s", n - 1);
    }
#endif
    /* Cone beam on several devices: one engine on the first, whose iterative problems
     * spread over all of them (gpu/cuda/iterative_cone.cu); the rows are not split, since
     * a cone-beam voxel reads every detector row. */
    const bool split_rows = c->ndevices >= 2 && c->geometry != TL_GEOMETRY_CONE;
    if (c->ndevices >= 2 && !split_rows && b != TL_BACKEND_CUDA)
        return tl_fail(eb, TL_EUNSUPPORTED,
                       "cone beam on %u devices: CUDA devices only (the %s backend's threads "
                       "already share the host)",
                       c->ndevices, tl_backend_name(b));
    *rc = *c;
    rc->backend = b;
    if (c->ndevices >= 1 && !split_rows)
        rc->device = c->devices[0];
    *kind = one->name;
    *ops = split_rows ? &tl_split_backend : one;
    return TL_OK;
}
