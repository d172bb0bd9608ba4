/* split.c — one engine on several GPUs of a host (issue #8): the detector rows are split
 * across child backends, one per entry of config.devices, behind the ordinary operation
 * table (gpu/base/backend.h), so the engine and everything above it stay as they are.
 *
 * Why rows: preprocessing and filtering work row by row, and a horizontal slice reads the
 * sinogram of one detector row, so a partition by rows needs no data exchange between
 * GPUs. Each part stores its rows of every frame and back-projects the slices in its rows
 * at the full speed of its card, while the others do the same: full-volume back
 * projection grows with the number of GPUs (2.00x on two H200s); per-frame ingest nearly
 * so (host frames 1.93x, frames in GPU memory 1.91x), since each part filters its halves of
 * queued frames in batches (gpu/cuda/store.cu): a filter pass's fixed costs do not shrink
 * with its rows, and frame by frame the halves gave only 1.72-1.84x; tracked slices scale
 * as their rows are spread (the streaming benchmark's two horizontal slices lie in one
 * GPU's rows: 1.40-1.57x).
 *
 * Partition (tl_engine_split_rows): part k owns rows [a_k, b_k), a_k = floor(k H / P), and
 * holds [a_k, min(b_k + 1, H)). The extra row ("halo") lets a sample between rows b_k - 1
 * and b_k (linear interpolation reads rows floor(z) and floor(z) + 1) be computed inside
 * one part. A child is an ordinary cpu or cuda backend created for its held rows only; it
 * knows nothing of the split: every plane handed to part k is shifted down by a_k rows, and
 * every frame is cut to its rows (same pitch, data + a_k rows), host or device memory.
 *
 * Ownership: a sample at height z belongs to the part that owns row r = floor(z), clamped
 * to [-1, H - 1] (part 0 also owns r = -1, the band below row 0 where interpolation fades to
 * zero; the last part everything from row H - 1 up). The owner holds both rows the sample
 * lies between, so it computes what a single engine computes.
 *   - A horizontal slice (no z component along the plane) is computed by the owner of its
 *     z alone, straight into the caller's buffer.
 *   - Any other plane (ortho-slices, tilted planes) is computed whole, into host scratch, by
 *     every part whose rows it crosses, and assemble() takes each output pixel from the
 *     part that owns the pixel's z. The host computes z per pixel from the plane in double,
 *     the kernels in float, so right at a boundary the two may disagree by a rounding on
 *     which part owns a pixel. That is harmless: interpolation is continuous, and a part
 *     evaluating a sample a rounding outside its rows misses at most a rounding's share of
 *     the row it lacks.
 * Tracked slices (acc_*) follow the same rule: a row's accumulator lives on its owner; a
 * plane's on every part it crosses, each keeping the full plane, assembled on read-out.
 *
 * Parallelism: a pool with one thread per part runs every operation that reaches the
 * children on all of them at once (one job per part; inline when only one part has work),
 * so per-frame uploads and filters, and back projections, overlap across GPUs; the caller
 * waits for the slowest part. The GPUs of a host are assumed alike: the kernel list,
 * device id and micro-benchmarks are part 0's; benchmarks time all parts at once and
 * report the slowest. Nothing is allocated per frame: routing lists and plane scratch
 * grow only when a job is larger than any before.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu/base/pool.h"
#include "gpu/cpu/cpu_backend.h"
#include "gpu/engine.h"
#include "gpu/split.h"
#ifdef HAVE_CUDA
#include "gpu/cuda/cuda_backend.h"
#endif

#define TL_SPLIT_BENCH_ROWS 128 /* kernels one part's benchmark lists at most */
#define TL_SPLIT_SPIN_NS 100000  /* the pool spins this long between operations: frames
                                  * back to back come every ~60-150 us, and waking a sleeping
                                  * thread for each cost host frames 1.2-1.8x instead of
                                  * 1.84x on two GPUs */

/* One child backend and its share of the current operation. */
typedef struct {
    const tl_backend_ops *ops;
    void *be;
    tl_errbuf err;            /* the child reports here */
    int device;               /* CUDA ordinal (the CPU backend ignores it) */
    uint32_t first, end;      /* owns rows [first, end) */
    uint32_t held;            /* holds rows [first, first + held) */
    tl_status st;             /* outcome of its share */

    /* its slices of the current job, shifted into its rows, and where each came from */
    tl_bp_slice *sl;
    const char **sk;          /* their kernels, as the child names them */
    int *ids;                 /* their slice ids (accumulators) */
    float **outs;             /* their outputs (accumulator read-outs) */
    size_t *from;             /* index in the caller's list */
    size_t n, cap;
    float *scratch;           /* host copies of the planes it computes */
    size_t scratch_cap;       /* floats */
    const char *kernel;       /* what its share ran */

    tl_bench_row *rows;       /* bench: its table */
    size_t nrows;
    double ms;                /* bench_store: its time */
} part;

/* A tracked slice: its size from acc_alloc, and its plane once it is placed on the parts
 * that compute it, which happens at its first update (always a full rebuild: the engine
 * builds a newly tracked slice before it adds to it), since acc_alloc does not say the
 * plane. */
