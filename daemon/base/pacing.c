/* pacing.c — see pacing.h. */
#include <config.h>

#include "daemon/base/pacing.h"

uint64_t tl_pace_average(uint64_t avg, uint64_t sample)
{
    return avg ? avg - avg / TL_PACE_AVG + sample / TL_PACE_AVG : sample;
}

void tl_pace_frame(tl_pace *p, uint64_t t_recv_ns, uint64_t now_ns)
{
    if (p->frame_ns && t_recv_ns > p->frame_ns)
        p->gap_ns = tl_pace_average(p->gap_ns, t_recv_ns - p->frame_ns);
    p->frame_ns = t_recv_ns;
    p->taken_ns = now_ns;
}

void tl_pace_turn(tl_pace *p, bool took_frame, uint64_t now_ns)
{
    p->resume_ns = p->taken_ns + 2 * p->gap_ns;
    p->spent_ns = 0;
    p->held = false;
    bool stream = p->gap_ns && p->gap_ns <= TL_PACE_STREAM_NS && now_ns < p->resume_ns;
    p->budget_ns = !stream ? UINT64_MAX : took_frame ? p->gap_ns / TL_PACE_SHARE : 0;
}

bool tl_pace_take(tl_pace *p, bool urgent, uint64_t cost_ns)
{
    if (urgent || p->budget_ns == UINT64_MAX)
        return true;
    if (p->budget_ns == 0 || (p->spent_ns > 0 && p->spent_ns + cost_ns > p->budget_ns)) {
        p->held = true;
        return false;
    }
    p->spent_ns += cost_ns ? cost_ns : 1; /* the first is taken whatever it costs */
    return true;
}
