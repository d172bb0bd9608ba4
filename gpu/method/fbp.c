/* fbp.c — filtered back projection (method.h; conventions of ARCHITECTURE.md §3): the ramp
 * filter family of filter.c, angular weights of weights.c. */
#include "config.h"

#include "gpu/method/filter.h"
#include "gpu/method/method.h"

static bool fbp_linear(const tl_engine_config *c)
{
    return c->weights == TL_WEIGHTS_UNIFORM; /* angular weights change with the set */
}

static tl_status fbp_filter(tl_filter f, size_t padded, double *response, const double **out)
{
    *out = NULL;
    if (f == TL_FILTER_NONE)
        return TL_OK;
    tl_status st = tl_filter_response(f, padded, response);
    if (st == TL_OK)
        *out = response;
    return st;
}

static void fbp_weigh(const tl_engine_config *c, tl_bp_proj *proj, tl_angle_key *order, size_t n)
{
    tl_weights_apply(c->weights, proj, order, n, c->weight_angles, c->nweight_angles);
}

const tl_method_ops tl_method_fbp = {
    .name = "fbp",
    .linear = fbp_linear,
    .filter = fbp_filter,
    .weigh = fbp_weigh,
};