typedef struct {
    bool alloc;
    bool placed;
    tl_bp_slice sl;
} acc_entry;

typedef enum {
    OP_CALIB, OP_STORE, OP_BENCH_STORE,            /* a frame, cut by rows */
    OP_BACKPROJECT, OP_ACC_UPDATE, OP_ACC_READ,   /* routed slices */
    OP_BENCH, OP_FLUSH
} op_kind;

typedef struct {
    tl_errbuf *eb;
    part p[TL_ENGINE_MAX_DEVICES];
    uint32_t np, rows;
    bool cuda;
    tl_pool *pool;            /* np threads, the caller included */
    char name[256];

    /* the current operation, read by every part's job */
    op_kind op;
    const tl_frame *f;
    uint32_t count, slot;
    const tl_bp_job *job;
    bool add;
    int reps;

    /* planes of the current list: copy[i * np + k] is part k's copy of slice i */
    const float **copy;
    size_t copy_cap;          /* slices */
    tl_bp_slice *rsl;         /* acc_read: the slices read out */
    size_t rsl_cap;

    acc_entry *acc;           /* by slice id */
    int nacc;
} tl_split;

void tl_engine_split_rows(uint32_t rows, uint32_t parts, uint32_t k, uint32_t *first,
                          uint32_t *end)
{
    *first = (uint32_t)((uint64_t)k * rows / parts);
    *end = (uint32_t)((uint64_t)(k + 1) * rows / parts);
}

/* ---- configuration ------------------------------------------------------------------------ */

static tl_status child_ops(const tl_engine_config *c, tl_errbuf *eb, const tl_backend_ops **ops)
{
    if (c->backend == TL_BACKEND_CPU) {
        *ops = &tl_cpu_backend;
        return TL_OK;
    }
#ifdef HAVE_CUDA
    if (c->backend == TL_BACKEND_CUDA) {
        *ops = &tl_cuda_backend;
        return TL_OK;
    }
#endif
    return tl_fail(eb, TL_EINTERNAL, "split backend given backend %s, not cpu or cuda",
                   tl_backend_name(c->backend));
}

/* Part k's configuration: its held rows on its device, the CPU threads shared out. */
static tl_engine_config part_config(const tl_engine_config *c, uint32_t k)
{
    tl_engine_config pc = *c;
    uint32_t first, end;
    tl_engine_split_rows(c->rows, c->ndevices, k, &first, &end);
    pc.rows = (end < c->rows ? end + 1 : end) - first;
    pc.device = c->devices[k];
    pc.ndevices = 0;
    long cores = c->threads > 0 ? c->threads : sysconf(_SC_NPROCESSORS_ONLN);
    long share = cores / (long)c->ndevices;
    pc.threads = share > 1 ? (int)share : 1;
    return pc;
}

/* What one device must hold: the sum of its parts (two parts on one GPU need both there). */
typedef struct {
    int device;               /* -1: host memory (the CPU backend's parts all share it) */
    uint32_t parts;
    size_t need, avail;
} device_use;

static tl_status device_uses(const tl_engine_config *c, size_t padded, tl_errbuf *eb,
                             device_use *u, uint32_t *nu, tl_memory_estimate *sum)
{
    const tl_backend_ops *ops = NULL;
    tl_status st = child_ops(c, eb, &ops);
    if (st != TL_OK)
        return st;
    memset(sum, 0, sizeof *sum);
    *nu = 0;
    bool known = true;
    for (uint32_t k = 0; k < c->ndevices; k++) {
        tl_engine_config pc = part_config(c, k);
        tl_memory_estimate m;
        st = ops->estimate(&pc, padded, &m, eb);
        if (st != TL_OK)
            return st;
        sum->window_bytes += m.window_bytes;
        sum->buffer_bytes += m.buffer_bytes;
        sum->total_bytes += m.total_bytes;
        int dev = c->backend == TL_BACKEND_CUDA ? pc.device : -1;
        uint32_t i = 0;
        while (i < *nu && u[i].device != dev)
            i++;
        if (i == *nu) {
            u[(*nu)++] = (device_use){.device = dev, .avail = m.available_bytes};
            known = known && m.available_bytes > 0;
            sum->available_bytes += m.available_bytes;
        }
        u[i].parts++;
        u[i].need += m.total_bytes;
    }
    if (!known)
        sum->available_bytes = 0; /* unknown somewhere: the per-device check in create decides */
    return TL_OK;
}

static tl_status split_estimate(const tl_engine_config *c, size_t padded, tl_memory_estimate *m,
                                tl_errbuf *eb)
{
    device_use u[TL_ENGINE_MAX_DEVICES];
    uint32_t nu;
    return device_uses(c, padded, eb, u, &nu, m);
}

/* ---- creation ------------------------------------------------------------------------------ */

