/* notify_listener.c — see notify_listener.h. */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "tests/notify_listener.h"

struct tl_notify_listener {
    int fd;
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char last[4096];
    char *received;
    size_t len, cap;
};

tl_notify_listener *tl_notify_listener_open(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof sa.sun_path) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    tl_notify_listener *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    memcpy(l->path, path, n + 1);
    memcpy(sa.sun_path, path, n);
    if (path[0] == '@')
        sa.sun_path[0] = '\0'; /* abstract namespace, as sd_notify reads it */
    else
        unlink(path);
    l->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (path[0] != '@'));
    if (l->fd < 0 || bind(l->fd, (struct sockaddr *)&sa, salen) < 0) {
        int e = errno;
        if (l->fd >= 0)
            close(l->fd);
        free(l);
        errno = e;
        return NULL;
    }
    return l;
}

void tl_notify_listener_close(tl_notify_listener *l)
{
    if (!l)
        return;
    close(l->fd);
    if (l->path[0] != '@')
        unlink(l->path);
    free(l->received);
    free(l);
}

static void keep(tl_notify_listener *l, const char *d, size_t n)
{
    if (l->len + n + 5 > l->cap) {
        size_t cap = (l->len + n + 5) * 2;
        char *p = realloc(l->received, cap);
        if (!p)
            return;
        l->received = p;
        l->cap = cap;
    }
    memcpy(l->received + l->len, d, n);
    memcpy(l->received + l->len + n, "\n--\n", 5);
    l->len += n + 4;
}

/* Whether a line of the datagram is the assignment (or starts with it, if it ends in '='). */
static bool holds(const char *d, const char *a)
{
    size_t n = strlen(a);
    bool prefix = n > 0 && a[n - 1] == '=';
    for (const char *line = d; line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        size_t len = strcspn(line, "\n");
        if (prefix ? len >= n && strncmp(line, a, n) == 0 : len == n && strncmp(line, a, n) == 0)
            return true;
    }
    return false;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool tl_notify_listener_wait(tl_notify_listener *l, const char *assignment, int timeout_ms)
{
    long long deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        long long left = deadline - now_ms();
        struct pollfd p = {.fd = l->fd, .events = POLLIN};
        int r = poll(&p, 1, left > 0 ? (int)left : 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        char d[4096];
        ssize_t n = recv(l->fd, d, sizeof d - 1, 0);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return false;
        }
        d[n] = '\0';
        keep(l, d, (size_t)n);
        if (holds(d, assignment)) {
            memcpy(l->last, d, (size_t)n + 1);
            return true;
        }
    }
}

const char *tl_notify_listener_last(const tl_notify_listener *l)
{
    return l->last;
}

const char *tl_notify_listener_received(const tl_notify_listener *l)
{
    return l->received ? l->received : "";
}

int tl_notify_listener_fd(const tl_notify_listener *l)
{
    return l->fd;
}
