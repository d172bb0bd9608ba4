/* remote_serve.c — the serving half of remote.h: a rank that runs rank 0's backends.
 *
 * Threat it bounds: a request that does not fit this build (another version, a short or
 * garbled message, an unknown backend) must not become memory read past a message or a
 * crash on a rank nobody watches: it is answered with an error that rank 0 reports as the
 * operation's, and serving goes on. Only the link failing ends serving, and then MPI ends
 * the job.
 *
 * One request at a time, in the order they arrive: each backend's operations stay in the
 * order rank 0 issued them, and the ranks of a split work in parallel with each other,
 * not within one. Answers and scratch (slices, their planes) grow to the largest request
 * and stay, so a frame allocates nothing here either.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu/engine_impl.h"
#include "gpu/remote_impl.h"

/* A backend created for rank 0, known by the tag its requests come under. */
typedef struct {
    int tag;
    const tl_backend_ops *ops;
    void *be;
    tl_errbuf err; /* the backend reports here for its whole life */
    size_t padded;
    size_t *acc_px; /* floats of each accumulator, by slice id (0: none) */
    size_t nacc;
    size_t it_pixels; /* the current iterative problem's */
} instance;

typedef struct {
    const tl_link *link;
    tl_remote_host host;
    instance **list;
    size_t n, cap;
    tl_link_msg msg;
    tl_wire_reader in;
    tl_wire out;
    tl_remote_scratch job;
    float **outs; /* acc_read's outputs, in job.planes */
    size_t outs_cap;
} server;

static instance *find(server *s, int tag)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->list[i]->tag == tag)
            return s->list[i];
    return NULL;
}

/* The answer's head: status and message; results follow. */
static void answer(server *s, tl_status st, const char *msg)
{
    tl_wire_reset(&s->out);
    int32_t status = st;
    TL_WIRE_PUT(&s->out, status);
    tl_wire_put_str(&s->out, st == TL_OK ? "" : msg);
}

static tl_status refuse(server *s, tl_status st, tl_errbuf *eb, const char *fmt, const char *what)
{
    tl_fail(eb, st, fmt, what);
    answer(s, st, eb->msg);
    return st;
}

/* The backend of a configuration's kind, on this rank's device and cores. */
static tl_status setup(server *s, tl_engine_config *c, tl_errbuf *eb, const tl_backend_ops **ops)
{
    if (!tl_remote_same_build(&s->in))
        return tl_fail(eb, TL_EUNSUPPORTED,
                       "this rank runs another build of tomolive (every rank must run "
                       "tomolived %s)",
                       PACKAGE_VERSION);
    tl_remote_get_config(&s->in, c);
    if (s->in.short_read)
        return tl_fail(eb, TL_EINVAL, "a configuration cut short");
    c->ndevices = 0;
    c->device = s->host.device;
    if (c->threads == 0) { /* split.c leaves the share of this host's cores to it */
        long cores = s->host.threads > 0 ? s->host.threads : sysconf(_SC_NPROCESSORS_ONLN);
        long share = cores / (s->link->local_ranks > 0 ? s->link->local_ranks : 1);
        c->threads = share > 1 ? (int)share : 1;
    }
    *ops = tl_engine_backend_ops(c->backend);
    return *ops ? TL_OK
                : tl_fail(eb, TL_EDEVICE, "this build of tomolived has no %s backend",
                          tl_backend_name(c->backend));
}

static void serve_estimate(server *s)
{
    tl_errbuf eb = {{0}};
    tl_engine_config c;
    const tl_backend_ops *ops = NULL;
    uint64_t padded = 0;
    tl_memory_estimate m = {0};
    tl_status st = setup(s, &c, &eb, &ops);
    TL_WIRE_TAKE(&s->in, padded);
    if (st == TL_OK)
        st = ops->estimate(&c, (size_t)padded, &m, &eb);
    answer(s, st, eb.msg);
    TL_WIRE_PUT(&s->out, m);
}

