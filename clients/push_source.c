/* push_source.c — frames for `tomolive push`: the simulated camera and TIFF stacks,
 * produced by worker threads into a ring of buffers (see push_source.h).
 *
 * Ring protocol, all under one mutex: frame p lives in buffer p % nbuf; a buffer records
 * the next position it is free for (`next`) and whether it holds a frame not yet taken
 * (`ready`). Workers claim positions in order and wait for their buffer to come back;
 * the sender takes frames in order; ZeroMQ's free function advances `next` by nbuf (after
 * the last of its `refs` releases, for a frame sent in several messages). One mutex
 * suffices: each frame costs far more than a lock.
 */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clients/hdf5.h"
#include "clients/push_source.h"
#include "clients/tiff.h"
#include "gpu/phantom.h"

#define MAX_WORKERS 16

typedef struct {
    push_source *src;
    void *buf;
    size_t next;   /* position this buffer is free for */
    bool ready;    /* holds frame `next`, not yet taken by the sender */
    unsigned refs; /* taken: releases still due before it is free (push_source_share) */
} slot;

struct push_source {
    uint32_t rows, cols;
    tl_dtype dtype;
    size_t frame_bytes;
    /* phantom */
    bool is_phantom, is_cone;
    push_phantom_opts opts;
    tl_cone_opts cone; /* is_cone: the trajectory */
    tl_phantom ph;
    tl_camera cam;
    /* TIFF: readers by tl_frame_kind (dark, flat, proj) */
    tl_tiff_reader r[3];
    bool open[3];
    /* HDF5 */
    tl_hdf5_reader h5;
    bool is_h5;
    /* production */
    push_item *items;
    size_t n, nbuf, claim, produced;
    slot *slots;
    pthread_t workers[MAX_WORKERS];
    int nworkers;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop, failed;
    char err[512];
};

static push_source *alloc_source(void)
{
    push_source *s = calloc(1, sizeof *s);
    if (s) {
        pthread_mutex_init(&s->mu, NULL);
        pthread_cond_init(&s->cv, NULL);
    }
    return s;
}

/* ---- the simulated camera ------------------------------------------------------------ */

/* The largest line integral through the phantom, sampled over 32 angles, 9 rows through
 * the phantom's body (the middle one included, where it is thickest) and every column. */
static double max_line_integral(const tl_phantom *ph, uint32_t rows, uint32_t cols, double center)
{
    double m = 0;
    for (int a = 0; a < 32; a++)
        for (int r = 0; r < 9; r++) {
            double z = (rows - 1) / 2.0 + (r - 4) / 4.0 * 0.45 * (rows - 1);
            for (uint32_t u = 0; u < cols; u++)
                m = fmax(m, tl_phantom_line_integral(ph, a * M_PI / 32, u - center, z));
        }
    return m;
}

int push_phantom_build(tl_phantom *ph, uint32_t rows, uint32_t cols, double center,
                       double attenuation)
{
    if (tl_phantom_shepp_logan(ph, 0.45 * cols, (rows - 1) / 2.0, 0.45 * rows) != 0)
        return -1;
    /* densities are per detector pixel: scale them so the sample transmits */
    double m = max_line_integral(ph, rows, cols, center);
    if (m > 0)
        tl_phantom_scale_density(ph, attenuation / m);
    return 0;
}

push_source *push_source_phantom(const push_phantom_opts *o, char *err, size_t errlen)
{
    push_source *s = alloc_source();
    if (!s) {
        snprintf(err, errlen, "out of memory for the phantom");
        return NULL;
    }
    if (o->cone && o->cone->cone) {
        s->cone = *o->cone;
        s->is_cone = true;
        if (tl_cone_opts_phantom(&s->cone, o->rows, o->cols, o->center, o->attenuation, &s->ph,
                                 err, errlen) != 0) {
            free(s);
            return NULL;
        }
    } else if (push_phantom_build(&s->ph, o->rows, o->cols, o->center, o->attenuation) != 0) {
        snprintf(err, errlen, "out of memory for the phantom");
        free(s);
        return NULL;
    }
    s->is_phantom = true;
    s->opts = *o;
    s->opts.cone = NULL; /* the copy in s->cone is the one used */
    s->rows = o->rows;
    s->cols = o->cols;
    s->dtype = o->dtype;
    s->frame_bytes = (size_t)o->rows * o->cols * tl_dtype_size(o->dtype);
    tl_camera_init(&s->cam);
    s->cam.flux = o->flux;
    s->cam.noise = o->noise;
    return s;
}

