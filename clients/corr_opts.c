/* corr_opts.c — per-frame correction options (corr_opts.h). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "clients/corr_opts.h"

bool tl_corr_opt_dezinger(const char *s, tl_corrections *k, char *why, size_t why_len)
{
    char *end;
    double t = strtod(s, &end);
    if (end == s || *end || !isfinite(t) || t < 0) {
        snprintf(why, why_len, "bad --dezinger '%s': need a threshold in counts >= 0", s);
        return false;
    }
    k->dezinger = t;
    return true;
}

bool tl_corr_opt_paganin(const char *s, tl_corrections *k, char *why, size_t why_len)
{
    static const char *const name[4] = {"energy (keV)", "distance (m)", "pixel size (um)",
                                        "delta/beta"};
    double v[4];
    const char *p = s;
    for (int i = 0; i < 4; i++) {
        char *end;
        v[i] = strtod(p, &end);
        if (end == p || (i < 3 ? *end != ',' : *end != '\0')) {
            snprintf(why, why_len,
                     "bad --paganin '%s': need ENERGY_KEV,DISTANCE_M,PIXEL_UM,DELTA_BETA", s);
            return false;
        }
        if (!isfinite(v[i]) || v[i] <= 0) {
            snprintf(why, why_len, "bad --paganin '%s': %s must be a positive number, not %g", s,
                     name[i], v[i]);
            return false;
        }
        p = end + 1;
    }
    k->energy_kev = v[0];
    k->distance_m = v[1];
    k->pixel_um = v[2];
    k->delta_beta = v[3];
    return true;
}

bool tl_corr_opt_rings(const char *s, tl_corrections *k, char *why, size_t why_len)
{
    if (tl_rings_parse(s, k))
        return true;
    snprintf(why, why_len, "bad --rings '%s': need none, vo[:SIZE[,TOL]] or fw[:LEVEL[,TOL]]", s);
    return false;
}
