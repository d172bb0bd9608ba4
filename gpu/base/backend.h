/* backend.h — the operation table a reconstruction backend implements (internal to gpu/).
 *
 * It sits below the engine (gpu/) and the backends (gpu/cpu/, gpu/cuda/) alike, so that
 * each backend sees only this table and gpu/base/, never the engine above it; the engine
 * reaches a backend through the table it exports (gpu/cpu/cpu.h, gpu/cuda/cuda.h).
 *
 * The engine (the files of gpu/) owns everything that is the same on every backend: checking
 * frames, the rolling-window bookkeeping (which index lives in which slot), the dark/flat
 * batch rule, filter design, slice geometry and angular weights. A backend owns the
 * numbers: it keeps the dark/flat averages and the filtered window in its own memory
 * (host RAM or GPU), turns one raw frame into one filtered projection in a given slot,
 * and back-projects planes from a list of slots.
 *
 * Every operation reports failure through the tl_errbuf handed to create(), naming the
 * failing call; it never prints and never exits.
 */
#ifndef TL_BACKEND_H
#define TL_BACKEND_H

#include "gpu/base/fail.h"
#include "gpu/base/phase.h"
#include "gpu/base/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One projection of a back-projection job, in the units of ARCHITECTURE.md §3.1:
 * the ray through (x, y) hits column u = center + x cos(theta) - y sin(theta).
 * In cone beam (tl_bp_job.geometry CONE) `cone` says where a volume point goes instead
 * (gpu/geometry/cone_beam.c): the 3x4 projection matrix from volume coordinates
 * (slice.h) to the detector, divided by the isocentre's depth, so that
 *   (a, b, w) = cone . (x, y, z, 1):   u = a / w, v = b / w (column, row),
 * and w is the point's depth relative to the isocentre's: FDK weighs the sample
 * weight / w^2 (Feldkamp et al. 1984), and a point with w <= 0 (at or behind the source)
 * adds nothing. */
typedef struct {
    uint32_t slot; /* where the filtered projection lives in the window */
    double cos_t, sin_t;
    double center;    /* engine centre + the projection's own correction */
    double weight;    /* FBP weight (pi / N for uniform angles) */
    double cone[12];  /* cone beam only (above), row-major */
} tl_bp_proj;

/* One slice of a job: a plane (xaxis, yaxis, base; see engine.h) sampled on h x w pixels. */
typedef struct {
    float plane[9];
    uint32_t height, width;
    float *out; /* host memory, height * width floats */
} tl_bp_slice;

typedef struct {
    tl_geometry geometry; /* PARALLEL: proj's (cos, sin, center); CONE: proj's cone matrix */
    const tl_bp_slice *slices;
    size_t nslices;
    const tl_bp_proj *proj;
    size_t nproj;
    const char *force;               /* kernel name to use ("" or NULL: the backend chooses) */
    tl_quality quality;              /* worst quality mode allowed */
    const tl_kernel_choice *choices; /* the tuned kernels by slice size (engine.h) */
    size_t nchoices;
    const char *kernel;        /* set by the backend: name of the kernel it used ("mixed" when
                           slices differed) */
    const char **slice_kernel; /* NULL, or nslices entries the backend sets to the name of
                                  each slice's kernel (static strings) */
} tl_bp_job;

/* Where a slice's pixels lie, in volume coordinates: pixel (i, j) (row, column) at
 * p00 + i di + j dj, that is the plane's base + s xaxis + t yaxis with s = (j + 0.5) / w
 * and t = 1 - (i + 0.5) / h (engine.h), in double. */
typedef struct {
    double p00[3], di[3], dj[3];
} tl_bp_grid;

