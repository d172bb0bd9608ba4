/* scan.c — what a scan, a frame and an end do to the engine (worker thread, lock held).
 *
 * A scan message (re)creates the engine from the scan's shape and geometry and the
 * daemon's configuration; every registered slice is added to the new engine. A scan that
 * cannot be served (an unknown filter, no GPU or memory for the window, what the engine
 * cannot do in cone beam) is refused loudly: logged with the engine's reason, counted,
 * kept in status, and its frames are then rejected as belonging to no scan — never
 * reconstructed by something else. A cone-beam engine spans one GPU (the first of
 * daemon.gpus), so a scan is not refused for a configuration made for parallel beam.
 * Frames are checked against the scan and submitted; every refusal has a counted reason.
 */
#include <config.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "daemon/core/daemon.h"
#include "gpu/geometry/cone.h"
#include "daemon/base/log.h"

_Static_assert(TL_SETTINGS_MAX_GPUS == TL_ENGINE_MAX_DEVICES,
               "daemon.gpus holds what an engine spans");

static void count_reject(tl_daemon *d, tl_reject why, uint64_t series, uint64_t index,
                         const char *detail)
{
    tl_stats_count(&d->stats.rejected[why]);
    uint64_t suppressed;
    if (tl_log_enabled(TL_LOG_WARN) && tl_ratelimit_allow(&d->reject_rl[why], 5.0, 5, &suppressed))
        tl_log(TL_LOG_WARN, "frame_rejected",
               "reason=%s series=%llu index=%llu detail=%s suppressed=%llu", tl_reject_name(why),
               (unsigned long long)series, (unsigned long long)index, tl_logq(detail),
               (unsigned long long)suppressed);
}

/* A frame sent in row bands, dropped before all its bands came (bands.h): counted, logged. */
static void band_frame_dropped(void *ctx, const tl_proto_frame *f, uint32_t rows_in,
                               const char *why)
{
    char detail[256];
    snprintf(detail, sizeof detail, "%s; %u of its %u rows came", why, rows_in, f->rows);
    count_reject(ctx, TL_REJ_INCOMPLETE, f->series, f->index, detail);
}

void tl_scan_bands_init(tl_daemon *d)
{
    tl_bands_init(&d->bands, d->cfg.ingest_band_frames, d->host_memory, band_frame_dropped, d);
}

void tl_scan_close(tl_daemon *d)
{
    tl_bands_clear(&d->bands, "the scan was closed first");
    tl_scan *s = &d->scan;
    tl_engine_destroy(s->engine); /* waits for its GPU work: no read of a producer's */
    s->engine = NULL;             /* memory is in flight when the mappings close */
    s->open = false;
    tl_ipc_frames_close(&d->ipc);
    tl_tuning_forget(d); /* kernel choices belong to the engine */
    for (int i = 0; i < d->slices.n; i++) {
        d->slices.v[i].engine_id = -1;
        d->slices.v[i].box.planes = 0;
        d->slices.v[i].tracked = false;
    }
}

static tl_dtype engine_dtype(tl_proto_dtype t)
{
    switch (t) {
        case TL_PROTO_U8: return TL_DTYPE_U8;
        case TL_PROTO_U16: return TL_DTYPE_U16;
        case TL_PROTO_U32: return TL_DTYPE_U32;
        default: return TL_DTYPE_F32;
    }
}

void tl_scan_detach(tl_daemon *d, tl_slice *sl)
{
    if (sl->engine_id < 0)
        return;
    if (sl->box.on)
        for (uint32_t k = 0; k < sl->box.planes; k++)
            tl_engine_remove_slice(d->scan.engine, sl->box.ids[k]);
    else
        tl_engine_remove_slice(d->scan.engine, sl->engine_id);
    sl->engine_id = -1;
    sl->box.planes = 0;
    sl->tracked = false;
}

/* A box's planes into the engine (tl_slice_box): each inside the volume, at most
 * TL_SLICE_BOX_PLANES_MAX of them, their image under 2 GiB; 0 or -1 with err. */
