/* commands.c — the control commands (protocol/PROTOCOL.md, "Control commands").
 *
 * Each handler checks its arguments completely before changing anything, so a refused
 * request leaves the daemon as it was, and answers with exactly one reply: a result, or an
 * error whose code says what kind of problem it was and whose message names the argument.
 * Handlers run on the loop thread and take the daemon lock only around the engine and the
 * slice registry; tune, which takes seconds, is handed to the worker and answered later.
 */
#include <config.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "daemon/core/daemon.h"
#include "daemon/serve/commands.h"

typedef struct {
    tl_daemon *d;
    uint64_t id;
    const msgpack_object *args;
    msgpack_packer *pk;
    bool can_defer; /* the caller can send the reply later (the control socket) */
    bool deferred;  /* the worker answers: nothing was packed */
} request;

static void fail(request *r, tl_proto_err code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(request *r, tl_proto_err code, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tl_stats_count(&r->d->stats.request_errors);
    tl_proto_pack_rep_error(r->pk, r->id, code, msg);
}

/* A getter failed: reply with its error (the argument problem it describes). */
static void fail_arg(request *r, const tl_proto_error *e)
{
    fail(r, e->code == TL_PROTO_E_MISSING ? TL_PROTO_E_BAD_ARG : e->code, "%s", e->message);
}

static void pack_key(msgpack_packer *pk, const char *k)
{
    tl_proto_pack_cstr(pk, k);
}

static void pack_floats(msgpack_packer *pk, const float *v, int n)
{
    msgpack_pack_array(pk, (size_t)n);
    for (int i = 0; i < n; i++)
        msgpack_pack_float(pk, v[i]);
}

static void pack_dims(msgpack_packer *pk, uint32_t a, uint32_t b)
{
    msgpack_pack_array(pk, 2);
    msgpack_pack_uint32(pk, a);
    msgpack_pack_uint32(pk, b);
}

tl_update_policy tl_default_policy(const tl_settings *c)
{
    return (tl_update_policy){(uint32_t)c->update_every, c->update_on_complete,
                              c->update_max_rate};
}

static const char *kind_name(const tl_slice_spec *s, const tl_slice_box *box)
{
    return box->on                   ? "box"
           : s->kind == TL_SLICE_ROW   ? "row"
           : s->kind == TL_SLICE_ORTHO ? "ortho"
                                       : "plane";
}

/* A box's geometry as set_slice and list_slices describe it: the planes (null before a
 * scan when they come from its detector), the centre (null: the detector's middle). */
static void pack_box(const tl_slice *sl, msgpack_packer *pk)
{
    const tl_slice_box *b = &sl->box;
    pack_key(pk, "box");
    msgpack_pack_map(pk, 2);
    pack_key(pk, "planes");
    if (b->planes || b->depth)
        msgpack_pack_uint32(pk, b->planes ? b->planes : b->depth);
    else
        msgpack_pack_nil(pk);
    pack_key(pk, "center");
    if (b->has_center) {
        msgpack_pack_array(pk, 3);
        for (int i = 0; i < 3; i++)
            msgpack_pack_double(pk, b->center[i]);
    } else
        msgpack_pack_nil(pk);
}

/* An iterative slice's options and progress, as set_slice and list_slices describe them. */
static void pack_iterative(const tl_slice_iter *it, msgpack_packer *pk)
{
    const tl_iter_options *o = &it->o;
    pack_key(pk, "iterative");
    msgpack_pack_map(pk, 15);
    tl_proto_pack_kv_u64(pk, "iterations", o->iterations);
    tl_proto_pack_kv_u64(pk, "max_iterations", it->max_iterations);
    tl_proto_pack_kv_u64(pk, "subsets", o->subsets);
    tl_proto_pack_kv_double(pk, "relaxation", o->relaxation);
    tl_proto_pack_kv_bool(pk, "nonneg", o->nonneg);
    tl_proto_pack_kv_double(pk, "tv", o->tv_weight);
    tl_proto_pack_kv_u64(pk, "tv_steps", o->tv_steps);
    tl_proto_pack_kv_double(pk, "tolerance", o->tolerance);
    tl_proto_pack_kv_str(pk, "projector", tl_projector_name(o->projector));
    tl_proto_pack_kv_str(pk, "start", it->start_fbp ? "fbp" : "zero");
    tl_proto_pack_kv_u64(pk, "planes", it->planes);
    tl_proto_pack_kv_double(pk, "spacing", it->spacing);
    tl_proto_pack_kv_u64(pk, "done", it->total);
    tl_proto_pack_kv_double(pk, "residual", it->residual);
    tl_proto_pack_kv_bool(pk, "converged", it->converged);
}

/* One slice as set_slice and list_slices describe it (lock held). */
static void pack_slice(tl_daemon *d, const tl_slice *sl, msgpack_packer *pk)
{
    const tl_slice_spec *sp = &sl->spec;
    bool attached = sl->engine_id >= 0;
    msgpack_pack_map(pk, 13 + sl->it.on + sl->box.on);
    tl_proto_pack_kv_str(pk, "id", sl->id);
    tl_proto_pack_kv_str(pk, "topic", sl->topic);
    tl_proto_pack_kv_str(pk, "kind", kind_name(sp, &sl->box));
    pack_key(pk, "shape");
    if (attached)
        pack_dims(pk, sl->height, sl->width);
    else if (sp->height && sp->width && (!sl->box.on || sl->box.depth))
        pack_dims(pk, sp->height * (sl->box.on ? sl->box.depth : 1), sp->width);
    else
        msgpack_pack_nil(pk);
    pack_key(pk, "orientation");
    if (attached)
        pack_floats(pk, sl->orientation, 9);
    else
        msgpack_pack_nil(pk);
    tl_proto_pack_kv_double(pk, "scale", sp->scale);
    pack_key(pk, "update");
    msgpack_pack_map(pk, 3);
    tl_proto_pack_kv_u64(pk, "every", sl->policy.every);
    tl_proto_pack_kv_bool(pk, "on_complete", sl->policy.on_complete);
    tl_proto_pack_kv_double(pk, "max_rate", sl->policy.max_rate);
    tl_proto_pack_kv_bool(pk, "pinned", sl->pinned);
    bool tcp, shm;
    tl_proto_pack_kv_bool(pk, "wanted", tl_slice_wanted(d, sl, &tcp, &shm));
    tl_proto_pack_kv_u64(pk, "seq", sl->seq);
    tl_proto_pack_kv_str(pk, "dtype", tl_proto_dtype_name(sl->wire_dtype));
    tl_proto_pack_kv_str(pk, "compression", sl->wire_lz4 ? "lz4" : "none");
    tl_proto_pack_kv_str(pk, "method", sl->it.on ? tl_iter_method_name(sl->it.o.method) : "fbp");
    if (sl->it.on)
        pack_iterative(&sl->it, pk);
    if (sl->box.on)
        pack_box(sl, pk);
}

/* How the slice's pixels go over TCP (§10.3): "dtype" f32 (default), f16 or q16, and
 * "compression" none (default) or lz4. False after replying with an error. */
static bool parse_wire(request *r, tl_proto_dtype *dtype, bool *lz4)
{
    tl_proto_error e;
    tl_proto_str name = {NULL, 0}, comp = {NULL, 0};
    if (tl_proto_get_str(r->args, "dtype", false, &name, &e) != TL_PROTO_OK ||
        tl_proto_get_str(r->args, "compression", false, &comp, &e) != TL_PROTO_OK) {
        fail_arg(r, &e);
        return false;
    }
    *dtype = TL_PROTO_F32;
    if (name.ptr &&
        (!tl_proto_slice_dtype_parse(name.ptr, name.len, dtype) ||
         (*dtype != TL_PROTO_F32 && *dtype != TL_PROTO_F16 && *dtype != TL_PROTO_Q16))) {
        fail(r, TL_PROTO_E_DTYPE, "dtype \"%.*s\": expected f32, f16 or q16", (int)name.len,
             name.ptr);
        return false;
    }
    *lz4 = comp.ptr && comp.len == 3 && !memcmp(comp.ptr, "lz4", 3);
    if (comp.ptr && !*lz4 && !(comp.len == 4 && !memcmp(comp.ptr, "none", 4))) {
        fail(r, TL_PROTO_E_RANGE, "compression \"%.*s\": expected none or lz4", (int)comp.len,
             comp.ptr);
        return false;
    }
    return true;
}

/* ---- set_slice ---------------------------------------------------------------------------- */

/* A box's "size" [planes, height, width] and "center" [x, y, z] (both optional: the whole
 * volume) into spec (a plane's height and width) and box; false after replying. */
static bool parse_box(request *r, tl_slice_spec *spec, tl_slice_box *box)
{
    const msgpack_object *a = r->args;
    tl_proto_error e;
    uint32_t size[3] = {0, 0, 0};
    float c[3];
    box->on = true;
    box->has_center = tl_proto_map_get(a, "center") != NULL;
    if (tl_proto_get_dims(a, "size", false, size, 3, TL_PROTO_MAX_DIM, &e) != TL_PROTO_OK ||
        tl_proto_get_floats(a, "center", false, c, 3, &e) != TL_PROTO_OK) {
        fail_arg(r, &e);
        return false;
    }
    if (size[0] > TL_SLICE_BOX_PLANES_MAX ||
        (double)size[0] * size[1] * size[2] * sizeof(float) >= 2147483648.0) {
        fail(r, TL_PROTO_E_RANGE, "a box of %u x %u x %u voxels: at most %d planes and 2 GiB",
             size[0], size[1], size[2], TL_SLICE_BOX_PLANES_MAX);
        return false;
    }
    box->depth = size[0];
    for (int i = 0; i < 3; i++)
        box->center[i] = box->has_center ? c[i] : 0;
    tl_slice_spec_row(spec, 0, size[1], size[2]); /* a plane's height and width (scale: later) */
    return true;
}

/* Parses the slice description of set_slice into spec (a box's: its planes', and box);
 * false after replying with an error. */
static bool parse_spec(request *r, tl_slice_spec *spec, tl_slice_box *box)
{
    const msgpack_object *a = r->args;
    tl_proto_error e;
    tl_proto_str kind;
    if (tl_proto_get_str(a, "kind", true, &kind, &e) != TL_PROTO_OK) {
        fail_arg(r, &e);
        return false;
    }
    *box = (tl_slice_box){0};
    uint32_t size[2] = {0, 0};
    if (!tl_proto_str_eq(kind, "box") &&
        tl_proto_get_dims(a, "size", false, size, 2, TL_PROTO_MAX_DIM, &e) != TL_PROTO_OK) {
        fail_arg(r, &e);
        return false;
    }
    if (tl_proto_str_eq(kind, "box")) {
        if (!parse_box(r, spec, box))
            return false;
    } else if (tl_proto_str_eq(kind, "row")) {
        double z;
        if (tl_proto_get_double(a, "z", true, &z, &e) != TL_PROTO_OK) {
            fail_arg(r, &e);
            return false;
        }
        tl_slice_spec_row(spec, z, size[0], size[1]);
    } else if (tl_proto_str_eq(kind, "ortho")) {
        tl_proto_str axis;
        double pos;
        if (tl_proto_get_str(a, "axis", true, &axis, &e) != TL_PROTO_OK ||
            tl_proto_get_double(a, "position", true, &pos, &e) != TL_PROTO_OK) {
            fail_arg(r, &e);
            return false;
        }
        tl_axis ax;
        if (tl_proto_str_eq(axis, "x"))
            ax = TL_AXIS_X;
        else if (tl_proto_str_eq(axis, "y"))
            ax = TL_AXIS_Y;
        else if (tl_proto_str_eq(axis, "z"))
            ax = TL_AXIS_Z;
        else {
            fail(r, TL_PROTO_E_BAD_ARG, "axis must be \"x\", \"y\" or \"z\"");
            return false;
        }
        tl_slice_spec_ortho(spec, ax, pos, size[0], size[1]);
    } else if (tl_proto_str_eq(kind, "plane")) {
        float o[9];
        if (tl_proto_get_floats(a, "orientation", true, o, 9, &e) != TL_PROTO_OK) {
            fail_arg(r, &e);
            return false;
        }
        if (!size[0]) {
            fail(r, TL_PROTO_E_BAD_ARG, "a plane needs \"size\": [height, width]");
            return false;
        }
        tl_slice_spec_plane(spec, o, size[0], size[1]);
    } else {
        fail(r, TL_PROTO_E_KIND, "kind must be \"row\", \"ortho\", \"plane\" or \"box\"");
        return false;
    }
    double scale = 1.0;
    if (tl_proto_get_double(a, "scale", false, &scale, &e) != TL_PROTO_OK) {
        fail_arg(r, &e);
        return false;
    }
    if (!(scale > 0) || scale > 1e6) {
        fail(r, TL_PROTO_E_BAD_ARG,
             "scale must be a positive number of detector pixels per pixel");
        return false;
    }
    spec->scale = scale;
    return true;
}

static bool parse_policy(request *r, tl_update_policy *p, bool *given)
{
    *given = false;
    const msgpack_object *u = tl_proto_map_get(r->args, "update");
    if (!u)
        return true;
    if (u->type != MSGPACK_OBJECT_MAP) {
        fail(r, TL_PROTO_E_KEY_TYPE, "update must be a map {every, on_complete, max_rate}");
        return false;
    }
    tl_proto_error e;
    double rate = p->max_rate;
    if (tl_proto_get_u32(u, "every", false, &p->every, &e) != TL_PROTO_OK ||
        tl_proto_get_bool(u, "on_complete", false, &p->on_complete, &e) != TL_PROTO_OK ||
        tl_proto_get_double(u, "max_rate", false, &rate, &e) != TL_PROTO_OK) {
        fail_arg(r, &e);
        return false;
    }
    if (p->every < 1 || !(rate >= 0.01 && rate <= 1000)) {
        fail(r, TL_PROTO_E_BAD_ARG,
             "update.every must be >= 1 and update.max_rate in 0.01..1000 Hz");
        return false;
    }
    p->max_rate = rate;
    *given = true;
    return true;
}

/* Iterative-method defaults (PROTOCOL.md §12, set_slice). */
#define TL_SLICE_ITER_MAX 50 /* max_iterations: refinement without new data */
#define TL_SLICE_ITER_SUBSETS 8
#define TL_SLICE_ITER_TV_STEPS 10

/* "method" (fbp, the default; sirt, sart, os-sart, osem) and, for an iterative one, the map
 * "iterative" of its options, into it (state untouched). False after replying with an
 * error. */
static bool parse_method(request *r, tl_slice_iter *it)
{
    tl_proto_error e;
    tl_proto_str name = {NULL, 0};
    if (tl_proto_get_str(r->args, "method", false, &name, &e) != TL_PROTO_OK) {
        fail_arg(r, &e);
        return false;
    }
    const msgpack_object *m = tl_proto_map_get(r->args, "iterative");
    char method[16] = "fbp";
    if (name.ptr)
        snprintf(method, sizeof method, "%.*s", (int)(name.len < 15 ? name.len : 15), name.ptr);
    it->on = strcmp(method, "fbp") != 0;
    if (!it->on) {
        if (m)
            fail(r, TL_PROTO_E_BAD_ARG, "\"iterative\" options need an iterative \"method\"");
        return !m;
    }
    tl_iter_options o = {.iterations = 1,
                         .subsets = TL_SLICE_ITER_SUBSETS,
                         .relaxation = 1,
                         .tv_steps = TL_SLICE_ITER_TV_STEPS};
    if (!tl_iter_method_parse(method, &o.method)) {
        fail(r, TL_PROTO_E_BAD_ARG, "method \"%.*s\": expected fbp, sirt, sart, os-sart or osem",
             (int)name.len, name.ptr);
        return false;
    }
    if (m && m->type != MSGPACK_OBJECT_MAP) {
        fail(r, TL_PROTO_E_KEY_TYPE, "iterative must be a map of the method's options");
        return false;
    }
    uint32_t max = TL_SLICE_ITER_MAX, planes = 1;
    double spacing = 1.0;
    tl_proto_str projector = {NULL, 0}, start = {NULL, 0};
    static const msgpack_object none = {.type = MSGPACK_OBJECT_MAP};
    const msgpack_object *a = m ? m : &none;
    if (tl_proto_get_u32(a, "iterations", false, &o.iterations, &e) != TL_PROTO_OK ||
        tl_proto_get_u32(a, "max_iterations", false, &max, &e) != TL_PROTO_OK ||
        tl_proto_get_u32(a, "subsets", false, &o.subsets, &e) != TL_PROTO_OK ||
        tl_proto_get_double(a, "relaxation", false, &o.relaxation, &e) != TL_PROTO_OK ||
        tl_proto_get_bool(a, "nonneg", false, &o.nonneg, &e) != TL_PROTO_OK ||
        tl_proto_get_double(a, "tv", false, &o.tv_weight, &e) != TL_PROTO_OK ||
        tl_proto_get_u32(a, "tv_steps", false, &o.tv_steps, &e) != TL_PROTO_OK ||
        tl_proto_get_double(a, "tolerance", false, &o.tolerance, &e) != TL_PROTO_OK ||
        tl_proto_get_str(a, "projector", false, &projector, &e) != TL_PROTO_OK ||
        tl_proto_get_str(a, "start", false, &start, &e) != TL_PROTO_OK ||
        tl_proto_get_u32(a, "planes", false, &planes, &e) != TL_PROTO_OK ||
        tl_proto_get_double(a, "spacing", false, &spacing, &e) != TL_PROTO_OK) {
        fail_arg(r, &e);
        return false;
    }
    char pname[16] = "matched";
    if (projector.ptr)
        snprintf(pname, sizeof pname, "%.*s", (int)(projector.len < 15 ? projector.len : 15),
                 projector.ptr);
    if (!tl_projector_parse(pname, &o.projector)) {
        fail(r, TL_PROTO_E_BAD_ARG, "projector \"%s\": expected matched or joseph", pname);
        return false;
    }
    bool fbp = o.method != TL_ITER_OSEM; /* OS-EM needs a start above 0 */
    if (start.ptr && (tl_proto_str_eq(start, "fbp") || tl_proto_str_eq(start, "zero")))
        fbp = tl_proto_str_eq(start, "fbp");
    else if (start.ptr) {
        fail(r, TL_PROTO_E_BAD_ARG, "start must be \"fbp\" or \"zero\"");
        return false;
    }
    if (o.iterations < 1 || o.iterations > TL_SLICE_ITER_STEP_MAX) {
        fail(r, TL_PROTO_E_BAD_ARG, "iterations must be 1..%d (per read-out)",
             TL_SLICE_ITER_STEP_MAX);
        return false;
    }
    char why[256];
    if (tl_iter_options_check(&o, why, sizeof why) != TL_OK) { /* the engine's own checks */
        fail(r, TL_PROTO_E_BAD_ARG, "%s", why);
        return false;
    }
    const char *bad = max < 1 ? "max_iterations must be >= 1"
                      : o.method == TL_ITER_OSEM && fbp
                          ? "OS-EM starts above 0: start \"zero\" (ones), not its FBP"
                      : planes < 1 || planes > TL_SLICE_ITER_PLANES_MAX ? "planes must be 1..1024"
                      : !(spacing > 0 && isfinite(spacing))             ? "spacing must be > 0"
                                                                        : NULL;
    if (bad) {
        fail(r, TL_PROTO_E_BAD_ARG, "%s", bad);
        return false;
    }
    it->o = o;
    it->max_iterations = max;
    it->start_fbp = fbp;
    it->planes = planes;
    it->spacing = spacing;
    return true;
}

static void cmd_set_slice(request *r)
{
    tl_daemon *d = r->d;
    tl_proto_error e;
    tl_proto_str id;
    if (tl_proto_get_str(r->args, "id", true, &id, &e) != TL_PROTO_OK) {
        fail_arg(r, &e);
        return;
    }
    if (!tl_slice_id_valid(id.ptr, id.len)) {
        fail(r, TL_PROTO_E_RANGE, "id must be 1..64 characters of A-Z a-z 0-9 _ . -");
        return;
    }
    tl_slice_spec spec;
    tl_update_policy policy = tl_default_policy(&d->cfg);
    bool given, pin = false, lz4;
    tl_proto_dtype wire;
    tl_slice_iter method = {0};
    tl_slice_box box;
    if (!parse_spec(r, &spec, &box) || !parse_policy(r, &policy, &given) ||
        !parse_wire(r, &wire, &lz4) || !parse_method(r, &method))
        return;
    if (tl_proto_get_bool(r->args, "pin", false, &pin, &e) != TL_PROTO_OK) {
        fail_arg(r, &e);
        return;
    }
    if (box.on && method.on) {
        fail(r, TL_PROTO_E_BAD_ARG,
             "a box is reconstructed by FBP / FDK (method fbp); an iterative sub-volume is a "
             "cone-beam slice's \"planes\"");
        return;
    }

    pthread_mutex_lock(&d->lock);
    /* inside the scan's volume; before a scan, inside the largest detector's */
    uint32_t rows = TL_PROTO_MAX_DIM, cols = TL_PROTO_MAX_DIM;
    if (d->scan.open) {
        const tl_engine_config *ec = tl_engine_get_config(d->scan.engine);
        rows = ec->rows;
        cols = ec->cols;
    }
    /* Try the new geometry on the engine first, so a refusal changes nothing. */
    tl_slice trial = {0};
    trial.spec = spec;
    trial.engine_id = -1;
    trial.it = method;
    trial.box = box;
    if (!tl_slice_fits(&trial, rows, cols)) {
        pthread_mutex_unlock(&d->lock);
        fail(r, TL_PROTO_E_RANGE,
             "the slice lies outside the volume (%u rows: z in -1..%u; x and y within %u of "
             "the axis)",
             rows, rows, cols);
        return;
    }
    tl_slice *sl = tl_slices_find(&d->slices, id.ptr, id.len);
    if (!sl && d->slices.n >= d->cfg.slices_max) {
        pthread_mutex_unlock(&d->lock);
        fail(r, TL_PROTO_E_RESOURCE, "already serving %d slices (slices.max)", d->slices.n);
        return;
    }
    char err[256];
    if (tl_scan_attach(d, &trial, err, sizeof err) != 0) {
        free(trial.box.ids);
        pthread_mutex_unlock(&d->lock);
        fail(r, TL_PROTO_E_BAD_ARG, "%s", err);
        return;
    }
    bool created = !sl;
    if (created)
        sl = tl_slices_add(&d->slices, id.ptr, id.len);
    if (!sl) {
        tl_scan_detach(d, &trial);
        free(trial.it.image);
        free(trial.box.ids);
        pthread_mutex_unlock(&d->lock);
        fail(r, TL_PROTO_E_RESOURCE, "out of memory");
        return;
    }
    tl_scan_detach(d, sl);
    free(sl->box.ids);
    sl->box = trial.box; /* its planes in the engine, for the open scan */
    sl->spec = spec;
    sl->policy = policy;
    sl->policy_given = given;
    sl->pinned = pin;
    sl->wire_dtype = wire;
    sl->wire_lz4 = lz4;
    sl->engine_id = trial.engine_id;
    sl->tracked = false;
    sl->height = trial.height;
    sl->width = trial.width;
    memcpy(sl->orientation, trial.orientation, sizeof sl->orientation);
    sl->want_param = true;
    free(sl->it.image);
    sl->it = trial.it; /* sized by tl_scan_attach for the open scan */
    tl_proto_begin_rep_ok(r->pk, r->id);
    pack_slice(d, sl, r->pk);
    pthread_mutex_unlock(&d->lock);
    tl_log(TL_LOG_INFO, created ? "slice_added" : "slice_changed", "id=%s kind=%s pinned=%d",
           tl_logq(sl->id), kind_name(&spec, &box), pin);
    tl_worker_poke(d);
}

/* ---- the other commands ------------------------------------------------------------------- */

static void cmd_remove_slice(request *r)
{
    tl_daemon *d = r->d;
    tl_proto_error e;
    tl_proto_str id;
    if (tl_proto_get_str(r->args, "id", true, &id, &e) != TL_PROTO_OK) {
        fail_arg(r, &e);
        return;
    }
    pthread_mutex_lock(&d->lock);
    tl_slice *sl = tl_slices_find(&d->slices, id.ptr, id.len);
    if (!sl) {
        pthread_mutex_unlock(&d->lock);
        fail(r, TL_PROTO_E_NOT_FOUND, "no slice \"%.*s\"", (int)id.len, id.ptr);
        return;
    }
    tl_scan_detach(d, sl);
    tl_log(TL_LOG_INFO, "slice_removed", "id=%s", tl_logq(sl->id));
    tl_slice_shm_drop(d, sl);
    tl_publisher_forget(&d->pub, sl->id);
    tl_slices_remove(&d->slices, sl);
    pthread_mutex_unlock(&d->lock);
    tl_proto_begin_rep_ok(r->pk, r->id);
    msgpack_pack_true(r->pk);
}

/* The newest message and the last final of one slice (args "id") or of every slice, sent
 * again: for a subscriber that fell behind or joined late (publisher.h). */
static void cmd_resend(request *r)
{
    tl_daemon *d = r->d;
    tl_proto_error e;
    tl_proto_str id = {NULL, 0};
    if (tl_proto_get_str(r->args, "id", false, &id, &e) != TL_PROTO_OK) {
        fail_arg(r, &e);
        return;
    }
    char name[TL_PROTO_MAX_ID + 1];
    if (id.ptr) {
        pthread_mutex_lock(&d->lock);
        bool known = tl_slices_find(&d->slices, id.ptr, id.len) != NULL;
        pthread_mutex_unlock(&d->lock);
        if (!known) {
            fail(r, TL_PROTO_E_NOT_FOUND, "no slice \"%.*s\"", (int)id.len, id.ptr);
            return;
        }
        snprintf(name, sizeof name, "%.*s", (int)id.len, id.ptr);
    }
    int n = tl_publisher_resend(&d->pub, id.ptr ? name : NULL);
    tl_proto_begin_rep_ok(r->pk, r->id);
    msgpack_pack_map(r->pk, 1);
    tl_proto_pack_kv_u64(r->pk, "messages", (uint64_t)n);
}

static void cmd_list_slices(request *r)
{
    tl_daemon *d = r->d;
    pthread_mutex_lock(&d->lock);
    tl_proto_begin_rep_ok(r->pk, r->id);
    msgpack_pack_array(r->pk, (size_t)d->slices.n);
    for (int i = 0; i < d->slices.n; i++)
        pack_slice(d, &d->slices.v[i], r->pk);
    pthread_mutex_unlock(&d->lock);
}

/* set_param auto_center: the live centre estimate applied, or no longer. */
static void set_auto_center(request *r)
{
    tl_daemon *d = r->d;
    tl_proto_error e;
    bool on;
    if (tl_proto_get_bool(r->args, "value", true, &on, &e) != TL_PROTO_OK) {
        fail_arg(r, &e);
        return;
    }
    pthread_mutex_lock(&d->lock);
    tl_center_estimate c = {0};
    if (d->scan.open)
        (void)tl_engine_center(d->scan.engine, &c);
    if (!c.estimating) {
        pthread_mutex_unlock(&d->lock);
        fail(r, TL_PROTO_E_STATE,
             d->scan.open ? "the scan was opened without centre estimation (scan key "
                            "auto_center)"
                          : "no scan is open");
        return;
    }
    double before = tl_engine_get_config(d->scan.engine)->center;
    tl_status st = tl_engine_set_center_auto(d->scan.engine, on);
    bool moved = tl_engine_get_config(d->scan.engine)->center != before;
    for (int i = 0; moved && i < d->slices.n; i++) /* an estimate applied at once */
        d->slices.v[i].want_param = true;
    pthread_mutex_unlock(&d->lock);
    if (st != TL_OK) {
        fail(r, TL_PROTO_E_INTERNAL, "%s", tl_engine_last_error(d->scan.engine));
        return;
    }
    tl_proto_begin_rep_ok(r->pk, r->id);
    msgpack_pack_map(r->pk, 2);
    tl_proto_pack_kv_str(r->pk, "name", "auto_center");
    tl_proto_pack_kv_bool(r->pk, "value", on);
    tl_log(TL_LOG_INFO, "param_set", "name=auto_center value=%s", on ? "true" : "false");
    tl_worker_poke(d);
}

static void cmd_set_param(request *r)
{
    tl_daemon *d = r->d;
    tl_proto_error e;
    tl_proto_str name;
    if (tl_proto_get_str(r->args, "name", true, &name, &e) != TL_PROTO_OK) {
        fail_arg(r, &e);
        return;
    }
    bool center = tl_proto_str_eq(name, "center"), filter = tl_proto_str_eq(name, "filter");
    if (tl_proto_str_eq(name, "auto_center")) {
        set_auto_center(r);
        return;
    }
    if (!center && !filter) {
        fail(r, TL_PROTO_E_BAD_ARG, "unknown parameter \"%.*s\" (center, filter, auto_center)",
             (int)name.len, name.ptr);
        return;
    }
    double c = 0;
    tl_proto_str fname = {0};
    tl_filter f = TL_FILTER_RAMLAK;
    if (center && tl_proto_get_double(r->args, "value", true, &c, &e) != TL_PROTO_OK) {
        fail_arg(r, &e);
        return;
    }
    if (filter) {
        char buf[33];
        if (tl_proto_get_str(r->args, "value", true, &fname, &e) != TL_PROTO_OK) {
            fail_arg(r, &e);
            return;
        }
        snprintf(buf, sizeof buf, "%.*s", (int)fname.len, fname.ptr);
        if (fname.len >= sizeof buf || !tl_filter_parse(buf, &f) || f == TL_FILTER_NONE) {
            fail(r, TL_PROTO_E_BAD_ARG,
                 "unknown filter \"%.*s\" (ram-lak, shepp-logan, "
                 "cosine, hamming, hann, parzen)",
                 (int)fname.len, fname.ptr);
            return;
        }
    }
    pthread_mutex_lock(&d->lock);
    if (!d->scan.open) {
        pthread_mutex_unlock(&d->lock);
        fail(r, TL_PROTO_E_STATE, "no scan is open");
        return;
    }
    tl_status st =
        center ? tl_engine_set_center(d->scan.engine, c) : tl_engine_set_filter(d->scan.engine, f);
    if (st != TL_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", tl_engine_last_error(d->scan.engine));
        pthread_mutex_unlock(&d->lock);
        /* the value is finite (the getter said so): the engine refuses a centre off the
         * detector, anything else is a filter it cannot apply */
        fail(r, center ? TL_PROTO_E_RANGE : TL_PROTO_E_BAD_ARG, "%s", msg);
        return;
    }
    for (int i = 0; i < d->slices.n; i++) /* the centre changes every slice at once */
        d->slices.v[i].want_param = center;
    pthread_mutex_unlock(&d->lock);
    tl_proto_begin_rep_ok(r->pk, r->id);
    msgpack_pack_map(r->pk, 2);
    tl_proto_pack_kv_str(r->pk, "name", center ? "center" : "filter");
    if (center)
        tl_proto_pack_kv_double(r->pk, "value", c);
    else
        tl_proto_pack_kv_str(r->pk, "value", tl_filter_name(f));
    if (center)
        tl_log(TL_LOG_INFO, "param_set", "name=center value=%.4f", c);
    else
        tl_log(TL_LOG_INFO, "param_set", "name=filter value=%s", tl_filter_name(f));
    tl_worker_poke(d);
}

static void cmd_reset(request *r)
{
    tl_daemon *d = r->d;
    pthread_mutex_lock(&d->lock);
    if (!d->scan.open) {
        pthread_mutex_unlock(&d->lock);
        fail(r, TL_PROTO_E_STATE, "no scan is open");
        return;
    }
    tl_status st = tl_engine_reset(d->scan.engine);
    d->scan.was_complete = false;
    for (int i = 0; i < d->slices.n; i++) {
        d->slices.v[i].pending = 0;
        d->slices.v[i].dirty = false;
    }
    pthread_mutex_unlock(&d->lock);
    if (st != TL_OK) {
        fail(r, TL_PROTO_E_INTERNAL, "reset failed");
        return;
    }
    tl_log(TL_LOG_INFO, "scan_reset", "series=%llu", (unsigned long long)d->scan.series);
    tl_proto_begin_rep_ok(r->pk, r->id);
    msgpack_pack_true(r->pk);
}

/* ---- tune --------------------------------------------------------------------------------- */

/* Times the kernels for slice sizes of the open scan again, whatever the cache holds, stores
 * and uses the result. The engine is the worker's, so the worker runs it (tuning.c, on a
 * thread and an engine of its own) and the reply comes when it is done; meanwhile frames
 * and control requests are served. */
static void cmd_tune(request *r)
{
    tl_daemon *d = r->d;
    tl_tuning *t = &d->tuning;
    tl_proto_error e;
    uint32_t size[2] = {0, 0};
    if (!r->can_defer) {
        fail(r, TL_PROTO_E_UNSUPPORTED, "tune is served on the control socket only");
        return;
    }
    if (r->args &&
        tl_proto_get_dims(r->args, "size", false, size, 2, TL_PROTO_MAX_DIM, &e) != TL_PROTO_OK) {
        fail_arg(r, &e);
        return;
    }
    pthread_mutex_lock(&d->lock);
    if (!d->scan.open) {
        pthread_mutex_unlock(&d->lock);
        fail(r, TL_PROTO_E_STATE,
             "no scan is open: tune times the kernels on the scan's engine "
             "(send the scan message first, its frames after)");
        return;
    }
    if (t->job != TL_TUNE_JOB_IDLE) {
        pthread_mutex_unlock(&d->lock);
        fail(r, TL_PROTO_E_STATE, "a tune is already running");
        return;
    }
    int n = 0;
    if (size[0]) {
        t->job_dims[n][0] = size[0];
        t->job_dims[n++][1] = size[1];
    }
    /* no size given: every size of the slices in the engine, else the default row slice */
    for (int i = 0; !size[0] && i < d->slices.n; i++) {
        const tl_slice *sl = &d->slices.v[i];
        const uint32_t h = tl_slice_plane_height(sl); /* what a kernel reconstructs */
        bool seen = sl->engine_id < 0;
        for (int k = 0; k < n && !seen; k++)
            seen = t->job_dims[k][0] == h && t->job_dims[k][1] == sl->width;
        if (seen)
            continue;
        if (n == TL_TUNE_MAX_SIZES) {
            pthread_mutex_unlock(&d->lock);
            fail(r, TL_PROTO_E_RESOURCE,
                 "the slices have more than %d sizes: name one with "
                 "\"size\": [h, w]",
                 TL_TUNE_MAX_SIZES);
            return;
        }
        t->job_dims[n][0] = h;
        t->job_dims[n++][1] = sl->width;
    }
    if (n == 0) {
        t->job_dims[n][0] = d->scan.msg.cols;
        t->job_dims[n++][1] = d->scan.msg.cols;
    }
    t->job_n = n;
    t->job_id = r->id;
    t->job = TL_TUNE_JOB_QUEUED;
    pthread_mutex_unlock(&d->lock);
    tl_log(TL_LOG_INFO, "tune_requested", "sizes=%d first=%ux%u", n, t->job_dims[0][0],
           t->job_dims[0][1]);
    r->deferred = true;
    tl_worker_poke(d);
}

/* ---- status ------------------------------------------------------------------------------- */

/* "corrections": {dezinger, dezinger_replaced, rings ("vo:31,0.001", "none"),
 * ring_updates, ring_rebuilds, paganin: [energy keV, distance m, pixel um, delta/beta] or
 * nil} (ARCHITECTURE.md §3.11). */
static void pack_corrections(tl_engine *e, msgpack_packer *pk)
{
    tl_engine_corr_state cs;
    (void)tl_engine_corrections(e, &cs); /* never fails: it reads a counter */
    pack_key(pk, "corrections");
    msgpack_pack_map(pk, 6);
    tl_proto_pack_kv_double(pk, "dezinger", cs.corr.dezinger);
    tl_proto_pack_kv_u64(pk, "dezinger_replaced", cs.dezinger_replaced);
    char rings[64];
    const tl_corrections *k = &cs.corr;
    snprintf(rings, sizeof rings, "%s:%u,%g", tl_rings_name(k->rings),
             k->rings == TL_RINGS_VO ? k->ring_size : k->ring_level, k->ring_tolerance);
    tl_proto_pack_kv_str(pk, "rings", k->rings ? rings : "none");
    tl_proto_pack_kv_u64(pk, "ring_updates", cs.ring_updates);
    tl_proto_pack_kv_u64(pk, "ring_rebuilds", cs.ring_rebuilds);
    pack_key(pk, "paganin");
    if (cs.corr.delta_beta <= 0) {
        msgpack_pack_nil(pk);
        return;
    }
    const double p[4] = {cs.corr.energy_kev, cs.corr.distance_m, cs.corr.pixel_um,
                         cs.corr.delta_beta};
    msgpack_pack_array(pk, 4);
    for (int i = 0; i < 4; i++)
        msgpack_pack_double(pk, p[i]);
}

/* "center_estimate": nil, or the live centre estimate (ARCHITECTURE.md §3.12). */
static void pack_center(const tl_engine *e, msgpack_packer *pk)
{
    tl_center_estimate c;
    (void)tl_engine_center(e, &c); /* reads the last estimate */
    pack_key(pk, "center_estimate");
    if (!c.estimating) {
        msgpack_pack_nil(pk);
        return;
    }
    msgpack_pack_map(pk, 9);
    tl_proto_pack_kv_bool(pk, "auto", c.auto_on);
    tl_proto_pack_kv_bool(pk, "valid", c.valid);
    tl_proto_pack_kv_double(pk, "center", c.center);
    tl_proto_pack_kv_double(pk, "confidence", c.confidence);
    tl_proto_pack_kv_double(pk, "spread", c.spread);
    tl_proto_pack_kv_u64(pk, "pairs", c.pairs);
    tl_proto_pack_kv_u64(pk, "newest", c.newest);
    tl_proto_pack_kv_u64(pk, "estimates", c.estimates);
    tl_proto_pack_kv_u64(pk, "applied", c.applied);
}

/* "cone": nil for parallel beam, else the trajectory as the scan gave it (PROTOCOL.md
 * §8.1.1), with detector_offset u following the current centre (set_param center),
 * short_scan [start, range] (nil: a full turn), and matrices: how many projection
 * matrices the scan gave (nil: the circle), so a sender sees the daemon took them. */
static void pack_cone(const tl_scan *s, double center, msgpack_packer *pk)
{
    const tl_proto_scan *m = &s->msg;
    pack_key(pk, "cone");
    if (m->geometry != TL_PROTO_CONE) {
        msgpack_pack_nil(pk);
        return;
    }
    msgpack_pack_map(pk, 6);
    pack_key(pk, "matrices");
    if (m->nmatrices)
        msgpack_pack_uint32(pk, m->nmatrices);
    else
        msgpack_pack_nil(pk);
    tl_proto_pack_kv_double(pk, "source_origin", m->source_origin);
    tl_proto_pack_kv_double(pk, "source_detector", m->source_detector);
    pack_key(pk, "pixel_size");
    msgpack_pack_array(pk, 2);
    msgpack_pack_double(pk, m->pixel_size[0]);
    msgpack_pack_double(pk, m->pixel_size[1]);
    pack_key(pk, "detector_offset");
    msgpack_pack_array(pk, 2);
    msgpack_pack_double(pk, center - (m->cols - 1) / 2.0);
    msgpack_pack_double(pk, m->has_detector_offset ? m->detector_offset[1] : 0.0);
    pack_key(pk, "short_scan");
    if (!m->has_short_scan) {
        msgpack_pack_nil(pk);
        return;
    }
    msgpack_pack_array(pk, 2);
    msgpack_pack_double(pk, m->short_scan[0]);
    msgpack_pack_double(pk, m->short_scan[1]);
}

static void pack_scan(tl_daemon *d, msgpack_packer *pk)
{
    tl_scan *s = &d->scan;
    if (!s->open) {
        msgpack_pack_nil(pk);
        return;
    }
    tl_engine_state st;
    tl_engine_get_state(s->engine, &st);
    msgpack_pack_map(pk, 23);
    tl_proto_pack_kv_u64(pk, "series", s->series);
    tl_proto_pack_kv_str(pk, "geometry", tl_proto_geometry_name(s->msg.geometry));
    pack_cone(s, st.center, pk);
    pack_key(pk, "shape");
    pack_dims(pk, s->msg.rows, s->msg.cols);
    tl_proto_pack_kv_str(pk, "dtype", tl_proto_dtype_name(s->msg.dtype));
    tl_proto_pack_kv_u64(pk, "window", st.window);
    tl_proto_pack_kv_u64(pk, "held", st.held);
    tl_proto_pack_kv_u64(pk, "missing", st.missing);
    tl_proto_pack_kv_u64(pk, "window_first", st.window_first);
    tl_proto_pack_kv_u64(pk, "window_last", st.window_last);
    tl_proto_pack_kv_double(pk, "fill", st.window ? (double)st.held / st.window : 0.0);
    tl_proto_pack_kv_bool(pk, "finished", s->finished);
    tl_proto_pack_kv_u64(pk, "projections", s->projections);
    tl_proto_pack_kv_u64(pk, "darks", st.dark_batch);
    tl_proto_pack_kv_u64(pk, "flats", st.flat_batch);
    tl_proto_pack_kv_str(pk, "backend", st.backend);
    tl_proto_pack_kv_str(pk, "device", st.device_name);
    tl_proto_pack_kv_u64(pk, "memory_bytes", st.memory_bytes);
    tl_proto_pack_kv_double(pk, "center", st.center);
    tl_proto_pack_kv_str(pk, "filter", tl_filter_name(st.filter));
    pack_corrections(s->engine, pk);
    pack_center(s->engine, pk);
    pack_key(pk, "detector"); /* what a detector said it did to the frames (DECTRIS start) */
    if (!s->detector.told) {
        msgpack_pack_nil(pk);
        return;
    }
    msgpack_pack_map(pk, 5);
    tl_proto_pack_kv_bool(pk, "flatfield_enabled", s->detector.flatfield_enabled);
    tl_proto_pack_kv_bool(pk, "countrate_correction_enabled",
                          s->detector.countrate_correction_enabled);
    tl_proto_pack_kv_bool(pk, "pixel_mask_enabled", s->detector.pixel_mask_enabled);
    tl_proto_pack_kv_u64(pk, "masked_pixels", s->detector.masked_pixels);
    tl_proto_pack_kv_u64(pk, "masked_filled", s->masked_filled);
}

static void pack_frames(tl_daemon *d, msgpack_packer *pk)
{
    tl_stats *st = &d->stats;
    msgpack_pack_map(pk, 5);
    tl_proto_pack_kv_u64(pk, "messages", tl_stats_get(&st->messages));
    tl_proto_pack_kv_u64(pk, "bytes", tl_stats_get(&st->bytes));
    pack_key(pk, "accepted");
    msgpack_pack_map(pk, 3);
    tl_proto_pack_kv_u64(pk, "dark", tl_stats_get(&st->accepted[0]));
    tl_proto_pack_kv_u64(pk, "flat", tl_stats_get(&st->accepted[1]));
    tl_proto_pack_kv_u64(pk, "proj", tl_stats_get(&st->accepted[2]));
    pack_key(pk, "rejected");
    msgpack_pack_map(pk, TL_REJ_COUNT);
    for (int i = 0; i < TL_REJ_COUNT; i++)
        tl_proto_pack_kv_u64(pk, tl_reject_name((tl_reject)i), tl_stats_get(&st->rejected[i]));
    int nproto = 0;
    for (int i = 0; i < 64; i++)
        nproto += tl_stats_get(&st->rejected_proto[i]) > 0;
    pack_key(pk, "rejected_protocol");
    msgpack_pack_map(pk, (size_t)nproto);
    for (int i = 0; i < 64; i++)
        if (tl_stats_get(&st->rejected_proto[i]) > 0)
            tl_proto_pack_kv_u64(pk, tl_proto_err_name((tl_proto_err)i),
                                 tl_stats_get(&st->rejected_proto[i]));
}

static void pack_latency(tl_daemon *d, msgpack_packer *pk)
{
    msgpack_pack_map(pk, TL_LAT_COUNT);
    for (int i = 0; i < TL_LAT_COUNT; i++) {
        const tl_hist *h = &d->stats.latency[i];
        pack_key(pk, tl_latency_name((tl_latency)i));
        msgpack_pack_map(pk, 5);
        tl_proto_pack_kv_u64(pk, "count", tl_hist_count(h));
        tl_proto_pack_kv_double(pk, "p50", tl_hist_quantile(h, 0.50) * 1e3);
        tl_proto_pack_kv_double(pk, "p90", tl_hist_quantile(h, 0.90) * 1e3);
        tl_proto_pack_kv_double(pk, "p99", tl_hist_quantile(h, 0.99) * 1e3);
        tl_proto_pack_kv_double(pk, "max", tl_hist_max(h) * 1e3);
    }
}

static void cmd_status(request *r)
{
    tl_daemon *d = r->d;
    tl_stats *st = &d->stats;
    msgpack_packer *pk = r->pk;
    tl_proto_begin_rep_ok(pk, r->id);
    msgpack_pack_map(pk, 15);
    tl_proto_pack_kv_str(pk, "version", PACKAGE_VERSION);
    tl_proto_pack_kv_u64(pk, "protocol", TL_PROTO_VERSION);
    tl_proto_pack_kv_double(pk, "uptime_s", (tl_clock_ns() - d->started_ns) / 1e9);
    tl_proto_pack_kv_str(pk, "backend", tl_settings_enum_name("daemon.backend", d->cfg.backend));
    pthread_mutex_lock(&d->lock);
    pack_key(pk, "scan");
    pack_scan(d, pk);
    pack_key(pk, "last_scan_error");
    if (d->scan.last_error[0])
        tl_proto_pack_cstr(pk, d->scan.last_error);
    else
        msgpack_pack_nil(pk);
    int wanted = 0;
    for (int i = 0; i < d->slices.n; i++) {
        bool tcp, shm;
        wanted += tl_slice_wanted(d, &d->slices.v[i], &tcp, &shm);
    }
    int defined = d->slices.n;
    int buffers_open = tl_ipc_frames_open_count(&d->ipc);
    uint64_t releases_waiting = d->ipc.ndeferred;
    pack_key(pk, "kernels");
    tl_tuning_pack_status(d, pk);
    pthread_mutex_unlock(&d->lock);
    pack_key(pk, "frames");
    pack_frames(d, pk);
    pack_key(pk, "queue");
    msgpack_pack_map(pk, 4);
    tl_proto_pack_kv_u64(pk, "depth", tl_queue_depth(&d->queue));
    tl_proto_pack_kv_u64(pk, "high_water", tl_queue_high(&d->queue));
    tl_proto_pack_kv_u64(pk, "capacity", d->queue.cap);
    tl_proto_pack_kv_str(pk, "overflow",
                         tl_settings_enum_name("ingest.overflow", atomic_load(&d->overflow)));
    size_t buffers, buffer_bytes;
    tl_bufpool_usage(&d->pub.pool, &buffers, &buffer_bytes);
    pack_key(pk, "slices");
    msgpack_pack_map(pk, 15);
    tl_proto_pack_kv_u64(pk, "defined", (uint64_t)defined);
    tl_proto_pack_kv_u64(pk, "wanted", (uint64_t)wanted);
    tl_proto_pack_kv_u64(pk, "subscriptions", tl_subs_count(&d->pub.subs));
    tl_proto_pack_kv_u64(pk, "computed", tl_stats_get(&st->slices_computed));
    tl_proto_pack_kv_u64(pk, "failed", tl_stats_get(&st->slices_failed));
    tl_proto_pack_kv_u64(pk, "iterations", tl_stats_get(&st->slice_iterations));
    tl_proto_pack_kv_u64(pk, "published", tl_stats_get(&st->slices_published));
    tl_proto_pack_kv_u64(pk, "superseded", tl_stats_get(&st->slices_superseded));
    tl_proto_pack_kv_u64(pk, "stalls", tl_stats_get(&st->subscriber_stalls));
    tl_proto_pack_kv_u64(pk, "resent", tl_stats_get(&st->slices_resent));
    tl_proto_pack_kv_u64(pk, "finals_lost", tl_stats_get(&st->finals_lost));
    tl_proto_pack_kv_u64(pk, "shared_memory", tl_stats_get(&st->slices_shm));
    tl_proto_pack_kv_u64(pk, "shm_failed", tl_stats_get(&st->shm_failed));
    tl_proto_pack_kv_u64(pk, "buffers", buffers); /* slice buffers in host memory (bufpool.h) */
    tl_proto_pack_kv_u64(pk, "buffer_bytes", buffer_bytes);
    pack_key(pk, "gpu_frames"); /* frames read from producers' GPU memory (CUDA IPC) */
    msgpack_pack_map(pk, 7);
    tl_proto_pack_kv_u64(pk, "frames", tl_stats_get(&st->ipc_frames));
    tl_proto_pack_kv_u64(pk, "buffers_open", (uint64_t)buffers_open);
    tl_proto_pack_kv_u64(pk, "buffers_opened", tl_stats_get(&st->ipc_opened));
    tl_proto_pack_kv_u64(pk, "releases", tl_stats_get(&st->ipc_releases));
    tl_proto_pack_kv_u64(pk, "releases_waiting", releases_waiting); /* on the GPU's reads */
    tl_proto_pack_kv_u64(pk, "release_failed", tl_stats_get(&st->ipc_release_failed));
    tl_proto_pack_kv_u64(pk, "producers_lost", tl_stats_get(&st->ipc_producers_lost));
    pack_key(pk, "requests");
    msgpack_pack_map(pk, 2);
    tl_proto_pack_kv_u64(pk, "total", tl_stats_get(&st->requests));
    tl_proto_pack_kv_u64(pk, "errors", tl_stats_get(&st->request_errors));
    pack_key(pk, "latency_ms");
    pack_latency(d, pk);
    size_t heap_in_use, heap_free;
    tl_heap_usage(&heap_in_use, &heap_free);
    pack_key(pk, "memory"); /* the host heap (heap.h) */
    msgpack_pack_map(pk, 4);
    tl_proto_pack_kv_u64(pk, "heap_in_use", heap_in_use);
    tl_proto_pack_kv_u64(pk, "heap_free", heap_free);
    tl_proto_pack_kv_u64(pk, "heap_trims", d->heap.trims);
    tl_proto_pack_kv_bool(pk, "heap_trimmed", d->heap.trimmed);
    pack_key(pk, "security"); /* [security]: per socket curve or plain, refusals (auth.h) */
    tl_auth_pack_status(&d->auth, pk);
}

/* ---- dispatch ----------------------------------------------------------------------------- */

/* needs_args: a request without args is E_BAD_ARG. role: the least client role that may
 * run it (auth.h; with [security] curve off every client is admin). */
typedef struct {
    const char *name;
    void (*fn)(request *r);
    bool needs_args;
    tl_role role;
} command;

static void cmd_commands(request *r);

static const command commands[] = {
    {"status", cmd_status, false, TL_ROLE_VIEWER},
    {"set_slice", cmd_set_slice, true, TL_ROLE_OPERATOR},
    {"remove_slice", cmd_remove_slice, true, TL_ROLE_OPERATOR},
    {"list_slices", cmd_list_slices, false, TL_ROLE_VIEWER},
    {"resend", cmd_resend, false, TL_ROLE_VIEWER},
    {"set_param", cmd_set_param, true, TL_ROLE_OPERATOR},
    {"reset", cmd_reset, false, TL_ROLE_ADMIN},
    {"tune", cmd_tune, false, TL_ROLE_ADMIN},
    {"commands", cmd_commands, false, TL_ROLE_VIEWER},
};
#define NCOMMANDS (sizeof commands / sizeof *commands)

static void cmd_commands(request *r)
{
    tl_proto_begin_rep_ok(r->pk, r->id);
    msgpack_pack_array(r->pk, NCOMMANDS);
    for (size_t i = 0; i < NCOMMANDS; i++)
        tl_proto_pack_cstr(r->pk, commands[i].name);
}

/* Runs req for a client of role (named client); returns true when the reply was deferred
 * (can_defer only). A command above the role is refused before its arguments are read. */
static bool run(tl_daemon *d, const tl_proto_req *req, tl_role role, const char *client,
                msgpack_packer *pk, bool can_defer)
{
    request r = {d, req->id, req->args, pk, can_defer, false};
    for (size_t i = 0; i < NCOMMANDS; i++) {
        if (!tl_proto_str_eq(req->cmd, commands[i].name))
            continue;
        if (!tl_role_allows(role, commands[i].role)) {
            char what[128];
            snprintf(what, sizeof what, "%s (needs %s, has %s)", commands[i].name,
                     tl_role_name(commands[i].role), tl_role_name(role));
            tl_auth_refuse(&d->auth, TL_AUTH_CONTROL, TL_AUTH_DENIED, client, what);
            fail(&r, TL_PROTO_E_DENIED, "%s needs the role %s; the key \"%s\" has %s",
                 commands[i].name, tl_role_name(commands[i].role), client,
                 role == TL_ROLE_NONE ? "none (removed from security.clients?)"
                                      : tl_role_name(role));
            return false;
        }
        if (commands[i].needs_args && !req->args) {
            fail(&r, TL_PROTO_E_BAD_ARG, "%s needs arguments (\"args\": {...})", commands[i].name);
            return false;
        }
        commands[i].fn(&r);
        return r.deferred;
    }
    fail(&r, TL_PROTO_E_UNKNOWN_CMD, "unknown command \"%.*s\" (try \"commands\")",
         (int)(req->cmd.len < 64 ? req->cmd.len : 64), req->cmd.ptr);
    return false;
}

void tl_commands_run(tl_daemon *d, const tl_proto_req *req, msgpack_packer *pk)
{
    run(d, req, TL_ROLE_ADMIN, "", pk, false);
}

bool tl_commands_run_control(tl_daemon *d, const tl_proto_req *req, tl_role role,
                             const char *client, msgpack_packer *pk)
{
    return run(d, req, role, client, pk, true);
}
