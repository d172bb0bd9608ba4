/* control.h — the control socket: a ROUTER on the daemon's loop that decodes each request
 * and answers it with tl_commands_run_control (commands.h); lifecycle.c opens it after the
 * publisher and closes it before. Loop thread.
 */
#ifndef TL_CONTROL_H
#define TL_CONTROL_H

#include <stddef.h>

#include "daemon/core/daemon.h"

/* Binds control.endpoint and starts watching it; 0, or -1 with err. */
int tl_control_open(tl_daemon *d, char *err, size_t errlen);
void tl_control_close(tl_daemon *d);

#endif
