/* settings.c — see settings.h. One table of keys drives defaults, parsing, writing and
 * diffing; libinih splits the file into (section, key, value), and a reader that we hand
 * to ini_parse_stream counts lines, so that every error names its line. */
#include <config.h>

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>

#include <ini.h>

#include "daemon/base/settings.h"
#include "daemon/base/log.h"

typedef enum {
    K_STRING,
    K_LISTEN,
    K_BOOL,
    K_INT,
    K_DOUBLE,
    K_ENUM,
    K_ENDPOINT_OPT,
    K_TEXT,
    K_PATH,
    K_ORIGINS
} ktype;
/* K_STRING: an endpoint; K_LISTEN: HOST:PORT or empty; K_ENDPOINT_OPT: an endpoint or empty;
 * K_TEXT: a word or comma-separated words of [A-Za-z0-9_.-], or empty;
 * K_PATH: an absolute path, or empty; K_ORIGINS: http(s)://HOST[:PORT] separated by commas */

typedef struct {
    const char *section, *name, *dotted;
    ktype type;
    size_t off, size;
    double min, max;          /* K_INT, K_DOUBLE */
    const char *const *names; /* K_ENUM, NULL-terminated */
    const char *def;          /* the default, as written in the file */
    bool reloadable;
    const char *help; /* one line */
} key;

static const char *const log_level_names[] = {"error", "warn", "info", "debug", NULL};
static const char *const backend_names[] = {"auto", "cpu", "cuda", NULL};
static const char *const filter_names[] = {"ram-lak", "shepp-logan", "cosine", "hamming",
                                           "hann",    "parzen",      NULL};
static const char *const quality_names[] = {"exact", "fast", "preview", NULL};
static const char *const weights_names[] = {"uniform", "angles", NULL};
static const char *const overflow_names[] = {"block", "drop", NULL};
static const char *const tune_names[] = {"auto", "cached", "off", NULL};
/* engine.tune_batch: the value is the index, tl_settings_tune_batch gives the number */
static const char *const tune_batch_names[] = {"1", "2", "4", NULL};
/* ingest.format: the adapters of daemon/adapter.h, by name */
static const char *const format_names[] = {"tomolive", "dectris-v2", "dectris-v1",  "std-daq",
                                           "concert",  "array-1.0",  "tomopackets", NULL};

/* daemon.log_level is handed to tl_log_set_level as it is. */
_Static_assert(TL_LOG_ERROR == 0 && TL_LOG_WARN == 1 && TL_LOG_INFO == 2 && TL_LOG_DEBUG == 3,
               "log levels must follow log_level_names");

#define F(m) offsetof(tl_settings, m), sizeof(((tl_settings *)0)->m)
#define K(sec, nm) sec, nm, sec "." nm
#define RELOAD true
#define RESTART false

