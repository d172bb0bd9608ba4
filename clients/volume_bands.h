/* volume_bands.h — the detector rows each slab of a cone-beam volume reads, for the
 * out-of-core planner (volume_plan.h, band_rows) and pipeline (volume_pipeline.h).
 *
 * Seed 002 uploads every detector row for every slab; a slab of h slices only reads the
 * band its voxels project to (v = D z / w, seed-002-004.md §2), which the engine gives
 * row by row (tl_engine_rows_read). A slab's band is the union of its rows' bands: in one
 * view v is monotonic in z along every ray (x, y fixed), so the box of the slab lands
 * between the images of its bottom and top rows, and the union over views commutes with
 * the union over rows. Every slab's engine holds the same number of rows (the tallest
 * band of the plan), placed at the slab's band and moved up where it would pass the
 * detector's last row.
 *
 *   tl_volume_bands b;
 *   if (tl_volume_bands_init(&b, &cfg, n, indices, angles, size, row0, rows, err, len)) ...
 *   uint32_t tallest = tl_volume_bands_rows(&b, h);      (the planner's band_rows)
 *   uint32_t first = tl_volume_bands_first(&b, z0, h, tallest);
 *   tl_volume_bands_free(&b);
 */
#ifndef TL_VOLUME_BANDS_H
#define TL_VOLUME_BANDS_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/engine.h"

typedef struct {
    uint32_t rows;       /* the volume's height (slices) */
    uint32_t detector;   /* the detector's rows */
    uint32_t *first;     /* per slice: the first detector row it reads */
    uint32_t *end;       /* per slice: one past the last */
} tl_volume_bands;

/* The band of each slice z = row0 + i (i < rows) of size x size, from the engine
 * configuration of the whole detector and the scan's views. 0, or -1 with err. */
int tl_volume_bands_init(tl_volume_bands *b, const tl_engine_config *c, uint32_t n,
                         const uint64_t *indices, const double *angles, uint32_t size,
                         uint32_t row0, uint32_t rows, char *err, size_t errlen);
void tl_volume_bands_free(tl_volume_bands *b);

/* Detector rows read by slices [z0, z0 + h) of the volume (z0 from the volume's first). */
void tl_volume_bands_of(const tl_volume_bands *b, uint32_t z0, uint32_t h, uint32_t *first,
                        uint32_t *end);
/* The tallest band of slabs of h slices from the volume's first (ctx: a tl_volume_bands). */
uint32_t tl_volume_bands_rows(void *ctx, uint32_t h);
/* Where an engine of `rows` detector rows sits for slab [z0, z0 + h): at its band, moved
 * up to end at the detector's last row if it would pass it. */
uint32_t tl_volume_bands_first(const tl_volume_bands *b, uint32_t z0, uint32_t h, uint32_t rows);

#endif
