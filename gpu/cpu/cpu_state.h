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
#include <stdbool.h>

#include "gpu/base/backend.h"
#include "gpu/base/pool.h"

typedef struct {
    tl_engine_config cfg;
    tl_errbuf *eb;
    bool f64;
    size_t real_size;       /* sizeof(float) or sizeof(double) */
    size_t padded;          /* filter length P */
    uint32_t rows, cols, n; /* detector rows, columns, window slots */

    void *window;   /* real[rows][n][cols] */
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
void tl_cpu_bp_row_f32(tl_cpu_state *s, const tl_bp_slice *sl, uint32_t row,
                       const tl_bp_proj *proj, size_t nproj, int thread, tl_cpu_dst dst,
                       double *acc);
void tl_cpu_bp_row_f64(tl_cpu_state *s, const tl_bp_slice *sl, uint32_t row,
                       const tl_bp_proj *proj, size_t nproj, int thread, tl_cpu_dst dst,
                       double *acc);

#endif