/* Sections appear in the file, and keys within them, in this order. */
static const key keys[] = {
    {K("daemon", "log_level"), K_ENUM, F(log_level), 0, 0, log_level_names, "info", RELOAD,
     "Least severe level logged to stderr (the journal under systemd)."},
    {K("daemon", "backend"), K_ENUM, F(backend), 0, 0, backend_names, "auto", RESTART,
     "Reconstruction backend; auto takes cuda when a usable GPU is found, else cpu."},
    {K("daemon", "device"), K_INT, F(device), 0, 63, NULL, "0", RESTART,
     "CUDA device ordinal, among the devices that CUDA_VISIBLE_DEVICES leaves visible."},
    {K("daemon", "gpus"), K_TEXT, F(gpus), 0, 0, NULL, "", RESTART,
     "GPUs to split the detector rows across: all, or ordinals 0,1,...; empty uses daemon.device "
     "only."},
    {K("daemon", "threads"), K_INT, F(threads), 0, 1024, NULL, "0", RESTART,
     "Worker threads of the cpu backend; 0 uses every core."},
    {K("daemon", "status_interval"), K_DOUBLE, F(status_interval), 0.1, 3600, NULL, "5", RELOAD,
     "Seconds between systemd STATUS= updates and between periodic status log lines."},

    {K("ingest", "endpoint"), K_STRING, F(ingest_endpoint), 0, 0, NULL, "tcp://*:5600", RESTART,
     "ZeroMQ endpoint of the PULL socket that receives scans and frames."},
    {K("ingest", "format"), K_ENUM, F(ingest_format), 0, 0, format_names, "tomolive", RESTART,
     "Stream format of the ingest socket (the tomolive protocol, or a detector's: see README)."},
    {K("ingest", "bind"), K_BOOL, F(ingest_bind), 0, 0, NULL, "true", RESTART,
     "true: bind the endpoint (senders connect); false: connect to it (e.g. a detector's PUSH)."},
    {K("ingest", "rcvhwm"), K_INT, F(ingest_rcvhwm), 1, 1000000, NULL, "1000", RESTART,
     "Receive high-water mark of the ingest socket (ZMQ_RCVHWM), in messages."},
    {K("ingest", "queue"), K_INT, F(ingest_queue), 1, 65536, NULL, "64", RESTART,
     "Messages buffered between the ingest thread and the engine (frames, or row bands of "
     "frames)."},
    {K("ingest", "overflow"), K_ENUM, F(ingest_overflow), 0, 0, overflow_names, "block", RELOAD,
     "When the queue is full: block (senders wait, nothing is lost) or drop (count and discard)."},
    {K("ingest", "io_threads"), K_INT, F(io_threads), 1, 64, NULL, "2", RESTART,
     "ZeroMQ I/O threads, shared by all sockets (ZMQ_IO_THREADS)."},
    {K("ingest", "band_frames"), K_INT, F(ingest_band_frames), 1, 256, NULL, "16", RESTART,
     "Frames sent in row bands that may be in assembly at once (a page-locked frame buffer each); "
     "a new one drops the oldest. Cover the connections' lag: 16 is 32 ms at 500 frames/s."},
    {K("ingest", "band_timeout_ms"), K_INT, F(ingest_band_timeout_ms), 1, 600000, NULL, "1000",
     RELOAD, "A frame sent in row bands is dropped unless all its bands come within this."},
    {K("ingest", "window"), K_INT, F(ingest_window), 0, 1048576, NULL, "0", RESTART,
     "Projections in the window; 0: from the stream (DECTRIS number_of_images, tomopackets "
     "proj_count). std-daq, concert, array-1.0 need it."},
    {K("ingest", "angle_start"), K_DOUBLE, F(ingest_angle_start), -1e6, 1e6, NULL, "0", RESTART,
     "Angle in degrees of projection index 0, for streams that carry no angles."},
    {K("ingest", "angle_step"), K_DOUBLE, F(ingest_angle_step), -1e6, 1e6, NULL, "0", RESTART,
     "Degrees between projection indices, for streams without angles; 0: 180 / window."},
    {K("ingest", "darks"), K_INT, F(ingest_darks), 0, 1048576, NULL, "0", RESTART,
     "Unlabelled frames at the start of a series that are darks (DECTRIS, concert, array-1.0)."},
    {K("ingest", "flats"), K_INT, F(ingest_flats), 0, 1048576, NULL, "0", RESTART,
     "Unlabelled frames after those darks that are flats; the frames after them are projections."},
    {K("ingest", "series_kinds"), K_TEXT, F(ingest_series_kinds), 0, 0, NULL, "proj", RESTART,
     "Kinds of successive DECTRIS series without user_data kind, cycled: e.g. dark,flat,proj."},
    {K("ingest", "goniometer_axis"), K_TEXT, F(ingest_goniometer_axis), 0, 0, NULL, "omega",
     RESTART, "DECTRIS goniometer axis whose start and increment give the projection angles."},
    {K("ingest", "channel"), K_TEXT, F(ingest_channel), 0, 0, NULL, "", RESTART,
     "DECTRIS Stream V2 channel (threshold) to reconstruct, its pixel mask applied; empty: the "
     "first."},
    {K("ingest", "max_frame_mb"), K_INT, F(ingest_max_frame_mb), 1, 16384, NULL, "1024", RESTART,
     "Largest decoded frame in MiB; larger declared shapes are refused before decoding."},

    {K("control", "endpoint"), K_STRING, F(control_endpoint), 0, 0, NULL, "tcp://127.0.0.1:5601",
     RESTART,
     "ZeroMQ endpoint of the ROUTER socket that answers control requests (bound); loopback "
     "unless set (e.g. tcp://*:5601, with [security] curve on)."},

    {K("slices", "endpoint"), K_STRING, F(slices_endpoint), 0, 0, NULL, "tcp://*:5602", RESTART,
     "ZeroMQ endpoint of the XPUB socket that publishes slices (bound)."},
    {K("slices", "sndhwm"), K_INT, F(slices_sndhwm), 1, 100000, NULL, "4", RESTART,
     "Messages queued per subscriber (ZMQ_SNDHWM); beyond them, slices wait in the daemon, the "
     "newest of each."},
    {K("slices", "stall_ms"), K_INT, F(slices_stall_ms), 1, 600000, NULL, "500", RESTART,
     "How long slices wait for a subscriber whose queue is full before it is taken as stalled and "
     "the others are served without it."},
    {K("slices", "max"), K_INT, F(slices_max), 1, 4096, NULL, "64", RESTART,
     "Most slices reconstructed at once (subscribed or pinned)."},
    {K("slices", "shm"), K_TEXT, F(slices_shm), 0, 0, NULL, "", RESTART,
     "Name prefix of shared memory through which subscribers on this host take slices (topic "
     "shm/<id>/); empty: off."},
    {K("slices", "shm_slots"), K_INT, F(slices_shm_slots), 2, 64, NULL, "4", RESTART,
     "Shared-memory slots per slice: a local subscriber may fall this many publications minus one "
     "behind."},
    {K("slices", "incremental"), K_BOOL, F(slices_incremental), 0, 0, NULL, "true", RELOAD,
     "Update watched slices per projection (add the new, subtract the old) instead of from "
     "scratch."},
    {K("slices", "update_every"), K_INT, F(update_every), 1, 1000000, NULL, "1", RELOAD,
     "Default update policy: publish a slice after every K new projections."},
    {K("slices", "update_on_complete"), K_BOOL, F(update_on_complete), 0, 0, NULL, "true", RELOAD,
     "Default update policy: also publish when the window becomes complete."},
    {K("slices", "update_max_rate"), K_DOUBLE, F(update_max_rate), 0.01, 1000, NULL, "10", RELOAD,
     "Default update policy: most publications per second of one slice, in Hz."},

    {K("engine", "filter"), K_ENUM, F(filter), 0, 0, filter_names, "ram-lak", RELOAD,
     "Filter of filtered back projection; a change applies from the next scan."},
    {K("engine", "iterative"), K_BOOL, F(engine_iterative), 0, 0, NULL, "false", RELOAD,
     "Keep each projection also unfiltered (twice the window's memory), so that slices can be "
     "iterative (set_slice method; cone beam: stacks of planes); next scan."},
    {K("engine", "quality"), K_ENUM, F(quality), 0, 0, quality_names, "exact", RELOAD,
     "Accuracy the back-projection kernels must meet; a change applies from the next scan."},
    {K("engine", "weights"), K_ENUM, F(weights), 0, 0, weights_names, "uniform", RELOAD,
     "Angular weights: pi/N each (uniform), or each angle's share of the range; next scan."},
    {K("engine", "tune"), K_ENUM, F(tune), 0, 0, tune_names, "auto", RELOAD,
     "Kernels per slice size: auto uses the cached choice, else times the kernels beside the "
     "scan (the built-in rule serves until then) and caches it; cached: cache only; off: "
     "built-in rule."},
    {K("engine", "tune_cache"), K_PATH, F(tune_cache), 0, 0, NULL, "", RELOAD,
     "Cache of kernel timings (by GPU, driver, shape); empty: $TOMOLIVE_TUNE_CACHE, else "
     "$XDG_CACHE_HOME/tomolive/tune.json, else ~/.cache/tomolive/tune.json."},
    {K("engine", "tune_budget"), K_DOUBLE, F(tune_budget), 1, 120, NULL, "15", RELOAD,
     "Seconds that timing the kernels for one slice size aims to take (auto tuning and the tune "
     "command)."},
    {K("engine", "tune_batch"), K_ENUM, F(tune_batch), 0, 0, tune_batch_names, "4", RELOAD,
     "Most horizontal slices reconstructed together that the tuner times for throughput (at most "
     "the detector rows)."},
    {K("engine", "tune_one_kernel"), K_BOOL, F(tune_one_kernel), 0, 0, NULL, "false", RELOAD,
     "Time and cache a slice size even where the backend has one kernel for the quality, which "
     "serves it either way (for its timings, tests); false: served at once, source only."},
    {K("http", "listen"), K_LISTEN, F(http_listen), 0, 0, NULL, "127.0.0.1:8600", RESTART,
     "HOST:PORT of the HTTP server (preview page, /metrics, /api/status); *:8600 for every "
     "interface; empty: no server."},
    {K("http", "preview_size"), K_INT, F(http_preview_size), 64, 4096, NULL, "512", RELOAD,
     "Largest side, in pixels, of the slices sent to preview pages (downsampled to fit)."},
    {K("http", "root"), K_PATH, F(http_root), 0, 0, NULL, "", RESTART,
     "Directory of the preview page (index.html, app.js, style.css); empty: the installed one "
     "(the source tree's for a tomolived run from its build tree)."},
    {K("http", "origins"), K_ORIGINS, F(http_origins), 0, 0, NULL, "", RELOAD,
     "Origins whose pages may open the WebSocket (e.g. https://beamline.example:8600); empty: "
     "only the daemon's own page."},
    {K("http", "token_file"), K_PATH, F(http_token_file), 0, 0, NULL, "", RESTART,
     "File holding the operator token (its first line, 16 characters or more) that the page's "
     "actions need; empty: the page takes no actions."},
    {K("http", "open_views"), K_BOOL, F(http_open_views), 0, 0, NULL, "false", RELOAD,
     "true: the images, /api/status and /metrics need no token; false: they need it too."},
    {K("http", "tls_cert"), K_PATH, F(http_tls_cert), 0, 0, NULL, "", RESTART,
     "PEM certificate (chain) to serve HTTPS and WSS with, with tls_key; empty: plain HTTP."},
    {K("http", "tls_key"), K_PATH, F(http_tls_key), 0, 0, NULL, "", RESTART,
     "PEM private key of tls_cert."},

    {K("recast3d", "server"), K_ENDPOINT_OPT, F(recast3d_server), 0, 0, NULL, "", RESTART,
     "RECAST3D's request socket (e.g. tcp://viewer:5555) to show slices in; empty: off."},
    {K("recast3d", "subscribe"), K_ENDPOINT_OPT, F(recast3d_subscribe), 0, 0, NULL, "", RESTART,
     "RECAST3D's publisher socket (e.g. tcp://viewer:5556) for its slice requests."},
    {K("recast3d", "scene"), K_TEXT, F(recast3d_scene), 0, 0, NULL, "tomolive", RESTART,
     "Name of the scene tomolive creates in RECAST3D."},
    {K("recast3d", "slice_size"), K_INT, F(recast3d_slice_size), 0, 8192, NULL, "0", RESTART,
     "Pixels per side of the slices sent to RECAST3D; 0: the detector width."},

    /* [security] (daemon/base/auth.c, daemon/ingest/release_allow.c) */
    {K("security", "curve"), K_BOOL, F(curve), 0, 0, NULL, "false", RESTART,
     "ZeroMQ CURVE on the ingest, control and slices sockets: only clients whose public key is "
     "in security.clients connect, each with its role (see README, Security)."},
    {K("security", "server_key"), K_PATH, F(server_key), 0, 0, NULL, "", RESTART,
     "The daemon's secret certificate (NAME.key_secret of tomolive keygen); clients need its "
     "public half, NAME.key."},
    {K("security", "clients"), K_PATH, F(clients_dir), 0, 0, NULL, "", RESTART,
     "Directory of the clients' public certificates (NAME.key, metadata role = ingest, viewer, "
     "operator or admin); read again on SIGHUP."},
    {K("security", "plain"), K_TEXT, F(plain), 0, 0, NULL, "", RESTART,
     "Sockets that stay plain TCP, without keys, while curve is on: any of ingest, control, "
     "slices (e.g. ingest, for a detector that cannot speak CURVE)."},
    {K("security", "release_hosts"), K_TEXT, F(release_hosts), 0, 0, NULL, "", RESTART,
     "Hosts, besides the scan's sender and loopback, that a scan's release endpoint (CUDA IPC "
     "frames) may name: addresses or names, as the endpoint writes them."},
};
#define NKEYS (sizeof keys / sizeof keys[0])

