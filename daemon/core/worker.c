/* worker.c — the engine worker: take items from the queue, apply them, publish what is due.
 *
 * One turn: wait for an item (or for the next rate-limited slice to come due, or a poke),
 * apply it and everything already queued behind it (for up to TL_WORKER_BATCH_NS), then
 * look at every slice: the due ones are reconstructed in one engine call (one batch, so a
 * GPU kernel can serve several slices per pass) into buffers from the pool and posted to
 * the publisher. Applying the backlog first matters: a reconstruction slower than the frame
 * interval would otherwise run after every frame and ingest would fall further behind with
 * every slice; this way each slice includes all frames received, and frames are never
 * delayed by more than one reconstruction. A frame applied with more queued behind it may
 * have its filtering held for a batch (engine.h, tl_frame.more); the held ones run when
 * the backlog is applied, before anything else. While frames stream, the read-outs due by
 * routine policy are paced instead, a share of the frame interval after each frame
 * (pacing.h): frames first, and every slice fresh. Between turns the lock is free
 * for control commands. The worker beats a heartbeat that the systemd watchdog checks, so
 * a stuck engine (a hung GPU) is noticed, not hidden by a live event loop.
 *
 * Before the due slices are reconstructed, every wanted slice size new to the engine gets
 * its kernels resolved (tuning.c: cache, one candidate or the built-in rule at once; a
 * timing on a thread of its own, while the built-in rule serves, switched to when it ends);
 * a tune command runs there too.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/core/daemon.h"
#include "protocol/pixels.h"

#define TL_WORKER_MAX_WAIT 0.2         /* seconds: heartbeat and rate-limit resolution */
#define TL_WORKER_BATCH_NS 50000000ull /* frames applied back to back before slices are due */

/* ---- publishing what is due: refresh, select, pace, take buffers, reconstruct, post.
 * All with the lock held. Only refresh_slices changes slices before the read-out; the
 * selection looks and lists; each later phase works on the list the previous one left in
 * d->scratch.due. */

/* Keeps a slice incrementally in the engine, or stops: every plane of a box. */
static tl_status track_slice(tl_daemon *d, const tl_slice *sl, bool on)
{
    const uint32_t n = sl->box.on ? sl->box.planes : 1;
    tl_status st = TL_OK;
    for (uint32_t k = 0; k < n && st == TL_OK; k++)
        st = tl_engine_track(d->scan.engine, sl->box.on ? sl->box.ids[k] : sl->engine_id, on);
    return st;
}

/* Brings every slice with an engine id up to date for this turn: incremental tracking for
 * the watched ones (the others cost nothing), shared-memory slots for those wanted through
 * shm (made when the slice is wanted, not when frames already flow behind its first
 * read-out; a failure is logged, counted and tried again a little later), and whether it
 * became wanted over a channel (a new subscriber: due at once). */
static void refresh_slices(tl_daemon *d)
{
    for (int i = 0; i < d->slices.n; i++) {
        tl_slice *sl = &d->slices.v[i];
        if (sl->engine_id < 0)
            continue;
        bool tcp, shm, wanted = tl_slice_wanted(d, sl, &tcp, &shm);
        bool track = wanted && d->cfg.slices_incremental && !sl->it.on;
        if (track != sl->tracked && track_slice(d, sl, track) == TL_OK)
            sl->tracked = track;
        if (shm)
            tl_slice_shm_prepare(d, sl);
        tl_slice_note_wanted(sl, tcp, shm);
    }
}

/* Lists the slices due now in d->scratch.due, in serving order (tl_slice_served_before),
 * at most cap of them (the rest: next turn); lowers *wake to when a rate-limited one will
 * be due. Changes no slice. Returns how many. */
