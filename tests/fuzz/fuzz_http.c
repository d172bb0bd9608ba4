/* fuzz_http.c — libFuzzer target for tomolived's HTTP server: arbitrary bytes from a TCP
 * peer on loopback, against a whole daemon in this process.
 *
 * The threat is issue 31's: anyone who can reach the HTTP port (a port scanner, a health
 * check, a browser typing https://) must not be able to stop an experiment. So the target
 * is not a parser but the daemon as it runs: lifecycle.h brings one up (CPU backend, its
 * sockets in a temporary directory, HTTP on a free loopback port), and each input is one
 * connection that the daemon's own loop serves between our writes and reads.
 *
 * One input: the first byte chooses how the peer behaves (bit 0: send in two writes with
 * the loop run between them; bit 1: half-close after sending; bit 2: close politely rather
 * than with a reset), the rest is sent. The loop then runs until the daemon closes the
 * connection or has been quiet for QUIET_TURNS turns, and the peer closes; a few more turns
 * let the daemon see the close. Every PROBE_EVERY inputs, and at the end, a plain
 * GET /metrics must still be answered 200 with the request counters in it: a daemon that
 * survives but stops serving is a finding too (abort, so libFuzzer keeps the input).
 *
 * Only http.c and this file are instrumented (ASan, UBSan, coverage): the rest of the
 * daemon comes from the normal build. Run with `make fuzz-http [FUZZ_SECONDS=600]`.
 *
 * Built with TLT_FUZZ_WS (the target ws, `make fuzz-ws`), each input is a page instead: the
 * WebSocket handshake of daemon/www/app.js, then the input as its messages (see below).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "daemon/lifecycle.h"

#define QUIET_TURNS 24  /* loop turns without a byte from the daemon before we give up */
#define MAX_TURNS 4096  /* turns per input in all, so a trickling answer ends too */
#define CLOSE_TURNS 4   /* turns after our close, for the daemon to see it */
#define PROBE_EVERY 256 /* inputs between liveness probes */
#define FUZZ_TOKEN "fuzz-operator-token-0123456789" /* http.token_file's */

#define CHECK(c)                                                               \
    do {                                                                       \
        if (!(c)) {                                                            \
            fprintf(stderr, "fuzz_http: %s failed (line %d)\n", #c, __LINE__); \
            abort();                                                           \
        }                                                                      \
    } while (0)

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tl_daemon daemon_; /* large, zero-initialised */
static int port;
static unsigned long inputs;

static void turn(void)
{
    uv_run(&daemon_.loop, UV_RUN_NOWAIT);
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
          getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    close(fd);
    return ntohs(a.sin_port);
}

static int peer_connect(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK(fd >= 0);
    int rc = connect(fd, (struct sockaddr *)&a, sizeof a);
    CHECK(rc == 0 || errno == EINPROGRESS); /* loopback: the backlog takes it at once */
    return fd;
}

/* Reads what the daemon sent into the sink (keeping the first bytes in head, when given);
 * 1 if something came, 0 if nothing, -1 on end of stream or error. */
static int drain(int fd, char *head, size_t headcap, size_t *headlen)
{
    char buf[16384];
    int got = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n > 0) {
            got = 1;
            if (head && *headlen + 1 < headcap) {
                size_t k = (size_t)n < headcap - 1 - *headlen ? (size_t)n : headcap - 1 - *headlen;
                memcpy(head + *headlen, buf, k);
                *headlen += k;
                head[*headlen] = 0;
            }
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            return -1;
        return got;
    }
}

/* Sends all of data, running the loop whenever the socket is full. False if the daemon
 * closed the connection first (which it may: it owes a hostile peer nothing). */
