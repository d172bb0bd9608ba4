/* remote.c — the client half of remote.h: a backend whose operations run on another rank
 * of the job. Each operation is one request and one answer (remote_impl.h), so the
 * backend is as synchronous as the one it stands for: when store() returns, the serving
 * rank has queued the frame on its device, and a fence asked for after it covers it.
 *
 * Names the serving rank reports (kernels, their parameters) are copied into a table
 * that lives as long as the backend, since the backend table hands out static strings.
 * Nothing is allocated per frame: the request and the answer buffers grow to the largest
 * message and stay.
 */
#include "config.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/remote_impl.h"

#define TL_REMOTE_NAMES 256   /* distinct names one backend keeps */
#define TL_REMOTE_NAME_LEN 96 /* longest name kept whole */

typedef struct {
    const tl_link *link;
    int peer, tag;
    tl_errbuf *eb;
    size_t padded;
    tl_wire req;
    tl_link_msg rep;
    tl_wire_reader in; /* the answer's results, after call() */
    char name[192];
    tl_device_id id;
    char (*names)[TL_REMOTE_NAME_LEN];
    size_t nnames;
    tl_kernel_info *kernels; /* the serving rank's list, asked for once */
    size_t nkernels;
    bool have_kernels;
    size_t it_pixels; /* the current iterative problem's (it_begin) */
} tl_remote;

/* A tag no other live backend of this process uses: they count up, and 32,767 backends
 * alive at once would be a daemon with that many scans open. */
static int next_tag(void)
{
    static atomic_uint counter;
    return 1 + (int)(atomic_fetch_add(&counter, 1) % TL_LINK_MAX_TAG);
}

static void begin(tl_remote *r, tl_remote_op op)
{
    tl_wire_reset(&r->req);
    uint32_t code = op;
    TL_WIRE_PUT(&r->req, code);
}

/* Sends the request and waits for its answer; r->in then reads the results. */
static tl_status call(tl_remote *r)
{
    if (r->req.failed)
        return tl_fail(r->eb, TL_ENOMEM, "out of memory for a request to rank %d", r->peer);
    tl_status st = r->link->send(r->link, r->peer, r->tag, r->req.p, r->req.len, r->eb);
    if (st == TL_OK)
        st = r->link->recv(r->link, r->peer, r->tag, &r->rep, r->eb);
    if (st != TL_OK)
        return st;
    r->in = (tl_wire_reader){r->rep.data, r->rep.len, 0, false};
    int32_t status = TL_EINTERNAL;
    TL_WIRE_TAKE(&r->in, status);
    const char *msg = tl_wire_get_str(&r->in);
    if (r->in.short_read)
        return tl_fail(r->eb, TL_EINTERNAL, "rank %d answered with a short message", r->peer);
    if (status != TL_OK)
        return tl_fail(r->eb, (tl_status)status, "rank %d: %s", r->peer, msg);
    return TL_OK;
}

/* After reading the results: a short answer is the other build's or a bug, never data. */
static tl_status results(tl_remote *r)
{
    return r->in.short_read
               ? tl_fail(r->eb, TL_EINTERNAL, "rank %d answered with a short message", r->peer)
               : TL_OK;
}

/* The table's copy of name, which lives as long as the backend. */
static const char *keep_name(tl_remote *r, const char *name)
{
    for (size_t i = 0; i < r->nnames; i++)
        if (strcmp(r->names[i], name) == 0)
            return r->names[i];
    if (r->nnames == TL_REMOTE_NAMES)
        return "(remote)";
    snprintf(r->names[r->nnames], TL_REMOTE_NAME_LEN, "%s", name);
    return r->names[r->nnames++];
}

/* ---- creation ------------------------------------------------------------------------------ */

static void remote_destroy(void *state)
{
    tl_remote *r = state;
    if (!r)
        return;
    if (r->tag) { /* its backend there goes too */
        tl_errbuf ignored;
        tl_errbuf *eb = r->eb;
        r->eb = &ignored;
        begin(r, TL_REMOTE_DESTROY);
        (void)call(r);
        r->eb = eb;
    }
    tl_wire_free(&r->req);
    free(r->rep.data);
    free(r->names);
    free(r->kernels);
    free(r);
}

