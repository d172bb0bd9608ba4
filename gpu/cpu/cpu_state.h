/* cpu_state.h — the CPU backend's state, shared by its ops table (cpu_backend.c) and its
 * numeric kernels (kernels_impl.h, compiled once for float and once for double).
 *
 * Arrays typed void * hold `real` values: float in the normal mode, double in the float64
 * reference mode. The window is stored sinogram-major, [row][slot][col], so a horizontal
 * slice reads one contiguous sinogram and a new projection is written as `rows` short
 * contiguous runs.
 */
#ifndef TL_CPU_STATE_H
#define TL_CPU_STATE_H

#include <fftw3.h>
#include <pthread.h>
#include <stdbool.h>

#include "gpu/base/backend.h"
#include "gpu/base/parker.h"
#include "gpu/base/phase.h"
#include "gpu/base/pool.h"

typedef struct {
    tl_engine_config cfg;
    tl_errbuf *eb;
    bool f64;
    size_t real_size;       /* sizeof(float) or sizeof(double) */
    size_t padded;          /* filter length P */
    uint32_t rows, cols, n; /* detector rows, columns, window slots */

    void *window;   /* real[rows][n][cols] */
    void *meas;     /* like window, the projections before the filter; NULL unless
                       cfg.keep_measurements */
    double *sum[2]; /* current dark (0) and flat (1) batch sums */
    void *avg[2];   /* real[rows * cols]: dark and flat averages in use */
    bool have[2];   /* an average exists */
    void *gain;     /* real[rows * cols]: 1 / max(F - D, eps), valid when have[1] */
    void *response; /* real[P/2 + 1]: H / P; NULL = no filtering */
    bool filter_on;

    fftwf_plan r2c_f, c2r_f;
    fftw_plan r2c_d, c2r_d;

    tl_pool *pool;
    int nthreads;
    void **pad;    /* per thread: real[P] */
    void **spec;   /* per thread: complex[P/2 + 1] */
    void **rowbuf; /* per thread: real[row_cap], one output row being summed */
    size_t row_cap;

    double **acc;     /* per slice id: double[h * w], the tracked slices' accumulators
                               (double in both modes: no drift, so no periodic rebuild) */
    size_t *acc_size; /* per slice id: h * w */
    int nacc;         /* entries of acc and acc_size (indexed by slice id) */

    /* per-frame corrections (corrections.c), allocated when configured */
    bool corr_on;          /* dezinger or phase: frames take the staged path */
    void *frame[2];        /* real[rows * cols]: counts, then dezingered counts */
    uint64_t *replaced;    /* per thread: pixels the dezinger replaced in this frame */
    uint64_t replaced_sum; /* since creation */
    bool phase_on;
    tl_phase_filter phase; /* shape (response NULL: kept in phase_resp) */
    void *phase_buf;       /* real[prow * pcol]: padded transmission */
    void *phase_spec;      /* complex[prow * (pcol/2 + 1)] */
    void *phase_resp;      /* real[prow * (pcol/2 + 1)]: H / (prow pcol) */
    fftwf_plan phase_r2c_f, phase_c2r_f;
    fftw_plan phase_r2c_d, phase_c2r_d;
    /* ring removal (rings.c): the column profile m (double), the correction in use c
     * (real), the new estimate and the filtered change (scratch of ring_update) */
    bool rings_on;
    double *ring_m, *ring_est;
    void *ring_c, *ring_fd;
    double **ring_tmp; /* per thread: FW transform or VO neighbourhood */
    uint64_t ring_frames;
    double ring_weight; /* of the frame being stored in the profile */
    double ring_update_s;  /* the last ring_update's time, not yet read (< 0: none) */
    void *colw; /* real[cols]: half acquisition's column weights (NULL: none) */
    void *pixw; /* real[rows * cols]: cone beam's cosine weights (NULL: none) */
    tl_parker parker; /* a short cone-beam scan's weights (gpu/base/parker.h) */
    void *parker_w;   /* real[cols]: the frame being stored's Parker weights (NULL: none) */
    /* centre estimation (profile.c): the column profiles ring, float[nprof][cols], the
     * position of the projection being stored (-1: none), per-thread column sums */
    float *prof;
    uint32_t nprof;
    int32_t prof_pos;
    double **prof_acc;
    /* stage times of the last frames (tl_engine_stage_times): frame k in slot
     * k % TL_STAGE_RING, frames [stage_read, stage_written) not read yet */
    double stage_s[TL_STAGE_RING][TL_STAGE_COUNT];
    unsigned stage_mask[TL_STAGE_RING]; /* bit s: stage s ran */
    uint64_t stage_read, stage_written;

    struct tl_cpu_iter *it; /* the iterative problem (iterative.c; NULL: none) */
    struct tl_cpu_itc *itc; /* ... a cone-beam one (iterative_cone.c; NULL: none) */

    size_t mem; /* bytes allocated */
    char device_name[64];
} tl_cpu_state;

