/* track.c — tracked slices (engine.h, tl_engine_track): an accumulator per slice in the
 * backend, to which each new projection is added and from which each projection the
 * window drops is subtracted, so a read-out costs one projection of work per frame
 * instead of N. Only a method that is linear in each projection allows it
 * (tl_method_ops.linear); otherwise tracking changes nothing.
 *
 * Incremental updates are batched: each projection added (weight +w) or evicted (-w) is
 * queued, and up to TL_ACC_BATCH of them go to the accumulators in one pass. A stream then
 * costs one pass per frame instead of two (the previous frame's addition goes with this
 * frame's eviction), and a burst of frames filling the window one pass per batch; the
 * passes are memory-bound, so this halves or better the GPU time of tracked slices. The
 * queue is applied (flush) before a slot it reads is overwritten, before anything
 * reads or rebuilds a tracked slice, and when full; so each update still sees the
 * projection it names, and a slice that becomes valid (a rebuild) never sees an update
 * queued before it. A read-out applies it in two parts (tl_engine_reconstruct): to the
 * slices read, then, queued behind their read-out, to the others, so that a read-out
 * waits for its own slices' updates only.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "gpu/engine_impl.h"

/* Evictions in one tl_window_place beyond which tracked slices are rebuilt instead of
 * updated projection by projection (a jump of the index by most of a window). */
#define TL_TRACK_MAX_EVICT 8

typedef enum {
    FLUSH_ALL,    /* every tracked slice; the queue is emptied */
    FLUSH_ONLY,   /* only those in ids; the queue is kept for the others */
    FLUSH_OTHERS, /* all but those in ids (which had it with FLUSH_ONLY); emptied */
} flush_set;

bool tl_track_applies(const tl_engine *e)
{
    return e->method->linear(&e->cfg);
}

/* Pending updates are dropped with the slices they were for: each is rebuilt when read. */
void tl_track_invalidate(tl_engine *e)
{
    for (int k = 0; k < e->nslices; k++)
        e->slices[k].valid = false;
    e->track.npending = 0;
}

static bool listed(const int *ids, size_t n, int id)
{
    for (size_t k = 0; k < n; k++)
        if (ids[k] == id)
            return true;
    return false;
}

/* Whether the queue is for slice k under `which`. */
static bool flushed(const tl_slice_entry *se, int k, flush_set which, const int *ids, size_t n)
{
    if (!se->used || !se->tracked || !se->valid)
        return false;
    return which == FLUSH_ALL || listed(ids, n, k) == (which == FLUSH_ONLY);
}

static void flush_set_of(tl_engine *e, flush_set which, const int *ids, size_t nids)
{
    tl_track_state *t = &e->track;
    if (t->npending == 0)
        return;
    int n = 0;
    for (int k = 0; k < e->nslices; k++) {
        const tl_slice_entry *se = &e->slices[k];
        if (!flushed(se, k, which, ids, nids))
            continue;
        tl_bp_slice *b = &t->slices[n];
        memcpy(b->plane, se->plane, sizeof se->plane);
        b->height = se->spec.height;
        b->width = se->spec.width;
        b->out = NULL;
        t->ids[n++] = k;
    }
    int added = 0;
    for (int k = 0; k < t->npending; k++)
        added += t->pending[k].weight > 0;
    tl_bp_job job = {.geometry = e->cfg.geometry,
                     .slices = t->slices,
                     .nslices = (size_t)n,
                     .proj = t->pending,
                     .nproj = (size_t)t->npending,
                     .force = e->cfg.kernel,
                     .quality = e->cfg.quality};
    if (which != FLUSH_ONLY)
        t->npending = 0;
    if (n == 0)
        return;
    if (e->ops->acc_update(e->be, &job, t->ids, true) != TL_OK) {
        tl_track_invalidate(e); /* the accumulators are unknown: rebuilt at the next read */
        return;
    }
    t->kernel = job.kernel;
    for (int k = 0; k < n; k++) /* the refresh period counts projections added */
        e->slices[t->ids[k]].updates += (uint32_t)added;
}

void tl_track_flush_only(tl_engine *e, const int *ids, size_t n)
{
    flush_set_of(e, FLUSH_ONLY, ids, n);
}

void tl_track_flush_others(tl_engine *e, const int *ids, size_t n)
{
    flush_set_of(e, FLUSH_OTHERS, ids, n);
}

/* Queues slot's projection with its weight times sign (+1 added, -1 evicted). */
static void queue(tl_engine *e, uint32_t slot, double sign)
{
    if (!tl_track_applies(e) || e->track.ntracked == 0)
        return;
    if (e->track.npending == TL_ACC_BATCH)
        flush_set_of(e, FLUSH_ALL, NULL, 0);
    const tl_slot_info *si = &e->slot[slot];
    tl_bp_proj p = e->geometry->projection(&e->cfg, slot, e->win.index[slot], si->angle,
                                           si->center_offset);
    p.weight *= sign;
    e->track.pending[e->track.npending++] = p;
}

void tl_track_added(tl_engine *e, uint32_t slot)
{
    queue(e, slot, +1.0);
}

void tl_track_evicted(tl_engine *e, uint32_t slot)
{
    if (++e->track.evicted > TL_TRACK_MAX_EVICT) {
        tl_track_invalidate(e); /* cheaper to rebuild than to subtract a whole window */
        return;
    }
    queue(e, slot, -1.0);
}

void tl_track_before_store(tl_engine *e, uint32_t slot)
{
    for (int k = 0; k < e->track.npending; k++)
        if (e->track.pending[k].slot == slot) { /* a queued update reads what is overwritten */
            flush_set_of(e, FLUSH_ALL, NULL, 0);
            return;
        }
}

/* When it is not valid, or after `refresh` updates where a period is set. The backends
 * accumulate in float64, so drift needs no periodic rebuild by default (engine.h). */
bool tl_track_needs_rebuild(const tl_engine *e, const tl_slice_entry *se)
{
    return !se->valid || (e->cfg.refresh && se->updates >= e->cfg.refresh);
}

const char *tl_track_kernel(const tl_engine *e)
{
    return e->track.kernel ? e->track.kernel : "incremental";
}

/* Room for one more tracked slice in the flush scratch. */
static tl_status grow_scratch(tl_engine *e)
{
    tl_track_state *t = &e->track;
    if (t->ntracked < t->cap)
        return TL_OK;
    int cap = t->cap ? 2 * t->cap : 8;
    tl_bp_slice *slices = realloc(t->slices, (size_t)cap * sizeof *slices);
    if (slices)
        t->slices = slices;
    int *ids = realloc(t->ids, (size_t)cap * sizeof *ids);
    if (ids)
        t->ids = ids;
    if (!slices || !ids)
        return tl_fail(&e->err, TL_ENOMEM, "out of memory for tracked slices");
    t->cap = cap;
    return TL_OK;
}

tl_status tl_engine_track(tl_engine *e, int id, bool on)
{
    tl_slice_entry *se = tl_engine_slice(e, id);
    if (!se)
        return TL_ENOTFOUND;
    if (se->tracked == on)
        return TL_OK;
    if (on) {
        tl_status st = grow_scratch(e);
        if (st == TL_OK)
            st = e->ops->acc_alloc(e->be, id, se->spec.height, se->spec.width);
        if (st != TL_OK)
            return st;
        e->track.ntracked++;
    } else {
        e->ops->acc_free(e->be, id);
        e->track.ntracked--;
    }
    se->tracked = on;
    se->valid = false;
    se->updates = 0;
    return TL_OK;
}