static bool send_all(int fd, const uint8_t *data, size_t size)
{
    while (size > 0) {
        ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
        if (n > 0) {
            data += n;
            size -= (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            turn();
            if (drain(fd, NULL, 0, NULL) < 0)
                return false;
        } else {
            return false;
        }
    }
    return true;
}

/* Runs the loop until the daemon closes the connection or is quiet. */
static void serve(int fd, char *head, size_t headcap, size_t *headlen)
{
    for (int quiet = 0, turns = 0; quiet < QUIET_TURNS && turns < MAX_TURNS; turns++) {
        turn();
        int r = drain(fd, head, headcap, headlen);
        if (r < 0)
            return;
        quiet = r ? 0 : quiet + 1;
    }
}

static void peer_close(int fd, bool polite)
{
    if (!polite) { /* a reset: no TIME_WAIT, and the daemon sees ECONNRESET */
        struct linger l = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    close(fd);
    for (int i = 0; i < CLOSE_TURNS; i++)
        turn();
}

/* The daemon still serves: GET /metrics answers 200 with the request counters. */
static void probe(void)
{
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n\r\n";
    char head[65536] = "";
    size_t len = 0;
    int fd = peer_connect();
    CHECK(send_all(fd, (const uint8_t *)req, sizeof req - 1));
    serve(fd, head, sizeof head, &len);
    peer_close(fd, false);
    CHECK(strncmp(head, "HTTP/1.1 200", 12) == 0);
    CHECK(strstr(head, "tomolive_http_requests_total{outcome=\"unrouted\"}") != NULL);
}

static void at_end(void)
{
    probe();
    fprintf(stderr, "fuzz_http: %lu inputs, daemon alive and serving\n", inputs);
}

#ifdef TLT_FUZZ_WS
/* A scan is open while pages send their messages, so that moving a view defines and pins
 * its slice (without one, the daemon answers "no scan is open" and goes no further). The
 * scan message goes to the ingest socket like a producer's; then the loop runs until the
 * daemon has the scan (a deadline, no sleep for it). */
static void open_scan(const char *dir)
{
    void *ctx = zmq_ctx_new();
    void *push = zmq_socket(ctx, ZMQ_PUSH);
    char ep[1200];
    snprintf(ep, sizeof ep, "ipc://%s/ingest", dir);
    CHECK(push && zmq_connect(push, ep) == 0);
    tl_proto_scan scan = {.series = 1,
                          .geometry = TL_PROTO_PARALLEL,
                          .rows = 16,
                          .cols = 32,
                          .dtype = TL_PROTO_U16,
                          .window = 8};
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    CHECK(tl_proto_encode_scan(&sb, &scan) == 0);
    CHECK(zmq_send(push, sb.data, sb.size, 0) == (int)sb.size);
    msgpack_sbuffer_destroy(&sb);
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (bool open = false; !open;) {
        turn();
        pthread_mutex_lock(&daemon_.lock);
        open = daemon_.scan.open;
        pthread_mutex_unlock(&daemon_.lock);
        clock_gettime(CLOCK_MONOTONIC, &now);
        CHECK(open || now.tv_sec - t0.tv_sec < 30);
        if (!open)
            poll(NULL, 0, 1); /* the ingest thread's turn */
    }
    int linger = 0;
    zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(push);
    zmq_ctx_term(ctx);
}
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    static char dir[] = "/tmp/tl-fuzz-http-XXXXXX";
    static char set[7][1200];
    CHECK(mkdtemp(dir) != NULL);
    const char *src = getenv("top_srcdir");
    port = free_port();
    snprintf(set[0], sizeof set[0], "ingest.endpoint=ipc://%s/ingest", dir);
    snprintf(set[1], sizeof set[1], "control.endpoint=ipc://%s/control", dir);
    snprintf(set[2], sizeof set[2], "slices.endpoint=ipc://%s/slices", dir);
    snprintf(set[3], sizeof set[3], "http.listen=127.0.0.1:%d", port);
    snprintf(set[4], sizeof set[4], "http.root=%s/daemon/www", src && *src ? src : ".");
    snprintf(set[5], sizeof set[5], "engine.tune_cache=%s/tune.json", dir);
    /* the page's actions need the operator token, and the probe reads /metrics without it */
    snprintf(set[6], sizeof set[6], "http.token_file=%s/token", dir);
    char token_path[1200];
    snprintf(token_path, sizeof token_path, "%s/token", dir);
    FILE *tf = fopen(token_path, "w");
    CHECK(tf != NULL && fprintf(tf, "%s\n", FUZZ_TOKEN) > 0 && fclose(tf) == 0);
    static char *overrides[] = {set[0],
                                set[1],
                                set[2],
                                set[3],
                                set[4],
                                set[5],
                                set[6],
                                "http.open_views=true",
                                "daemon.backend=cpu",
                                "daemon.log_level=error",
                                "engine.tune=off"};
    tl_daemon *d = &daemon_;
    tl_log_init();
    d->overrides = overrides;
    d->noverrides = (int)(sizeof overrides / sizeof *overrides);
    char err[512];
    if (tl_daemon_load_config(d, &d->cfg, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_http: configuration: %s\n", err);
        exit(1);
    }
    tl_log_set_level(d->cfg.log_level);
    tl_daemon_init(d);
    if (tl_daemon_start(d, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_http: the daemon did not start: %s\n", err);
        exit(1);
    }
    probe();
#ifdef TLT_FUZZ_WS
    open_scan(dir);
#endif
    atexit(at_end);
    return 0;
}

#ifdef TLT_FUZZ_WS
/* One WebSocket frame from a client (masked, as RFC 6455 requires of clients). */
static bool ws_send(int fd, int opcode, bool fin, const uint8_t *p, size_t n)
{
    static const uint8_t mask[4] = {0x37, 0xfa, 0x21, 0x3d};
    uint8_t *f = malloc(n + 14);
    CHECK(f != NULL);
    size_t h = 0;
    f[h++] = (uint8_t)((fin ? 0x80 : 0) | opcode);
    if (n < 126) {
        f[h++] = (uint8_t)(0x80 | n);
    } else if (n < 65536) {
        f[h++] = 0x80 | 126;
        f[h++] = (uint8_t)(n >> 8);
        f[h++] = (uint8_t)n;
    } else {
        f[h++] = 0x80 | 127;
        for (int i = 7; i >= 0; i--)
            f[h++] = (uint8_t)((uint64_t)n >> (8 * i));
    }
    memcpy(f + h, mask, 4);
    h += 4;
    for (size_t i = 0; i < n; i++)
        f[h + i] = p[i] ^ mask[i & 3];
    bool ok = send_all(fd, f, h + n);
    free(f);
    return ok;
}

/* The preview page's WebSocket (daemon/www/app.js), then the input as its messages (a scan
 * is open: open_scan): the
 * first byte chooses how (bit 0: each message in two fragments; bit 1: the first message
 * as a binary frame, which the daemon must ignore; bit 2: a close frame before closing;
 * bit 3: no operator token first, so actions are refused), the rest is split at 0xff bytes (never in UTF-8 text) into text messages. The handshake
 * must succeed for every input: a page can always connect. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned how = size ? data[0] : 0;
    if (size) {
        data++;
        size--;
    }
    char upgrade[512], head[4096] = "";
    size_t headlen = 0;
    snprintf(upgrade, sizeof upgrade,
             "GET /ws HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nOrigin: http://127.0.0.1:%d\r\n"
             "Upgrade: websocket\r\nConnection: Upgrade\r\n"
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
             "Sec-WebSocket-Protocol: tomolive-preview\r\n\r\n",
             port, port);
    int fd = peer_connect();
    CHECK(send_all(fd, (const uint8_t *)upgrade, strlen(upgrade)));
    for (int turns = 0; turns < MAX_TURNS && !strstr(head, "\r\n\r\n"); turns++) {
        turn();
        CHECK(drain(fd, head, sizeof head, &headlen) >= 0);
    }
    if (strncmp(head, "HTTP/1.1 101", 12) != 0)
        fprintf(stderr, "fuzz_ws: the handshake got: %.200s\n", head);
    CHECK(strncmp(head, "HTTP/1.1 101", 12) == 0);
    bool open = true;
    if (!(how & 8)) { /* as an operator (the page's first message), else as a mere viewer */
        static const char auth[] = "{\"cmd\":\"auth\",\"token\":\"" FUZZ_TOKEN "\"}";
        open = ws_send(fd, 1, true, (const uint8_t *)auth, sizeof auth - 1);
        if (open)
            serve(fd, NULL, 0, NULL);
    }
    for (size_t at = 0, nmsg = 0; open && at <= size && nmsg < 64; nmsg++) {
        const uint8_t *end = memchr(data + at, 0xff, size - at);
        size_t n = (end ? (size_t)(end - data) : size) - at;
        int opcode = nmsg == 0 && (how & 2) ? 2 : 1;
        if (how & 1) {
            open = ws_send(fd, opcode, false, data + at, n / 2) &&
                   ws_send(fd, 0, true, data + at + n / 2, n - n / 2);
        } else {
            open = ws_send(fd, opcode, true, data + at, n);
        }
        if (open)
            serve(fd, NULL, 0, NULL);
        at += n + 1;
    }
    if (open && (how & 4))
        open = ws_send(fd, 8, true, (const uint8_t *)"\x03\xe8", 2);
    if (open)
        serve(fd, NULL, 0, NULL);
    peer_close(fd, how & 4);
    if (++inputs % PROBE_EVERY == 0)
        probe();
    return 0;
}
#else
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned how = size ? data[0] : 0;
    if (size) {
        data++;
        size--;
    }
    int fd = peer_connect();
    size_t first = (how & 1) ? size / 2 : size;
    bool open = send_all(fd, data, first);
    if (open && first < size) {
        serve(fd, NULL, 0, NULL);
        open = send_all(fd, data + first, size - first);
    }
    if (open && (how & 2))
        shutdown(fd, SHUT_WR);
    if (open)
        serve(fd, NULL, 0, NULL);
    peer_close(fd, how & 4);
    if (++inputs % PROBE_EVERY == 0)
        probe();
    return 0;
}
#endif