static void split_destroy(void *state)
{
    tl_split *sp = state;
    if (!sp)
        return;
    if (sp->pool)
        tl_pool_destroy(sp->pool);
    for (uint32_t k = 0; k < sp->np; k++) {
        part *p = &sp->p[k];
        if (p->be)
            p->ops->destroy(p->be); /* frees its accumulators too */
        free(p->sl);
        free(p->sk);
        free(p->ids);
        free(p->outs);
        free(p->from);
        tl_host_free(sp->cuda ? TL_BACKEND_CUDA : TL_BACKEND_CPU, p->scratch);
        free(p->rows);
    }
    free(sp->copy);
    free(sp->rsl);
    free(sp->acc);
    free(sp);
}

/* "part 1 of 2 (rows 512..1023, CUDA device 1)" */
static void part_label(const tl_split *sp, uint32_t k, char *buf, size_t len)
{
    const part *p = &sp->p[k];
    if (sp->cuda)
        snprintf(buf, len, "part %u of %u (rows %u..%u, CUDA device %d)", k, sp->np, p->first,
                 p->end - 1, p->device);
    else
        snprintf(buf, len, "part %u of %u (rows %u..%u)", k, sp->np, p->first, p->end - 1);
}

/* Reports part k's failure (its own message) as the split's. */
static tl_status part_fail(tl_split *sp, uint32_t k)
{
    char label[96];
    part_label(sp, k, label, sizeof label);
    return tl_fail(sp->eb, sp->p[k].st, "%s: %s", label, sp->p[k].err.msg);
}

/* "2 × NVIDIA H200 (sm_90, 132 SMs)"; "CPU (4 threads), 3 row partitions". */
static void make_name(tl_split *sp)
{
    int devs[TL_ENGINE_MAX_DEVICES];
    uint32_t nd = 0;
    bool alike = true;
    const char *first = sp->p[0].ops->device_name(sp->p[0].be);
    char joined[sizeof sp->name] = "";
    size_t used = 0;
    for (uint32_t k = 0; k < sp->np; k++) {
        int dev = sp->cuda ? sp->p[k].device : -1;
        uint32_t i = 0;
        while (i < nd && devs[i] != dev)
            i++;
        if (i < nd)
            continue; /* a device already named */
        devs[nd++] = dev;
        const char *name = sp->p[k].ops->device_name(sp->p[k].be);
        alike = alike && strcmp(name, first) == 0;
        if (used < sizeof joined) {
            int w = snprintf(joined + used, sizeof joined - used, "%s%s", used ? " + " : "", name);
            used += w > 0 ? (size_t)w : 0;
        }
    }
    int n;
    if (alike && nd > 1)
        n = snprintf(sp->name, sizeof sp->name, "%u × %s", nd, first);
    else
        n = snprintf(sp->name, sizeof sp->name, "%s", alike ? first : joined);
    if (nd != sp->np && n > 0 && (size_t)n < sizeof sp->name)
        snprintf(sp->name + n, sizeof sp->name - (size_t)n, ", %u row partitions", sp->np);
}

static tl_status split_create(const tl_engine_config *c, size_t padded, tl_errbuf *eb,
                              void **state)
{
    *state = NULL;
    const tl_backend_ops *ops = NULL;
    tl_status st = child_ops(c, eb, &ops);
    if (st != TL_OK)
        return st;
    if (c->ndevices < 2 || c->ndevices > TL_ENGINE_MAX_DEVICES || c->ndevices > c->rows)
        return tl_fail(eb, TL_EINTERNAL, "split backend given %u devices for %u rows",
                       c->ndevices, c->rows);

    /* Memory per device, before anything is allocated: the engine compared the sum over
     * all devices; two parts on one device must fit there together. */
    device_use u[TL_ENGINE_MAX_DEVICES];
    uint32_t nu;
    tl_memory_estimate sum;
    st = device_uses(c, padded, eb, u, &nu, &sum);
    if (st != TL_OK)
        return st;
    for (uint32_t i = 0; i < nu; i++)
        if (u[i].avail && u[i].need > u[i].avail) {
            char where[48] = "host memory";
            if (u[i].device >= 0)
                snprintf(where, sizeof where, "CUDA device %d", u[i].device);
            return tl_fail(eb, TL_ENOMEM,
                           "scan needs %.2f GiB on %s (%u of %u row partitions) but only %.2f "
                           "GiB are free there; spread the rows over more devices, reconstruct "
                           "fewer rows or shorten the window",
                           u[i].need / 1073741824.0, where, u[i].parts, c->ndevices,
                           u[i].avail / 1073741824.0);
        }

    tl_split *sp = calloc(1, sizeof *sp);
    if (!sp)
        return tl_fail(eb, TL_ENOMEM, "out of memory");
    sp->eb = eb;
    sp->np = c->ndevices;
    sp->rows = c->rows;
    sp->cuda = c->backend == TL_BACKEND_CUDA;
    sp->pool = tl_pool_create((int)sp->np);
    if (!sp->pool) {
        split_destroy(sp);
        return tl_fail(eb, TL_ENOMEM, "cannot start %u threads for the row partitions",
                       c->ndevices);
    }
    tl_pool_set_spin(sp->pool, TL_SPLIT_SPIN_NS);
    for (uint32_t k = 0; k < sp->np; k++) {
        part *p = &sp->p[k];
        tl_engine_config pc = part_config(c, k);
        p->ops = ops;
        p->device = pc.device;
        p->held = pc.rows;
        tl_engine_split_rows(c->rows, c->ndevices, k, &p->first, &p->end);
        p->rows = calloc(TL_SPLIT_BENCH_ROWS, sizeof *p->rows);
        if (!p->rows) {
            split_destroy(sp);
            return tl_fail(eb, TL_ENOMEM, "out of memory");
        }
        p->st = ops->create(&pc, padded, &p->err, &p->be);
        if (p->st != TL_OK) {
            st = part_fail(sp, k); /* the child's message, named by part and device */
            split_destroy(sp);
            return st;
        }
    }
    make_name(sp);
    *state = sp;
    return TL_OK;
}

