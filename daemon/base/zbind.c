/* zbind.c — see zbind.h. The probe is a non-blocking connect: a listener accepts it at once
 * (or its backlog is full: EAGAIN, busy all the same); a leftover file refuses it. */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <zmq.h>

#include "daemon/base/zbind.h"

static bool listened_on(const char *path)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    /* '@': an abstract name, which the kernel itself refuses to bind twice; '*': libzmq
     * makes up a fresh path */
    if (path[0] == '@' || path[0] == '*' || strlen(path) >= sizeof addr.sun_path)
        return false;
    memcpy(addr.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    int rc = connect(fd, (const struct sockaddr *)&addr, sizeof addr);
    bool busy = rc == 0 || errno == EAGAIN;
    close(fd);
    return busy;
}

int tl_zbind(void *sock, const char *endpoint)
{
    static const char ipc[] = "ipc://";
    if (strncmp(endpoint, ipc, sizeof ipc - 1) == 0 && listened_on(endpoint + sizeof ipc - 1)) {
        errno = EADDRINUSE;
        return -1;
    }
    return zmq_bind(sock, endpoint);
}
