/* slices.c — see slices.h. */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/base/slices.h"

void tl_slices_init(tl_slices *s)
{
    memset(s, 0, sizeof *s);
}

void tl_slices_destroy(tl_slices *s)
{
    for (int i = 0; i < s->n; i++) {
        free(s->v[i].it.image);
        free(s->v[i].box.ids);
    }
    free(s->v);
    memset(s, 0, sizeof *s);
}

bool tl_slice_id_valid(const char *id, size_t len)
{
    if (len == 0 || len > TL_PROTO_MAX_ID)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = id[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return false;
    }
    return true;
}

tl_slice *tl_slices_find(tl_slices *s, const char *id, size_t len)
{
    for (int i = 0; i < s->n; i++)
        if (strlen(s->v[i].id) == len && memcmp(s->v[i].id, id, len) == 0)
            return &s->v[i];
    return NULL;
}

tl_slice *tl_slices_add(tl_slices *s, const char *id, size_t len)
{
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 8;
        tl_slice *v = realloc(s->v, (size_t)cap * sizeof *v);
        if (!v)
            return NULL;
        s->v = v;
        s->cap = cap;
    }
    tl_slice *sl = &s->v[s->n++];
    memset(sl, 0, sizeof *sl);
    memcpy(sl->id, id, len);
    sl->id[len] = 0;
    sl->topic_len = tl_proto_slice_topic(sl->topic, sizeof sl->topic, sl->id, len);
    sl->shm_topic_len = tl_proto_shm_topic(sl->shm_topic, sizeof sl->shm_topic, sl->id, len);
    sl->engine_id = -1;
    sl->policy = (tl_update_policy){1, true, 10.0};
    sl->wire_dtype = TL_PROTO_F32;
    return sl;
}

void tl_slices_remove(tl_slices *s, tl_slice *sl)
{
    free(sl->it.image);
    free(sl->box.ids);
    *sl = s->v[--s->n]; /* order does not matter; pointers into v are not kept */
}

void tl_slice_box_plane(const tl_slice *sl, uint32_t rows, uint32_t cols, uint32_t k,
                        tl_slice_spec *out, uint32_t *planes)
{
    const tl_slice_box *b = &sl->box;
    const uint32_t n = b->depth ? b->depth : rows;
    const double s = sl->spec.scale > 0 ? sl->spec.scale : 1.0;
    const uint32_t h = sl->spec.height ? sl->spec.height : cols;
    const uint32_t w = sl->spec.width ? sl->spec.width : cols;
    const double cx = b->has_center ? b->center[0] : 0, cy = b->has_center ? b->center[1] : 0;
    const double cz = b->has_center ? b->center[2] : (rows - 1) / 2.0;
    const double z = cz + ((double)k - (n - 1) / 2.0) * s;
    const float o[9] = {(float)(w * s), 0, 0, 0, (float)(h * s), 0, (float)(cx - w * s / 2),
                        (float)(cy - h * s / 2), (float)z};
    tl_slice_spec_plane(out, o, h, w);
    out->scale = s;
    *planes = n;
}

bool tl_slice_fits(const tl_slice *sl, uint32_t rows, uint32_t cols)
{
    if (!sl->box.on)
        return tl_slice_inside(&sl->spec, rows, cols);
    tl_slice_spec first, last;
    uint32_t n;
    tl_slice_box_plane(sl, rows, cols, 0, &first, &n);
    tl_slice_box_plane(sl, rows, cols, n - 1, &last, &n);
    return tl_slice_inside(&first, rows, cols) && tl_slice_inside(&last, rows, cols);
}

uint32_t tl_slice_plane_height(const tl_slice *sl)
{
    return sl->box.on && sl->box.planes ? sl->height / sl->box.planes : sl->height;
}

void tl_slice_touch(tl_slice *sl)
{
    sl->pending++;
    sl->dirty = true;
    sl->it.since_data = 0;
    sl->it.converged = false;
}

void tl_slice_iter_restart(tl_slice *sl)
{
    tl_slice_iter *it = &sl->it;
    it->started = false;
    it->total = it->since_data = 0;
    it->residual = 0;
    it->converged = false;
}

bool tl_slice_iter_prepare(tl_slice *sl)
{
    tl_slice_iter *it = &sl->it;
    tl_slice_iter_restart(sl);
    size_t need = (size_t)sl->height * sl->width * (it->planes > 1 ? it->planes : 1);
    if (!it->on || need <= it->image_floats)
        return true;
    float *img = realloc(it->image, need * sizeof *img);
    if (!img)
        return false;
    it->image = img;
    it->image_floats = need;
    return true;
}

void tl_slice_iter_ran(tl_slice *sl, uint32_t done, const double *residual)
{
    tl_slice_iter *it = &sl->it;
    for (uint32_t i = 0; i < done; i++) {
        bool settled = it->since_data > 0 && it->o.tolerance > 0 &&
                       fabs(it->residual - residual[i]) < it->o.tolerance;
        it->residual = residual[i];
        it->total++;
        it->since_data++;
        it->converged = it->converged || settled;
    }
    it->started = true;
    it->converged = it->converged || it->since_data >= it->max_iterations;
}

bool tl_slice_refining(const tl_slice *sl)
{
    return sl->it.on && sl->it.started && !sl->it.converged;
}

void tl_slice_note_wanted(tl_slice *sl, bool tcp, bool shm)
{
    if ((tcp && !sl->was_tcp) || (shm && !sl->was_shm))
        sl->want_new = true;
    sl->was_tcp = tcp;
    sl->was_shm = shm;
}

bool tl_slice_due(tl_slice *sl, bool wanted, bool have_data, uint64_t now_ns, uint64_t *wake_ns)
{
    tl_slice_note_wanted(sl, wanted, false);
    return tl_slice_due_now(sl, wanted, have_data, now_ns, wake_ns);
}

bool tl_slice_due_now(const tl_slice *sl, bool wanted, bool have_data, uint64_t now_ns,
                      uint64_t *wake_ns)
{
    if (!wanted || !have_data)
        return false;
    bool trigger = tl_slice_urgent(sl) || (sl->dirty && sl->pending >= sl->policy.every) ||
                   tl_slice_refining(sl);
    if (!trigger)
        return false;
    bool owed_once = !sl->it.on && (sl->want_final || sl->want_complete);
    if (owed_once)
        return true;
    uint64_t interval = (uint64_t)(1e9 / sl->policy.max_rate);
    if (sl->last_ns && now_ns < sl->last_ns + interval) {
        if (sl->last_ns + interval < *wake_ns)
            *wake_ns = sl->last_ns + interval;
        return false;
    }
    return true;
}

bool tl_slice_urgent(const tl_slice *sl)
{
    return sl->want_final || sl->want_param || sl->want_new || sl->want_complete;
}

bool tl_slice_served_before(const tl_slice *a, const tl_slice *b)
{
    bool ua = tl_slice_urgent(a), ub = tl_slice_urgent(b);
    return ua != ub ? ua : a->last_ns < b->last_ns;
}

void tl_slice_computed(tl_slice *sl, uint64_t now_ns)
{
    sl->pending = 0;
    sl->dirty = false;
    sl->want_complete = sl->want_param = sl->want_new = sl->want_final = false;
    sl->last_ns = now_ns;
}
