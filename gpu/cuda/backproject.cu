/* backproject.cu — the reconstruct path: which kernel serves which slice, batching slices
 * for the multi-slice kernels, the job's projection tables, launching, and the copy of the
 * slices back to the host.
 *
 * Kernel choice, per slice (kernels.cuh lists the kernels):
 *   1. a forced kernel (config.kernel) serves every slice or the job fails (TL_EINVAL);
 *   2. else the autotuner's choice for the slice's size (tl_kernel_choice): `batch` when
 *      the job has other horizontal slices of the same geometry that kernel can take in
 *      the same pass, else `single` — when that kernel can serve the slice;
 *   3. else the built-in rule below, which also catches what a chosen kernel cannot serve:
 *      the first kernel of BUILTIN_* of an allowed quality that serves the slice. Every
 *      list ends with plane-exact, which serves anything.
 * The built-in order is the H100's ranking for 2048^2 slices from 2048 projections as
 * `tomolive tune` measured it; on another card or shape the tuner's choice replaces it.
 *
 * Batching: slices that chose the same multi-slice kernel and share a geometry (the same
 * horizontal plane up to z, the same size) are launched together, up to the kernel's
 * slices per pass, in job order.
 *
 * The projection tables (float cos, sin, centre, weight; slot; slot + 0.5 for the texture
 * row; in cone beam the 12 floats of each projection's matrix) are filled in pinned host memory and uploaded on the engine's stream once per job;
 * the host copies are rewritten only after the previous upload completed (proj_done).
 * Outputs go to one device buffer, slices back to back; it grows only when a job needs
 * more than ever before. Everything is synchronised before backproject() returns.
 */
#include "config.h"

#include "gpu/base/backend.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gpu/cuda/kernels.cuh"

/* ---- the table --------------------------------------------------------------------------- */

static const struct {
    const tl_cuda_kernel *list;
    const int *n;
} families[] = {
    {tl_cuda_tex_kernels, &tl_cuda_tex_nkernels},     {tl_cuda_alu_kernels, &tl_cuda_alu_nkernels},
    {tl_cuda_hyb_kernels, &tl_cuda_hyb_nkernels},     {tl_cuda_os_kernels, &tl_cuda_os_nkernels},
    {tl_cuda_plane_kernels, &tl_cuda_plane_nkernels}, {tl_cuda_cone_kernels, &tl_cuda_cone_nkernels},
};
#define NFAMILIES (sizeof families / sizeof *families)

int tl_cuda_kernel_count(void)
{
    int n = 0;
    for (size_t f = 0; f < NFAMILIES; f++)
        n += *families[f].n;
    return n;
}

const tl_cuda_kernel *tl_cuda_kernel_at(int i)
{
    for (size_t f = 0; f < NFAMILIES && i >= 0; f++) {
        if (i < *families[f].n)
            return &families[f].list[i];
        i -= *families[f].n;
    }
    return NULL;
}

int tl_cuda_kernel_find(const char *name)
{
    if (!name || !name[0])
        return -1;
    for (int i = 0, n = tl_cuda_kernel_count(); i < n; i++)
        if (strcmp(tl_cuda_kernel_at(i)->name, name) == 0)
            return i;
    return -1;
}

/* The built-in choice: kernel names in order of preference, per allowed quality (at most
 * RULE_LEN, NULL-ended where fewer). */
