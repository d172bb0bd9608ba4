/* pacing.h — frames first: how much slice read-out the worker may do after each frame.
 *
 * A control system measures a slice's latency from the newest frame in it, and a camera
 * loses frames when the daemon stalls. So while frames stream, the read-outs that are due
 * by routine policy (every K frames, at most max_rate) take at most 1/TL_PACE_SHARE of the
 * time between frames after each frame: at least one slice, the one read out longest ago
 * (tl_slice_served_before), and the others wait for the next frame. A frame then never
 * waits behind a burst of read-outs (four 2048^2 slices are 64 MB), every slice read out
 * holds the frame just applied, and slices keep their rates: a preview's slices, due
 * together, go out over successive frames. Urgent read-outs (tl_slice_urgent) are never
 * held back; without a stream, or once it has paused for two frame intervals, everything
 * due is read out at once. The worker owns one tl_pace (lock held):
 *
 *   tl_pace_frame(&p, t_recv_mono, now);     each frame taken from the queue
 *   tl_pace_turn(&p, took_frame, now);       before a turn's read-outs
 *   if (tl_pace_take(&p, urgent, cost_ns))   each due slice, in serving order
 *       ...read it out...
 *   p.held? wake by p.resume_ns              slices held back are read then at the latest
 */
#ifndef TL_PACING_H
#define TL_PACING_H

#include <stdbool.h>
#include <stdint.h>

#define TL_PACE_SHARE 4                /* a frame's read-outs: at most 1/4 of the gap */
#define TL_PACE_STREAM_NS 100000000ull /* frames closer than this are a stream */
#define TL_PACE_AVG 8                  /* moving averages weigh a new sample by 1/8 */

typedef struct {
    /* the camera's pace */
    uint64_t frame_ns; /* monotonic receipt time of the last frame taken */
    uint64_t gap_ns;   /* moving average of the time between frames */
    uint64_t taken_ns; /* when the worker last took a frame */
    /* this turn */
    uint64_t budget_ns; /* routine read-out time allowed; UINT64_MAX: no limit */
    uint64_t spent_ns;  /* estimated time of the routine read-outs taken */
    uint64_t resume_ns; /* the stream counts as paused from then on */
    bool held;          /* a due slice was held back */
} tl_pace;

/* A moving average (0 = none yet: the sample). */
uint64_t tl_pace_average(uint64_t avg, uint64_t sample);
void tl_pace_frame(tl_pace *p, uint64_t t_recv_ns, uint64_t now_ns);
void tl_pace_turn(tl_pace *p, bool took_frame, uint64_t now_ns);
/* Whether a due slice is read out this turn; cost_ns is its estimated read-out time. */
bool tl_pace_take(tl_pace *p, bool urgent, uint64_t cost_ns);

#endif
