/* volume_plan.c — see volume_plan.h. The search is linear in h from the top (at most
 * 65536 candidates, each a few multiplications and one engine estimate), which keeps the
 * rule obvious; engine_bytes is only called for candidates that pass the host check. */
#include "config.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/cli.h"
#include "clients/volume_plan.h"

#define BATCH_BYTES ((size_t)1 << 30) /* 64 slices of 2048^2: long kernel jobs */


static size_t slice_bytes(const tl_volume_problem *p)
{
    return (size_t)p->size * p->size * sizeof(float);
}

uint32_t tl_volume_plan_batch(const tl_volume_problem *p, uint32_t h)
{
    size_t per = slice_bytes(p);
    size_t b = per >= BATCH_BYTES ? 1 : BATCH_BYTES / per;
    return b > h ? h : (uint32_t)b;
}

/* The engine's detector rows for slabs of h rows: whole frames, a band, or the slab's. */
static uint32_t engine_rows(const tl_volume_problem *p, uint32_t h)
{
    return p->frame_rows ? p->frame_rows : p->band_rows ? p->band_rows(p->band_ctx, h) : h;
}

size_t tl_volume_plan_gpu_bytes(const tl_volume_problem *p, uint32_t h, uint32_t batch)
{
    return p->engine_bytes(p->ctx, engine_rows(p, h)) + (size_t)batch * slice_bytes(p);
}

size_t tl_volume_plan_host_bytes(const tl_volume_problem *p, uint32_t h)
{
    size_t frames = (size_t)p->projections + p->darks + p->flats;
    size_t in = p->frame_rows
                    ? (size_t)p->chunk_frames * p->frame_rows * p->cols * p->in_sample
                    : 2 * frames * engine_rows(p, h) * p->cols * p->in_sample;
    return in + 2 * (size_t)h * slice_bytes(p) + p->writer_bytes;
}

/* Whole frames that the device cannot hold whatever the slab: the message names both. */
static int whole_frames_fail(const tl_volume_problem *p, const tl_volume_budget *b, char *err,
                             size_t errlen)
{
    return tl_cli_errf(err, errlen,
                 "dezinger and Paganin need whole frames in the engine: %u frames of %u x %u "
                 "need %zu MiB of GPU memory, over the budget of %zu MiB",
                 p->projections + p->darks + p->flats, p->frame_rows, p->cols,
                 tl_volume_plan_gpu_bytes(p, 1, 1) >> 20, b->gpu >> 20);
}

const char *tl_volume_filtered_name(tl_volume_filtered f)
{
    switch (f) {
        case TL_VOLUME_FILTERED_GPU: return "on the GPU";
        case TL_VOLUME_FILTERED_HOST: return "in host memory";
        default: return "recomputed per slab";
    }
}

/* Rows the reader touches for the band [r0, r0 + h): whole read_rows blocks. */
static uint64_t rows_touched(const tl_volume_problem *p, uint32_t r0, uint32_t h)
{
    uint32_t g = p->read_rows > 1 ? p->read_rows : 1;
    uint64_t lo = r0 / g * (uint64_t)g, hi = ((uint64_t)r0 + h + g - 1) / g * g;
    return (hi < p->rows ? hi : p->rows) - lo; /* edge chunks end with the data */
}

static bool fits(const tl_volume_problem *p, const tl_volume_budget *b, uint32_t h)
{
    return tl_volume_plan_host_bytes(p, h) <= b->host &&
           tl_volume_plan_gpu_bytes(p, h, tl_volume_plan_batch(p, h)) <= b->gpu;
}

/* Whole frames that fit both budgets (with slabs of one row: the least the slabs add). */
static bool whole_fits(const tl_volume_problem *p, const tl_volume_budget *b)
{
    return tl_volume_plan_gpu_bytes(p, 1, 1) <= b->gpu && tl_volume_plan_host_bytes(p, 1) <= b->host;
}

static int plan_make(const tl_volume_problem *p, const tl_volume_budget *b, uint32_t slab_rows,
                     tl_volume_plan *out, char *err, size_t errlen);

