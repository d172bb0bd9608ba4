/* types.h — the engine's vocabulary: status codes, enumerations, the configuration, frames,
 * kernels and the rows of benchmark tables. The engine's callers see these through
 * gpu/engine.h (the one public door, which includes this file); the backends (gpu/cpu/,
 * gpu/cuda/), which sit below the engine, include it here, with gpu/base/backend.h, so they
 * never reach up into gpu/. The names of the enumerations are in names.c.
 */
#ifndef TL_TYPES_H
#define TL_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    TL_OK = 0,
    TL_EINVAL,       /* invalid argument or configuration */
    TL_ENOMEM,       /* host or device memory missing (message gives the numbers) */
    TL_ESTALE,       /* projection older than the window: rejected */
    TL_EDUPLICATE,   /* frame index already held in the window: rejected */
    TL_ESHAPE,       /* frame shape or dtype differs from the scan */
    TL_ENOTFOUND,    /* no such slice */
    TL_EUNSUPPORTED, /* valid request the backend does not implement (cone beam, device input) */
    TL_EDEVICE,      /* no usable GPU, or a CUDA/cuFFT call failed */
    TL_EIO,          /* file input/output */
    TL_EINTERNAL
} tl_status;

const char *tl_status_name(tl_status s); /* "TL_ESTALE" ... */

typedef enum { TL_DTYPE_U8 = 0, TL_DTYPE_U16, TL_DTYPE_U32, TL_DTYPE_F32 } tl_dtype;
size_t tl_dtype_size(tl_dtype t);

typedef enum { TL_FRAME_DARK = 0, TL_FRAME_FLAT, TL_FRAME_PROJ } tl_frame_kind;

typedef enum {
    TL_FILTER_RAMLAK = 0,
    TL_FILTER_SHEPP_LOGAN,
    TL_FILTER_COSINE,
    TL_FILTER_HAMMING,
    TL_FILTER_HANN,
    TL_FILTER_PARZEN,
    TL_FILTER_NONE, /* NONE: plain back projection */
    TL_FILTER_COUNT
} tl_filter;
const char *tl_filter_name(tl_filter f);                /* "ram-lak", ... */
bool tl_filter_parse(const char *name, tl_filter *out); /* also accepts "ramp" for ram-lak */

typedef enum { TL_BACKEND_AUTO = 0, TL_BACKEND_CPU, TL_BACKEND_CUDA } tl_backend_kind;
const char *tl_backend_name(tl_backend_kind b);
bool tl_backend_parse(const char *name, tl_backend_kind *out);

typedef enum { TL_GEOMETRY_PARALLEL = 0, TL_GEOMETRY_CONE } tl_geometry;

/* Angular weights of the FBP sum. UNIFORM: every projection weighs pi / window (exact for
 * equally spaced angles over 180 or 360 degrees; slices stay linear in each projection,
 * which incremental updates need). ANGLES: each held projection weighs its share of the
 * angular range, (theta[i+1] - theta[i-1]) / 2 over the sorted angles, scaled so the
 * weights sum to pi (ARCHITECTURE.md §3.3). */
typedef enum { TL_WEIGHTS_UNIFORM = 0, TL_WEIGHTS_ANGLES } tl_weights;

/* Interpolation quality a caller accepts (ARCHITECTURE.md §3.6). The engine serves each
 * reconstruction with the fastest kernel of an allowed mode. */
typedef enum { TL_QUALITY_EXACT = 0, TL_QUALITY_FAST, TL_QUALITY_PREVIEW } tl_quality;
const char *tl_quality_name(tl_quality q);
bool tl_quality_parse(const char *name, tl_quality *out);

typedef enum { TL_PRECISION_F32 = 0, TL_PRECISION_F64 } tl_precision;

/* Iterative reconstruction (issue #28; engine.h, tl_engine_iterate; the float64 reference is
 * gpu/iterative_ref.h). SIRT, SART (one view per subset), ordered-subsets SART, and OS-EM
 * for counts data (one subset: MLEM). */