#define RULE_LEN 5
static const char *const builtin_single[TL_QUALITY_COUNT][RULE_LEN] = {
    {"alu-fr/t64q16s16", "alu-exact", "plane-exact", NULL},
    {"alu-fr/t64q16s16", "tex-std", "alu-exact", "plane-exact"},
    {"alu-fr/t64q16s16", "tex-std", "alu-exact", "plane-exact"},
};
/* Cone beam, by measurement (H200, BENCHMARKS.md, GUPS of 10^9). For a stack of horizontal
 * slices of a circular scan (a volume, a sub-volume: at least COLUMN_SLICES of one grid) the
 * rule depends on how far apart neighbouring voxels project (tl_cuda_cone_voxel_pixels):
 * - coarse (more than CONE_FINE_PIXELS): the float16 texture z-batch kernel, whose taps
 *   stay in cache (1024^2 -> 256^3, 4 pixels: cone-tex16-zb/16 803 against 682 for the
 *   mirror kernel cone-colmir16/64x4 and 516 for /128x4; 2048^2 -> 512^3: 811, 646, 504);
 *   in exact mode the column kernel (cone-col/64x4, 396);
 * - fine (2 pixels: 1024^2 -> 512^3, 2048^2 -> 1024^3): the mirror kernel first, which
 *   walks a voxel and its mirror image about the source's plane with one fetch (1348 and
 *   1367 against 892 and 887);
 * - dense (at most CONE_DENSE_PIXELS; 1024^2 -> 1024^3, 1 pixel; 512^2 -> 1024^3, 0.5):
 *   the mirror kernel (1757-1784; 1951), then the quad-stack kernels where the quads were
 *   made (cone-colhybq16-3:1 974-988; exact cone-colq/64x4 727-731, against 665 for
 *   cone-col/64x4; 1024^2 -> 256^3 turns them round: colq 118, col 396). */
#define COLUMN_SLICES 32
#define CONE_DENSE_PIXELS 1.5
#define CONE_FINE_PIXELS 3.0
static const char *const builtin_cone_coarse[RULE_LEN] = {"cone-tex16-zb/16", "cone-col/64x4",
                                                          "cone-zb/8", "cone-exact"};
static const char *const builtin_cone_fine[RULE_LEN] = {
    "cone-colmir16/128x4", "cone-tex16-zb/16", "cone-col/64x4", "cone-zb/8", "cone-exact"};
static const char *const builtin_cone_dense[RULE_LEN] = {
    "cone-colmir16/128x4", "cone-colhybq16-3:1/64x4", "cone-tex16-zb/16", "cone-colq/64x4",
    "cone-col/64x4"};
/* A few slices, or not one grid: the texture kernels where `fast` is allowed (cone-tex-zb/8
 * ~880-900), else the z-batch and general ones. */
static const char *const builtin_cone[RULE_LEN] = {"cone-tex-zb/8", "cone-zb/8", "cone-tex",
                                                   "cone-exact"};
static const char *const builtin_batch[TL_QUALITY_COUNT][RULE_LEN] = {
    {"alu2-fr/t64q8s16", "alu-fr/t64q16s16", "alu-exact", "plane-exact"},
    {"alu4h/t64q8s16", "alu2-fr/t64q8s16", "alu-fr/t64q16s16", "plane-exact"},
    {"alu4h/t64q8s16", "alu2-fr/t64q8s16", "alu-fr/t64q16s16", "plane-exact"},
};

/* ---- geometry ---------------------------------------------------------------------------- */

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

/* Two horizontal slices that differ in z only (a batch may hold both). */
static bool same_geometry(const tl_bp_slice *a, const tl_bp_slice *b)
{
    return a->height == b->height && a->width == b->width &&
           memcmp(a->plane, b->plane, 8 * sizeof(float)) == 0;
}

int tl_cuda_cache_width(const tl_cuda_geom *g, const tl_bp_job *job, int tile, int max_cache)
{
    double span = 0;
    for (size_t k = 0; k < job->nproj; k++) {
        double c = job->proj[k].cos_t, s = job->proj[k].sin_t;
        double duj = (double)g->ax * c - (double)g->ay * s; /* per output column */
        double dui = (double)g->bx * c - (double)g->by * s; /* per output row */
        double sp = (tile - 1) * (fabs(duj) + fabs(dui));
        if (sp > span)
            span = sp;
    }
    /* + the bin below the lowest (h >= 1 for the rounding trick), the floor, the upper
     * neighbour, and float rounding of the corners */
    double cw = ceil(span) + 5;
    return cw <= max_cache ? (int)cw : 0;
}