int tl_volume_plan_make(const tl_volume_problem *p, const tl_volume_budget *b, uint32_t slab_rows,
                        tl_volume_plan *out, char *err, size_t errlen)
{
    if (p->frame_rows && p->band_rows && !whole_fits(p, b)) { /* cone beam: bands */
        tl_volume_problem q = *p;
        q.frame_rows = 0;
        return plan_make(&q, b, slab_rows, out, err, errlen);
    }
    return plan_make(p, b, slab_rows, out, err, errlen);
}

static int plan_make(const tl_volume_problem *p, const tl_volume_budget *b, uint32_t slab_rows,
                     tl_volume_plan *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (p->rows == 0 || p->cols == 0 || p->size == 0 || p->projections == 0)
        return tl_cli_errf(err, errlen, "empty problem: %u rows, %u cols, %u projections, size %u",
                     p->rows, p->cols, p->projections, p->size);
    if (p->frame_rows && tl_volume_plan_gpu_bytes(p, 1, 1) > b->gpu)
        return whole_frames_fail(p, b, err, errlen);
    uint32_t h = 0;
    if (slab_rows > 0) {
        h = slab_rows < p->rows ? slab_rows : p->rows;
        if (!fits(p, b, h)) {
            uint32_t batch = tl_volume_plan_batch(p, h);
            return tl_cli_errf(err, errlen,
                         "slabs of %u rows do not fit: they need %zu MiB of GPU memory (budget "
                         "%zu MiB) and %zu MiB of host memory (budget %zu MiB)",
                         h, tl_volume_plan_gpu_bytes(p, h, batch) >> 20, b->gpu >> 20,
                         tl_volume_plan_host_bytes(p, h) >> 20, b->host >> 20);
        }
    } else {
        uint32_t base = p->cap_rows ? p->cap_rows : p->rows;
        uint32_t cap = base >= TL_VOLUME_MIN_SLABS
                           ? (base + TL_VOLUME_MIN_SLABS - 1) / TL_VOLUME_MIN_SLABS
                           : base;
        cap = cap < p->rows ? cap : p->rows;
        uint32_t g = p->read_rows > 1 ? p->read_rows : 1;
        /* the tallest that fits; among those at least g tall, a multiple of g */
        for (uint32_t c = cap; c >= 1 && h == 0; c--)
            if ((c < g || c % g == 0 || c == p->rows) && fits(p, b, c))
                h = c;
        for (uint32_t c = cap; c >= 1 && h == 0; c--) /* nothing aligned fits */
            if (fits(p, b, c))
                h = c;
        if (h == 0)
            return tl_cli_errf(err, errlen,
                         "nothing fits: one detector row per slab needs %zu MiB of GPU memory "
                         "(budget %zu MiB) and %zu MiB of host memory (budget %zu MiB)",
                         tl_volume_plan_gpu_bytes(p, 1, 1) >> 20, b->gpu >> 20,
                         tl_volume_plan_host_bytes(p, 1) >> 20, b->host >> 20);
    }
    out->slab_rows = h;
    out->slabs = (p->rows + h - 1) / h;
    out->last_rows = p->rows - (out->slabs - 1) * h;
    out->batch = tl_volume_plan_batch(p, h);
    out->passes = 1;
    out->filtered = TL_VOLUME_FILTERED_GPU;
    out->whole = p->frame_rows > 0;
    out->engine_rows = engine_rows(p, h);
    out->gpu_bytes = tl_volume_plan_gpu_bytes(p, h, out->batch);
    out->host_bytes = tl_volume_plan_host_bytes(p, h);
    uint64_t frames = (uint64_t)p->projections + p->darks + p->flats;
    uint64_t row_bytes = frames * p->cols * p->in_sample; /* one detector row of every frame */
    if (p->frame_rows) { /* whole frames: read and uploaded once */
        out->bytes_read = out->bytes_uploaded = row_bytes * p->frame_rows;
    } else if (p->band_rows) { /* a band per slab, each read and uploaded whole */
        out->bytes_read = out->bytes_uploaded = row_bytes * out->engine_rows * out->slabs;
        out->passes = (double)out->engine_rows * out->slabs / p->rows;
        out->filtered = TL_VOLUME_FILTERED_RECOMPUTE;
    } else { /* parallel beam: each row once, the reader touching whole chunks */
        for (uint32_t k = 0; k < out->slabs; k++) {
            uint32_t r0 = k * h, n = k + 1 < out->slabs ? h : out->last_rows;
            out->bytes_read += row_bytes * rows_touched(p, r0, n);
        }
        out->bytes_uploaded = row_bytes * p->rows;
    }
    out->bytes_downloaded = (uint64_t)p->rows * slice_bytes(p);
    out->bytes_written = (uint64_t)p->rows * p->size * p->size * p->out_sample;
    return 0;
}

