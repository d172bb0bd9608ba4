/* backproject.cu — the reconstruct path: which kernel serves which slice, the job's
 * projection tables, launching, and the copy of the slices back to the host.
 *
 * Kernel choice (per slice, unless the job forces one kernel for all):
 *   - a horizontal slice (xaxis and yaxis without z components) at an integer detector row
 *     inside [0, rows) may use the fast kernels:
 *       quality EXACT           -> alu-exact;
 *       quality FAST or PREVIEW -> tex-std, the texture kernel of seed 000 Alg. 1.
 *     (Seed-000-001.md §3.5 predicts the ALU kernel to be faster on an H100, but that is for
 *     its tuned variants; this first, untuned alu-exact is unmeasured, so the rule keeps
 *     the paper's baseline for the fast modes. `tomolive bench` times both, and the
 *     autotuner of a later issue replaces this rule with measurements.)
 *     A fast kernel that cannot serve the slice (window beyond the texture limits, pixel
 *     spacing beyond the ALU cache) falls back to the next: tex-std -> alu-exact ->
 *     plane-exact, each at least as exact as the one before.
 *   - everything else (planes, ortho-slices, non-integer z) -> plane-exact.
 * job->kernel names the kernel, or the kernels joined with "+" when slices differed.
 *
 * The projection tables (float cos, sin, centre, weight; slot; slot + 0.5 for the texture
 * row) are filled in pinned host memory and uploaded on the engine's stream once per job;
 * the host copies are rewritten only after the previous upload completed (proj_done).
 * Outputs go to one device buffer, slices back to back; it grows only when a job needs
 * more than ever before. Everything is synchronised before backproject() returns.
 */
#include "config.h"

#include "gpu/backend.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gpu/cuda/bp_common.cuh"

static const char *const kernel_names[TL_CUDA_NKERNELS] = {"tex-std", "alu-exact", "plane-exact"};
static const tl_quality kernel_quality[TL_CUDA_NKERNELS] = {TL_QUALITY_FAST, TL_QUALITY_EXACT,
                                                            TL_QUALITY_EXACT};
/* job->kernel must be a static string: every combination, indexed by a bit mask of kernels */
static const char *const kernel_combos[1 << TL_CUDA_NKERNELS] = {
    "none", "tex-std", "alu-exact", "tex-std+alu-exact", "plane-exact", "tex-std+plane-exact",
    "alu-exact+plane-exact", "tex-std+alu-exact+plane-exact"};

const char *tl_cuda_kernel_name(int k)
{
    return k >= 0 && k < TL_CUDA_NKERNELS ? kernel_names[k] : "?";
}

tl_quality tl_cuda_kernel_quality(int k)
{
    return k >= 0 && k < TL_CUDA_NKERNELS ? kernel_quality[k] : TL_QUALITY_EXACT;
}

tl_cuda_geom tl_cuda_make_geom(const tl_bp_slice *sl)
{
    const float *o = sl->plane;
    double w = sl->width, h = sl->height, s0 = 0.5 / w, t0 = 1.0 - 0.5 / h;
    tl_cuda_geom g;
    g.px = (float)(o[6] + s0 * o[0] + t0 * o[3]);
    g.py = (float)(o[7] + s0 * o[1] + t0 * o[4]);
    g.pz = (float)(o[8] + s0 * o[2] + t0 * o[5]);
    g.ax = (float)(o[0] / w);
    g.ay = (float)(o[1] / w);
    g.az = (float)(o[2] / w);
    g.bx = (float)(-o[3] / h);
    g.by = (float)(-o[4] / h);
    g.bz = (float)(-o[5] / h);
    g.h = (int)sl->height;
    g.w = (int)sl->width;
    return g;
}