bool tl_cuda_can_serve(const tl_cuda_state *s, const tl_cuda_kernel *k, const tl_bp_slice *sl,
                       const tl_bp_job *job, char *why, size_t why_len)
{
    uint32_t z;
    const bool cone = job->geometry == TL_GEOMETRY_CONE;
    if (cone != (k->family == TL_KF_CONE)) {
        snprintf(why, why_len, "%s is a %s-beam kernel; this is a %s-beam scan", k->name,
                 cone ? "parallel" : "cone", cone ? "cone" : "parallel");
        return false;
    }
    if (k->family == TL_KF_CONE)
        return tl_cuda_cone_can_serve(s, k, sl, job, why, why_len);
    if (k->family == TL_KF_PLANE)
        return true;
    if (!tl_cuda_horizontal(sl, s->rows, &z)) {
        snprintf(why, why_len,
                 "%s serves horizontal slices at an integer detector row only (this slice: "
                 "plane with z components %g, %g, base z %g; detector rows 0..%u)",
                 k->name, sl->plane[2], sl->plane[5], sl->plane[8], s->rows - 1);
        return false;
    }
    if ((k->family == TL_KF_TEX || k->family == TL_KF_HYB) && !s->tex_ok) {
        snprintf(why, why_len, "%s is unavailable for this scan: %s", k->name, s->tex_why);
        return false;
    }
    if (k->pack && !s->pack) {
        snprintf(why, why_len, "%s is unavailable for this scan: %s", k->name, s->tex_why);
        return false;
    }
    if (k->family == TL_KF_ALU || k->family == TL_KF_HYB) {
        tl_cuda_geom g = tl_cuda_make_geom(sl);
        if (tl_cuda_cache_width(&g, job, k->tile, k->max_cache) == 0) {
            snprintf(why, why_len,
                     "%s cannot cache the detector span of a %dx%d tile at this pixel spacing "
                     "(scale too large); use plane-exact",
                     k->name, k->tile, k->tile);
            return false;
        }
    }
    return true;
}

/* ---- choice ------------------------------------------------------------------------------ */

static const tl_kernel_choice *find_choice(const tl_bp_job *job, const tl_bp_slice *sl)
{
    for (size_t i = 0; i < job->nchoices; i++)
        if (job->choices[i].height == sl->height && job->choices[i].width == sl->width)
            return &job->choices[i];
    return NULL;
}

/* Other slices of the job that could share a pass with slice i. */
static bool has_partners(const tl_cuda_state *s, const tl_bp_job *job, size_t i)
{
    uint32_t z;
    if (!tl_cuda_horizontal(&job->slices[i], s->rows, &z))
        return false;
    for (size_t j = 0; j < job->nslices; j++)
        if (j != i && tl_cuda_horizontal(&job->slices[j], s->rows, &z) &&
            same_geometry(&job->slices[i], &job->slices[j]))
            return true;
    return false;
}

static int try_name(const tl_cuda_state *s, const char *name, const tl_bp_slice *sl,
                    const tl_bp_job *job)
{
    char why[256];
    int k = tl_cuda_kernel_find(name);
    if (k < 0 || tl_cuda_kernel_at(k)->quality > job->quality)
        return -1;
    return tl_cuda_can_serve(s, tl_cuda_kernel_at(k), sl, job, why, sizeof why) ? k : -1;
}

/* The kernel for slice i: the forced one, the tuned one, or by the built-in rule.
 * -1 when forced but unable (why says so). */
static const char *const *cone_stack_rule(const tl_bp_job *job, size_t i)
{
    const double pixels = tl_cuda_cone_voxel_pixels(job, i);
    return pixels <= CONE_DENSE_PIXELS ? builtin_cone_dense
           : pixels <= CONE_FINE_PIXELS ? builtin_cone_fine
                                        : builtin_cone_coarse;
}

