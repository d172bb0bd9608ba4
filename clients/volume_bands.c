/* volume_bands.c — see volume_bands.h. */
#include "config.h"

#include <stdlib.h>

#include "clients/cli.h"
#include "clients/volume_bands.h"

int tl_volume_bands_init(tl_volume_bands *b, const tl_engine_config *c, uint32_t n,
                         const uint64_t *indices, const double *angles, uint32_t size,
                         uint32_t row0, uint32_t rows, char *err, size_t errlen)
{
    b->rows = rows;
    b->detector = c->rows;
    b->first = calloc(rows ? rows : 1, sizeof *b->first);
    b->end = calloc(rows ? rows : 1, sizeof *b->end);
    if (!b->first || !b->end) {
        tl_volume_bands_free(b);
        return tl_cli_errf(err, errlen, "out of memory for the bands of %u slices", rows);
    }
    tl_status st = tl_engine_rows_read(c, n, indices, angles, size, row0, rows, b->first, b->end);
    if (st != TL_OK) {
        tl_volume_bands_free(b);
        return tl_cli_errf(err, errlen, "the detector rows of the slabs: %s (%s)",
                           tl_engine_last_error(NULL), tl_status_name(st));
    }
    return 0;
}

void tl_volume_bands_free(tl_volume_bands *b)
{
    free(b->first);
    free(b->end);
    b->first = b->end = NULL;
}

void tl_volume_bands_of(const tl_volume_bands *b, uint32_t z0, uint32_t h, uint32_t *first,
                        uint32_t *end)
{
    *first = b->detector;
    *end = 0;
    for (uint32_t z = z0; z < z0 + h && z < b->rows; z++) {
        *first = b->first[z] < *first ? b->first[z] : *first;
        *end = b->end[z] > *end ? b->end[z] : *end;
    }
    if (*end < *first) /* no slice: an empty band */
        *end = *first;
}

uint32_t tl_volume_bands_rows(void *ctx, uint32_t h)
{
    const tl_volume_bands *b = ctx;
    uint32_t tallest = 1;
    for (uint32_t z0 = 0; h > 0 && z0 < b->rows; z0 += h) {
        uint32_t first, end;
        tl_volume_bands_of(b, z0, h, &first, &end);
        tallest = end - first > tallest ? end - first : tallest;
    }
    return tallest;
}

uint32_t tl_volume_bands_first(const tl_volume_bands *b, uint32_t z0, uint32_t h, uint32_t rows)
{
    uint32_t first, end;
    tl_volume_bands_of(b, z0, h, &first, &end);
    return first + rows <= b->detector ? first : b->detector - rows;
}
