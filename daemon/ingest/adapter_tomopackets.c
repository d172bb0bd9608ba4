/* adapter_tomopackets.c — tomopackets (RECAST3D's packets) on the ingest PULL socket, so
 * existing RECAST3D adapters (Python tomop) can feed tomolive (adapter.h).
 *
 * Packets (descriptor, then fields; tomopackets.h has the wire rules):
 *   GeometrySpecification 0x301  scene_id, volume_min[3], volume_max[3]    (noted only)
 *   ScanSettings          0x302  scene_id, darks, flats[, already_linear]
 *   ParallelBeamGeometry  0x303  scene_id, rows, cols, proj_count, angles[] (radians)
 *   ConeBeamGeometry      0x305  scene_id, rows, cols, proj_count, source_origin,
 *                                origin_det, detector_size[2], angles[]  (float32, mm)
 *   ConeVecGeometry       0x306  scene_id, rows, cols, proj_count, vectors[] (float32,
 *                                12 per projection: ASTRA cone_vec rows, mm)
 *   Projection            0x309  type (0 dark, 1 flat, 2 projection), projection_id,
 *                                shape[2] (rows, cols), data[] (float32)
 * RECAST3D adapters send them in that order. A geometry packet opens a scan (float32
 * frames, window proj_count, the last ScanSettings' counts and already_linear); a
 * projection's angle is angles[projection_id mod proj_count] (the id is cyclic: scan x
 * angles + angle index). Projections before any geometry get a scan synthesised from
 * ingest.window and the configured angle schedule; a projection of another shape than the
 * open scan's is refused. The pixels stay in the received packet and travel zero-copy.
 * ParallelVecGeometry is refused as unsupported (parallel beam serves circular scans only).
 *
 * ConeVecGeometry is an arbitrary cone-beam trajectory (tomopackets_vec.h): each
 * projection's ASTRA cone_vec row (source, detector centre, u and v pixel vectors) becomes
 * its projection matrix (tl_cone_from_astra_vec, gpu/geometry/cone.h: the arithmetic
 * `tomolive recon --matrices FILE:astra` uses), the scan PROTOCOL.md §8.1.1's with
 * "matrices". The layout was checked against tomopackets' ConeVecGeometryPacket
 * (BOOST_HANA_DEFINE_STRUCT: int32 scene_id, rows, cols, proj_count, std::vector<float>
 * vectors) and SliceRecon's reader, which requires proj_count == vectors.size() / 12.
 *
 * ConeBeamGeometry is RECAST3D's ASTRA "cone" geometry: source at distance source_origin
 * from the axis, detector at origin_det beyond it, detector_size[0] and [1] the pixel
 * pitch along a row (u) and a column (v), principal point at the detector's middle. Its
 * scan is PROTOCOL.md §8.1.1's with source_detector = source_origin + origin_det. ASTRA
 * puts the source of angle t at (sin t, -cos t, 0) x source_origin with columns along
 * (cos t, sin t, 0); tomolive at -(sin b, cos b, 0) x source_origin, columns along
 * (cos b, -sin b, 0) (gpu/geometry/cone.h): the two agree for b = -t, in the same x, y,
 * z, so cone-beam angles are negated. (No choice keeps ASTRA's angles here: the mirror
 * that makes them agree for parallel beam, where a ray's direction does not matter, puts
 * a cone-beam source on the detector's side.)
 *
 * ScanSettings has two layouts in use: tomopackets 1.0.0-rc2 (the published `master`)
 * packs scene_id, darks, flats (16 bytes with the descriptor); 1.1.0 added the bool
 * already_linear (17 bytes). Both are taken; the short one means already_linear false.
 */
#include <config.h>

#include <math.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/ingest/adapter_stream.h"
#include "daemon/ingest/tomopackets.h"
#include "daemon/ingest/tomopackets_vec.h"

typedef struct {
    tl_adapter_stream st;
    int32_t darks, flats;
    bool already_linear;
    bool has_geometry;
    float *angles; /* proj_count of them */
    uint32_t nangles, cap;
} tp;

static void *tp_create(const tl_settings *c, char *err, size_t errlen)
{
    tp *a = tl_adapter_alloc(sizeof *a, offsetof(tp, st), c, err, errlen);
    if (!a)
        return NULL;
    a->darks = c->ingest_darks;
    a->flats = c->ingest_flats;
    return a;
}

static void tp_destroy(void *state)
{
    tp *a = state;
    tl_adapter_stream_destroy(&a->st);
    free(a->angles);
    free(a);
}