/* ---- running the parts --------------------------------------------------------------------- */

/* Part p's rows of frame f: same pitch, starting at its first row (host or device memory). */
static tl_frame part_frame(const part *p, const tl_frame *f)
{
    size_t pitch = f->pitch ? f->pitch : (size_t)f->cols * tl_dtype_size(f->dtype);
    tl_frame s = *f;
    s.data = (const char *)f->data + (size_t)p->first * pitch;
    s.rows = p->held;
    s.pitch = pitch;
    return s;
}

/* Part p's job: the caller's projections and kernel rules, its own slices. */
static tl_bp_job part_job(part *p, const tl_bp_job *job)
{
    tl_bp_job j = *job;
    j.slices = p->sl;
    j.nslices = p->n;
    j.slice_kernel = p->sk;
    j.kernel = NULL;
    for (size_t m = 0; m < p->n; m++)
        p->sk[m] = NULL;
    return j;
}

/* Whether part k has a share of the current operation. */
static bool busy(const tl_split *sp, uint32_t k)
{
    return sp->op <= OP_BENCH_STORE || sp->op == OP_FLUSH || sp->p[k].n > 0;
}

/* One pool job: part k's share of the current operation (sp->op). */
static void run_part(void *ctx, size_t k, int thread)
{
    (void)thread;
    tl_split *sp = ctx;
    part *p = &sp->p[k];
    tl_frame f;
    tl_bp_job j;
    if (!busy(sp, (uint32_t)k))
        return;
    switch (sp->op) {
    case OP_CALIB:
        f = part_frame(p, sp->f);
        p->st = p->ops->calib_add(p->be, &f, sp->count);
        break;
    case OP_STORE:
        f = part_frame(p, sp->f);
        p->st = p->ops->store(p->be, &f, sp->slot);
        break;
    case OP_BENCH_STORE:
        f = part_frame(p, sp->f);
        p->st = p->ops->bench_store(p->be, &f, sp->reps, &p->ms);
        break;
    case OP_BACKPROJECT:
        j = part_job(p, sp->job);
        p->st = p->ops->backproject(p->be, &j);
        p->kernel = j.kernel;
        break;
    case OP_ACC_UPDATE:
        j = part_job(p, sp->job);
        p->st = p->ops->acc_update(p->be, &j, p->ids, sp->add);
        p->kernel = j.kernel;
        break;
    case OP_ACC_READ:
        p->st = p->ops->acc_read(p->be, p->ids, p->n, p->outs);
        break;
    case OP_BENCH:
        j = part_job(p, sp->job);
        p->nrows = 0;
        p->st = p->ops->bench(p->be, &j, sp->reps, p->rows, TL_SPLIT_BENCH_ROWS, &p->nrows);
        if (p->nrows > TL_SPLIT_BENCH_ROWS)
            p->nrows = TL_SPLIT_BENCH_ROWS;
        break;
    case OP_FLUSH:
        p->st = p->ops->flush ? p->ops->flush(p->be) : TL_OK;
        break;
    }
}

/* Runs operation op on every part with a share, all at once; the first failure (by part)
 * is the result. */
static tl_status run_parts(tl_split *sp, op_kind op)
{
    sp->op = op;
    uint32_t active = 0, last = 0;
    for (uint32_t k = 0; k < sp->np; k++) {
        sp->p[k].st = TL_OK;
        if (busy(sp, k)) {
            active++;
            last = k;
        }
    }
    if (active == 1) /* waking the pool would only cost time */
        run_part(sp, last, 0);
    else if (active > 1)
        tl_pool_run(sp->pool, sp->np, run_part, sp);
    for (uint32_t k = 0; k < sp->np; k++)
        if (sp->p[k].st != TL_OK)
            return part_fail(sp, k);
    return TL_OK;
}

/* ---- who computes what --------------------------------------------------------------------- */

/* The part that owns height z: the one owning row floor(z), clamped to [-1, H - 1]. */
static uint32_t owner(const tl_split *sp, double z)
{
    double r = floor(z);
    if (!(r >= 0))
        return 0; /* below row 0 (and the -1 < z < 0 band): part 0 */
    uint32_t row = r >= sp->rows ? sp->rows - 1 : (uint32_t)r;
    /* floor(k H / P) <= row for this k, so the owner is k or a later part */
    uint32_t k = (uint32_t)((uint64_t)row * sp->np / sp->rows);
    while (row >= sp->p[k].end)
        k++;
    return k;
}