static int choose(const tl_cuda_state *s, const tl_bp_job *job, size_t i, int forced, char *why,
                  size_t why_len)
{
    const tl_bp_slice *sl = &job->slices[i];
    if (forced >= 0)
        return tl_cuda_can_serve(s, tl_cuda_kernel_at(forced), sl, job, why, why_len) ? forced
                                                                                      : -1;
    int q = job->quality < TL_QUALITY_COUNT ? (int)job->quality : TL_QUALITY_PREVIEW;
    const bool cone = job->geometry == TL_GEOMETRY_CONE;
    bool batch = !cone && has_partners(s, job, i);
    /* the tuner times 1 to 4 slices: its choice does not rank the stack kernels */
    const bool stack = cone && tl_cuda_cone_partners(job, i) >= COLUMN_SLICES;
    const tl_kernel_choice *c = stack ? NULL : find_choice(job, sl);
    int k = -1;
    if (c && batch)
        k = try_name(s, c->batch[q], sl, job);
    if (k < 0 && c)
        k = try_name(s, c->single[q], sl, job);
    const char *const *rule = !cone   ? (batch ? builtin_batch[q] : builtin_single[q])
                              : stack ? cone_stack_rule(job, i)
                                      : builtin_cone;
    for (int r = 0; k < 0 && r < RULE_LEN && rule[r]; r++)
        k = try_name(s, rule[r], sl, job);
    return k >= 0 ? k : tl_cuda_kernel_find(cone ? "cone-exact" : "plane-exact");
}

/* ---- jobs -------------------------------------------------------------------------------- */

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
        s->h_par[k] =
            make_float4((float)p->cos_t, (float)p->sin_t, (float)p->center, (float)p->weight);
        s->h_slot[k] = (int)p->slot;
        s->h_texy[k] = (float)p->slot + 0.5f;
        if (s->h_cone)
            for (int e = 0; e < 12; e++)
                s->h_cone[12 * k + e] = (float)p->cone[e];
    }
    size_t n = job->nproj;
    if (job->geometry == TL_GEOMETRY_CONE && !s->h_cone)
        return tl_fail(s->eb, TL_EINTERNAL, "a cone-beam job for a parallel-beam engine");
    if (s->h_cone)
        TL_CUDA(s->eb, cudaMemcpyAsync(s->d_cone, s->h_cone, n * 12 * sizeof(float),
                                       cudaMemcpyHostToDevice, s->stream));
    TL_CUDA(s->eb, cudaMemcpyAsync(s->d_par, s->h_par, n * sizeof(float4), cudaMemcpyHostToDevice,
                                   s->stream));
    TL_CUDA(s->eb, cudaMemcpyAsync(s->d_slot, s->h_slot, n * sizeof(int), cudaMemcpyHostToDevice,
                                   s->stream));
    TL_CUDA(s->eb, cudaMemcpyAsync(s->d_texy, s->h_texy, n * sizeof(float), cudaMemcpyHostToDevice,
                                   s->stream));
    TL_CUDA(s->eb, cudaEventRecord(s->proj_done, s->stream));
    return TL_OK;
}

tl_status tl_cuda_job_reserve(tl_cuda_state *s, size_t nslices)
{
    if (nslices <= s->job_cap)
        return TL_OK;
    /* only when a job has more slices than any before (never on the per-frame path) */
    int *k = (int *)realloc(s->job_kernel, nslices * sizeof *k);
    if (k)
        s->job_kernel = k;
    size_t *o = (size_t *)realloc(s->job_off, nslices * sizeof *o);
    if (o)
        s->job_off = o;
    bool *d = (bool *)realloc(s->job_done, nslices * sizeof *d);
    if (d)
        s->job_done = d;
    if (!k || !o || !d)
        return tl_fail(s->eb, TL_ENOMEM, "out of memory for a job of %zu slices", nslices);
    s->job_cap = nslices;
    return TL_OK;
}

