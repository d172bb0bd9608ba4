/* split_impl.h — the split backend's state (split.c), shared by its files: split.c
 * (configuration, creation, frames, device queries), split_route.c (which part computes
 * what, and running the parts at once), split_acc.c (tracked slices) and split_bench.c
 * (benchmarks), split_iterative.c (iterative slices). Internal to gpu/.
 */
#ifndef TL_SPLIT_IMPL_H
#define TL_SPLIT_IMPL_H

#include "gpu/base/pool.h"
#include "gpu/engine.h"
#include "gpu/split.h"

#define TL_SPLIT_BENCH_ROWS 128 /* kernels one part's benchmark lists at most */
#define TL_SPLIT_SPIN_NS \
    100000 /* the pool spins this long between operations: frames
                                  * back to back come every ~60-150 us, and waking a sleeping
                                  * thread for each made host frames scale worse, and
                                  * unevenly, on two GPUs (figures: BENCHMARKS.md) */

/* One child backend and its share of the current operation. */
typedef struct {
    const tl_backend_ops *ops;
    void *be;
    tl_errbuf err;       /* the child reports here */
    int device;          /* CUDA ordinal (the CPU backend ignores it) */
    int rank;            /* the rank it runs on (config.link; 0: here) */
    uint32_t first, end; /* owns rows [first, end) */
    uint32_t held;       /* holds rows [first, first + held) */
    tl_status st;        /* outcome of its share */

    /* its slices of the current job, shifted into its rows, and where each came from */
    tl_bp_slice *sl;
    const char **sk; /* their kernels, as the child names them */
    int *ids;        /* their slice ids (accumulators) */
    float **outs;    /* their outputs (accumulator read-outs) */
    size_t *from;    /* index in the caller's list */
    size_t n, cap;
    float *scratch;     /* host copies of the planes it computes */
    size_t scratch_cap; /* floats */
    const char *kernel; /* what its share ran */

    tl_bench_row *rows; /* bench: its table */
    size_t nrows;
    double ms; /* bench_store: its time */
} tl_split_part;

/* A tracked slice: its size from acc_alloc, and its plane once it is placed on the parts
 * that compute it, which happens at its first update (always a full rebuild: the engine
 * builds a newly tracked slice before it adds to it), since acc_alloc does not say the
 * plane. */
typedef struct {
    bool alloc;
    bool placed;
    tl_bp_slice sl;
} tl_split_acc;

typedef enum {
    OP_CALIB,
    OP_STORE,
    OP_BENCH_STORE, /* a frame, cut by rows */
    OP_BACKPROJECT,
    OP_ACC_UPDATE,
    OP_ACC_READ, /* routed slices */
    OP_BENCH,
    OP_FLUSH
} tl_split_op;

typedef struct {
    tl_errbuf *eb;
    tl_split_part p[TL_ENGINE_MAX_DEVICES];
    uint32_t np, rows;
    bool cuda;
    tl_pool *pool; /* np threads, the caller included */
    char name[256];

    /* the current operation, read by every part's job */
    tl_split_op op;
    const tl_frame *f;
    uint32_t count, slot;
    const tl_bp_job *job;
    bool add;
    int reps;

    /* planes of the current list: copy[i * np + k] is part k's copy of slice i */
    const float **copy;
    size_t copy_cap;  /* slices */
    tl_bp_slice *rsl; /* acc_read: the slices read out */
    size_t rsl_cap;

    tl_split_acc *acc; /* by slice id */
    int nacc;

    uint32_t it_part; /* the part solving the current iterative problem */
} tl_split;

/* split.c: reports part k's failure (its own message) as the split's. */
tl_status tl_split_part_fail(tl_split *sp, uint32_t k);
/* split.c: the kernels of part 0 (the GPUs of a host are assumed alike). */
size_t tl_split_kernels(const void *state, tl_kernel_info *out, size_t cap);

/* split_route.c */
/* Whether part k has a share of the current operation. */
bool tl_split_busy(const tl_split *sp, uint32_t k);
/* Runs operation op on every part with a share, all at once; the first failure (by part)
 * is the result. */
tl_status tl_split_run(tl_split *sp, tl_split_op op);
/* The parts that compute slice sl: [*k0, *k1]. */
void tl_split_parts_of(const tl_split *sp, const tl_bp_slice *sl, uint32_t *k0, uint32_t *k1);
/* Part k's share of slice sl: the whole slice, or of a plane whose output rows each lie at
 * one height (an ortho-slice) just the rows whose height part k owns, rows [*r0, *r0 +
 * share->height) of sl as a plane of their own; false when part k computes none of it. */
bool tl_split_share(const tl_split *sp, const tl_bp_slice *sl, uint32_t k, tl_bp_slice *share,
                    uint32_t *r0);
/* Deals slices sl[0..n) (ids: their slice ids, or NULL) to the parts that compute them. */
tl_status tl_split_route(tl_split *sp, const tl_bp_slice *sl, size_t n, const int *ids);
/* After tl_split_route and tl_split_run: the planes among sl[0..n) put together. */
void tl_split_assemble_all(tl_split *sp, const tl_bp_slice *sl, size_t n);
/* job->kernel and slice_kernel from what the parts ran. */
void tl_split_name_kernels(const tl_split *sp, tl_bp_job *job);
/* realloc that keeps p (and clears *ok) when it fails. */
void *tl_split_grown(void *p, size_t n, size_t size, bool *ok);

/* split_acc.c: the accumulator operations of the table. */
tl_status tl_split_acc_alloc(void *state, int id, uint32_t height, uint32_t width);
void tl_split_acc_free(void *state, int id);
tl_status tl_split_acc_update(void *state, tl_bp_job *job, const int *ids, bool add);
tl_status tl_split_acc_read(void *state, const int *ids, size_t n, float *const *out);

/* split_bench.c: the benchmark operations of the table. */
tl_status tl_split_bench(void *state, tl_bp_job *job, int reps, tl_bench_row *rows, size_t cap,
                         size_t *n);
tl_status tl_split_bench_store(void *state, const tl_frame *f, int reps, double *ms);

/* split_iterative.c: the iterative primitives of the table (the owner part solves). */
tl_status tl_split_it_begin(void *state, const tl_it_problem *p, double stats[2]);
tl_status tl_split_it_image(void *state, const float *in, float *out);
tl_status tl_split_it_forward(void *state, tl_it_views v, tl_it_rule rule, double *sumsq);
tl_status tl_split_it_backward(void *state, tl_it_views v, tl_it_rule rule, double lambda);
tl_status tl_split_it_sweep(void *state, double lambda, bool *swept);
tl_status tl_split_it_mark(void *state);
tl_status tl_split_it_regularise(void *state, bool nonneg, double tv_weight, uint32_t tv_steps);
void tl_split_it_end(void *state);

#endif
