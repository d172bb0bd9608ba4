/* engine.h — the reconstruction engine: frames in, slices out.
 *
 * An engine serves one scan. Each projection is preprocessed (dtype conversion, dark/flat
 * correction, -log) and ramp-filtered once, on arrival, and kept filtered in a rolling
 * window of the last N projections (keyed by frame index, any arrival order). Slices are
 * back-projected from that window on request into caller-visible float32 buffers. The
 * engine knows nothing of sockets; it is driven by the daemon, `tomolive recon`, tests and
 * benchmarks alike. Conventions (coordinates, filters, quality modes) are ARCHITECTURE.md §3.
 *
 *   tl_engine_config c; tl_engine_config_init(&c, rows, cols, window);
 *   tl_engine *e; if (tl_engine_create(&c, &e) != TL_OK) ... tl_engine_last_error(NULL)
 *   tl_engine_submit(e, &frame);                 per dark, flat and projection
 *   tl_slice_spec s; tl_slice_spec_row(&s, z, h, w);
 *   int id; tl_engine_add_slice(e, &s, &id);
 *   tl_engine_reconstruct(e, &id, 1, &out, &info);
 *   tl_engine_destroy(e);
 *
 * Backends plug in behind one operation table (gpu/base/backend.h): the portable C backend
 * (gpu/cpu/, always built) and the CUDA backend (gpu/cuda/, when nvcc is found). An engine
 * is not thread-safe: one thread drives it (the backend may use threads of its own).
 *
 * Every function returns a tl_status; on failure tl_engine_last_error(e) says what failed
 * and why, naming the failing call (CUDA, cuFFT, FFTW, allocation) where there is one.
 */
#ifndef TL_ENGINE_H
#define TL_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu/base/types.h"     /* status codes, enumerations, config, frames */
#include "gpu/geometry/slice.h" /* slice specs */

