/* tomopackets.h — the tomopackets wire format (cicwi/tomopackets), shared by the
 * tomopackets ingest adapter (adapter_tomopackets.c) and the RECAST3D viewer link
 * (daemon/serve/recast3d.c). Kept here, below both, so the ingest formats need nothing
 * from the serving side.
 *
 * A packet is one frame: an int32 descriptor (TL_TOMOP_*) then the fields packed
 * little-endian in declaration order (bool 1 byte, strings NUL-terminated, vectors an
 * int32 count then the elements, fixed arrays bare). Read and write the scalars with the
 * helpers below: they do not assume alignment or host byte order.
 */
#ifndef TL_TOMOPACKETS_H
#define TL_TOMOPACKETS_H

#include <stdint.h>
#include <string.h>

enum {
    TL_TOMOP_MAKE_SCENE = 0x101,
    TL_TOMOP_KILL_SCENE = 0x102,
    TL_TOMOP_SLICE_DATA = 0x201,
    TL_TOMOP_SET_SLICE = 0x205,
    TL_TOMOP_REMOVE_SLICE = 0x206,
    TL_TOMOP_GEOMETRY_SPECIFICATION = 0x301,
    TL_TOMOP_SCAN_SETTINGS = 0x302,
    TL_TOMOP_PARALLEL_BEAM_GEOMETRY = 0x303,
    TL_TOMOP_PARALLEL_VEC_GEOMETRY = 0x304,
    TL_TOMOP_CONE_BEAM_GEOMETRY = 0x305,
    TL_TOMOP_CONE_VEC_GEOMETRY = 0x306,
    TL_TOMOP_PROJECTION_DATA = 0x307,
    TL_TOMOP_PARTIAL_PROJECTION_DATA = 0x308,
    TL_TOMOP_PROJECTION = 0x309
};

static inline int32_t tl_tomop_i32(const void *p)
{
    const uint8_t *b = p;
    return (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                     (uint32_t)b[3] << 24);
}

static inline float tl_tomop_f32(const void *p)
{
    uint32_t u = (uint32_t)tl_tomop_i32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline void tl_tomop_put_i32(void *p, int32_t v)
{
    uint8_t *b = p;
    uint32_t u = (uint32_t)v;
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(u >> (8 * i));
}

static inline void tl_tomop_put_f32(void *p, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    tl_tomop_put_i32(p, (int32_t)u);
}

#endif