/* Where a back-projected row goes: the slice's float output, or a tracked slice's double
 * accumulator (replaced, or added to: an evicted projection comes with a negative weight). */
typedef enum { TL_CPU_OUT = 0, TL_CPU_ACC_SET, TL_CPU_ACC_ADD } tl_cpu_dst;

/* Clamp of flat-field ratios and denominators before -log (engine.h, tl_engine_submit). */
#define TL_CPU_MIN_RATIO 1e-6

/* The kernels, per precision (defined in kernels_f32.c and kernels_f64.c). */
void tl_cpu_calib_row_f32(tl_cpu_state *s, const tl_frame *f, int kind, uint32_t count,
                          uint32_t row);
void tl_cpu_calib_row_f64(tl_cpu_state *s, const tl_frame *f, int kind, uint32_t count,
                          uint32_t row);
void tl_cpu_store_row_f32(tl_cpu_state *s, const tl_frame *f, uint32_t slot, uint32_t row,
                          int thread);
void tl_cpu_store_row_f64(tl_cpu_state *s, const tl_frame *f, uint32_t slot, uint32_t row,
                          int thread);
void tl_cpu_convert_row_f32(tl_cpu_state *s, const tl_frame *f, uint32_t r);
void tl_cpu_convert_row_f64(tl_cpu_state *s, const tl_frame *f, uint32_t r);
uint64_t tl_cpu_dezinger_row_f32(tl_cpu_state *s, uint32_t r);
uint64_t tl_cpu_dezinger_row_f64(tl_cpu_state *s, uint32_t r);
void tl_cpu_flat_row_f32(tl_cpu_state *s, const void *in, void *out, uint32_t r);
void tl_cpu_flat_row_f64(tl_cpu_state *s, const void *in, void *out, uint32_t r);
void tl_cpu_finish_row_f32(tl_cpu_state *s, const void *in, bool correct, uint32_t slot,
                           uint32_t r, int thread);
void tl_cpu_finish_row_f64(tl_cpu_state *s, const void *in, bool correct, uint32_t slot,
                           uint32_t r, int thread);
void tl_cpu_phase_pad_row_f32(tl_cpu_state *s, uint32_t r);
void tl_cpu_phase_pad_row_f64(tl_cpu_state *s, uint32_t r);
void tl_cpu_phase_filter_f32(tl_cpu_state *s);
void tl_cpu_phase_filter_f64(tl_cpu_state *s);
/* The filter (as set_filter gave it) of n values at pad (thread's buffer, P long) into
 * dst (n = cols values). */
void tl_cpu_filter_values_f32(tl_cpu_state *s, void *pad, void *dst, int thread);
void tl_cpu_filter_values_f64(tl_cpu_state *s, void *pad, void *dst, int thread);

/* FFTW's planner is not thread-safe; engines may be created on several threads. */
extern pthread_mutex_t tl_cpu_planner_lock;

