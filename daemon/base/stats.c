/* stats.c — counters and histograms (see stats.h). */
#include <config.h>

#include <math.h>

#include "daemon/base/stats.h"

const char *tl_reject_name(tl_reject r)
{
    static const char *const names[TL_REJ_COUNT] = {
        "protocol",  "no_scan",    "series", "finished", "shape",      "angle", "stale",
        "duplicate", "queue_full", "scan",   "engine",   "gpu_memory", "band",  "incomplete",
    };
    return (unsigned)r < TL_REJ_COUNT ? names[r] : "?";
}

const char *tl_latency_name(tl_latency l)
{
    static const char *const names[TL_LAT_COUNT] = {
        "queue",
        "submit",
        "reconstruct",
        "frame_to_publish",
        "acquisition_to_publish",
        "acquisition_to_receive",
        "dezinger",
        "paganin",
        "rings",
    };
    return (unsigned)l < TL_LAT_COUNT ? names[l] : "?";
}

void tl_stats_max(tl_counter *c, uint64_t v)
{
    uint64_t cur = atomic_load_explicit(c, memory_order_relaxed);
    while (v > cur && !atomic_compare_exchange_weak_explicit(c, &cur, v, memory_order_relaxed,
                                                             memory_order_relaxed))
        ;
}

double tl_hist_bound(int i)
{
    return TL_HIST_MIN * exp2((i + 1) / 8.0);
}

void tl_hist_add(tl_hist *h, double s)
{
    if (!(s >= 0))
        s = 0; /* clocks of two hosts can disagree: a negative latency counts as zero */
    int i = s <= TL_HIST_MIN ? 0 : (int)floor(8.0 * log2(s / TL_HIST_MIN));
    if (i >= TL_HIST_BUCKETS)
        i = TL_HIST_BUCKETS - 1;
    else if (i > 0 && s <= tl_hist_bound(i - 1)) /* keep bound(i-1) < s <= bound(i) exact */
        i--;
    atomic_fetch_add_explicit(&h->bucket[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
    uint64_t ns = (uint64_t)(s * 1e9);
    atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
    tl_stats_max(&h->max_ns, ns);
}

uint64_t tl_hist_count(const tl_hist *h)
{
    return atomic_load_explicit(&h->count, memory_order_relaxed);
}

double tl_hist_max(const tl_hist *h)
{
    return atomic_load_explicit(&h->max_ns, memory_order_relaxed) / 1e9;
}

double tl_hist_quantile(const tl_hist *h, double q)
{
    uint64_t total = 0, counts[TL_HIST_BUCKETS];
    for (int i = 0; i < TL_HIST_BUCKETS; i++)
        total += counts[i] = atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
    if (total == 0)
        return 0;
    uint64_t want = (uint64_t)ceil(q * (double)total), seen = 0;
    if (want == 0)
        want = 1;
    for (int i = 0; i < TL_HIST_BUCKETS; i++) {
        seen += counts[i];
        if (seen >= want) {
            double b = tl_hist_bound(i), m = tl_hist_max(h);
            return b < m ? b : m; /* never report above the true maximum */
        }
    }
    return tl_hist_max(h);
}
