/* cone_read.h — cone-beam projection matrices from the geometry files users already have
 * (issue #21): `tomolive recon --geometry cone --matrices FILE[:FORMAT]`. Each reader gives
 * one normalised 3x4 matrix per projection in the conventions of gpu/geometry/cone.h (world
 * mm, origin at the isocentre, z the rotation axis, u and v pixel indices with pixel k's
 * centre at k), normalised with the isocentre in front (tl_cone_matrix_normalize), so the
 * engine takes them as they are (tl_cone_config.matrices).
 *
 * FORMAT (the text after the last ':' when it is one of these; else from the name: .xml is
 * rtk, anything else p):
 *
 *   p      P itself: one row of 12 numbers per projection, row-major (P[4 r + c]).
 *
 *   astra  ASTRA's cone_vec rows (astra_create_proj_geom('cone_vec', rows, cols, V)):
 *          (srcX, srcY, srcZ, dX, dY, dZ, uX, uY, uZ, vX, vY, vZ): the source, the centre of
 *          the detector, and the vectors from pixel (0,0) to (0,1) (the next column) and to
 *          (1,0) (the next row), in mm. ASTRA puts d at the middle of the detector (its
 *          ConeVecProjectionGeometry3D takes the corner as d - cols/2 u - rows/2 v, and
 *          pixel centres half a pixel in), i.e. at pixel ((cols-1)/2, (rows-1)/2) in our
 *          index convention. World axes: ASTRA's x, y, z are ours, unchanged (as the
 *          tomopackets adapter takes them, daemon/ingest/adapter_tomopackets.c); ASTRA's
 *          column and row indices are ours. So ASTRA's circular "cone" geometry at angle t
 *          (astra_geom_2vec) reads as our circular scan at angle -t, the adapter's
 *          negation, which comes out of the vectors by itself.
 *
 *   rtk    RTK's ThreeDCircularProjectionGeometry XML (<RTKThreeDCircularGeometry
 *          version="2" or "3">), read with libxml2 as RTK's own reader does: parameters
 *          given before the projections, or inside one, hold for the projections after
 *          them; defaults 0. Each projection's matrix is RTK's documented composition
 *          (RTK documentation/docs/Geometry.md, rtkThreeDCircularProjectionGeometry.cxx):
 *            M = [1 0 sx-px; 0 1 sy-py; 0 0 1] [-sdd 0 0 0; 0 -sdd 0 0; 0 0 1 -sid]
 *                [I | (-sx, -sy, 0)] Rz(-InPlane) Rx(-OutOfPlane) Ry(-Gantry),
 *          every angle and offset supported (degrees; mm). A <Matrix> in a projection is
 *          checked against it, as RTK does (each entry within 0.001). RTK's M maps RTK's
 *          world (rotation axis y) to detector mm (X along the projection image's first
 *          index, Y along its second); ours are taken from it by
 *            - world axes: ours = (x, -z, y) of RTK's, a rotation of +90 degrees about x
 *              (RTK's rotation axis y becomes our z, RTK's x stays ours, the source of
 *              gantry angle 0 at RTK's +z comes to our -y, where our angle 0 has it). So
 *              RTK's GantryAngle g is our circular angle -g;
 *            - detector: u = (cols - 1)/2 + X / pitch_u, v = (rows - 1)/2 + Y / pitch_v:
 *              RTK's detector origin (X, Y) = (0, 0) at the middle pixel, which is RTK's
 *              default projection origin (-(size - 1)/2 x spacing), and the pitch that
 *              the file does not hold from the caller (--pixel-size). Projections stored
 *              with another origin o (mm): add o + (size - 1)/2 x spacing to
 *              ProjectionOffsetX/Y.
 *          Refused: SourceToDetectorDistance 0 (RTK's parallel geometry) and a non-zero
 *          RadiusCylindricalDetector (a curved detector has no 3x4 matrix); elements this
 *          reader does not know (rather than ignoring a parameter). Collimation* are read
 *          and ignored (they restrict RTK's projectors, not the geometry).
 *
 * Numbers (p and astra): a text file of one projection per line, 12 numbers separated by
 * blanks or commas ('#' starts a comment, blank lines are ignored), or a .npy file
 * (recognised by its magic, npy.h) of float64 or float32 of shape (N, 12) or (N, 3, 4).
 *
 * Every error names the file and the line (text), row (.npy) or element and line (XML),
 * and the value: a bad number, a wrong count of numbers, a singular matrix (no finite
 * source, or the isocentre on the source's plane), an empty file. The engine later checks
 * the matrices against the volume (source outside it, every corner in front).
 *
 *   tl_cone_matrix_file m;
 *   if (tl_cone_matrix_spec(arg, &m, err, sizeof err) != 0) ...;
 *   tl_cone_detector d = {rows, cols, pitch_u, pitch_v};
 *   double (*P)[12]; uint32_t n;
 *   if (tl_cone_read(&m, &d, &P, &n, err, sizeof err) != 0) ...;   (free(P) after)
 *   tl_cone_matrix_file_free(&m);
 */