static uint64_t splitmix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Frame it's line integrals into li (rows x cols); scratch: rows x cols doubles. */
static int cone_projection(push_source *s, const push_item *it, float *li, double *scratch,
                           char *err, size_t errlen)
{
    tl_errbuf eb = {0};
    if (s->opts.matrices && it->index >= s->opts.nmatrices) { /* push.c matches the counts */
        snprintf(err, errlen, "projection %llu: no matrix (%u given)",
                 (unsigned long long)it->index, s->opts.nmatrices);
        return -1;
    }
    const double *P = s->opts.matrices ? s->opts.matrices[it->index] : NULL;
    if (tl_cone_opts_view(&s->cone, &s->ph, s->rows, s->cols, s->opts.center, it->angle, P, li,
                          scratch, &eb) != TL_OK) {
        snprintf(err, errlen, "projection %llu: %.400s", (unsigned long long)it->index, eb.msg);
        return -1;
    }
    return 0;
}

/* scratch: rows x cols line integrals (float), then in cone beam as many doubles. */
static int produce_phantom(push_source *s, const push_item *it, void *out, void *scratch,
                           char *err, size_t errlen)
{
    float *li = scratch;
    double *dl = (double *)scratch + (size_t)s->rows * s->cols / 2 + 1; /* after li, aligned */
    /* noise seeded per frame, so frames do not depend on which worker made them */
    tl_rng rng;
    tl_rng_seed(&rng, splitmix(s->opts.seed ^ splitmix(((uint64_t)it->kind << 56) ^ it->index)));
    tl_rng *r = s->opts.noise ? &rng : NULL;
    tl_sim_kind k = it->kind == TL_FRAME_DARK   ? TL_SIM_DARK
                    : it->kind == TL_FRAME_FLAT ? TL_SIM_FLAT
                                                : TL_SIM_PROJ;
    if (k == TL_SIM_PROJ && s->is_cone) {
        if (cone_projection(s, it, li, dl, err, errlen) != 0)
            return -1;
    } else if (k == TL_SIM_PROJ) {
        tl_phantom_project(&s->ph, it->angle, s->opts.center, s->rows, s->cols, li);
    }
    if (s->dtype == TL_DTYPE_U16)
        tl_camera_frame_u16(&s->cam, k, li, s->rows, s->cols, r, out);
    else
        tl_camera_frame_f32(&s->cam, k, li, s->rows, s->cols, r, out);
    return 0;
}

/* ---- TIFF stacks --------------------------------------------------------------------- */

push_source *push_source_tiff(const char *proj, const char *darks, const char *flats, char *err,
                              size_t errlen)
{
    push_source *s = alloc_source();
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    const char *paths[3] = {darks, flats, proj};
    const char *what[3] = {"darks", "flats", "projections"};
    for (int k = 2; k >= 0; k--) { /* projections first: they define the shape */
        if (!paths[k])
            continue;
        if (tl_tiff_open(&s->r[k], paths[k], err, errlen) != 0) {
            push_source_free(s);
            return NULL;
        }
        s->open[k] = true;
        if (s->r[k].rows != s->r[2].rows || s->r[k].cols != s->r[2].cols) {
            snprintf(err, errlen,
                     "shape mismatch: %s '%s' are %u x %u (rows x cols), "
                     "projections '%s' are %u x %u",
                     what[k], paths[k], s->r[k].rows, s->r[k].cols, proj, s->r[2].rows,
                     s->r[2].cols);
            push_source_free(s);
            return NULL;
        }
    }
    s->rows = s->r[2].rows;
    s->cols = s->r[2].cols;
    s->dtype = s->r[2].dtype;
    for (int k = 0; k < 2; k++)
        if (s->open[k] && s->r[k].dtype != s->dtype)
            s->dtype = TL_DTYPE_F32; /* one dtype per scan: float32 holds them all */
    s->frame_bytes = (size_t)s->rows * s->cols * tl_dtype_size(s->dtype);
    return s;
}

