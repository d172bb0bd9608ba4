/* reconstruct.c — slices out of an engine (engine.h, tl_engine_reconstruct). A request is
 * sorted into three lists: tracked slices whose accumulator must be rebuilt first, tracked
 * slices read out of their accumulators (track.c), and untracked slices back-projected
 * from the window. Each list goes to the backend as one job; the job's projections are the
 * held ones, as the geometry describes them and the method weighs them.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "gpu/engine_impl.h"

/* The held projections into e->job.proj, weighed by the method; returns how many. */
static size_t held_projections(tl_engine *e)
{
    const tl_window *w = &e->win;
    size_t n = 0;
    for (uint32_t s = 0; s < w->n; s++) {
        if (!w->held[s])
            continue;
        const tl_slot_info *si = &e->slot[s];
        e->job.proj[n] = e->geometry->projection(&e->cfg, s, w->index[s], si->angle,
                                                 si->center_offset);
        e->job.order[n] = (tl_angle_key){si->angle, (uint32_t)n};
        n++;
    }
    e->method->weigh(&e->cfg, e->job.proj, e->job.order, n);
    return n;
}

static tl_status grow_job(tl_engine *e, size_t n)
{
    tl_job_scratch *j = &e->job;
    if (n <= j->cap)
        return TL_OK;
    tl_bp_slice *slices = realloc(j->slices, n * sizeof *slices);
    if (slices)
        j->slices = slices;
    const char **kernel = realloc(j->kernel, n * sizeof *kernel);
    if (kernel)
        j->kernel = kernel;
    if (!slices || !kernel)
        return tl_fail(&e->err, TL_ENOMEM, "out of memory for %zu slices", n);
    j->cap = n;
    return TL_OK;
}

tl_status tl_engine_prepare_job(tl_engine *e, const int *ids, size_t n, float *const *out,
                                tl_bp_job *job)
{
    tl_status st = grow_job(e, n);
    if (st != TL_OK)
        return st;
    for (size_t k = 0; k < n; k++) {
        const tl_slice_entry *se = tl_engine_slice(e, ids[k]);
        if (!se)
            return TL_ENOTFOUND;
        tl_bp_slice *b = &e->job.slices[k];
        memcpy(b->plane, se->plane, sizeof se->plane);
        b->height = se->spec.height;
        b->width = se->spec.width;
        b->out = out ? out[k] : NULL;
        e->job.kernel[k] = NULL;
    }
    *job = (tl_bp_job){.geometry = e->cfg.geometry,
                       .slices = e->job.slices,
                       .nslices = n,
                       .proj = e->job.proj,
                       .force = e->cfg.kernel,
                       .quality = e->cfg.quality,
                       .choices = e->choices,
                       .nchoices = e->nchoices,
                       .slice_kernel = e->job.kernel};
    job->nproj = held_projections(e);
    return TL_OK;
}

/* ---- sorting a request -------------------------------------------------------------------- */

static void *grown(void *p, size_t n, size_t size, bool *ok)
{
    void *q = realloc(p, n * size);
    *ok = *ok && q;
    return q ? q : p;
}

static tl_status grow_recon(tl_engine *e, size_t n)
{
    tl_recon_scratch *r = &e->recon;
    if (n <= r->cap)
        return TL_OK;
    bool ok = true;
    r->rebuild.ids = grown(r->rebuild.ids, n, sizeof *r->rebuild.ids, &ok);
    r->read.ids = grown(r->read.ids, n, sizeof *r->read.ids, &ok);
    r->read.out = grown(r->read.out, n, sizeof *r->read.out, &ok);
    r->fresh.ids = grown(r->fresh.ids, n, sizeof *r->fresh.ids, &ok);
    r->fresh.out = grown(r->fresh.out, n, sizeof *r->fresh.out, &ok);
    r->kernel_of = grown(r->kernel_of, n, sizeof *r->kernel_of, &ok);
    if (!ok)
        return tl_fail(&e->err, TL_ENOMEM, "out of memory for %zu slices", n);
    r->cap = n;
    return TL_OK;
}

static void append(tl_slice_list *l, int id, float *out)
{
    l->ids[l->n] = id;
    if (l->out)
        l->out[l->n] = out;
    l->n++;
}

/* Sorts the requested slices into the three lists. */
static void sort_request(tl_engine *e, const int *ids, size_t n, float *const *out)
{
    tl_recon_scratch *r = &e->recon;
    r->rebuild.n = r->read.n = r->fresh.n = 0;
    r->rebuild.out = NULL;
    for (size_t k = 0; k < n; k++) {
        const tl_slice_entry *se = &e->slices[ids[k]];
        r->kernel_of[k] = NULL;
        if (!se->tracked || !tl_track_applies(e)) {
            append(&r->fresh, ids[k], out[k]);
            continue;
        }
        if (tl_track_needs_rebuild(e, se))
            append(&r->rebuild, ids[k], NULL);
        append(&r->read, ids[k], out[k]);
    }
}

/* ---- serving it --------------------------------------------------------------------------- */

/* The first name given: what the backend said of one slice, else of the whole job, else the
 * fallback. */
static const char *kernel_name(const char *slice, const char *job, const char *fallback)
{
    return slice ? slice : job ? job : fallback;
}