static int bad_size(tl_proto_error *err, const char *what, size_t got, size_t want)
{
    return tl_proto_fail(err, TL_PROTO_E_PAYLOAD, "%s packet of %zu bytes, expected %zu", what,
                         got, want),
           -1;
}

/* The cone-beam numbers of a ConeBeamGeometry (at p + 20), checked, into scan. */
static int cone_geometry(const uint8_t *p, tl_proto_scan *scan, tl_proto_error *err)
{
    static const char *const name[4] = {"source_origin", "origin_det", "detector_size[0]",
                                        "detector_size[1]"};
    double v[4];
    for (int i = 0; i < 4; i++) {
        v[i] = tl_tomop_f32(p + 20 + 4 * i);
        if (!isfinite(v[i]))
            return tl_proto_fail(err, TL_PROTO_E_NOT_FINITE, "ConeBeamGeometry: %s is not finite",
                                 name[i]),
                   -1;
    }
    if (v[0] <= 0 || v[0] + v[1] <= 0 || v[2] <= 0 || v[3] <= 0)
        return tl_proto_fail(err, TL_PROTO_E_RANGE,
                             "ConeBeamGeometry: source_origin %g, source_origin + origin_det "
                             "%g and detector_size %g x %g mm must all be > 0",
                             v[0], v[0] + v[1], v[2], v[3]),
               -1;
    scan->geometry = TL_PROTO_CONE;
    scan->source_origin = v[0];
    scan->source_detector = v[0] + v[1];
    scan->pixel_size[0] = v[2];
    scan->pixel_size[1] = v[3];
    return 0;
}

/* Opens the scan of a geometry packet (its angles in a->angles): the counts of the
 * calibration batches, the next series, and the item; matrices (or NULL) go to the item,
 * which owns them (the queue moves them, the worker frees them), and the stream's copy of
 * the scan keeps none. */
static int open_scan(tp *a, tl_proto_scan *scan, double (*matrices)[12], uint32_t nmatrices,
                     tl_item *out)
{
    a->has_geometry = true;
    a->st.next_series++;
    scan->darks = (uint32_t)a->darks;
    scan->flats = (uint32_t)a->flats;
    scan->already_linear = a->already_linear;
    a->st.open = true;
    a->st.scan = *scan;
    a->st.scan_has_proj = false;
    out->type = TL_MSG_SCAN;
    out->scan = *scan;
    out->scan.matrices = matrices;
    out->scan.nmatrices = nmatrices;
    out->filter[0] = 0;
    return 1;
}

/* A ParallelBeamGeometry or (cone) ConeBeamGeometry: rows, cols, proj_count at 8, then,
 * after the cone's numbers, the angles (a count and proj_count floats). */
static int geometry(tp *a, const uint8_t *p, size_t len, bool cone, tl_item *out,
                    tl_proto_error *err)
{
    const char *what = cone ? "ConeBeamGeometry" : "ParallelBeamGeometry";
    size_t at = cone ? 40 : 24; /* the first angle */
    if (len < at)
        return bad_size(err, what, len, at);
    int32_t rows = tl_tomop_i32(p + 8), cols = tl_tomop_i32(p + 12), n = tl_tomop_i32(p + 16),
            count = tl_tomop_i32(p + at - 4);
    if (tl_tomop_check_shape(rows, cols, n, err) != 0)
        return -1;
    if (count != n)
        return tl_proto_fail(err, TL_PROTO_E_PAYLOAD, "%d angles for proj_count %d", count, n), -1;
    if (len != at + 4 * (size_t)n)
        return bad_size(err, what, len, at + 4 * (size_t)n);
    for (int32_t i = 0; i < n; i++) /* all checked before any replaces the open scan's */
        if (!isfinite(tl_tomop_f32(p + at + 4 * (size_t)i)))
            return tl_proto_fail(err, TL_PROTO_E_NOT_FINITE, "angle %d is not finite", i), -1;
    tl_proto_scan scan;
    tl_adapter_scan_init(a->st.cfg, &scan, a->st.next_series, (uint32_t)rows, (uint32_t)cols,
                         TL_PROTO_F32, (uint32_t)n);
    if (cone && cone_geometry(p, &scan, err) != 0)
        return -1;
    if ((uint32_t)n > a->cap) { /* once per larger scan, not per frame */
        float *v = realloc(a->angles, (size_t)n * sizeof *v);
        if (!v)
            return tl_proto_fail(err, TL_PROTO_E_RESOURCE, "out of memory"), -1;
        a->angles = v;
        a->cap = (uint32_t)n;
    }
    for (int32_t i = 0; i < n; i++) /* cone beam: ASTRA's angles negated (above) */
        a->angles[i] = (cone ? -1.0f : 1.0f) * tl_tomop_f32(p + at + 4 * (size_t)i);
    a->nangles = (uint32_t)n;
    return open_scan(a, &scan, NULL, 0, out);
}