static void serve_create(server *s, int tag)
{
    tl_errbuf eb = {{0}};
    if (find(s, tag)) {
        refuse(s, TL_EINTERNAL, &eb, "a backend under this request's tag %s", "exists already");
        return;
    }
    instance *in = calloc(1, sizeof *in);
    if (!in || (s->n == s->cap &&
                !(s->list = realloc(s->list, (s->cap = s->cap * 2 + 8) * sizeof *s->list)))) {
        free(in);
        refuse(s, TL_ENOMEM, &eb, "out of memory on this rank%s", "");
        return;
    }
    tl_engine_config c;
    uint64_t padded = 0;
    tl_status st = setup(s, &c, &in->err, &in->ops);
    TL_WIRE_TAKE(&s->in, padded);
    if (st == TL_OK)
        st = in->ops->create(&c, (size_t)padded, &in->err, &in->be);
    if (st != TL_OK) {
        answer(s, st, in->err.msg);
        free(in);
        return;
    }
    in->tag = tag;
    in->padded = (size_t)padded;
    s->list[s->n++] = in;
    tl_device_id id;
    in->ops->device_id(in->be, &id);
    answer(s, TL_OK, "");
    tl_wire_put_str(&s->out, in->ops->device_name(in->be));
    TL_WIRE_PUT(&s->out, id);
}

static void serve_destroy(server *s, instance *in)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->list[i] == in) {
            s->list[i] = s->list[--s->n];
            break;
        }
    in->ops->destroy(in->be);
    free(in->acc_px);
    free(in);
    answer(s, TL_OK, "");
}

/* The kernels of an answer, as remote.c's take_kernels reads them. */
static void put_kernels(server *s, const tl_bp_job *job)
{
    tl_wire_put_str(&s->out, job->kernel);
    for (size_t i = 0; job->slice_kernel && i < job->nslices; i++)
        tl_wire_put_str(&s->out, job->slice_kernel[i]);
}

/* Room for n outputs of acc_read. */
static bool reserve_outs(server *s, size_t n)
{
    if (n <= s->outs_cap)
        return true;
    float **outs = realloc(s->outs, n * sizeof *outs);
    if (!outs)
        return false;
    s->outs = outs;
    s->outs_cap = n;
    return true;
}

static void serve_job(server *s, instance *in, tl_remote_op op)
{
    tl_bp_job job;
    tl_status st = TL_OK;
    if (!tl_remote_get_job(&s->in, &job, &s->job)) {
        refuse(s, TL_EINVAL, &in->err, "a job %s", "cut short, or out of memory for it");
        return;
    }
    if (op == TL_REMOTE_BACKPROJECT) {
        st = in->ops->backproject(in->be, &job);
        answer(s, st, in->err.msg);
        if (st != TL_OK)
            return;
        put_kernels(s, &job);
        for (size_t i = 0; i < job.nslices; i++)
            if (job.slices[i].out)
                tl_wire_put(&s->out, job.slices[i].out,
                            (size_t)job.slices[i].height * job.slices[i].width * sizeof(float));
        return;
    }
    if (op == TL_REMOTE_ACC_UPDATE) {
        const int *ids = tl_wire_get(&s->in, job.nslices * sizeof *ids);
        uint32_t add = 0;
        TL_WIRE_TAKE(&s->in, add);
        if (!ids) {
            refuse(s, TL_EINVAL, &in->err, "an update %s", "cut short");
            return;
        }
        st = in->ops->acc_update(in->be, &job, ids, add != 0);
        answer(s, st, in->err.msg);
        if (st == TL_OK)
            put_kernels(s, &job);
        return;
    }
    /* TL_REMOTE_BENCH */
    int32_t args[2] = {0};
    tl_wire_take(&s->in, args, sizeof args);
    size_t cap = args[1] > 0 ? (size_t)args[1] : 0, n = 0;
    tl_bench_row *rows = calloc(cap ? cap : 1, sizeof *rows); /* a benchmark, not a frame */
    if (!rows) {
        refuse(s, TL_ENOMEM, &in->err, "out of memory for a benchmark%s", "");
        return;
    }
    st = in->ops->bench(in->be, &job, args[0], rows, cap, &n);
    answer(s, st, in->err.msg);
    if (st == TL_OK) {
        tl_wire_put_str(&s->out, job.kernel);
        uint64_t count = n < cap ? n : cap;
        TL_WIRE_PUT(&s->out, count);
        for (size_t i = 0; i < count; i++) {
            uint32_t quality = rows[i].quality;
            tl_wire_put_str(&s->out, rows[i].kernel);
            TL_WIRE_PUT(&s->out, quality);
            TL_WIRE_PUT(&s->out, rows[i].ms);
            TL_WIRE_PUT(&s->out, rows[i].updates_per_s);
        }
    }
    free(rows);
}