static int attach_box(tl_daemon *d, tl_slice *sl, char *err, size_t errlen)
{
    tl_engine *e = d->scan.engine;
    const tl_engine_config *ec = tl_engine_get_config(e);
    tl_slice_spec plane;
    uint32_t n;
    tl_slice_box_plane(sl, ec->rows, ec->cols, 0, &plane, &n);
    const double bytes = (double)n * plane.height * plane.width * sizeof(float);
    if (n > TL_SLICE_BOX_PLANES_MAX || bytes >= 2147483648.0) {
        snprintf(err, errlen,
                 "a box of %u x %u x %u voxels: at most %d planes and 2 GiB (give \"size\")", n,
                 plane.height, plane.width, TL_SLICE_BOX_PLANES_MAX);
        return -1;
    }
    if (!sl->box.ids && !(sl->box.ids = malloc(TL_SLICE_BOX_PLANES_MAX * sizeof *sl->box.ids))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    sl->box.planes = 0;
    for (uint32_t k = 0; k < n; k++) {
        tl_slice_box_plane(sl, ec->rows, ec->cols, k, &plane, &n);
        const char *why = !tl_slice_inside(&plane, ec->rows, ec->cols)
                              ? "lies outside the volume"
                          : tl_engine_add_slice(e, &plane, &sl->box.ids[k]) != TL_OK
                              ? tl_engine_last_error(e)
                              : NULL;
        if (why) {
            snprintf(err, errlen, "the box's plane %u of %u (z %.6g, %u rows, %u columns): %s", k,
                     n, plane.orientation[8], ec->rows, ec->cols, why);
            for (uint32_t i = 0; i < k; i++)
                tl_engine_remove_slice(e, sl->box.ids[i]);
            return -1;
        }
    }
    sl->box.planes = n;
    sl->height = n * plane.height;
    sl->width = plane.width;
    sl->engine_id = sl->box.ids[0];
    sl->tracked = false;
    tl_slice_box_plane(sl, ec->rows, ec->cols, 0, &plane, &n); /* the header's: plane 0 */
    tl_slice_plane(&plane, ec->rows, sl->orientation);
    sl->want_param = true;
    return 0;
}

int tl_scan_attach(tl_daemon *d, tl_slice *sl, char *err, size_t errlen)
{
    tl_scan *s = &d->scan;
    if (!s->open)
        return 0;
    if (sl->box.on)
        return attach_box(d, sl, err, errlen);
    const tl_engine_config *ec = tl_engine_get_config(s->engine);
    tl_slice_spec sp = sl->spec;
    if (sp.width == 0) /* default size: the detector's width; ortho slices its height */
        sp.width = ec->cols;
    if (sp.height == 0)
        sp.height = sp.kind == TL_SLICE_ORTHO && sp.axis != TL_AXIS_Z ? ec->rows : ec->cols;
    if (!tl_slice_inside(&sp, ec->rows, ec->cols)) { /* defined before this scan */
        snprintf(err, errlen, "the slice lies outside the volume (%u rows, %u columns)", ec->rows,
                 ec->cols);
        return -1;
    }
    int id;
    if (tl_engine_add_slice(s->engine, &sp, &id) != TL_OK) {
        snprintf(err, errlen, "%s", tl_engine_last_error(s->engine));
        return -1;
    }
    if (sl->it.on && sl->it.planes > 1 && ec->geometry != TL_GEOMETRY_CONE) {
        snprintf(err, errlen,
                 "iterative \"planes\" %u: parallel beam's slices are problems of their own "
                 "(planes 1); stacks are cone beam's",
                 sl->it.planes);
        tl_engine_remove_slice(s->engine, id);
        return -1;
    }
    if (sl->it.on && tl_engine_can_iterate(s->engine, id) != TL_OK) {
        snprintf(err, errlen, "%s%s", tl_engine_last_error(s->engine),
                 ec->filter != TL_FILTER_NONE && !ec->keep_measurements
                     ? " (engine.iterative = true keeps them)"
                     : "");
        tl_engine_remove_slice(s->engine, id);
        return -1;
    }
    sl->height = sp.height;
    sl->width = sp.width;
    if (!tl_slice_iter_prepare(sl)) {
        snprintf(err, errlen, "no memory for the iterative slice's %u x %u image", sp.height,
                 sp.width);
        tl_engine_remove_slice(s->engine, id);
        return -1;
    }
    sl->engine_id = id;
    sl->tracked = false;
    tl_slice_plane(&sp, ec->rows, sl->orientation);
    sl->want_param = true; /* show the new geometry as soon as there is data */
    return 0;
}

/* The correction stages of the frames the engine has finished since the last call, into
 * their latency histograms (never waits; the engine keeps the last 64 frames' times). */
static void record_stage_times(tl_daemon *d, tl_engine *e)
{
    static const tl_latency lat[TL_STAGE_COUNT] = {[TL_STAGE_DEZINGER] = TL_LAT_DEZINGER,
                                                   [TL_STAGE_PAGANIN] = TL_LAT_PAGANIN,
                                                   [TL_STAGE_RINGS] = TL_LAT_RINGS};
    tl_stage_time t[2 * TL_STAGE_COUNT];
    size_t n = 0;
    if (tl_engine_stage_times(e, t, sizeof t / sizeof *t, &n) != TL_OK)
        return; /* a failing device shows in the frames' own errors */
    for (size_t i = 0; i < n; i++)
        tl_hist_add(&d->stats.latency[lat[t[i].stage]], t[i].seconds);
}

/* Cone beam (PROTOCOL.md §8.1.1): the trajectory into ec.cone, the principal column into
 * ec.center (from detector_offset u when the scan gives no center), and the devices: the
 * engine does not split cone-beam rows across GPUs (a row's voxels need other rows), so
 * one, unless it keeps the measurements on CUDA: then its iterative stacks are split over
 * daemon.gpus (FDK on the first; backends.c).
 * Given matrices are normalised in place (the item owns them and the engine copies them),
 * as `tomolive recon --matrices` does, so one that is no camera refuses the scan with
 * cone.h's message, naming it; false with why then. */
static bool cone_config(tl_proto_scan *m, tl_engine_config *ec, char *why, size_t why_len)
{
    ec->geometry = TL_GEOMETRY_CONE; /* what the engine cannot do it refuses, named */
    ec->cone = (tl_cone_config){.source_origin = m->source_origin,
                                .source_detector = m->source_detector,
                                .pixel_u = m->pixel_size[0],
                                .pixel_v = m->pixel_size[1],
                                .offset_v = m->has_detector_offset ? m->detector_offset[1] : 0,
                                .scan_start = m->has_short_scan ? m->short_scan[0] : 0,
                                .scan_range = m->has_short_scan ? m->short_scan[1] : 0};
    if (!m->has_center && m->has_detector_offset)
        ec->center = (m->cols - 1) / 2.0 + m->detector_offset[0];
    if (ec->link) { /* a cone-beam voxel reads every row: no rows to split over hosts */
        tl_log(TL_LOG_INFO, "cone_one_rank", "series=%llu ranks=%d device=%d",
               (unsigned long long)m->series, ec->link->size, ec->devices[0]);
        ec->link = NULL;
        ec->ndevices = 1;
    }
    const bool share = ec->keep_measurements && ec->backend != TL_BACKEND_CPU &&
                       tl_backend_available(TL_BACKEND_CUDA, NULL, 0);
    if (ec->ndevices > 1 && share)
        tl_log(TL_LOG_INFO, "cone_iterative_gpus", "series=%llu gpus=%u fdk_device=%d",
               (unsigned long long)m->series, ec->ndevices, ec->devices[0]);
    else if (ec->ndevices > 1) {
        tl_log(TL_LOG_INFO, "cone_one_gpu", "series=%llu gpus=%u device=%d reason=%s",
               (unsigned long long)m->series, ec->ndevices, ec->devices[0],
               tl_logq("cone beam is reconstructed on one GPU, the first of daemon.gpus"));
        ec->ndevices = 1;
    }
    for (uint32_t i = 0; i < m->nmatrices; i++) {
        tl_errbuf eb;
        if (tl_cone_matrix_prepare(m->matrices[i], &eb) != TL_OK) {
            snprintf(why, why_len, "cone geometry: matrix %u (projection %llu): %.400s", i,
                     (unsigned long long)(m->first_index + i), eb.msg);
            return false;
        }
    }
    ec->cone.matrices = (const double(*)[12])m->matrices;
    ec->cone.nmatrices = m->nmatrices;
    return true;
}

static void open_scan(tl_daemon *d, tl_item *it)
{
    tl_scan *s = &d->scan;
    tl_proto_scan *m = &it->scan; /* cone_config normalises its matrices */
    const tl_settings *c = &d->cfg;
    tl_engine_config ec;
    tl_engine_config_init(&ec, m->rows, m->cols, m->window);
    char why[512] = "";
    tl_filter filter;
    if (!tl_backend_parse(tl_settings_enum_name("daemon.backend", c->backend), &ec.backend) ||
        !tl_filter_parse(tl_settings_enum_name("engine.filter", c->filter), &ec.filter) ||
        !tl_quality_parse(tl_settings_enum_name("engine.quality", c->quality), &ec.quality))
        snprintf(why, sizeof why, "configuration names an unknown backend, filter or quality");
    ec.weights = c->weights == TL_SETTINGS_WEIGHTS_ANGLES ? TL_WEIGHTS_ANGLES : TL_WEIGHTS_UNIFORM;
    ec.dtype = engine_dtype(m->dtype);
    ec.first_index = m->first_index;
    ec.already_linear = m->already_linear;
    ec.threads = c->threads;
    ec.device = c->device;
    /* daemon.gpus: the detector rows split across several GPUs ("all": every visible one) */
    int gpus[TL_SETTINGS_MAX_GPUS], ngpus = 0;
    if (!why[0] && tl_settings_gpus(c, gpus, &ngpus, why, sizeof why) == 0 && ngpus < 0) {
        ngpus = tl_backend_device_count(ec.backend, why, sizeof why);
        if (ngpus > TL_SETTINGS_MAX_GPUS)
            ngpus = TL_SETTINGS_MAX_GPUS;
        for (int i = 0; i < ngpus; i++)
            gpus[i] = i;
        why[0] = 0; /* no device: the engine says so, with its own message */
    }
    ec.ndevices = ngpus > 0 ? (uint32_t)ngpus : 0;
    for (uint32_t i = 0; i < ec.ndevices; i++)
        ec.devices[i] = gpus[i];
    if (d->link) { /* --mpi: a part of the rows per rank, this rank's on its first GPU */
        ec.devices[0] = ec.ndevices ? ec.devices[0] : ec.device;
        ec.ndevices = (uint32_t)d->link->size;
        ec.link = d->link;
    }
    if (m->has_center)
        ec.center = m->center;
    if (it->filter[0]) {
        if (tl_filter_parse(it->filter, &filter))
            ec.filter = filter;
        else
            snprintf(why, sizeof why, "unknown filter \"%s\"", it->filter);
    }
    ec.half_acquisition = m->half_acquisition;
    /* iterative slices' measurements, where an engine can iterate (iterate.c) */
    ec.keep_measurements = c->engine_iterative && !ec.half_acquisition;
    char cwhy[sizeof why] = "";
    if (m->geometry == TL_PROTO_CONE && !cone_config(m, &ec, cwhy, sizeof cwhy) && !why[0])
        snprintf(why, sizeof why, "%s", cwhy);
    ec.center_estimate = m->has_auto_center;
    ec.center_auto = m->auto_center;
    /* per-frame corrections: the engine checks the values and names a bad one */
    ec.corr.dezinger = m->dezinger;
    if (m->has_paganin)
        ec.corr = (tl_corrections){.dezinger = m->dezinger,
                                   .energy_kev = m->paganin[0],
                                   .distance_m = m->paganin[1],
                                   .pixel_um = m->paganin[2],
                                   .delta_beta = m->paganin[3]};
    if (it->rings[0] && !tl_rings_parse(it->rings, &ec.corr) && !why[0])
        snprintf(why, sizeof why,
                 "unknown ring removal \"%s\" (none, vo[:SIZE[,TOL]], fw[:LEVEL[,TOL]])",
                 it->rings);

    /* The old scan goes first: its window may hold the memory the new one needs. */
    tl_scan_close(d);
    s->finished = false;
    s->series = m->series;
    s->msg = *m;
    s->msg.matrices = NULL; /* the worker frees the item's: status reports nmatrices only */
    memcpy(s->filter, it->filter, sizeof s->filter);
    s->was_complete = false;
    s->projections = 0;
    s->detector = it->detector;
    s->masked_filled = 0;
    char rerr[384];
    /* a release endpoint the configuration does not allow refuses the scan (ingest.c) */
    if (!why[0] && it->release_refused[0])
        snprintf(why, sizeof why, "%s", it->release_refused);
    /* With CURVE on the ingest socket, the release socket is a CURVE client with the
     * daemon's keys of the sender's key: only the producer that sent the scan takes them. */
    const tl_zcert *self =
        d->auth.curve && !d->auth.plain[TL_AUTH_INGEST] ? &d->auth.server : NULL;
    /* opened even for a scan about to be refused: its GPU frames are still answered */
    if (tl_ipc_frames_open(&d->ipc, m->series, it->release, self, it->producer_key, rerr,
                           sizeof rerr) != 0)
        tl_log(TL_LOG_WARN, "release_unavailable", "series=%llu error=%s",
               (unsigned long long)m->series, tl_logq(rerr));
    tl_engine *e = NULL;
    if (!why[0] && tl_engine_create(&ec, &e) != TL_OK)
        snprintf(why, sizeof why, "%s", tl_engine_last_error(NULL));
    if (why[0]) {
        tl_stats_count(&d->stats.rejected[TL_REJ_SCAN]);
        snprintf(s->last_error, sizeof s->last_error, "series %llu: %s",
                 (unsigned long long)m->series, why);
        tl_log(TL_LOG_ERROR, "scan_refused", "series=%llu rows=%u cols=%u window=%u error=%s",
               (unsigned long long)m->series, m->rows, m->cols, m->window, tl_logq(why));
        return;
    }
    s->engine = e;
    s->open = true;
    s->last_error[0] = 0;
    tl_stats_count(&d->stats.scans);
    for (int i = 0; i < d->slices.n; i++) {
        tl_slice *sl = &d->slices.v[i];
        char err[256];
        sl->pending = 0;
        sl->dirty = false;
        sl->want_final = sl->want_complete = false;
        if (tl_scan_attach(d, sl, err, sizeof err) != 0)
            tl_log(TL_LOG_WARN, "slice_not_served", "id=%s series=%llu error=%s", tl_logq(sl->id),
                   (unsigned long long)m->series, tl_logq(err));
    }
    tl_engine_state st;
    tl_engine_get_state(e, &st);
    s->gpu_frames = strcmp(st.backend, "cuda") == 0;
    tl_log(
        TL_LOG_INFO, "scan_started",
        "series=%llu geometry=%s rows=%u cols=%u dtype=%s window=%u darks=%u flats=%u filter=%s "
        "center=%.3f backend=%s device=%s memory_mb=%.1f",
        (unsigned long long)m->series, tl_proto_geometry_name(m->geometry), m->rows, m->cols,
        tl_proto_dtype_name(m->dtype), m->window, m->darks, m->flats, tl_filter_name(ec.filter),
        ec.center, st.backend, tl_logq(st.device_name), st.memory_bytes / 1048576.0);
}

/* A frame not used: counted, logged, and for a frame in GPU memory the protocol code its
 * release carries (*code, *reason). */
#define REJECT_NORETURN(why, pcode, detail)                    \
    do {                                                       \
        count_reject(d, (why), f->series, f->index, (detail)); \
        *code = (pcode);                                       \
        snprintf(reason, reason_len, "%s", (detail));          \
    } while (0)
#define REJECT(why, pcode, detail)           \
    do {                                     \
        REJECT_NORETURN(why, pcode, detail); \
        return;                              \
    } while (0)

/* Whether frame f (or a band of it) belongs to the open scan: else counted, logged, and
 * *code, *reason say why. */
static bool fits_scan(tl_daemon *d, const tl_proto_frame *f, tl_proto_err *code, char *reason,
                      size_t reason_len)
{
    const tl_scan *s = &d->scan;
    *code = TL_PROTO_OK;
    if (!s->open)
        REJECT_NORETURN(TL_REJ_NO_SCAN, TL_PROTO_E_STATE, "no scan is open");
    else if (f->series != s->series)
        REJECT_NORETURN(TL_REJ_SERIES, TL_PROTO_E_NOT_FOUND, "frame of another series");
    else if (s->finished)
        REJECT_NORETURN(TL_REJ_FINISHED, TL_PROTO_E_STATE, "the series has ended");
    else if (f->rows != s->msg.rows || f->cols != s->msg.cols || f->dtype != s->msg.dtype)
        REJECT_NORETURN(TL_REJ_SHAPE, TL_PROTO_E_RANGE, "shape or dtype differs from the scan");
    return *code == TL_PROTO_OK;
}

/* Submits frame it->frame, whose pixels are at data (a band-assembled frame's: in host
 * memory of the engine's backend, pinned). */
static void submit_frame(tl_daemon *d, tl_item *it, const void *data, bool pinned,
                         tl_proto_err *code, char *reason, size_t reason_len)
{
    tl_scan *s = &d->scan;
    tl_proto_frame *f = &it->frame;
    if (!fits_scan(d, f, code, reason, reason_len))
        return;
    tl_frame fr = {
        .kind = f->kind == TL_PROTO_DARK   ? TL_FRAME_DARK
                : f->kind == TL_PROTO_FLAT ? TL_FRAME_FLAT
                                           : TL_FRAME_PROJ,
        .index = f->index,
        .center_offset = f->has_center_offset ? f->center_offset : 0.0,
        .t_acq = f->has_t_acq ? f->t_acq : 0,
        .t_recv = it->t_recv,
        .dtype = engine_dtype(f->dtype),
        .rows = f->rows,
        .cols = f->cols,
        .data = data,
        .pinned = pinned,
        .more = s->backlog,
    };
    if (fr.kind == TL_FRAME_PROJ) {
        if (f->has_angle)
            fr.angle = f->angle;
        else if (s->msg.has_angles)
            fr.angle = s->msg.angle_start + (double)f->index * s->msg.angle_step;
        else
            REJECT(TL_REJ_ANGLE, TL_PROTO_E_MISSING,
                   "projection without an angle, and the scan has no schedule");
    }
    if (f->has_ipc) { /* read in place from the producer's GPU memory */
        char why[512];
        if (!s->gpu_frames)
            REJECT(TL_REJ_GPU_MEMORY, TL_PROTO_E_UNSUPPORTED,
                   "frames in GPU memory need the CUDA backend (daemon.backend)");
        tl_proto_err e = tl_ipc_frames_map(&d->ipc, f, it->ipc_handle, it->ipc_device, &fr.data,
                                           why, sizeof why);
        if (e != TL_PROTO_OK)
            REJECT(TL_REJ_GPU_MEMORY, e, why);
        fr.memory = TL_MEMORY_DEVICE;
        fr.read_later = true; /* released by apply_frame once read: the worker never waits */
        fr.pitch = f->ipc.pitch;
    }
    uint64_t t0 = tl_clock_ns();
    double center = tl_engine_get_config(s->engine)->center;
    tl_status st = tl_engine_submit(s->engine, &fr);
    if (tl_engine_get_config(s->engine)->center != center) { /* auto_center moved the axis */
        tl_log(TL_LOG_INFO, "center_auto", "center=%.4f was=%.4f",
               tl_engine_get_config(s->engine)->center, center);
        for (int i = 0; i < d->slices.n; i++)
            d->slices.v[i].want_param = true;
    }
    tl_hist_add(&d->stats.latency[TL_LAT_SUBMIT], (tl_clock_ns() - t0) / 1e9);
    record_stage_times(d, s->engine);
    if (st != TL_OK) {
        tl_reject why = st == TL_ESTALE       ? TL_REJ_STALE
                        : st == TL_EDUPLICATE ? TL_REJ_DUPLICATE
                        : st == TL_ESHAPE     ? TL_REJ_SHAPE
                                              : TL_REJ_ENGINE;
        tl_proto_err pc = st == TL_ESTALE       ? TL_PROTO_E_RANGE
                          : st == TL_EDUPLICATE ? TL_PROTO_E_STATE
                          : st == TL_ESHAPE     ? TL_PROTO_E_RANGE
                                                : TL_PROTO_E_INTERNAL;
        REJECT(why, pc, tl_engine_last_error(s->engine));
    }
    tl_stats_count(&d->stats.accepted[fr.kind]);
    s->masked_filled += it->masked_filled;
    if (f->has_ipc)
        tl_stats_count(&d->stats.ipc_frames);
    if (fr.kind != TL_FRAME_PROJ)
        return;
    s->projections++;
    tl_engine_state es;
    tl_engine_get_state(s->engine, &es);
    bool complete = es.held == es.window;
    for (int i = 0; i < d->slices.n; i++) {
        tl_slice_touch(&d->slices.v[i]);
        if (complete && !s->was_complete && d->slices.v[i].policy.on_complete)
            d->slices.v[i].want_complete = true;
    }
    s->was_complete = complete;
}
#undef REJECT
#undef REJECT_NORETURN

/* Sends the releases of frames in GPU memory that the engine has finished reading, after
 * first waiting until it has read frame wait_for (0: no wait). An engine that fails here
 * has a broken GPU; its producer is then let go rather than left waiting forever. */
static void release_read(tl_daemon *d, uint64_t wait_for)
{
    uint64_t done = UINT64_MAX;
    if (d->scan.engine && tl_engine_frames_done(d->scan.engine, wait_for, &done) != TL_OK) {
        tl_log(TL_LOG_ERROR, "gpu_read_failed", "series=%llu error=%s",
               (unsigned long long)d->ipc.series, tl_logq(tl_engine_last_error(d->scan.engine)));
        done = UINT64_MAX;
    }
    tl_ipc_frames_flush(&d->ipc, done);
}

void tl_scan_flush(tl_daemon *d)
{
    if (d->scan.engine && tl_engine_flush(d->scan.engine) != TL_OK)
        tl_log(TL_LOG_ERROR, "engine_flush_failed", "series=%llu error=%s",
               (unsigned long long)d->scan.series, tl_logq(tl_engine_last_error(d->scan.engine)));
}

void tl_scan_releases(tl_daemon *d, tl_release_wait wait)
{
    uint64_t oldest;
    if (!tl_ipc_frames_waiting(&d->ipc, &oldest))
        return;
    if (wait == TL_RELEASE_ALL)
        oldest = d->scan.engine ? tl_engine_frames_queued(d->scan.engine) : 0;
    release_read(d, wait == TL_RELEASE_NOWAIT ? 0 : oldest);
}

/* A row band (bands.h): checked against the scan, copied into its frame's buffer, and the
 * frame submitted from there once complete. Returns whether a frame was. */
static bool apply_band(tl_daemon *d, tl_item *it)
{
    tl_proto_frame *f = &it->frame;
    tl_proto_err code;
    char reason[512] = "";
    if (!fits_scan(d, f, &code, reason, sizeof reason))
        return false;
    f->payload = zmq_msg_data(&it->payload); /* the part travelled in the item */
    f->payload_len = zmq_msg_size(&it->payload);
    tl_bands_frame *done;
    int rc = tl_bands_add(&d->bands, f, it->t_recv, it->t_recv_mono, &done, reason, sizeof reason);
    if (rc < 0)
        count_reject(d, TL_REJ_BAND, f->series, f->index, reason);
    if (rc <= 0)
        return false;
    it->frame = done->frame; /* the whole frame, as its first band described it */
    it->t_recv = done->t_recv;
    submit_frame(d, it, done->data, true, &code, reason, sizeof reason);
    tl_bands_free(&d->bands, done);
    return true;
}

void tl_scan_bands_check(tl_daemon *d)
{
    if (tl_bands_pending(&d->bands) == 0)
        return;
    uint64_t timeout = (uint64_t)d->cfg.ingest_band_timeout_ms * 1000000ull;
    tl_bands_expire(&d->bands, tl_clock_ns(), timeout);
}

static bool apply_frame(tl_daemon *d, tl_item *it)
{
    tl_proto_err code;
    char reason[512] = "";
    if (it->frame.has_band)
        return apply_band(d, it);
    bool ipc = it->frame.has_ipc;
    if (ipc && tl_ipc_frames_full(&d->ipc))
        tl_scan_releases(d, TL_RELEASE_OLDEST); /* room for this frame's release */
    submit_frame(d, it, zmq_msg_data(&it->payload), false, &code, reason, sizeof reason);
    if (!ipc)
        return true;
    if (code == TL_PROTO_OK) /* free once the GPU has read it */
        tl_ipc_frames_defer(&d->ipc, &it->frame, tl_engine_frames_queued(d->scan.engine));
    else /* never read: free now */
        tl_ipc_frames_release(&d->ipc, &it->frame, code, reason);
    return true;
}

/* The series is over (its end arrived, or its producer went away): slices get their final
 * version, later frames are refused, and a producer's GPU memory is closed, since every
 * frame of the series before this point has been read. */
static void finish(tl_daemon *d, const char *why)
{
    tl_scan *s = &d->scan;
    if (s->finished)
        return;
    s->finished = true;
    tl_scan_releases(d, TL_RELEASE_ALL); /* nothing reads a mapping after this */
    tl_ipc_frames_close(&d->ipc);
    tl_bands_clear(&d->bands, "the series ended first");
    for (int i = 0; i < d->slices.n; i++)
        d->slices.v[i].want_final = true;
    tl_engine_state st;
    tl_engine_get_state(s->engine, &st);
    tl_log(TL_LOG_INFO, "scan_ended",
           "series=%llu reason=%s projections=%llu held=%u missing=%u stale=%llu duplicate=%llu",
           (unsigned long long)s->series, why, (unsigned long long)s->projections, st.held,
           st.missing, (unsigned long long)st.stale, (unsigned long long)st.duplicate);
}

static void end_scan(tl_daemon *d, tl_item *it)
{
    tl_scan *s = &d->scan;
    if (!s->open || it->end.series != s->series) {
        count_reject(d, s->open ? TL_REJ_SERIES : TL_REJ_NO_SCAN, it->end.series, 0,
                     "end of an unknown series");
        return;
    }
    finish(d, "end");
}

void tl_scan_producer_check(tl_daemon *d)
{
    if (!tl_ipc_frames_gone(&d->ipc))
        return;
    tl_stats_count(&d->stats.ipc_producers_lost);
    tl_log(TL_LOG_WARN, "producer_gone", "series=%llu endpoint=%s buffers=%d",
           (unsigned long long)d->ipc.series, tl_logq(d->ipc.endpoint),
           tl_ipc_frames_open_count(&d->ipc));
    if (d->scan.open && d->scan.series == d->ipc.series)
        finish(d, "producer_gone"); /* closes the mappings too */
    else
        tl_ipc_frames_close(&d->ipc);
}

bool tl_scan_apply(tl_daemon *d, tl_item *it)
{
    switch (it->type) {
        case TL_MSG_SCAN: open_scan(d, it); return false;
        case TL_MSG_FRAME: return apply_frame(d, it);
        case TL_MSG_END: end_scan(d, it); return false;
        default: return false;
    }
}
