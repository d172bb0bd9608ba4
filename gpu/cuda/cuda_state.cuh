/* cuda_state.cuh — the CUDA backend's state and the functions its files share.
 *
 * One tl_cuda_state per engine. Everything in it is allocated in create() (cuda_backend.cu);
 * the per-frame path (store.cu) and the reconstruct path (backproject.cu) only enqueue work
 * on the engine's stream. The only buffer that may grow later is the slice output buffer,
 * and only when a larger set of slices than ever before is requested.
 *
 * Window layout in device memory: [detector row][slot][column], the CPU backend's layout,
 * with padding:
 *
 *   value (row r, slot k, column c) at  window + r * slab_el + k * pitch_el + c
 *
 * so each detector row owns one contiguous sinogram of n slots ("slab"). Why:
 *   - a horizontal slice (the fast path, ARCHITECTURE.md §3.2) reads exactly one
 *     sinogram, so the texture kernel binds one 2-D texture object per detector row
 *     over pitched linear memory (cudaResourceTypePitch2D, x = column, y = slot),
 *     created once in create(); a new projection becomes visible through the texture
 *     without any copy;
 *   - the ALU kernel's tiles read short runs of one sinogram row (coalesced, L2-friendly);
 *   - storing a projection writes `rows` runs of `cols` floats, each run coalesced, which
 *     is cheap next to the FFT that precedes it;
 *   - planes need two sinograms per projection (rows r and r + 1): still two plain reads.
 * Padding: pitch (bytes between slots) is a multiple of texturePitchAlignment (and of 128
 * bytes, for coalescing); slab (bytes between detector rows) is a multiple of
 * textureAlignment, so every row's texture starts on an aligned address as
 * cudaCreateTextureObject requires. The waste is < 128 bytes per slot and < 512 per row.
 */
#ifndef TL_CUDA_STATE_CUH
#define TL_CUDA_STATE_CUH

#include <cuda_runtime.h>
#include <cufft.h>

#include "gpu/base/backend.h"
#include "gpu/base/parker.h"
#include "gpu/cuda/check.cuh"
#include "gpu/base/pool.h"

#define TL_CUDA_RING 4 /* pinned staging buffers for host frames */
#define TL_CUDA_PEER_BUFS \
    4 /* buffers for frames from other GPUs: copies run ahead of
                                     the kernels (a batched filter pass reads none of them,
                                     so the next frames' copies go on meanwhile; 4 scale
                                     two GPUs better than 2; figures: BENCHMARKS.md) */
#define TL_CUDA_STAGE_THREADS \
    4 /* threads (the caller included) copying a host frame into
                                     its staging buffer: one core copies too slowly for
                                     a camera at 500+ frames/s of 8 MB (figures:
                                     BENCHMARKS.md) */
#define TL_CUDA_STAGE_SPIN_NS \
    50000                           /* they spin this long for the next frame before sleeping
                                       (gpu/base/pool.h): frames back to back start at once */
#define TL_CUDA_STAGE_PIECES 16     /* pieces of a frame's copy: early finishers take more */
#define TL_CUDA_ELEM_BLOCK 256      /* threads per block of the element-wise kernels */
#define TL_CUDA_ELEM_MAX_GRID 65536 /* grid-stride loops above this many blocks */
#define TL_CUDA_ROW_ILP \
    4                              /* per-row kernels: pixels per thread, blockDim apart (more
                                     loads in flight: the frame kernels are memory-bound) */
#define TL_CUDA_ROW_MAX_GRID 65535 /* gridDim.y limit: rows beyond it loop */
static constexpr int tl_cuda_row_ilp =
    TL_CUDA_ROW_ILP; /* for #pragma unroll, which takes no macro */
#define TL_CUDA_BATCH_ROWS \
    2048                        /* rows a filter pass aims at: projections with fewer
                                     rows, when frames queue up, are filtered a few at once
                                     (store.cu); below ~2048 rows the pass's fixed costs
                                     (kernel ramp-up and tails) weigh: 1024-row frames
                                     run well short of twice as fast as 2048-row ones;
                                     above it batching gains nothing (figures:
                                     BENCHMARKS.md) */