static int select_due(tl_daemon *d, bool have_data, uint64_t now, uint64_t *wake)
{
    tl_worker_scratch *w = &d->scratch;
    int n = 0;
    for (int i = 0; i < d->slices.n && n < w->cap; i++) {
        const tl_slice *sl = &d->slices.v[i];
        if (sl->engine_id < 0)
            continue;
        tl_worker_readout r = {.slice = i};
        bool wanted = tl_slice_wanted(d, sl, &r.tcp, &r.shm);
        r.shm = r.shm && tl_slice_shm_ready(sl);
        if (!tl_slice_due_now(sl, wanted, have_data, now, wake))
            continue;
        if (!r.tcp && !r.shm)
            continue; /* wanted through shared memory only, and it has no slots */
        int k = n++;  /* insertion sort: a handful of slices */
        for (; k > 0 && tl_slice_served_before(sl, &d->slices.v[w->due[k - 1].slice]); k--)
            w->due[k] = w->due[k - 1];
        w->due[k] = r;
    }
    return n;
}

/* Keeps, in order, the first n due slices that pacing lets out this turn (pacing.h); the
 * others wait for the next frame, or for the stream to pause. Returns how many. */
static int pace_due(tl_daemon *d, int n)
{
    tl_worker_scratch *w = &d->scratch;
    int kept = 0;
    for (int k = 0; k < n; k++) {
        const tl_slice *sl = &d->slices.v[w->due[k].slice];
        if (tl_pace_take(&w->pace, tl_slice_urgent(sl), sl->cost_ns))
            w->due[kept++] = w->due[k];
    }
    return kept;
}

/* Floats of a TCP buffer: the pixels, and behind them room for their compact encoding
 * (none for plain f32). */
static size_t tcp_floats(const tl_slice *sl)
{
    size_t n = (size_t)sl->height * sl->width;
    return n + (tl_proto_pixels_bound(n, sl->wire_dtype, sl->wire_lz4) + 3) / 4;
}

/* What goes on "slice/<id>/": the float32 pixels as they are, or encoded as the slice asks
 * (behind the pixels, which the preview's taps still read). */
static void encode_wire(const tl_slice *sl, tl_slicebuf *b)
{
    size_t n = (size_t)sl->height * sl->width;
    b->wire_dtype = TL_PROTO_F32;
    b->wire_lz4 = false;
    b->payload = b->data;
    b->payload_bytes = n * sizeof(float);
    if (!b->tcp || (sl->wire_dtype == TL_PROTO_F32 && !sl->wire_lz4))
        return;
    tl_proto_slice h = {.dtype = sl->wire_dtype, .lz4 = sl->wire_lz4};
    const void *payload;
    size_t len;
    if (tl_proto_pixels_encode(b->data, n, &h, b->data + n, (b->cap - n) * sizeof(float), &payload,
                               &len) != 0) {
        tl_log(TL_LOG_ERROR, "slice_encode_failed", "id=%s dtype=%s (sent as f32)",
               tl_logq(sl->id), tl_proto_dtype_name(sl->wire_dtype));
        return;
    }
    b->wire_dtype = h.dtype;
    b->wire_lz4 = h.lz4;
    b->wire_scale = h.scale;
    b->wire_offset = h.offset;
    b->payload = payload;
    b->payload_bytes = len;
}

/* Gives each of the n read-outs a buffer from the publisher's pool (pixels only for TCP)
 * and, through shared memory, the slot its read-out goes to. Out of memory: said, and the
 * rest are tried again next turn. Returns how many have their buffers. */
static int take_buffers(tl_daemon *d, int n)
{
    tl_worker_scratch *w = &d->scratch;
    for (int k = 0; k < n; k++) {
        tl_worker_readout *r = &w->due[k];
        tl_slice *sl = &d->slices.v[r->slice];
        r->buf = tl_bufpool_get(&d->pub.pool, r->tcp ? tcp_floats(sl) : 0);
        if (!r->buf) {
            static tl_ratelimit rl = TL_RATELIMIT_INIT;
            uint64_t suppressed;
            if (tl_ratelimit_allow(&rl, 5.0, 3, &suppressed))
                tl_log(TL_LOG_ERROR, "slice_buffer_failed", "id=%s error=%s suppressed=%llu",
                       tl_logq(sl->id), tl_logq(d->pub.pool.error),
                       (unsigned long long)suppressed);
            return k;
        }
        r->slot = r->shm ? tl_shm_ring_begin(&sl->shm, &r->slot_off) : NULL;
    }
    return n;
}