push_source *push_source_hdf5(const char *path, char *err, size_t errlen)
{
    push_source *s = alloc_source();
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (tl_hdf5_open(&s->h5, path, err, errlen) != 0) {
        push_source_free(s);
        return NULL;
    }
    s->is_h5 = true;
    s->rows = s->h5.rows;
    s->cols = s->h5.cols;
    s->dtype = s->h5.dtype;
    s->frame_bytes = (size_t)s->rows * s->cols * tl_dtype_size(s->dtype);
    return s;
}

const double *push_source_angles(const push_source *s)
{
    return s->is_h5 ? s->h5.angles : NULL;
}

static int produce_tiff(push_source *s, const push_item *it, void *out, void *page, char *err,
                        size_t errlen)
{
    if (s->is_h5) /* one reader thread: libhdf5 (serial) is not thread-safe */
        return it->index > UINT32_MAX
                   ? (snprintf(err, errlen, "frame %llu out of range",
                               (unsigned long long)it->index),
                      -1)
                   : tl_hdf5_read(&s->h5, it->kind, (uint32_t)it->index, out, err, errlen);
    tl_tiff_reader *r = &s->r[it->kind];
    if (!s->open[it->kind] || it->index >= r->pages) {
        static const char *what[3] = {"dark", "flat", "projection"};
        snprintf(err, errlen, "no %s page %llu", what[it->kind], (unsigned long long)it->index);
        return -1;
    }
    if (r->dtype == s->dtype)
        return tl_tiff_read_page(r, (uint32_t)it->index, out, err, errlen);
    if (tl_tiff_read_page(r, (uint32_t)it->index, page, err, errlen) != 0)
        return -1;
    size_t n = (size_t)s->rows * s->cols;
    float *f = out;
    for (size_t i = 0; i < n; i++)
        switch (r->dtype) {
            case TL_DTYPE_U8: f[i] = ((const uint8_t *)page)[i]; break;
            case TL_DTYPE_U16: f[i] = ((const uint16_t *)page)[i]; break;
            case TL_DTYPE_U32: f[i] = (float)((const uint32_t *)page)[i]; break;
            default: f[i] = ((const float *)page)[i]; break;
        }
    return 0;
}

void push_source_info(const push_source *s, uint32_t *rows, uint32_t *cols, tl_dtype *dtype,
                      uint32_t pages[3])
{
    *rows = s->rows;
    *cols = s->cols;
    *dtype = s->dtype;
    for (int k = 0; k < 3; k++)
        pages[k] = s->is_h5 ? s->h5.count[k] : s->open[k] ? s->r[k].pages : 0;
}

/* ---- the ring ------------------------------------------------------------------------ */

