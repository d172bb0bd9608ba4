/* kernels_f32.c — the CPU kernels in float32: what the CPU backend normally runs. */
#include "config.h"

#define REAL float
#define SFX _f32
#define PSFX _f
#define FFTW(x) fftwf_##x
#define LOG logf
#define FLOOR floorf
#include "gpu/cpu/kernels_impl.h"
