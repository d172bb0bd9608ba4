/* camera_scan.c — see camera_scan.h. */
#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "gpu/phantom.h"
#include "tests/camera_scan.h"
#include "tests/testutil.h"

void tl_test_camera_scan(uint32_t rows, uint32_t cols, int darks, int flats, int nproj,
                         uint64_t seed, uint16_t **dark, uint16_t **flat, uint16_t **proj)
{
    size_t npix = (size_t)rows * cols;
    tl_phantom ph;
    ck_assert_int_eq(tl_phantom_shepp_logan(&ph, 0.45 * cols, (rows - 1) / 2.0, 0.45 * rows * 4),
                     0);
    tl_phantom_scale_density(&ph, 2.0 / tl_phantom_line_integral(&ph, 0, 0, (rows - 1) / 2.0));
    tl_camera cam;
    tl_camera_init(&cam);
    cam.noise = true;
    tl_rng rng;
    tl_rng_seed(&rng, seed);
    float *li = malloc(npix * sizeof *li);
    *dark = malloc((size_t)darks * npix * sizeof **dark);
    *flat = malloc((size_t)flats * npix * sizeof **flat);
    *proj = malloc((size_t)nproj * npix * sizeof **proj);
    ck_assert(li && *dark && *flat && *proj);
    for (int k = 0; k < darks; k++)
        tl_camera_frame_u16(&cam, TL_SIM_DARK, NULL, rows, cols, &rng, *dark + k * npix);
    for (int k = 0; k < flats; k++)
        tl_camera_frame_u16(&cam, TL_SIM_FLAT, NULL, rows, cols, &rng, *flat + k * npix);
    for (int k = 0; k < nproj; k++) {
        tl_phantom_project(&ph, M_PI * k / nproj, (cols - 1) / 2.0, rows, cols, li);
        tl_camera_frame_u16(&cam, TL_SIM_PROJ, li, rows, cols, &rng, *proj + k * npix);
    }
    free(li);
    tl_phantom_free(&ph);
}