/* A fresh client for c's peer (c->link, c->peer). */
static tl_remote *client(const tl_engine_config *c, size_t padded, tl_errbuf *eb)
{
    if (!c->link || c->peer <= 0 || c->peer >= c->link->size) {
        tl_fail(eb, TL_EINTERNAL, "remote backend given no link or peer %d", c->peer);
        return NULL;
    }
    tl_remote *r = calloc(1, sizeof *r);
    if (r)
        r->names = calloc(TL_REMOTE_NAMES, sizeof *r->names);
    if (!r || !r->names) {
        free(r);
        tl_fail(eb, TL_ENOMEM, "out of memory");
        return NULL;
    }
    r->link = c->link;
    r->peer = c->peer;
    r->eb = eb;
    r->padded = padded;
    return r;
}

static void put_setup(tl_remote *r, tl_remote_op op, const tl_engine_config *c)
{
    begin(r, op);
    tl_remote_put_build(&r->req);
    tl_remote_put_config(&r->req, c);
    uint64_t padded = r->padded;
    TL_WIRE_PUT(&r->req, padded);
}

static tl_status remote_estimate(const tl_engine_config *c, size_t padded, tl_memory_estimate *m,
                                 tl_errbuf *eb)
{
    tl_remote *r = client(c, padded, eb);
    if (!r)
        return TL_ENOMEM;
    r->tag = next_tag();
    put_setup(r, TL_REMOTE_ESTIMATE, c);
    tl_status st = call(r);
    if (st == TL_OK) {
        TL_WIRE_TAKE(&r->in, *m);
        st = results(r);
    }
    r->tag = 0; /* nothing to destroy there */
    remote_destroy(r);
    return st;
}

static tl_status remote_create(const tl_engine_config *c, size_t padded, tl_errbuf *eb,
                               void **state)
{
    *state = NULL;
    tl_remote *r = client(c, padded, eb);
    if (!r)
        return TL_ENOMEM;
    r->tag = next_tag();
    put_setup(r, TL_REMOTE_CREATE, c);
    tl_status st = call(r);
    if (st == TL_OK) {
        snprintf(r->name, sizeof r->name, "%s", tl_wire_get_str(&r->in));
        TL_WIRE_TAKE(&r->in, r->id);
        st = results(r);
    }
    if (st != TL_OK) {
        r->tag = 0; /* creation failed there: nothing to destroy */
        remote_destroy(r);
        return st;
    }
    *state = r;
    return TL_OK;
}

/* ---- frames -------------------------------------------------------------------------------- */

static tl_status remote_set_filter(void *state, const double *response)
{
    tl_remote *r = state;
    begin(r, TL_REMOTE_SET_FILTER);
    uint32_t has = response != NULL;
    TL_WIRE_PUT(&r->req, has);
    if (response)
        tl_wire_put(&r->req, response, (r->padded / 2 + 1) * sizeof *response);
    return call(r);
}

static tl_status remote_calib_reset(void *state, tl_frame_kind kind)
{
    tl_remote *r = state;
    begin(r, TL_REMOTE_CALIB_RESET);
    uint32_t k = kind;
    TL_WIRE_PUT(&r->req, k);
    return call(r);
}

/* Frames reach other ranks from host memory only: a pointer into this host's GPU means
 * nothing there, and copying it down first would hide a cost the sender should see. */
static tl_status put_frame(tl_remote *r, tl_remote_op op, const tl_frame *f)
{
    if (f->memory != TL_MEMORY_HOST)
        return tl_fail(r->eb, TL_EUNSUPPORTED,
                       "a frame in GPU memory cannot reach rank %d: over MPI, send frames "
                       "in host memory",
                       r->peer);
    begin(r, op);
    tl_remote_put_frame(&r->req, f);
    return TL_OK;
}

static tl_status remote_calib_add(void *state, const tl_frame *f, uint32_t count)
{
    tl_remote *r = state;
    tl_status st = put_frame(r, TL_REMOTE_CALIB_ADD, f);
    if (st != TL_OK)
        return st;
    TL_WIRE_PUT(&r->req, count);
    return call(r);
}

static tl_status remote_store(void *state, const tl_frame *f, uint32_t slot)
{
    tl_remote *r = state;
    tl_status st = put_frame(r, TL_REMOTE_STORE, f);
    if (st != TL_OK)
        return st;
    TL_WIRE_PUT(&r->req, slot);
    return call(r);
}