/* Records the kernel that made slice id (a request may name a slice more than once: all),
 * unless one is recorded already where `keep` is set. */
static void set_slice_kernel(tl_engine *e, const int *ids, size_t n, int id, const char *name,
                             bool keep)
{
    for (size_t k = 0; k < n; k++)
        if (ids[k] == id && !(keep && e->recon.kernel_of[k]))
            e->recon.kernel_of[k] = name;
}

/* Rebuilds the accumulators of the list from the whole window. */
static tl_status rebuild(tl_engine *e, const tl_slice_list *l, const int *ids, size_t n,
                         const char **kernel)
{
    tl_bp_job job;
    tl_status st = tl_engine_prepare_job(e, l->ids, l->n, NULL, &job);
    if (st == TL_OK)
        st = e->ops->acc_update(e->be, &job, l->ids, false);
    if (st != TL_OK)
        return st;
    for (size_t k = 0; k < l->n; k++) {
        set_slice_kernel(e, ids, n, l->ids[k], kernel_name(e->job.kernel[k], job.kernel, NULL),
                         false);
        e->slices[l->ids[k]].valid = true;
        e->slices[l->ids[k]].updates = 0;
    }
    *kernel = job.kernel;
    return TL_OK;
}

/* Reads the accumulators of the list; slices not rebuilt now were made by the updates. */
static tl_status read_out(tl_engine *e, const tl_slice_list *l, const int *ids, size_t n,
                          const char **kernel)
{
    tl_status st = e->ops->acc_read(e->be, l->ids, l->n, l->out);
    if (st != TL_OK)
        return st;
    *kernel = kernel_name(*kernel, NULL, tl_track_kernel(e));
    for (size_t k = 0; k < l->n; k++)
        set_slice_kernel(e, ids, n, l->ids[k], tl_track_kernel(e), true);
    return TL_OK;
}

/* Back-projects the slices of the list from the window. */
static tl_status back_project(tl_engine *e, const tl_slice_list *l, const int *ids, size_t n,
                              const char **kernel)
{
    tl_bp_job job;
    tl_status st = tl_engine_prepare_job(e, l->ids, l->n, l->out, &job);
    if (st == TL_OK)
        st = e->ops->backproject(e->be, &job);
    if (st != TL_OK)
        return st;
    for (size_t k = 0; k < l->n; k++)
        set_slice_kernel(e, ids, n, l->ids[k], kernel_name(e->job.kernel[k], job.kernel, NULL),
                         false);
    *kernel = job.kernel;
    return TL_OK;
}

void tl_engine_describe_window(const tl_engine *e, tl_slice_info *out)
{
    tl_slice_info si = {0};
    si.projections_used = e->win.nheld;
    si.missing = tl_window_missing(&e->win);
    si.window_first = e->win.empty ? 0 : tl_window_first(&e->win);
    si.window_last = e->win.last;
    /* the newest projection used: the highest index held */
    bool found = false;
    uint64_t newest = 0;
    for (uint32_t s = 0; s < e->win.n; s++) {
        if (!e->win.held[s] || (found && e->win.index[s] <= newest))
            continue;
        newest = e->win.index[s];
        si.t_acq = e->slot[s].t_acq;
        si.t_recv = e->slot[s].t_recv;
        found = true;
    }
    *out = si;
}

/* What the reconstruction used, for every slice of the request. */
static void describe(const tl_engine *e, size_t n, const char *kernel, tl_slice_info *info)
{
    tl_slice_info si;
    tl_engine_describe_window(e, &si);
    si.kernel = kernel_name(kernel, NULL, "?");
    for (size_t k = 0; k < n; k++) {
        info[k] = si;
        info[k].kernel = kernel_name(e->recon.kernel_of[k], NULL, si.kernel);
    }
}

static tl_status reconstruct_ids(tl_engine *e, const int *ids, size_t n, float *const *out,
                                 tl_slice_info *info)
{
    tl_status st = grow_recon(e, n);
    if (st != TL_OK)
        return st;
    for (size_t k = 0; k < n; k++)
        if (!tl_engine_slice(e, ids[k]))
            return TL_ENOTFOUND;
    sort_request(e, ids, n, out);
    const tl_recon_scratch *r = &e->recon;
    const char *kernel = NULL; /* the last job's, for slice info */
    if (r->rebuild.n && (st = rebuild(e, &r->rebuild, ids, n, &kernel)) != TL_OK)
        return st;
    if (r->read.n && (st = read_out(e, &r->read, ids, n, &kernel)) != TL_OK)
        return st;
    if (r->fresh.n && (st = back_project(e, &r->fresh, ids, n, &kernel)) != TL_OK)
        return st;
    if (info)
        describe(e, n, kernel, info);
    return TL_OK;
}

tl_status tl_engine_reconstruct(tl_engine *e, const int *ids, size_t n, float *const *out,
                                tl_slice_info *info)
{
    if (e->no_fbp)
        return tl_fail(&e->err, TL_EUNSUPPORTED, "%s", e->no_fbp);
    /* the slices read include every frame submitted; the other tracked slices catch up
     * behind this read-out */
    tl_track_flush_only(e, ids, n);
    tl_status st = reconstruct_ids(e, ids, n, out, info);
    tl_track_flush_others(e, ids, n);
    return st;
}