tl_status tl_cuda_job_choose(tl_cuda_state *s, const tl_bp_job *job, int forced, bool *constant)
{
    *constant = false;
    for (size_t i = 0; i < job->nslices; i++) {
        char why[256];
        int k = choose(s, job, i, forced, why, sizeof why);
        if (k < 0)
            return tl_fail(s->eb, TL_EINVAL, "slice %zu: %s", i, why);
        s->job_kernel[i] = k;
        *constant = *constant || tl_cuda_kernel_at(k)->constant;
    }
    return TL_OK;
}

tl_cuda_rows tl_cuda_batch_rows(const tl_cuda_state *s, const tl_cuda_batch *b)
{
    tl_cuda_rows r;
    for (int k = 0; k < TL_CUDA_MAX_NV; k++)
        r.row[k] = s->window + (size_t)b->z[k < b->nz ? k : b->nz - 1] * s->slab_el;
    return r;
}

tl_status tl_cuda_job_launch(tl_cuda_state *s, const tl_bp_job *job)
{
    size_t *off = s->job_off;
    size_t o = 0;
    for (size_t i = 0; i < job->nslices; i++) {
        off[i] = o;
        o += (size_t)job->slices[i].height * job->slices[i].width;
        s->job_done[i] = false;
    }
    for (size_t i = 0; i < job->nslices; i++) {
        if (s->job_done[i])
            continue;
        const tl_cuda_kernel *k = tl_cuda_kernel_at(s->job_kernel[i]);
        if (k->family == TL_KF_CONE) {
            TL_TRY(tl_cuda_cone_job_launch(s, k, job, i, off));
            continue;
        }
        tl_cuda_batch b;
        memset(&b, 0, sizeof b);
        b.g = tl_cuda_make_geom(&job->slices[i]);
        /* this slice and the next ones of the same kernel and geometry, up to a pass */
        for (size_t j = i; j < job->nslices && b.nz < k->slices; j++) {
            if (s->job_done[j] || s->job_kernel[j] != s->job_kernel[i] ||
                (j != i && !same_geometry(&job->slices[i], &job->slices[j])))
                continue;
            uint32_t z = 0;
            tl_cuda_horizontal(&job->slices[j], s->rows, &z);
            b.z[b.nz] = z;
            b.out[b.nz] = s->out + off[j];
            b.nz++;
            s->job_done[j] = true;
        }
        if (k->family == TL_KF_ALU || k->family == TL_KF_HYB)
            b.cache_width = tl_cuda_cache_width(&b.g, job, k->tile, k->max_cache);
        TL_TRY(k->launch(s, k, &b, job->nproj));
    }
    return TL_OK;
}

tl_status tl_cuda_op_backproject(void *state, tl_bp_job *job)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    TL_TRY(tl_cuda_use_device(s));
    TL_TRY(tl_cuda_flush(s)); /* the held frames first (store.cu) */
    TL_TRY(tl_cuda_cone_stack_sync(s));
    int forced = tl_cuda_kernel_find(job->force);
    if (job->force && job->force[0] && forced < 0)
        return tl_fail(s->eb, TL_EINVAL, "the cuda backend has no kernel \"%s\"", job->force);
    TL_TRY(tl_cuda_job_reserve(s, job->nslices));

    /* validate every slice before anything is enqueued, and name what will run */
    bool constant;
    TL_TRY(tl_cuda_job_choose(s, job, forced, &constant));
    job->kernel = job->nslices ? tl_cuda_kernel_at(s->job_kernel[0])->name : "none";
    for (size_t i = 0; i < job->nslices; i++) {
        const char *name = tl_cuda_kernel_at(s->job_kernel[i])->name;
        if (job->slice_kernel)
            job->slice_kernel[i] = name;
        if (strcmp(name, job->kernel) != 0)
            job->kernel = "mixed";
    }
    if (job->nslices == 0)
        return TL_OK;

    TL_TRY(tl_cuda_job_prepare(s, job));
    tl_cuda_constant_guard guard(constant, s->device);
    TL_TRY(tl_cuda_job_launch(s, job));
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