static inline tl_bp_grid tl_bp_slice_grid(const tl_bp_slice *sl)
{
    const float *o = sl->plane;
    const double h = sl->height, w = sl->width, s0 = 0.5 / w, t0 = 1.0 - 0.5 / h;
    tl_bp_grid g;
    for (int a = 0; a < 3; a++) {
        g.p00[a] = o[6 + a] + s0 * o[a] + t0 * o[3 + a];
        g.di[a] = -o[3 + a] / h;
        g.dj[a] = o[a] / w;
    }
    return g;
}

/* An iterative problem (gpu/method/iterative.c): the slices x is made of and the views it
 * is reconstructed from. The system matrix A is the transpose of the pixel-driven back
 * projection, unweighted (project_ref.h's matched pair), so A^T is the engine's own back
 * projection; or Joseph's pair (ray-driven; in cone beam on a stack that forms a voxel
 * grid, gpu/base/joseph.h).
 *   PARALLEL  one horizontal slice (a plane at constant z: a 2-D problem of its own):
 *             pixel (i, j) links to the two bins around its u = center + x cos - y sin
 *             with weights 1 - f and f, zero off the detector; b is the measurements' row
 *             at the slice's z (linear between two rows at a fractional z);
 *   CONE      every pixel of every slice (a stack of planes, e.g. parallel to a
 *             tomosynthesis detector: the rays cross them all, so they are one problem)
 *             links to the four detector pixels around its (u, v) = the view's cone matrix
 *             (tl_bp_proj.cone) applied to it, bilinearly, weighed 1 / w^2 as FDK's back
 *             projection, zero off the detector and at or behind the source; b is every
 *             detector pixel of each view.
 * The measurements are unfiltered and unweighted (the window with filter none in parallel
 * beam, else the kept measurements, tl_engine_config.keep_measurements). */
typedef struct {
    tl_geometry geometry;
    tl_projector projector;    /* the pair (types.h); cone beam: MATCHED */
    const tl_bp_slice *slices; /* planes, heights, widths; out unused */
    uint32_t nslices;          /* parallel beam: 1 */
    const tl_bp_proj *proj;    /* slot, and (cos_t, sin_t, center) or cone (weight unused) */
    uint32_t nproj;
    double unit_z; /* cone beam: a volume unit along z in units along x and y (pixel_v /
                      pixel_u): the metric of Joseph's path lengths (gpu/base/joseph.h) */
} tl_it_problem;

/* The pixels of a problem: x's length. */
static inline size_t tl_it_pixels(const tl_it_problem *p)
{
    size_t n = 0;
    for (uint32_t i = 0; i < p->nslices; i++)
        n += (size_t)p->slices[i].height * p->slices[i].width;
    return n;
}

/* A subset of a problem's views: first, first + stride, ..., count of them. */
typedef struct {
    uint32_t first, stride, count;
} tl_it_views;

/* What it_forward leaves for it_backward in each measurement of a subset's views:
 *   SART      R (b - A x), R = 1 / (A 1) (0 where a ray links no pixel);
 *   EM        b / (A x) (0 where A x <= 0);
 *   RESIDUAL  nothing.
 * Each sets *sumsq (when not NULL) to the sum of (b - A x)^2 over the subset. */
typedef enum { TL_IT_SART = 0, TL_IT_EM, TL_IT_RESIDUAL } tl_it_rule;

