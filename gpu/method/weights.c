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

void tl_weights_apply(tl_weights mode, tl_bp_proj *proj, tl_angle_key *order, size_t n)
{
    if (mode != TL_WEIGHTS_ANGLES || n == 0)
        return;
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
