/* push_source.h — where `tomolive push` gets its frames: the simulated camera (analytic
 * Shepp-Logan phantom, gpu/phantom.h; in cone beam gpu/phantom_cone.h), TIFF stacks (clients/tiff.h) or an HDF5 scan
 * (clients/hdf5.h).
 *
 * Frames are produced ahead of the sender by worker threads into a ring of buffers and
 * sent zero-copy: ZeroMQ's free function hands a buffer back to the ring once the frame
 * is on the wire, and the buffer is then reused for the frame nbuf positions later. With
 * nbuf >= the number of frames every frame is produced in advance, so a paced or
 * as-fast-as-possible run measures the transport, not the phantom.
 *
 *   push_source *s = push_source_phantom(&opts, err, sizeof err);
 *   push_source_start(s, items, n, nbuf, err, sizeof err);
 *   push_source_wait(s, nbuf < n ? nbuf : n, 1.0);     fill the ring before the clock starts
 *   for each p: void *px = push_source_frame(s, p, err, sizeof err);
 *               send px with push_source_release as free function, push_source_hint(s, p)
 *   zmq_ctx_term(...);  push_source_free(s);           every buffer is back by then
 */
#ifndef TL_PUSH_SOURCE_H
#define TL_PUSH_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clients/cone_opts.h"
#include "gpu/engine.h"
#include "gpu/phantom.h"

/* One frame to send: a dark, flat or projection, its index within its kind (for a TIFF
 * source also the page it comes from) and, for projections, the angle in radians. */
typedef struct {
    tl_frame_kind kind;
    uint64_t index;
    double angle;
} push_item;

typedef struct {
    uint32_t rows, cols;
    tl_dtype dtype;     /* TL_DTYPE_U16 or TL_DTYPE_F32 (camera counts) */
    double flux;        /* photons per pixel of the open beam */
    double attenuation; /* the largest line integral through the phantom */
    double center;      /* column onto which the rotation axis projects */
    bool noise;         /* Poisson noise; deterministic per frame from seed */
    uint64_t seed;
    const tl_cone_opts *cone;     /* cone beam (--geometry cone), or NULL / parallel beam */
    const double (*matrices)[12]; /* cone beam: projection i along matrices[i] (the caller
                                     keeps them until push_source_free), or NULL: the
                                     circle of `cone` at each angle */
    uint32_t nmatrices;
} push_phantom_opts;

typedef struct push_source push_source;

/* The simulated sample: the 3-D Shepp-Logan phantom spanning 0.45 of the detector, its
 * densities scaled so that the largest line integral is `attenuation` (what push sends and
 * what `tomolive phantom` compares with). Returns 0, or -1 when out of memory. */
int push_phantom_build(tl_phantom *ph, uint32_t rows, uint32_t cols, double center,
                       double attenuation);

/* A simulated camera. NULL with a message in err on failure. In cone beam the sample is
 * tl_cone_opts_phantom's and each projection its exact cone-beam line integrals
 * (gpu/phantom_cone.h); frames are made the same way (counts, gain, dark, noise). */
push_source *push_source_phantom(const push_phantom_opts *o, char *err, size_t errlen);
/* TIFF stacks of projections and optional darks and flats of the same shape; frames are
 * sent in the files' sample type, or as float32 when the files differ. */
push_source *push_source_tiff(const char *proj, const char *darks, const char *flats, char *err,
                              size_t errlen);

/* An HDF5 scan (clients/hdf5.h: Data Exchange or NXtomo): its darks, flats and projections,
 * read frame by frame, in the file's sample type (float32 when its datasets differ). */
push_source *push_source_hdf5(const char *path, char *err, size_t errlen);
/* The projection angles an HDF5 file holds (radians, one per projection), or NULL. */
const double *push_source_angles(const push_source *s);

/* Detector shape, sample type, and pages per kind (tl_frame_kind; 0 for the phantom). */
void push_source_info(const push_source *s, uint32_t *rows, uint32_t *cols, tl_dtype *dtype,
                      uint32_t pages[3]);

/* Starts producing the frames items[0..n-1] (copied), in that order, into nbuf buffers. */
int push_source_start(push_source *s, const push_item *items, size_t n, size_t nbuf, char *err,
                      size_t errlen);
/* Waits at most timeout_s seconds until count frames have been produced (frames
 * 0..count-1 when count <= nbuf), or production failed; returns how many there are. */
size_t push_source_wait(push_source *s, size_t count, double timeout_s);
/* Whether producing a frame failed (push_source_frame then says why). */
bool push_source_failed(push_source *s);
/* Waits for frame p (taken in order) and returns its pixels; NULL with err when producing
 * it failed. The buffer belongs to the caller until push_source_release. */
void *push_source_frame(push_source *s, size_t p, char *err, size_t errlen);
/* A ZeroMQ free function (zmq_free_fn) that returns a frame's buffer to the ring; the hint
 * for frame p is push_source_hint(s, p). Thread-safe: ZeroMQ calls it on an I/O thread. */
void push_source_release(void *data, void *hint);
void *push_source_hint(push_source *s, size_t p);
/* Frame p, taken and not yet released, goes out in n zero-copy messages (row bands, each
 * a slice of the buffer with push_source_release as free function): its buffer returns
 * to the ring at the n-th release instead of the first. */
void push_source_share(push_source *s, size_t p, unsigned n);
/* Stops the workers and frees everything; no buffer may still be with ZeroMQ. */
void push_source_free(push_source *s);

#endif