#define TL_CUDA_BATCH_MAX 8     /* projections filtered in one pass at most */
#define TL_CUDA_MIN_RATIO 1e-6f /* = TL_CPU_MIN_RATIO: clamp of ratios before -log */
#define TL_CUDA_COALESCE 128    /* bytes: slot pitch alignment for coalesced rows */

/* Blocks for an element-wise kernel over `total` elements (grid-stride loops beyond). */
static inline unsigned tl_cuda_elem_grid(size_t total)
{
    size_t b = (total + TL_CUDA_ELEM_BLOCK - 1) / TL_CUDA_ELEM_BLOCK;
    if (b == 0)
        b = 1;
    return (unsigned)(b < TL_CUDA_ELEM_MAX_GRID ? b : TL_CUDA_ELEM_MAX_GRID);
}

/* Grid of a per-row kernel over rows x n elements: blockIdx.y a row (rows beyond
 * TL_CUDA_ROW_MAX_GRID loop), and along the row a grid-stride loop over about
 * TL_CUDA_ROW_ILP elements per thread (rounded down, so that n = 2^k + 1, the spectra,
 * does not launch a nearly empty block per row). Per-row indices stay 32-bit: no 64-bit
 * division per element, which made the flat element-wise versions of the frame kernels
 * run at about half the memory bandwidth. */
static inline dim3 tl_cuda_row_grid(uint32_t rows, size_t n)
{
    const size_t bx = n / ((size_t)TL_CUDA_ELEM_BLOCK * TL_CUDA_ROW_ILP);
    return dim3((unsigned)(bx ? bx : 1), rows == 0                     ? 1u
                                         : rows < TL_CUDA_ROW_MAX_GRID ? rows
                                                                       : TL_CUDA_ROW_MAX_GRID);
}

/* Projections per filter pass for frames of `rows` rows: TL_CUDA_BATCH_ROWS / rows,
 * rounded, within 1 .. TL_CUDA_BATCH_MAX (a 1025-row part of a split 2048-row frame: 2). */
static inline uint32_t tl_cuda_batch_frames(uint32_t rows)
{
    uint32_t b = rows ? (TL_CUDA_BATCH_ROWS + rows / 2) / rows : 1;
    return b < 1 ? 1 : b > TL_CUDA_BATCH_MAX ? TL_CUDA_BATCH_MAX : b;
}

/* Where a filter pass writes each of its projections (their rows dst_stride floats apart). */
typedef struct {
    float *p[TL_CUDA_BATCH_MAX];
} tl_cuda_dsts;

/* Byte sizes of everything create() allocates on the device (estimate() uses the same). */
typedef struct {
    size_t pitch;      /* between slots of one sinogram */
    size_t slab;       /* between the sinograms of two detector rows */
    size_t window;     /* rows x slab */
    size_t raw;        /* one raw frame, packed (device copy of a host frame) */
    size_t pad;        /* FFT input: batch x rows x P floats */
    size_t spec;       /* spectra: batch x rows x (P/2 + 1) complex */
    size_t fft_work;   /* cuFFT work area (shared by all plans) */
    size_t response;   /* filter response, P/2 + 1 floats */
    size_t calib;      /* dark/flat sums (double), averages and gain (float) */
    size_t proj;       /* per-projection tables of a job */
    size_t scratch;    /* one slot of every row: the bench_store target */
    size_t pack_pitch; /* between slots of the packed multi-slice texture (8-byte texels) */
    size_t pack;       /* the packed texture: window slots x pack_pitch (0 without textures) */
    size_t out;        /* initial slice output buffer: one cols x cols slice */
    size_t buffers;    /* all of the above but the window */
} tl_cuda_sizes;

