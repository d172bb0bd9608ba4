/* remote_codec.c — a configuration, a frame and a job on the wire (remote_impl.h), each
 * written and read here side by side so that the two cannot drift apart. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "gpu/remote_impl.h"

/* The sizes of the structures that travel as their bytes. */
static void build_sizes(uint64_t sizes[7])
{
    const uint64_t mine[7] = {sizeof(tl_engine_config),  sizeof(tl_frame),
                              sizeof(tl_bp_proj),        sizeof(tl_bp_slice),
                              sizeof(tl_kernel_choice),  sizeof(tl_device_id),
                              sizeof(tl_memory_estimate)};
    memcpy(sizes, mine, sizeof mine);
}

void tl_remote_put_build(tl_wire *w)
{
    uint64_t sizes[7];
    build_sizes(sizes);
    tl_wire_put_str(w, PACKAGE_VERSION);
    tl_wire_put(w, sizes, sizeof sizes);
}

bool tl_remote_same_build(tl_wire_reader *r)
{
    uint64_t sizes[7];
    build_sizes(sizes);
    const char *version = tl_wire_get_str(r);
    const void *theirs = tl_wire_get(r, sizeof sizes);
    return theirs && strcmp(version, PACKAGE_VERSION) == 0 &&
           memcmp(theirs, sizes, sizeof sizes) == 0;
}

void tl_remote_put_config(tl_wire *w, const tl_engine_config *c)
{
    TL_WIRE_PUT(w, *c);
    if (c->geometry == TL_GEOMETRY_CONE && c->cone.matrices)
        tl_wire_put(w, c->cone.matrices, (size_t)c->cone.nmatrices * sizeof *c->cone.matrices);
    if (c->weight_angles)
        tl_wire_put(w, c->weight_angles, (size_t)c->nweight_angles * sizeof *c->weight_angles);
}

void tl_remote_get_config(tl_wire_reader *r, tl_engine_config *c)
{
    TL_WIRE_TAKE(r, *c);
    c->link = NULL;
    if (c->geometry == TL_GEOMETRY_CONE && c->cone.matrices)
        c->cone.matrices = tl_wire_get(r, (size_t)c->cone.nmatrices * sizeof *c->cone.matrices);
    if (c->weight_angles)
        c->weight_angles = tl_wire_get(r, (size_t)c->nweight_angles * sizeof *c->weight_angles);
}

void tl_remote_put_frame(tl_wire *w, const tl_frame *f)
{
    TL_WIRE_PUT(w, *f);
    size_t row = (size_t)f->cols * tl_dtype_size(f->dtype);
    size_t pitch = f->pitch ? f->pitch : row;
    unsigned char *px = tl_wire_room(w, row * f->rows);
    for (uint32_t i = 0; px && i < f->rows; i++)
        memcpy(px + i * row, (const unsigned char *)f->data + i * pitch, row);
}

void tl_remote_get_frame(tl_wire_reader *r, tl_frame *f)
{
    TL_WIRE_TAKE(r, *f);
    f->pitch = 0;
    f->memory = TL_MEMORY_HOST;
    f->pinned = false;
    f->read_later = false;
    f->data = tl_wire_get(r, (size_t)f->rows * f->cols * tl_dtype_size(f->dtype));
}

/* One slice of a job as it travels: the output stays behind. */
typedef struct {
    float plane[9];
    uint32_t height, width;
    uint32_t has_out;
} wire_slice;

/* Slices as they travel: planes and sizes, and whether each has an output. */
static void put_slices(tl_wire *w, const tl_bp_slice *sl, size_t n)
{
    wire_slice *ws = tl_wire_room(w, n * sizeof *ws);
    for (size_t i = 0; ws && i < n; i++) {
        memcpy(ws[i].plane, sl[i].plane, sizeof ws[i].plane);
        ws[i].height = sl[i].height;
        ws[i].width = sl[i].width;
        ws[i].has_out = sl[i].out != NULL;
    }
}

void tl_remote_put_job(tl_wire *w, const tl_bp_job *job)
{
    const uint64_t counts[3] = {job->nslices, job->nproj, job->nchoices};
    const uint32_t modes[3] = {job->geometry, job->quality, job->slice_kernel != NULL};
    tl_wire_put(w, counts, sizeof counts);
    tl_wire_put(w, modes, sizeof modes);
    tl_wire_put_str(w, job->force);
    put_slices(w, job->slices, job->nslices);
    tl_wire_put(w, job->proj, job->nproj * sizeof *job->proj);
    tl_wire_put(w, job->choices, job->nchoices * sizeof *job->choices);
}