static const key *find_key(const char *section, const char *name)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (strcmp(keys[i].section, section) == 0 && strcmp(keys[i].name, name) == 0)
            return &keys[i];
    return NULL;
}

static const key *find_dotted(const char *dotted)
{
    for (size_t i = 0; dotted && i < NKEYS; i++)
        if (strcmp(keys[i].dotted, dotted) == 0)
            return &keys[i];
    return NULL;
}

static bool known_section(const char *section, size_t len)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (strlen(keys[i].section) == len && strncmp(keys[i].section, section, len) == 0)
            return true;
    return false;
}

static void *field(tl_settings *c, const key *k)
{
    return (char *)c + k->off;
}

static const void *cfield(const tl_settings *c, const key *k)
{
    return (const char *)c + k->off;
}

/* The two traps of the INI format that reach us as a bad value. */
static const char *value_hint(const char *v)
{
    if (strchr(v, '#'))
        return " ('#' starts a comment only at the beginning of a line; an inline comment "
               "starts at a ';' after a space)";
    if (v[0] == '"' || v[0] == '\'')
        return " (values are written without quotes)";
    return "";
}

int tl_settings_check_endpoint(const char *ep, char *err, size_t errlen)
{
    const char *why = NULL;
    for (const unsigned char *p = (const unsigned char *)ep; !why && *p; p++)
        if (isspace(*p) || iscntrl(*p))
            why = "it contains whitespace";
    if (why) {
    } else if (strncmp(ep, "tcp://", 6) == 0) {
        const char *host = ep + 6, *colon = strrchr(host, ':');
        if (!colon)
            why = "tcp needs HOST:PORT";
        else if (colon == host)
            why = "the host is empty (use '*' for every interface)";
        else if (strcmp(colon + 1, "*") != 0) {
            char *end;
            errno = 0;
            long port = strtol(colon + 1, &end, 10);
            if (!isdigit((unsigned char)colon[1]) || *end || errno || port < 1 || port > 65535)
                why = "the port must be 1..65535 or '*'";
        }
    } else if (strncmp(ep, "ipc://", 6) == 0) {
        size_t n = strlen(ep + 6), max = sizeof(((struct sockaddr_un *)0)->sun_path) - 1;
        if (n == 0)
            why = "the path is empty";
        else if (n > max)
            why = "the path is longer than a socket address holds (107 bytes)";
    } else if (strncmp(ep, "inproc://", 9) == 0) {
        if (!ep[9])
            why = "the name is empty";
    } else {
        why = "expected tcp://HOST:PORT, ipc://PATH or inproc://NAME";
    }
    if (!why)
        return 0;
    if (err && errlen)
        snprintf(err, errlen, "\"%s\" is not a ZeroMQ endpoint: %s%s", ep, why, value_hint(ep));
    return -1;
}