typedef struct {
    tl_engine_config cfg;
    tl_errbuf *eb;
    int device;
    uint32_t rows, cols, n; /* detector rows, columns, window slots */
    size_t padded;          /* filter length P */
    size_t dsize;           /* bytes per raw pixel */
    tl_cuda_sizes sz;
    size_t mem; /* device bytes allocated */
    char device_name[160];

    /* device limits that decide what the texture kernel can serve */
    size_t tex_align, tex_pitch_align;
    int max_tex2d_linear[3]; /* width, height (texels), pitch (bytes) */

    cudaStream_t stream;   /* every operation of this engine runs on it, in order */
    cudaEvent_t t0, t1;    /* benchmark timing */
    cudaEvent_t consumed;  /* device frames: the GPU has read the caller's buffer */
    cudaEvent_t proj_done; /* the projection tables' host copies may be rewritten */
    cudaEvent_t fence_ev[TL_BACKEND_FENCES]; /* backend.h fence / fence_done */

    /* the rolling window (layout above) */
    float *window;
    size_t pitch_el, slab_el; /* pitch and slab in floats */
    float *meas; /* the same layout, the projections before the filter (cfg.keep_measurements;
                    else NULL) */

    /* one texture object per detector row, when the limits allow (tex_ok) */
    cudaTextureObject_t *tex;
    uint32_t ntex;
    bool tex_ok;
    char tex_why[160];    /* why the texture kernel is unavailable */
    float tex_xoff;       /* added to u for tex2D: 0.5 (texel centres) + rounding bias */
    const char *tex_rule; /* how the texture unit quantises weights: "round", "truncate" */

    /* calibration: batch sums, the averages in use, gain = 1 / max(F - D, eps) */
    double *sum[2];
    float *avg[2];
    float *gain;
    bool have[2]; /* an average exists (dark 0, flat 1) */

    /* staging of host frames: pinned ring, each slot free once its event completed */
    void *pinned[TL_CUDA_RING];
    cudaEvent_t ring_ev[TL_CUDA_RING];
    unsigned ring_next;
    tl_pool *stage_pool; /* TL_CUDA_STAGE_THREADS */
    void *raw;           /* the device copy of the current raw frame */

    /* frames from another GPU: copied on copy_stream into peer[i] (alternating), so the
     * copy of one overlaps the kernels of the one before; peer_ready[i] orders the stream
     * after the copy, peer_free[i] the next copy into peer[i] after the kernels reading it */
    cudaStream_t copy_stream;
    void *peer[TL_CUDA_PEER_BUFS];
    cudaEvent_t peer_ready[TL_CUDA_PEER_BUFS], peer_free[TL_CUDA_PEER_BUFS];
    unsigned peer_next;
    int peer_used; /* the peer buffer the staged frame is in, or -1 */

    /* filtering: `batch` projections per pass at most, the k-th in pad and spec at
     * k x rows rows; plans r2c[k] and c2r[k] transform k + 1 of them */
    float *pad;           /* batch x rows x P: zero-padded corrected rows */
    cufftComplex *spec;   /* batch x rows x (P/2 + 1); C2R's real rows in place */
    float *response;      /* H / P on the device */
    float *response_host; /* staging for set_filter */
    bool filter_on;
    cufftHandle r2c[TL_CUDA_BATCH_MAX], c2r[TL_CUDA_BATCH_MAX];
    uint32_t nplans; /* of each kind made so far */
    void *fft_work;

    /* projections corrected into pad, their filter pass held for more (store.cu) */
    uint32_t batch; /* tl_cuda_batch_frames(rows) */
    uint32_t held;
    tl_cuda_dsts held_dst;
    size_t held_stride;
    uint64_t held_fences; /* bit i: fence i asked for while frames were held */

    /* projection tables of the current job: (cos, sin, centre, weight), slot, slot + 0.5 */
    float4 *d_par, *h_par;
    int *d_slot, *h_slot;
    float *d_texy, *h_texy;
    float *d_cone, *h_cone; /* cone beam: 12 floats per projection (NULL in parallel beam) */
    /* cone beam (cone_stack.cu): the window as a layered array, one projection per layer
     * (NULL but in `fast` engines), and transposed, one projection after another, column
     * after column */
    cudaArray_t stack;
    cudaTextureObject_t stack_tex;
    float *tstack;
    /* ... and the texture stack in float16 (`fast` engines too): each slot scaled by a
     * power of two into float16's range, stack16_scale[slot] undoing it, stack16_maxabs
     * its max |value| (uint bits) while it is copied */
    cudaArray_t stack16;
    cudaTextureObject_t stack16_tex;
    cudaSurfaceObject_t stack16_surf;
    float *stack16_scale;
    unsigned *stack16_maxabs;
    /* ... and the quad stacks, where they fit (else NULL): the transposed stack's layout
     * with each element the four bilinear taps of its (column, row), in float and (`fast`
     * engines) in float16, scaled as stack16 */
    float4 *tquad;
    uint2 *tquad16;
    /* ... and the mirror stack, where it fits (`fast` engines; else NULL): a layered array
     * of half2, each texel the float16 stack's pixel (r, c) and (rows - 1 - r, c) */
    cudaArray_t stackm16;
    cudaTextureObject_t stackm16_tex;
    cudaSurfaceObject_t stackm16_surf;
    bool *stack_stale; /* per slot: the stacks are older than the window (NULL: none) */

    /* multi-slice texture kernels: up to 4 sinograms interleaved per texel (bp_texture.cu),
     * seen as float2 (2 slices) or half4 (4 slices), both linearly filtered */
    void *pack;
    cudaTextureObject_t tex_pack2, tex_pack4h;
    /* 16-bit kernels: per-sinogram max |value| (as uint bits) and the scales derived */
    unsigned *d_maxabs;
    float *d_scale;
    /* hybrid kernels: per-SM block tickets, sized by the SM ids the device reports */
    unsigned *d_tickets;
    int nsmid;

    /* the current job: kernel index per slice, output offsets, batching marks */
    int *job_kernel;
    size_t *job_off;
    bool *job_done;
    size_t job_cap;

    float *out;     /* slice outputs of a job, back to back */
    size_t out_cap; /* floats */
    float *scratch; /* bench_store target: rows x pitch */

    /* per-frame corrections (types.h, tl_corrections), allocated when configured */
    bool corr_on;                   /* frames take the staged path (store.cu) */
    float *frame[2];                /* rows x cols: counts, dezingered counts */
    unsigned long long *d_replaced; /* pixels the dezinger replaced (dezinger.cu) */
    unsigned long long *h_replaced; /* pinned: its copy after each frame (read without
                                       waiting) */
    tl_phase_filter phase;          /* phase retrieval's shape (paganin.cu) */
    float *phase_buf;               /* prow x pcol: padded transmission */
    cufftComplex *phase_spec;       /* prow x (pcol/2 + 1) */
    float *phase_resp;              /* H / (prow pcol) */
    void *phase_work;
    cufftHandle phase_r2c, phase_c2r;
    int phase_plans; /* made so far (destroy) */
    /* ring removal (rings.cu): profile, correction in use, new estimate, filtered change,
     * FW scratch rows; the largest change (device and pinned host); update timing */
    float *ring_m, *ring_c, *ring_est, *ring_fd, *ring_tmp;
    unsigned *d_ringmax, *h_ringmax;
    uint64_t ring_frames;
    cudaEvent_t rings_ev[2];
    int ring_events;
    double ring_update_s; /* the last update's GPU time, not yet read (< 0: none) */
    float *colw; /* half acquisition's column weights (NULL: none) */
    float *pixw; /* cone beam's cosine weights, rows x cols (NULL: none) */
    tl_parker parker;  /* a short cone-beam scan's weights (gpu/base/parker.h) */
    double view_angle; /* the angle of the projection being stored (Parker's weights) */
    /* centre estimation (profile.cu): the profiles ring, nprof x cols; where the
     * projection being stored puts its profile (-1: nowhere) */
    float *d_prof;
    uint32_t nprof;
    int32_t prof_pos;
    /* stage timing (stages.cu): frame k's events in ring entry k % TL_STAGE_RING, a start
     * and an end event per stage; frames [stage_read, stage_written) not read yet */
    cudaEvent_t stage_ev[TL_STAGE_RING][TL_STAGE_COUNT][2];
    int stage_events; /* created so far (destroy) */
    unsigned stage_mask[TL_STAGE_RING]; /* bit s: stage s was recorded */
    uint64_t stage_read, stage_written;

    /* accumulators of tracked slices (accumulate.cu), indexed by engine slice id: the sum
     * in double, and the float buffer each read-out converts it into before the copy out */
    double **acc;
    float **acc_out;
    size_t *acc_size; /* pixels */
    int nacc;

    struct tl_cuda_iter *it; /* the iterative problem (iterative.cu; NULL: none) */
    struct tl_cuda_itc *itc; /* ... a cone-beam one (iterative_cone.cu; NULL: none) */
} tl_cuda_state;

