/* parker.h — Parker weights for short cone-beam scans (types.h, tl_cone_config.scan_range),
 * shared by the engine (checks) and the backends (gpu/cpu/, gpu/cuda/), which weigh each
 * projection's columns with them after -log, before the filter.
 *
 * A circular scan of less than a turn sees some rays twice and others once; Parker's
 * weights (D. L. Parker, "Optimal short scan convolution reconstruction for fanbeam CT",
 * Med. Phys. 9(2):254-257, 1982, Eq. 12) make every ray count once in all: w(beta, gamma)
 * + w(conjugate) = 1, with a smooth (sin^2) transition. For a scan of range L >= pi + 2 d
 * (d the largest fan angle) we use the over-scan form of S. Wesarg, M. Ebert, T. Bortfeld,
 * "Parker weights revisited", Med. Phys. 29(3):372-378, 2002: Parker's with the half
 * over-scan D = (L - pi) / 2 in place of d.
 *
 * Conventions (gpu/geometry/cone.h): beta = the view's angle minus scan_start, increasing;
 * gamma = atan((u - u0) / fu), positive towards increasing u. In these axes the ray
 * (beta, gamma) is the ray (beta + pi + 2 gamma, -gamma) read backwards (the source turns
 * towards e_u), the pairing Parker's formula below assumes.
 */
#ifndef TL_PARKER_H
#define TL_PARKER_H

#include <math.h>
#include <stdbool.h>

#include "gpu/base/types.h"

#ifdef __CUDACC__
#define TL_PARKER_FN __host__ __device__ static inline
#else
#define TL_PARKER_FN static inline
#endif

typedef struct {
    bool on;      /* a short scan (0 < scan_range < 2 pi) */
    double start; /* scan_start, radians */
    double half;  /* D = (scan_range - pi) / 2 */
    double u0;    /* the principal column */
    double fu;    /* source-detector distance in pixels (sdd / pixel_u) */
} tl_parker;

/* Whether a configuration's scan range is a short scan. */
TL_PARKER_FN bool tl_parker_short(const tl_cone_config *k)
{
    return k->scan_range > 0 && k->scan_range < 2 * M_PI;
}

/* The weights' parameters for configuration c (on = false for a full turn). */
TL_PARKER_FN tl_parker tl_parker_of(const tl_engine_config *c)
{
    tl_parker p;
    p.on = c->geometry == TL_GEOMETRY_CONE && tl_parker_short(&c->cone);
    p.start = c->cone.scan_start;
    p.half = 0.5 * (c->cone.scan_range - M_PI);
    p.u0 = c->center;
    p.fu = c->cone.source_detector / c->cone.pixel_u;
    return p;
}

/* The weight of column u in the view at `angle` (0 outside the scan). */
TL_PARKER_FN double tl_parker_weight(const tl_parker *p, double angle, double u)
{
    const double beta = angle - p->start, g = atan((u - p->u0) / p->fu);
    const double d = p->half;
    if (!(beta >= 0 && beta <= M_PI + 2 * d))
        return 0;
    if (beta < 2 * (d - g)) {
        const double s = sin(M_PI / 4 * beta / (d - g));
        return s * s;
    }
    if (beta <= M_PI - 2 * g)
        return 1;
    const double s = sin(M_PI / 4 * (M_PI + 2 * d - beta) / (d + g));
    return s * s;
}

#endif