#ifndef TL_CONE_READ_H
#define TL_CONE_READ_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    TL_CONE_FILE_P,     /* our own matrices */
    TL_CONE_FILE_ASTRA, /* ASTRA cone_vec rows */
    TL_CONE_FILE_RTK,   /* RTK ThreeDCircularProjectionGeometry XML */
} tl_cone_file_format;

typedef struct {
    char *path; /* malloc'ed */
    tl_cone_file_format format;
} tl_cone_matrix_file;

/* The detector the files describe: its shape (astra: where its centre is; rtk: where its
 * origin is) and pixel pitch in mm (rtk: from mm to pixels). */
typedef struct {
    uint32_t rows, cols;
    double pitch_u, pitch_v;
} tl_cone_detector;

/* "FILE[:FORMAT]" (FORMAT p, astra or rtk; default from the name) into m; 0, or -1 with a
 * message for an empty path or an unknown format. */
int tl_cone_matrix_spec(const char *arg, tl_cone_matrix_file *m, char *err, size_t errlen);
void tl_cone_matrix_file_free(tl_cone_matrix_file *m);
const char *tl_cone_file_format_name(tl_cone_file_format f);

/* The n matrices of file m for detector d into *P (malloc'ed, n >= 1); 0, or -1 with a
 * message naming the file, the place in it and the value. */
int tl_cone_read(const tl_cone_matrix_file *m, const tl_cone_detector *d, double (**P)[12],
                 uint32_t *n, char *err, size_t errlen);

/* ---- the parts, for tests ---------------------------------------------------------------- */

/* N rows of 12 numbers from a text or .npy file; lines[k]: the text line of row k (NULL
 * for .npy). */
int tl_cone_read_rows(const char *path, double (**rows)[12], uint32_t **lines, uint32_t *n,
                      char *err, size_t errlen);

/* One ASTRA cone_vec row to a normalised matrix; 0, or -1 with why. */
int tl_cone_from_astra(const double vec[12], const tl_cone_detector *d, double P[12], char *why,
                       size_t why_len);

/* RTK's parameters of one projection (angles in degrees, distances and offsets in mm). */
typedef struct {
    double sid, sdd; /* SourceToIsocenterDistance, SourceToDetectorDistance */
    double gantry, out_of_plane, in_plane;
    double source_x, source_y;         /* SourceOffsetX/Y */
    double projection_x, projection_y; /* ProjectionOffsetX/Y */
} tl_rtk_projection;

/* RTK's own matrix of a projection (RTK world to detector mm), as RTK writes it. */
void tl_cone_rtk_matrix(const tl_rtk_projection *p, double M[12]);
/* RTK's matrix M to a normalised matrix of ours; 0, or -1 with why. */
int tl_cone_from_rtk(const double M[12], const tl_cone_detector *d, double P[12], char *why,
                     size_t why_len);
/* The projections of an RTK geometry file (cone_read_rtk.c). */
int tl_cone_read_rtk(const char *path, const tl_cone_detector *d, double (**P)[12], uint32_t *n,
                     char *err, size_t errlen);

#endif