bool tl_cuda_horizontal(const tl_bp_slice *sl, uint32_t rows, uint32_t *z)
{
    const float *o = sl->plane;
    float zf = o[8];
    if (o[2] != 0.f || o[5] != 0.f || !(zf >= 0.f) || zf >= (float)rows || zf != floorf(zf))
        return false;
    *z = (uint32_t)zf;
    return true;
}

bool tl_cuda_can_serve(const tl_cuda_state *s, int k, const tl_bp_slice *sl,
                       const tl_bp_job *job, char *why, size_t why_len)
{
    uint32_t z;
    if (k == TL_CUDA_K_PLANE)
        return true;
    if (!tl_cuda_horizontal(sl, s->rows, &z)) {
        snprintf(why, why_len,
                 "%s serves horizontal slices at an integer detector row only (this slice: "
                 "plane with z components %g, %g, base z %g; detector rows 0..%u)",
                 tl_cuda_kernel_name(k), sl->plane[2], sl->plane[5], sl->plane[8], s->rows - 1);
        return false;
    }
    if (k == TL_CUDA_K_TEX && !s->tex_ok) {
        snprintf(why, why_len, "tex-std is unavailable for this scan: %s", s->tex_why);
        return false;
    }
    if (k == TL_CUDA_K_ALU) {
        tl_cuda_geom g = tl_cuda_make_geom(sl);
        if (tl_cuda_alu_cache_width(&g, job) == 0) {
            snprintf(why, why_len,
                     "alu-exact cannot cache the detector span of a tile at this pixel "
                     "spacing (scale too large); use plane-exact");
            return false;
        }
    }
    return true;
}

/* The kernel for slice sl: the forced one, or by the rule above. -1 when forced but unable. */
static int choose(const tl_cuda_state *s, const tl_bp_slice *sl, const tl_bp_job *job,
                  int forced, char *why, size_t why_len)
{
    if (forced >= 0)
        return tl_cuda_can_serve(s, forced, sl, job, why, why_len) ? forced : -1;
    int order[3];
    int n = 0;
    if (job->quality != TL_QUALITY_EXACT)
        order[n++] = TL_CUDA_K_TEX;
    order[n++] = TL_CUDA_K_ALU;
    order[n++] = TL_CUDA_K_PLANE;
    for (int i = 0; i < n; i++)
        if (tl_cuda_can_serve(s, order[i], sl, job, why, why_len))
            return order[i];
    return TL_CUDA_K_PLANE; /* not reached: plane-exact serves everything */
}

static size_t total_pixels(const tl_bp_job *job)
{
    size_t t = 0;
    for (size_t i = 0; i < job->nslices; i++)
        t += (size_t)job->slices[i].height * job->slices[i].width;
    return t;
}

tl_status tl_cuda_job_prepare(tl_cuda_state *s, const tl_bp_job *job)
{
    if (job->nproj > s->n)
        return tl_fail(s->eb, TL_EINTERNAL, "%zu projections in a window of %u", job->nproj, s->n);
    size_t need = total_pixels(job);
    if (need > s->out_cap) {
        /* only when more output than ever before is asked for (no work is pending on the
         * buffer: every job synchronises before it returns) */
        TL_CUDA(s->eb, cudaStreamSynchronize(s->stream));
        TL_CUDA(s->eb, cudaFree(s->out));
        s->out = NULL;
        s->mem -= s->out_cap * sizeof(float);
        s->out_cap = 0;
        TL_TRY(tl_cuda_alloc(s, (void **)&s->out, need * sizeof(float), "slice outputs"));
        s->out_cap = need;
    }
    if (job->nproj == 0)
        return TL_OK;
    /* the previous job's upload from these pinned tables must be complete */
    TL_CUDA(s->eb, cudaEventSynchronize(s->proj_done));
    for (size_t k = 0; k < job->nproj; k++) {
        const tl_bp_proj *p = &job->proj[k];
        s->h_par[k] = make_float4((float)p->cos_t, (float)p->sin_t, (float)p->center,
                                  (float)p->weight);
        s->h_slot[k] = (int)p->slot;
        s->h_texy[k] = (float)p->slot + 0.5f;
    }
    size_t n = job->nproj;
    TL_CUDA(s->eb, cudaMemcpyAsync(s->d_par, s->h_par, n * sizeof(float4),
                                   cudaMemcpyHostToDevice, s->stream));
    TL_CUDA(s->eb, cudaMemcpyAsync(s->d_slot, s->h_slot, n * sizeof(int),
                                   cudaMemcpyHostToDevice, s->stream));
    TL_CUDA(s->eb, cudaMemcpyAsync(s->d_texy, s->h_texy, n * sizeof(float),
                                   cudaMemcpyHostToDevice, s->stream));
    TL_CUDA(s->eb, cudaEventRecord(s->proj_done, s->stream));
    return TL_OK;
}