static tl_status remote_flush(void *state)
{
    tl_remote *r = state;
    begin(r, TL_REMOTE_FLUSH);
    return call(r);
}

static tl_status remote_fence(void *state, unsigned i)
{
    tl_remote *r = state;
    begin(r, TL_REMOTE_FENCE);
    uint32_t fence = i;
    TL_WIRE_PUT(&r->req, fence);
    return call(r);
}

static tl_status remote_fence_done(void *state, unsigned i, bool wait, bool *done)
{
    tl_remote *r = state;
    begin(r, TL_REMOTE_FENCE_DONE);
    uint32_t args[2] = {i, wait};
    tl_wire_put(&r->req, args, sizeof args);
    tl_status st = call(r);
    if (st != TL_OK)
        return st;
    uint32_t reached = 0;
    TL_WIRE_TAKE(&r->in, reached);
    *done = reached != 0;
    return results(r);
}

/* ---- slices -------------------------------------------------------------------------------- */

/* The kernel names of an answer: the job's, then each slice's when the job asks. */
static void take_kernels(tl_remote *r, tl_bp_job *job)
{
    job->kernel = keep_name(r, tl_wire_get_str(&r->in));
    for (size_t i = 0; job->slice_kernel && i < job->nslices; i++)
        job->slice_kernel[i] = keep_name(r, tl_wire_get_str(&r->in));
}

static tl_status remote_backproject(void *state, tl_bp_job *job)
{
    tl_remote *r = state;
    begin(r, TL_REMOTE_BACKPROJECT);
    tl_remote_put_job(&r->req, job);
    tl_status st = call(r);
    if (st != TL_OK)
        return st;
    take_kernels(r, job);
    for (size_t i = 0; i < job->nslices; i++) {
        const tl_bp_slice *sl = &job->slices[i];
        size_t n = (size_t)sl->height * sl->width;
        const float *plane = sl->out ? tl_wire_get(&r->in, n * sizeof *plane) : NULL;
        if (plane)
            memcpy(sl->out, plane, n * sizeof *plane);
    }
    return results(r);
}

static tl_status remote_acc_alloc(void *state, int id, uint32_t height, uint32_t width)
{
    tl_remote *r = state;
    begin(r, TL_REMOTE_ACC_ALLOC);
    int32_t args[3] = {id, (int32_t)height, (int32_t)width};
    tl_wire_put(&r->req, args, sizeof args);
    return call(r);
}

static void remote_acc_free(void *state, int id)
{
    tl_remote *r = state;
    begin(r, TL_REMOTE_ACC_FREE);
    int32_t which = id;
    TL_WIRE_PUT(&r->req, which);
    (void)call(r); /* nothing to report it to: the table's acc_free returns nothing */
}

static tl_status remote_acc_update(void *state, tl_bp_job *job, const int *ids, bool add)
{
    tl_remote *r = state;
    begin(r, TL_REMOTE_ACC_UPDATE);
    tl_remote_put_job(&r->req, job);
    tl_wire_put(&r->req, ids, job->nslices * sizeof *ids);
    uint32_t adds = add;
    TL_WIRE_PUT(&r->req, adds);
    tl_status st = call(r);
    if (st != TL_OK)
        return st;
    take_kernels(r, job);
    return results(r);
}

static tl_status remote_acc_read(void *state, const int *ids, size_t n, float *const *out)
{
    tl_remote *r = state;
    begin(r, TL_REMOTE_ACC_READ);
    uint64_t count = n;
    TL_WIRE_PUT(&r->req, count);
    tl_wire_put(&r->req, ids, n * sizeof *ids);
    tl_status st = call(r);
    for (size_t k = 0; st == TL_OK && k < n; k++) {
        uint64_t floats = 0;
        TL_WIRE_TAKE(&r->in, floats);
        const float *acc = tl_wire_get(&r->in, floats * sizeof *acc);
        if (acc)
            memcpy(out[k], acc, floats * sizeof *acc);
        st = results(r);
    }
    return st;
}

/* ---- what the engine asks about the device ------------------------------------------------ */