/* Operations of the table (tl_cuda_backend, cuda_backend.cu) defined in other files. */
tl_status tl_cuda_op_calib_add(void *state, const tl_frame *f, uint32_t count);
tl_status tl_cuda_op_store(void *state, const tl_frame *f, uint32_t slot);
tl_status tl_cuda_op_fence(void *state, unsigned i);
tl_status tl_cuda_op_fence_done(void *state, unsigned i, bool wait, bool *done);
tl_status tl_cuda_op_backproject(void *state, tl_bp_job *job);
tl_status tl_cuda_op_bench(void *state, tl_bp_job *job, int reps, tl_bench_row *rows, size_t cap,
                           size_t *n);
tl_status tl_cuda_op_bench_store(void *state, const tl_frame *f, int reps, double *ms);
/* bench.cu: the median of t[0..n-1] (sorts t) */
double tl_cuda_median(double *t, int n);
/* microbench.cu: the card's texture, conversion and shared-memory rates (engine.h) */
tl_status tl_cuda_op_hw_rates(void *state, tl_hw_rate *out, size_t cap, size_t *n);
tl_status tl_cuda_op_acc_alloc(void *state, int id, uint32_t height, uint32_t width);
void tl_cuda_op_acc_free(void *state, int id);
tl_status tl_cuda_op_acc_update(void *state, tl_bp_job *job, const int *ids, bool add);
tl_status tl_cuda_op_acc_read(void *state, const int *ids, size_t n, float *const *out);
void tl_cuda_acc_destroy(tl_cuda_state *s);
/* iterative.cu: the iterative primitives (backend.h, tl_it_problem) */
tl_status tl_cuda_op_it_begin(void *state, const tl_it_problem *p, double stats[2]);
tl_status tl_cuda_op_it_image(void *state, const float *in, float *out);
tl_status tl_cuda_op_it_forward(void *state, tl_it_views v, tl_it_rule rule, double *sumsq);
tl_status tl_cuda_op_it_backward(void *state, tl_it_views v, tl_it_rule rule, double lambda);
tl_status tl_cuda_op_it_sweep(void *state, double lambda, bool *swept);
tl_status tl_cuda_op_it_mark(void *state);
tl_status tl_cuda_op_it_regularise(void *state, bool nonneg, double tv_weight, uint32_t tv_steps);
void tl_cuda_op_it_end(void *state);
/* Frees the iterative buffers (kept from one problem to the next): at destroy. */
void tl_cuda_it_free(tl_cuda_state *s);
/* iterative_cone.cu: the cone-beam problems' primitives, to which those above hand over
 * while s->itc is set (its buffers go at the problem's end). */
