/* tune.h — the autotuner: which back-projection kernel is fastest on this card, for a shape.
 *
 * Chilingaryan et al. 2020, J. Real-Time Image Proc. 17:1331, show that no kernel wins on
 * every GPU (ARCHITECTURE.md §5), so the choice is measured, not assumed: for a shape
 * (slice height x width, window, largest batch of slices) the tuner times every kernel and
 * parameter set the backend has (tl_engine_bench, as if the window were full), for one
 * slice and for batches of 2 and 4 horizontal slices, and picks per allowed quality mode
 *   - `single`: the lowest time for one slice (what a control loop waits for), and
 *   - `batch`:  the highest slice-updates per second over the batch sizes timed.
 * The result goes into the engine (tl_engine_set_choice) and into a cache file keyed by
 * the device (name, UUID, driver, runtime) and the shape, so a daemon restarting on the
 * same card and scan does not tune again; a new driver or card tunes afresh.
 *
 *   tl_tune_shape sh = {.height = 2048, .width = 2048, .window = 2048, .batch = 4};
 *   tl_tune_result r;
 *   if (tl_tune_cache_lookup(path, e, &sh, &r) != TL_OK) {   TL_ENOTFOUND: not cached
 *       tl_tune_run(e, &sh, NULL, &r);
 *       tl_tune_cache_store(path, &r);
 *   }
 *   tl_engine_set_choice(e, &r.choice);
 *
 * The engine must have at least `batch` detector rows for the batches (fewer are timed
 * when it has fewer) and the window of the shape (the tuner never resizes an engine).
 */
#ifndef TL_TUNE_H
#define TL_TUNE_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    uint32_t height, width; /* slice pixels */
    uint32_t window;        /* projections (the engine's window) */
    uint32_t batch;         /* largest number of slices reconstructed together: 1, 2 or 4 */
    tl_geometry geometry;   /* the engine's (set by tl_tune_run and the cache from the
                               engine; callers leave it 0): cone and parallel beam have
                               kernels of their own, so each has its own entries */
} tl_tune_shape;

#define TL_TUNE_MAX_ENTRIES 128

/* One timed (kernel, batch size). */
typedef struct {
    char kernel[32];
    tl_quality quality;
    uint32_t slices;      /* the kernel's slices per pass (tl_kernel_info.slices) */
    uint32_t batch;       /* slices reconstructed together in this timing */
    double ms;            /* median time for the batch */
    double updates_per_s; /* pixels x projections x batch / time */
} tl_tune_entry;

typedef struct {
    tl_tune_shape shape;
    tl_device_id device;
    tl_kernel_choice choice; /* for shape.height x shape.width */
    tl_tune_entry entries[TL_TUNE_MAX_ENTRIES];
    size_t nentries;
    double seconds; /* tuning took (0 when read from the cache) */
    int64_t when;   /* unix time of the measurement */
    int reps;       /* timed calls per entry (median) */
} tl_tune_result;

/* NULL options, or a field <= 0, take the default. */
typedef struct {
    double budget_s;        /* tuning time to aim for (default 15 s): sets reps */
    int min_reps, max_reps; /* default 3 and 20 */
} tl_tune_options;

/* Times every kernel for the shape on engine e and fills r (entries, choice, device).
 * Does not change the engine's choices. Slices it adds for timing are removed again.
 * One calibration pass of single calls (time T1) sets the repetitions of the real pass:
 * reps = clamp(0.8 budget_s / T1, min_reps, max_reps). TL_EINVAL when the shape's window
 * is not the engine's, a side is 0 or batch is not 1, 2 or 4. */
tl_status tl_tune_run(tl_engine *e, const tl_tune_shape *shape, const tl_tune_options *opt,
                      tl_tune_result *r);

/* The configuration of an engine that times slices of c's engine (a daemon tunes beside
 * its scan, on an engine of its own): `batch` detector rows, every kernel competing. In
 * cone beam the rows (at most the detector's) are a band around its middle
 * (tl_engine_config_band), on
 * the first device: a cone-beam slice reads the rows it projects to, and matrices address
 * the whole detector, so `batch` rows with the scan's geometry would time samples that all
 * fall off the detector. matrices: room for c->cone.nmatrices re-based ones (NULL without
 * matrices), which *out then points to. */
tl_status tl_tune_engine_config(const tl_engine_config *c, uint32_t batch, double (*matrices)[12],
                                tl_engine_config *out);

/* Fills r->choice from r->entries (also used on benchmark tables): per quality q, among
 * the kernels of mode q or better, single = least ms at batch 1, batch = most updates/s
 * at any batch size (a tie goes to the smaller batch). "" where no entry qualifies;
 * choice.height/width = shape.height/width. */
void tl_tune_choose(tl_tune_result *r);

/* The cache file: path NULL means tl_tune_default_path. lookup returns TL_ENOTFOUND when
 * nothing is cached for this device and shape (also when the entry is malformed, or names
 * a kernel the engine does not have: a build with other kernels tunes again), TL_EIO when
 * the file cannot be read or parsed (the message says which and where); r->seconds is 0.
 * store replaces the entry of the same key and writes atomically (temporary file + fsync
 * + rename), creating the directory if needed; it does not overwrite a file that is not a
 * tuning cache (TL_EIO). */
tl_status tl_tune_cache_lookup(const char *path, const tl_engine *e, const tl_tune_shape *shape,
                               tl_tune_result *r);
tl_status tl_tune_cache_store(const char *path, const tl_tune_result *r);
/* $TOMOLIVE_TUNE_CACHE, else $XDG_CACHE_HOME/tomolive/tune.json (when absolute), else
 * ~/.cache/tomolive/tune.json. Returns buf; "" when there is no home directory or the
 * path does not fit (then lookup and store with a NULL path fail with TL_EINVAL). */
const char *tl_tune_default_path(char *buf, size_t len);

/* Why the last tl_tune_* call on this thread failed. */
const char *tl_tune_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
