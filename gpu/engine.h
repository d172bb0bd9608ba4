/* engine.h — the reconstruction engine: frames in, slices out.
 *
 * An engine serves one scan. Each projection is preprocessed (dtype conversion, dark/flat
 * correction, -log) and ramp-filtered once, on arrival, and kept filtered in a rolling
 * window of the last N projections (keyed by frame index, any arrival order). Slices are
 * back-projected from that window on request into caller-visible float32 buffers. The
 * engine knows nothing of sockets; it is driven by the daemon, `tomolive recon`, tests and
 * benchmarks alike. Conventions (coordinates, filters, quality modes) are DESIGN.md §3.
 *
 *   tl_engine_config c; tl_engine_config_init(&c, rows, cols, window);
 *   tl_engine *e; if (tl_engine_create(&c, &e) != TL_OK) ... tl_engine_last_error(NULL)
 *   tl_engine_submit(e, &frame);                 per dark, flat and projection
 *   tl_slice_spec s; tl_slice_spec_row(&s, z, h, w);
 *   int id; tl_engine_add_slice(e, &s, &id);
 *   tl_engine_reconstruct(e, &id, 1, &out, &info);
 *   tl_engine_destroy(e);
 *
 * Backends plug in behind one operation table (gpu/backend.h): the portable C backend
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

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    TL_OK = 0,
    TL_EINVAL,      /* invalid argument or configuration */
    TL_ENOMEM,      /* host or device memory missing (message gives the numbers) */
    TL_ESTALE,      /* projection older than the window: rejected */
    TL_EDUPLICATE,  /* frame index already held in the window: rejected */
    TL_ESHAPE,      /* frame shape or dtype differs from the scan */
    TL_ENOTFOUND,   /* no such slice */
    TL_EUNSUPPORTED,/* valid request the backend does not implement (cone beam, device input) */
    TL_EDEVICE,     /* no usable GPU, or a CUDA/cuFFT call failed */
    TL_EIO,         /* file input/output */
    TL_EINTERNAL
} tl_status;

const char *tl_status_name(tl_status s); /* "TL_ESTALE" ... */

typedef enum { TL_DTYPE_U8 = 0, TL_DTYPE_U16, TL_DTYPE_U32, TL_DTYPE_F32 } tl_dtype;
size_t tl_dtype_size(tl_dtype t);

typedef enum { TL_FRAME_DARK = 0, TL_FRAME_FLAT, TL_FRAME_PROJ } tl_frame_kind;

typedef enum {
    TL_FILTER_RAMLAK = 0, TL_FILTER_SHEPP_LOGAN, TL_FILTER_COSINE, TL_FILTER_HAMMING,
    TL_FILTER_HANN, TL_FILTER_PARZEN, TL_FILTER_NONE, /* NONE: plain back projection */
    TL_FILTER_COUNT
} tl_filter;
const char *tl_filter_name(tl_filter f);                /* "ram-lak", ... */
bool tl_filter_parse(const char *name, tl_filter *out); /* also accepts "ramp" for ram-lak */

typedef enum { TL_BACKEND_AUTO = 0, TL_BACKEND_CPU, TL_BACKEND_CUDA } tl_backend_kind;
const char *tl_backend_name(tl_backend_kind b);
bool tl_backend_parse(const char *name, tl_backend_kind *out);
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

typedef enum { TL_GEOMETRY_PARALLEL = 0, TL_GEOMETRY_CONE } tl_geometry;

/* Angular weights of the FBP sum. UNIFORM: every projection weighs pi / window (exact for
 * equally spaced angles over 180 or 360 degrees; slices stay linear in each projection,
 * which incremental updates need). ANGLES: each held projection weighs its share of the
 * angular range, (theta[i+1] - theta[i-1]) / 2 over the sorted angles, scaled so the
 * weights sum to pi (DESIGN.md §3, "the general rule"). */
typedef enum { TL_WEIGHTS_UNIFORM = 0, TL_WEIGHTS_ANGLES } tl_weights;

/* Interpolation quality a caller accepts (DESIGN.md §3). The engine serves each
 * reconstruction with the fastest kernel of an allowed mode. */