/* A ConeVecGeometry (tomopackets_vec.h): a cone scan with one matrix per projection
 * (open_scan says who owns them). Frame ids past proj_count have no matrix (the engine
 * refuses them, naming the index): RECAST3D's cyclic ids serve the first turn only here. */
static int cone_vec(tp *a, const uint8_t *p, size_t len, tl_item *out, tl_proto_error *err)
{
    tl_tomop_cone_vec v;
    if (tl_tomop_cone_vec_read(p, len, &v, err) != 0)
        return -1;
    tl_proto_scan scan;
    tl_adapter_scan_init(a->st.cfg, &scan, a->st.next_series, v.rows, v.cols, TL_PROTO_F32, v.n);
    scan.geometry = TL_PROTO_CONE;
    scan.source_origin = v.sad;
    scan.source_detector = v.sdd;
    scan.pixel_size[0] = v.pitch[0];
    scan.pixel_size[1] = v.pitch[1];
    scan.has_detector_offset = true;
    scan.detector_offset[0] = 0; /* the matrices place the columns */
    scan.detector_offset[1] = v.offset_v;
    free(a->angles); /* this scan's angles, one per matrix */
    a->angles = v.angles;
    a->cap = a->nangles = v.n;
    return open_scan(a, &scan, v.P, v.n, out);
}

static int projection(tp *a, zmq_msg_t *part, tl_item *out, tl_proto_error *err)
{
    const uint8_t *p = zmq_msg_data(part);
    size_t len = zmq_msg_size(part);
    if (len < 24)
        return bad_size(err, "Projection", len, 24);
    int32_t type = tl_tomop_i32(p + 4), id = tl_tomop_i32(p + 8), rows = tl_tomop_i32(p + 12),
            cols = tl_tomop_i32(p + 16), count = tl_tomop_i32(p + 20);
    if (type < 0 || type > 2)
        return tl_proto_fail(err, TL_PROTO_E_KIND,
                             "projection type %d is not 0 (dark), 1 (flat) "
                             "or 2 (standard)",
                             type),
               -1;
    if (id < 0)
        return tl_proto_fail(err, TL_PROTO_E_RANGE, "projection_id %d is negative", id), -1;
    if (rows < 1 || (uint32_t)rows > TL_PROTO_MAX_DIM || cols < 1 ||
        (uint32_t)cols > TL_PROTO_MAX_DIM)
        return tl_proto_fail(err, TL_PROTO_E_RANGE, "shape %d x %d out of range 1..%u", rows, cols,
                             TL_PROTO_MAX_DIM),
               -1;
    size_t bytes;
    if (tl_proto_frame_bytes((uint32_t)rows, (uint32_t)cols, TL_PROTO_F32, &bytes, err) !=
        TL_PROTO_OK)
        return -1;
    if (count < 0 || (size_t)count * 4 != bytes)
        return tl_proto_fail(err, TL_PROTO_E_PAYLOAD, "%d values for a %d x %d shape", count, rows,
                             cols),
               -1;
    if (len != 24 + bytes)
        return bad_size(err, "Projection", len, 24 + bytes);
    tl_proto_scan scan, *open_first = NULL;
    if (!a->st.open) {
        if (a->st.cfg->ingest_window == 0)
            return tl_proto_fail(err, TL_PROTO_E_STATE,
                                 "Projection before any "
                                 "ParallelBeamGeometry, and ingest.window is 0"),
                   -1;
        tl_adapter_scan_init(a->st.cfg, &scan, a->st.next_series++, (uint32_t)rows, (uint32_t)cols,
                             TL_PROTO_F32, 0);
        scan.darks = (uint32_t)a->darks;
        scan.flats = (uint32_t)a->flats;
        scan.already_linear = a->already_linear;
        open_first = &scan;
        a->has_geometry = false;
    } else if (!tl_adapter_stream_fits(&a->st, (uint32_t)rows, (uint32_t)cols, TL_PROTO_F32)) {
        return tl_proto_fail(err, TL_PROTO_E_RANGE,
                             "projection of %d x %d in a scan of %u x %u (rows x cols)", rows,
                             cols, a->st.scan.rows, a->st.scan.cols),
               -1;
    }
    tl_proto_frame f = {
        .series = open_first ? open_first->series : a->st.scan.series,
        .index = (uint64_t)id,
        .kind = (tl_proto_kind)type, /* 0 dark, 1 flat, 2 projection: tomolive's order */
        .dtype = TL_PROTO_F32,
        .rows = (uint32_t)rows,
        .cols = (uint32_t)cols,
    };
    if (f.kind == TL_PROTO_PROJ && a->has_geometry) {
        f.has_angle = true;
        f.angle = a->angles[(uint32_t)id % a->nangles];
    }
    zmq_msg_t payload;
    zmq_msg_init(&payload);
    if (tl_framepool_wrap(a->st.pool, part, p + 24, bytes, &payload) != 0)
        return tl_proto_fail(err, TL_PROTO_E_RESOURCE, "out of memory"), -1;
    int rc = tl_adapter_stream_emit(&a->st, open_first, &f, &payload, out);
    zmq_msg_close(&payload);
    return rc;
}

