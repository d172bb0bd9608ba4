/* phase.c — the padded shape of phase retrieval (phase.h). */
#include "config.h"

#include <math.h>

#include "gpu/base/phase.h"

bool tl_phase_on(const tl_corrections *c)
{
    return c->delta_beta != 0 || c->energy_kev != 0 || c->distance_m != 0 || c->pixel_um != 0;
}

/* dim + reach rounded up to a power of two (tomopy's _calc_pad_width), 0 when too large */
static uint32_t padded_dim(uint32_t dim, double reach)
{
    double want = (double)dim + reach;
    uint32_t p = 1;
    while (p < want && p < TL_PHASE_MAX_PAD)
        p <<= 1;
    return p >= want ? p : 0;
}

tl_status tl_phase_shape(const tl_corrections *c, uint32_t rows, uint32_t cols, tl_phase_filter *f,
                         tl_errbuf *eb)
{
    const struct {
        const char *name;
        double v;
    } param[] = {{"energy (keV)", c->energy_kev},
                 {"distance (m)", c->distance_m},
                 {"pixel size (um)", c->pixel_um},
                 {"delta/beta", c->delta_beta}};
    for (size_t k = 0; k < sizeof param / sizeof *param; k++)
        if (!(param[k].v > 0) || !isfinite(param[k].v))
            return tl_fail(eb, TL_EINVAL, "paganin: %s must be a positive number, not %g",
                           param[k].name, param[k].v);
    double lambda = TL_PHASE_HC_EV_M / (c->energy_kev * 1e3), px = c->pixel_um * 1e-6;
    double reach = ceil(M_PI * lambda * c->distance_m / (px * px));
    f->rows = rows;
    f->cols = cols;
    f->prow = padded_dim(rows, reach);
    f->pcol = padded_dim(cols, reach);
    if (!f->prow || !f->pcol)
        return tl_fail(eb, TL_EINVAL,
                       "paganin: the Fresnel blur reaches %.0f pixels (distance %g m, pixel "
                       "%g um, %g keV): the padded frame would exceed %u",
                       reach, c->distance_m, c->pixel_um, c->energy_kev, TL_PHASE_MAX_PAD);
    f->top = (f->prow - rows) / 2;
    f->left = (f->pcol - cols) / 2;
    f->response = NULL;
    return TL_OK;
}
