/* tomopackets_vec.c — ConeVecGeometry to projection matrices (tomopackets_vec.h).
 *
 * Layout (tomopackets' ConeVecGeometryPacket, BOOST_HANA_DEFINE_STRUCT): int32 descriptor,
 * int32 scene_id, rows, cols, proj_count, then vectors as an int32 count and that many
 * float32: 12 per projection, ASTRA's cone_vec row (srcX, srcY, srcZ, dX, dY, dZ, uX, uY,
 * uZ, vX, vY, vZ; SliceRecon requires proj_count == count / 12, so do we).
 *
 * What the matrices do not say, the daemon's scan still needs (§8.1.1: the volume unit and
 * rows): it is read off projection 0, which for RECAST3D's own circular "cone" geometry
 * gives back ConeBeamGeometry's numbers: the source's distance from the z axis
 * (source_origin), from the detector's plane (source_origin + origin_det), the pixel
 * vectors' lengths (detector_size), and the row the isocentre projects to. Each frame's
 * angle is its source's in our convention, b = atan2(-sx, -sy): ASTRA's angle t negated,
 * as the ConeBeamGeometry path does.
 */
#include <config.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "daemon/ingest/tomopackets.h"
#include "daemon/ingest/tomopackets_vec.h"
#include "gpu/geometry/cone.h"

#define HEAD 24 /* descriptor, scene_id, rows, cols, proj_count, the vectors' count */

int tl_tomop_check_shape(int32_t rows, int32_t cols, int32_t n, tl_proto_error *err)
{
    if (rows < 1 || (uint32_t)rows > TL_PROTO_MAX_DIM || cols < 1 ||
        (uint32_t)cols > TL_PROTO_MAX_DIM)
        return tl_proto_fail(err, TL_PROTO_E_RANGE, "detector %d x %d out of range 1..%u", rows,
                             cols, TL_PROTO_MAX_DIM),
               -1;
    size_t bytes; /* a frame of that detector within the protocol's limit, as a native scan */
    if (tl_proto_frame_bytes((uint32_t)rows, (uint32_t)cols, TL_PROTO_F32, &bytes, err) !=
        TL_PROTO_OK)
        return -1;
    if (n < 1 || (uint32_t)n > TL_PROTO_MAX_WINDOW)
        return tl_proto_fail(err, TL_PROTO_E_RANGE, "proj_count %d out of range 1..%u", n,
                             TL_PROTO_MAX_WINDOW),
               -1;
    return 0;
}

static int fail_size(tl_proto_error *err, size_t got, size_t want)
{
    return tl_proto_fail(err, TL_PROTO_E_PAYLOAD,
                         "ConeVecGeometry packet of %zu bytes, expected %zu", got, want),
           -1;
}

/* Projection 0's distances, pitches and isocentre row (the header comment says why). */
static void first_view(const double vec[12], const double P[12], tl_tomop_cone_vec *v)
{
    const double *s = vec, *d = vec + 3, *u = vec + 6, *w = vec + 9;
    double n[3] = {u[1] * w[2] - u[2] * w[1], u[2] * w[0] - u[0] * w[2],
                   u[0] * w[1] - u[1] * w[0]};
    double nn = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]); /* > 0: a camera */
    v->sad = hypot(s[0], s[1]);
    v->sdd = fabs((d[0] - s[0]) * n[0] + (d[1] - s[1]) * n[1] + (d[2] - s[2]) * n[2]) / nn;
    v->pitch[0] = sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2]);
    v->pitch[1] = sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2]);
    v->offset_v = P[7] / P[11] - 0.5 * (v->rows - 1.0); /* the isocentre's row */
}

int tl_tomop_cone_vec_read(const uint8_t *p, size_t len, tl_tomop_cone_vec *v, tl_proto_error *err)
{
    if (len < HEAD)
        return fail_size(err, len, HEAD);
    int32_t rows = tl_tomop_i32(p + 8), cols = tl_tomop_i32(p + 12), n = tl_tomop_i32(p + 16),
            count = tl_tomop_i32(p + 20);
    if (tl_tomop_check_shape(rows, cols, n, err) != 0)
        return -1;
    if ((int64_t)count != 12 * (int64_t)n)
        return tl_proto_fail(err, TL_PROTO_E_PAYLOAD,
                             "ConeVecGeometry: %d numbers for proj_count %d (12 each)", count, n),
               -1;
    if (len != HEAD + 4 * (size_t)count)
        return fail_size(err, len, HEAD + 4 * (size_t)count);
    *v = (tl_tomop_cone_vec){.rows = (uint32_t)rows, .cols = (uint32_t)cols, .n = (uint32_t)n};
    v->P = malloc((size_t)n * sizeof *v->P);
    v->angles = malloc((size_t)n * sizeof *v->angles);
    if (!v->P || !v->angles) {
        free(v->P);
        free(v->angles);
        return tl_proto_fail(err, TL_PROTO_E_RESOURCE, "out of memory for %d projections", n), -1;
    }
    for (int32_t i = 0; i < n; i++) {
        double vec[12];
        for (int k = 0; k < 12; k++) {
            vec[k] = tl_tomop_f32(p + HEAD + 4 * (12 * (size_t)i + k));
            if (!isfinite(vec[k])) {
                tl_proto_fail(err, TL_PROTO_E_NOT_FINITE,
                              "ConeVecGeometry: projection %d, number %d is not finite", i, k);
                goto fail;
            }
        }
        tl_errbuf eb;
        if (tl_cone_from_astra_vec(vec, v->rows, v->cols, v->P[i], &eb) != TL_OK) {
            tl_proto_fail(err, TL_PROTO_E_RANGE, "ConeVecGeometry: projection %d: %s", i, eb.msg);
            goto fail;
        }
        v->angles[i] = (float)atan2(-vec[0], -vec[1]);
        if (i == 0)
            first_view(vec, v->P[0], v);
    }
    return 0;
fail:
    free(v->P);
    free(v->angles);
    v->P = NULL;
    v->angles = NULL;
    return -1;
}
