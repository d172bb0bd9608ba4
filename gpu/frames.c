/* frames.c — frames into an engine (engine.h, tl_engine_submit): checks, the dark/flat
 * batch rule, the rolling window's bookkeeping, and fences that count the backend's work
 * in frames. */
#include "config.h"

#include <math.h>

#include "gpu/base/rings.h"
#include "gpu/engine_impl.h"

tl_status tl_engine_check_frame(tl_engine *e, const tl_frame *f)
{
    const tl_engine_config *c = &e->cfg;
    if (!f || !f->data)
        return tl_fail(&e->err, TL_EINVAL, "frame without data");
    if ((unsigned)f->kind > TL_FRAME_PROJ)
        return tl_fail(&e->err, TL_EINVAL, "unknown frame kind %d", (int)f->kind);
    if (f->rows != c->rows || f->cols != c->cols || f->dtype != c->dtype) {
        e->shape++;
        return tl_fail(&e->err, TL_ESHAPE, "frame %u x %u of dtype %d, scan expects %u x %u of %d",
                       f->rows, f->cols, (int)f->dtype, c->rows, c->cols, (int)c->dtype);
    }
    if (f->pitch && f->pitch < (size_t)f->cols * tl_dtype_size(f->dtype))
        return tl_fail(&e->err, TL_EINVAL, "pitch %zu shorter than a row", f->pitch);
    if (f->kind == TL_FRAME_PROJ && (!isfinite(f->angle) || !isfinite(f->center_offset)))
        return tl_fail(&e->err, TL_EINVAL, "projection %llu: angle or centre offset not finite",
                       (unsigned long long)f->index);
    const tl_cone_config *k = &c->cone;
    if (f->kind == TL_FRAME_PROJ && k->matrices &&
        (f->index < c->first_index || f->index - c->first_index >= k->nmatrices))
        return tl_fail(&e->err, TL_EINVAL,
                       "projection %llu has no cone-beam matrix (%u given, for projections "
                       "%llu..%llu)",
                       (unsigned long long)f->index, k->nmatrices,
                       (unsigned long long)c->first_index,
                       (unsigned long long)(c->first_index + k->nmatrices - 1));
    return TL_OK;
}

/* ---- fences ------------------------------------------------------------------------------ */

tl_status tl_engine_frames_done(tl_engine *e, uint64_t wait_for, uint64_t *done)
{
    while (e->frames_done < e->frames_queued) {
        bool reached = true;
        if (e->ops->fence_done) {
            tl_status st = e->ops->fence_done(e->be, e->frames_done % TL_BACKEND_FENCES,
                                              e->frames_done < wait_for, &reached);
            if (st != TL_OK) {
                *done = e->frames_done;
                return st;
            }
        }
        if (!reached)
            break;
        e->frames_done++;
    }
    *done = e->frames_done;
    return TL_OK;
}

uint64_t tl_engine_frames_queued(const tl_engine *e)
{
    return e->frames_queued;
}

tl_status tl_engine_flush(tl_engine *e)
{
    return e->ops->flush ? e->ops->flush(e->be) : TL_OK;
}

/* After the backend has taken frame f (stored it, or failed to): its fence. A frame read
 * later that failed is waited for here, so its caller may reuse the buffer at once. */
static tl_status fence_frame(tl_engine *e, const tl_frame *f, tl_status stored)
{
    uint64_t done;
    tl_status st = TL_OK;
    if (e->ops->fence) {
        if (e->frames_queued - e->frames_done == TL_BACKEND_FENCES) /* the ring is full */
            st = tl_engine_frames_done(e, e->frames_done + 1, &done);
        if (st == TL_OK)
            st = e->ops->fence(e->be, e->frames_queued % TL_BACKEND_FENCES);
    }
    if (st != TL_OK)
        return stored != TL_OK ? stored : st;
    e->frames_queued++;
    if (stored != TL_OK && f->read_later) /* the failure to report is the store's */
        (void)tl_engine_frames_done(e, e->frames_queued, &done);
    return stored;
}

