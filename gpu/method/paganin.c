/* paganin.c — the Paganin filter's response (paganin.h). */
#include "config.h"

#include <math.h>

#include "gpu/method/paganin.h"

/* Frequency of DFT bin k of n samples of spacing px, in cycles per metre. */
static double bin_frequency(uint32_t k, uint32_t n, double px)
{
    long w = k <= n / 2 ? (long)k : (long)k - (long)n;
    return (double)w / ((double)n * px);
}

void tl_paganin_response(const tl_corrections *c, const tl_phase_filter *f, double *out)
{
    double lambda = TL_PHASE_HC_EV_M / (c->energy_kev * 1e3), px = c->pixel_um * 1e-6;
    double a = M_PI * lambda * c->distance_m * c->delta_beta;
    uint32_t half = f->pcol / 2 + 1;
    for (uint32_t r = 0; r < f->prow; r++) {
        double fy = bin_frequency(r, f->prow, px);
        for (uint32_t k = 0; k < half; k++) {
            double fx = bin_frequency(k, f->pcol, px);
            out[(size_t)r * half + k] = 1.0 / (1.0 + a * (fx * fx + fy * fy));
        }
    }
}