typedef enum { TL_ITER_SIRT = 0, TL_ITER_SART, TL_ITER_OS_SART, TL_ITER_OSEM } tl_iter_method;
const char *tl_iter_method_name(tl_iter_method m); /* "sirt", "sart", "os-sart", "osem" */
/* The kernel a slice's info names when its SART iterations were swept in one go (the
 * CUDA backend's on-chip sweep, backend.h it_sweep) rather than view by view. */
#define TL_ITER_SWEEP_KERNEL "sart-sweep"
bool tl_iter_method_parse(const char *name, tl_iter_method *out);

/* The projector pair of an iterative method (gpu/project_ref.h describes both):
 *   MATCHED  A is the transpose of the engine's pixel-driven back projection (linear
 *            between bins), so A^T is that back projection: the default;
 *   JOSEPH   ray-driven (P. M. Joseph, IEEE TMI 1(3):192-196, 1982): each ray steps
 *            through the planes of pixels it runs most across, linear within each plane,
 *            times the path length per plane; A^T spreads back with the same weights. */
typedef enum { TL_PROJECTOR_MATCHED = 0, TL_PROJECTOR_JOSEPH } tl_projector;
const char *tl_projector_name(tl_projector p); /* "matched", "joseph" */
bool tl_projector_parse(const char *name, tl_projector *out);

typedef struct {
    tl_iter_method method;
    tl_projector projector;
    uint32_t iterations; /* at most */
    uint32_t subsets;    /* OS-SART, OS-EM (>= 1, at most the views) */
    double relaxation;   /* lambda of the SART family, in (0, 2) */
    bool nonneg;         /* clamp x at 0 after each iteration */
    double tv_weight;    /* >= 0; 0: no TV steps */
    uint32_t tv_steps;   /* TV descent steps per iteration (with tv_weight > 0) */
    double tolerance;    /* stop once the relative residual changes by less (0: never) */
    bool per_view;       /* SART view by view even where the backend sweeps them in one
                            go (TL_ITER_SWEEP_KERNEL): the benchmark's baseline */
} tl_iter_options;
/* The TV steps' smoothing: |grad x| is taken as sqrt(|grad x|^2 + eps^2) with eps this
 * fraction of max |x| as the iteration left it. A fixed tiny eps would make the descent
 * direction in flat regions (where neighbours differ by rounding) depend on rounding. */
#define TL_TV_SMOOTHING 1e-3

#define TL_ENGINE_MAX_DEVICES 16 /* GPUs (row partitions) one engine may span */

/* Per-frame corrections (issue 26), applied to each projection in this order:
 * convert ▸ dezinger ▸ dark/flat ▸ Paganin ▸ −log ▸ filter (ARCHITECTURE.md §3.11).
 * All zero (the default) is the plain pipeline of §3.4.
 *   dezinger  > 0: a raw pixel more than this many counts above the median of its 3 x 3
 *             neighbourhood is replaced by that median (a zinger is a bright outlier;
 *             tomopy's remove_outlier rule); 0 = off. The neighbourhood is mirrored at the
 *             frame's edges without repeating the edge pixel (index -1 is 1, n is n - 2:
 *             TL_MIRROR_BELOW/ABOVE), so a zinger on an edge counts once in its median.
 *   Paganin (single distance, Paganin et al. 2002, Eq. 10) when delta_beta > 0: energy
 *             in keV, distance sample–detector in metres, pixel size in micrometres, all
 *             > 0; applied to the flat-field-corrected transmission, with tomopy's edge
 *             padding to a power of two (gpu/method/paganin.h). Not with already_linear. */
/* The correction stages, each timed per frame (tl_engine_stage_times): on the GPU by CUDA
 * events around its kernels (and FFTs), on the CPU by the monotonic clock. */
typedef enum { TL_STAGE_DEZINGER = 0, TL_STAGE_PAGANIN, TL_STAGE_RINGS, TL_STAGE_COUNT } tl_stage;
const char *tl_stage_name(tl_stage s); /* "dezinger", "paganin", "rings" */
typedef struct {
    tl_stage stage;
    double seconds;
} tl_stage_time;