typedef enum { TL_QUALITY_EXACT = 0, TL_QUALITY_FAST, TL_QUALITY_PREVIEW } tl_quality;
const char *tl_quality_name(tl_quality q);
bool tl_quality_parse(const char *name, tl_quality *out);

typedef enum { TL_PRECISION_F32 = 0, TL_PRECISION_F64 } tl_precision;

#define TL_ENGINE_MAX_DEVICES 16 /* GPUs (row partitions) one engine may span */

typedef struct {
    tl_backend_kind backend;
    tl_geometry geometry;     /* only PARALLEL is implemented; CONE is TL_EUNSUPPORTED */
    uint32_t rows, cols;      /* detector shape */
    tl_dtype dtype;           /* the dtype frames are expected in (others are TL_ESHAPE) */
    uint32_t window;          /* N: projections kept */
    uint64_t first_index;     /* index of the scan's first projection (window never starts
                                 before it, so early frames are not "missing") */
    double center;            /* rotation axis column; default (cols - 1) / 2 */
    tl_filter filter;         /* default ram-lak */
    tl_weights weights;       /* default UNIFORM */
    bool already_linear;      /* input is already line integrals: no -log */
    tl_quality quality;       /* worst quality mode allowed; default EXACT */
    tl_precision precision;   /* F64: float64 reference mode (CPU backend only; tests) */
    int threads;              /* CPU backend threads; 0 = all cores (with several
                                 partitions: divided among them) */
    int device;               /* CUDA device ordinal (one GPU; see devices) */
    /* Several GPUs per host: with ndevices >= 2 the detector rows are split evenly across
     * devices[0 .. ndevices-1] (tl_engine_split_rows): each holds the rolling sinograms of
     * its rows and runs its own pipeline and kernels; a frame is split by rows on upload,
     * a horizontal slice is computed by the GPU that owns its row, and other planes are
     * assembled from what each GPU computes of them (gpu/split.c). Entries are CUDA
     * ordinals; the same one may repeat ({0, 0}: two partitions on one GPU, how a one-GPU
     * machine tests the splitting). On the CPU backend each entry is simply one partition
     * (how CI tests it). The GPUs are assumed alike (kernel list, tuning, device id are
     * the first one's). 0 (default) or 1 entry: one engine on `device` (on devices[0]
     * with ndevices 1). More than TL_ENGINE_MAX_DEVICES, or more partitions than
     * rows, is TL_EINVAL; a CUDA ordinal that does not exist is TL_EDEVICE. */
    uint32_t ndevices;
    int devices[TL_ENGINE_MAX_DEVICES];
    char kernel[32];          /* force a back-projection kernel by name (tests, benchmarks);
                                 "" = the fastest kernel of an allowed quality mode */
    uint32_t refresh;         /* tracked slices: full recomputation after this many
                                 incremental updates; 0 (default) = never: the
                                 accumulators are float64, so float drift stays bounded */
} tl_engine_config;

/* Defaults for a detector of rows x cols and a window of N projections (one device). */
void tl_engine_config_init(tl_engine_config *c, uint32_t rows, uint32_t cols, uint32_t window);

/* The rows partition k of `parts` owns when an engine of `rows` detector rows spans several
 * devices: [*first, *end), with first = floor(k rows / parts), so sizes differ by one at
 * most. (It also holds row *end, when there is one, for interpolation.) */
void tl_engine_split_rows(uint32_t rows, uint32_t parts, uint32_t k, uint32_t *first,
                          uint32_t *end);

typedef struct tl_engine tl_engine;

/* Memory an engine with this configuration needs, computed before anything is allocated:
 * window (rows x cols x N x bytes per value) plus working buffers, on the backend's device
 * (host RAM for the CPU backend). With several devices: the sums over them (available: the
 * free memory of every device together; tl_engine_create also checks each device alone). */
typedef struct {
    size_t window_bytes;
    size_t buffer_bytes;
    size_t total_bytes;
    size_t available_bytes;   /* free memory on the device (0 if unknown) */
} tl_memory_estimate;
tl_status tl_engine_estimate(const tl_engine_config *c, tl_memory_estimate *m);

