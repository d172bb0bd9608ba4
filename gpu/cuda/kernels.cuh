/* kernels.cuh — the back-projection kernel family as a table: every kernel and parameter set
 * the CUDA backend can run, with the quality mode it guarantees (ARCHITECTURE.md §3.6) and how
 * many slices it computes per pass. backproject.cu chooses from this table (a forced name,
 * the autotuner's choice, or the built-in rule), groups a job's slices into batches for
 * the multi-slice kernels and launches them; bench.cu times every entry able to serve a
 * job; tl_engine_kernels lists them.
 *
 * The families, one file each (ARCHITECTURE.md §5; sections of Chilingaryan et al.
 * 2020, J. Real-Time Image Proc. 17:1331):
 *   bp_texture.cu    tex-*   the texture unit interpolates (Sect. 5), `fast`
 *   bp_alu.cu        alu*-*  shared-memory caches, ALU interpolation (Sect. 6)
 *   bp_hybrid.cu     hyb-*   texture and ALU blocks sharing the card (Sect. 7.1)
 *   bp_oversample.cu os*-*   x4 oversampled caches, nearest-neighbour lookup (Sect. 7.2)
 *   bp_plane.cu      plane-exact  any plane, two detector rows per projection
 *   bp_cone.cu       cone-*  cone beam (FDK), any plane: the only kernels of a cone job
 * A name is family + "/" + parameters where a family has several parameter sets, e.g.
 * "alu-fr/t64q16s8": tile 64 x 64, 16 pixels per thread, 8 projections cached per pass.
 */
#ifndef TL_CUDA_KERNELS_CUH
#define TL_CUDA_KERNELS_CUH

#include "gpu/cuda/bp_common.cuh"

#define TL_CUDA_MAX_NV 4 /* slices per pass, at most */

/* Up to TL_CUDA_MAX_NV horizontal slices of one geometry (rows z[0..nz-1]) for one launch,
 * or a single slice (any plane) for plane-exact. Kernels of nv slices given nz < nv
 * compute the missing ones from the last row again and do not write them. */
typedef struct {
    tl_cuda_geom g;
    int nz;
    uint32_t z[TL_CUDA_MAX_NV];
    float *out[TL_CUDA_MAX_NV];
    int cache_width; /* shared-memory kernels: bins cached per projection */
} tl_cuda_batch;

typedef enum {
    TL_KF_TEX = 0, /* needs the window's textures */
    TL_KF_ALU,     /* needs a cache width that fits (tile, max_cache) */
    TL_KF_HYB,     /* both */
    TL_KF_PLANE,   /* serves any parallel-beam plane */
    TL_KF_CONE     /* serves any cone-beam plane (and nothing else) */
} tl_cuda_family;

/* Cone beam (bp_cone.cu): up to TL_CUDA_CONE_MAX_NZ slices per pass, horizontal planes of
 * one (x, y) grid at heights z[0..nz-1] for the z-batch and column kernels, or a single
 * slice (any plane). The mirror kernels also write each slice's mirror image about the
 * source's plane into mirror[k] (NULL: none, or the slice is its own mirror). */
#define TL_CUDA_CONE_MAX_NZ 64
typedef struct {
    tl_cuda_geom g;
    int nz;
    float z[TL_CUDA_CONE_MAX_NZ];
    float *out[TL_CUDA_CONE_MAX_NZ];
    float *mirror[TL_CUDA_CONE_MAX_NZ];
} tl_cuda_cone_batch;

struct tl_cuda_kernel;
typedef tl_status (*tl_cuda_launch_fn)(tl_cuda_state *s, const struct tl_cuda_kernel *k,
                                       const tl_cuda_batch *b, size_t nproj);

typedef struct tl_cuda_kernel {
    const char *name;
    tl_quality quality;
    int slices; /* per pass: 1, 2 or 4 */
    tl_cuda_family family;
    const char *params; /* for tables */
    int tile;           /* shared-memory kernels: tile side in pixels */
    int max_cache;      /* ... and the most bins per projection their cache holds */
    bool constant;      /* reads the __constant__ projection table (holds its lock) */
    bool pack;          /* reads the packed multi-slice texture (s->pack) */
    tl_cuda_launch_fn launch; /* NULL for cone beam's, launched by bp_cone.cu */
} tl_cuda_kernel;

