/* cone_scan.h — a cone-beam scan for the tests (issue #21): exact projections of the 3-D
 * Shepp-Logan phantom (gpu/phantom_cone.h) on a circular trajectory, fed to an engine as
 * line integrals, and the float64 FDK reference (gpu/fdk_ref.h) of the same data, so a
 * test compares an engine's volume with the reference voxel for voxel.
 *
 * Geometry: source 200 mm from the axis, detector 400 mm from the source and 79.5 mm
 * wide whatever its columns (1.5 mm pixels for 53 columns; half the pitch at the axis is
 * the volume unit), square pixels, phantom 30 mm across (inside the field of view, and
 * inside the height of 37 rows of 1.5 mm: nothing truncated). The engine's volume is a
 * stack of row slices (gpu/geometry/slice.h) at the rows the reference's voxel planes
 * project to, so voxel (i, j, k) of the reference (x = i - (nx-1)/2 units, y likewise,
 * z = k - (nz-1)/2) is pixel (row ny-1-j, column i) of row slice k.
 *
 *   tl_cone_scan s; tl_cone_scan_make(&s, rows, cols, nv, 2.5, -1.5);
 *   tl_engine_config c = tl_cone_scan_config(&s, TL_BACKEND_CPU);
 *   tl_cone_scan_engine(&s, &c, nx, ny, nz, vol);   tl_cone_scan_reference(&s, ..., ref);
 */
#ifndef TL_TESTS_CONE_SCAN_H
#define TL_TESTS_CONE_SCAN_H

#include <stdbool.h>
#include <stdint.h>

#include "gpu/engine.h"

#define TL_CONE_SCAN_SAD 200.0
#define TL_CONE_SCAN_SDD 400.0
#define TL_CONE_SCAN_WIDTH 79.5   /* mm */
#define TL_CONE_SCAN_PHANTOM 15.0 /* mm: tl_phantom_shepp_logan's scale (30 mm across) */

typedef struct {
    uint32_t rows, cols, nv;
    double pitch;            /* mm, TL_CONE_SCAN_WIDTH / cols */
    double center, offset_v; /* the principal point: column, and row minus the middle row */
    double *angles;          /* nv, over a full turn, non-uniform when asked */
    float *proj;             /* nv x rows x cols line integrals */
} tl_cone_scan;

/* A scan of nv views over 360 degrees (jittered by up to a third of a step when
 * `jitter`), principal point at column (cols-1)/2 + du and row (rows-1)/2 + dv.
 * Returns 0, or -1 (with a message on stderr). */
int tl_cone_scan_make(tl_cone_scan *s, uint32_t rows, uint32_t cols, uint32_t nv, double du,
                      double dv, bool jitter);
/* The same with the nv view angles given (radians). */
int tl_cone_scan_make_angles(tl_cone_scan *s, uint32_t rows, uint32_t cols, uint32_t nv, double du,
                             double dv, const double *angles);
void tl_cone_scan_free(tl_cone_scan *s);

/* An engine configuration for the scan (F32 line integrals, window nv, uniform weights). */
tl_engine_config tl_cone_scan_config(const tl_cone_scan *s, tl_backend_kind b);

/* Volume unit in mm (a detector pixel at the axis). */
double tl_cone_scan_unit(const tl_cone_scan *s);

/* Submits views [first, first + count) (view i at index i, angle angles[i % nv]). */
tl_status tl_cone_scan_submit(const tl_cone_scan *s, tl_engine *e, uint64_t first, uint32_t count);

/* The row slice of volume plane k (of nz) as a spec of ny x nx pixels at scale 1. */
void tl_cone_scan_slice(const tl_cone_scan *s, uint32_t nx, uint32_t ny, uint32_t nz, uint32_t k,
                        tl_slice_spec *spec);

/* The engine's volume: nz row slices into vol (nz x ny x nx floats, reference order),
 * in volume units (attenuation per unit). */
tl_status tl_cone_scan_engine(const tl_cone_scan *s, const tl_engine_config *c, uint32_t nx,
                              uint32_t ny, uint32_t nz, float *vol);

/* Out of core (issue #22): the n x n x nz volume (planes as tl_cone_scan_slice, row slices
 * of n x n) in slabs of `slab` planes, each reconstructed in one call from the engine of
 * the whole detector (configuration c) into a, and from an engine of only the detector
 * rows the slab reads (tl_engine_rows_read, tl_engine_config_band) into b; the tallest
 * band's rows into *band_rows. */
tl_status tl_cone_scan_bands(const tl_cone_scan *s, const tl_engine_config *c, uint32_t n,
                             uint32_t nz, uint32_t slab, float *a, float *b, uint32_t *band_rows);

/* The float64 reference of the same data, in the same units (1/mm times the unit). */
tl_status tl_cone_scan_reference(const tl_cone_scan *s, uint32_t nx, uint32_t ny, uint32_t nz,
                                 double *vol);

#endif