/* Creates an engine. A backend that cannot run (TL_EDEVICE) or memory that is not there
 * (TL_ENOMEM, message with both numbers and what to change) is an error, never a fallback.
 * On failure *out is NULL and tl_engine_last_error(NULL) says why. */
tl_status tl_engine_create(const tl_engine_config *c, tl_engine **out);
void tl_engine_destroy(tl_engine *e);

/* Where a frame's pixels are. DEVICE: a pointer in GPU memory (CUDA backend only), read in
 * place on the engine's device and copied peer-to-peer from any other (a frame on GPU 0
 * reaches the rows of an engine spanning GPUs 0 and 1); the frame must be complete when
 * submitted (work queued on other streams is not waited for), and the engine has read it
 * when tl_engine_submit returns, unless the frame says read_later (below). */
typedef enum { TL_MEMORY_HOST = 0, TL_MEMORY_DEVICE } tl_memory;

typedef struct {
    tl_frame_kind kind;
    uint64_t index;           /* projections: position in the scan (any arrival order) */
    double angle;             /* projections: radians */
    double center_offset;     /* projections: axis correction added to center, pixels */
    uint64_t t_acq;           /* acquisition time (ns), carried into slice info */
    uint64_t t_recv;          /* receive time (ns), carried into slice info */
    tl_dtype dtype;
    uint32_t rows, cols;
    size_t pitch;             /* bytes between rows; 0 = cols * dtype size */
    const void *data;
    tl_memory memory;
    bool read_later;          /* DEVICE: submit returns before the GPU has read the frame;
                                 the buffer is free once tl_engine_frames_done says so */
    bool pinned;              /* HOST: data is in memory from tl_host_alloc for this engine's
                                 backend: the CUDA backend uploads it from there, without the
                                 copy into its staging ring (the caller's copy into it was
                                 that copy); submit returns once it is read */
    bool more;                /* another frame follows at once (a backlog): the backend may
                                 hold this projection's filtering to do it together with the
                                 next ones' (tl_engine_flush) */
} tl_frame;

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
 * IPC source hands ring slots back this way, daemon/ipc_frames.h). On a backend that
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

typedef enum { TL_SLICE_ROW = 0, TL_SLICE_ORTHO, TL_SLICE_PLANE } tl_slice_kind;
typedef enum { TL_AXIS_X = 0, TL_AXIS_Y, TL_AXIS_Z } tl_axis;

/* Volume coordinates: x, y in detector pixels from the rotation axis, z = detector row.
 * Every slice is a plane in the RECAST3D convention: output pixel (i, j) of an h x w slice
 * (row i, column j) sits at  base + s * xaxis + t * yaxis  with  s = (j + 0.5) / w  and
 * t = 1 - (i + 0.5) / h  (normalised coordinates, origin bottom-left, so image row 0 is the
 * top). Row and ortho slices are shorthands for planes (tl_slice_plane gives the 9 floats):
 *   row z, h x w, scale s:  xaxis (w s, 0, 0), yaxis (0, h s, 0), base (-w s/2, -h s/2, z)
 *   ortho X at x = p:       xaxis (0, w s, 0), yaxis (0, 0, -h s), base (p, -w s/2, zc + h s/2)
 *   ortho Y at y = p:       xaxis (w s, 0, 0), yaxis (0, 0, -h s), base (-w s/2, p, zc + h s/2)
 *   ortho Z at z = p:       the row slice at z = p
 * where zc = (rows - 1) / 2 is the detector's middle row (ortho images show z downwards,
 * like the detector). */
typedef struct {
    tl_slice_kind kind;
    uint32_t height, width;   /* output pixels */
    double scale;             /* volume units (detector pixels) per output pixel; default 1 */
    double z;                 /* ROW: detector row */
    tl_axis axis;             /* ORTHO */
    double position;          /* ORTHO: coordinate along axis */
    float orientation[9];     /* PLANE: xaxis, yaxis, base */
} tl_slice_spec;

