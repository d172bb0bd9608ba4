/* decode_cone.c — the cone-beam keys of a "scan" (PROTOCOL.md §8.1.1, issue #21).
 *
 * A circular cone-beam scan needs three numbers parallel beam does not have: the source's
 * distance to the rotation axis and to the detector, and the detector's pixel pitch (mm),
 * plus an optional principal-point offset (pixels). They are required with geometry
 * "cone" and refused with "parallel": a parallel scan that carries a source distance was
 * meant to be something else, and silently reconstructing it as parallel beam would hide
 * that. "center" and a non-zero detector_offset u both say where the principal column is,
 * so they are refused together rather than one winning. "short_scan" ([start, range],
 * radians) declares a scan of less than a turn, which the engine weighs with Parker's
 * weights. The engine checks what needs the
 * whole configuration (gpu/geometry/cone.h); here only what the header alone proves.
 *
 * "matrices" gives an arbitrary trajectory: one 3x4 matrix per projection (row-major, the
 * convention of `tomolive recon --matrices FILE:p`). The three required keys stay
 * required, as recon requires them with --matrices: they set the volume's unit (mm per
 * voxel), which the matrices alone do not fix. The matrices place the detector, so
 * "center", a non-zero detector_offset u and "short_scan" (Parker's weights assume a
 * circle) are refused with them rather than silently ignored. Whether a matrix is usable
 * (a finite source, the volume in front of it, one detector for all) needs the volume, so
 * the engine says; here only the shape, the count and finiteness. The array is decoded
 * last, after every other check, and freed if one of its rows fails, so a refused scan
 * never holds memory.
 */
#include "config.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "protocol/protocol.h"
#include "protocol/proto_internal.h"

static const char *const cone_keys[] = {"source_origin",   "source_detector", "pixel_size",
                                        "detector_offset", "short_scan",      "matrices"};
#define REQUIRED 3 /* the first three */

static tl_proto_err positive(const char *key, double v, const char *unit, tl_proto_error *err)
{
    if (v > 0)
        return TL_PROTO_OK;
    return tl_proto_fail(err, TL_PROTO_E_RANGE, "\"%s\": %g %s, must be > 0", key, v, unit);
}

/* "pixel_size": one number (square pixels) or [u, v], each finite and > 0. */
static tl_proto_err pixel_size(const msgpack_object *h, double out[2], tl_proto_error *err)
{
    const msgpack_object *o = tl_proto_map_get(h, "pixel_size");
    if (o->type == MSGPACK_OBJECT_ARRAY) {
        TLP_TRY(tlp_get_f64_pair(h, "pixel_size", true, out, err));
        TLP_TRY(positive("pixel_size[0]", out[0], "mm", err));
        return positive("pixel_size[1]", out[1], "mm", err);
    }
    double v;
    tl_proto_err rc = tl_proto_get_double(h, "pixel_size", true, &v, err);
    if (rc == TL_PROTO_E_KEY_TYPE) /* say both forms */
        return tl_proto_fail(err, rc,
                             "\"pixel_size\": expected a number or an array of 2 "
                             "numbers, got %s",
                             tlp_object_type_name(o));
    TLP_TRY(rc);
    TLP_TRY(positive("pixel_size", v, "mm", err));
    out[0] = out[1] = v;
    return TL_PROTO_OK;
}

/* "matrices": 1..TL_PROTO_MAX_MATRICES arrays of 12 finite numbers, into a copy the scan
 * owns once every one passed. */
static tl_proto_err matrices(const msgpack_object *h, tl_proto_scan *m, tl_proto_error *err)
{
    const msgpack_object *o = tl_proto_map_get(h, "matrices");
    if (o->type != MSGPACK_OBJECT_ARRAY)
        return tl_proto_fail(err, TL_PROTO_E_KEY_TYPE,
                             "\"matrices\": expected an array of arrays of 12 numbers, got %s",
                             tlp_object_type_name(o));
    uint32_t n = o->via.array.size;
    if (n < 1 || n > TL_PROTO_MAX_MATRICES)
        return tl_proto_fail(err, TL_PROTO_E_RANGE,
                             "\"matrices\": %" PRIu32 " matrices, expected 1..%u (what fits "
                             "a %u-byte header)",
                             n, TL_PROTO_MAX_MATRICES, TL_PROTO_MAX_HEADER);
    double(*P)[12] = malloc(n * sizeof *P);
    if (!P)
        return tl_proto_fail(err, TL_PROTO_E_RESOURCE,
                             "\"matrices\": out of memory for %" PRIu32 " matrices", n);
    char name[32];
    for (uint32_t i = 0; i < n; i++) {
        snprintf(name, sizeof name, "matrices[%" PRIu32 "]", i);
        tl_proto_err rc = tlp_f64_array(&o->via.array.ptr[i], name, 12, P[i], err);
        if (rc != TL_PROTO_OK) {
            free(P); /* a refused scan holds nothing */
            return rc;
        }
    }
    m->matrices = P;
    m->nmatrices = n;
    return TL_PROTO_OK;
}