/* corrections.c: the corrected per-frame path and its state */
tl_status tl_cpu_corr_create(tl_cpu_state *s);
void tl_cpu_corr_destroy(tl_cpu_state *s);
size_t tl_cpu_corr_estimate(const tl_engine_config *c);
tl_status tl_cpu_corr_store(tl_cpu_state *s, const tl_frame *f, uint32_t slot);
tl_status tl_cpu_set_phase(void *state, const tl_phase_filter *f);
tl_status tl_cpu_corr_counts(void *state, uint64_t *replaced);
tl_status tl_cpu_set_column_weights(void *state, const double *w);
tl_status tl_cpu_set_pixel_weights(void *state, const double *w);
tl_status tl_cpu_stage_times(void *state, tl_stage_time *out, size_t cap, size_t *n);
/* profile.c */
tl_status tl_cpu_profile_create(tl_cpu_state *s);
void tl_cpu_profile_destroy(tl_cpu_state *s);
/* Adds a row's stored values (before the filter) to the thread's column sums. */
static inline void tl_cpu_profile_add_f32(tl_cpu_state *s, const float *v, int thread)
{
    double *a = s->prof_acc[thread];
    for (uint32_t c = 0; c < s->cols; c++)
        a[c] += v[c];
}
static inline void tl_cpu_profile_add_f64(tl_cpu_state *s, const double *v, int thread)
{
    double *a = s->prof_acc[thread];
    for (uint32_t c = 0; c < s->cols; c++)
        a[c] += v[c];
}
/* After a projection's rows: its profile into the ring (when it has a position). */
void tl_cpu_profile_finish(tl_cpu_state *s);
tl_status tl_cpu_profile_slot(void *state, int32_t pos);
tl_status tl_cpu_profiles(void *state, const uint32_t *pos, size_t n, float *out);

/* iterative.c: the iterative primitives (backend.h, tl_it_problem) */
tl_status tl_cpu_it_begin(void *state, const tl_it_problem *p, double stats[2]);
tl_status tl_cpu_it_image(void *state, const float *in, float *out);
tl_status tl_cpu_it_forward(void *state, tl_it_views v, tl_it_rule rule, double *sumsq);
tl_status tl_cpu_it_backward(void *state, tl_it_views v, tl_it_rule rule, double lambda);
tl_status tl_cpu_it_mark(void *state);
tl_status tl_cpu_it_regularise(void *state, bool nonneg, double tv_weight, uint32_t tv_steps);
void tl_cpu_it_end(void *state);
/* The cone-beam problems' primitives (iterative_cone.c), to which those above hand over
 * while s->itc is set. */
tl_status tl_cpu_itc_begin(tl_cpu_state *s, const tl_it_problem *p, double stats[2]);
tl_status tl_cpu_itc_image(void *state, const float *in, float *out);
tl_status tl_cpu_itc_forward(void *state, tl_it_views v, tl_it_rule rule, double *sumsq);
tl_status tl_cpu_itc_backward(void *state, tl_it_views v, tl_it_rule rule, double lambda);
tl_status tl_cpu_itc_mark(void *state);
tl_status tl_cpu_itc_regularise(void *state, bool nonneg, double tv_weight, uint32_t tv_steps);
void tl_cpu_itc_end(tl_cpu_state *s);

/* rings.c */
tl_status tl_cpu_rings_create(tl_cpu_state *s);
void tl_cpu_rings_destroy(tl_cpu_state *s);
size_t tl_cpu_rings_estimate(const tl_engine_config *c);
tl_status tl_cpu_ring_update(void *state, bool *changed);
/* run_jobs of cpu_backend.c: fn(ctx, j, thread) for j < njobs, on the pool when `work`
 * (operations, roughly) is worth waking it */
void tl_cpu_run_jobs(tl_cpu_state *s, size_t njobs, double work, tl_pool_fn fn, void *ctx);

void tl_cpu_bp_row_f32(tl_cpu_state *s, const tl_bp_slice *sl, uint32_t row,
                       const tl_bp_proj *proj, size_t nproj, int thread, tl_cpu_dst dst,
                       double *acc);
void tl_cpu_bp_row_f64(tl_cpu_state *s, const tl_bp_slice *sl, uint32_t row,
                       const tl_bp_proj *proj, size_t nproj, int thread, tl_cpu_dst dst,
                       double *acc);
/* The same in cone beam (tl_bp_proj.cone). */
void tl_cpu_bp_cone_row_f32(tl_cpu_state *s, const tl_bp_slice *sl, uint32_t row,
                            const tl_bp_proj *proj, size_t nproj, int thread, tl_cpu_dst dst,
                            double *acc);
void tl_cpu_bp_cone_row_f64(tl_cpu_state *s, const tl_bp_slice *sl, uint32_t row,
                            const tl_bp_proj *proj, size_t nproj, int thread, tl_cpu_dst dst,
                            double *acc);

#endif