void tl_slice_spec_row(tl_slice_spec *s, double z, uint32_t height, uint32_t width);
void tl_slice_spec_ortho(tl_slice_spec *s, tl_axis axis, double position, uint32_t height,
                         uint32_t width);
void tl_slice_spec_plane(tl_slice_spec *s, const float orientation[9], uint32_t height,
                         uint32_t width);
/* The plane (9 floats) of any slice spec, for an engine with `rows` detector rows. */
void tl_slice_plane(const tl_slice_spec *s, uint32_t rows, float orientation[9]);

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
    uint32_t projections_used;  /* projections held in the window */
    uint32_t missing;           /* indices of the window not held */
    uint64_t window_first, window_last;
    uint64_t t_acq;             /* t_acq of the newest (highest index) projection used */
    uint64_t t_recv;            /* its t_recv */
    const char *kernel;         /* name of the back-projection kernel used (static string) */
} tl_slice_info;

/* Back-projects the slices ids[0..n-1] from the current window into out[k] (height x
 * width floats each, row-major). info is NULL or an array of n, one per slice. An empty
 * window yields zeros. */
tl_status tl_engine_reconstruct(tl_engine *e, const int *ids, size_t n, float *const *out,
                                tl_slice_info *info);

/* The back-projection kernels a backend has, with the quality mode each satisfies. */
typedef struct {
    const char *name;         /* static string, e.g. "tex-std", "alu-fr/t64q16s8", "cpu-f32" */
    tl_quality quality;
    bool planes;              /* serves arbitrary planes (else horizontal rows only) */
    uint32_t slices;          /* horizontal slices computed per pass (1, 2 or 4): a kernel of
                                 2 or 4 serves that many rows of the same geometry at once */
    const char *params;       /* static string: its parameters, for tables ("tile 64x64, ...") */
} tl_kernel_info;
/* Writes at most cap entries, returns how many kernels there are. */
size_t tl_engine_kernels(const tl_engine *e, tl_kernel_info *out, size_t cap);

/* The kernels to use for height x width slices, as the autotuner (gpu/tune.h) chose them on
 * this card, indexed by the allowed quality (tl_quality): `single` for a slice on its own
 * (latency), `batch` for several horizontal slices of that size and geometry reconstructed
 * together (throughput). An empty name leaves that case to the backend's built-in rule, as
 * does a size without a choice. A chosen kernel that cannot serve a slice (a plane, a
 * window beyond its limits) is passed over for the built-in rule, never an error. */
#define TL_QUALITY_COUNT 3
typedef struct {
    uint32_t height, width;
    char single[TL_QUALITY_COUNT][32];
    char batch[TL_QUALITY_COUNT][32];
} tl_kernel_choice;
/* Sets the choice for c->height x c->width (replacing an earlier one of that size); names
 * must be kernels of this backend (TL_EINVAL otherwise). At most 16 sizes per engine. */
tl_status tl_engine_set_choice(tl_engine *e, const tl_kernel_choice *c);
/* The choice for h x w; false when there is none. */
bool tl_engine_get_choice(const tl_engine *e, uint32_t height, uint32_t width,
                          tl_kernel_choice *out);
void tl_engine_clear_choices(tl_engine *e);

/* What the engine runs on, as the tuning cache keys it. */
typedef struct {
    char name[160];           /* "NVIDIA H100 80GB HBM3", "CPU (16 threads)" */
    char uuid[48];            /* "GPU-1a2b...", "cpu" */
    char driver[32];          /* CUDA driver API version "13.0", "" on the CPU */
    char runtime[32];         /* CUDA runtime version, "" on the CPU */
    int cc_major, cc_minor;   /* compute capability (0 on the CPU) */
    int sm_count;             /* multiprocessors (threads on the CPU) */
} tl_device_id;
void tl_engine_device_id(const tl_engine *e, tl_device_id *id);

/* ---- benchmarks -------------------------------------------------------------------------- */

/* One timed kernel: the median time of `reps` calls after warm-up (CUDA events on the GPU,
 * the monotonic clock on the CPU), for the slices ids of a tl_engine_bench call. */