/* Parses v into k's field of c; on error writes "dotted: why" to msg. */

/* What every text value must be to survive being written out and read back (the writer
 * puts "key = value"): no control characters, and no ';' or '#' first, which inih would
 * then read as the start of a comment (found by the settings fuzz target: "listen =;x:80"
 * loaded as ";x:80" and came back empty). */
static int check_chars(const char *v, char *why, size_t n)
{
    for (const unsigned char *p = (const unsigned char *)v; *p; p++)
        if (*p < 0x20 || *p == 0x7f) {
            snprintf(why, n, "a control character (0x%02x) at offset %zu", *p,
                     (size_t)(p - (const unsigned char *)v));
            return -1;
        }
    if (*v == ';' || *v == '#') {
        snprintf(why, n, "\"%s\" starts with '%c', which reads as a comment", v, *v);
        return -1;
    }
    return 0;
}

/* HOST:PORT for a listening socket, or empty (off). */
static int check_listen(const char *v, char *why, size_t n)
{
    if (!*v)
        return 0;
    const char *colon = strrchr(v, ':');
    char *end;
    long port = colon ? strtol(colon + 1, &end, 10) : 0;
    if (!colon || colon == v || !colon[1] || *end || port < 1 || port > 65535 ||
        strpbrk(v, " \t/")) {
        snprintf(why, n, "\"%s\" is not HOST:PORT (e.g. *:8600, 127.0.0.1:8600) or empty", v);
        return -1;
    }
    return 0;
}

/* Words of [A-Za-z0-9_.-] separated by commas, or empty. */
static int check_text(const char *v, char *why, size_t n)
{
    for (const char *p = v; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("_.-,", *p)) {
            snprintf(why, n, "\"%s\": only letters, digits, '_', '.', '-' and ',' are allowed%s",
                     v, value_hint(v));
            return -1;
        }
    return 0;
}

/* An absolute path without control characters, or empty. */
static int check_path(const char *v, char *why, size_t n)
{
    for (const char *p = v; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            snprintf(why, n, "the path has a control character");
            return -1;
        }
    if (*v && *v != '/') {
        snprintf(why, n, "\"%s\" is not an absolute path", v);
        return -1;
    }
    return 0;
}

/* Origins of web pages, http(s)://HOST[:PORT] (no path), separated by commas, or empty. */
static int check_origins(const char *v, char *why, size_t n)
{
    for (const char *p = v; *p;) {
        size_t len = strcspn(p, ","), scheme = strncmp(p, "http://", 7) == 0    ? 7
                                               : strncmp(p, "https://", 8) == 0 ? 8
                                                                                : 0;
        if (!scheme || len == scheme ||
            strspn(p + scheme, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                               "0123456789.-:[]") < len - scheme) {
            snprintf(why, n,
                     "\"%.*s\" is not an origin: http://HOST[:PORT] or https://HOST[:PORT], "
                     "without a path, separated by commas without spaces",
                     (int)len, p);
            return -1;
        }
        p += len + (p[len] == ',');
    }
    return 0;
}