#define TL_MIRROR_BELOW(i, n) ((i) > 0 ? (i) - 1 : (n) > 1 ? 1u : 0u)
#define TL_MIRROR_ABOVE(i, n) ((i) + 1 < (n) ? (i) + 1 : (n) > 1 ? (n) - 2 : 0u)
/* Ring removal (rings != NONE) works on the rolling sinograms as a per-column correction
 * that keeps incremental updates exact (ARCHITECTURE.md §3.11): every projection is
 * corrected, after −log and before the filter, by subtracting the current stripe
 * estimate c(row, col); the estimate comes from a running column profile (the mean of
 * each detector pixel over the last ~window projections), filtered across columns by
 * Vo et al. 2018 (VO: median of `ring_size` columns) or Münch et al. 2009 (FW: the
 * detail coefficients of `ring_level` levels of a db5 wavelet decomposition, i.e. the
 * zero angular frequency that Münch's damping removes). Every window/16 projections the
 * estimate is recomputed; when it moved by more than ring_tolerance somewhere, the whole
 * window is brought to the new estimate (the filtered difference subtracted from every
 * slot) and tracked slices are rebuilt, as after a centre change. Full stripes (constant
 * over the scan) are what it removes; 0 for a parameter means its default. */
typedef enum { TL_RINGS_NONE = 0, TL_RINGS_VO, TL_RINGS_FW } tl_rings;
const char *tl_rings_name(tl_rings r); /* "none", "vo", "fw" */

typedef struct {
    double dezinger;
    double energy_kev, distance_m, pixel_um, delta_beta;
    tl_rings rings;
    uint32_t ring_size;    /* VO: median width in columns, odd (default 31) */
    uint32_t ring_level;   /* FW: wavelet levels (default 3) */
    double ring_tolerance; /* rebuild beyond this change, in -log units (default 1e-3) */
} tl_corrections;
/* "none", "vo[:SIZE[,TOLERANCE]]" or "fw[:LEVEL[,TOLERANCE]]" into k's ring fields (0 for
 * what is not given: the defaults); false for anything else. The engine checks ranges. */
bool tl_rings_parse(const char *s, tl_corrections *k);

/* A circular cone-beam scan (geometry CONE; gpu/geometry/cone.h, ARCHITECTURE.md §3.10):
 * the source turns on a circle of radius source_origin around the rotation axis, the flat
 * detector faces it at source_detector from the source. The engine's `center` is the
 * principal point's column (where the ray through the axis, perpendicular to the detector,
 * meets it: the rotation axis' column at the isocentre, as in parallel beam); offset_v puts
 * the principal row below (+) or above the detector's middle row. Volume coordinates stay
 * those of parallel beam (gpu/geometry/slice.h), measured in detector pixels scaled to the
 * axis (pixel_u * source_origin / source_detector in x and y, the same with pixel_v in z),
 * with z = the detector row the isocentre plane of that height projects to; so row slices,
 * ortho-slices and planes mean what they mean in parallel beam, and a volume of cols x cols
 * x rows voxels at scale 1 is what the detector sees at the axis. Distances and pitches in
 * mm, finite and > 0; angles come with the frames (radians), as in parallel beam. */
typedef struct {
    double source_origin;    /* source to rotation axis */
    double source_detector;  /* source to detector */
    double pixel_u, pixel_v; /* detector pixel pitch along a row and along a column */
    double offset_v;         /* principal row minus (rows - 1) / 2, pixels */
    /* A short scan (gpu/base/parker.h): views from scan_start over scan_range radians,
     * angles increasing, with pi + the fan angle <= scan_range < 2 pi; each projection's
     * columns are weighed by Parker's weights and a view by scan_range / window (the window
     * holds the scan). 0 (default): a full turn. Circular trajectories, uniform weights. */
    double scan_start, scan_range;
    /* Arbitrary trajectories (NULL: circular): projection first_index + k is taken with
     * matrices[k], a normalised 3x4 matrix from world mm to detector pixels in the
     * conventions of gpu/geometry/cone.h, k < nmatrices (a projection beyond is refused,
     * TL_EINVAL); the frame's angle then only orders the views for angular weights. The
     * fields above still define the volume unit and the row the isocentre's plane maps to
     * (volume coordinates, above); the cosine weights take each matrix's own intrinsics,
     * which must be the same for all (one detector; TL_EUNSUPPORTED otherwise). The
     * centre does not move a matrix: set_center is TL_EINVAL with matrices. The engine
     * copies the matrices at creation. */
    const double (*matrices)[12];
    uint32_t nmatrices;
} tl_cone_config;

