/* clock.h — the monotonic clock, for what gpu/ times itself: a pool's bounded spin, the
 * CPU backend's benchmark, the autotuner's budget.
 *
 *   uint64_t t0 = tl_clock_ns();  ...  double s = (tl_clock_ns() - t0) * 1e-9;
 */
#ifndef TL_CLOCK_H
#define TL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t tl_clock_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

#endif