static int tp_decode(void *state, zmq_msg_t *parts, int nparts, tl_item *out, tl_proto_error *err)
{
    tp *a = state;
    if (nparts != 1)
        return tl_proto_fail(err, TL_PROTO_E_PARTS, "a tomopackets packet is one part, not %d",
                             nparts),
               -1;
    const uint8_t *p = zmq_msg_data(&parts[0]);
    size_t len = zmq_msg_size(&parts[0]);
    if (len < 4)
        return tl_proto_fail(err, TL_PROTO_E_MALFORMED, "packet of %zu bytes has no descriptor",
                             len),
               -1;
    int32_t desc = tl_tomop_i32(p);
    switch (desc) {
        case TL_TOMOP_GEOMETRY_SPECIFICATION:
            return len == 32 ? 0 : bad_size(err, "GeometrySpecification", len, 32);
        case TL_TOMOP_SCAN_SETTINGS:
            if (len != 16 && len != 17)
                return tl_proto_fail(err, TL_PROTO_E_PAYLOAD,
                                     "ScanSettings packet of %zu bytes, expected 16 "
                                     "(tomopackets 1.0) or 17 (with already_linear)",
                                     len),
                       -1;
            if (tl_tomop_i32(p + 8) < 0 || tl_tomop_i32(p + 12) < 0 || (len == 17 && p[16] > 1))
                return tl_proto_fail(err, TL_PROTO_E_RANGE,
                                     "ScanSettings: negative counts or a "
                                     "bool that is not 0 or 1"),
                       -1;
            a->darks = tl_tomop_i32(p + 8);
            a->flats = tl_tomop_i32(p + 12);
            a->already_linear = len == 17 && p[16] == 1;
            return 0;
        case TL_TOMOP_PARALLEL_BEAM_GEOMETRY: return geometry(a, p, len, false, out, err);
        case TL_TOMOP_CONE_BEAM_GEOMETRY: return geometry(a, p, len, true, out, err);
        case TL_TOMOP_PROJECTION: return projection(a, &parts[0], out, err);
        case TL_TOMOP_CONE_VEC_GEOMETRY: return cone_vec(a, p, len, out, err);
        case TL_TOMOP_PARALLEL_VEC_GEOMETRY:
            return tl_proto_fail(err, TL_PROTO_E_UNSUPPORTED,
                                 "tomopackets ParallelVecGeometry (0x%x: a vector per "
                                 "projection) is not supported: parallel beam serves circular "
                                 "scans only (ParallelBeamGeometry)",
                                 (unsigned)desc),
                   -1;
        case TL_TOMOP_PROJECTION_DATA:
        case TL_TOMOP_PARTIAL_PROJECTION_DATA:
            return tl_proto_fail(err, TL_PROTO_E_UNSUPPORTED,
                                 "tomopackets packet 0x%x is not "
                                 "supported (the circular geometries and Projection packets "
                                 "are)",
                                 (unsigned)desc),
                   -1;
        default:
            return tl_proto_fail(err, TL_PROTO_E_TYPE, "unknown tomopackets descriptor 0x%x",
                                 (unsigned)desc),
                   -1;
    }
}

static int tp_next(void *state, tl_item *out)
{
    return tl_adapter_stream_next(&((tp *)state)->st, out);
}

const tl_adapter_ops tl_adapter_tomopackets = {
    .name = "tomopackets",
    .create = tp_create,
    .destroy = tp_destroy,
    .decode = tp_decode,
    .next = tp_next,
};