static int parse_value(const key *k, const char *v, tl_settings *c, char *msg, size_t n)
{
    switch (k->type) {
        case K_STRING:
        case K_LISTEN:
        case K_ENDPOINT_OPT:
        case K_TEXT:
        case K_PATH:
        case K_ORIGINS: {
            char why[512];
            if (strlen(v) >= k->size) {
                snprintf(msg, n, "%s: longer than %zu characters", k->dotted, k->size - 1);
                return -1;
            }
            int bad = check_chars(v, why, sizeof why) != 0 ? -1
                      : k->type == K_STRING  ? tl_settings_check_endpoint(v, why, sizeof why)
                      : k->type == K_LISTEN  ? check_listen(v, why, sizeof why)
                      : k->type == K_TEXT    ? check_text(v, why, sizeof why)
                      : k->type == K_PATH    ? check_path(v, why, sizeof why)
                      : k->type == K_ORIGINS ? check_origins(v, why, sizeof why)
                      : *v                   ? tl_settings_check_endpoint(v, why, sizeof why)
                                             : 0;
            if (bad < 0) {
                snprintf(msg, n, "%s: %s", k->dotted, why);
                return -1;
            }
            memcpy(field(c, k), v, strlen(v) + 1);
            return 0;
        }
        case K_BOOL: {
            static const char *const yes[] = {"true", "yes", "on", "1"};
            static const char *const no[] = {"false", "no", "off", "0"};
            for (int i = 0; i < 4; i++) {
                if (strcasecmp(v, yes[i]) == 0 || strcasecmp(v, no[i]) == 0) {
                    *(bool *)field(c, k) = strcasecmp(v, yes[i]) == 0;
                    return 0;
                }
            }
            snprintf(msg, n, "%s: \"%s\" is not a boolean (true or false)%s", k->dotted, v,
                     value_hint(v));
            return -1;
        }
        case K_INT: {
            char *end;
            errno = 0;
            long x = strtol(v, &end, 10);
            if (!*v || *end || end == v) {
                snprintf(msg, n, "%s: \"%s\" is not an integer%s", k->dotted, v, value_hint(v));
                return -1;
            }
            if (errno == ERANGE || x < (long)k->min || x > (long)k->max) {
                snprintf(msg, n, "%s: %s is out of range %.0f..%.0f", k->dotted, v, k->min,
                         k->max);
                return -1;
            }
            *(int *)field(c, k) = (int)x;
            return 0;
        }
        case K_DOUBLE: {
            /* strtod follows LC_NUMERIC: the daemon must not setlocale(LC_NUMERIC) away from "C" */
            char *end;
            double x = strtod(v, &end);
            if (!*v || *end || end == v || !isfinite(x)) {
                snprintf(msg, n, "%s: \"%s\" is not a number%s", k->dotted, v, value_hint(v));
                return -1;
            }
            if (x < k->min || x > k->max) {
                snprintf(msg, n, "%s: %s is out of range %g..%g", k->dotted, v, k->min, k->max);
                return -1;
            }
            *(double *)field(c, k) = x;
            return 0;
        }
        case K_ENUM:
            for (int i = 0; k->names[i]; i++) {
                if (strcasecmp(v, k->names[i]) == 0) {
                    *(int *)field(c, k) = i;
                    return 0;
                }
            }
            {
                size_t len = (size_t)snprintf(msg, n, "%s: \"%s\" is not one of ", k->dotted, v);
                for (int i = 0; k->names[i] && len < n; i++)
                    len +=
                        (size_t)snprintf(msg + len, n - len, "%s%s", i ? ", " : "", k->names[i]);
                if (len < n)
                    snprintf(msg + len, n - len, "%s", value_hint(v));
            }
            return -1;
    }
    return -1;
}

/* The shortest text that reads back as the same double, without an exponent if one that
 * short exists ("10", not "1e+01"). */
static void format_double(char *b, size_t n, double v)
{
    for (int pass = 0; pass < 2; pass++)
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(b, n, "%.*g", prec, v);
            if (strtod(b, NULL) == v && (pass == 1 || !strchr(b, 'e')))
                return;
        }
}

static void format_value(const key *k, const tl_settings *c, char *b, size_t n)
{
    const void *p = cfield(c, k);
    switch (k->type) {
        case K_STRING:
        case K_LISTEN:
        case K_ENDPOINT_OPT:
        case K_TEXT:
        case K_PATH:
        case K_ORIGINS: snprintf(b, n, "%s", (const char *)p); break;
        case K_BOOL: snprintf(b, n, "%s", *(const bool *)p ? "true" : "false"); break;
        case K_INT: snprintf(b, n, "%d", *(const int *)p); break;
        case K_DOUBLE: format_double(b, n, *(const double *)p); break;
        case K_ENUM: {
            int i = *(const int *)p, count = 0;
            while (k->names[count])
                count++;
            snprintf(b, n, "%s", i >= 0 && i < count ? k->names[i] : "?");
            break;
        }
    }
}

static bool same_value(const key *k, const tl_settings *a, const tl_settings *b)
{
    const void *x = cfield(a, k), *y = cfield(b, k);
    switch (k->type) {
        case K_STRING:
        case K_LISTEN:
        case K_ENDPOINT_OPT:
        case K_TEXT:
        case K_PATH:
        case K_ORIGINS: return strncmp(x, y, k->size) == 0;
        case K_BOOL: return *(const bool *)x == *(const bool *)y;
        case K_INT:
        case K_ENUM: return *(const int *)x == *(const int *)y;
        case K_DOUBLE: return *(const double *)x == *(const double *)y;
    }
    return false;
}

void tl_settings_defaults(tl_settings *c)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < NKEYS; i++) {
        const key *k = &keys[i];
        char msg[256];
        assert(k->type == K_STRING || k->type == K_LISTEN || k->type == K_ENDPOINT_OPT ||
               k->type == K_TEXT || k->type == K_PATH || k->type == K_ORIGINS ||
               k->size == (k->type == K_BOOL     ? sizeof(bool)
                           : k->type == K_DOUBLE ? sizeof(double)
                                                 : sizeof(int)));
        if (parse_value(k, k->def, c, msg, sizeof msg) < 0) {
            fprintf(stderr, "tomolive: bad default in the configuration table: %s\n", msg);
            abort(); /* a programming error, caught by check_config */
        }
    }
}

/* The rules across keys; *k1 and *k2 name the two keys involved. */
/* Whether two bound endpoints collide: the same text, or tcp on one port where one host is
 * '*' (every interface) or both are the same host. */
static bool same_address(const char *a, const char *b)
{
    if (strcmp(a, b) == 0)
        return true;
    if (strncmp(a, "tcp://", 6) != 0 || strncmp(b, "tcp://", 6) != 0)
        return false;
    const char *pa = strrchr(a, ':'), *pb = strrchr(b, ':');
    if (!pa || !pb || strcmp(pa, pb) != 0 || strcmp(pa, ":*") == 0)
        return false;
    size_t la = (size_t)(pa - a - 6), lb = (size_t)(pb - b - 6);
    return (la == 1 && a[6] == '*') || (lb == 1 && b[6] == '*') ||
           (la == lb && strncmp(a + 6, b + 6, la) == 0);
}

/* [security]: keys where curve needs them, socket names in plain, a connecting ingest
 * socket plain (it would be a CURVE client of the detector, which has no key here). */
