/* clients_util.c — running `tomolive` in the background for the client tests (see
 * clients_util.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <check.h>
#include <zmq.h>

#include "tests/integration/clients_util.h"

static char out_path[1024], err_path[1024];
static char *out_text, *err_text;

double tl_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

const char *tl_client_binary(void)
{
    static char bin[1024];
    const char *top = getenv("top_builddir");
    snprintf(bin, sizeof bin, "%s/clients/tomolive", top && *top ? top : ".");
    ck_assert_msg(access(bin, X_OK) == 0, "%s is not built", bin);
    return bin;
}

pid_t tl_client_start(const char *dir, const char *const *args)
{
    const char *argv[128];
    size_t n = 0;
    argv[n++] = tl_client_binary();
    for (; args[n - 1] && n < 127; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    return tl_client_exec(dir, argv);
}

pid_t tl_client_exec(const char *dir, const char *const *argv)
{
    snprintf(out_path, sizeof out_path, "%s/stdout.txt", dir);
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", dir);
    /* emptied before the fork: a waiter must not read the last run's output */
    for (const char *p = out_path; p; p = p == out_path ? err_path : NULL) {
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0)
            close(fd);
    }
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0)
            _exit(127);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static char *slurp(const char *p)
{
    FILE *f = fopen(p, "r");
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    while (f && !feof(f)) {
        if (n + 4096 > cap)
            ck_assert_ptr_nonnull(buf = realloc(buf, cap *= 2));
        n += fread(buf + n, 1, cap - n - 1, f);
        if (ferror(f))
            break;
    }
    buf[n] = '\0';
    if (f)
        fclose(f);
    return buf;
}

bool tl_client_running(pid_t pid)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    return waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == 0;
}

bool tl_client_wait_out(pid_t pid, const char *needle, double timeout_s)
{
    for (double deadline = tl_now_s() + timeout_s; tl_now_s() < deadline;) {
        bool running = tl_client_running(pid);
        char *out = slurp(out_path);
        bool found = strstr(out, needle) != NULL;
        free(out);
        if (found)
            return true;
        if (!running) /* looked at after its last output */
            return false;
        nanosleep(&(struct timespec){0, 5000000}, NULL);
    }
    return false;
}

int tl_client_wait(pid_t pid, double timeout_s)
{
    double deadline = tl_now_s() + timeout_s;
    int status;
    pid_t r;
    while ((r = waitpid(pid, &status, WNOHANG)) == 0 && tl_now_s() < deadline)
        nanosleep(&(struct timespec){0, 5000000}, NULL);
    bool killed = false;
    if (r == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        killed = true;
    }
    free(out_text);
    free(err_text);
    out_text = slurp(out_path);
    err_text = slurp(err_path);
    ck_assert_msg(!killed, "tomolive still running after %g s; stderr: %s", timeout_s, err_text);
    ck_assert_msg(WIFEXITED(status), "tomolive died of signal %d; stderr: %s",
                  WIFSIGNALED(status) ? WTERMSIG(status) : 0, err_text);
    return WEXITSTATUS(status);
}

int tl_client_run(const char *dir, const char *const *args, double timeout_s)
{
    return tl_client_wait(tl_client_start(dir, args), timeout_s);
}

const char *tl_client_out(void)
{
    return out_text ? out_text : "";
}

const char *tl_client_err(void)
{
    return err_text ? err_text : "";
}

int tl_count_lines(const char *text, const char *prefix)
{
    int n = 0;
    size_t len = strlen(prefix);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncmp(p, prefix, len))
            n++;
    return n;
}

void *tl_bind_loopback(void *ctx, int type, char *ep, size_t cap)
{
    void *s = zmq_socket(ctx, type);
    ck_assert_ptr_nonnull(s);
    int linger = 0, timeo = 10000;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &timeo, sizeof timeo);
    ck_assert_int_eq(zmq_bind(s, "tcp://127.0.0.1:*"), 0);
    size_t len = cap;
    ck_assert_int_eq(zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &len), 0);
    return s;
}

int tl_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* Whether /proc/net/tcp has a socket in state LISTEN (0A) on port. */
static bool listening(int port)
{
    FILE *fp = fopen("/proc/net/tcp", "r");
    if (!fp)
        return false;
    char line[512];
    bool found = false;
    unsigned local_port, state;
    while (!found && fgets(line, sizeof line, fp))
        /* "  sl  local_address rem_address   st ...": "0: 0100007F:1F90 00000000:0000 0A" */
        found = sscanf(line, " %*u: %*x:%x %*x:%*x %x", &local_port, &state) == 2 &&
                local_port == (unsigned)port && state == 0x0A;
    fclose(fp);
    return found;
}

bool tl_client_wait_listening(pid_t pid, int port, double timeout_s)
{
    for (double deadline = tl_now_s() + timeout_s; tl_now_s() < deadline;) {
        if (listening(port))
            return true;
        if (!tl_client_running(pid))
            return false;
        nanosleep(&(struct timespec){0, 5000000}, NULL);
    }
    return false;
}
