/* subs.c — see subs.h. A plain array: a beamline has a handful of viewers, not thousands. */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "daemon/base/subs.h"

void tl_subs_init(tl_subs *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
}

void tl_subs_destroy(tl_subs *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i].prefix);
    free(s->v);
    pthread_mutex_destroy(&s->mu);
}

static tl_sub *find(tl_subs *s, const char *p, size_t len)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].len == len && memcmp(s->v[i].prefix, p, len) == 0)
            return &s->v[i];
    return NULL;
}

int tl_subs_update(tl_subs *s, const void *msg, size_t len)
{
    const unsigned char *m = msg;
    if (len < 1 || m[0] > 1)
        return -1;
    const char *p = (const char *)m + 1;
    size_t plen = len - 1;
    int changed = 0;
    pthread_mutex_lock(&s->mu);
    tl_sub *e = find(s, p, plen);
    if (m[0] == 1) {
        if (!e) {
            if (s->n == s->cap) {
                size_t cap = s->cap ? 2 * s->cap : 8;
                tl_sub *v = realloc(s->v, cap * sizeof *v);
                if (!v) {
                    pthread_mutex_unlock(&s->mu);
                    return -1;
                }
                s->v = v;
                s->cap = cap;
            }
            char *copy = malloc(plen ? plen : 1);
            if (!copy) {
                pthread_mutex_unlock(&s->mu);
                return -1;
            }
            memcpy(copy, p, plen);
            e = &s->v[s->n++];
            *e = (tl_sub){copy, plen, 0};
        }
        changed = e->count++ == 0;
    } else if (e && e->count > 0) {
        if (--e->count == 0) {
            free(e->prefix);
            *e = s->v[--s->n];
            changed = 1;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return changed;
}

bool tl_subs_match(tl_subs *s, const char *topic, size_t len)
{
    bool hit = false;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->n && !hit; i++)
        hit = s->v[i].len <= len && memcmp(s->v[i].prefix, topic, s->v[i].len) == 0;
    pthread_mutex_unlock(&s->mu);
    return hit;
}

size_t tl_subs_count(tl_subs *s)
{
    pthread_mutex_lock(&s->mu);
    size_t n = s->n;
    pthread_mutex_unlock(&s->mu);
    return n;
}