/* Where read-out r goes: its shared-memory slot, or its buffer. */
static float *readout_out(const tl_worker_readout *r)
{
    return r->slot ? r->slot : r->buf->data;
}

/* Whether a slice is read out in the turn's one batch of FBP slices: not an iterative
 * slice, nor a box (whose planes are a batch of their own). */
static bool batched(const tl_slice *sl)
{
    return !sl->it.on && !sl->box.on;
}

/* The batched read-outs among the n in one engine call (one batch: a GPU kernel may
 * serve several slices per pass), each getting its share of the call's time by pixels
 * (what pacing expects it to cost). */
static tl_status reconstruct_fbp(tl_daemon *d, int n)
{
    tl_worker_scratch *w = &d->scratch;
    int nfbp = 0;
    double px = 0;
    for (int k = 0; k < n; k++) {
        const tl_slice *sl = &d->slices.v[w->due[k].slice];
        if (!batched(sl))
            continue;
        w->engine_ids[nfbp] = sl->engine_id;
        w->outs[nfbp++] = readout_out(&w->due[k]);
        px += (double)sl->height * sl->width;
    }
    if (nfbp == 0)
        return TL_OK;
    uint64_t t0 = tl_clock_ns();
    tl_status st =
        tl_engine_reconstruct(d->scan.engine, w->engine_ids, (size_t)nfbp, w->outs, w->info);
    uint64_t ns = tl_clock_ns() - t0;
    for (int k = 0, i = 0; k < n; k++) {
        const tl_slice *sl = &d->slices.v[w->due[k].slice];
        if (!batched(sl))
            continue;
        w->due[k].info = w->info[i++];
        w->due[k].cost_ns = (uint64_t)((double)ns * ((double)sl->height * sl->width / px));
    }
    return st;
}

/* A box's planes in one engine call into out, plane after plane (slices.h, tl_slice_box);
 * info what plane 0 used (every plane uses the same window). */
static tl_status reconstruct_box(tl_daemon *d, const tl_slice *sl, float *out,
                                 tl_slice_info *info)
{
    tl_worker_scratch *w = &d->scratch;
    const size_t plane = (size_t)tl_slice_plane_height(sl) * sl->width;
    for (uint32_t k = 0; k < sl->box.planes; k++)
        w->stack_outs[k] = out + k * plane;
    tl_status st = tl_engine_reconstruct(d->scan.engine, sl->box.ids, sl->box.planes,
                                         w->stack_outs, w->stack_info);
    *info = w->stack_info[0];
    return st;
}

/* The engine slices of an iterative slice's problem into ids: the slice itself, or in
 * cone beam the stack of it.planes planes around it (tl_slice_spec_stacked), added for
 * this read-out (remove_stack takes them out again). How many, or -1 (the engine's
 * error). */
static int add_stack(tl_daemon *d, const tl_slice *sl, int *ids)
{
    const tl_slice_iter *it = &sl->it;
    if (it->planes <= 1) {
        ids[0] = sl->engine_id;
        return 1;
    }
    tl_engine *e = d->scan.engine;
    tl_slice_spec spec = sl->spec;
    spec.height = sl->height;
    spec.width = sl->width;
    for (uint32_t k = 0; k < it->planes; k++) {
        tl_slice_spec plane;
        tl_slice_spec_stacked(&spec, tl_engine_get_config(e)->rows, k, it->planes, it->spacing,
                              &plane);
        if (tl_engine_add_slice(e, &plane, &ids[k]) != TL_OK) {
            while (k-- > 0)
                tl_engine_remove_slice(e, ids[k]);
            return -1;
        }
    }
    return (int)it->planes;
}

