/* commands.h — the daemon's control commands (status, slice, unslice, tune, ...), one
 * request at a time on the loop thread, each packing its whole reply with pk.
 *
 * In-process callers (the HTTP server, the RECAST3D link) use tl_commands_run, which
 * refuses commands that answer later (tune) and runs the others with every right (admin:
 * they do their own access control). The control socket uses
 * tl_commands_run_control: it returns true when the command was handed to the worker and
 * nothing was packed; the reply then comes from tl_tuning's job (control.c sends it when
 * the worker signals job_done).
 */
#ifndef TL_COMMANDS_H
#define TL_COMMANDS_H

#include <stdbool.h>

#include "daemon/core/daemon.h"

void tl_commands_run(tl_daemon *d, const tl_proto_req *req, msgpack_packer *pk);
/* role, client: who asks (tl_auth_role); a command above the role is E_DENIED. */
bool tl_commands_run_control(tl_daemon *d, const tl_proto_req *req, tl_role role,
                             const char *client, msgpack_packer *pk);

/* The policy a slice follows when its request gave none (slices.* settings). */
tl_update_policy tl_default_policy(const tl_settings *c);

#endif
