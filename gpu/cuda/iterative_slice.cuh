/* iterative_slice.cuh — the CUDA backend's parallel-beam iterative problem (one slice), as
 * iterative.cu (the per-subset passes) and iterative_sweep.cu (a whole SART iteration in
 * one launch) both see it: its buffers, its views and the matched pair's link function.
 */
#ifndef TL_CUDA_ITERATIVE_SLICE_CUH
#define TL_CUDA_ITERATIVE_SLICE_CUH

#include "gpu/cuda/cuda_state.cuh"

/* The slice's size; where a pixel lands in each view is the view's own (it_view). */
typedef struct {
    uint32_t h, w, cols;
} it_grid;

/* A view, as the kernels use it: pixel (i, j) lands at u = u00 + i du_i + j du_j (the
 * plane's pixel positions through the view's cos, sin and centre, computed in double on the
 * host and rounded once); for Joseph's pair the path length per plane and 1 / along (u's
 * change per pixel along a plane), so that a crossing costs a multiplication. */
typedef struct {
    float u00, du_i, du_j, len, inv_along;
    int rows; /* the planes are rows of pixels (u changes faster along a row), else columns:
                 decided once, on the host, so that every kernel walks the same planes */
} it_view;

struct tl_cuda_iter {
    tl_projector projector;
    it_grid grid;
    uint32_t nproj;
    it_view *views;
    float *x, *mark, *g;   /* images */
    float *xt;             /* x transposed (w x h), for the forward pass */
    float *b, *ax, *r, *R; /* nproj * cols */
    double *sums;          /* reductions, 2 */
    unsigned *amax;        /* max |x|, as float bits (it_begin: min b's float_key) */
    uint32_t *slots;       /* the views' window slots */
    size_t bytes;          /* device memory of all the above */
    size_t npix_cap;       /* pixels and views the buffers hold: a problem that fits */
    uint32_t nview_cap;    /* reuses them (a volume's slices, one after another) */
    float du_max[2];       /* the largest |du_i|, |du_j| over the views: how many bins a
                              tile's pixels reach (iterative_sweep.cu) */
    float du_fast_min;     /* the least over the views of max(|du_i|, |du_j|) */
};

/* The matched pair's link function: where pixel (i, j) (as floats) lands in view v. */
static __device__ __forceinline__ float pixel_u(const it_view &v, float i, float j)
{
    return __fmaf_rn(j, v.du_j, __fmaf_rn(i, v.du_i, v.u00));
}

/* One SART iteration (every view in turn, a subset each) in one launch where the slice
 * fits on chip (iterative_sweep.cu); *swept false (nothing done) where it does not, and
 * the per-view passes run instead. */
tl_status tl_cuda_it_sweep(tl_cuda_state *s, double lambda, bool *swept);

#endif
