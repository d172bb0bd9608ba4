/* http.c — the HTTP server of http.h: libwebsockets on the daemon's libuv loop.
 *
 * Why the foreign loop works here: Debian's libwebsockets 4.1 is built with
 * LWS_WITH_EVLIB_PLUGINS and ships the libuv support as a plugin (libwebsockets-evlib-uv,
 * a dependency of libwebsockets-dev) that libwebsockets loads when a context asks for
 * LWS_SERVER_OPTION_LIBUV; with info.foreign_loops it adds its handles to our uv_loop_t
 * instead of running one of its own. So there is no extra thread, and everything below runs
 * on the loop thread. Two quirks of 4.1 shape the code: a context whose default vhost cannot
 * listen is still returned, so the vhost is created explicitly (LWS_SERVER_OPTION_EXPLICIT_
 * VHOSTS) and a failed bind is seen and fails start-up; and after lws_context_destroy the
 * loop must run on until libwebsockets' handles have closed, which main's uv_run does.
 *
 * One server per process: its state is file-static, because tl_daemon (daemon.h) has no
 * place for it and start/stop take only the daemon.
 *
 * Access (http.h says the rules): origin_ok and token_ok are the two checks, refuse_access
 * counts and logs what they refuse. A WebSocket is a client from its handshake on, but it
 * watches (is sent state and images, and keeps the preview slices pinned) only once the
 * views are open to it: at once with http.open_views, after a good auth otherwise.
 */
#include <config.h>

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <libwebsockets.h>

#include "protocol/jsonpack.h"
#include "daemon/core/daemon.h"
#include "daemon/serve/commands.h"
#include "daemon/serve/http.h"
#include "daemon/serve/metrics.h"
#include "daemon/serve/preview.h"

#if !defined TL_WWW_DIR || !defined TL_BUILD_EXE || !defined TL_SOURCE_WWW_DIR
#error "TL_WWW_DIR (where the page is installed), TL_BUILD_EXE and TL_SOURCE_WWW_DIR (the \
build tree's daemon and the source tree's page) must be defined: see daemon/local.mk"
#endif

#define MAX_CLIENTS 32
#define NREPLIES 8  /* replies queued per page; older ones are dropped beyond */
#define RX_MAX 4096 /* largest message a page may send */
#define CHUNK 16384 /* HTTP body bytes per write */
#define TICK_MS 250 /* how often the scan is looked at and pages told its state */
#define WS_PROTOCOL "tomolive-preview"
#define TOKEN_MIN 16
#define TOKEN_MAX 256