tl_status tl_cuda_job_launch(tl_cuda_state *s, const tl_bp_job *job, int forced)
{
    size_t off = 0;
    for (size_t i = 0; i < job->nslices; i++) {
        const tl_bp_slice *sl = &job->slices[i];
        char why[256];
        int k = choose(s, sl, job, forced, why, sizeof why);
        if (k < 0)
            return tl_fail(s->eb, TL_EINVAL, "slice %zu: %s", i, why);
        tl_cuda_geom g = tl_cuda_make_geom(sl);
        float *out = s->out + off;
        uint32_t z = 0;
        tl_cuda_horizontal(sl, s->rows, &z);
        switch (k) {
        case TL_CUDA_K_TEX:
            TL_TRY(tl_cuda_bp_texture(s, &g, z, job->nproj, out));
            break;
        case TL_CUDA_K_ALU:
            TL_TRY(tl_cuda_bp_alu(s, &g, z, job->nproj, tl_cuda_alu_cache_width(&g, job), out));
            break;
        default:
            TL_TRY(tl_cuda_bp_plane(s, &g, job->nproj, out));
            break;
        }
        off += (size_t)sl->height * sl->width;
    }
    return TL_OK;
}

static int find_kernel(const char *name)
{
    if (!name || !name[0])
        return -1;
    for (int k = 0; k < TL_CUDA_NKERNELS; k++)
        if (strcmp(name, kernel_names[k]) == 0)
            return k;
    return -2;
}

tl_status tl_cuda_op_backproject(void *state, tl_bp_job *job)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    TL_TRY(tl_cuda_use_device(s));
    int forced = find_kernel(job->force);
    if (forced == -2)
        return tl_fail(s->eb, TL_EINVAL, "the cuda backend has no kernel \"%s\"", job->force);

    /* validate every slice before anything is enqueued, and name what will run */
    unsigned used = 0;
    for (size_t i = 0; i < job->nslices; i++) {
        char why[256];
        int k = choose(s, &job->slices[i], job, forced, why, sizeof why);
        if (k < 0)
            return tl_fail(s->eb, TL_EINVAL, "slice %zu: %s", i, why);
        used |= 1u << k;
    }
    job->kernel = kernel_combos[used];
    if (job->nslices == 0)
        return TL_OK;

    TL_TRY(tl_cuda_job_prepare(s, job));
    tl_cuda_constant_guard guard((used & (1u << TL_CUDA_K_TEX)) != 0);
    TL_TRY(tl_cuda_job_launch(s, job, forced));
    size_t off = 0;
    for (size_t i = 0; i < job->nslices; i++) {
        const tl_bp_slice *sl = &job->slices[i];
        size_t npx = (size_t)sl->height * sl->width;
        if (sl->out)
            TL_CUDA(s->eb, cudaMemcpyAsync(sl->out, s->out + off, npx * sizeof(float),
                                           cudaMemcpyDeviceToHost, s->stream));
        off += npx;
    }
    TL_CUDA(s->eb, cudaStreamSynchronize(s->stream));
    return TL_OK;
}