typedef struct tl_cuda_itc tl_cuda_itc;
tl_status tl_cuda_itc_begin(tl_cuda_state *s, const tl_it_problem *p, double stats[2]);
tl_status tl_cuda_itc_image(tl_cuda_state *s, const float *in, float *out);
tl_status tl_cuda_itc_forward(tl_cuda_state *s, tl_it_views v, tl_it_rule rule, double *sumsq);
tl_status tl_cuda_itc_backward(tl_cuda_state *s, tl_it_views v, tl_it_rule rule, double lambda);
tl_status tl_cuda_itc_mark(tl_cuda_state *s);
tl_status tl_cuda_itc_regularise(tl_cuda_state *s, bool nonneg, double tv_weight,
                                 uint32_t tv_steps);
void tl_cuda_itc_free(tl_cuda_state *s);

/* cuda_backend.cu */
tl_status tl_cuda_use_device(tl_cuda_state *s);
tl_status tl_cuda_alloc(tl_cuda_state *s, void **p, size_t bytes, const char *what);
/* Lets the current device, `device`, read every other device's memory where the hardware
 * allows (peer copies then go straight over NVLink or PCIe); a refusal is no error. */
void tl_cuda_enable_peers(int device);
size_t tl_cuda_dtype_size(tl_dtype t);
/* "GPU-" + 8-4-4-4-12 hex digits, as nvidia-smi -L prints a device's UUID (ipc.cu);
 * out gets 41 bytes. */
void tl_cuda_format_uuid(const cudaUUID_t *u, char *out);

/* store.cu: the per-frame path */
/* Brings frame f to the device: host frames through the pinned ring into s->raw, device
 * frames in place after checking them (frames on another GPU are copied peer to peer into
 * a peer buffer). *src and *pitch describe the result. Once the kernels that read *src
 * are enqueued, tl_cuda_staged_read says so (a peer buffer may then be refilled). */