static void remove_stack(tl_daemon *d, const tl_slice *sl, const int *ids)
{
    for (uint32_t k = 0; sl->it.planes > 1 && k < sl->it.planes; k++)
        tl_engine_remove_slice(d->scan.engine, ids[k]);
}

/* One read-out of an iterative slice into out (slices.h, tl_slice_iter): x's start after
 * a parameter change or the first time (the slice's FBP, or none), then its iterations
 * from where the last read-out left x (as many as refinement has left, at least one),
 * and x kept for the next. In cone beam x may be a stack around the slice: one problem,
 * the slice's plane published. */
static tl_status iterate(tl_daemon *d, tl_slice *sl, float *out, tl_slice_info *info)
{
    tl_slice_iter *it = &sl->it;
    tl_engine *e = d->scan.engine;
    if (sl->want_param)
        tl_slice_iter_restart(sl);
    int *ids = d->scratch.stack_ids;
    const int n = add_stack(d, sl, ids);
    if (n < 0)
        return TL_EINVAL;
    const size_t plane = (size_t)sl->height * sl->width;
    for (int k = 0; k < n; k++)
        d->scratch.stack_outs[k] = it->image + (size_t)k * plane;
    tl_status st = TL_OK;
    /* an FBP start needs a filtered window (engine.filter none: start from zeros) */
    const bool fbp = it->start_fbp && tl_engine_get_config(e)->filter != TL_FILTER_NONE;
    if (!it->started && fbp)
        st = tl_engine_reconstruct(e, ids, (size_t)n, d->scratch.stack_outs, NULL);
    tl_iter_options o = it->o;
    o.tolerance = 0; /* applied across read-outs by tl_slice_iter_ran */
    tl_engine_state es;
    tl_engine_get_state(e, &es);
    if (o.subsets > es.held) /* early in a scan: fewer views than subsets */
        o.subsets = es.held ? es.held : 1;
    uint32_t left = it->since_data < it->max_iterations ? it->max_iterations - it->since_data : 1;
    if (o.iterations > left)
        o.iterations = left;
    const float *start = it->started || fbp ? it->image : NULL;
    uint32_t done = 0;
    if (st == TL_OK) /* x in place: the start is read before x is written */
        st = tl_engine_iterate(e, ids, (size_t)n, &o, start, it->image, d->scratch.residual, &done,
                               info);
    remove_stack(d, sl, ids);
    if (st != TL_OK)
        return st;
    memcpy(out, it->image + (size_t)(n / 2) * plane, plane * sizeof *out);
    tl_slice_iter_ran(sl, done, d->scratch.residual);
    tl_stats_add(&d->stats.slice_iterations, done);
    return TL_OK;
}

/* A failed read-out: logged and counted, its buffer given back. An iterative slice drops
 * its triggers and refinement until the window or its parameters change, so that a
 * method the data cannot serve (OS-EM on values below 0) is not retried at its rate. */
static void readout_failed(tl_daemon *d, tl_worker_readout *r, uint64_t now)
{
    tl_slice *sl = &d->slices.v[r->slice];
    tl_log(TL_LOG_ERROR, "reconstruction_failed", "id=%s method=%s error=%s", tl_logq(sl->id),
           sl->it.on ? tl_iter_method_name(sl->it.o.method) : "fbp",
           tl_logq(tl_engine_last_error(d->scan.engine)));
    tl_stats_count(&d->stats.slices_failed);
    tl_bufpool_put(r->buf);
    if (sl->it.on) {
        tl_slice_computed(sl, now);
        sl->it.converged = true;
    }
}

/* Reconstructs the n read-outs into their slots or buffers: the FBP ones in one batch,
 * the iterative ones one by one. Times it all in *t0, *t1. Failed read-outs are dropped
 * from the list (readout_failed); returns how many are left, in order. */