typedef struct tl_backend_ops {
    const char *name;
    /* Memory the configuration needs; must not allocate. padded is the filter length. */
    tl_status (*estimate)(const tl_engine_config *c, size_t padded, tl_memory_estimate *m,
                          tl_errbuf *eb);
    tl_status (*create)(const tl_engine_config *c, size_t padded, tl_errbuf *eb, void **state);
    void (*destroy)(void *state);
    /* Filter response H[k], k = 0 .. padded/2, as made by tl_filter_response; the backend
     * applies H[k] / padded (unnormalised FFTs). NULL means no filtering. */
    tl_status (*set_filter)(void *state, const double *response);
    /* Starts a new dark or flat batch (the old average stays in use until the first frame of
     * the new batch arrives). */
    tl_status (*calib_reset)(void *state, tl_frame_kind kind);
    /* Adds a frame to the current batch; count is the batch size including it. The average
     * (sum / count) becomes the one projections are corrected with. */
    tl_status (*calib_add)(void *state, const tl_frame *f, uint32_t count);
    /* Preprocesses and filters one projection into slot. */
    tl_status (*store)(void *state, const tl_frame *f, uint32_t slot);
    tl_status (*backproject)(void *state, tl_bp_job *job);
    size_t (*memory_used)(const void *state);
    const char *(*device_name)(const void *state);
    /* Accumulators of tracked slices (engine.h, tl_engine_track), keyed by slice id.
     * acc_alloc makes room for h x w values (contents undefined until written);
     * acc_update writes into the accumulators of ids[k] (the slices of job, in order):
     * with add false, acc = the back projection of all of job->proj (a full rebuild);
     * with add true, acc += the contribution of job->proj (at most TL_ACC_BATCH
     * projections, each with its own weight, whose sign says add or remove: one pass over
     * the accumulator for all of them).
     * acc_read copies them into out[k] (host). Work is ordered with store() as the engine
     * calls them, so a subtraction issued before a store sees the slot's old contents. */
    tl_status (*acc_alloc)(void *state, int id, uint32_t height, uint32_t width);
    void (*acc_free)(void *state, int id);
    tl_status (*acc_update)(void *state, tl_bp_job *job, const int *ids, bool add);
    tl_status (*acc_read)(void *state, const int *ids, size_t n, float *const *out);
    /* The kernels this backend has (engine.h, tl_engine_kernels). */
    size_t (*kernels)(const void *state, tl_kernel_info *out, size_t cap);
    /* Benchmarks (engine.h): every kernel able to serve job, each timed reps times after a
     * warm-up, outputs into internal buffers; and the per-frame store path. */
    tl_status (*bench)(void *state, tl_bp_job *job, int reps, tl_bench_row *rows, size_t cap,
                       size_t *n);
    tl_status (*bench_store)(void *state, const tl_frame *f, int reps, double *ms);
    void (*device_id)(const void *state, tl_device_id *id);
    /* Micro-benchmarks of the device (engine.h); NULL where there are none. */
    tl_status (*hw_rates)(void *state, tl_hw_rate *out, size_t cap, size_t *n);
    /* Fences (engine.h, tl_engine_frames_done), for backends whose store() returns before
     * the work is done; NULL where store() is synchronous. fence marks fence i (of
     * TL_BACKEND_FENCES) as reached once all work enqueued so far is done; fence_done sets
     * *done to whether it has been reached, waiting for it first when wait is true. */
    tl_status (*fence)(void *state, unsigned i);
    tl_status (*fence_done)(void *state, unsigned i, bool wait, bool *done);
    /* Runs the filtering of projections held for a batch (engine.h, tl_engine_flush); NULL
     * where store() holds nothing. A backend that holds frames runs them first in every
     * operation that needs them done, and a fence asked for while frames are held is
     * reached only after them (fence_done with wait runs them). */
    tl_status (*flush)(void *state);
    /* Per-frame corrections (types.h, tl_corrections; the dezinger threshold comes with the
     * configuration). set_phase hands over the phase filter the engine designed
     * (gpu/method/paganin.h), once after create; corr_counts says how many pixels the
     * dezinger has replaced in the frames done so far, without waiting. NULL where a
     * backend has no corrections: the engine refuses them there. */
    tl_status (*set_phase)(void *state, const tl_phase_filter *f);
    tl_status (*corr_counts)(void *state, uint64_t *replaced);
    /* Times of the correction stages of frames whose work has completed since the last
     * call, oldest first, at most cap (*n of them); never waits. */
    tl_status (*stage_times)(void *state, tl_stage_time *out, size_t cap, size_t *n);
    /* Ring removal (types.h, tl_rings; gpu/base/rings.h): recomputes the stripe estimate
     * from the column profile; when it moved by more than the tolerance, every slot of the
     * window is brought to the new estimate (*changed true: the engine rebuilds tracked
     * slices). Ordered with store() like everything else. */
    tl_status (*ring_update)(void *state, bool *changed);
    /* Centre estimation (gpu/center.c): with config center_estimate the backend keeps, for
     * each projection, its column profile (the mean over the detector rows of what is
     * stored, before the filter) at position `pos` of a ring of TL_CENTER_PROFILES; set
     * where the next projection's goes (before its store; -1: nowhere), and copy n of
     * them (cols floats each) into out, after the work queued before (this waits). */
    /* Half acquisition (gpu/halfacq.c): each projection, after -log and the ring
     * correction, is multiplied column by column by w (cols values), once given. */
    tl_status (*set_column_weights)(void *state, const double *w);
    /* Cone beam (gpu/geometry/cone_beam.c): each projection, after the column weights, is
     * multiplied pixel by pixel by w (rows x cols values, row-major: FDK's cosine weights),
     * once given. */
    tl_status (*set_pixel_weights)(void *state, const double *w);
    tl_status (*profile_slot)(void *state, int32_t pos);
    tl_status (*profiles)(void *state, const uint32_t *pos, size_t n, float *out);
    /* Iterative reconstruction (gpu/method/iterative.c runs the method; the backend keeps
     * one problem, tl_it_problem above, and does the arithmetic on its device). NULL where
     * a backend has none: the engine refuses iterative methods there.
     * it_begin gathers b from the window and sets x = 0; stats gets ||b||^2 and min b.
     * it_image copies `in` (host, height x width; NULL: keep) into x, then x into `out`
     * (NULL: none). it_forward and it_backward run one subset (tl_it_rule above):
     * backward sets g = A_S^T r and c = A_S^T 1 and, where c > 0, x += lambda g / c
     * (SART) or x *= g / c (EM). it_regularise, after an iteration: x = max(x, 0) when
     * nonneg, then tv_steps steps of iterative_ref.h's TV descent, each of length
     * tv_weight ||x - x_mark||, x_mark being x as it_mark last saw it. it_end ends the
     * problem (a backend may keep its buffers for the next; they go with the backend). */
    tl_status (*it_begin)(void *state, const tl_it_problem *p, double stats[2]);
    tl_status (*it_image)(void *state, const float *in, float *out);
    tl_status (*it_forward)(void *state, tl_it_views v, tl_it_rule rule, double *sumsq);
    tl_status (*it_backward)(void *state, tl_it_views v, tl_it_rule rule, double lambda);
    /* One SART iteration: it_forward and it_backward of view 0, then view 1, ... (each a
     * subset), done in one go where the backend can (the CUDA backend's on-chip sweep);
     * *swept false and nothing done where it cannot (NULL: never). */
    tl_status (*it_sweep)(void *state, double lambda, bool *swept);
    tl_status (*it_mark)(void *state);
    tl_status (*it_regularise)(void *state, bool nonneg, double tv_weight, uint32_t tv_steps);
    void (*it_end)(void *state);
} tl_backend_ops;

/* Profiles kept for the centre estimation: 2 windows + 2 (every projection and the one
 * half a turn before it), at most this many. */
#define TL_CENTER_PROFILES_MAX 4096u
static inline uint32_t tl_center_profiles(uint32_t window)
{
    uint64_t n = 2ull * window + 2;
    return n < TL_CENTER_PROFILES_MAX ? (uint32_t)n : TL_CENTER_PROFILES_MAX;
}

/* Frames whose stage times a backend keeps until they are read (stage_times). */
#define TL_STAGE_RING 64

#define TL_BACKEND_FENCES 64 /* frames whose work may be outstanding at once */
#define TL_ACC_BATCH 8       /* projections of one incremental update (acc_update, add) */

#ifdef __cplusplus
}
#endif
#endif