static bool horizontal(const tl_bp_slice *sl)
{
    return sl->plane[2] == 0.f && sl->plane[5] == 0.f;
}

/* Height of output pixel (i, j): base + s xaxis + t yaxis with s = (j + 0.5) / w and
 * t = 1 - (i + 0.5) / h (engine.h), in double. */
static double pixel_z(const tl_bp_slice *sl, uint32_t i, uint32_t j)
{
    const float *o = sl->plane;
    double s = (j + 0.5) / sl->width, t = 1.0 - (i + 0.5) / sl->height;
    return o[8] + s * o[2] + t * o[5];
}

/* The parts that compute slice sl: [*k0, *k1]. z is affine in the pixel, so its extremes
 * are at corner pixels, and ownership grows with z. */
static void parts_of(const tl_split *sp, const tl_bp_slice *sl, uint32_t *k0, uint32_t *k1)
{
    if (horizontal(sl)) {
        *k0 = *k1 = owner(sp, sl->plane[8]);
        return;
    }
    uint32_t h = sl->height - 1, w = sl->width - 1;
    double c[4] = {pixel_z(sl, 0, 0), pixel_z(sl, 0, w), pixel_z(sl, h, 0), pixel_z(sl, h, w)};
    double lo = c[0], hi = c[0];
    for (int i = 1; i < 4; i++) {
        lo = c[i] < lo ? c[i] : lo;
        hi = c[i] > hi ? c[i] : hi;
    }
    *k0 = owner(sp, lo);
    *k1 = owner(sp, hi);
}

/* The owner of pixel (i, j) of a plane computed by parts [k0, k1]. (Clamped: the host's
 * rounding must not pick a part that did not compute the plane.) */
static uint32_t pixel_owner(const tl_split *sp, const tl_bp_slice *sl, uint32_t i, uint32_t j,
                            uint32_t k0, uint32_t k1)
{
    uint32_t k = owner(sp, pixel_z(sl, i, j));
    return k < k0 ? k0 : k > k1 ? k1 : k;
}

/* Puts plane sl together in out from the parts' copies (copy[k]: part k's, for k in
 * [k0, k1]): each pixel from the part that owns its height. */
static void assemble(const tl_split *sp, const tl_bp_slice *sl, const float *const *copy,
                     uint32_t k0, uint32_t k1, float *out)
{
    uint32_t h = sl->height, w = sl->width;
    for (uint32_t i = 0; i < h; i++) {
        size_t row = (size_t)i * w;
        if (sl->plane[2] == 0.f) {
            /* z constant along an output row (ortho-slices): one owner for the whole row */
            uint32_t k = pixel_owner(sp, sl, i, 0, k0, k1);
            memcpy(out + row, copy[k] + row, w * sizeof *out);
            continue;
        }
        for (uint32_t j = 0; j < w; j++)
            out[row + j] = copy[pixel_owner(sp, sl, i, j, k0, k1)][row + j];
    }
}

/* realloc that keeps p (and clears *ok) when it fails, so several arrays can grow in one
 * expression and be checked once. */
static void *grown(void *p, size_t n, size_t size, bool *ok)
{
    void *q = realloc(p, n * size);
    *ok = *ok && q != NULL;
    return q ? q : p;
}

/* Room for n slices in part p's lists and px floats of plane copies. */
static tl_status reserve_part(tl_split *sp, part *p, size_t n, size_t px)
{
    bool ok = true;
    if (n > p->cap) {
        p->sl = grown(p->sl, n, sizeof *p->sl, &ok);
        p->sk = grown(p->sk, n, sizeof *p->sk, &ok);
        p->ids = grown(p->ids, n, sizeof *p->ids, &ok);
        p->outs = grown(p->outs, n, sizeof *p->outs, &ok);
        p->from = grown(p->from, n, sizeof *p->from, &ok);
        if (!ok)
            return tl_fail(sp->eb, TL_ENOMEM, "out of memory for a job of %zu slices", n);
        p->cap = n;
    }
    if (px > p->scratch_cap) { /* page-locked: planes come back at the bus's full speed */
        char why[256];
        tl_backend_kind kind = sp->cuda ? TL_BACKEND_CUDA : TL_BACKEND_CPU;
        tl_host_free(kind, p->scratch);
        p->scratch = NULL;
        p->scratch_cap = 0;
        if (tl_host_alloc(kind, px * sizeof *p->scratch, (void **)&p->scratch, why,
                          sizeof why) != TL_OK)
            return tl_fail(sp->eb, TL_ENOMEM, "out of host memory for %.1f MiB of plane "
                           "slices: %s", px * sizeof(float) / 1048576.0, why);
        p->scratch_cap = px;
    }
    return TL_OK;
}

/* Deals slices sl[0..n) (ids: their slice ids, or NULL) to the parts that compute them,
 * each shifted into the part's rows. A horizontal slice keeps its output (the caller's
 * buffer, or NULL); a plane with an output gets one in the part's scratch, listed in
 * sp->copy for assemble(). */
