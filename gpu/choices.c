/* choices.c — the back-projection kernels a backend has and the tuned choice among them
 * per slice size (engine.h, tl_engine_set_choice; gpu/tune.h makes the choices). The
 * choices go with every job (backend.h, tl_bp_job.choices); the backend applies them. */
#include "config.h"

#include <string.h>

#include "gpu/engine_impl.h"

size_t tl_engine_kernels(const tl_engine *e, tl_kernel_info *out, size_t cap)
{
    return e->ops->kernels(e->be, out, cap);
}

bool tl_engine_has_kernel(const tl_engine *e, const char *name)
{
    tl_kernel_info k[TL_ENGINE_MAX_KERNELS];
    size_t n = e->ops->kernels(e->be, k, TL_ENGINE_MAX_KERNELS);
    for (size_t i = 0; i < n && i < TL_ENGINE_MAX_KERNELS; i++)
        if (strncmp(k[i].name, name, sizeof e->cfg.kernel) == 0)
            return true;
    return false;
}

void tl_engine_device_id(const tl_engine *e, tl_device_id *id)
{
    memset(id, 0, sizeof *id);
    e->ops->device_id(e->be, id);
}

static tl_kernel_choice *find_choice(const tl_engine *e, uint32_t h, uint32_t w)
{
    for (size_t i = 0; i < e->nchoices; i++)
        if (e->choices[i].height == h && e->choices[i].width == w)
            return (tl_kernel_choice *)&e->choices[i];
    return NULL;
}

/* Every name of c is terminated and names a kernel of the backend (or is empty). */
static tl_status check_choice(tl_engine *e, const tl_kernel_choice *c)
{
    for (int q = 0; q < TL_QUALITY_COUNT; q++)
        for (int batch = 0; batch < 2; batch++) {
            const char *name = batch ? c->batch[q] : c->single[q];
            if (memchr(name, '\0', sizeof c->single[q]) == NULL)
                return tl_fail(&e->err, TL_EINVAL, "kernel choice: name not terminated");
            if (name[0] && !tl_engine_has_kernel(e, name))
                return tl_fail(&e->err, TL_EINVAL,
                               "kernel choice: the %s backend has no "
                               "kernel \"%s\"",
                               e->backend, name);
        }
    return TL_OK;
}

tl_status tl_engine_set_choice(tl_engine *e, const tl_kernel_choice *c)
{
    tl_status st = check_choice(e, c);
    if (st != TL_OK)
        return st;
    tl_kernel_choice *slot = find_choice(e, c->height, c->width);
    if (!slot) {
        if (e->nchoices == TL_ENGINE_MAX_CHOICES)
            return tl_fail(&e->err, TL_EINVAL, "kernel choices for more than %d slice sizes",
                           TL_ENGINE_MAX_CHOICES);
        slot = &e->choices[e->nchoices++];
    }
    *slot = *c;
    return TL_OK;
}

bool tl_engine_get_choice(const tl_engine *e, uint32_t height, uint32_t width,
                          tl_kernel_choice *out)
{
    const tl_kernel_choice *c = find_choice(e, height, width);
    if (c && out)
        *out = *c;
    return c != NULL;
}

void tl_engine_clear_choices(tl_engine *e)
{
    e->nchoices = 0;
}