tl_status tl_cuda_stage(tl_cuda_state *s, const tl_frame *f, const char **src, size_t *pitch);
tl_status tl_cuda_staged_read(tl_cuda_state *s);
/* Enqueues convert + correct + -log (+ filter) of a staged frame into dst, a rows x cols
 * area whose rows are dst_stride floats apart, and the projection before the filter into
 * meas (NULL: not kept), laid out like dst. With hold, the filter pass may wait for more
 * frames (up to s->batch); tl_cuda_flush runs it. */
tl_status tl_cuda_process(tl_cuda_state *s, const char *src, size_t pitch, tl_dtype dt, float *dst,
                          float *meas, size_t dst_stride, bool hold);
/* Enqueues the filter pass of the held frames, then the fences asked for meanwhile. Every
 * operation that reads the window, pad or the calibration runs it first. */
tl_status tl_cuda_flush(tl_cuda_state *s);
tl_status tl_cuda_op_flush(void *state);

/* preprocess.cu */
/* Corrected rows (cols values each, rows dst_stride floats apart) into dst. */
tl_status tl_cuda_preprocess(tl_cuda_state *s, const char *src, size_t pitch, tl_dtype dt,
                             float *dst, size_t dst_stride);
tl_status tl_cuda_calib_accumulate(tl_cuda_state *s, const char *src, size_t pitch, tl_dtype dt,
                                   int kind, uint32_t count);

/* preprocess.cu: the corrected path's stages */
/* Raw pixels as float counts into dst (rows x cols). */
tl_status tl_cuda_convert(tl_cuda_state *s, const char *src, size_t pitch, tl_dtype dt, float *dst);
/* Float rows through dark/flat (when flat) and -log (when log) into dst; with ring (the
 * last stage), then the ring removal's per-frame part (rings.cu: the profile learns the
 * value, the correction in use is subtracted), the value as measured into meas (rows
 * meas_stride apart; NULL: not kept), and the column and pixel weights. */
tl_status tl_cuda_correct(tl_cuda_state *s, const float *in, size_t in_stride, bool flat,
                          bool log, bool ring, float *dst, size_t dst_stride, float *meas,
                          size_t meas_stride);

/* dezinger.cu: frame counts in -> out, replaced pixels counted in d_replaced */
tl_status tl_cuda_dezinger(tl_cuda_state *s, const float *in, float *out);
tl_status tl_cuda_op_corr_counts(void *state, uint64_t *replaced);

/* stages.cu: per-frame timing of the correction stages */
tl_status tl_cuda_stages_create(tl_cuda_state *s);
void tl_cuda_stages_destroy(tl_cuda_state *s);
/* Records the start (end false) or end of stage st of the frame being stored. */
tl_status tl_cuda_stage_mark(tl_cuda_state *s, tl_stage st, bool end);
/* After a frame's stages are enqueued: the next frame gets the next ring entry. */
void tl_cuda_stage_next(tl_cuda_state *s);
tl_status tl_cuda_op_stage_times(void *state, tl_stage_time *out, size_t cap, size_t *n);

/* profile.cu */
tl_status tl_cuda_profile_create(tl_cuda_state *s);
size_t tl_cuda_profile_bytes(const tl_engine_config *c);
/* The column means of rows x cols values at src (rows stride apart) into the profile of
 * the projection being stored, if it has a position. */
tl_status tl_cuda_profile_add(tl_cuda_state *s, const float *src, size_t stride);
tl_status tl_cuda_op_profile_slot(void *state, int32_t pos);
tl_status tl_cuda_op_profiles(void *state, const uint32_t *pos, size_t n, float *out);

/* rings.cu */
size_t tl_cuda_rings_bytes(const tl_engine_config *c);

/* cone_stack.cu: the cone-beam projection stacks (a no-op in parallel beam). mark makes slot
 * stale (-1: every slot); sync copies the stale slots from the window, on the stream. */
size_t tl_cuda_cone_stack_bytes(const tl_engine_config *c);
/* The transposed stack's zero border: projection p's pixel (row r, column c) is at
 * tstack[p * (cols + PAD_COLS) * ld + (c + 1) * ld + r + 1], ld = rows + PAD_ROWS; rows
 * -1, rows and rows + 1 and columns -1 and cols are zero. The quad stacks have the same
 * layout; the float one's element at (c, r) holds pixels (r, c), (r, c + 1), (r + 1, c),
 * (r + 1, c + 1) in that order, the float16 one's (r, c), (r + 1, c), (r, c + 1),
 * (r + 1, c + 1) (zero off the detector). */
