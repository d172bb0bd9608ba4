/* slice_shm.c — a slice's shared-memory slots (protocol/shm.h), for local subscribers.
 *
 * The slots of a slice are created as soon as a subscriber of "shm/<id>/" wants it (not at
 * its first publication: creating and page-locking them takes tens of milliseconds, which
 * would delay the frames behind), sized for the slice, and page-locked for the engine's backend, so the GPU read-out writes
 * the pixels straight into the slot that the subscriber will read: no copy on the host at
 * all. A new size (another scan geometry) makes a new object under a new name; the old one
 * is unlinked, and readers that still map it keep a valid mapping. Names are never reused
 * ("/<prefix>-<pid>-<id>-<n>", n counting every object of this daemon), because readers
 * cache their mapping by name: a recreated object under an old name would be read through
 * the stale mapping. Worker thread, lock held.
 */
#include <config.h>

#include <stdio.h>
#include <unistd.h>

#include "daemon/core/daemon.h"
#include "daemon/base/log.h"

#define TL_SHM_RETRY_NS 5000000000ull /* after a failed creation, try again this much later */

void tl_slice_shm_drop(tl_daemon *d, tl_slice *sl)
{
    if (!sl->shm.base)
        return;
    tl_host_unregister(d->host_memory, sl->shm.base);
    tl_shm_ring_destroy(&sl->shm);
}

bool tl_slice_wanted(tl_daemon *d, const tl_slice *sl, bool *tcp, bool *shm)
{
    *tcp = sl->pinned || tl_publisher_wanted(&d->pub, sl->topic, sl->topic_len);
    *shm = d->cfg.slices_shm[0] && tl_publisher_wanted(&d->pub, sl->shm_topic, sl->shm_topic_len);
    return *tcp || *shm;
}

bool tl_slice_shm_ready(const tl_slice *sl)
{
    return sl->shm.base && sl->shm.pixel_bytes == (size_t)sl->height * sl->width * sizeof(float);
}

int tl_slice_shm_prepare(tl_daemon *d, tl_slice *sl)
{
    size_t bytes = (size_t)sl->height * sl->width * sizeof(float);
    if (!tl_slice_shm_ready(sl)) {
        tl_slice_shm_drop(d, sl);
        uint64_t now = tl_clock_ns();
        if (now < sl->shm_retry_ns)
            return -1; /* failed recently: not again every turn */
        char name[TL_PROTO_SHM_NAME_MAX + 1], err[512];
        snprintf(name, sizeof name, "/%s-%d-%s-%u", d->cfg.slices_shm, (int)getpid(), sl->id,
                 ++d->shm_objects);
        if (tl_shm_ring_create(&sl->shm, name, (uint32_t)d->cfg.slices_shm_slots, bytes, err,
                               sizeof err) != 0) {
            sl->shm_retry_ns = now + TL_SHM_RETRY_NS;
            static tl_ratelimit rl = TL_RATELIMIT_INIT;
            uint64_t suppressed;
            tl_stats_count(&d->stats.shm_failed);
            if (tl_ratelimit_allow(&rl, 5.0, 3, &suppressed))
                tl_log(TL_LOG_ERROR, "shm_failed", "id=%s error=%s suppressed=%llu",
                       tl_logq(sl->id), tl_logq(err), (unsigned long long)suppressed);
            return -1;
        }
        /* not page-locked, the read-out is slower but still correct: say so, go on */
        if (tl_host_register(d->host_memory, sl->shm.base, sl->shm.size, err, sizeof err) != TL_OK)
            tl_log(TL_LOG_WARN, "shm_not_pinned", "id=%s error=%s", tl_logq(sl->id), tl_logq(err));
        tl_log(TL_LOG_INFO, "shm_created", "id=%s name=%s slots=%u bytes=%zu", tl_logq(sl->id),
               tl_logq(name), sl->shm.slots, sl->shm.size);
    }
    return 0;
}