bool tl_remote_scratch_reserve(tl_remote_scratch *s, size_t n, size_t px)
{
    if (n > s->cap) {
        tl_bp_slice *sl = realloc(s->slices, n * sizeof *sl);
        if (sl)
            s->slices = sl;
        const char **k = realloc(s->kernels, n * sizeof *k);
        if (k)
            s->kernels = k;
        if (!sl || !k)
            return false;
        s->cap = n;
    }
    if (px > s->planes_cap) {
        float *p = realloc(s->planes, px * sizeof *p);
        if (!p)
            return false;
        s->planes = p;
        s->planes_cap = px;
    }
    return true;
}

bool tl_remote_get_job(tl_wire_reader *r, tl_bp_job *job, tl_remote_scratch *s)
{
    uint64_t counts[3];
    uint32_t modes[3];
    tl_wire_take(r, counts, sizeof counts);
    tl_wire_take(r, modes, sizeof modes);
    memset(job, 0, sizeof *job);
    job->geometry = (tl_geometry)modes[0];
    job->quality = (tl_quality)modes[1];
    const char *force = tl_wire_get_str(r);
    job->force = force[0] ? force : NULL;
    const wire_slice *ws = tl_wire_get(r, counts[0] * sizeof *ws);
    job->proj = tl_wire_get(r, counts[1] * sizeof *job->proj);
    job->choices = tl_wire_get(r, counts[2] * sizeof *job->choices);
    if (r->short_read)
        return false;
    size_t px = 0;
    for (size_t i = 0; i < counts[0]; i++)
        px += ws[i].has_out ? (size_t)ws[i].height * ws[i].width : 0;
    if (!tl_remote_scratch_reserve(s, counts[0], px))
        return false;
    px = 0;
    for (size_t i = 0; i < counts[0]; i++) {
        tl_bp_slice *sl = &s->slices[i];
        memcpy(sl->plane, ws[i].plane, sizeof sl->plane);
        sl->height = ws[i].height;
        sl->width = ws[i].width;
        sl->out = ws[i].has_out ? s->planes + px : NULL;
        px += ws[i].has_out ? (size_t)sl->height * sl->width : 0;
        s->kernels[i] = NULL;
    }
    job->slices = s->slices;
    job->nslices = counts[0];
    job->nproj = counts[1];
    job->nchoices = counts[2];
    job->slice_kernel = modes[2] ? s->kernels : NULL;
    return true;
}

void tl_remote_put_problem(tl_wire *w, const tl_it_problem *p)
{
    const uint32_t head[4] = {p->geometry, p->projector, p->nslices, p->nproj};
    tl_wire_put(w, head, sizeof head);
    TL_WIRE_PUT(w, p->unit_z);
    put_slices(w, p->slices, p->nslices); /* outputs unused: get_problem ignores the flag */
    tl_wire_put(w, p->proj, p->nproj * sizeof *p->proj);
}

bool tl_remote_get_problem(tl_wire_reader *r, tl_it_problem *p, tl_remote_scratch *s)
{
    uint32_t head[4];
    tl_wire_take(r, head, sizeof head);
    memset(p, 0, sizeof *p);
    TL_WIRE_TAKE(r, p->unit_z);
    const wire_slice *ws = tl_wire_get(r, (size_t)head[2] * sizeof *ws);
    p->proj = tl_wire_get(r, (size_t)head[3] * sizeof *p->proj);
    if (r->short_read || !tl_remote_scratch_reserve(s, head[2], 0))
        return false;
    for (uint32_t i = 0; i < head[2]; i++) {
        memcpy(s->slices[i].plane, ws[i].plane, sizeof ws[i].plane);
        s->slices[i].height = ws[i].height;
        s->slices[i].width = ws[i].width;
        s->slices[i].out = NULL;
    }
    p->geometry = (tl_geometry)head[0];
    p->projector = (tl_projector)head[1];
    p->slices = s->slices;
    p->nslices = head[2];
    p->nproj = head[3];
    return true;
}