/* On every response: the page's own files and WebSocket only, nothing inline, no framing. */
static const struct {
    const char *name, *value;
} security_headers[] = {
    {"content-security-policy:",
     "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
     "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
    {"x-content-type-options:", "nosniff"},
    {"x-frame-options:", "DENY"},
    {"referrer-policy:", "no-referrer"},
    {"cross-origin-opener-policy:", "same-origin"},
    {"cross-origin-resource-policy:", "same-origin"},
    {"cache-control:", "no-store"}, /* live data, and a page small enough to fetch again */
};
#define HSTS "max-age=31536000" /* over TLS: a year */

/* The preview slices: a row and three ortho-slices through one point. */
#define NVIEWS 4
static const struct {
    const char *id;
    const char *axis; /* NULL: a row */
} views[NVIEWS] = {{"preview-row", NULL},
                   {"preview-x", "x"},
                   {"preview-y", "y"},
                   {"preview-z", "z"}};

/* One message with the LWS_PRE bytes of headroom lws_write needs before it; reused. */
typedef struct {
    uint8_t *buf;
    size_t cap, len;
    bool pending;
} msgbuf;

/* A connected page. */
typedef struct {
    struct lws *wsi;
    int bits;               /* 8 or 16: the depth of its preview images */
    msgbuf view[NVIEWS];    /* the newest image of each view not yet sent */
    msgbuf state;           /* the newest state message not yet sent */
    msgbuf reply[NREPLIES]; /* replies to its requests, in order */
    int rep_head, nrep;
    int turn; /* the view to consider first next time (round robin) */
    char rx[RX_MAX];
    size_t rxlen;
    bool rx_bad; /* the message being received is too long: ignore it */
    bool watching; /* in server.clients: sent state and images */
    bool may_act;  /* gave the operator token: an operator */
} client;

/* Per connection (lws allocates and zeroes it): a page, or an HTTP response in progress.
 * Only connections that libwebsockets bound to a protocol have one: see callback(). */
typedef struct {
    client *c;
    char *body;
    size_t len, off;
    bool head; /* a HEAD request: the headers were the whole answer */
} session;

typedef struct {
    tl_daemon *d;
    bool running;
    struct lws_context *ctx;
    struct lws_vhost *vh;
    char listen[TL_SETTINGS_ENDPOINT_MAX];
    char host[TL_SETTINGS_ENDPOINT_MAX]; /* of listen: the vhost keeps a pointer to it */
    char root[1024];
    uv_timer_t timer;
    client *clients[MAX_CLIENTS]; /* the WebSockets that watch */
    int nclients;
    int nconn; /* every WebSocket, watching or not */
    /* access: the operator token (never logged; token_len 0: none) */
    char token[TOKEN_MAX + 1];
    size_t token_len;
    bool tls;
    /* the preview slices: positions (row z; x, y, z of the ortho point), and what is known
     * of the scan they were placed for */
    double pos[NVIEWS];
    bool placed, defined, pinned, scan_open;
    uint64_t series;
    uint32_t rows, cols;
    /* per-slice work buffers, reused: the downsampled image and its 8- and 16-bit messages */
    float *small;
    size_t small_cap;
    uint8_t *enc[2];
    size_t enc_cap[2], enc_len[2];
    /* in-process control requests */
    tl_proto_decoder *req_dec, *rep_dec;
    msgpack_sbuffer req, rep;
    uint64_t next_id;
    char *state_text;       /* the last state sent to pages */
    const char *kernel;     /* of the last slice published (a static string) */
    uint64_t sent, dropped; /* preview images */
    uint64_t http_ok, http_errors, http_unrouted; /* tl_metrics_state says what they count */
    uint64_t refused_origin, refused_token;
} server;

static server srv;

/* ---- small helpers --------------------------------------------------------------------- */

static int msg_set(msgbuf *m, const void *data, size_t len)
{
    if (len > m->cap) {
        uint8_t *b = realloc(m->buf, LWS_PRE + len);
        if (!b)
            return -1;
        m->buf = b;
        m->cap = len;
    }
    memcpy(m->buf + LWS_PRE, data, len);
    m->len = len;
    return 0;
}

static void msg_free(msgbuf *m)
{
    free(m->buf);
    memset(m, 0, sizeof *m);
}

static void *grow(void *p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return p;
    void *q = realloc(p, need);
    if (!q)
        return NULL;
    *cap = need;
    return q;
}

/* libwebsockets' own complaints, most of them about what a client sent ("Ran out of header
 * data space"): anyone can connect, so they are rate-limited like rejected frames. */
static void lws_emit(int level, const char *line)
{
    static tl_ratelimit rl = TL_RATELIMIT_INIT;
    int lv = level == LLL_ERR ? TL_LOG_ERROR : TL_LOG_WARN;
    uint64_t held;
    if (!tl_log_enabled(lv) || !tl_ratelimit_allow(&rl, 10.0, 20, &held))
        return;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", line);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = 0;
    tl_log(lv, "http_lws", "message=%s suppressed=%llu", tl_logq(msg), (unsigned long long)held);
}

/* ---- access ---------------------------------------------------------------------------- */

/* A header into buf: 1, 0 when absent, -1 when longer than buf holds. */
static int header(struct lws *wsi, enum lws_token_indexes h, char *buf, size_t n)
{
    buf[0] = 0;
    if (lws_hdr_total_length(wsi, h) <= 0)
        return 0;
    return lws_hdr_copy(wsi, buf, (int)n, h) > 0 ? 1 : -1;
}

/* Counts a refusal and logs it, rate-limited: anyone can knock. what says where (a request
 * path, "websocket", an action); detail is the Origin, never a token. */
static void refuse_access(server *s, bool origin, const char *what, const char *detail)
{
    static tl_ratelimit rl = TL_RATELIMIT_INIT;
    uint64_t held;
    if (origin)
        s->refused_origin++;
    else
        s->refused_token++;
    if (tl_log_enabled(TL_LOG_WARN) && tl_ratelimit_allow(&rl, 1.0, 10, &held))
        tl_log(TL_LOG_WARN, "http_refused", "reason=%s what=%s origin=%s suppressed=%llu",
               origin ? "origin" : "token", tl_logq(what), tl_logq(detail ? detail : ""),
               (unsigned long long)held);
}

/* The Origin rule of http.h; refusals are counted here. */
static bool origin_ok(server *s, struct lws *wsi, const char *what)
{
    char origin[256], host[256];
    int o = header(wsi, WSI_TOKEN_ORIGIN, origin, sizeof origin);
    int h = header(wsi, WSI_TOKEN_HOST, host, sizeof host);
    if (o == 0 ||
        (o > 0 && tl_http_origin_allowed(origin, h > 0 ? host : NULL, s->tls,
                                         s->d->cfg.http_origins)))
        return true;
    refuse_access(s, true, what, o > 0 ? origin : "(too long)");
    return false;
}

static bool token_ok(const server *s, const char *given, size_t len)
{
    return s->token_len && given && tl_http_token_equal(s->token, s->token_len, given, len);
}

/* Whether an HTTP request may read the views: open, or "Authorization: Bearer TOKEN". */
static bool views_ok(server *s, struct lws *wsi, const char *what)
{
    char a[TOKEN_MAX + 32];
    if (s->d->cfg.http_open_views)
        return true;
    const char *t = a + 7;
    if (header(wsi, WSI_TOKEN_HTTP_AUTHORIZATION, a, sizeof a) > 0 &&
        strncasecmp(a, "Bearer ", 7) == 0) {
        while (*t == ' ')
            t++;
        if (token_ok(s, t, strlen(t)))
            return true;
    }
    refuse_access(s, false, what, NULL);
    return false;
}

/* The first line of http.token_file, 16 to 256 printable characters without spaces. */
static int load_token(server *s, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "http.token_file %s: cannot read: %s", path, strerror(errno));
        return -1;
    }
    char line[TOKEN_MAX + 2];
    struct stat st;
    bool got = fgets(line, sizeof line, f) != NULL;
    bool shared = fstat(fileno(f), &st) == 0 && (st.st_mode & 077);
    fclose(f);
    size_t n = got ? strcspn(line, "\r\n") : 0;
    while (n && (line[n - 1] == ' ' || line[n - 1] == '\t'))
        n--;
    bool printable = true;
    for (size_t i = 0; i < n; i++)
        printable = printable && line[i] > 0x20 && line[i] < 0x7f;
    if (n < TOKEN_MIN || n > TOKEN_MAX || !printable) {
        explicit_bzero(line, sizeof line);
        snprintf(err, errlen,
                 "http.token_file %s: its first line must be a token of %d to %d printable "
                 "characters without spaces (e.g. made with: openssl rand -hex 32)",
                 path, TOKEN_MIN, TOKEN_MAX);
        return -1;
    }
    memcpy(s->token, line, n);
    s->token[n] = 0;
    s->token_len = n;
    explicit_bzero(line, sizeof line);
    if (shared)
        tl_log(TL_LOG_WARN, "http_token_file_shared", "path=%s mode=%04o hint=%s", tl_logq(path),
               (unsigned)(st.st_mode & 07777), tl_logq("chmod 600: others can read the token"));
    return 0;
}

/* ---- control requests, in-process ------------------------------------------------------ */

/* Runs one control command as the control socket would (args: a JSON object or NULL).
 * Returns its result as JSON (a new reference; json_null() for none), or NULL with the
 * error in err. */
static json_t *run_command(server *s, const char *cmd, const json_t *args, char *err,
                           size_t errlen)
{
    msgpack_sbuffer_clear(&s->req);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &s->req, msgpack_sbuffer_write);
    tl_proto_msg m, r;
    tl_proto_error e;
    if (tl_proto_begin_req(&pk, ++s->next_id, cmd, args != NULL) != 0 ||
        (args && tl_json_pack(&pk, args) != 0)) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (tl_proto_decode(s->req_dec, s->req.data, s->req.size, TL_PROTO_CONTROL, &m, &e) !=
        TL_PROTO_OK) {
        snprintf(err, errlen, "%s: %s", tl_proto_err_name(e.code), e.message);
        return NULL;
    }
    tl_stats_count(&s->d->stats.requests);
    msgpack_sbuffer_clear(&s->rep);
    msgpack_packer_init(&pk, &s->rep, msgpack_sbuffer_write);
    tl_commands_run(s->d, &m.req, &pk);
    if (tl_proto_decode(s->rep_dec, s->rep.data, s->rep.size, TL_MSG_REP, &r, &e) != TL_PROTO_OK) {
        snprintf(err, errlen, "%s: %s", tl_proto_err_name(e.code), e.message);
        return NULL;
    }
    if (!r.rep.ok) {
        snprintf(err, errlen, "%s: %.*s", tl_proto_err_name(r.rep.code), (int)r.rep.message.len,
                 r.rep.message.ptr);
        return NULL;
    }
    json_t *res = r.rep.result ? tl_json_from_msgpack(r.rep.result) : json_null();
    if (!res)
        snprintf(err, errlen, "out of memory");
    return res;
}

/* ---- the preview slices ---------------------------------------------------------------- */

