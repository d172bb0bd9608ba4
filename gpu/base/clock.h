/* clock.h — the two clocks of tomolive, for every part of it (gpu/ is the layer everybody
 * may include, so they live here):
 *   - tl_clock_ns: CLOCK_MONOTONIC, for durations and deadlines (a pool's bounded spin, the
 *     autotuner's budget, the daemon's stage latencies and timers);
 *   - tl_clock_realtime_ns: CLOCK_REALTIME, the wire's time base (t_acq, t_recv, t_pub are
 *     nanoseconds since the epoch, comparable between hosts that share a time source).
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

static inline uint64_t tl_clock_realtime_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

#endif
