/* iter_opts.h — the iterative-method options of `tomolive recon` (issue #28; the engine's
 * tl_iter_options, gpu/base/types.h): parsed and checked by name, so a command lists them
 * once in its getopt table and hands each to tl_iter_opt, with a message that names a bad
 * value before any file is touched.
 *
 *   tl_iter_opts it = TL_ITER_OPTS_INIT;
 *   case O_METHOD: ... if (!tl_iter_opt(&it, "method", optarg, why, sizeof why)) ...
 *   if (!tl_iter_opts_finish(&it, why, sizeof why)) ...   defaults, and what needs --method
 *   if (it.on) tl_engine_iterate(e, id, &it.o, ...);
 */
#ifndef TL_ITER_OPTS_H
#define TL_ITER_OPTS_H

#include <stdbool.h>
#include <stddef.h>

#include "gpu/engine.h"

typedef struct {
    bool on;          /* --method given: slices are iterative, not FBP */
    bool given_other; /* an iterative option other than --method */
    bool start_fbp;   /* --start fbp: each slice starts from its FBP (else from zeros) */
    tl_iter_options o;
} tl_iter_opts;

#define TL_ITER_OPTS_INIT \
    {                     \
        0                 \
    }
#define TL_ITER_DEFAULT_ITERATIONS 20
#define TL_ITER_DEFAULT_SUBSETS 8
#define TL_ITER_DEFAULT_TV_STEPS 10

/* Help lines for the options, for usage texts. */
#define TL_ITER_OPTS_HELP                                                                       \
    "      --method M        reconstruct iteratively instead of by FBP: sirt, sart, os-sart,\n" \
    "                        osem (counts data; MLEM with --subsets 1), from the unfiltered\n"  \
    "                        projections (no --filter); cone beam: the volume as one problem\n" \
    "                        (whole frames on the GPU, the volume in host memory)\n"            \
    "      --projector P     matched (default: the transpose of the back projection) or\n"      \
    "                        joseph (ray-driven, Joseph 1982)\n"                                \
    "      --iterations N    at most N iterations per slice (default 20)\n"                     \
    "      --subsets M       os-sart and osem: M ordered subsets of the views (default 8)\n"    \
    "      --relaxation L    the SART family's step, in (0, 2) (default 1)\n"                   \
    "      --nonneg          clamp the slice at 0 after each iteration\n"                       \
    "      --tv W            total-variation steps after each iteration, each W times that\n"   \
    "                        iteration's change (W > 0; e.g. 0.05)\n"                           \
    "      --tv-steps K      TV steps per iteration (default 10)\n"                             \
    "      --tolerance T     stop once the relative residual changes by less than T\n"          \
    "      --start fbp|zero  start each slice from its FBP (ram-lak; the window twice: \n"      \
    "                        filtered and as measured) or from zeros (default; OS-EM: ones)\n"

/* The option `name` (without the dashes: method, projector, iterations, subsets,
 * relaxation, nonneg, tv, tv-steps, tolerance, start) with value s (NULL for nonneg). false with why on a bad value. */
bool tl_iter_opt(tl_iter_opts *it, const char *name, const char *s, char *why, size_t why_len);
/* Fills the defaults; false when an option needs --method and it was not given, or for
 * --start fbp with OS-EM (which needs a start above 0). */
bool tl_iter_opts_finish(tl_iter_opts *it, char *why, size_t why_len);
/* " method=... iterations=..." (nothing when off), appended to a job description. */
void tl_iter_opts_describe(const tl_iter_opts *it, char *buf, size_t len);

#endif