/* Accumulator sizes by slice id, as acc_alloc made them: acc_read sends each whole. */
static bool note_acc(instance *in, int id, size_t px)
{
    if (id < 0)
        return false;
    if ((size_t)id >= in->nacc) {
        size_t n = (size_t)id * 2 + 8;
        size_t *grown = realloc(in->acc_px, n * sizeof *grown);
        if (!grown)
            return false;
        memset(grown + in->nacc, 0, (n - in->nacc) * sizeof *grown);
        in->acc_px = grown;
        in->nacc = n;
    }
    in->acc_px[id] = px;
    return true;
}

static void serve_acc_alloc(server *s, instance *in)
{
    int32_t args[3] = {0};
    tl_wire_take(&s->in, args, sizeof args);
    if (s->in.short_read || args[1] <= 0 || args[2] <= 0 ||
        !note_acc(in, args[0], (size_t)args[1] * (size_t)args[2])) {
        refuse(s, TL_EINVAL, &in->err, "an accumulator %s", "of no size, or out of memory");
        return;
    }
    tl_status st = in->ops->acc_alloc(in->be, args[0], (uint32_t)args[1], (uint32_t)args[2]);
    answer(s, st, in->err.msg);
}

static void serve_acc_read(server *s, instance *in)
{
    uint64_t n = 0;
    TL_WIRE_TAKE(&s->in, n);
    const int *ids = tl_wire_get(&s->in, n * sizeof *ids);
    size_t px = 0;
    for (size_t k = 0; ids && k < n; k++) {
        if (ids[k] < 0 || (size_t)ids[k] >= in->nacc || !in->acc_px[ids[k]]) {
            refuse(s, TL_EINVAL, &in->err, "a read-out of %s", "an accumulator never made");
            return;
        }
        px += in->acc_px[ids[k]];
    }
    if (!ids || !reserve_outs(s, n) || !tl_remote_scratch_reserve(&s->job, 0, px)) {
        refuse(s, TL_EINVAL, &in->err, "a read-out %s", "cut short, or out of memory for it");
        return;
    }
    px = 0;
    for (size_t k = 0; k < n; k++) {
        s->outs[k] = s->job.planes + px;
        px += in->acc_px[ids[k]];
    }
    tl_status st = in->ops->acc_read(in->be, ids, n, s->outs);
    answer(s, st, in->err.msg);
    for (size_t k = 0; st == TL_OK && k < n; k++) {
        uint64_t floats = in->acc_px[ids[k]];
        TL_WIRE_PUT(&s->out, floats);
        tl_wire_put(&s->out, s->outs[k], floats * sizeof(float));
    }
}

static void serve_kernels(server *s, instance *in)
{
    size_t n = in->ops->kernels(in->be, NULL, 0);
    tl_kernel_info *k = calloc(n ? n : 1, sizeof *k); /* asked once per backend */
    if (!k) {
        refuse(s, TL_ENOMEM, &in->err, "out of memory%s", "");
        return;
    }
    n = in->ops->kernels(in->be, k, n);
    answer(s, TL_OK, "");
    uint64_t count = n;
    TL_WIRE_PUT(&s->out, count);
    for (size_t i = 0; i < n; i++) {
        uint32_t v[3] = {k[i].quality, k[i].planes, k[i].slices};
        tl_wire_put_str(&s->out, k[i].name);
        tl_wire_put_str(&s->out, k[i].params);
        tl_wire_put(&s->out, v, sizeof v);
    }
    free(k);
}

/* A frame's operations: calibration, store, its benchmark. */
static void serve_frame(server *s, instance *in, tl_remote_op op)
{
    tl_frame f;
    tl_remote_get_frame(&s->in, &f);
    uint32_t arg = 0;
    TL_WIRE_TAKE(&s->in, arg);
    if (s->in.short_read || !f.data) {
        refuse(s, TL_EINVAL, &in->err, "a frame %s", "cut short");
        return;
    }
    tl_status st;
    double ms = 0;
    if (op == TL_REMOTE_CALIB_ADD)
        st = in->ops->calib_add(in->be, &f, arg);
    else if (op == TL_REMOTE_STORE)
        st = in->ops->store(in->be, &f, arg);
    else
        st = in->ops->bench_store(in->be, &f, (int)arg, &ms);
    answer(s, st, in->err.msg);
    if (op == TL_REMOTE_BENCH_STORE)
        TL_WIRE_PUT(&s->out, ms);
}

