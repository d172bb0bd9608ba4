/* angles.h — per-projection lists given on the command line or in text files: projection
 * angles ("START:STOP:COUNT" in degrees, or a file of degrees) and frame indices (a file).
 * Shared by `tomolive recon` and `tomolive push`, so both read a scan description the
 * same way.
 *
 * Files hold one value per line; '#' starts a comment, blank lines are ignored. Angles
 * come back in radians. Functions return 0 (or true) on success; file readers put a
 * message naming the file and line in err on failure.
 */
#ifndef TL_ANGLES_H
#define TL_ANGLES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "START:STOP:COUNT" in degrees: COUNT angles START + i (STOP - START) / COUNT, i < COUNT
 * (STOP itself excluded, so 0:180:N is N equally spaced angles of a half turn). With
 * default_count > 0 the form "START:STOP" is accepted too and means default_count angles.
 * *out is malloc'ed radians. */
bool tl_angles_parse_deg(const char *s, uint32_t default_count, double **out, uint32_t *n);

/* The arc n increasing, equally spaced angles (radians) cover as a scan: each stands for
 * one step (their mean spacing), so the arc starts half a step before the first angle and
 * spans n steps; *full tells whether that is a whole turn (within half a step). False for
 * fewer than 2 angles or angles that do not increase. Cone beam uses it to tell a short
 * scan (Parker's weights, PROTOCOL.md 8.1.1 short_scan) from a full turn. */
bool tl_angles_arc(const double *a, uint32_t n, double *start, double *range, bool *full);

/* One angle in degrees per line; *out is malloc'ed radians. */
int tl_angles_read_file(const char *path, double **out, uint32_t *n, char *err, size_t errlen);

/* One frame index (unsigned integer) per line; *out is malloc'ed. */
int tl_indices_read_file(const char *path, uint64_t **out, uint32_t *n, char *err, size_t errlen);

#endif
