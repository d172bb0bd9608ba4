/* recast3d.h — tomolive as a tomopackets "reconstructor" toward a RECAST3D viewer, and the
 * tomopackets wire conventions it shares with the tomopackets ingest adapter
 * (daemon/ingest/tomopackets.h).
 *
 * Session (RECAST3D's protocol, cicwi/RECAST3D docs): a REQ socket to the viewer's REP
 * (recast3d.server, port 5555) sends MakeScene and gets the scene id back; a SUB socket to
 * its PUB (recast3d.subscribe, 5556) filters [descriptor, scene id] for SetSlice,
 * RemoveSlice and KillScene; each slice the viewer sets becomes a pinned plane slice of the
 * daemon (id "r3d-<scene>-<slice>", registered through tl_commands_run), and every time the
 * publisher computes it, its pixels go back to the viewer as SliceData over the REQ
 * socket (one request in flight; the newest slice wins while one is). MakeScene is retried
 * with exponential backoff (0.5 s to 30 s) until the viewer answers, and a viewer that
 * stops answering SliceData is reconnected the same way; nothing blocks the loop.
 *
 * Geometry. RECAST3D's 9 floats (x-axis, y-axis, base point) place normalised slice
 * coordinates (xs, ys) in [0,1]^2, origin bottom-left, at base + xs * xaxis + ys * yaxis
 * in the viewer's volume box [-1, 1]^3. That box is the reconstruction volume of the
 * current scan: x and y span the detector width centred on the rotation axis, z spans the
 * detector rows with +1 at the top edge of row 0 (the viewer's up is the detector's up):
 *   tomolive (x, y, z) = (X * W/2, Y * W/2, (H - 1)/2 - Z * H/2)   for viewer (X, Y, Z)
 * (W x H the detector's columns x rows; tomolive's volume coordinates: gpu/engine.h). The
 * same map turns the viewer's three vectors into a tomolive plane, so tomolive's pixel
 * (i, j) of an n x n slice is the viewer's (xs, ys) = ((j + 0.5)/n, 1 - (i + 0.5)/n).
 * SliceData rows go bottom-up (row 0 at ys = 0, OpenGL's texture order) and its size is
 * [n, n] (recast3d.slice_size, or the detector width). The map follows the scan: a scan of
 * another shape re-registers the slices.
 */
#ifndef TL_RECAST3D_H
#define TL_RECAST3D_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/ingest/tomopackets.h"

struct tl_daemon;

/* Starts the viewer link when recast3d.server is set (loop thread, after the publisher is
 * open). 0, or -1 with err (a bad endpoint). */
int tl_recast3d_start(struct tl_daemon *d, char *err, size_t errlen);
/* Stops it and removes its slices (before the publisher closes). */
void tl_recast3d_stop(struct tl_daemon *d);

/* tomolive's plane (xaxis, yaxis, base in tomolive volume coordinates) of a viewer
 * orientation, for a detector of cols x rows (the map above). */
void tl_recast3d_to_plane(const float viewer[9], uint32_t rows, uint32_t cols, float plane[9]);

#endif