static int reconstruct(tl_daemon *d, int n, uint64_t *t0, uint64_t *t1)
{
    tl_worker_scratch *w = &d->scratch;
    *t0 = tl_clock_ns();
    bool fbp_ok = reconstruct_fbp(d, n) == TL_OK;
    if (!fbp_ok) /* before the others overwrite the engine's error */
        for (int k = 0; k < n; k++)
            if (batched(&d->slices.v[w->due[k].slice]))
                readout_failed(d, &w->due[k], *t0);
    int kept = 0;
    for (int k = 0; k < n; k++) {
        tl_worker_readout *r = &w->due[k];
        tl_slice *sl = &d->slices.v[r->slice];
        if (batched(sl) && !fbp_ok)
            continue;
        if (!batched(sl)) { /* a call of its own: an iterative slice, or a box */
            uint64_t t = tl_clock_ns();
            tl_status st = sl->it.on ? iterate(d, sl, readout_out(r), &r->info)
                                     : reconstruct_box(d, sl, readout_out(r), &r->info);
            if (st != TL_OK) {
                readout_failed(d, r, t);
                continue;
            }
            r->cost_ns = tl_clock_ns() - t;
        }
        w->due[kept++] = *r;
    }
    *t1 = tl_clock_ns();
    tl_hist_add(&d->stats.latency[TL_LAT_RECON], (*t1 - *t0) / 1e9);
    return kept;
}

/* Hands the n reconstructed read-outs to the publisher: each slice's cost (what pacing
 * expects its next read-out to cost), its triggers reset, its buffer labelled, its
 * shared-memory slot committed. An iterative slice's final waits until it has converged
 * (slices.h): until then its read-outs after the end go out as ordinary ones. */
static void post(tl_daemon *d, int n, uint64_t t0)
{
    tl_worker_scratch *w = &d->scratch;
    uint64_t t_done = tl_clock_realtime_ns();
    for (int k = 0; k < n; k++) {
        tl_worker_readout *r = &w->due[k];
        tl_slice *sl = &d->slices.v[r->slice];
        size_t pixels = (size_t)sl->height * sl->width;
        sl->cost_ns = tl_pace_average(sl->cost_ns, r->cost_ns);
        tl_slicebuf *b = r->buf;
        bool final = sl->want_final && (!sl->it.on || sl->it.converged);
        bool final_owed = sl->want_final && !final;
        tl_slice_computed(sl, t0);
        sl->want_final = final_owed;
        snprintf(b->id, sizeof b->id, "%s", sl->id);
        b->seq = ++sl->seq;
        b->height = sl->height;
        b->width = sl->width;
        memcpy(b->orientation, sl->orientation, sizeof b->orientation);
        b->info = r->info;
        b->iterations = sl->it.on ? sl->it.total : 0;
        b->residual = sl->it.on ? sl->it.residual : 0;
        b->planes = sl->box.on ? sl->box.planes : 0;
        b->box_step = sl->box.on ? sl->spec.scale : 0;
        b->t_done = t_done;
        b->final = final;
        b->tcp = r->tcp;
        b->shm_name[0] = 0;
        if (r->slot) {
            tl_shm_ring_commit(&sl->shm, r->slot_off, b->seq);
            if (final) /* never dropped: readable until the next final (publisher.h) */
                tl_shm_ring_keep(&sl->shm, r->slot_off);
            snprintf(b->shm_name, sizeof b->shm_name, "%s", sl->shm.name);
            b->shm_offset = r->slot_off;
            if (b->tcp) /* a TCP subscriber too: its payload is a copy */
                memcpy(b->data, r->slot, pixels * sizeof(float));
        }
        encode_wire(sl, b);
        tl_stats_count(&d->stats.slices_computed);
        if (final) /* one line per slice and scan: when each scan's result is out */
            tl_log(TL_LOG_INFO, "slice_final", "id=%s seq=%llu", tl_logq(b->id),
                   (unsigned long long)b->seq);
        tl_publisher_post(&d->pub, b);
    }
}

