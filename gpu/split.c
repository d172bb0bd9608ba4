/* split.c — one engine on several GPUs of a host (issue #8): the detector rows are split
 * across child backends, one per entry of config.devices, behind the ordinary operation
 * table (gpu/base/backend.h), so the engine and everything above it stay as they are.
 *
 * Why rows: preprocessing and filtering work row by row, and a horizontal slice reads the
 * sinogram of one detector row, so a partition by rows needs no data exchange between
 * GPUs. Each part stores its rows of every frame and back-projects the slices in its rows
 * at the full speed of its card, while the others do the same: full-volume back
 * projection grows with the number of GPUs; per-frame ingest nearly so, since each part
 * filters its halves of queued frames in batches (gpu/cuda/store.cu): a filter pass's
 * fixed costs do not shrink with its rows, so filtering the halves frame by frame
 * scaled clearly worse; tracked slices scale as their rows are spread (the streaming
 * benchmark's two horizontal slices lie in one GPU's rows). Figures: BENCHMARKS.md.
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
 *   - A plane whose output rows each lie at one height (ortho-slices: no z along a row) is
 *     dealt out by rows: each part it crosses computes, as a plane of its own, just the
 *     output rows whose height it owns (tl_split_share), into host scratch, and assemble()
 *     puts the rows together. So each part's work and read-out shrink with the parts.
 *   - Any other plane (tilted planes) is computed whole, into host scratch, by every part
 *     whose rows it crosses, and assemble() takes each output pixel from the part that owns
 *     the pixel's z. The host computes z per pixel from the plane in double,
 *     the kernels in float, so right at a boundary the two may disagree by a rounding on
 *     which part owns a pixel. That is harmless: interpolation is continuous, and a part
 *     evaluating a sample a rounding outside its rows misses at most a rounding's share of
 *     the row it lacks.
 * Tracked slices (acc_*) follow the same rule: a row's accumulator lives on its owner; a
 * plane's on every part it crosses, each keeping its share, assembled on read-out.
 *
 * Several hosts (tomolived --mpi, issue #23): with config.link the parts are the ranks of
 * the job, part k on rank k through the remote backend (remote.h), which is a child like
 * any other: the same rows, shifts, ownership and assembly, over MPI instead of PCIe.
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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu/engine_impl.h"
#include "gpu/remote.h"
#include "gpu/split_impl.h"

void tl_engine_split_rows(uint32_t rows, uint32_t parts, uint32_t k, uint32_t *first,
                          uint32_t *end)
{
    *first = (uint32_t)((uint64_t)k * rows / parts);
    *end = (uint32_t)((uint64_t)(k + 1) * rows / parts);
}

/* ---- configuration ------------------------------------------------------------------------ */

static tl_status child_ops(const tl_engine_config *c, tl_errbuf *eb, const tl_backend_ops **ops)
{
    *ops = tl_engine_backend_ops(c->backend);
    return *ops ? TL_OK
                : tl_fail(eb, TL_EINTERNAL, "split backend given backend %s, not cpu or cuda",
                          tl_backend_name(c->backend));
}

/* Part k's backend: the child kind here, or on rank k of the job (remote.h). */
static tl_status part_ops(const tl_engine_config *c, uint32_t k, tl_errbuf *eb,
                          const tl_backend_ops **ops)
{
    if (c->link && k > 0) {
        *ops = &tl_remote_backend;
        return TL_OK;
    }
    return child_ops(c, eb, ops);
}

/* Part k's configuration: its held rows on its device (its rank's, with a link), the CPU
 * threads shared out among the parts on this host (a part on another rank: among those on
 * its host, by that rank). */
static tl_engine_config part_config(const tl_engine_config *c, uint32_t k)
{
    tl_engine_config pc = *c;
    uint32_t first, end;
    tl_engine_split_rows(c->rows, c->ndevices, k, &first, &end);
    pc.rows = (end < c->rows ? end + 1 : end) - first;
    pc.device = c->devices[k];
    pc.ndevices = 0;
    pc.peer = c->link ? (int)k : 0;
    long cores = c->threads > 0 ? c->threads : sysconf(_SC_NPROCESSORS_ONLN);
    long here = c->link ? c->link->local_ranks : (long)c->ndevices;
    long share = cores / (here > 0 ? here : 1);
    pc.threads = share > 1 ? (int)share : 1;
    if (pc.peer > 0)
        pc.threads = 0; /* another host's cores: that rank shares them out (remote_serve.c) */
    return pc;
}

/* What one device must hold: the sum of its parts (two parts on one GPU need both there). */
typedef struct {
    int rank;   /* where it is (config.link; 0: here) */
    int device; /* -1: host memory (the CPU backend's parts all share it) */
    uint32_t parts;
    size_t need, avail;
} device_use;