typedef struct {
    tl_backend_kind backend;
    tl_geometry geometry;   /* PARALLEL (default) or CONE (with `cone` below) */
    tl_cone_config cone;    /* CONE: the circular trajectory (above) */
    uint32_t rows, cols;    /* detector shape */
    tl_dtype dtype;         /* the dtype frames are expected in (others are TL_ESHAPE) */
    uint32_t window;        /* N: projections kept */
    uint64_t first_index;   /* index of the scan's first projection (window never starts
                                 before it, so early frames are not "missing") */
    double center;          /* rotation axis column; default (cols - 1) / 2 */
    tl_filter filter;       /* default ram-lak */
    tl_weights weights;     /* default UNIFORM */
    /* ANGLES for an engine that holds part of a scan (recon --grid's columns): the whole
     * scan's angles (radians, any order; the engine keeps a sorted copy), so that each
     * held projection weighs its share of the whole scan's range, and the parts' slices
     * sum to the whole scan's. NULL (default): the held projections' own shares. */
    const double *weight_angles;
    uint32_t nweight_angles;
    bool already_linear;    /* input is already line integrals: no -log */
    tl_quality quality;     /* worst quality mode allowed; default EXACT */
    tl_precision precision; /* F64: float64 reference mode (CPU backend only; tests) */
    int threads;            /* CPU backend threads; 0 = all cores (with several
                                 partitions: divided among them) */
    int device;             /* CUDA device ordinal (one GPU; see devices) */
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
     * rows, is TL_EINVAL; a CUDA ordinal that does not exist is TL_EDEVICE. Iterative
     * slices run on the part that owns their row (gpu/split_iterative.c). Cone beam
     * splits no rows (a voxel reads them all): with keep_measurements and CUDA, one engine
     * on devices[0] (FDK runs there) whose iterative stacks are split by volume over
     * all of them (gpu/cuda/iterative_cone.cu); without, TL_EUNSUPPORTED. */
    uint32_t ndevices;
    int devices[TL_ENGINE_MAX_DEVICES];
    /* Several hosts (tomolived --mpi, gpu/remote.h): with a link, the rows are split as
     * above with one part per rank of the job (ndevices = link->size): part 0 here, on
     * devices[0], and part k on rank k, on the device that rank serves with (devices[k]
     * unused). peer is internal: the rank a part's configuration is for (split.c). */
    const struct tl_link *link;
    int peer;
    char kernel[32];  /* force a back-projection kernel by name (tests, benchmarks);
                                 "" = the fastest kernel of an allowed quality mode */
    tl_corrections corr; /* per-frame corrections; zero = none (above) */
    /* Centre of rotation from opposite projections (gpu/center.c): center_estimate keeps
     * each projection's column profile and estimates the axis every window/16
     * projections; center_auto also applies it (tl_engine_set_center_auto). */
    bool center_estimate, center_auto;
    /* 360-degree scan with the axis off the detector's middle (half acquisition,
     * gpu/halfacq.c): frames of cols columns are embedded in a virtual detector twice as
     * wide as the axis' distance to the far edge, each projection weighted so that it and
     * its opposite add up to one full projection (a smooth ramp over their overlap), and
     * back-projected over the whole turn: the field of view of the stitched sinogram,
     * exactly, and live. Needs `center` (the axis column on the detector; with
     * center_estimate / center_auto a first guess, estimated from the real detector's
     * columns), host frames; the window should be a whole turn. The axis may later move
     * inwards (set_center), and with estimation outwards by up to 16 columns too. */
    bool half_acquisition;
    /* Keep every projection also as the filter takes it (corrected and linearised) in a
     * second window of the same size, so that tl_engine_iterate serves slices of an engine
     * that filters for FBP (the daemon's live iterative slices). Twice the window's
     * memory; not needed with filter none. */
    bool keep_measurements;
    uint32_t refresh; /* tracked slices: full recomputation after this many
                                 incremental updates; 0 (default) = never: the
                                 accumulators are float64, so float drift stays bounded */
} tl_engine_config;