static int view_index(const char *id)
{
    for (int i = 0; i < NVIEWS; i++)
        if (strcmp(views[i].id, id) == 0)
            return i;
    return -1;
}

/* The default view for a detector of rows x cols: the middle row, and the ortho-slices
 * through the middle of the volume (the rotation axis, at the middle row). */
static void place_defaults(server *s)
{
    double zmid = floor(s->rows / 2.0);
    s->pos[0] = zmid;
    s->pos[1] = 0;
    s->pos[2] = 0;
    s->pos[3] = zmid;
}

/* Defines (or redefines) view i with its position, pinned or not. */
static json_t *define_view(server *s, int i, bool pin, char *err, size_t errlen)
{
    json_t *a = views[i].axis
                    ? json_pack("{s:s, s:s, s:s, s:f, s:b}", "id", views[i].id, "kind", "ortho",
                                "axis", views[i].axis, "position", s->pos[i], "pin", pin)
                    : json_pack("{s:s, s:s, s:f, s:b}", "id", views[i].id, "kind", "row", "z",
                                s->pos[i], "pin", pin);
    if (!a) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    json_t *r = run_command(s, "set_slice", a, err, errlen);
    json_decref(a);
    return r;
}

/* Defines every view, pinned while pages watch; unpinned, a view is not computed. */
static void sync_views(server *s, bool pin)
{
    if (!s->placed)
        return;
    bool ok = true;
    for (int i = 0; i < NVIEWS; i++) {
        char err[300];
        json_t *r = define_view(s, i, pin, err, sizeof err);
        if (!r) {
            ok = false;
            tl_log(TL_LOG_WARN, "preview_slice_refused", "id=%s error=%s", views[i].id,
                   tl_logq(err));
        }
        json_decref(r);
    }
    s->defined = ok;
    s->pinned = pin && ok;
}

/* What the loop needs to know about the scan, read under the daemon lock. */
typedef struct {
    bool open, finished;
    uint64_t series;
    uint32_t rows, cols, window, held, missing;
    uint64_t memory_bytes;
    double center;
    char backend[16], device[128], filter[24];
    tl_center_estimate cor; /* the live centre estimate (gpu/engine.h) */
} scan_view;

/* With wait false, gives up (false) when the worker holds the lock, e.g. through a long
 * reconstruction: the periodic tick must not stall the loop for it. */
static bool read_scan(tl_daemon *d, scan_view *v, bool wait)
{
    memset(v, 0, sizeof *v);
    if (!wait && pthread_mutex_trylock(&d->lock) != 0)
        return false;
    if (wait)
        pthread_mutex_lock(&d->lock);
    if (d->scan.open) {
        tl_engine_state st;
        tl_engine_get_state(d->scan.engine, &st);
        v->open = true;
        v->finished = d->scan.finished;
        v->series = d->scan.series;
        v->rows = d->scan.msg.rows;
        v->cols = d->scan.msg.cols;
        v->window = st.window;
        v->held = st.held;
        v->missing = st.missing;
        v->memory_bytes = st.memory_bytes;
        v->center = st.center;
        (void)tl_engine_center(d->scan.engine, &v->cor);
        snprintf(v->backend, sizeof v->backend, "%s", st.backend);
        snprintf(v->device, sizeof v->device, "%s", st.device_name);
        snprintf(v->filter, sizeof v->filter, "%s", tl_filter_name(st.filter));
    }
    pthread_mutex_unlock(&d->lock);
    return true;
}

/* Follows the scan: a new one places the views again when its detector differs, and
 * defines them (pinned) when pages are watching. */
static void follow_scan(server *s, const scan_view *v)
{
    if (!v->open) {
        s->scan_open = false;
        return;
    }
    if (s->scan_open && v->series == s->series)
        return;
    s->scan_open = true;
    s->series = v->series;
    if (!s->placed || v->rows != s->rows || v->cols != s->cols) {
        s->rows = v->rows;
        s->cols = v->cols;
        place_defaults(s);
        s->placed = true;
    }
    if (s->nclients > 0)
        sync_views(s, true);
}

/* ---- messages to pages ----------------------------------------------------------------- */

static void want_write(client *c)
{
    lws_callback_on_writable(c->wsi);
}

static void queue_text(client *c, json_t *msg)
{
    char *t = json_dumps(msg, JSON_COMPACT);
    if (!t)
        return;
    if (c->nrep == NREPLIES) { /* a page that does not read: drop its oldest reply */
        c->rep_head = (c->rep_head + 1) % NREPLIES;
        c->nrep--;
    }
    if (msg_set(&c->reply[(c->rep_head + c->nrep) % NREPLIES], t, strlen(t)) == 0)
        c->nrep++;
    free(t);
    want_write(c);
}

static json_t *state_json(server *s, const scan_view *v)
{
    json_t *vs = json_array();
    for (int i = 0; i < NVIEWS; i++)
        json_array_append_new(vs, views[i].axis ? json_pack("{s:s, s:s, s:s, s:f}", "id",
                                                            views[i].id, "kind", "ortho", "axis",
                                                            views[i].axis, "position", s->pos[i])
                                                : json_pack("{s:s, s:s, s:f}", "id", views[i].id,
                                                            "kind", "row", "z", s->pos[i]));
    json_t *cor = v->open && v->cor.estimating
                      ? json_pack("{s:b, s:b, s:f, s:f}", "auto", v->cor.auto_on, "valid",
                                  v->cor.valid, "center", v->cor.center, "confidence",
                                  v->cor.confidence)
                      : json_null();
    json_t *scan =
        v->open
            ? json_pack("{s:I, s:i, s:i, s:i, s:i, s:i, s:f, s:b, s:f, s:s, s:s, s:s, s:o}",
                        "series",
                        (json_int_t)v->series, "rows", (int)v->rows, "cols", (int)v->cols,
                        "window", (int)v->window, "held", (int)v->held, "missing", (int)v->missing,
                        "fill", v->window ? (double)v->held / v->window : 0.0, "finished",
                        v->finished, "center", v->center, "filter", v->filter, "backend",
                        v->backend, "device", v->device, "center_estimate", cor)
            : json_null();
    if (!v->open)
        json_decref(cor);
    return json_pack("{s:s, s:s, s:o, s:o, s:i, s:i, s:I}", "type", "state", "version",
                     PACKAGE_VERSION, "scan", scan, "views", vs, "preview_size",
                     s->d->cfg.http_preview_size, "clients", s->nclients, "dropped",
                     (json_int_t)s->dropped);
}

/* Tells every page the state when it changed (or only page `only`, when given). */
static void send_state(server *s, const scan_view *v, client *only)
{
    json_t *j = state_json(s, v);
    char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!t)
        return;
    bool changed = !s->state_text || strcmp(t, s->state_text) != 0;
    for (int i = 0; i < s->nclients; i++) {
        client *c = s->clients[i];
        if ((changed || c == only) && msg_set(&c->state, t, strlen(t)) == 0) {
            c->state.pending = true;
            want_write(c);
        }
    }
    free(s->state_text);
    s->state_text = t;
}