#ifdef __cplusplus
extern "C" {
#endif

/* Whether a backend can run here: CPU always; CUDA when built and a device is present.
 * why (may be NULL) receives the reason when it cannot. */
bool tl_backend_available(tl_backend_kind b, char *why, size_t why_len);
/* Devices of a backend: CUDA devices (0 with the reason in why when CUDA cannot be used),
 * 1 for the CPU; AUTO counts what tl_engine_create would pick. */
int tl_backend_device_count(tl_backend_kind b, char *why, size_t why_len);

/* Host memory for buffers the engine copies slices into (or frames out of): with the CUDA
 * backend (b CUDA, or AUTO where a GPU is usable) it is page-locked and portable across
 * devices, so those copies run at full bus speed instead of through the driver's bounce
 * buffers; elsewhere it is plain malloc. Allocate once and reuse: pinning costs
 * milliseconds. Free with the same b. On failure *out is NULL and why says why. */
tl_status tl_host_alloc(tl_backend_kind b, size_t bytes, void **out, char *why, size_t why_len);
void tl_host_free(tl_backend_kind b, void *p);
/* The same for memory allocated elsewhere (a shared-memory mapping): page-locks [p, p +
 * bytes) for the CUDA backend, nothing elsewhere. Unregister before unmapping. */
tl_status tl_host_register(tl_backend_kind b, void *p, size_t bytes, char *why, size_t why_len);
void tl_host_unregister(tl_backend_kind b, void *p);

/* Defaults for a detector of rows x cols and a window of N projections (one device). */
void tl_engine_config_init(tl_engine_config *c, uint32_t rows, uint32_t cols, uint32_t window);

/* The rows partition k of `parts` owns when an engine of `rows` detector rows spans several
 * devices: [*first, *end), with first = floor(k rows / parts), so sizes differ by one at
 * most. (It also holds row *end, when there is one, for interpolation.) */
void tl_engine_split_rows(uint32_t rows, uint32_t parts, uint32_t k, uint32_t *first,
                          uint32_t *end);

typedef struct tl_engine tl_engine;

/* Detector row bands, for volumes reconstructed slab by slab (gpu/bands.c). The rows
 * [first[i], end[i]) that the row slice of size x size (scale 1) at height z0 + i reads
 * from n projections, i < count (angles in radians; frame indices, or NULL: first_index +
 * k): its own row in parallel beam, those it projects to in cone beam, with the
 * interpolation's taps and a row of slack, clipped to the detector. */
tl_status tl_engine_rows_read(const tl_engine_config *c, uint32_t n, const uint64_t *indices,
                              const double *angles, uint32_t size, double z0, uint32_t count,
                              uint32_t *first, uint32_t *end);
/* The configuration of an engine holding detector rows [row0, row0 + rows) of c's frames:
 * its slice at height z - row0 is c's slice at z (the same numbers up to rounding: the
 * geometry is the same, re-based). Given cone-beam matrices are re-based into `matrices`
 * (room for c->cone.nmatrices; NULL without matrices), which *out then points to. */
tl_status tl_engine_config_band(const tl_engine_config *c, uint32_t row0, uint32_t rows,
                                double (*matrices)[12], tl_engine_config *out);

/* Memory the configuration needs (tl_memory_estimate, gpu/base/types.h), before anything is
 * allocated. */
tl_status tl_engine_estimate(const tl_engine_config *c, tl_memory_estimate *m);

/* Creates an engine. A backend that cannot run (TL_EDEVICE) or memory that is not there
 * (TL_ENOMEM, message with both numbers and what to change) is an error, never a fallback.
 * On failure *out is NULL and tl_engine_last_error(NULL) says why. */
tl_status tl_engine_create(const tl_engine_config *c, tl_engine **out);
void tl_engine_destroy(tl_engine *e);

/* Submits one frame. A projection with a new highest index moves the window first, so if
 * the backend then fails to store it, the window has moved and the index counts as
 * missing. Darks and flats are averaged per batch: calibration frames received
 * between two runs of projections form one batch, and the first dark (flat) after a
 * projection starts a new dark (flat) batch whose running average replaces the old one at
 * once. Projections are corrected with the averages current when they arrive:
 *   t = (I - D) / (F - D)   (D = 0 without darks; F - D = 1 without flats)
 *   p = -log(max(t, 1e-6))  unless already_linear, where p = t unclamped;
 * with F - D clamped to at least 1e-6. Then p is filtered and stored in the window.
 * Returns TL_ESTALE for a projection older than the window, TL_EDUPLICATE for an index
 * already held, TL_ESHAPE for a wrong shape or dtype; each is counted in the state. */
tl_status tl_engine_submit(tl_engine *e, const tl_frame *f);

/* Fences: how far the engine's queued work has got, counted in frames. Every frame the
 * backend took (stored, or failed to store; not those refused before, such as stale ones)
 * is numbered 1, 2, ...; tl_engine_frames_queued says the number of the last one, and
 * tl_engine_frames_done sets *done to the number of frames whose work is complete (frames
 * 1 .. *done), after first waiting until at least wait_for are (0: no wait). A frame
 * submitted with read_later is free for its producer once done reaches its number, so a
 * caller can submit the next frames while the GPU still reads the earlier ones (the CUDA
 * IPC source hands ring slots back this way, daemon/ingest/ipc_frames.h). On a backend that
 * works synchronously (CPU), done always equals queued. At most TL_BACKEND_FENCES (64)
 * frames are outstanding: submit waits for the oldest beyond that. */
uint64_t tl_engine_frames_queued(const tl_engine *e);
tl_status tl_engine_frames_done(tl_engine *e, uint64_t wait_for, uint64_t *done);

/* Batched filtering. A projection submitted with `more` set may be held by the backend
 * (the CUDA backend, when its frames are short: TL_CUDA_BATCH_ROWS) once it is corrected,
 * so that the FFT filter of several frames runs as one pass, which costs far less than one
 * pass per frame; its fence is reached once that pass is done. Anything that reads the
 * window (reconstruct, tracked slices, benchmarks), a calibration frame, a new filter, a
 * frame without `more` and waiting for a fence (frames_done with wait_for) first run the
 * held frames; so does tl_engine_flush, which a caller that set `more` must call once its
 * backlog is gone. Without `more`, nothing is held: latency is never traded for it. */
tl_status tl_engine_flush(tl_engine *e);

/* ---- slices ---------------------------------------------------------------------------- */

/* Adds a slice and returns its handle (>= 0). Slices persist until removed. */
tl_status tl_engine_add_slice(tl_engine *e, const tl_slice_spec *s, int *id);
tl_status tl_engine_remove_slice(tl_engine *e, int id);

/* Tracks a slice incrementally (on) or not (off). A tracked slice keeps an accumulator in
 * the backend: each new projection adds its contribution and each projection the window
 * drops is subtracted (one projection of work each, instead of N), so reconstructing it
 * is a read-out. The accumulator is float64 (each contribution is computed in the engine's
 * precision, so adding and later subtracting a projection cancel exactly, and the running
 * sum's rounding stays far below float resolution), so it is rebuilt from scratch only on
 * the first reconstruction, after set_center or reset, when the index jumps by most of a
 * window, after a failed update, and, if config `refresh` is set, every `refresh` updates.
 * Only uniform weights are linear in each projection; with TL_WEIGHTS_ANGLES tracking
 * changes nothing (every reconstruction is from scratch). */
tl_status tl_engine_track(tl_engine *e, int id, bool on);

/* What a reconstruction used. */
typedef struct {
    uint32_t projections_used; /* projections held in the window */
    uint32_t missing;          /* indices of the window not held */
    uint64_t window_first, window_last;
    uint64_t t_acq;     /* t_acq of the newest (highest index) projection used */
    uint64_t t_recv;    /* its t_recv */
    const char *kernel; /* name of the back-projection kernel used (static string) */
} tl_slice_info;

/* Whether o is a valid set of iterative options before any views are known (what
 * tl_engine_iterate checks of them alone: method, projector, iterations >= 1, subsets >= 1,
 * relaxation, TV weight, tolerance), so a caller can refuse them when they are given;
 * subsets against the views held are checked at each iteration. TL_OK, or TL_EINVAL
 * saying why in why. */
tl_status tl_iter_options_check(const tl_iter_options *o, char *why, size_t why_len);

/* Whether slice id can be reconstructed iteratively on its own (tl_engine_iterate's checks
 * of the engine and the slice): TL_OK, or TL_EINVAL saying why. */
tl_status tl_engine_can_iterate(tl_engine *e, int id);

/* Back-projects the slices ids[0..n-1] from the current window into out[k] (height x
 * width floats each, row-major). info is NULL or an array of n, one per slice. An empty
 * window yields zeros. */
tl_status tl_engine_reconstruct(tl_engine *e, const int *ids, size_t n, float *const *out,
                                tl_slice_info *info);

/* Reconstructs slices iteratively (issue #28; tl_iter_options, gpu/base/types.h) from the
 * held projections into out (the slices' images one after the other, height x width
 * floats each), instead of by FBP: the measurements are b, and the system matrix A is the
 * transpose of the engine's back projection (or Joseph's; gpu/project_ref.h).
 *   Parallel beam: one slice (n = 1), horizontal (a row slice, or a plane of constant z);
 *   the engine's filter none, or the measurements kept (keep_measurements).
 *   Cone beam: the n slices are one problem, a stack of planes (the
 *   rays cross them all: e.g. planes parallel to a tomosynthesis detector); the
 *   measurements kept; the matched pair, no TV steps.
 * On one device, without half acquisition: anything else is TL_EINVAL (TL_EUNSUPPORTED
 * where the backend lacks it), saying why. x starts at `start` (images like out, e.g.
 * their FBP; NULL: zeros, ones for OS-EM). residual (o->iterations entries, or NULL) gets
 * ||b - A x|| / ||b|| after each iteration (a forward pass of every view per iteration
 * with several subsets: none runs for NULL without a tolerance), *done the iterations run; info (or NULL) what
 * was used, its kernel the method's name. */
tl_status tl_engine_iterate(tl_engine *e, const int *ids, size_t n, const tl_iter_options *o,
                            const float *start, float *out, double *residual, uint32_t *done,
                            tl_slice_info *info);

/* The back-projection kernels of the engine's backend (tl_kernel_info, gpu/base/types.h).
 * Writes at most cap entries, returns how many kernels there are. */
size_t tl_engine_kernels(const tl_engine *e, tl_kernel_info *out, size_t cap);

/* Tuned kernel choices by slice size (tl_kernel_choice, gpu/base/types.h).
 * Sets the choice for c->height x c->width (replacing an earlier one of that size); names
 * must be kernels of this backend (TL_EINVAL otherwise). At most 16 sizes per engine. */
tl_status tl_engine_set_choice(tl_engine *e, const tl_kernel_choice *c);
/* The choice for h x w; false when there is none. */
bool tl_engine_get_choice(const tl_engine *e, uint32_t height, uint32_t width,
                          tl_kernel_choice *out);
void tl_engine_clear_choices(tl_engine *e);

/* What the engine runs on (tl_device_id, gpu/base/types.h). */
void tl_engine_device_id(const tl_engine *e, tl_device_id *id);

/* ---- parameters and state -------------------------------------------------------------- */

/* Moves the rotation axis; applies to every later reconstruction (it is used at back
 * projection, so the whole window follows at once). Always a column of the real
 * detector; with half acquisition TL_EINVAL beyond the virtual detector's margin. */
tl_status tl_engine_set_center(tl_engine *e, double center);
/* Changes the filter for projections that arrive from now on; projections already in the
 * window keep the filter they were stored with, so the window is consistent again after
 * N more projections. */
tl_status tl_engine_set_filter(tl_engine *e, tl_filter f);
/* Empties the window and the dark/flat batches (a new rotation of the same scan). */
tl_status tl_engine_reset(tl_engine *e);

typedef struct {
    const char *backend;     /* "cpu", "cuda" */
    const char *device_name; /* "CPU (16 threads)", "NVIDIA H100 80GB HBM3",
                                   "2 × NVIDIA H200 ..." (several devices) */
    uint32_t window;         /* N */
    uint32_t held;           /* projections in the window */
    uint32_t missing;        /* indices of the window not held */
    bool empty;              /* no projection received yet */
    uint64_t window_first, window_last;
    uint32_t dark_batch, flat_batch;  /* frames averaged in the current batches */
    uint64_t accepted[3];             /* by tl_frame_kind */
    uint64_t stale, duplicate, shape; /* rejections */
    size_t memory_bytes;              /* allocated by the backend for this engine (all devices) */
    double center;
    tl_filter filter;
    int slices;
} tl_engine_state;
void tl_engine_get_state(const tl_engine *e, tl_engine_state *st);

/* The per-frame corrections (tl_corrections, gpu/base/types.h) and what they have done in
 * the frames whose work is complete (never waits: a GPU's count lags its queued frames;
 * after tl_engine_frames_done or a reconstruction it is exact). */
typedef struct {
    tl_corrections corr;        /* as configured (ring defaults filled in) */
    uint64_t dezinger_replaced; /* pixels replaced by the dezinger since creation */
    uint64_t ring_updates;      /* ring estimates computed */
    uint64_t ring_rebuilds;     /* ... that moved beyond the tolerance: window corrected,
                                   tracked slices rebuilt */
} tl_engine_corr_state;
tl_status tl_engine_corrections(tl_engine *e, tl_engine_corr_state *out);
/* Per-frame times of the correction stages (tl_stage_time, gpu/base/types.h) of frames
 * done since the last call, oldest first; at most cap, *n of them. Never waits: a frame
 * whose work is still queued on the GPU is reported by a later call. The backend keeps the
 * last TL_STAGE_RING (64) frames' times; older unread ones are dropped (they are samples:
 * read them every few frames). */
tl_status tl_engine_stage_times(tl_engine *e, tl_stage_time *out, size_t cap, size_t *n);

/* The centre of rotation estimated from opposite projections (gpu/center.c; config
 * center_estimate or center_auto): the axis column, its confidence (0..1: the median
 * normalised correlation of each pair's mirrored profile gradients; 1 for exact mirror
 * images), the pairs' spread (median absolute deviation, pixels), how many pairs and the
 * newest index used, how many estimates there were and how many center_auto applied. */
typedef struct {
    bool estimating; /* the engine estimates the centre */
    bool auto_on;    /* ... and applies it */
    bool valid;      /* an estimate exists */
    double center, confidence, spread;
    uint32_t pairs;
    uint64_t newest, estimates, applied;
} tl_center_estimate;
/* The last estimate (made every window/16 projections when a new pair has come). */
tl_status tl_engine_center(const tl_engine *e, tl_center_estimate *out);
/* An estimate now from the newest pairs (waits for queued work); TL_ENOTFOUND when no two
 * projections are opposite (pi apart, or one angular step short of it for a window of
 * half a turn). Does not apply it. */
tl_status tl_engine_center_estimate_now(tl_engine *e, tl_center_estimate *out);
/* center_auto on or off (TL_EINVAL for an engine without estimation): when on, each
 * estimate of confidence >= 0.5 that moves the axis by >= 0.02 px is applied as
 * tl_engine_set_center (tracked slices are rebuilt). */
tl_status tl_engine_set_center_auto(tl_engine *e, bool on);

/* Indices of the window that are not held, ascending; writes at most cap, returns the count
 * of missing indices (which may exceed cap). */
size_t tl_engine_missing(const tl_engine *e, uint64_t *out, size_t cap);

/* The engine's configuration as given (center and filter as currently set): with half
 * acquisition still the real detector's columns and axis, not the virtual detector's. */
const tl_engine_config *tl_engine_get_config(const tl_engine *e);

/* Last error message for e, or, with e == NULL, of the last failed tl_engine_create on this
 * thread. Never NULL. */
const char *tl_engine_last_error(const tl_engine *e);

#ifdef __cplusplus
}
#endif

/* Benchmarks (kernels, the per-frame path, the device's rates). */
#include "gpu/engine_bench.h"

#endif
