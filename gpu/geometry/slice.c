/* slice.c — slice descriptions and the plane each one stands for (slice.h, "Volume
 * coordinates"). Every backend samples planes; rows and ortho-slices are shorthands, so
 * one kernel family can serve them all and the fast paths are an optimisation, not a
 * different geometry. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "gpu/geometry/slice.h"

static void init(tl_slice_spec *s, tl_slice_kind kind, uint32_t height, uint32_t width)
{
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->height = height;
    s->width = width;
    s->scale = 1.0;
}

void tl_slice_spec_row(tl_slice_spec *s, double z, uint32_t height, uint32_t width)
{
    init(s, TL_SLICE_ROW, height, width);
    s->z = z;
}

void tl_slice_spec_ortho(tl_slice_spec *s, tl_axis axis, double position, uint32_t height,
                         uint32_t width)
{
    init(s, TL_SLICE_ORTHO, height, width);
    s->axis = axis;
    s->position = position;
}

void tl_slice_spec_plane(tl_slice_spec *s, const float orientation[9], uint32_t height,
                         uint32_t width)
{
    init(s, TL_SLICE_PLANE, height, width);
    memcpy(s->orientation, orientation, sizeof s->orientation);
}

static void set(float o[9], double ax, double ay, double az, double bx, double by, double bz,
                double px, double py, double pz)
{
    const double v[9] = {ax, ay, az, bx, by, bz, px, py, pz};
    for (int i = 0; i < 9; i++)
        o[i] = (float)v[i];
}

void tl_slice_plane(const tl_slice_spec *s, uint32_t rows, float o[9])
{
    double sc = s->scale > 0 ? s->scale : 1.0;
    double w = s->width * sc, h = s->height * sc, zc = (rows - 1) / 2.0;
    if (s->kind == TL_SLICE_PLANE) {
        memcpy(o, s->orientation, 9 * sizeof *o);
    } else if (s->kind == TL_SLICE_ROW || s->axis == TL_AXIS_Z) {
        double z = s->kind == TL_SLICE_ROW ? s->z : s->position;
        set(o, w, 0, 0, 0, h, 0, -w / 2, -h / 2, z);
    } else if (s->axis == TL_AXIS_X) {
        set(o, 0, w, 0, 0, 0, -h, s->position, -w / 2, zc + h / 2);
    } else {
        set(o, w, 0, 0, 0, 0, -h, -w / 2, s->position, zc + h / 2);
    }
}

void tl_slice_spec_stacked(const tl_slice_spec *s, uint32_t rows, uint32_t k, uint32_t n,
                           double spacing, tl_slice_spec *out)
{
    float o[9];
    tl_slice_plane(s, rows, o);
    const double x[3] = {o[0], o[1], o[2]}, y[3] = {o[3], o[4], o[5]};
    double normal[3] = {x[1] * y[2] - x[2] * y[1], x[2] * y[0] - x[0] * y[2],
                        x[0] * y[1] - x[1] * y[0]};
    const double len = sqrt(normal[0] * normal[0] + normal[1] * normal[1] + normal[2] * normal[2]);
    const double offset = ((double)k - (double)(n / 2)) * spacing;
    for (int a = 0; a < 3 && len > 0; a++)
        o[6 + a] = (float)(o[6 + a] + offset * normal[a] / len);
    tl_slice_spec_plane(out, o, s->height, s->width);
}

bool tl_slice_inside(const tl_slice_spec *s, uint32_t rows, uint32_t cols)
{
    float o[9];
    tl_slice_plane(s, rows, o);
    for (int i = 0; i < 9; i++)
        if (!isfinite(o[i]))
            return false;
    double centre[3]; /* base + (xaxis + yaxis) / 2 */
    for (int k = 0; k < 3; k++)
        centre[k] = (double)o[6 + k] + 0.5 * ((double)o[k] + (double)o[3 + k]);
    return fabs(centre[0]) <= cols && fabs(centre[1]) <= cols && centre[2] >= -1.0 &&
           centre[2] <= rows;
}
