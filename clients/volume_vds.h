/* volume_vds.h — one HDF5 volume written in parts by several processes (`recon --grid`,
 * grid.h): each grid row writes its sub-volume, slices [first, first + rows) of the whole,
 * to a file of its own beside the output (NAME-part0.h5, NAME-part1.h5, ...), and the output
 * NAME.h5 holds /volume [z, y, x] as a virtual dataset that maps each part's /volume onto
 * its rows. libhdf5 (>= 1.10), h5py and the tools that use them read it as one dataset;
 * the parts are found relative to NAME.h5's directory, so the set can be moved together.
 * The virtual dataset carries the parts' attributes (uint16's scale and offset, the job,
 * rows done).
 *
 *   char part[1024]; tl_volume_vds_part(path, r, R, part, sizeof part);  (each row root)
 *   tl_volume_vds_create(path, R, rows, size, err, n);                  (rank 0, after all)
 */
#ifndef TL_VOLUME_VDS_H
#define TL_VOLUME_VDS_H

#include <stddef.h>
#include <stdint.h>

/* The path of part k of `parts` of the HDF5 output `path`: its extension kept, "-partK"
 * before it (K zero-padded to the digits of parts - 1). */
void tl_volume_vds_part(const char *path, uint32_t k, uint32_t parts, char *buf, size_t n);

/* Creates `path` with /volume of `rows` x size x size, mapping part k's rows [first_k,
 * first_k + rows_k) (tl_engine_split_rows of rows into parts); the parts exist, complete. */
int tl_volume_vds_create(const char *path, uint32_t parts, uint32_t rows, uint32_t size, char *err,
                         size_t errlen);

#endif