/* ---- calibration and projections ---------------------------------------------------------- */

static tl_status submit_calibration(tl_engine *e, const tl_frame *f)
{
    int k = f->kind == TL_FRAME_DARK ? 0 : 1;
    /* A projection since this batch's last frame closes the batch: the next dark (flat)
     * starts a new one. Darks and flats may interleave freely within a calibration run. */
    if (e->proj_since[k]) {
        tl_status st = e->ops->calib_reset(e->be, f->kind);
        if (st != TL_OK)
            return st;
        e->batch[k] = 0;
        e->proj_since[k] = false;
    }
    tl_status st = fence_frame(e, f, e->ops->calib_add(e->be, f, e->batch[k] + 1));
    if (st != TL_OK)
        return st;
    e->batch[k]++;
    e->accepted[f->kind]++;
    return TL_OK;
}

/* Called by tl_window_place for each slot the window moves past. */
static void on_evict(void *ctx, uint32_t slot)
{
    tl_track_evicted(ctx, slot);
}

/* Ring removal (gpu/base/rings.h): the estimate every window/16 projections; when the
 * backend moved the whole window to a new one, every tracked slice is rebuilt (the
 * incremental sums no longer describe the window). */
static tl_status ring_cadence(tl_engine *e)
{
    if (!e->cfg.corr.rings || ++e->ring_since < tl_rings_interval(e->cfg.window))
        return TL_OK;
    e->ring_since = 0;
    bool changed = false;
    tl_status st = e->ops->ring_update(e->be, &changed);
    if (st != TL_OK)
        return st;
    e->ring_updates++;
    if (changed) {
        e->ring_rebuilds++;
        tl_track_invalidate(e);
    }
    return TL_OK;
}

tl_status tl_engine_submit(tl_engine *e, const tl_frame *f)
{
    tl_frame virt;
    if (e->halfacq) { /* into the virtual detector (halfacq.c) */
        if (!f || !f->data)
            return tl_fail(&e->err, TL_EINVAL, "frame without data");
        tl_status st = tl_halfacq_embed(e->halfacq, f, &virt, &e->err);
        if (st == TL_ESHAPE)
            e->shape++;
        if (st != TL_OK)
            return st;
        f = &virt;
    }
    tl_status st = tl_engine_check_frame(e, f);
    if (st != TL_OK)
        return st;
    if (f->kind != TL_FRAME_PROJ)
        return submit_calibration(e, f);

    uint32_t slot;
    e->track.evicted = 0;
    st = tl_window_place(&e->win, f->index, &slot, on_evict, e);
    if (st == TL_ESTALE) {
        e->stale++;
        return tl_fail(&e->err, st, "projection %llu is older than the window [%llu, %llu]",
                       (unsigned long long)f->index, (unsigned long long)tl_window_first(&e->win),
                       (unsigned long long)e->win.last);
    }
    if (st == TL_EDUPLICATE) {
        e->duplicate++;
        return tl_fail(&e->err, st, "projection %llu is already in the window",
                       (unsigned long long)f->index);
    }
    tl_track_before_store(e, slot);
    st = tl_center_before_store(e);
    if (st == TL_OK)
        st = fence_frame(e, f, e->ops->store(e->be, f, slot));
    if (st != TL_OK)
        return st;
    tl_window_hold(&e->win, slot, f->index);
    e->slot[slot] = (tl_slot_info){.angle = f->angle,
                                   .center_offset = f->center_offset,
                                   .t_acq = f->t_acq,
                                   .t_recv = f->t_recv};
    tl_track_added(e, slot);
    e->proj_since[0] = e->proj_since[1] = true;
    e->accepted[TL_FRAME_PROJ]++;
    st = ring_cadence(e);
    return st == TL_OK ? tl_center_after_store(e, f) : st;
}