static void serve_filter(server *s, instance *in)
{
    uint32_t has = 0;
    TL_WIRE_TAKE(&s->in, has);
    const double *response =
        has ? tl_wire_get(&s->in, (in->padded / 2 + 1) * sizeof *response) : NULL;
    if (s->in.short_read) {
        refuse(s, TL_EINVAL, &in->err, "a filter %s", "cut short");
        return;
    }
    answer(s, in->ops->set_filter(in->be, response), in->err.msg);
}

static void serve_fence(server *s, instance *in, tl_remote_op op)
{
    uint32_t args[2] = {0};
    tl_wire_take(&s->in, args, op == TL_REMOTE_FENCE ? sizeof args[0] : sizeof args);
    bool done = true;
    tl_status st = TL_OK;
    if (op == TL_REMOTE_FENCE && in->ops->fence)
        st = in->ops->fence(in->be, args[0]);
    else if (op == TL_REMOTE_FENCE_DONE && in->ops->fence_done)
        st = in->ops->fence_done(in->be, args[0], args[1] != 0, &done);
    answer(s, st, in->err.msg);
    uint32_t reached = done;
    if (op == TL_REMOTE_FENCE_DONE)
        TL_WIRE_PUT(&s->out, reached);
}

/* The iterative primitives (backend.h it_*), where the backend has them. */
static void serve_iterative(server *s, instance *in, tl_remote_op op)
{
    const tl_backend_ops *o = in->ops;
    if (!o->it_begin) {
        refuse(s, TL_EINVAL, &in->err, "iterative: the %s backend has no iterative methods",
               o->name);
        return;
    }
    tl_status st = TL_OK;
    uint32_t args[4] = {0};
    double value = 0, stats[2] = {0};
    tl_it_problem p;
    bool done = false;
    switch (op) {
        case TL_REMOTE_IT_BEGIN:
            if (!tl_remote_get_problem(&s->in, &p, &s->job)) {
                refuse(s, TL_EINVAL, &in->err, "an iterative problem %s", "cut short");
                return;
            }
            in->it_pixels = tl_it_pixels(&p);
            st = o->it_begin(in->be, &p, stats);
            answer(s, st, in->err.msg);
            tl_wire_put(&s->out, stats, sizeof stats);
            return;
        case TL_REMOTE_IT_IMAGE: {
            tl_wire_take(&s->in, args, 2 * sizeof *args);
            const float *image =
                args[0] ? tl_wire_get(&s->in, in->it_pixels * sizeof *image) : NULL;
            if (s->in.short_read ||
                (args[1] && !tl_remote_scratch_reserve(&s->job, 0, in->it_pixels))) {
                refuse(s, TL_EINVAL, &in->err, "an image %s", "cut short, or out of memory");
                return;
            }
            st = o->it_image(in->be, image, args[1] ? s->job.planes : NULL);
            answer(s, st, in->err.msg);
            if (st == TL_OK && args[1])
                tl_wire_put(&s->out, s->job.planes, in->it_pixels * sizeof(float));
            return;
        }
        case TL_REMOTE_IT_FORWARD:
        case TL_REMOTE_IT_BACKWARD: {
            tl_wire_take(&s->in, args, sizeof args);
            tl_it_views v = {args[0], args[1], args[2]};
            if (op == TL_REMOTE_IT_BACKWARD) {
                TL_WIRE_TAKE(&s->in, value);
                answer(s, o->it_backward(in->be, v, (tl_it_rule)args[3], value), in->err.msg);
                return;
            }
            st = o->it_forward(in->be, v, (tl_it_rule)args[3], &value);
            answer(s, st, in->err.msg);
            TL_WIRE_PUT(&s->out, value);
            return;
        }
        case TL_REMOTE_IT_SWEEP: {
            TL_WIRE_TAKE(&s->in, value);
            if (o->it_sweep)
                st = o->it_sweep(in->be, value, &done);
            answer(s, st, in->err.msg);
            uint32_t swept = done;
            TL_WIRE_PUT(&s->out, swept);
            return;
        }
        case TL_REMOTE_IT_MARK: answer(s, o->it_mark(in->be), in->err.msg); return;
        case TL_REMOTE_IT_REGULARISE:
            tl_wire_take(&s->in, args, 2 * sizeof *args);
            TL_WIRE_TAKE(&s->in, value);
            answer(s, o->it_regularise(in->be, args[0] != 0, value, args[1]), in->err.msg);
            return;
        default: /* TL_REMOTE_IT_END */
            o->it_end(in->be);
            answer(s, TL_OK, "");
            return;
    }
}

