/* daemon_fixture.h — a real tomolived for integration tests.
 *
 * Each fixture runs the built daemon in a private temporary directory with ipc://
 * endpoints inside it (parallel tests never collide on ports), logs to a file there, and
 * talks to it as clients do: control requests over a DEALER socket (args written as JSON,
 * replies returned as JSON), frames over a PUSH socket, slices from a SUB socket. The
 * tools (`tomolive push`, `sub`, `recon`, ...) run through tl_fx_run.
 *
 *   tl_fixture f;
 *   const char *args[] = {"--set", "slices.sndhwm=2", NULL};
 *   ck_assert(tl_fx_start(&f, "e2e", args) == 0);
 *   json_t *r = tl_fx_request(&f, "set_slice", "{\"id\":\"a\",\"kind\":\"row\",\"z\":3}");
 *   ...
 *   ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, &seconds), 0);
 */
#ifndef TL_DAEMON_FIXTURE_H
#define TL_DAEMON_FIXTURE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <zmq.h>

#include "protocol/protocol.h"

typedef struct {
    char *dir;
    char ingest[512], control[512], slices[512];
    char log_path[600];
    pid_t pid;
    void *zctx, *ctl, *push;
    tl_proto_decoder *dec;
    uint64_t next_id;
} tl_fixture;

/* Starts the daemon (CPU backend unless extra says otherwise) and waits until it answers
 * a status request. Kernel tuning is off (engine.tune=off) unless extra says otherwise,
 * and its cache is DIR/tune.json. extra: more command-line arguments, NULL-terminated (may be NULL).
 * env: "NAME=value" strings added to its environment, NULL-terminated (may be NULL). */
int tl_fx_start_env(tl_fixture *f, const char *tag, const char *const *extra,
                    const char *const *env);
int tl_fx_start(tl_fixture *f, const char *tag, const char *const *extra);
/* The same for a daemon with [security] curve on (extra sets security.*): the fixture's
 * control socket connects with the secret certificate ctl_key (a viewer or above), its
 * ingest socket with push_key (role ingest); server_key is the daemon's public one. */
int tl_fx_start_keys(tl_fixture *f, const char *tag, const char *const *extra,
                     const char *const *env, const char *server_key, const char *ctl_key,
                     const char *push_key);

/* The same for a daemon started by a launcher: launcher's words (NULL-terminated), then
 * the daemon's command line, e.g. {"mpirun", "-n", "4", NULL} with extra {"--mpi", ...};
 * f->pid is the launcher's. */
int tl_fx_start_launched(tl_fixture *f, const char *tag, const char *const *launcher,
                         const char *const *extra, const char *const *env);

/* A control request; args is a JSON object text or NULL. Returns the reply as JSON:
 * {"ok": true, "result": ...} or {"ok": false, "code": N, "name": "E_...", "message": "..."};
 * NULL when no reply came within 30 s (a reply takes milliseconds; the margin is for
 * heavily loaded test machines, e.g. make distcheck running suites in parallel). The
 * caller json_decref()s it. */
json_t *tl_fx_request(tl_fixture *f, const char *cmd, const char *args);
/* The same on another DEALER connected to f->control (e.g. with other keys). */
json_t *tl_fx_request_on(tl_fixture *f, void *ctl, const char *cmd, const char *args);
/* The same for a request that must succeed: returns the result (a new reference). */
json_t *tl_fx_ok(tl_fixture *f, const char *cmd, const char *args);
/* status.frames.rejected.<reason> and friends: an integer at a dotted path of the status
 * result ("frames.accepted.proj"), -1 if absent. */
long long tl_fx_status_int(tl_fixture *f, const char *path);

/* Sends raw parts on the ingest socket (a PUSH connected once). */
int tl_fx_send_raw(tl_fixture *f, const void *const *parts, const size_t *lens, int n);
/* Sends a well-formed scan / frame / end. */
int tl_fx_send_scan(tl_fixture *f, const tl_proto_scan *s);
int tl_fx_send_frame(tl_fixture *f, const tl_proto_frame *h, const void *pixels, size_t bytes);
int tl_fx_send_end(tl_fixture *f, uint64_t series);
/* Sends n float32 projections of series, every one img (rows x cols), at angles arc k / n,
 * then the end; 0, or -1 at the first that could not be sent. */
int tl_fx_send_views(tl_fixture *f, uint64_t series, const float *img, uint32_t rows,
                     uint32_t cols, int n, double arc);
/* A SUB socket on f's slices endpoint subscribed to topic (e.g. "slice/"), linger 0;
 * zmq_close it. */
void *tl_fx_subscribe(tl_fixture *f, const char *topic);
/* The next slice message on sub, if one comes within timeout_ms, decoded into m with its
 * parts in parts (TL_PROTO_MAX_PARTS of them; tl_proto_close(parts, n) when done): the
 * part count n, or 0 when none came. A message that does not decode fails the test. */
int tl_fx_recv_slice(tl_fixture *f, void *sub, int timeout_ms, zmq_msg_t *parts,
                     tl_proto_msg *m);
/* Fills img (rows x cols) with the line integrals of a centred disk of density 1 and
 * radius r, the same in every row: the projection of a cylinder at any angle. */
void tl_fx_disk_projection(float *img, uint32_t rows, uint32_t cols, double r);
/* Waits until the status integer at path (as tl_fx_status_int) equals want; false after
 * timeout seconds. */
bool tl_fx_wait_status(tl_fixture *f, const char *path, long long want, double timeout);
/* Waits until status.frames.messages reaches n (all sent messages consumed by the
 * ingest thread) and the queue is empty; false after timeout seconds. */
bool tl_fx_wait_messages(tl_fixture *f, long long n, double timeout);
/* Waits until the daemon's log holds needle (it writes each line at once, so a line logged
 * before some reply or notification is there when that arrives); false after timeout
 * seconds. */
bool tl_fx_wait_log(tl_fixture *f, const char *needle, double timeout);

/* Sends sig and waits for the exit; returns the exit status (0..255), 128+signal if it
 * died of a signal, or -1 if it had to be killed after 10 s. *seconds (may be NULL) is the
 * time from the signal to the exit. */
int tl_fx_stop(tl_fixture *f, int sig, double *seconds);
/* The daemon's log so far (malloc'd). */
char *tl_fx_log(tl_fixture *f);
/* Removes the directory and frees everything (stops the daemon first if needed). */
void tl_fx_cleanup(tl_fixture *f);

/* Runs a shell command line with the build's binaries on PATH ($top_builddir/clients,
 * $top_builddir/daemon); returns its exit status, and its stdout in *out (may be NULL). */
int tl_fx_run(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

double tl_fx_seconds(void); /* monotonic */

#endif
