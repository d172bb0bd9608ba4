/* tomopackets_vec.h — RECAST3D's ConeVecGeometry packet (0x306) read into projection
 * matrices, for the tomopackets ingest adapter (adapter_tomopackets.c). Kept apart so the
 * adapter stays one packet switch; the arithmetic is gpu/geometry/cone.h's, shared with
 * `tomolive recon --matrices FILE:astra`.
 *
 *   tl_tomop_cone_vec v;
 *   if (tl_tomop_cone_vec_read(p, len, &v, err) != 0) return -1;   (err says why)
 *   ... v.P is the caller's to free; v.angles too
 */
#ifndef TL_TOMOPACKETS_VEC_H
#define TL_TOMOPACKETS_VEC_H

#include <stddef.h>
#include <stdint.h>

#include "protocol/protocol.h"

typedef struct {
    uint32_t rows, cols, n; /* detector shape, projections */
    double (*P)[12];        /* n prepared matrices (malloc'ed) */
    float *angles;          /* n angles (radians, ours: the source at -sad (sin b, cos b, 0)),
                               malloc'ed: frames carry one (PROTOCOL.md 8.2) */
    double sad, sdd;        /* projection 0's source to the z axis and to the detector, mm */
    double pitch[2];        /* projection 0's |u|, |v|, mm */
    double offset_v;        /* the row the isocentre projects to in projection 0, minus the
                               middle row (the volume's rows, PROTOCOL.md 8.1.1) */
} tl_tomop_cone_vec;

/* A detector of rows x cols float32 frames and a window of n, in the protocol's limits;
 * 0, or -1 with err (E_RANGE, or frame_bytes' error). */
int tl_tomop_check_shape(int32_t rows, int32_t cols, int32_t n, tl_proto_error *err);

/* The packet p (len bytes, descriptor included) into v; 0, or -1 with err: a wrong size
 * (E_PAYLOAD), a count that is not 12 x proj_count (E_PAYLOAD), a non-finite number
 * (E_NOT_FINITE), vectors that give no camera (E_RANGE, naming the projection), or no
 * memory (E_RESOURCE). Nothing is left allocated on failure. */
int tl_tomop_cone_vec_read(const uint8_t *p, size_t len, tl_tomop_cone_vec *v,
                           tl_proto_error *err);

#endif