static void *worker(void *arg)
{
    push_source *s = arg;
    size_t npix = (size_t)s->rows * s->cols;
    /* scratch: line integrals (phantom; in cone beam also their float64 originals) or a
     * page in the file's own dtype (TIFF) */
    void *scratch =
        malloc(s->is_cone ? (npix / 2 + 1 + npix) * sizeof(double) : npix * sizeof(uint32_t));
    char err[512] = "out of memory for a worker's scratch frame";
    pthread_mutex_lock(&s->mu);
    if (!scratch) {
        s->failed = true;
        snprintf(s->err, sizeof s->err, "%s", err);
    }
    while (!s->stop && !s->failed && s->claim < s->n) {
        size_t p = s->claim++;
        slot *sl = &s->slots[p % s->nbuf];
        while (!s->stop && !(sl->next == p && !sl->ready))
            pthread_cond_wait(&s->cv, &s->mu);
        if (s->stop)
            break;
        pthread_mutex_unlock(&s->mu);
        int rc = 0;
        if (s->is_phantom)
            rc = produce_phantom(s, &s->items[p], sl->buf, scratch, err, sizeof err);
        else
            rc = produce_tiff(s, &s->items[p], sl->buf, scratch, err, sizeof err);
        pthread_mutex_lock(&s->mu);
        if (rc != 0 && !s->failed) {
            s->failed = true;
            snprintf(s->err, sizeof s->err, "%s", err);
        } else if (rc == 0) {
            sl->ready = true;
            s->produced++;
        }
        pthread_cond_broadcast(&s->cv);
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    free(scratch);
    return NULL;
}

int push_source_start(push_source *s, const push_item *items, size_t n, size_t nbuf, char *err,
                      size_t errlen)
{
    if (n == 0)
        return 0;
    s->n = n;
    s->nbuf = nbuf < n ? (nbuf ? nbuf : 1) : n;
    s->items = malloc(n * sizeof *items);
    s->slots = calloc(s->nbuf, sizeof *s->slots);
    if (!s->items || !s->slots) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memcpy(s->items, items, n * sizeof *items);
    for (size_t i = 0; i < s->nbuf; i++) {
        s->slots[i] = (slot){.src = s, .buf = malloc(s->frame_bytes), .next = i};
        if (!s->slots[i].buf) {
            snprintf(err, errlen, "out of memory for %zu frame buffers of %zu bytes", s->nbuf,
                     s->frame_bytes);
            return -1;
        }
    }
    /* libtiff handles are not thread-safe: one reader; the phantom scales with cores */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int want = s->is_phantom ? (int)(cores < 1             ? 1
                                     : cores > MAX_WORKERS ? MAX_WORKERS
                                                           : cores)
                             : 1;
    if ((size_t)want > n)
        want = (int)n;
    for (int i = 0; i < want; i++) {
        if (pthread_create(&s->workers[i], NULL, worker, s) != 0) {
            if (i == 0) {
                snprintf(err, errlen, "cannot start a worker thread");
                return -1;
            }
            break;
        }
        s->nworkers++;
    }
    return 0;
}

size_t push_source_wait(push_source *s, size_t count, double timeout_s)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until); /* the condition variable's clock */
    double t = (double)until.tv_nsec * 1e-9 + timeout_s;
    until.tv_sec += (time_t)t;
    until.tv_nsec = (long)((t - floor(t)) * 1e9);
    pthread_mutex_lock(&s->mu);
    while (s->produced < count && !s->failed &&
           pthread_cond_timedwait(&s->cv, &s->mu, &until) == 0)
        ;
    size_t n = s->produced;
    pthread_mutex_unlock(&s->mu);
    return n;
}

bool push_source_failed(push_source *s)
{
    pthread_mutex_lock(&s->mu);
    bool f = s->failed;
    pthread_mutex_unlock(&s->mu);
    return f;
}

void *push_source_frame(push_source *s, size_t p, char *err, size_t errlen)
{
    slot *sl = &s->slots[p % s->nbuf];
    pthread_mutex_lock(&s->mu);
    while (!(sl->next == p && sl->ready) && !s->failed)
        pthread_cond_wait(&s->cv, &s->mu);
    void *buf = NULL;
    if (sl->next == p && sl->ready) {
        sl->ready = false;
        sl->refs = 1;
        buf = sl->buf;
    } else {
        snprintf(err, errlen, "%s", s->err);
    }
    pthread_mutex_unlock(&s->mu);
    return buf;
}

void *push_source_hint(push_source *s, size_t p)
{
    return &s->slots[p % s->nbuf];
}

void push_source_share(push_source *s, size_t p, unsigned n)
{
    pthread_mutex_lock(&s->mu);
    s->slots[p % s->nbuf].refs = n;
    pthread_mutex_unlock(&s->mu);
}

void push_source_release(void *data, void *hint)
{
    (void)data; /* a band's release passes a pointer inside the buffer */
    slot *sl = hint;
    push_source *s = sl->src;
    pthread_mutex_lock(&s->mu);
    if (--sl->refs == 0) {
        sl->next += s->nbuf;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
}

void push_source_free(push_source *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->nworkers; i++)
        pthread_join(s->workers[i], NULL);
    for (size_t i = 0; s->slots && i < s->nbuf; i++)
        free(s->slots[i].buf);
    free(s->slots);
    free(s->items);
    for (int k = 0; k < 3; k++)
        if (s->open[k])
            tl_tiff_close(&s->r[k]);
    if (s->is_phantom)
        tl_phantom_free(&s->ph);
    if (s->is_h5)
        tl_hdf5_close(&s->h5);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
