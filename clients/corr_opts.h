/* corr_opts.h — the per-frame correction options that `tomolive recon` and `tomolive bench
 * --stream` share (ARCHITECTURE.md §3.11): their values parsed and checked, with a message
 * that names the bad one, before any file or daemon is touched.
 *
 *   tl_corrections k = {0};
 *   char why[256];
 *   if (!tl_corr_opt_dezinger(optarg, &k, why, sizeof why)) return fail("%s", why);
 *   if (!tl_corr_opt_paganin(optarg, &k, why, sizeof why)) return fail("%s", why);
 */
#ifndef TL_CORR_OPTS_H
#define TL_CORR_OPTS_H

#include <stdbool.h>
#include <stddef.h>

#include "gpu/engine.h"

/* Help lines for the options, for usage texts. */
#define TL_CORR_OPTS_HELP                                                                        \
    "      --dezinger T      replace each raw pixel more than T counts above the median of\n"    \
    "                        its 3 x 3 neighbourhood by that median\n"                           \
    "      --paganin E,D,P,R single-distance phase retrieval (Paganin 2002) before -log:\n"      \
    "                        energy E keV, distance D m, pixel P um, delta/beta R; each > 0\n"   \
    "      --rings vo|fw[:PARAM[,TOL]]  ring removal on the sinograms: vo (Vo 2018, median of\n" \
    "                        PARAM columns, default 31) or fw (Muench 2009, db5 wavelet,\n"      \
    "                        PARAM levels, default 3); TOL rebuild tolerance (0.001)\n"

/* --dezinger T: a finite T >= 0 (0: off) into k->dezinger. */
bool tl_corr_opt_dezinger(const char *s, tl_corrections *k, char *why, size_t why_len);
/* --paganin E,D,P,R: four positive finite numbers into k. */
bool tl_corr_opt_paganin(const char *s, tl_corrections *k, char *why, size_t why_len);
/* --rings METHOD[:PARAM[,TOL]] (tl_rings_parse) into k. */
bool tl_corr_opt_rings(const char *s, tl_corrections *k, char *why, size_t why_len);

#endif