/* One request of backend `in`. */
static void serve_op(server *s, instance *in, tl_remote_op op)
{
    tl_status st;
    switch (op) {
        case TL_REMOTE_DESTROY: serve_destroy(s, in); return;
        case TL_REMOTE_SET_FILTER: serve_filter(s, in); return;
        case TL_REMOTE_CALIB_RESET: {
            uint32_t kind = 0;
            TL_WIRE_TAKE(&s->in, kind);
            st = in->ops->calib_reset(in->be, (tl_frame_kind)kind);
            answer(s, st, in->err.msg);
            return;
        }
        case TL_REMOTE_CALIB_ADD:
        case TL_REMOTE_STORE:
        case TL_REMOTE_BENCH_STORE: serve_frame(s, in, op); return;
        case TL_REMOTE_FLUSH:
            st = in->ops->flush ? in->ops->flush(in->be) : TL_OK;
            answer(s, st, in->err.msg);
            return;
        case TL_REMOTE_BACKPROJECT:
        case TL_REMOTE_ACC_UPDATE:
        case TL_REMOTE_BENCH: serve_job(s, in, op); return;
        case TL_REMOTE_MEMORY_USED: {
            uint64_t used = in->ops->memory_used(in->be);
            answer(s, TL_OK, "");
            TL_WIRE_PUT(&s->out, used);
            return;
        }
        case TL_REMOTE_ACC_ALLOC: serve_acc_alloc(s, in); return;
        case TL_REMOTE_ACC_FREE: {
            int32_t id = -1;
            TL_WIRE_TAKE(&s->in, id);
            in->ops->acc_free(in->be, id);
            note_acc(in, id, 0);
            answer(s, TL_OK, "");
            return;
        }
        case TL_REMOTE_ACC_READ: serve_acc_read(s, in); return;
        case TL_REMOTE_KERNELS: serve_kernels(s, in); return;
        case TL_REMOTE_FENCE:
        case TL_REMOTE_FENCE_DONE: serve_fence(s, in, op); return;
        case TL_REMOTE_IT_BEGIN:
        case TL_REMOTE_IT_IMAGE:
        case TL_REMOTE_IT_FORWARD:
        case TL_REMOTE_IT_BACKWARD:
        case TL_REMOTE_IT_SWEEP:
        case TL_REMOTE_IT_MARK:
        case TL_REMOTE_IT_REGULARISE:
        case TL_REMOTE_IT_END: serve_iterative(s, in, op); return;
        default: break;
    }
    refuse(s, TL_EINVAL, &in->err, "unknown request %s", "(another build?)");
}

tl_status tl_remote_serve(const tl_link *l, const tl_remote_host *host, tl_errbuf *eb)
{
    server s = {.link = l, .host = *host};
    tl_status st = TL_OK;
    for (;;) {
        st = l->recv(l, 0, TL_LINK_ANY, &s.msg, eb);
        if (st != TL_OK)
            break;
        s.in = (tl_wire_reader){s.msg.data, s.msg.len, 0, false};
        uint32_t op = 0;
        TL_WIRE_TAKE(&s.in, op);
        if (s.msg.tag == TL_REMOTE_STOP_TAG && op == TL_REMOTE_STOP)
            break;
        tl_errbuf err = {{0}};
        instance *in = find(&s, s.msg.tag);
        if (op == TL_REMOTE_ESTIMATE)
            serve_estimate(&s);
        else if (op == TL_REMOTE_CREATE)
            serve_create(&s, s.msg.tag);
        else if (!in)
            refuse(&s, TL_EINTERNAL, &err, "no backend here has tag %s", "of this request");
        else
            serve_op(&s, in, (tl_remote_op)op);
        if (s.out.failed)
            refuse(&s, TL_ENOMEM, &err, "out of memory for an answer%s", "");
        st = l->send(l, 0, s.msg.tag, s.out.p, s.out.len, eb);
        if (st != TL_OK)
            break;
    }
    for (size_t i = 0; i < s.n; i++) { /* rank 0 is done with them */
        s.list[i]->ops->destroy(s.list[i]->be);
        free(s.list[i]->acc_px);
        free(s.list[i]);
    }
    free(s.list);
    free(s.msg.data);
    tl_wire_free(&s.out);
    free(s.job.slices);
    free(s.job.kernels);
    free(s.job.planes);
    free(s.outs);
    return st;
}
