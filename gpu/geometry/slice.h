/* slice.h — what a slice is: a plane through the volume, sampled on h x w pixels, and the
 * shorthands (a detector row, an ortho-slice) that name one. Part of the engine's public
 * API (gpu/engine.h includes it); slice.c turns a spec into its plane.
 */
#ifndef TL_SLICE_H
#define TL_SLICE_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

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
    uint32_t height, width; /* output pixels */
    double scale;           /* volume units (detector pixels) per output pixel; default 1 */
    double z;               /* ROW: detector row */
    tl_axis axis;           /* ORTHO */
    double position;        /* ORTHO: coordinate along axis */
    float orientation[9];   /* PLANE: xaxis, yaxis, base */
} tl_slice_spec;

void tl_slice_spec_row(tl_slice_spec *s, double z, uint32_t height, uint32_t width);
void tl_slice_spec_ortho(tl_slice_spec *s, tl_axis axis, double position, uint32_t height,
                         uint32_t width);
void tl_slice_spec_plane(tl_slice_spec *s, const float orientation[9], uint32_t height,
                         uint32_t width);
/* The plane (9 floats) of any slice spec, for an engine with `rows` detector rows. */
void tl_slice_plane(const tl_slice_spec *s, uint32_t rows, float orientation[9]);
/* Plane k of a stack of n planes parallel to slice s (an engine of `rows` rows), `spacing`
 * volume units apart along its normal (xaxis x yaxis), s itself being plane n / 2: a
 * cone-beam sub-volume solved as one iterative problem (height and width: s's). */
void tl_slice_spec_stacked(const tl_slice_spec *s, uint32_t rows, uint32_t k, uint32_t n,
                           double spacing, tl_slice_spec *out);
/* Whether the slice's plane is finite (every float of it, so a position of 1e308 that
 * overflows a float is caught) and its centre lies in the volume of a rows x cols detector:
 * z in [-1, rows] (a plane within a row of the detector still samples it), x and y within
 * cols of the axis (an axis may sit near either edge of the detector, so the
 * reconstructable disk reaches up to cols from it). The engine itself samples any finite
 * plane (zeros off the volume); the daemon refuses what this rejects. */
bool tl_slice_inside(const tl_slice_spec *s, uint32_t rows, uint32_t cols);

#ifdef __cplusplus
}
#endif
#endif