static tl_status route(tl_split *sp, const tl_bp_slice *sl, size_t n, const int *ids)
{
    size_t count[TL_ENGINE_MAX_DEVICES] = {0}, px[TL_ENGINE_MAX_DEVICES] = {0};
    uint32_t k0, k1;
    for (size_t i = 0; i < n; i++) {
        parts_of(sp, &sl[i], &k0, &k1);
        for (uint32_t k = k0; k <= k1; k++) {
            count[k]++;
            if (!horizontal(&sl[i]) && sl[i].out)
                px[k] += (size_t)sl[i].height * sl[i].width;
        }
    }
    for (uint32_t k = 0; k < sp->np; k++) {
        tl_status st = reserve_part(sp, &sp->p[k], count[k], px[k]);
        if (st != TL_OK)
            return st;
        sp->p[k].n = 0;
        px[k] = 0; /* from here: scratch used so far */
    }
    if (n > sp->copy_cap) {
        bool ok = true;
        sp->copy = grown(sp->copy, n * sp->np, sizeof *sp->copy, &ok);
        if (!ok)
            return tl_fail(sp->eb, TL_ENOMEM, "out of memory for a job of %zu slices", n);
        sp->copy_cap = n;
    }
    for (size_t i = 0; i < n; i++) {
        parts_of(sp, &sl[i], &k0, &k1);
        for (uint32_t k = k0; k <= k1; k++) {
            part *p = &sp->p[k];
            size_t m = p->n++;
            p->sl[m] = sl[i];
            /* exact when z >= first (a float minus a smaller whole number): where p owns z */
            p->sl[m].plane[8] = sl[i].plane[8] - (float)p->first;
            if (!horizontal(&sl[i]) && sl[i].out) {
                p->sl[m].out = p->scratch + px[k];
                px[k] += (size_t)sl[i].height * sl[i].width;
                sp->copy[i * sp->np + k] = p->sl[m].out;
            }
            p->outs[m] = p->sl[m].out;
            p->ids[m] = ids ? ids[i] : -1;
            p->from[m] = i;
        }
    }
    return TL_OK;
}

/* After route() and run_parts(): the planes among sl[0..n) put together into their
 * outputs (sl[i].out, where there is one). */
static void assemble_all(tl_split *sp, const tl_bp_slice *sl, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (horizontal(&sl[i]) || !sl[i].out)
            continue;
        uint32_t k0, k1;
        parts_of(sp, &sl[i], &k0, &k1);
        assemble(sp, &sl[i], sp->copy + i * sp->np, k0, k1, sl[i].out);
    }
}

/* job->kernel and slice_kernel from what the parts ran: a plane is named by the first
 * part that computed it (they run the same rule), "mixed" when slices differ. */
static void name_kernels(const tl_split *sp, tl_bp_job *job)
{
    job->kernel = NULL;
    if (job->slice_kernel)
        for (size_t i = 0; i < job->nslices; i++)
            job->slice_kernel[i] = NULL;
    for (uint32_t k = 0; k < sp->np; k++) {
        const part *p = &sp->p[k];
        for (size_t m = 0; m < p->n; m++) {
            const char *name = p->sk[m] ? p->sk[m] : p->kernel ? p->kernel : "?";
            if (job->slice_kernel && !job->slice_kernel[p->from[m]])
                job->slice_kernel[p->from[m]] = name;
            if (!job->kernel)
                job->kernel = name;
            else if (strcmp(job->kernel, name) != 0)
                job->kernel = "mixed";
        }
    }
    if (!job->kernel)
        job->kernel = "none";
}

/* ---- operations ---------------------------------------------------------------------------- */

static tl_status split_set_filter(void *state, const double *response)
{
    tl_split *sp = state;
    for (uint32_t k = 0; k < sp->np; k++)
        if ((sp->p[k].st = sp->p[k].ops->set_filter(sp->p[k].be, response)) != TL_OK)
            return part_fail(sp, k);
    return TL_OK;
}

static tl_status split_calib_reset(void *state, tl_frame_kind kind)
{
    tl_split *sp = state;
    for (uint32_t k = 0; k < sp->np; k++)
        if ((sp->p[k].st = sp->p[k].ops->calib_reset(sp->p[k].be, kind)) != TL_OK)
            return part_fail(sp, k);
    return TL_OK;
}

static tl_status split_calib_add(void *state, const tl_frame *f, uint32_t count)
{
    tl_split *sp = state;
    sp->f = f;
    sp->count = count;
    return run_parts(sp, OP_CALIB);
}

static tl_status split_store(void *state, const tl_frame *f, uint32_t slot)
{
    tl_split *sp = state;
    sp->f = f;
    sp->slot = slot;
    return run_parts(sp, OP_STORE);
}

/* Every part runs the frames it holds for a batch (each part holds the same frames). */
static tl_status split_flush(void *state)
{
    return run_parts(state, OP_FLUSH);
}

static tl_status split_backproject(void *state, tl_bp_job *job)
{
    tl_split *sp = state;
    tl_status st = route(sp, job->slices, job->nslices, NULL);
    if (st != TL_OK)
        return st;
    sp->job = job;
    st = run_parts(sp, OP_BACKPROJECT);
    if (st != TL_OK)
        return st;
    assemble_all(sp, job->slices, job->nslices);
    name_kernels(sp, job);
    return TL_OK;
}