static size_t remote_memory_used(const void *state)
{
    tl_remote *r = (tl_remote *)state;
    begin(r, TL_REMOTE_MEMORY_USED);
    uint64_t used = 0;
    if (call(r) == TL_OK)
        TL_WIRE_TAKE(&r->in, used);
    return (size_t)used;
}

static const char *remote_device_name(const void *state)
{
    return ((const tl_remote *)state)->name;
}

static void remote_device_id(const void *state, tl_device_id *id)
{
    *id = ((const tl_remote *)state)->id;
}

static size_t remote_kernels(const void *state, tl_kernel_info *out, size_t cap)
{
    tl_remote *r = (tl_remote *)state;
    if (!r->have_kernels) {
        begin(r, TL_REMOTE_KERNELS);
        if (call(r) != TL_OK)
            return 0;
        uint64_t n = 0;
        TL_WIRE_TAKE(&r->in, n);
        r->kernels = calloc(n ? n : 1, sizeof *r->kernels);
        if (!r->kernels)
            return 0;
        for (size_t i = 0; i < n && !r->in.short_read; i++) {
            tl_kernel_info *k = &r->kernels[i];
            k->name = keep_name(r, tl_wire_get_str(&r->in));
            k->params = keep_name(r, tl_wire_get_str(&r->in));
            uint32_t v[3] = {0};
            tl_wire_take(&r->in, v, sizeof v);
            k->quality = (tl_quality)v[0];
            k->planes = v[1] != 0;
            k->slices = v[2];
        }
        r->nkernels = r->in.short_read ? 0 : n;
        r->have_kernels = true;
    }
    size_t n = r->nkernels < cap ? r->nkernels : cap;
    if (out)
        memcpy(out, r->kernels, n * sizeof *out);
    return r->nkernels;
}

static tl_status remote_bench(void *state, tl_bp_job *job, int reps, tl_bench_row *rows,
                              size_t cap, size_t *n)
{
    tl_remote *r = state;
    begin(r, TL_REMOTE_BENCH);
    tl_remote_put_job(&r->req, job);
    int32_t args[2] = {reps, (int32_t)cap};
    tl_wire_put(&r->req, args, sizeof args);
    *n = 0;
    tl_status st = call(r);
    if (st != TL_OK)
        return st;
    job->kernel = keep_name(r, tl_wire_get_str(&r->in));
    uint64_t count = 0;
    TL_WIRE_TAKE(&r->in, count);
    for (size_t i = 0; i < count && i < cap && !r->in.short_read; i++) {
        rows[i].kernel = keep_name(r, tl_wire_get_str(&r->in));
        uint32_t quality = 0;
        TL_WIRE_TAKE(&r->in, quality);
        rows[i].quality = (tl_quality)quality;
        TL_WIRE_TAKE(&r->in, rows[i].ms);
        TL_WIRE_TAKE(&r->in, rows[i].updates_per_s);
        *n = i + 1;
    }
    return results(r);
}

static tl_status remote_bench_store(void *state, const tl_frame *f, int reps, double *ms)
{
    tl_remote *r = state;
    tl_status st = put_frame(r, TL_REMOTE_BENCH_STORE, f);
    if (st != TL_OK)
        return st;
    int32_t n = reps;
    TL_WIRE_PUT(&r->req, n);
    st = call(r);
    if (st != TL_OK)
        return st;
    TL_WIRE_TAKE(&r->in, *ms);
    return results(r);
}

/* ---- iterative slices (the part that owns the slice's row solves it, split_iterative.c) -- */

static tl_status remote_it_begin(void *state, const tl_it_problem *p, double stats[2])
{
    tl_remote *r = state;
    begin(r, TL_REMOTE_IT_BEGIN);
    tl_remote_put_problem(&r->req, p);
    tl_status st = call(r);
    if (st != TL_OK)
        return st;
    r->it_pixels = tl_it_pixels(p);
    tl_wire_take(&r->in, stats, 2 * sizeof *stats);
    return results(r);
}

static tl_status remote_it_image(void *state, const float *in, float *out)
{
    tl_remote *r = state;
    begin(r, TL_REMOTE_IT_IMAGE);
    const uint32_t has[2] = {in != NULL, out != NULL};
    tl_wire_put(&r->req, has, sizeof has);
    if (in)
        tl_wire_put(&r->req, in, r->it_pixels * sizeof *in);
    tl_status st = call(r);
    if (st != TL_OK || !out)
        return st;
    tl_wire_take(&r->in, out, r->it_pixels * sizeof *out);
    return results(r);
}