static tl_status device_uses(const tl_engine_config *c, size_t padded, tl_errbuf *eb,
                             device_use *u, uint32_t *nu, tl_memory_estimate *sum)
{
    memset(sum, 0, sizeof *sum);
    *nu = 0;
    bool known = true;
    for (uint32_t k = 0; k < c->ndevices; k++) {
        const tl_backend_ops *ops = NULL;
        tl_status st = part_ops(c, k, eb, &ops);
        if (st != TL_OK)
            return st;
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
        while (i < *nu && (u[i].rank != pc.peer || u[i].device != dev))
            i++;
        if (i == *nu) {
            u[(*nu)++] = (device_use){.rank = pc.peer, .device = dev, .avail = m.available_bytes};
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
        tl_split_part *p = &sp->p[k];
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
    const tl_split_part *p = &sp->p[k];
    if (p->rank > 0)
        snprintf(buf, len, "part %u of %u (rows %u..%u, rank %d)", k, sp->np, p->first, p->end - 1,
                 p->rank);
    else if (sp->cuda)
        snprintf(buf, len, "part %u of %u (rows %u..%u, CUDA device %d)", k, sp->np, p->first,
                 p->end - 1, p->device);
    else
        snprintf(buf, len, "part %u of %u (rows %u..%u)", k, sp->np, p->first, p->end - 1);
}

/* Reports part k's failure (its own message) as the split's. */
tl_status tl_split_part_fail(tl_split *sp, uint32_t k)
{
    char label[96];
    part_label(sp, k, label, sizeof label);
    return tl_fail(sp->eb, sp->p[k].st, "%s: %s", label, sp->p[k].err.msg);
}

/* "2 × NVIDIA H200 (sm_90, 132 SMs)"; "CPU (4 threads), 3 row partitions". */
static void make_name(tl_split *sp)
{
    int devs[TL_ENGINE_MAX_DEVICES], ranks[TL_ENGINE_MAX_DEVICES];
    uint32_t nd = 0;
    bool alike = true;
    const char *first = sp->p[0].ops->device_name(sp->p[0].be);
    char joined[sizeof sp->name] = "";
    size_t used = 0;
    for (uint32_t k = 0; k < sp->np; k++) {
        int dev = sp->cuda ? sp->p[k].device : -1;
        uint32_t i = 0;
        while (i < nd && (devs[i] != dev || ranks[i] != sp->p[k].rank))
            i++;
        if (i < nd)
            continue; /* a device already named */
        devs[nd] = dev;
        ranks[nd++] = sp->p[k].rank;
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
    if (sp->p[sp->np - 1].rank > 0 && n > 0 && (size_t)n < sizeof sp->name)
        snprintf(sp->name + n, sizeof sp->name - (size_t)n, ", over %u MPI ranks", sp->np);
    else if (nd != sp->np && n > 0 && (size_t)n < sizeof sp->name)
        snprintf(sp->name + n, sizeof sp->name - (size_t)n, ", %u row partitions", sp->np);
}

static tl_status split_create(const tl_engine_config *c, size_t padded, tl_errbuf *eb,
                              void **state)
{
    *state = NULL;
    if (c->ndevices < 2 || c->ndevices > TL_ENGINE_MAX_DEVICES || c->ndevices > c->rows)
        return tl_fail(eb, TL_EINTERNAL, "split backend given %u devices for %u rows", c->ndevices,
                       c->rows);
    if (c->link && c->ndevices != (uint32_t)c->link->size)
        return tl_fail(eb, TL_EINTERNAL, "split backend given %u parts for %d ranks", c->ndevices,
                       c->link->size);

    /* Memory per device, before anything is allocated: the engine compared the sum over
     * all devices; two parts on one device must fit there together. */
    device_use u[TL_ENGINE_MAX_DEVICES];
    uint32_t nu;
    tl_memory_estimate sum;
    tl_status st = device_uses(c, padded, eb, u, &nu, &sum);
    if (st != TL_OK)
        return st;
    for (uint32_t i = 0; i < nu; i++)
        if (u[i].avail && u[i].need > u[i].avail) {
            char where[64] = "host memory";
            if (u[i].device >= 0)
                snprintf(where, sizeof where, "CUDA device %d", u[i].device);
            if (c->link) {
                size_t n = strlen(where);
                snprintf(where + n, sizeof where - n, " of rank %d", u[i].rank);
            }
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
        tl_split_part *p = &sp->p[k];
        tl_engine_config pc = part_config(c, k);
        if ((st = part_ops(c, k, eb, &p->ops)) != TL_OK) {
            split_destroy(sp);
            return st;
        }
        p->device = pc.device;
        p->rank = pc.peer;
        p->held = pc.rows;
        tl_engine_split_rows(c->rows, c->ndevices, k, &p->first, &p->end);
        p->rows = calloc(TL_SPLIT_BENCH_ROWS, sizeof *p->rows);
        if (!p->rows) {
            split_destroy(sp);
            return tl_fail(eb, TL_ENOMEM, "out of memory");
        }
        p->st = p->ops->create(&pc, padded, &p->err, &p->be);
        if (p->st != TL_OK) {
            st = tl_split_part_fail(sp, k); /* the child's message, named by part and device */
            split_destroy(sp);
            return st;
        }
    }
    make_name(sp);
    *state = sp;
    return TL_OK;
}

/* ---- operations ---------------------------------------------------------------------------- */

static tl_status split_set_filter(void *state, const double *response)
{
    tl_split *sp = state;
    for (uint32_t k = 0; k < sp->np; k++)
        if ((sp->p[k].st = sp->p[k].ops->set_filter(sp->p[k].be, response)) != TL_OK)
            return tl_split_part_fail(sp, k);
    return TL_OK;
}

static tl_status split_calib_reset(void *state, tl_frame_kind kind)
{
    tl_split *sp = state;
    for (uint32_t k = 0; k < sp->np; k++)
        if ((sp->p[k].st = sp->p[k].ops->calib_reset(sp->p[k].be, kind)) != TL_OK)
            return tl_split_part_fail(sp, k);
    return TL_OK;
}

static tl_status split_calib_add(void *state, const tl_frame *f, uint32_t count)
{
    tl_split *sp = state;
    sp->f = f;
    sp->count = count;
    return tl_split_run(sp, OP_CALIB);
}

static tl_status split_store(void *state, const tl_frame *f, uint32_t slot)
{
    tl_split *sp = state;
    sp->f = f;
    sp->slot = slot;
    return tl_split_run(sp, OP_STORE);
}

/* Every part runs the frames it holds for a batch (each part holds the same frames). */
static tl_status split_flush(void *state)
{
    return tl_split_run(state, OP_FLUSH);
}

static tl_status split_backproject(void *state, tl_bp_job *job)
{
    tl_split *sp = state;
    tl_status st = tl_split_route(sp, job->slices, job->nslices, NULL);
    if (st != TL_OK)
        return st;
    sp->job = job;
    st = tl_split_run(sp, OP_BACKPROJECT);
    if (st != TL_OK)
        return st;
    tl_split_assemble_all(sp, job->slices, job->nslices);
    tl_split_name_kernels(sp, job);
    return TL_OK;
}

/* ---- what the engine asks about the device ------------------------------------------------ */

size_t tl_split_kernels(const void *state, tl_kernel_info *out, size_t cap)
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
    tl_split_part *p = &sp->p[0];
    *n = 0;
    if (!p->ops->hw_rates)
        return tl_fail(sp->eb, TL_EUNSUPPORTED, "the %s backend has no micro-benchmarks",
                       p->ops->name);
    if ((p->st = p->ops->hw_rates(p->be, out, cap, n)) != TL_OK)
        return tl_split_part_fail(sp, 0);
    return TL_OK;
}

/* A frame's fence is every part's (each part stores its rows on its own stream); from the
 * calling thread, since recording or querying an event is cheaper than a pool round. */
static tl_status split_fence(void *state, unsigned i)
{
    tl_split *sp = state;
    for (uint32_t k = 0; k < sp->np; k++) {
        tl_split_part *p = &sp->p[k];
        if (p->ops->fence && (p->st = p->ops->fence(p->be, i)) != TL_OK)
            return tl_split_part_fail(sp, k);
    }
    return TL_OK;
}

static tl_status split_fence_done(void *state, unsigned i, bool wait, bool *done)
{
    tl_split *sp = state;
    *done = true;
    for (uint32_t k = 0; k < sp->np && (*done || wait); k++) {
        tl_split_part *p = &sp->p[k];
        bool reached = true;
        if (p->ops->fence_done && (p->st = p->ops->fence_done(p->be, i, wait, &reached)) != TL_OK)
            return tl_split_part_fail(sp, k);
        *done = *done && reached;
    }
    return TL_OK;
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
    .acc_alloc = tl_split_acc_alloc,
    .acc_free = tl_split_acc_free,
    .acc_update = tl_split_acc_update,
    .acc_read = tl_split_acc_read,
    .kernels = tl_split_kernels,
    .bench = tl_split_bench,
    .bench_store = tl_split_bench_store,
    .device_id = split_device_id,
    .hw_rates = split_hw_rates,
    .fence = split_fence,
    .fence_done = split_fence_done,
    .flush = split_flush,
    .it_begin = tl_split_it_begin,
    .it_image = tl_split_it_image,
    .it_forward = tl_split_it_forward,
    .it_backward = tl_split_it_backward,
    .it_sweep = tl_split_it_sweep,
    .it_mark = tl_split_it_mark,
    .it_regularise = tl_split_it_regularise,
    .it_end = tl_split_it_end,
};
