/* weights.c — angular weights of the FBP sum (weights.h). */
#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "gpu/method/weights.h"

static int by_angle(const void *a, const void *b)
{
    double x = ((const tl_angle_key *)a)->angle, y = ((const tl_angle_key *)b)->angle;
    return (x > y) - (x < y);
}

/* The share of sorted angle k of n: half the gap between its neighbours, ends mirrored. */
static double share(const double *a, size_t n, size_t k)
{
    size_t lo = k ? k - 1 : 0, hi = k + 1 < n ? k + 1 : n - 1;
    return (a[hi] - a[lo]) / (double)(hi - lo);
}

/* The index of the ref angle nearest x. */
static size_t nearest(const double *ref, size_t n, double x)
{
    size_t lo = 0, hi = n; /* the first >= x */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ref[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == n || (lo > 0 && x - ref[lo - 1] < ref[lo] - x))
        lo--;
    return lo;
}

/* The held projections as a part of the whole scan ref. */
static void apply_ref(tl_bp_proj *proj, const tl_angle_key *order, size_t n, const double *ref,
                      size_t nref)
{
    double total = 0;
    for (size_t k = 0; k < nref && nref > 1; k++)
        total += share(ref, nref, k);
    for (size_t k = 0; k < n; k++)
        proj[order[k].k].weight =
            nref > 1 && total > 0
                ? share(ref, nref, nearest(ref, nref, order[k].angle)) * M_PI / total
                : M_PI / (double)nref;
}

void tl_weights_apply(tl_weights mode, tl_bp_proj *proj, tl_angle_key *order, size_t n,
                      const double *ref, size_t nref)
{
    if (mode != TL_WEIGHTS_ANGLES || n == 0)
        return;
    if (ref && nref) {
        apply_ref(proj, order, n, ref, nref);
        return;
    }
    if (n == 1) {
        proj[0].weight = M_PI;
        return;
    }
    qsort(order, n, sizeof *order, by_angle);
    double total = 0;
    for (size_t k = 0; k < n; k++) {
        size_t lo = k ? k - 1 : 0, hi = k + 1 < n ? k + 1 : n - 1;
        double gap = (order[hi].angle - order[lo].angle) / (double)(hi - lo);
        proj[order[k].k].weight = gap;
        total += gap;
    }
    for (size_t k = 0; k < n && total > 0; k++)
        proj[k].weight *= M_PI / total;
}