static void on_tick(uv_timer_t *t)
{
    server *s = t->data;
    scan_view v;
    if (!read_scan(s->d, &v, false))
        return; /* the worker is busy: next tick */
    follow_scan(s, &v);
    if (s->nclients > 0)
        send_state(s, &v, NULL);
}

/* The publisher's tap: every slice just before it is sent (loop thread). A preview slice
 * is downsampled once, quantised once per depth in use, and replaces whatever image of
 * that view each page has not been sent yet. */
static void on_slice(void *ctx, const tl_slicebuf *b)
{
    server *s = ctx;
    s->kernel = b->info.kernel;
    int v;
    if (s->nclients == 0 || (v = view_index(b->id)) < 0)
        return;
    uint32_t oh, ow,
        f = tl_preview_factor(b->height, b->width, (uint32_t)s->d->cfg.http_preview_size, &oh,
                              &ow);
    float *small = grow(s->small, &s->small_cap, (size_t)oh * ow * sizeof(float));
    if (!small)
        return;
    s->small = small;
    tl_preview_downsample(b->data, b->height, b->width, f, small);
    tl_preview_hdr h = {
        .view = (uint8_t)v,
        .final = b->final,
        .width = ow,
        .height = oh,
        .src_width = b->width,
        .src_height = b->height,
        .projections_used = b->info.projections_used,
        .missing = b->info.missing,
        .seq = b->seq,
        .t_acq = b->info.t_acq,
        .t_pub = tl_clock_realtime_ns(),
    };
    memcpy(h.orientation, b->orientation, sizeof h.orientation);
    bool done[2] = {false, false};
    for (int i = 0; i < s->nclients; i++) {
        client *c = s->clients[i];
        int k = c->bits == 16;
        if (!done[k]) {
            h.bits = (uint8_t)c->bits;
            size_t need = tl_preview_bytes(oh, ow, c->bits);
            uint8_t *e = grow(s->enc[k], &s->enc_cap[k], need);
            if (!e)
                return;
            s->enc[k] = e;
            s->enc_len[k] = tl_preview_encode(small, &h, e, need);
            done[k] = true;
        }
        if (c->view[v].pending) /* latest wins: the older image was never sent */
            s->dropped++;
        if (msg_set(&c->view[v], s->enc[k], s->enc_len[k]) == 0) {
            c->view[v].pending = true;
            want_write(c);
        }
    }
}

/* Sends one message to a page (libwebsockets allows one write per writeable callback):
 * replies first, then the state, then the views in turn. */
static int write_next(server *s, client *c)
{
    msgbuf *m = NULL;
    enum lws_write_protocol type = LWS_WRITE_TEXT;
    if (c->nrep) {
        m = &c->reply[c->rep_head];
        c->rep_head = (c->rep_head + 1) % NREPLIES;
        c->nrep--;
    } else if (c->state.pending) {
        m = &c->state;
    } else {
        for (int k = 0; k < NVIEWS && !m; k++) {
            int v = (c->turn + k) % NVIEWS;
            if (c->view[v].pending) {
                m = &c->view[v];
                c->turn = (v + 1) % NVIEWS;
                type = LWS_WRITE_BINARY;
            }
        }
    }
    if (!m)
        return 0;
    m->pending = false;
    if (lws_write(c->wsi, m->buf + LWS_PRE, m->len, type) < (int)m->len)
        return -1;
    if (type == LWS_WRITE_BINARY)
        s->sent++;
    bool more = c->nrep || c->state.pending;
    for (int v = 0; v < NVIEWS; v++)
        more = more || c->view[v].pending;
    if (more)
        want_write(c);
    return 0;
}

/* ---- requests from pages --------------------------------------------------------------- */

/* code: a word for the page to act on ("unauthorized": ask for the token), or NULL. */
static void reply(client *c, json_t *req, json_t *result, const char *err, const char *code)
{
    json_t *m = json_pack("{s:s, s:O, s:b}", "type", "reply", "req", req ? req : json_null(), "ok",
                          err == NULL);
    if (!m) {
        json_decref(result);
        return;
    }
    if (err)
        json_object_set_new(m, "error", json_string(err));
    if (err && code)
        json_object_set_new(m, "code", json_string(code));
    else
        json_object_set_new(m, "result", result ? result : json_null());
    queue_text(c, m);
    json_decref(m);
}

static void client_watch(server *s, client *c);

/* The page's actions: they change what is reconstructed, and need the operator token. */
static bool is_action(const char *cmd)
{
    return strcmp(cmd, "move") == 0 || strcmp(cmd, "center") == 0 ||
           strcmp(cmd, "auto_center") == 0 || strcmp(cmd, "reset_views") == 0;
}

/* {"cmd": "auth", "token": ...}: makes the page an operator, and a watcher. */
static json_t *authorize(server *s, client *c, const json_t *msg, char *err, size_t errlen)
{
    const json_t *t = json_object_get(msg, "token");
    if (!s->token_len) {
        snprintf(err, errlen, "no operator token is configured (http.token_file): this daemon "
                              "takes no actions from the page");
        refuse_access(s, false, "auth", NULL);
        return NULL;
    }
    if (!token_ok(s, json_string_value(t), json_string_length(t))) {
        snprintf(err, errlen, "wrong operator token");
        refuse_access(s, false, "auth", NULL);
        return NULL;
    }
    c->may_act = true;
    if (!c->watching)
        client_watch(s, c);
    return json_pack("{s:b}", "operator", true);
}

/* One JSON message from a page: {"req": N, "cmd": ..., ...}.
 *   auth   {token}           the operator token: actions, and the views when they are closed
 *   move   {view, position}  moves a preview slice (a row's z, an ortho-slice's position)
 *   center {value}           set_param center (the rotation axis column)
 *   auto_center {value}      set_param auto_center (the live estimate applied, or not)
 *   bits   {value}           8 or 16: the depth of this page's images
 *   reset_views              the default view again
 * move, center, auto_center and reset_views need a page that gave the token; refused, the reply has
 * "code": "unauthorized". */
