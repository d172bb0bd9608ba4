/* remote_impl.h — what the two halves of remote.h share (internal to gpu/): the operations
 * on the wire, and how a configuration, a frame and a job travel (remote_codec.c).
 *
 * A request is one message from rank 0 to the serving rank under the backend's tag: the
 * operation (uint32), then its arguments in the order of the backend table. Its answer is
 * one message back under the same tag: the status (int32), the error message ("" on
 * success), then the results. Every operation is answered, so the two ranks never
 * disagree on what has been done. Tag 0 carries stop, which is not answered.
 */
#ifndef TL_REMOTE_IMPL_H
#define TL_REMOTE_IMPL_H

#include "gpu/base/wire.h"
#include "gpu/remote.h"

typedef enum {
    TL_REMOTE_STOP = 1,
    TL_REMOTE_ESTIMATE,
    TL_REMOTE_CREATE,
    TL_REMOTE_DESTROY,
    TL_REMOTE_SET_FILTER,
    TL_REMOTE_CALIB_RESET,
    TL_REMOTE_CALIB_ADD,
    TL_REMOTE_STORE,
    TL_REMOTE_FLUSH,
    TL_REMOTE_BACKPROJECT,
    TL_REMOTE_MEMORY_USED,
    TL_REMOTE_ACC_ALLOC,
    TL_REMOTE_ACC_FREE,
    TL_REMOTE_ACC_UPDATE,
    TL_REMOTE_ACC_READ,
    TL_REMOTE_KERNELS,
    TL_REMOTE_BENCH,
    TL_REMOTE_BENCH_STORE,
    TL_REMOTE_FENCE,
    TL_REMOTE_FENCE_DONE,
    TL_REMOTE_IT_BEGIN,
    TL_REMOTE_IT_IMAGE,
    TL_REMOTE_IT_FORWARD,
    TL_REMOTE_IT_BACKWARD,
    TL_REMOTE_IT_SWEEP,
    TL_REMOTE_IT_MARK,
    TL_REMOTE_IT_REGULARISE,
    TL_REMOTE_IT_END,
} tl_remote_op;

#define TL_REMOTE_STOP_TAG 0

/* The build's fingerprint: its version and the sizes of the structures that travel as
 * their bytes. A serving rank of another build refuses to create anything. */
void tl_remote_put_build(tl_wire *w);
bool tl_remote_same_build(tl_wire_reader *r);

/* A configuration (with its cone matrices and whole-scan angles). The reader's pointers
 * point into the message; `link` comes back NULL. */
void tl_remote_put_config(tl_wire *w, const tl_engine_config *c);
void tl_remote_get_config(tl_wire_reader *r, tl_engine_config *c);

/* A frame in host memory: its header and its pixels, rows packed. The reader's frame
 * points into the message. */
void tl_remote_put_frame(tl_wire *w, const tl_frame *f);
void tl_remote_get_frame(tl_wire_reader *r, tl_frame *f);

/* A job: geometry, quality, forced kernel, kernel choices, projections, and its slices
 * (planes, sizes, whether each has an output, whether their kernels are asked for). The
 * reader makes job of them: its slices, their outputs (one after another in planes) and
 * kernel names in the scratch (grown, kept for the next), its projections and choices in
 * the message; false when the message is short or memory runs out. */
typedef struct {
    tl_bp_slice *slices;
    const char **kernels;
    size_t cap; /* slices */
    float *planes;
    size_t planes_cap; /* floats */
} tl_remote_scratch;
/* Grows the scratch to n slices and px floats of planes; false without memory. */
bool tl_remote_scratch_reserve(tl_remote_scratch *s, size_t n, size_t px);
void tl_remote_put_job(tl_wire *w, const tl_bp_job *job);
bool tl_remote_get_job(tl_wire_reader *r, tl_bp_job *job, tl_remote_scratch *s);

/* An iterative problem: its geometry, projector, slices (planes and sizes) and views. The
 * reader's slices are in the scratch, its views in the message. */
void tl_remote_put_problem(tl_wire *w, const tl_it_problem *p);
bool tl_remote_get_problem(tl_wire_reader *r, tl_it_problem *p, tl_remote_scratch *s);

#endif