/* Lowers *wake to when the n slices just read out are due again by themselves (an
 * iterative one refining, or owing its final; slices.h), so that refinement runs at the
 * slice's rate without waiting for a frame. */
static void wake_for_more(tl_daemon *d, int n, uint64_t *wake)
{
    uint64_t now = tl_clock_ns();
    for (int k = 0; k < n; k++)
        if (tl_slice_due_now(&d->slices.v[d->scratch.due[k].slice], true, true, now, wake))
            *wake = now;
}

/* Reconstructs and posts the due slices (lock held), as far as pacing lets it. Returns
 * when the next slice will be due (monotonic ns), or UINT64_MAX. */
static uint64_t publish_due(tl_daemon *d)
{
    uint64_t now = tl_clock_ns(), wake = UINT64_MAX;
    if (!d->scan.open)
        return wake;
    tl_engine_state es;
    tl_engine_get_state(d->scan.engine, &es);
    refresh_slices(d);
    int n = select_due(d, !es.empty, now, &wake);
    n = pace_due(d, n);
    if (d->scratch.pace.held && d->scratch.pace.resume_ns < wake)
        wake = d->scratch.pace.resume_ns; /* slices held back: read then at the latest */
    n = take_buffers(d, n);
    uint64_t t0, t1;
    if (n > 0 && (n = reconstruct(d, n, &t0, &t1)) > 0) {
        post(d, n, t0);
        wake_for_more(d, n, &wake);
    }
    return wake;
}

static void *run(void *arg)
{
    tl_daemon *d = arg;
    pthread_setname_np(pthread_self(), "tl-worker");
    tl_item it;
    zmq_msg_init(&it.payload);
    tl_worker_scratch *w = &d->scratch;
    uint64_t wake = UINT64_MAX;
    bool owed = false;
    while (!atomic_load(&d->worker_stop)) {
        uint64_t now = tl_clock_ns();
        atomic_store(&d->worker_beat, now);
        double timeout = TL_WORKER_MAX_WAIT;
        if (wake != UINT64_MAX)
            timeout = wake > now ? (wake - now) / 1e9 : 0;
        if (timeout > TL_WORKER_MAX_WAIT)
            timeout = TL_WORKER_MAX_WAIT;
        /* releases owed to a producer of frames in GPU memory: no sleeping on the queue
         * while the GPU finishes reading them (the producer may be waiting for its ring) */
        int got = tl_queue_pop(&d->queue, &it, owed ? 0 : timeout);
        pthread_mutex_lock(&d->lock);
        uint64_t t0 = tl_clock_ns();
        bool took_frame = false;
        if (!got && owed)
            tl_scan_releases(d, TL_RELEASE_OLDEST);
        while (got) {
            uint64_t taken = tl_clock_ns();
            tl_hist_add(&d->stats.latency[TL_LAT_QUEUE], (taken - it.t_recv_mono) / 1e9);
            /* a frame, or the row band that completed one: a band alone is not a frame;
             * with more behind it, a short frame's filter may wait for a batch */
            d->scan.backlog = tl_queue_depth(&d->queue) > 0;
            if (tl_scan_apply(d, &it)) {
                tl_pace_frame(&w->pace, it.t_recv_mono, taken);
                took_frame = true;
            }
            if (it.type == TL_MSG_SCAN) /* the engine copied its matrices */
                tl_proto_scan_free(&it.scan);
            zmq_msg_close(&it.payload); /* the pixels are in the engine now */
            zmq_msg_init(&it.payload);
            tl_scan_releases(d, TL_RELEASE_NOWAIT);
            got = tl_clock_ns() - t0 < TL_WORKER_BATCH_NS && !atomic_load(&d->worker_stop) &&
                  tl_queue_pop(&d->queue, &it, 0);
        }
        d->scan.backlog = false;
        tl_scan_flush(d); /* the backlog is applied: no frame waits for a batch */
        tl_scan_producer_check(d);
        tl_scan_bands_check(d);
        tl_tuning_turn(d); /* never waits for a timing */
        tl_pace_turn(&w->pace, took_frame, tl_clock_ns());
        wake = publish_due(d);
        tl_scan_releases(d, TL_RELEASE_NOWAIT);
        owed = tl_ipc_frames_waiting(&d->ipc, NULL);
        pthread_mutex_unlock(&d->lock);
    }
    zmq_msg_close(&it.payload);
    return NULL;
}