/* ---- accumulators of tracked slices ------------------------------------------------------- */

static void split_acc_free(void *state, int id)
{
    tl_split *sp = state;
    if (id < 0 || id >= sp->nacc || !sp->acc[id].alloc)
        return;
    acc_entry *a = &sp->acc[id];
    if (a->placed) {
        uint32_t k0, k1;
        parts_of(sp, &a->sl, &k0, &k1);
        for (uint32_t k = k0; k <= k1; k++)
            sp->p[k].ops->acc_free(sp->p[k].be, id);
    }
    memset(a, 0, sizeof *a);
}

static tl_status split_acc_alloc(void *state, int id, uint32_t height, uint32_t width)
{
    tl_split *sp = state;
    if (id >= sp->nacc) {
        int n = id + 8;
        bool ok = true;
        sp->acc = grown(sp->acc, (size_t)n, sizeof *sp->acc, &ok);
        if (!ok)
            return tl_fail(sp->eb, TL_ENOMEM, "out of memory for accumulators");
        memset(sp->acc + sp->nacc, 0, (size_t)(n - sp->nacc) * sizeof *sp->acc);
        sp->nacc = n;
    }
    split_acc_free(sp, id); /* (the engine frees before it allocates again) */
    acc_entry *a = &sp->acc[id];
    a->alloc = true;
    a->sl.height = height;
    a->sl.width = width;
    return TL_OK;
}

/* Gives slice id (plane sl) accumulators on the parts that compute it. */
static tl_status place(tl_split *sp, int id, const tl_bp_slice *sl)
{
    acc_entry *a = &sp->acc[id];
    if (sl->height != a->sl.height || sl->width != a->sl.width)
        return tl_fail(sp->eb, TL_EINTERNAL, "slice %d updated as %u x %u, tracked as %u x %u",
                       id, sl->height, sl->width, a->sl.height, a->sl.width);
    uint32_t k0, k1;
    parts_of(sp, sl, &k0, &k1);
    for (uint32_t k = k0; k <= k1; k++) {
        part *p = &sp->p[k];
        p->st = p->ops->acc_alloc(p->be, id, sl->height, sl->width);
        if (p->st != TL_OK) {
            tl_status st = part_fail(sp, k);
            while (k-- > k0)
                sp->p[k].ops->acc_free(sp->p[k].be, id);
            return st;
        }
    }
    a->sl = *sl;
    a->sl.out = NULL;
    a->placed = true;
    return TL_OK;
}

static tl_status split_acc_update(void *state, tl_bp_job *job, const int *ids, bool add)
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
    tl_status st = route(sp, job->slices, job->nslices, ids);
    if (st != TL_OK)
        return st;
    sp->job = job;
    sp->add = add;
    st = run_parts(sp, OP_ACC_UPDATE);
    if (st == TL_OK)
        name_kernels(sp, job);
    return st;
}