static void handle_message(server *s, client *c, const char *text, size_t len)
{
    json_error_t je;
    json_t *msg = json_loadb(text, len, 0, &je);
    const char *cmd = json_string_value(json_object_get(msg, "cmd"));
    json_t *req = json_object_get(msg, "req");
    char err[300] = "";
    const char *code = NULL;
    json_t *res = NULL;
    scan_view v;
    if (!cmd) {
        snprintf(err, sizeof err, "expected a JSON object with \"cmd\"");
    } else if (strcmp(cmd, "auth") == 0) {
        res = authorize(s, c, msg, err, sizeof err);
        code = res ? NULL : "unauthorized";
    } else if (is_action(cmd) && !c->may_act) {
        snprintf(err, sizeof err, "%s",
                 s->token_len ? "the operator token is needed for this"
                              : "this daemon takes no actions from the page (no http.token_file)");
        code = "unauthorized";
        refuse_access(s, false, cmd, NULL);
    } else if (strcmp(cmd, "move") == 0) {
        const char *id = json_string_value(json_object_get(msg, "view"));
        json_t *p = json_object_get(msg, "position");
        int i = id ? view_index(id) : -1;
        if (i < 0 || !json_is_number(p) || !isfinite(json_number_value(p)))
            snprintf(err, sizeof err,
                     "move needs \"view\" (a preview slice) and a finite \"position\"");
        else if (!s->placed)
            snprintf(err, sizeof err, "no scan is open");
        else {
            double old = s->pos[i];
            s->pos[i] = json_number_value(p);
            res = define_view(s, i, true, err, sizeof err);
            if (!res)
                s->pos[i] = old; /* refused: nothing changed */
            else
                s->defined = true;
        }
    } else if (strcmp(cmd, "center") == 0) {
        json_t *a =
            json_pack("{s:s, s:O}", "name", "center", "value",
                      json_object_get(msg, "value") ? json_object_get(msg, "value") : json_null());
        res = a ? run_command(s, "set_param", a, err, sizeof err) : NULL;
        json_decref(a);
    } else if (strcmp(cmd, "auto_center") == 0) {
        json_t *a = json_pack("{s:s, s:O}", "name", "auto_center", "value",
                              json_object_get(msg, "value") ? json_object_get(msg, "value")
                                                            : json_null());
        res = a ? run_command(s, "set_param", a, err, sizeof err) : NULL;
        json_decref(a);
    } else if (strcmp(cmd, "bits") == 0) {
        json_int_t b = json_integer_value(json_object_get(msg, "value"));
        if (b != 8 && b != 16)
            snprintf(err, sizeof err, "bits must be 8 or 16");
        else {
            c->bits = (int)b;
            res = json_integer(b);
        }
    } else if (strcmp(cmd, "reset_views") == 0) {
        if (!s->placed)
            snprintf(err, sizeof err, "no scan is open");
        else {
            place_defaults(s);
            sync_views(s, true);
            res = json_true();
        }
    } else {
        snprintf(err, sizeof err,
                 "unknown command \"%s\" (auth, move, center, auto_center, bits, "
                 "reset_views)",
                 cmd);
    }
    if (!res && !err[0])
        snprintf(err, sizeof err, "failed");
    reply(c, req, res, res ? NULL : err, code);
    json_decref(msg);
    if (read_scan(s->d, &v, false)) /* else the next tick tells */
        send_state(s, &v, NULL);
}

/* ---- pages come and go ----------------------------------------------------------------- */

/* A new WebSocket: told what it may do ({"type": "access", "views": "open"|"token",
 * "actions": "token"|"off"}), and watching at once when the views are open. */
static client *client_open(server *s, struct lws *wsi)
{
    client *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->wsi = wsi;
    c->bits = 8;
    s->nconn++;
    json_t *m = json_pack("{s:s, s:s, s:s}", "type", "access", "views",
                          s->d->cfg.http_open_views ? "open" : "token", "actions",
                          s->token_len ? "token" : "off");
    if (m)
        queue_text(c, m);
    json_decref(m);
    if (s->d->cfg.http_open_views)
        client_watch(s, c);
    return c;
}

static void client_watch(server *s, client *c)
{
    c->watching = true;
    s->clients[s->nclients++] = c;
    scan_view v;
    read_scan(s->d, &v, true);
    follow_scan(s, &v);
    if (s->scan_open && !s->pinned)
        sync_views(s, true);
    tl_log(TL_LOG_INFO, "preview_connected", "pages=%d", s->nclients);
    send_state(s, &v, c);
}

static void client_close(server *s, client *c)
{
    bool watched = c->watching;
    s->nconn--;
    for (int i = 0; watched && i < s->nclients; i++)
        if (s->clients[i] == c) {
            s->clients[i] = s->clients[--s->nclients];
            break;
        }
    for (int v = 0; v < NVIEWS; v++)
        msg_free(&c->view[v]);
    for (int i = 0; i < NREPLIES; i++)
        msg_free(&c->reply[i]);
    msg_free(&c->state);
    free(c);
    if (!watched)
        return;
    tl_log(TL_LOG_INFO, "preview_disconnected", "pages=%d", s->nclients);
    /* nobody watches: let the engine stop computing them (not while stopping: the daemon
     * is going away, and its slices with it) */
    if (s->nclients == 0 && s->running && s->defined && s->pinned)
        sync_views(s, false);
}

/* ---- HTTP -------------------------------------------------------------------------------- */

static int add_header(struct lws *wsi, const char *name, const char *value, uint8_t **q,
                      uint8_t *end)
{
    return lws_add_http_header_by_name(wsi, (const unsigned char *)name,
                                       (const unsigned char *)value, (int)strlen(value), q, end);
}

/* Sends the headers of a response (the security headers, and name: value when name is not
 * NULL) and queues its body (taken over, freed when sent); for a HEAD request only the
 * headers go, with the length the body would have had. */
static int respond_with(struct lws *wsi, session *p, unsigned status, const char *ctype,
                        char *body, size_t len, const char *name, const char *value)
{
    uint8_t hb[LWS_PRE + 2048], *start = hb + LWS_PRE, *q = start, *end = hb + sizeof hb - 1;
    free(p->body);
    p->body = body;
    p->len = len;
    p->off = 0;
    if (status < 400)
        srv.http_ok++;
    else
        srv.http_errors++;
    bool bad = !body || lws_add_http_common_headers(wsi, status, ctype, len, &q, end) ||
               add_header(wsi, "connection:", "close", &q, end) ||
               (name && add_header(wsi, name, value, &q, end)) ||
               (srv.tls && add_header(wsi, "strict-transport-security:", HSTS, &q, end));
    for (size_t i = 0; !bad && i < sizeof security_headers / sizeof *security_headers; i++)
        bad = add_header(wsi, security_headers[i].name, security_headers[i].value, &q, end);
    if (bad || lws_finalize_write_http_header(wsi, start, &q, end))
        return -1;
    if (p->head) { /* the body is not sent: http_writeable ends the transaction */
        free(p->body);
        p->body = NULL;
    }
    lws_callback_on_writable(wsi);
    return 0;
}

static int respond(struct lws *wsi, session *p, unsigned status, const char *ctype, char *body,
                   size_t len)
{
    return respond_with(wsi, p, status, ctype, body, len, NULL, NULL);
}