static int check_security(const tl_settings *c, char *err, size_t errlen, const char **k1,
                          const char **k2)
{
    *k1 = *k2 = "security.curve";
    if (c->curve && (!c->server_key[0] || !c->clients_dir[0])) {
        snprintf(err, errlen,
                 "security.curve = true needs security.server_key (the daemon's "
                 "NAME.key_secret) and security.clients (a directory of clients' NAME.key)");
        *k2 = c->server_key[0] ? "security.clients" : "security.server_key";
        return -1;
    }
    if (c->plain[0] && !c->curve) {
        snprintf(err, errlen,
                 "security.plain = %s means something only with security.curve = "
                 "true (without it, every socket is plain)",
                 c->plain);
        *k2 = "security.plain";
        return -1;
    }
    char words[TL_SETTINGS_TEXT_MAX];
    snprintf(words, sizeof words, "%s", c->plain);
    char *save = NULL;
    for (char *w = strtok_r(words, ",", &save); w; w = strtok_r(NULL, ",", &save))
        if (strcmp(w, "ingest") != 0 && strcmp(w, "control") != 0 && strcmp(w, "slices") != 0) {
            snprintf(err, errlen,
                     "security.plain \"%s\": \"%s\" is not ingest, control or "
                     "slices",
                     c->plain, w);
            *k1 = *k2 = "security.plain";
            return -1;
        }
    if (c->curve && !c->ingest_bind && !tl_settings_plain(c, "ingest")) {
        snprintf(err, errlen,
                 "ingest.bind = false connects to a detector, which cannot be "
                 "authenticated with security.clients: add ingest to security.plain");
        *k2 = "ingest.bind";
        return -1;
    }
    return 0;
}

bool tl_settings_plain(const tl_settings *c, const char *socket)
{
    size_t n = strlen(socket);
    for (const char *p = c->plain; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, socket, n) == 0)
            return true;
        p += len + (end ? 1 : 0);
    }
    return false;
}

static int check_rules(const tl_settings *c, char *err, size_t errlen, const char **k1,
                       const char **k2)
{
    if (!c->ingest_bind && strncmp(c->ingest_endpoint, "tcp://*:", 8) == 0) {
        snprintf(err, errlen,
                 "ingest.endpoint \"%s\": with ingest.bind = false the socket "
                 "connects, and needs the sender's host instead of '*'",
                 c->ingest_endpoint);
        *k1 = "ingest.bind";
        *k2 = "ingest.endpoint";
        return -1;
    }
    int fmt = c->ingest_format;
    if (c->ingest_window == 0 &&
        (fmt == TL_SETTINGS_FORMAT_STD_DAQ || fmt == TL_SETTINGS_FORMAT_CONCERT ||
         fmt == TL_SETTINGS_FORMAT_ARRAY_1_0)) {
        snprintf(err, errlen,
                 "ingest.format = %s carries no projection count: set ingest.window "
                 "to the projections of one scan",
                 format_names[fmt]);
        *k1 = "ingest.format";
        *k2 = "ingest.window";
        return -1;
    }
    int gpus[TL_SETTINGS_MAX_GPUS], ngpus;
    if (tl_settings_gpus(c, gpus, &ngpus, err, errlen) != 0) {
        *k1 = *k2 = "daemon.gpus";
        return -1;
    }
    char kinds[TL_SETTINGS_TEXT_MAX];
    snprintf(kinds, sizeof kinds, "%s", c->ingest_series_kinds);
    char *save = NULL;
    for (char *w = strtok_r(kinds, ",", &save); w; w = strtok_r(NULL, ",", &save))
        if (strcmp(w, "dark") != 0 && strcmp(w, "flat") != 0 && strcmp(w, "proj") != 0) {
            snprintf(err, errlen, "ingest.series_kinds \"%s\": \"%s\" is not dark, flat or proj",
                     c->ingest_series_kinds, w);
            *k1 = *k2 = "ingest.series_kinds";
            return -1;
        }
    if (!c->ingest_series_kinds[0]) {
        snprintf(err, errlen, "ingest.series_kinds is empty (e.g. proj, or dark,flat,proj)");
        *k1 = *k2 = "ingest.series_kinds";
        return -1;
    }
    if (!c->recast3d_server[0] != !c->recast3d_subscribe[0]) {
        snprintf(err, errlen,
                 "recast3d.server and recast3d.subscribe go together: set both "
                 "(RECAST3D's ports 5555 and 5556) or neither");
        *k1 = "recast3d.server";
        *k2 = "recast3d.subscribe";
        return -1;
    }
    if (!c->http_tls_cert[0] != !c->http_tls_key[0]) {
        snprintf(err, errlen, "http.tls_cert and http.tls_key go together: set both or neither");
        *k1 = "http.tls_cert";
        *k2 = "http.tls_key";
        return -1;
    }
    if (check_security(c, err, errlen, k1, k2) != 0)
        return -1;
    /* Two sockets cannot bind one endpoint; catch it here rather than as EADDRINUSE. */
    const char *bound[3] = {c->control_endpoint, c->slices_endpoint,
                            c->ingest_bind ? c->ingest_endpoint : NULL};
    const char *names[3] = {"control.endpoint", "slices.endpoint", "ingest.endpoint"};
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            if (bound[i] && bound[j] && same_address(bound[i], bound[j])) {
                if (strcmp(bound[i], bound[j]) == 0)
                    snprintf(err, errlen, "%s and %s are both \"%s\"", names[i], names[j],
                             bound[i]);
                else
                    snprintf(err, errlen, "%s \"%s\" and %s \"%s\" bind the same port", names[i],
                             bound[i], names[j], bound[j]);
                *k1 = names[i];
                *k2 = names[j];
                return -1;
            }
    return 0;
}

/* --- loading a file ---------------------------------------------------------------- */

typedef struct {
    const char *path;
    FILE *f;
    char *buf;
    size_t cap;
    int lineno;
    int read_errno;
    bool section_unknown; /* the current [section] is unknown, and was reported */
    int set_line[NKEYS];  /* where each key was set, for duplicates and tl_settings_check */
    tl_settings cfg;
    int nerr, first_line;
    char first[512];
} loadctx;

static void __attribute__((format(printf, 2, 3))) load_error(loadctx *x, const char *fmt, ...)
{
    if (x->nerr++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(x->first, sizeof x->first, fmt, ap);
        va_end(ap);
        x->first_line = x->lineno;
    }
}

/* inih's own scanner: the first of `chars`, or of an inline comment (';' after whitespace). */
static const char *find_chars_or_comment(const char *s, const char *chars)
{
    bool was_space = false;
    while (*s && !strchr(chars, *s) && !(was_space && *s == ';')) {
        was_space = isspace((unsigned char)*s);
        s++;
    }
    return s;
}