#define TL_CUDA_TSTACK_PAD_ROWS 3
#define TL_CUDA_TSTACK_PAD_COLS 2
tl_status tl_cuda_cone_stack_create(tl_cuda_state *s);
/* The optional stacks, the mirror stack and then the quad stacks, each made where it fits
 * (cone_stack.cu); after every other buffer. mirror_bytes, quad_bytes: what they would
 * take. */
size_t tl_cuda_cone_mirror_bytes(const tl_engine_config *c);
size_t tl_cuda_cone_quad_bytes(const tl_engine_config *c);
tl_status tl_cuda_cone_optional_create(tl_cuda_state *s);
void tl_cuda_cone_stack_destroy(tl_cuda_state *s);
void tl_cuda_cone_stack_mark(tl_cuda_state *s, int32_t slot);
tl_status tl_cuda_cone_stack_sync(tl_cuda_state *s);
tl_status tl_cuda_rings_create(tl_cuda_state *s);
void tl_cuda_rings_destroy(tl_cuda_state *s);
/* The weight of the frame being stored in the column profile (gpu/base/rings.h). */
float tl_cuda_ring_next_weight(tl_cuda_state *s);
tl_status tl_cuda_op_ring_update(void *state, bool *changed);

/* paganin.cu */
tl_status tl_cuda_phase_work_estimate(const tl_phase_filter *f, size_t *bytes);
tl_status tl_cuda_phase_create(tl_cuda_state *s);
void tl_cuda_phase_destroy(tl_cuda_state *s);
tl_status tl_cuda_op_set_phase(void *state, const tl_phase_filter *f);
/* Where the frame sits in the padded buffer (its rows phase.pcol floats apart). */
float *tl_cuda_phase_frame(tl_cuda_state *s);
/* Pads, filters and transforms back the frame in the phase buffer, in place. */
tl_status tl_cuda_phase(tl_cuda_state *s);

/* filter.cu */
/* The work area of the largest plan: `rows` transforms of length padded. */
tl_status tl_cuda_fft_work_estimate(uint32_t rows, size_t padded, size_t *bytes);
tl_status tl_cuda_fft_create(tl_cuda_state *s);
void tl_cuda_fft_destroy(tl_cuda_state *s);
/* Filters the first n projections in s->pad (R2C, times H/P, C2R in place in s->spec) and
 * writes the first cols values of each row of projection k into dst->p[k] (rows
 * dst_stride floats apart). */
tl_status tl_cuda_filter_rows(tl_cuda_state *s, uint32_t n, const tl_cuda_dsts *dst,
                              size_t dst_stride);

/* backproject.cu: jobs shared by backproject() and bench() (kernels.cuh has the table) */
struct tl_cuda_kernel;
/* Whether kernel k can serve slice sl of job (why gets the reason when not). */
bool tl_cuda_can_serve(const tl_cuda_state *s, const struct tl_cuda_kernel *k,
                       const tl_bp_slice *sl, const tl_bp_job *job, char *why, size_t why_len);
/* Room for the per-slice bookkeeping of a job of nslices. */
tl_status tl_cuda_job_reserve(tl_cuda_state *s, size_t nslices);
/* Chooses the kernel of every slice (s->job_kernel; forced >= 0: that kernel for all);
 * *constant tells whether one of them reads the __constant__ table. */
tl_status tl_cuda_job_choose(tl_cuda_state *s, const tl_bp_job *job, int forced, bool *constant);
/* The kernels' own device state (pack texture scales, hybrid tickets), in create(). */
tl_status tl_cuda_bp_create(tl_cuda_state *s);
/* Grows the output buffer and uploads the projection tables of job. */
tl_status tl_cuda_job_prepare(tl_cuda_state *s, const tl_bp_job *job);
/* Enqueues every slice of job into s->out with the chosen kernels, batched. The caller
 * holds the constant-memory lock when a kernel that reads it runs. */
tl_status tl_cuda_job_launch(tl_cuda_state *s, const tl_bp_job *job);

#endif
