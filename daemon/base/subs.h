/* subs.h — which slice topics somebody is subscribed to, as the XPUB socket reports it.
 *
 * With ZMQ_XPUB_VERBOSER every subscribe (\x01prefix) and unsubscribe (\x00prefix) of every
 * subscriber reaches us, so a count per prefix says whether anyone still wants it. A slice
 * is wanted when some prefix with a count above zero starts its topic: "slice/row0/" wants
 * just that slice, "slice/" wants them all. The loop thread updates the set; the engine
 * worker asks it; a mutex keeps them apart (both are rare compared to frames).
 */
#ifndef TL_SUBS_H
#define TL_SUBS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char *prefix;
    size_t len;
    int count;
} tl_sub;

typedef struct {
    pthread_mutex_t mu;
    tl_sub *v;
    size_t n, cap;
} tl_subs;

void tl_subs_init(tl_subs *s);
void tl_subs_destroy(tl_subs *s);
/* Applies one XPUB subscription message (first byte 1 = subscribe, 0 = unsubscribe).
 * Returns 1 if the set of wanted prefixes changed, 0 if not, -1 if the message is not a
 * subscription message or memory ran out. */
int tl_subs_update(tl_subs *s, const void *msg, size_t len);
/* Whether some subscribed prefix starts topic. */
bool tl_subs_match(tl_subs *s, const char *topic, size_t len);
/* Number of distinct subscribed prefixes. */
size_t tl_subs_count(tl_subs *s);

#endif
