/* split_acc.c — tracked slices of a split engine (backend.h acc_*): a row's accumulator
 * lives on the part that owns it, a plane's on every part it crosses, each keeping its
 * share (tl_split_share: an ortho-slice's rows at its heights, another plane whole),
 * assembled on read-out. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "gpu/split_impl.h"

void tl_split_acc_free(void *state, int id)
{
    tl_split *sp = state;
    if (id < 0 || id >= sp->nacc || !sp->acc[id].alloc)
        return;
    tl_split_acc *a = &sp->acc[id];
    tl_bp_slice share;
    uint32_t r0;
    for (uint32_t k = 0; a->placed && k < sp->np; k++)
        if (tl_split_share(sp, &a->sl, k, &share, &r0))
            sp->p[k].ops->acc_free(sp->p[k].be, id);
    memset(a, 0, sizeof *a);
}

tl_status tl_split_acc_alloc(void *state, int id, uint32_t height, uint32_t width)
{
    tl_split *sp = state;
    if (id >= sp->nacc) {
        int n = id + 8;
        bool ok = true;
        sp->acc = tl_split_grown(sp->acc, (size_t)n, sizeof *sp->acc, &ok);
        if (!ok)
            return tl_fail(sp->eb, TL_ENOMEM, "out of memory for accumulators");
        memset(sp->acc + sp->nacc, 0, (size_t)(n - sp->nacc) * sizeof *sp->acc);
        sp->nacc = n;
    }
    tl_split_acc_free(sp, id); /* (the engine frees before it allocates again) */
    tl_split_acc *a = &sp->acc[id];
    a->alloc = true;
    a->sl.height = height;
    a->sl.width = width;
    return TL_OK;
}

/* Gives slice id (plane sl) accumulators on the parts that compute it. */
static tl_status place(tl_split *sp, int id, const tl_bp_slice *sl)
{
    tl_split_acc *a = &sp->acc[id];
    if (sl->height != a->sl.height || sl->width != a->sl.width)
        return tl_fail(sp->eb, TL_EINTERNAL, "slice %d updated as %u x %u, tracked as %u x %u", id,
                       sl->height, sl->width, a->sl.height, a->sl.width);
    tl_bp_slice share;
    uint32_t r0;
    for (uint32_t k = 0; k < sp->np; k++) {
        tl_split_part *p = &sp->p[k];
        if (!tl_split_share(sp, sl, k, &share, &r0))
            continue;
        p->st = p->ops->acc_alloc(p->be, id, share.height, share.width);
        if (p->st != TL_OK) {
            tl_status st = tl_split_part_fail(sp, k);
            while (k-- > 0)
                if (tl_split_share(sp, sl, k, &share, &r0))
                    sp->p[k].ops->acc_free(sp->p[k].be, id);
            return st;
        }
    }
    a->sl = *sl;
    a->sl.out = NULL;
    a->placed = true;
    return TL_OK;
}

tl_status tl_split_acc_update(void *state, tl_bp_job *job, const int *ids, bool add)
{
    tl_split *sp = state;
    for (size_t i = 0; i < job->nslices; i++) {
        if (ids[i] < 0 || ids[i] >= sp->nacc || !sp->acc[ids[i]].alloc)
            return tl_fail(sp->eb, TL_EINTERNAL, "slice %d has no accumulator", ids[i]);
        if (!sp->acc[ids[i]].placed) {
            tl_status st = place(sp, ids[i], &job->slices[i]);
            if (st != TL_OK)
                return st;
        }
    }
    tl_status st = tl_split_route(sp, job->slices, job->nslices, ids);
    if (st != TL_OK)
        return st;
    sp->job = job;
    sp->add = add;
    st = tl_split_run(sp, OP_ACC_UPDATE);
    if (st == TL_OK)
        tl_split_name_kernels(sp, job);
    return st;
}

tl_status tl_split_acc_read(void *state, const int *ids, size_t n, float *const *out)
{
    tl_split *sp = state;
    if (n > sp->rsl_cap) {
        bool ok = true;
        sp->rsl = tl_split_grown(sp->rsl, n, sizeof *sp->rsl, &ok);
        if (!ok)
            return tl_fail(sp->eb, TL_ENOMEM, "out of memory for %zu read-outs", n);
        sp->rsl_cap = n;
    }
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= sp->nacc || !sp->acc[ids[i]].placed)
            return tl_fail(sp->eb, TL_EINTERNAL, "slice %d read out before it was built", ids[i]);
        sp->rsl[i] = sp->acc[ids[i]].sl;
        sp->rsl[i].out = out[i];
    }
    tl_status st = tl_split_route(sp, sp->rsl, n, ids);
    if (st == TL_OK)
        st = tl_split_run(sp, OP_ACC_READ);
    if (st == TL_OK)
        tl_split_assemble_all(sp, sp->rsl, n);
    return st;
}