static tl_status split_acc_read(void *state, const int *ids, size_t n, float *const *out)
{
    tl_split *sp = state;
    if (n > sp->rsl_cap) {
        bool ok = true;
        sp->rsl = grown(sp->rsl, n, sizeof *sp->rsl, &ok);
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
    tl_status st = route(sp, sp->rsl, n, ids);
    if (st == TL_OK)
        st = run_parts(sp, OP_ACC_READ);
    if (st == TL_OK)
        assemble_all(sp, sp->rsl, n);
    return st;
}

/* ---- what the engine asks about the device ------------------------------------------------ */

static size_t split_kernels(const void *state, tl_kernel_info *out, size_t cap)
{
    const tl_split *sp = state;
    return sp->p[0].ops->kernels(sp->p[0].be, out, cap);
}

static size_t split_memory_used(const void *state)
{
    const tl_split *sp = state;
    size_t sum = 0;
    for (uint32_t k = 0; k < sp->np; k++)
        sum += sp->p[k].ops->memory_used(sp->p[k].be);
    return sum;
}

static const char *split_device_name(const void *state)
{
    return ((const tl_split *)state)->name;
}

static void split_device_id(const void *state, tl_device_id *id)
{
    const tl_split *sp = state;
    sp->p[0].ops->device_id(sp->p[0].be, id);
}

static tl_status split_hw_rates(void *state, tl_hw_rate *out, size_t cap, size_t *n)
{
    tl_split *sp = state;
    part *p = &sp->p[0];
    *n = 0;
    if (!p->ops->hw_rates)
        return tl_fail(sp->eb, TL_EUNSUPPORTED, "the %s backend has no micro-benchmarks",
                       p->ops->name);
    if ((p->st = p->ops->hw_rates(p->be, out, cap, n)) != TL_OK)
        return part_fail(sp, 0);
    return TL_OK;
}

/* A frame's fence is every part's (each part stores its rows on its own stream); from the
 * calling thread, since recording or querying an event is cheaper than a pool round. */
static tl_status split_fence(void *state, unsigned i)
{
    tl_split *sp = state;
    for (uint32_t k = 0; k < sp->np; k++) {
        part *p = &sp->p[k];
        if (p->ops->fence && (p->st = p->ops->fence(p->be, i)) != TL_OK)
            return part_fail(sp, k);
    }
    return TL_OK;
}

static tl_status split_fence_done(void *state, unsigned i, bool wait, bool *done)
{
    tl_split *sp = state;
    *done = true;
    for (uint32_t k = 0; k < sp->np && (*done || wait); k++) {
        part *p = &sp->p[k];
        bool reached = true;
        if (p->ops->fence_done && (p->st = p->ops->fence_done(p->be, i, wait, &reached)) != TL_OK)
            return part_fail(sp, k);
        *done = *done && reached;
    }
    return TL_OK;
}

/* ---- benchmarks ---------------------------------------------------------------------------- */

/* The slowest busy part's time for kernel `name` in the last OP_BENCH; false when a busy
 * part could not run it. */
static bool slowest(const tl_split *sp, const char *name, tl_bench_row *row)
{
    bool found = false;
    for (uint32_t k = 0; k < sp->np; k++) {
        const part *p = &sp->p[k];
        if (!busy(sp, k))
            continue;
        size_t m = 0;
        while (m < p->nrows && strcmp(p->rows[m].kernel, name) != 0)
            m++;
        if (m == p->nrows)
            return false;
        if (!found || p->rows[m].ms > row->ms)
            *row = p->rows[m];
        found = true;
    }
    return found;
}

/* Kernel by kernel (part 0's list, or the forced one), every part times its share of the
 * job at once, on its own device, after a warm-up; the kernel's time is the slowest
 * part's, which is when the whole job is done. A kernel counts only if every part with a
 * share could run it. */
static tl_status split_bench(void *state, tl_bp_job *job, int reps, tl_bench_row *rows,
                             size_t cap, size_t *n)
{
    tl_split *sp = state;
    *n = 0;
    tl_status st = route(sp, job->slices, job->nslices, NULL);
    if (st != TL_OK)
        return st;
    double updates = 0;
    for (size_t i = 0; i < job->nslices; i++)
        updates += (double)job->slices[i].height * job->slices[i].width * (double)job->nproj;
    tl_kernel_info kern[TL_SPLIT_BENCH_ROWS];
    bool forced = job->force && job->force[0];
    size_t nk = forced ? 1 : split_kernels(sp, kern, TL_SPLIT_BENCH_ROWS);
    tl_bp_job j = *job;
    sp->job = &j;
    sp->reps = reps;
    for (size_t i = 0; i < nk && i < TL_SPLIT_BENCH_ROWS && *n < cap; i++) {
        if (!forced)
            j.force = kern[i].name;
        st = run_parts(sp, OP_BENCH);
        if (st != TL_OK)
            return st;
        tl_bench_row row;
        if (!slowest(sp, j.force, &row))
            continue;
        row.updates_per_s = row.ms > 0 ? updates / (row.ms * 1e-3) : 0;
        rows[(*n)++] = row;
    }
    job->kernel = *n ? rows[0].kernel : "none";
    return TL_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Every part stores its rows of the frame at once, and the frame is stored when the
 * slowest part is done: that is the per-frame time (the ingest capacity). Each repetition
 * starts all parts together (each times one call after its own warm-up), so their work
 * overlaps as it does in a stream, also where parts share a GPU or a bus; the result is the
 * median over repetitions of the slowest part's time. */
static tl_status split_bench_store(void *state, const tl_frame *f, int reps, double *ms)
{
    tl_split *sp = state;
    *ms = 0;
    double *t = malloc((size_t)reps * sizeof *t);
    if (!t)
        return tl_fail(sp->eb, TL_ENOMEM, "out of memory for %d timings", reps);
    sp->f = f;
    sp->reps = 1;
    tl_status st = TL_OK;
    for (int r = 0; r < reps && st == TL_OK; r++) {
        st = run_parts(sp, OP_BENCH_STORE);
        t[r] = 0;
        for (uint32_t k = 0; k < sp->np; k++)
            t[r] = sp->p[k].ms > t[r] ? sp->p[k].ms : t[r];
    }
    if (st == TL_OK) {
        qsort(t, (size_t)reps, sizeof *t, cmp_double);
        *ms = t[reps / 2];
    }
    free(t);
    return st;
}

const tl_backend_ops tl_split_backend = {
    .name = "split",
    .estimate = split_estimate,
    .create = split_create,
    .destroy = split_destroy,
    .set_filter = split_set_filter,
    .calib_reset = split_calib_reset,
    .calib_add = split_calib_add,
    .store = split_store,
    .backproject = split_backproject,
    .memory_used = split_memory_used,
    .device_name = split_device_name,
    .acc_alloc = split_acc_alloc,
    .acc_free = split_acc_free,
    .acc_update = split_acc_update,
    .acc_read = split_acc_read,
    .kernels = split_kernels,
    .bench = split_bench,
    .bench_store = split_bench_store,
    .device_id = split_device_id,
    .hw_rates = split_hw_rates,
    .fence = split_fence,
    .fence_done = split_fence_done,
    .flush = split_flush,
};