static int respond_text(struct lws *wsi, session *p, unsigned status, const char *text)
{
    return respond(wsi, p, status, "text/plain; charset=utf-8", strdup(text), strlen(text));
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0, r;
    do {
        if (n == cap) {
            char *b = realloc(buf, cap = cap ? 2 * cap : 65536);
            if (!b) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = b;
        }
        r = fread(buf + n, 1, cap - n, f);
        n += r;
    } while (r > 0);
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

static int serve_metrics(server *s, struct lws *wsi, session *p)
{
    tl_daemon *d = s->d;
    scan_view v;
    read_scan(d, &v, true);
    tl_metrics_state m = {
        .version = PACKAGE_VERSION,
        .uptime_s = (tl_clock_ns() - d->started_ns) / 1e9,
        .scan_open = v.open,
        .finished = v.finished,
        .series = v.series,
        .backend = v.backend,
        .device = v.device,
        .kernel = s->kernel ? s->kernel : "",
        .window = v.window,
        .held = v.held,
        .missing = v.missing,
        .memory_bytes = v.memory_bytes,
        .center = v.center,
        .queue_depth = tl_queue_depth(&d->queue),
        .queue_capacity = d->queue.cap,
        .queue_high = tl_queue_high(&d->queue),
        .subscriptions = tl_subs_count(&d->pub.subs),
        .preview_clients = s->nclients,
        .preview_sent = s->sent,
        .preview_dropped = s->dropped,
        .http_ok = s->http_ok,
        .http_errors = s->http_errors,
        .http_unrouted = s->http_unrouted,
        .http_refused_origin = s->refused_origin,
        .http_refused_token = s->refused_token,
    };
    pthread_mutex_lock(&d->lock); /* as status counts them */
    m.slices_defined = d->slices.n;
    for (int i = 0; i < d->slices.n; i++)
        m.slices_wanted +=
            d->slices.v[i].pinned ||
            tl_publisher_wanted(&d->pub, d->slices.v[i].topic, d->slices.v[i].topic_len);
    pthread_mutex_unlock(&d->lock);
    size_t buffers, buffer_bytes, heap_in_use, heap_free;
    tl_bufpool_usage(&d->pub.pool, &buffers, &buffer_bytes);
    tl_heap_usage(&heap_in_use, &heap_free);
    m.slice_buffers = buffers;
    m.slice_buffer_bytes = buffer_bytes;
    m.heap_in_use = heap_in_use;
    m.heap_free = heap_free;
    m.heap_trims = d->heap.trims;
    size_t cap = 16384;
    for (;;) {
        char *buf = malloc(cap);
        if (!buf)
            return -1;
        size_t n = tl_metrics_write(buf, cap, &d->stats, &m);
        if (n < cap)
            return respond(wsi, p, HTTP_STATUS_OK, "text/plain; version=0.0.4; charset=utf-8", buf,
                           n);
        free(buf);
        cap = n + 1;
    }
}

static int serve_status(server *s, struct lws *wsi, session *p)
{
    char err[300];
    json_t *r = run_command(s, "status", NULL, err, sizeof err);
    if (!r) {
        char msg[400];
        snprintf(msg, sizeof msg, "status failed: %s\n", err);
        return respond_text(wsi, p, HTTP_STATUS_INTERNAL_SERVER_ERROR, msg);
    }
    const tl_settings *c = &s->d->cfg;
    json_object_set_new(
        r, "http",
        json_pack("{s:s, s:b, s:s, s:s, s:s, s:i, s:i, s:{s:I, s:I}, s:{s:I, s:I, s:I}}",
                  "listen", s->listen, "tls", s->tls, "views",
                  c->http_open_views ? "open" : "token", "actions", s->token_len ? "token" : "off",
                  "origins", c->http_origins[0] ? c->http_origins : "self", "pages", s->nclients,
                  "connections", s->nconn, "refused", "origin", (json_int_t)s->refused_origin,
                  "token", (json_int_t)s->refused_token, "requests", "ok",
                  (json_int_t)s->http_ok, "error", (json_int_t)s->http_errors, "unrouted",
                  (json_int_t)s->http_unrouted));
    char *t = json_dumps(r, JSON_INDENT(2));
    json_decref(r);
    if (!t)
        return -1;
    size_t n = strlen(t);
    char *body = realloc(t, n + 2);
    if (!body) {
        free(t);
        return -1;
    }
    body[n++] = '\n';
    body[n] = 0;
    return respond(wsi, p, HTTP_STATUS_OK, "application/json", body, n);
}

static int http_writeable(struct lws *wsi, session *p);

/* Whether the request says a body follows (we read none). */
static bool has_body(struct lws *wsi)
{
    char cl[32];
    if (lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_TRANSFER_ENCODING) > 0)
        return true;
    if (lws_hdr_copy(wsi, cl, sizeof cl, WSI_TOKEN_HTTP_CONTENT_LENGTH) <= 0)
        return lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH) > 0; /* too long */
    return strspn(cl, " 0") != strlen(cl);
}

/* Answers a request we do not serve: 405 for a method other than GET and HEAD, 413 for a
 * body. A request with a body is answered at once and its connection closed here (the
 * callback returns -1), before libwebsockets reads the body: once LWS_CALLBACK_HTTP returns,
 * libwebsockets 4.1 (and its master today) can loop forever in lws_http_action on a body it
 * has buffered, and the daemon's loop would stall (found by tests/fuzz/fuzz_http.c). */
static int refuse(struct lws *wsi, session *p, bool method_ok, bool body)
{
    static const char why_method[] = "only GET and HEAD are served\n";
    static const char why_body[] = "requests with a body are not served\n";
    const char *why = method_ok ? why_body : why_method;
    tl_log(TL_LOG_DEBUG, "http_refused", "reason=%s",
           tl_logq(method_ok ? "request body" : "method"));
    int rc =
        respond_with(wsi, p,
                     method_ok ? HTTP_STATUS_REQ_ENTITY_TOO_LARGE : HTTP_STATUS_METHOD_NOT_ALLOWED,
                     "text/plain; charset=utf-8", strdup(why), strlen(why),
                     method_ok ? NULL : "allow:", "GET, HEAD");
    if (rc != 0 || !body)
        return rc;
    http_writeable(wsi, p); /* the text now (a few bytes) */
    return -1;
}