/* "1.25 GiB", or "12.5 MiB" below a GiB (ring of 8 buffers: several per printf) */
static const char *bytes(uint64_t b)
{
    static char buf[8][32];
    static int k;
    k = (k + 1) % 8;
    if (b >= ((uint64_t)1 << 30))
        snprintf(buf[k], sizeof buf[k], "%.2f GiB", (double)b / (1 << 30));
    else
        snprintf(buf[k], sizeof buf[k], "%.1f MiB", (double)b / (1 << 20));
    return buf[k];
}

void tl_volume_plan_print(const tl_volume_plan *plan, const tl_volume_problem *p,
                          const tl_volume_budget *b, FILE *f)
{
    fprintf(f,
            "plan: volume %u x %u x %u from %u projections of %u x %u (+%u darks, %u flats)\n",
            p->size, p->size, p->rows, p->projections, p->rows, p->cols, p->darks, p->flats);
    fprintf(f,
            "plan: %u slab%s of %u rows (last %u), %.2f pass%s over the input, %u slices per "
            "call; filtered projections %s\n",
            plan->slabs, plan->slabs == 1 ? "" : "s", plan->slab_rows, plan->last_rows,
            plan->passes, plan->passes == 1 ? "" : "es", plan->batch,
            tl_volume_filtered_name(plan->filtered));
    if (plan->whole)
        fprintf(f,
                "plan: whole frames of %u rows in the engine, read once, %u frames at a time; "
                "the slabs cut the output\n",
                plan->engine_rows, p->chunk_frames);
    else if (plan->filtered == TL_VOLUME_FILTERED_RECOMPUTE)
        fprintf(f,
                "plan: bands of %u detector rows per slab (the rows its voxels project to), "
                "read and filtered per slab%s%s%s\n",
                plan->engine_rows, p->frame_rows ? "; whole frames would need " : "",
                p->frame_rows ? bytes(tl_volume_plan_gpu_bytes(p, 1, 1)) : "",
                p->frame_rows ? " of GPU memory" : "");
    fprintf(f, "plan: memory GPU %s of %s, host %s of %s\n", bytes(plan->gpu_bytes),
            bytes(b->gpu), bytes(plan->host_bytes), bytes(b->host));
    fprintf(f, "plan: bytes read %s, uploaded %s, downloaded %s, written %s\n",
            bytes(plan->bytes_read), bytes(plan->bytes_uploaded), bytes(plan->bytes_downloaded),
            bytes(plan->bytes_written));
}

bool tl_volume_parse_bytes(const char *s, size_t *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v > 0))
        return false;
    double m = 1;
    switch (*end) {
        case 'K': case 'k': m = 1024.0; end++; break;
        case 'M': case 'm': m = 1024.0 * 1024; end++; break;
        case 'G': case 'g': m = 1024.0 * 1024 * 1024; end++; break;
        case 'T': case 't': m = 1024.0 * 1024 * 1024 * 1024; end++; break;
        default: break;
    }
    if (m > 1 && *end == 'i')
        end++;
    if (*end == 'B')
        end++;
    if (*end || v * m > 1e18)
        return false;
    *out = (size_t)(v * m);
    return true;
}

size_t tl_volume_less_margin(size_t free_bytes)
{
    size_t keep = free_bytes / 10 + ((size_t)256 << 20);
    return free_bytes > keep ? free_bytes - keep : 0;
}