/* After stop: apply what is still queued, until the deadline. */
static void drain(tl_daemon *d, uint64_t deadline)
{
    tl_item it;
    zmq_msg_init(&it.payload);
    while (tl_clock_ns() < deadline && tl_queue_pop(&d->queue, &it, 0) == 1) {
        pthread_mutex_lock(&d->lock);
        tl_scan_apply(d, &it);
        pthread_mutex_unlock(&d->lock);
        if (it.type == TL_MSG_SCAN) /* the engine copied its matrices */
            tl_proto_scan_free(&it.scan);
        zmq_msg_close(&it.payload);
        zmq_msg_init(&it.payload);
    }
    pthread_mutex_lock(&d->lock);
    d->scratch.pace = (tl_pace){0}; /* no stream any more: everything due */
    tl_pace_turn(&d->scratch.pace, false, tl_clock_ns());
    publish_due(d);
    pthread_mutex_unlock(&d->lock);
    zmq_msg_close(&it.payload);
}

int tl_worker_start(tl_daemon *d)
{
    /* per-turn scratch, sized once: the frame path allocates nothing */
    tl_worker_scratch *w = &d->scratch;
    w->cap = d->cfg.slices_max;
    w->due = calloc((size_t)w->cap, sizeof *w->due);
    w->engine_ids = calloc((size_t)w->cap, sizeof *w->engine_ids);
    w->outs = calloc((size_t)w->cap, sizeof *w->outs);
    w->info = calloc((size_t)w->cap, sizeof *w->info);
    w->residual = calloc(TL_SLICE_ITER_STEP_MAX, sizeof *w->residual);
    w->stack_ids = calloc(TL_SLICE_ITER_PLANES_MAX, sizeof *w->stack_ids);
    w->stack_outs = calloc(TL_SLICE_ITER_PLANES_MAX, sizeof *w->stack_outs);
    w->stack_info = calloc(TL_SLICE_BOX_PLANES_MAX, sizeof *w->stack_info);
    w->pace = (tl_pace){0};
    tl_ipc_frames_init(&d->ipc, d->zctx, &d->stats);
    if (!w->due || !w->engine_ids || !w->outs || !w->info || !w->residual || !w->stack_ids ||
        !w->stack_outs || !w->stack_info || tl_tuning_init(d) != 0)
        return -1;
    atomic_store(&d->worker_stop, false);
    atomic_store(&d->worker_beat, tl_clock_ns());
    return pthread_create(&d->worker_thread, NULL, run, d) == 0 ? 0 : -1;
}

void tl_worker_stop(tl_daemon *d, uint64_t deadline_ns)
{
    atomic_store(&d->worker_stop, true);
    tl_queue_wake(&d->queue);
    pthread_join(d->worker_thread, NULL);
    drain(d, deadline_ns);
    pthread_mutex_lock(&d->lock);
    tl_scan_releases(d, TL_RELEASE_ALL); /* the GPU reads no mapping when they close */
    tl_ipc_frames_destroy(&d->ipc);      /* its socket goes before the context */
    pthread_mutex_unlock(&d->lock);
    tl_worker_scratch *w = &d->scratch;
    free(w->due);
    free(w->engine_ids);
    free(w->outs);
    free(w->info);
    free(w->residual);
    free(w->stack_ids);
    free(w->stack_outs);
    free(w->stack_info);
    tl_tuning_destroy(d);
}

void tl_worker_poke(tl_daemon *d)
{
    tl_queue_wake(&d->queue);
}