typedef struct {
    const char *kernel;
    tl_quality quality;
    double ms;                /* median time per call */
    double updates_per_s;     /* pixels x projections x slices / time */
} tl_bench_row;

/* Times every kernel able to serve these slices (reconstructing into internal buffers, no
 * host copies) as if the window were full: every slot, uniform angles over 180 degrees,
 * whatever the slots hold, so a new scan can be timed before its first frame. Writes at
 * most cap rows, sets *n to the count. */
tl_status tl_engine_bench(tl_engine *e, const int *ids, size_t nids, int reps, tl_bench_row *rows,
                          size_t cap, size_t *n);
/* The same for one kernel only (by name); TL_EINVAL when it cannot serve the slices. An
 * engine created with config.kernel set times only that kernel in tl_engine_bench too. */
tl_status tl_engine_bench_kernel(tl_engine *e, const int *ids, size_t nids, const char *kernel,
                                 int reps, tl_bench_row *row);

/* One measured hardware rate of the engine's device (seed-000-001.md §6.2 AP-2: the card's
 * row of the paper's Table 10): texture filter rates, conversion rates, shared memory. */
typedef struct {
    const char *name;         /* static: "texture float linear", "shared 128-bit loads", ... */
    const char *unit;         /* static: "G texels/s", "G ops/s", "GB/s" */
    double value;
} tl_hw_rate;
/* Runs the micro-benchmarks (a second or two on a GPU). TL_EUNSUPPORTED on backends
 * without them (the CPU). Writes at most cap rows, sets *n to the count. */
tl_status tl_engine_hw_rates(tl_engine *e, tl_hw_rate *out, size_t cap, size_t *n);
/* Times the per-frame path (upload from pinned host memory, convert, correct, filter,
 * store) for frame f, median of reps calls after warm-up. The frame is not kept. On an
 * engine spanning several devices (here and in tl_engine_bench) every device runs its share
 * at once and the time is the slowest one's: when the whole frame (job) is done. */
tl_status tl_engine_bench_store(tl_engine *e, const tl_frame *f, int reps, double *ms);

/* ---- parameters and state -------------------------------------------------------------- */

/* Moves the rotation axis; applies to every later reconstruction (it is used at back
 * projection, so the whole window follows at once). */
tl_status tl_engine_set_center(tl_engine *e, double center);
/* Changes the filter for projections that arrive from now on; projections already in the
 * window keep the filter they were stored with, so the window is consistent again after
 * N more projections. */
tl_status tl_engine_set_filter(tl_engine *e, tl_filter f);
/* Empties the window and the dark/flat batches (a new rotation of the same scan). */
tl_status tl_engine_reset(tl_engine *e);

typedef struct {
    const char *backend;        /* "cpu", "cuda" */
    const char *device_name;    /* "CPU (16 threads)", "NVIDIA H100 80GB HBM3",
                                   "2 × NVIDIA H200 ..." (several devices) */
    uint32_t window;            /* N */
    uint32_t held;              /* projections in the window */
    uint32_t missing;           /* indices of the window not held */
    bool empty;                 /* no projection received yet */
    uint64_t window_first, window_last;
    uint32_t dark_batch, flat_batch; /* frames averaged in the current batches */
    uint64_t accepted[3];       /* by tl_frame_kind */
    uint64_t stale, duplicate, shape; /* rejections */
    size_t memory_bytes;        /* allocated by the backend for this engine (all devices) */
    double center;
    tl_filter filter;
    int slices;
} tl_engine_state;
void tl_engine_get_state(const tl_engine *e, tl_engine_state *st);

/* Indices of the window that are not held, ascending; writes at most cap, returns the count
 * of missing indices (which may exceed cap). */
size_t tl_engine_missing(const tl_engine *e, uint64_t *out, size_t cap);

/* The engine's configuration (center and filter as currently set). */
const tl_engine_config *tl_engine_get_config(const tl_engine *e);

/* Last error message for e, or, with e == NULL, of the last failed tl_engine_create on this
 * thread. Never NULL. */
const char *tl_engine_last_error(const tl_engine *e);

#ifdef __cplusplus
}
#endif
#endif
