/* camera_scan.h — a simulated camera scan for integration tests: the 3-D Shepp-Logan
 * phantom (scaled so its largest central line integral is 2) seen by a noisy uint16
 * camera with a gain pattern — darks, flats, then projections at pi k / nproj, all drawn
 * from one generator seeded with seed, so a test can rebuild the same frames.
 *
 *   uint16_t *d, *f, *p;
 *   tl_test_camera_scan(rows, cols, 4, 4, 90, 11, &d, &f, &p);   free() all three
 */
#ifndef TL_CAMERA_SCAN_H
#define TL_CAMERA_SCAN_H

#include <stdint.h>

void tl_test_camera_scan(uint32_t rows, uint32_t cols, int darks, int flats, int nproj,
                         uint64_t seed, uint16_t **dark, uint16_t **flat, uint16_t **proj);

#endif