/* Hands inih one physical line per call, so its line numbers are ours. Drops indentation
 * (inih would read an indented line as the continuation of the previous value), refuses
 * lines inih would split, and finds what inih reports only as a line number: syntax
 * errors and unknown [sections] (which its handler never sees when they are empty). */
static char *reader(char *str, int num, void *stream)
{
    loadctx *x = stream;
    errno = 0;
    ssize_t n = getline(&x->buf, &x->cap, x->f);
    if (n < 0) {
        x->read_errno = errno;
        return NULL;
    }
    x->lineno++;
    char *s = x->buf;
    if (x->lineno == 1 && strncmp(s, "\xEF\xBB\xBF", 3) == 0)
        s += 3; /* UTF-8 byte-order mark */
    while (isspace((unsigned char)*s))
        s++;
    size_t len = strlen(s);
    if (len > 0 && s[len - 1] == '\n')
        len--;
    if (len > (size_t)num - 2) { /* inih's buffer: num bytes for the line, '\n' and '\0' */
        load_error(x, "line longer than %d characters", num - 2);
        return strcpy(str, "\n");
    }

    if (*s == '\0' || *s == '#' || *s == ';') {
        /* blank or comment */
    } else if (*s == '[') {
        const char *end = find_chars_or_comment(s + 1, "]");
        if (*end != ']') {
            load_error(x, "syntax error: missing ']' after [section");
        } else {
            x->section_unknown = !known_section(s + 1, (size_t)(end - s - 1));
            if (x->section_unknown) {
                char known[256] = "";
                size_t kl = 0;
                for (size_t i = 0; i < NKEYS && kl < sizeof known; i++)
                    if (i == 0 || strcmp(keys[i].section, keys[i - 1].section) != 0)
                        kl += (size_t)snprintf(known + kl, sizeof known - kl, "%s%s",
                                               i ? ", " : "", keys[i].section);
                load_error(x, "unknown section [%.*s] (known: %s)", (int)(end - s - 1), s + 1,
                           known);
            }
        }
    } else {
        const char *sep = find_chars_or_comment(s, "=:");
        if (*sep != '=' && *sep != ':')
            load_error(x, "syntax error: expected \"key = value\" or \"[section]\"");
    }
    memcpy(str, s, len);
    str[len] = '\n';
    str[len + 1] = '\0';
    return str;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
    loadctx *x = user;
    if (!name || x->section_unknown)
        return 1; /* a section header (some inih builds report them), or reported already */
    if (!value) {
        load_error(x, "key \"%s\" has no value", name);
        return 0;
    }
    if (!*section) {
        load_error(x, "key \"%s\" comes before any [section]", name);
        return 0;
    }
    const key *k = find_key(section, name);
    if (!k) {
        const key *other = NULL;
        for (size_t i = 0; i < NKEYS && !other; i++)
            if (strcmp(keys[i].name, name) == 0)
                other = &keys[i];
        if (other)
            load_error(x, "unknown key \"%s\" in [%s] (did you mean [%s]?)", name, section,
                       other->section);
        else
            load_error(x, "unknown key \"%s\" in [%s]", name, section);
        return 0;
    }
    size_t i = (size_t)(k - keys);
    if (x->set_line[i]) {
        load_error(x, "duplicate key \"%s\" in [%s] (first set on line %d)", name, section,
                   x->set_line[i]);
        return 0;
    }
    x->set_line[i] = x->lineno;
    char msg[512];
    if (parse_value(k, value, &x->cfg, msg, sizeof msg) < 0) {
        load_error(x, "%s", msg);
        return 0;
    }
    return 1;
}

static int line_of(const loadctx *x, const char *dotted)
{
    const key *k = find_dotted(dotted);
    return k ? x->set_line[k - keys] : 0;
}

int tl_settings_load(tl_settings *c, const char *path, char *err, size_t errlen)
{
    loadctx *x = calloc(1, sizeof *x);
    if (!x) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    x->path = path;
    x->cfg = *c;
    x->f = fopen(path, "r");
    if (!x->f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        free(x);
        return -1;
    }
    int ret = ini_parse_stream(reader, x, handler, x);
    fclose(x->f);
    free(x->buf);

    int rc = -1;
    char why[512];
    const char *k1, *k2;
    if (x->read_errno) {
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(x->read_errno));
    } else if (ret < 0) {
        snprintf(err, errlen, "%s: out of memory", path);
    } else if (x->nerr > 0) {
        int more = x->nerr - 1;
        snprintf(err, errlen, more ? "%s:%d: %s (and %d more error%s)" : "%s:%d: %s", path,
                 x->first_line, x->first, more, more > 1 ? "s" : "");
    } else if (ret > 0) {
        snprintf(err, errlen, "%s:%d: syntax error", path, ret); /* inih saw what we did not */
    } else if (check_rules(&x->cfg, why, sizeof why, &k1, &k2) < 0) {
        int a = line_of(x, k1), b = line_of(x, k2);
        int line = a > b ? a : b;
        if (line)
            snprintf(err, errlen, "%s:%d: %s", path, line, why);
        else
            snprintf(err, errlen, "%s: %s", path, why);
    } else {
        *c = x->cfg;
        rc = 0;
    }
    free(x);
    return rc;
}

/* --- the rest of the API --------------------------------------------------------------- */

int tl_settings_set(tl_settings *c, const char *dotted_key, const char *value, char *err,
                    size_t errlen)
{
    const key *k = find_dotted(dotted_key);
    if (!k) {
        snprintf(err, errlen,
                 "unknown key \"%s\" (keys are written section.key, e.g. "
                 "ingest.endpoint)",
                 dotted_key ? dotted_key : "");
        return -1;
    }
    tl_settings tmp = *c;
    if (parse_value(k, value ? value : "", &tmp, err, errlen) < 0)
        return -1;
    *c = tmp;
    return 0;
}

int tl_settings_check(const tl_settings *c, char *err, size_t errlen)
{
    const char *k1, *k2;
    return check_rules(c, err, errlen, &k1, &k2);
}