/* The cone-col kernels (bp_cone_column.cu): 32 x per_lane slices of b (per_lane 1 or 2),
 * each warp walking cols columns (1 or 4). 4 slices per lane (128 per pass) measured
 * slower: 80 registers, 3 blocks per SM (H100: 488 against 674 GUPS, 1024^3). Of every
 * tex_blocks + alu_blocks blocks an SM runs, tex_blocks sample `stack` (a texture stack;
 * scale: per slot, what undoes a float16 stack's scaling, or NULL) and alu_blocks the
 * stack `alu` names (cone_stack.cu). With path->mirror, per_lane counts slices of b that
 * each lane updates together with their mirrors (b.mirror): 64 or 128 slices a pass. */
typedef enum {
    TL_CUDA_COL_T32, /* the transposed stack: four float loads per update */
    TL_CUDA_COL_Q32, /* the float quad stack: one float4 */
    TL_CUDA_COL_Q16  /* the float16 quad stack: four float16 in 8 bytes (hybrids only) */
} tl_cuda_col_source;
typedef struct {
    int tex_blocks, alu_blocks;
    cudaTextureObject_t stack;
    const float *scale;
    tl_cuda_col_source alu;
    /* stack is the mirror stack (cone_stack.cu): each fetch updates a slice of b and its
     * mirror (b.mirror); texture blocks only */
    bool mirror;
} tl_cuda_cone_column_path;
tl_status tl_cuda_cone_column_launch(tl_cuda_state *s, int per_lane, int cols,
                                     const tl_cuda_cone_column_path *path,
                                     const tl_cuda_cone_batch *b, size_t nproj);

/* The table, in listing order; tl_cuda_kernel_count() entries. */
const tl_cuda_kernel *tl_cuda_kernel_at(int i);
int tl_cuda_kernel_count(void);
/* Index of the kernel called name, -1 if none. */
int tl_cuda_kernel_find(const char *name);

/* Each family's entries (defined in its file). */
extern const tl_cuda_kernel tl_cuda_tex_kernels[];
extern const int tl_cuda_tex_nkernels;
extern const tl_cuda_kernel tl_cuda_alu_kernels[];
extern const int tl_cuda_alu_nkernels;
extern const tl_cuda_kernel tl_cuda_hyb_kernels[];
extern const int tl_cuda_hyb_nkernels;
extern const tl_cuda_kernel tl_cuda_os_kernels[];
extern const int tl_cuda_os_nkernels;
extern const tl_cuda_kernel tl_cuda_plane_kernels[];
extern const int tl_cuda_plane_nkernels;
extern const tl_cuda_kernel tl_cuda_cone_kernels[];
extern const int tl_cuda_cone_nkernels;

/* Cone beam (bp_cone.cu): how many slices of job (i included) could share a z-batch or
 * column pass with slice i; whether kernel k can serve slice sl of job (why says why not);
 * and the launch of slice i of the job with the later slices of the same kernel that can
 * share its pass (marking them in s->job_done; outputs at s->out + off[j]). */
size_t tl_cuda_cone_partners(const tl_bp_job *job, size_t i);
/* How many detector pixels apart neighbouring voxels of slice i's grid project (the widest
 * step of one voxel along x, y or z at the grid's centre, first projection): the built-in
 * choice ranks the stack kernels by it (backproject.cu). */
double tl_cuda_cone_voxel_pixels(const tl_bp_job *job, size_t i);
bool tl_cuda_cone_can_serve(const tl_cuda_state *s, const tl_cuda_kernel *k,
                            const tl_bp_slice *sl, const tl_bp_job *job, char *why, size_t why_len);
tl_status tl_cuda_cone_job_launch(tl_cuda_state *s, const tl_cuda_kernel *k, const tl_bp_job *job,
                                  size_t i, const size_t *off);

/* Bins per projection a tile of side `tile` spans for this slice and job, plus margins;
 * 0 when more than max_cache (the kernel cannot serve the slice). */
int tl_cuda_cache_width(const tl_cuda_geom *g, const tl_bp_job *job, int tile, int max_cache);

/* Row pointers of a batch's sinograms in the window, the last repeated up to nv. */
struct tl_cuda_rows {
    const float *row[TL_CUDA_MAX_NV];
};
tl_cuda_rows tl_cuda_batch_rows(const tl_cuda_state *s, const tl_cuda_batch *b);

/* The 16-bit kernels' per-sinogram scales: s->d_scale[k] = 2^10 / max |value| of row z[k]
 * (over the whole window), computed on the device (no host round trip) before the kernel
 * runs. 2^10 keeps any weighted partial sum below pi 2^10 (the weights are non-negative
 * and sum to pi), far from half's 65504, and values 10^-7 of the largest still normal or
 * nearly so. */
#define TL_CUDA_HALF_PEAK 1024.f
tl_status tl_cuda_half_scales(tl_cuda_state *s, const tl_cuda_batch *b, size_t nproj);

#endif
