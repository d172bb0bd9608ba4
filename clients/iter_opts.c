/* iter_opts.c — the iterative-method options (iter_opts.h). */
#include "config.h"

#include "clients/iter_opts.h"

#include <stdio.h>
#include <string.h>

#include "clients/cli.h"

static bool count(const char *name, const char *s, long lo, uint32_t *out, char *why, size_t n)
{
    long v;
    if (!tl_cli_long(s, lo, 1000000, &v)) {
        snprintf(why, n, "bad --%s '%s': a whole number from %ld", name, s, lo);
        return false;
    }
    *out = (uint32_t)v;
    return true;
}

static bool number(const char *name, const char *s, double lo, double hi, double *out, char *why,
                   size_t n)
{
    double v;
    if (!tl_cli_double(s, &v) || !(v > lo && v < hi)) {
        snprintf(why, n, "bad --%s '%s': a number in (%g, %g)", name, s, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

bool tl_iter_opt(tl_iter_opts *it, const char *name, const char *s, char *why, size_t why_len)
{
    tl_iter_options *o = &it->o;
    if (strcmp(name, "method") == 0) {
        if (!tl_iter_method_parse(s, &o->method)) {
            snprintf(why, why_len, "bad --method '%s': sirt, sart, os-sart or osem", s);
            return false;
        }
        it->on = true;
        return true;
    }
    it->given_other = true;
    if (strcmp(name, "projector") == 0) {
        if (tl_projector_parse(s, &o->projector))
            return true;
        snprintf(why, why_len, "bad --projector '%s': matched or joseph", s);
        return false;
    }
    if (strcmp(name, "iterations") == 0)
        return count(name, s, 1, &o->iterations, why, why_len);
    if (strcmp(name, "subsets") == 0)
        return count(name, s, 1, &o->subsets, why, why_len);
    if (strcmp(name, "tv-steps") == 0)
        return count(name, s, 1, &o->tv_steps, why, why_len);
    if (strcmp(name, "relaxation") == 0)
        return number(name, s, 0, 2, &o->relaxation, why, why_len);
    if (strcmp(name, "tv") == 0)
        return number(name, s, 0, 1e6, &o->tv_weight, why, why_len);
    if (strcmp(name, "tolerance") == 0)
        return number(name, s, 0, 1, &o->tolerance, why, why_len);
    if (strcmp(name, "start") == 0) {
        if (strcmp(s, "fbp") == 0 || strcmp(s, "zero") == 0) {
            it->start_fbp = strcmp(s, "fbp") == 0;
            return true;
        }
        snprintf(why, why_len, "bad --start '%s': fbp or zero", s);
        return false;
    }
    if (strcmp(name, "nonneg") == 0) {
        o->nonneg = true;
        return true;
    }
    snprintf(why, why_len, "unknown iterative option --%s", name);
    return false;
}

bool tl_iter_opts_finish(tl_iter_opts *it, char *why, size_t why_len)
{
    if (!it->on && it->given_other) {
        snprintf(why, why_len,
                 "--projector, --iterations, --subsets, --relaxation, --nonneg, --tv, "
                 "--tv-steps, --tolerance and --start need --method");
        return false;
    }
    if (it->start_fbp && it->o.method == TL_ITER_OSEM) {
        snprintf(why, why_len,
                 "--start fbp: not with osem, which needs a start above 0 (FBP has values "
                 "at and below 0)");
        return false;
    }
    tl_iter_options *o = &it->o;
    if (!o->iterations)
        o->iterations = TL_ITER_DEFAULT_ITERATIONS;
    if (!o->subsets)
        o->subsets = TL_ITER_DEFAULT_SUBSETS;
    if (!(o->relaxation > 0))
        o->relaxation = 1.0;
    if (o->tv_weight > 0 && !o->tv_steps)
        o->tv_steps = TL_ITER_DEFAULT_TV_STEPS;
    return true;
}

void tl_iter_opts_describe(const tl_iter_opts *it, char *buf, size_t len)
{
    const tl_iter_options *o = &it->o;
    if (it->on && len > 0)
        snprintf(buf, len,
                 " method=%s projector=%s iterations=%u subsets=%u relaxation=%.17g nonneg=%d "
                 "tv=%.17g,%u tolerance=%.17g start=%s",
                 tl_iter_method_name(o->method), tl_projector_name(o->projector), o->iterations,
                 o->subsets, o->relaxation, o->nonneg, o->tv_weight, o->tv_steps, o->tolerance,
                 it->start_fbp ? "fbp" : "zero");
}