static tl_status remote_it_forward(void *state, tl_it_views v, tl_it_rule rule, double *sumsq)
{
    tl_remote *r = state;
    begin(r, TL_REMOTE_IT_FORWARD);
    const uint32_t args[4] = {v.first, v.stride, v.count, rule};
    tl_wire_put(&r->req, args, sizeof args);
    tl_status st = call(r);
    if (st != TL_OK)
        return st;
    double sum = 0;
    TL_WIRE_TAKE(&r->in, sum);
    if (sumsq)
        *sumsq = sum;
    return results(r);
}

static tl_status remote_it_backward(void *state, tl_it_views v, tl_it_rule rule, double lambda)
{
    tl_remote *r = state;
    begin(r, TL_REMOTE_IT_BACKWARD);
    const uint32_t args[4] = {v.first, v.stride, v.count, rule};
    tl_wire_put(&r->req, args, sizeof args);
    TL_WIRE_PUT(&r->req, lambda);
    return call(r);
}

static tl_status remote_it_sweep(void *state, double lambda, bool *swept)
{
    tl_remote *r = state;
    begin(r, TL_REMOTE_IT_SWEEP);
    TL_WIRE_PUT(&r->req, lambda);
    *swept = false;
    tl_status st = call(r);
    if (st != TL_OK)
        return st;
    uint32_t did = 0;
    TL_WIRE_TAKE(&r->in, did);
    *swept = did != 0;
    return results(r);
}

static tl_status remote_it_mark(void *state)
{
    tl_remote *r = state;
    begin(r, TL_REMOTE_IT_MARK);
    return call(r);
}

static tl_status remote_it_regularise(void *state, bool nonneg, double tv_weight,
                                      uint32_t tv_steps)
{
    tl_remote *r = state;
    begin(r, TL_REMOTE_IT_REGULARISE);
    const uint32_t args[2] = {nonneg, tv_steps};
    tl_wire_put(&r->req, args, sizeof args);
    TL_WIRE_PUT(&r->req, tv_weight);
    return call(r);
}

static void remote_it_end(void *state)
{
    tl_remote *r = state;
    begin(r, TL_REMOTE_IT_END);
    (void)call(r); /* nothing to report it to: the table's it_end returns nothing */
}

/* Rank 0, at the end: every serving rank returns from tl_remote_serve. */
tl_status tl_remote_stop(const tl_link *l, tl_errbuf *eb)
{
    const uint32_t stop = TL_REMOTE_STOP;
    for (int k = 1; k < l->size; k++) {
        tl_status st = l->send(l, k, TL_REMOTE_STOP_TAG, &stop, sizeof stop, eb);
        if (st != TL_OK)
            return st;
    }
    return TL_OK;
}

/* Corrections and micro-benchmarks stay off this table: a split engine has no corrections,
 * and asks part 0 (this rank) for the device's rates. */
const tl_backend_ops tl_remote_backend = {
    .name = "remote",
    .estimate = remote_estimate,
    .create = remote_create,
    .destroy = remote_destroy,
    .set_filter = remote_set_filter,
    .calib_reset = remote_calib_reset,
    .calib_add = remote_calib_add,
    .store = remote_store,
    .backproject = remote_backproject,
    .memory_used = remote_memory_used,
    .device_name = remote_device_name,
    .acc_alloc = remote_acc_alloc,
    .acc_free = remote_acc_free,
    .acc_update = remote_acc_update,
    .acc_read = remote_acc_read,
    .kernels = remote_kernels,
    .bench = remote_bench,
    .bench_store = remote_bench_store,
    .device_id = remote_device_id,
    .fence = remote_fence,
    .fence_done = remote_fence_done,
    .flush = remote_flush,
    .it_begin = remote_it_begin,
    .it_image = remote_it_image,
    .it_forward = remote_it_forward,
    .it_backward = remote_it_backward,
    .it_sweep = remote_it_sweep,
    .it_mark = remote_it_mark,
    .it_regularise = remote_it_regularise,
    .it_end = remote_it_end,
};