/* Memory an engine with this configuration needs, computed before anything is allocated:
 * window (rows x cols x N x bytes per value) plus working buffers, on the backend's device
 * (host RAM for the CPU backend). With several devices: the sums over them (available: the
 * free memory of every device together; tl_engine_create also checks each device alone). */
typedef struct {
    size_t window_bytes;
    size_t buffer_bytes;
    size_t total_bytes;
    size_t available_bytes; /* free memory on the device (0 if unknown) */
} tl_memory_estimate;

/* Where a frame's pixels are. DEVICE: a pointer in GPU memory (CUDA backend only), read in
 * place on the engine's device and copied peer-to-peer from any other (a frame on GPU 0
 * reaches the rows of an engine spanning GPUs 0 and 1); the frame must be complete when
 * submitted (work queued on other streams is not waited for), and the engine has read it
 * when tl_engine_submit returns, unless the frame says read_later (below). */
typedef enum { TL_MEMORY_HOST = 0, TL_MEMORY_DEVICE } tl_memory;

typedef struct {
    tl_frame_kind kind;
    uint64_t index;       /* projections: position in the scan (any arrival order) */
    double angle;         /* projections: radians */
    double center_offset; /* projections: axis correction added to center, pixels */
    uint64_t t_acq;       /* acquisition time (ns), carried into slice info */
    uint64_t t_recv;      /* receive time (ns), carried into slice info */
    tl_dtype dtype;
    uint32_t rows, cols;
    size_t pitch; /* bytes between rows; 0 = cols * dtype size */
    const void *data;
    tl_memory memory;
    bool read_later; /* DEVICE: submit returns before the GPU has read the frame;
                                 the buffer is free once tl_engine_frames_done says so */
    bool pinned;     /* HOST: data is in memory from tl_host_alloc for this engine's
                                 backend: the CUDA backend uploads it from there, without the
                                 copy into its staging ring (the caller's copy into it was
                                 that copy); submit returns once it is read */
    bool more;       /* another frame follows at once (a backlog): the backend may
                                 hold this projection's filtering to do it together with the
                                 next ones' (tl_engine_flush) */
} tl_frame;

/* The back-projection kernels a backend has, with the quality mode each satisfies. */
typedef struct {
    const char *name; /* static string, e.g. "tex-std", "alu-fr/t64q16s8", "cpu-f32" */
    tl_quality quality;
    bool planes;        /* serves arbitrary planes (else horizontal rows only) */
    uint32_t slices;    /* horizontal slices computed per pass (1, 2 or 4): a kernel of
                                 2 or 4 serves that many rows of the same geometry at once */
    const char *params; /* static string: its parameters, for tables ("tile 64x64, ...") */
} tl_kernel_info;

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

/* What the engine runs on, as the tuning cache keys it. */
typedef struct {
    char name[160];         /* "NVIDIA H100 80GB HBM3", "CPU (16 threads)" */
    char uuid[48];          /* "GPU-1a2b...", "cpu" */
    char driver[32];        /* CUDA driver API version "13.0", "" on the CPU */
    char runtime[32];       /* CUDA runtime version, "" on the CPU */
    int cc_major, cc_minor; /* compute capability (0 on the CPU) */
    int sm_count;           /* multiprocessors (threads on the CPU) */
} tl_device_id;

/* One timed kernel: the median time of `reps` calls after warm-up (CUDA events on the GPU,
 * the monotonic clock on the CPU), for the slices ids of a tl_engine_bench call. */
typedef struct {
    const char *kernel;
    tl_quality quality;
    double ms;            /* median time per call */
    double updates_per_s; /* pixels x projections x slices / time */
} tl_bench_row;

/* One measured hardware rate of the engine's device (ARCHITECTURE.md §6.2 AP-2: the
 * card's row of Table 10 of Chilingaryan et al. 2020, J. Real-Time Image Proc.
 * 17:1331): texture filter rates, conversion rates, shared memory. */
typedef struct {
    const char *name; /* static: "texture float linear", "shared 128-bit loads", ... */
    const char *unit; /* static: "G texels/s", "G ops/s", "GB/s" */
    double value;
} tl_hw_rate;

#ifdef __cplusplus
}
#endif
#endif
