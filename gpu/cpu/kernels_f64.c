/* kernels_f64.c — the CPU kernels in float64: the reference mode (TL_PRECISION_F64) that
 * tests compare every other kernel with. */
#include "config.h"

#define REAL double
#define SFX _f64
#define PSFX _d
#define FFTW(x) fftw_##x
#define LOG log
#define FLOOR floor
#include "gpu/cpu/kernels_impl.h"