static int serve_http(server *s, struct lws *wsi, session *p, const char *path)
{
    p->head = lws_hdr_total_length(wsi, WSI_TOKEN_HEAD_URI) > 0;
    bool with_body = has_body(wsi);
    bool method_ok = p->head || lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) > 0;
    if (!method_ok || with_body)
        return refuse(wsi, p, method_ok, with_body);
    if (!origin_ok(s, wsi, path))
        return respond_text(wsi, p, HTTP_STATUS_FORBIDDEN,
                            "requests from this origin are refused (http.origins)\n");
    const char *file;
    tl_http_route route = tl_http_route_path(path, &file);
    if ((route == TL_ROUTE_METRICS || route == TL_ROUTE_STATUS) && !views_ok(s, wsi, path)) {
        static const char why[] = "the operator token is needed (Authorization: Bearer TOKEN)\n";
        return respond_with(wsi, p, HTTP_STATUS_UNAUTHORIZED, "text/plain; charset=utf-8",
                            strdup(why), strlen(why), "www-authenticate:",
                            "Bearer realm=\"tomolive\"");
    }
    switch (route) {
        case TL_ROUTE_METRICS: return serve_metrics(s, wsi, p);
        case TL_ROUTE_STATUS: return serve_status(s, wsi, p);
        case TL_ROUTE_WS:
            return respond_text(wsi, p, HTTP_STATUS_BAD_REQUEST,
                                "a WebSocket endpoint (subprotocol " WS_PROTOCOL ")\n");
        case TL_ROUTE_FILE: {
            char full[sizeof s->root + 80];
            size_t n;
            int k = snprintf(full, sizeof full, "%s/%s", s->root, file);
            char *body = k > 0 && (size_t)k < sizeof full ? read_file(full, &n) : NULL;
            if (body) /* small files of the page, from the page cache */
                return respond(wsi, p, HTTP_STATUS_OK, tl_http_mime(file), body, n);
            break;
        }
        case TL_ROUTE_NOT_FOUND: break;
    }
    return respond_text(wsi, p, HTTP_STATUS_NOT_FOUND, "not found\n");
}

/* Writes the body of the answer, a chunk per call. Once the answer is out the connection
 * closes (the callback's -1), so every connection carries one request (connection: close):
 * libwebsockets 4.1 mishandles the next request of a kept-alive connection in two ways that
 * tests/fuzz/fuzz_http.c found. A body behind a pipelined request loops the daemon's loop
 * forever, and a request without a URI after a completed one is read from a header table
 * already freed (use after free). The page is three files and a WebSocket, Prometheus
 * scrapes once per interval: a connection per request costs nothing that matters here. */
static int http_writeable(struct lws *wsi, session *p)
{
    if (p->head) { /* the headers were the answer */
        p->head = false;
        return -1;
    }
    if (!p->body)
        return 0;
    uint8_t buf[LWS_PRE + CHUNK];
    size_t n = p->len - p->off < CHUNK ? p->len - p->off : CHUNK;
    memcpy(buf + LWS_PRE, p->body + p->off, n);
    p->off += n;
    bool last = p->off == p->len;
    if (lws_write(wsi, buf + LWS_PRE, n, last ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP) != (int)n)
        return -1;
    if (!last) {
        lws_callback_on_writable(wsi);
        return 0;
    }
    free(p->body);
    p->body = NULL;
    return -1;
}

/* ---- the libwebsockets callback ---------------------------------------------------------- */

/* A connection that libwebsockets turned away before routing it (a bare connect and close,
 * a TLS hello, an unknown method, a request line or headers it cannot parse or that exceed
 * its limits) never gets per-session data: callbacks about it (CLOSED_HTTP, HTTP_DROP_
 * PROTOCOL, WSI_DESTROY, ...) come with user == NULL. Anything can connect to the port, so
 * every reason that touches a session checks for that first; what is not ours goes to
 * libwebsockets' default handler, as its documentation asks. */
static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len)
{
    server *s = &srv;
    session *p = user;
    switch (reason) {
        case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION: { /* reads headers only */
            char uri[64];
            const char *f;
            if (lws_hdr_copy(wsi, uri, sizeof uri, WSI_TOKEN_GET_URI) <= 0 ||
                tl_http_route_path(uri, &f) != TL_ROUTE_WS || !s->running ||
                s->nconn >= MAX_CLIENTS || !origin_ok(s, wsi, "websocket"))
                return 1; /* refused: libwebsockets drops the connection */
            break;
        }
        case LWS_CALLBACK_HTTP:
            if (!p) { /* not expected: a request is always bound; answer without a session */
                lws_return_http_status(wsi, HTTP_STATUS_INTERNAL_SERVER_ERROR, NULL);
                return -1;
            }
            return serve_http(s, wsi, p, in ? (const char *)in : "");
        case LWS_CALLBACK_HTTP_WRITEABLE: return p ? http_writeable(wsi, p) : 0;
        case LWS_CALLBACK_HTTP_BODY:
        case LWS_CALLBACK_HTTP_BODY_COMPLETION:
            /* Only "POST ... Content-Length: 0" gets here (a body is refused first): ours, not
         * the default handler's, which would complete the transaction before the 405 is
         * written. The connection closes after its last write. */
            return 0;
        case LWS_CALLBACK_CLOSED_HTTP:
            if (!p)
                s->http_unrouted++;
            /* fall through */
        case LWS_CALLBACK_HTTP_DROP_PROTOCOL: /* the transaction is over: its body goes */
            if (p) {
                free(p->body);
                p->body = NULL;
                p->head = false;
            }
            break;
        case LWS_CALLBACK_ESTABLISHED:
            if (!p)
                return -1;
            p->c = client_open(s, wsi);
            return p->c ? 0 : -1;
        case LWS_CALLBACK_CLOSED:
            if (p && p->c)
                client_close(s, p->c);
            if (p)
                p->c = NULL;
            break;
        case LWS_CALLBACK_SERVER_WRITEABLE: return p && p->c ? write_next(s, p->c) : 0;
        case LWS_CALLBACK_RECEIVE: {
            client *c = p ? p->c : NULL;
            if (!c)
                break;
            if (lws_frame_is_binary(wsi) || c->rxlen + len > sizeof c->rx)
                c->rx_bad = true;
            else {
                memcpy(c->rx + c->rxlen, in, len);
                c->rxlen += len;
            }
            if (lws_is_final_fragment(wsi) && lws_remaining_packet_payload(wsi) == 0) {
                if (!c->rx_bad && s->running)
                    handle_message(s, c, c->rx, c->rxlen);
                c->rxlen = 0;
                c->rx_bad = false;
            }
            break;
        }
        default: break;
    }
    return lws_callback_http_dummy(wsi, reason, user, in, len);
}

static const struct lws_protocols protocols[] = {
    {"http", callback, sizeof(session), 0, 0, NULL, 0},
    {WS_PROTOCOL, callback, sizeof(session), RX_MAX, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

/* ---- start and stop ---------------------------------------------------------------------- */

/* Why the port could not be bound, for the start-up error: libwebsockets only logs it. */
static const char *bind_error(const char *host, int port)
{
    struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICHOST, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    if (getaddrinfo(*host ? host : NULL, ps, &hints, &ai) != 0 || !ai)
        return "not an address of this host";
    int fd = socket(ai->ai_family, SOCK_STREAM, 0), one = 1, e = 0;
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0)
            e = errno;
        close(fd);
    }
    freeaddrinfo(ai);
    return e ? strerror(e) : "libwebsockets could not listen there";
}