static void write_range(const key *k, FILE *f)
{
    switch (k->type) {
        case K_STRING: fputs("# tcp://HOST:PORT, ipc://PATH or inproc://NAME.", f); break;
        case K_LISTEN: fputs("# HOST:PORT (HOST a name, an address or *), or empty.", f); break;
        case K_ENDPOINT_OPT:
            fputs("# tcp://HOST:PORT, ipc://PATH or inproc://NAME, or empty.", f);
            break;
        case K_TEXT:
            fputs("# Words of letters, digits, '_', '.', '-', separated by commas.", f);
            break;
        case K_PATH: fputs("# An absolute path, or empty.", f); break;
        case K_ORIGINS: fputs("# http(s)://HOST[:PORT], separated by commas, or empty.", f); break;
        case K_BOOL: fputs("# true or false.", f); break;
        case K_INT: fprintf(f, "# Integer, %.0f to %.0f.", k->min, k->max); break;
        case K_DOUBLE: fprintf(f, "# Number, %g to %g.", k->min, k->max); break;
        case K_ENUM:
            fputs("# One of:", f);
            for (int i = 0; k->names[i]; i++)
                fprintf(f, "%s %s", i ? "," : "", k->names[i]);
            fputc('.', f);
            break;
    }
    fprintf(f, " Default: %s. %s\n", k->def, k->reloadable ? "Reloadable." : "Restart to change.");
}

void tl_settings_write(const tl_settings *c, FILE *f, bool with_help)
{
    tl_settings def;
    tl_settings_defaults(&def);
    if (with_help)
        fputs("# tomolive.conf: configuration of tomolived, the tomolive daemon.\n"
              "#\n"
              "# Each key is shown with its help, its range and its default. Keys at their\n"
              "# default are commented out: remove the '#' and change the value to set one.\n"
              "# Command-line options override this file. On SIGHUP (systemctl reload\n"
              "# tomolived) the daemon reads it again and applies the keys marked\n"
              "# \"Reloadable\"; the others take effect at the next start.\n"
              "#\n"
              "# Syntax: [section] headers and \"key = value\" lines; values are plain text,\n"
              "# never quoted. Comment lines start with '#' or ';'. An inline comment starts\n"
              "# at a ';' after a space: a '#' in mid-line is part of the value. Lines are\n"
              "# at most 198 characters long. Unknown keys and bad values are errors.\n",
              f);
    const char *section = NULL;
    for (size_t i = 0; i < NKEYS; i++) {
        const key *k = &keys[i];
        if (!section || strcmp(section, k->section) != 0) {
            fprintf(f, "%s[%s]\n", section || with_help ? "\n" : "", k->section);
            section = k->section;
        }
        char v[TL_SETTINGS_ENDPOINT_MAX + 32];
        format_value(k, c, v, sizeof v);
        if (!with_help) {
            fprintf(f, "%s = %s\n", k->name, v);
            continue;
        }
        fprintf(f, "%s# %s\n", i && strcmp(keys[i - 1].section, k->section) == 0 ? "\n" : "",
                k->help);
        write_range(k, f);
        fprintf(f, "%s%s = %s\n", same_value(k, c, &def) ? "#" : "", k->name, v);
    }
}

int tl_settings_diff(const tl_settings *a, const tl_settings *b,
                     void (*fn)(const char *dotted_key, bool reloadable, void *ctx), void *ctx)
{
    int n = 0;
    for (size_t i = 0; i < NKEYS; i++) {
        if (same_value(&keys[i], a, b))
            continue;
        n++;
        if (fn)
            fn(keys[i].dotted, keys[i].reloadable, ctx);
    }
    return n;
}

int tl_settings_apply_reloadable(tl_settings *running, const tl_settings *fresh)
{
    int n = 0;
    for (size_t i = 0; i < NKEYS; i++) {
        const key *k = &keys[i];
        if (!k->reloadable || same_value(k, running, fresh))
            continue;
        memcpy((char *)running + k->off, (const char *)fresh + k->off, k->size);
        n++;
    }
    return n;
}

const char *const *tl_settings_enum_names(const char *dotted_key)
{
    const key *k = find_dotted(dotted_key);
    return k && k->type == K_ENUM ? k->names : NULL;
}

const char *tl_settings_enum_name(const char *dotted_key, int value)
{
    const char *const *names = tl_settings_enum_names(dotted_key);
    for (int i = 0; names && names[i]; i++)
        if (i == value)
            return names[i];
    return NULL;
}

int tl_settings_enum_value(const char *dotted_key, const char *name)
{
    const char *const *names = tl_settings_enum_names(dotted_key);
    for (int i = 0; names && name && names[i]; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return -1;
}

bool tl_settings_has_key(const char *dotted_key)
{
    return find_dotted(dotted_key) != NULL;
}

bool tl_settings_reloadable(const char *dotted_key)
{
    const key *k = find_dotted(dotted_key);
    return k && k->reloadable;
}

int tl_settings_gpus(const tl_settings *c, int *devices, int *n, char *err, size_t errlen)
{
    *n = 0;
    if (strcmp(c->gpus, "all") == 0) {
        *n = -1;
        return 0;
    }
    char list[TL_SETTINGS_TEXT_MAX];
    snprintf(list, sizeof list, "%s", c->gpus);
    char *save = NULL;
    for (char *w = strtok_r(list, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        char *end;
        long v = strtol(w, &end, 10);
        if (*end || end == w || v < 0 || v > 63) {
            snprintf(err, errlen,
                     "daemon.gpus \"%s\": \"%s\" is not a device ordinal 0..63 "
                     "(write all, or e.g. 0,1)",
                     c->gpus, w);
            return -1;
        }
        if (*n == TL_SETTINGS_MAX_GPUS) {
            snprintf(err, errlen, "daemon.gpus \"%s\": more than %d GPUs", c->gpus,
                     TL_SETTINGS_MAX_GPUS);
            return -1;
        }
        for (int i = 0; i < *n; i++)
            if (devices[i] == (int)v) {
                snprintf(err, errlen, "daemon.gpus \"%s\": GPU %ld twice", c->gpus, v);
                return -1;
            }
        devices[(*n)++] = (int)v;
    }
    return 0;
}