/* With matrices, the keys that would place the detector a second time. */
static tl_proto_err matrices_alone(const tl_proto_scan *m, tl_proto_error *err)
{
    const char *with = m->has_center ? "center"
                       : m->has_detector_offset && m->detector_offset[0] != 0
                           ? "detector_offset[0]"
                       : m->has_short_scan ? "short_scan"
                                           : NULL;
    if (!with)
        return TL_PROTO_OK;
    return tl_proto_fail(err, TL_PROTO_E_UNSUPPORTED,
                         "\"%s\" with \"matrices\": the matrices place the detector and the "
                         "trajectory (give the principal point in them)",
                         with);
}

tl_proto_err tlp_decode_cone(const msgpack_object *h, tl_proto_scan *m, tl_proto_error *err)
{
    size_t nkeys = sizeof cone_keys / sizeof *cone_keys;
    if (m->geometry != TL_PROTO_CONE) {
        for (size_t k = 0; k < nkeys; k++)
            if (tl_proto_map_get(h, cone_keys[k]))
                return tl_proto_fail(err, TL_PROTO_E_UNSUPPORTED,
                                     "\"%s\": a cone-beam key, but \"geometry\" is \"%s\"",
                                     cone_keys[k], tl_proto_geometry_name(m->geometry));
        return TL_PROTO_OK;
    }
    for (size_t k = 0; k < REQUIRED; k++)
        if (!tl_proto_map_get(h, cone_keys[k]))
            return tl_proto_fail(err, TL_PROTO_E_MISSING,
                                 "missing required key \"%s\": geometry \"cone\" needs "
                                 "source_origin, source_detector and pixel_size",
                                 cone_keys[k]);
    TLP_TRY(tl_proto_get_double(h, "source_origin", true, &m->source_origin, err));
    TLP_TRY(positive("source_origin", m->source_origin, "mm", err));
    TLP_TRY(tl_proto_get_double(h, "source_detector", true, &m->source_detector, err));
    TLP_TRY(positive("source_detector", m->source_detector, "mm", err));
    TLP_TRY(pixel_size(h, m->pixel_size, err));
    TLP_TRY(tlp_get_f64_pair(h, "detector_offset", false, m->detector_offset, err));
    m->has_detector_offset = tl_proto_map_get(h, "detector_offset") != NULL;
    TLP_TRY(tlp_get_f64_pair(h, "short_scan", false, m->short_scan, err));
    m->has_short_scan = tl_proto_map_get(h, "short_scan") != NULL;
    if (m->has_short_scan && !(m->short_scan[1] > 0 && m->short_scan[1] < 2 * M_PI))
        return tl_proto_fail(err, TL_PROTO_E_RANGE,
                             "\"short_scan[1]\": a range of %g rad, must be in (0, 2 pi): less "
                             "than a turn (the engine checks it covers 180 degrees plus the fan)",
                             m->short_scan[1]);
    if (m->has_detector_offset && m->has_center && m->detector_offset[0] != 0)
        return tl_proto_fail(err, TL_PROTO_E_UNSUPPORTED,
                             "\"detector_offset[0]\": %g pixels and \"center\" %g both place "
                             "the principal column: give one of them",
                             m->detector_offset[0], m->center);
    if (!tl_proto_map_get(h, "matrices"))
        return TL_PROTO_OK;
    TLP_TRY(matrices_alone(m, err));
    return matrices(h, m, err);
}

void tl_proto_scan_free(tl_proto_scan *m)
{
    if (!m)
        return;
    free(m->matrices);
    m->matrices = NULL;
    m->nmatrices = 0;
}