/* Where the page is when http.root is empty: the source tree's for the daemon of the build
 * tree (so `./bootstrap demo`, and any daemon run before `make install`, serves the page
 * it was built with), else the installed one. The running executable says which. */
static const char *default_root(void)
{
    char self[PATH_MAX], build[PATH_MAX];
    if (realpath("/proc/self/exe", self) && realpath(TL_BUILD_EXE, build) &&
        strcmp(self, build) == 0)
        return TL_SOURCE_WWW_DIR;
    return TL_WWW_DIR;
}

int tl_http_start(tl_daemon *d, char *err, size_t errlen)
{
    server *s = &srv;
    memset(s, 0, sizeof *s);
    s->d = d;
    const tl_settings *c = &d->cfg;
    if (!c->http_listen[0]) {
        tl_log(TL_LOG_INFO, "http_disabled", "reason=%s", tl_logq("http.listen is empty"));
        return 0;
    }
    char *host = s->host;
    int port;
    if (tl_http_parse_listen(c->http_listen, host, sizeof s->host, &port) != 0) {
        snprintf(err, errlen, "http.listen \"%s\" is not HOST:PORT", c->http_listen);
        return -1;
    }
    snprintf(s->listen, sizeof s->listen, "%s", c->http_listen);
    if (c->http_token_file[0] && load_token(s, c->http_token_file, err, errlen) != 0)
        return -1;
    for (int i = 0; c->http_tls_cert[0] && i < 2; i++) { /* libwebsockets would only log it */
        const char *path = i ? c->http_tls_key : c->http_tls_cert;
        FILE *f = fopen(path, "r");
        if (!f) {
            snprintf(err, errlen, "http.%s %s: cannot read: %s", i ? "tls_key" : "tls_cert", path,
                     strerror(errno));
            return -1;
        }
        fclose(f);
    }
    s->tls = c->http_tls_cert[0] != 0;
    snprintf(s->root, sizeof s->root, "%s", c->http_root[0] ? c->http_root : default_root());
    s->req_dec = tl_proto_decoder_new();
    s->rep_dec = tl_proto_decoder_new();
    if (!s->req_dec || !s->rep_dec) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    msgpack_sbuffer_init(&s->req);
    msgpack_sbuffer_init(&s->rep);

    lws_set_log_level(LLL_ERR | LLL_WARN, lws_emit);
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    void *loops[1] = {&d->loop};
    info.port = port;
    info.iface = *host ? host : NULL;
    info.protocols = protocols;
    info.options = LWS_SERVER_OPTION_LIBUV | LWS_SERVER_OPTION_UV_NO_SIGSEGV_SIGFPE_SPIN |
                   LWS_SERVER_OPTION_EXPLICIT_VHOSTS;
    /* libwebsockets 4.1 makes an IPv6 socket when it can and reads an IPv4 address given as
     * iface into the IPv4 form it does not bind then: 127.0.0.1 listened on [::], every
     * interface. An IPv4 address gets an IPv4 socket. */
    struct in_addr v4;
    if (*host && inet_pton(AF_INET, host, &v4) == 1)
        info.options |= LWS_SERVER_OPTION_DISABLE_IPV6;
    info.foreign_loops = loops;
    info.pcontext = &s->ctx;
    info.gid = -1;
    info.uid = -1;
    if (s->tls) {
        info.options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
        info.ssl_cert_filepath = c->http_tls_cert;
        info.ssl_private_key_filepath = c->http_tls_key;
    }
    s->ctx = lws_create_context(&info);
    if (!s->ctx) {
        snprintf(err, errlen,
                 "http: libwebsockets cannot run on the libuv loop (is the "
                 "libwebsockets-evlib-uv plugin installed?)");
        return -1;
    }
    s->vh = lws_create_vhost(s->ctx, &info);
    if (!s->vh) {
        const char *why = bind_error(host, port);
        if (s->tls && strcmp(why, "libwebsockets could not listen there") == 0)
            snprintf(err, errlen,
                     "http: TLS cannot start with http.tls_cert %s and http.tls_key %s (are "
                     "they PEM, and the key the certificate's?)",
                     c->http_tls_cert, c->http_tls_key);
        else
            snprintf(err, errlen, "http.listen %s: cannot listen: %s", c->http_listen, why);
        lws_context_destroy(s->ctx); /* its handles close as the loop runs (or not: we exit) */
        return -1;
    }
    if (tl_publisher_add_tap(&d->pub, on_slice, s) != 0) {
        snprintf(err, errlen, "http: the publisher has no room for another tap");
        return -1;
    }
    uv_timer_init(&d->loop, &s->timer);
    s->timer.data = s;
    uv_timer_start(&s->timer, on_tick, TICK_MS, TICK_MS);
    s->running = true;
    char index[sizeof s->root + 16];
    int n = snprintf(index, sizeof index, "%s/index.html", s->root);
    if (n < 0 || (size_t)n >= sizeof index || access(index, R_OK) != 0)
        tl_log(TL_LOG_WARN, "http_page_missing", "path=%s error=%s", tl_logq(index),
               tl_logq(strerror(errno)));
    tl_log(TL_LOG_INFO, "http_started", "listen=%s port=%d root=%s tls=%s views=%s actions=%s",
           tl_logq(c->http_listen), lws_get_vhost_listen_port(s->vh), tl_logq(s->root),
           s->tls ? "yes" : "no", c->http_open_views ? "open" : "token",
           s->token_len ? "token" : "off");
    if (!s->token_len)
        tl_log(TL_LOG_WARN, "http_no_token", "hint=%s",
               tl_logq(c->http_open_views
                           ? "no http.token_file: the page shows the views but takes no actions"
                           : "no http.token_file: the page shows nothing and takes no actions "
                             "(set http.token_file, or http.open_views = true)"));
    return 0;
}

void tl_http_stop(tl_daemon *d)
{
    server *s = &srv;
    if (!s->running)
        return;
    s->running = false;
    tl_publisher_remove_tap(&d->pub, on_slice, s);
    uv_timer_stop(&s->timer);
    uv_close((uv_handle_t *)&s->timer, NULL);
    lws_context_destroy(s->ctx); /* closes every connection (their callbacks free the pages) */
    free(s->small);
    free(s->enc[0]);
    free(s->enc[1]);
    free(s->state_text);
    s->small = NULL;
    s->enc[0] = s->enc[1] = NULL;
    s->state_text = NULL;
    tl_proto_decoder_free(s->req_dec);
    tl_proto_decoder_free(s->rep_dec);
    s->req_dec = s->rep_dec = NULL;
    msgpack_sbuffer_destroy(&s->req);
    msgpack_sbuffer_destroy(&s->rep);
    explicit_bzero(s->token, sizeof s->token);
    s->token_len = 0;
    tl_log(TL_LOG_INFO, "http_stopped", "previews_sent=%llu dropped=%llu",
           (unsigned long long)s->sent, (unsigned long long)s->dropped);
}
