/* volume_progress.h — how far a volume reconstruction has got: on a terminal a bar on
 * stderr (slabs done, GB/s in and out, ETA), otherwise one machine-readable line per
 * slab on stdout, flushed, which scripts and tests wait for:
 *   progress slab=3/16 rows=384/2048 in_GBps=1.234 out_GBps=0.812 elapsed_s=4.1 eta_s=17.8
 * (slab counts the slabs of this run: a resumed run starts again at 1).
 */
#ifndef TL_VOLUME_PROGRESS_H
#define TL_VOLUME_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

typedef enum { TL_PROGRESS_NONE = 0, TL_PROGRESS_BAR, TL_PROGRESS_LINES } tl_progress_mode;

/* BAR when stderr is a terminal, else LINES. */
tl_progress_mode tl_progress_auto(void);

typedef struct {
    tl_progress_mode mode;
    uint32_t slabs, rows; /* of this run */
    double t0;
} tl_progress;

void tl_progress_start(tl_progress *p, tl_progress_mode mode, uint32_t slabs, uint32_t rows);
/* After slab `done` (1-based) is written; bytes so far read and written. */
void tl_progress_slab(tl_progress *p, uint32_t done, uint32_t rows_done, uint64_t bytes_in,
                      uint64_t bytes_out);
/* Ends the bar's line. */
void tl_progress_end(tl_progress *p);

#endif
