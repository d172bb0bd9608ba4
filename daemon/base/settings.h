/* settings.h — tomolived's configuration (settings, so that it is never confused with
 * autoconf's config.h): the tl_settings struct, its defaults, the INI file (read with
 * libinih), command-line overrides and what a reload may change.
 *
 * Every key lives in one table in settings.c (section, name, type, range, default, whether it
 * can change at run time, one line of help); everything here is driven by that table.
 *
 *   tl_settings c;
 *   tl_settings_defaults(&c);
 *   if (tl_settings_load(&c, path, err, sizeof err) < 0            // the file, over the defaults
 *       || tl_settings_set(&c, "ingest.endpoint", arg, err, sizeof err) < 0   // command line
 *       || tl_settings_check(&c, err, sizeof err) < 0)             // rules across keys
 *       { log err; exit }
 *
 * On SIGHUP: load the file again into a fresh copy (defaults, file, the same overrides),
 * then tl_settings_diff(&running, &fresh, fn, ctx) says which keys changed and whether each is
 * reloadable; apply the reloadable ones, log the others as needing a restart.
 *
 * The file: `[section]` headers and `key = value` lines. Values are plain text, never quoted;
 * libinih trims the whitespace around them. Comments are lines starting with '#' or ';', and
 * inline comments start at a ';' that follows whitespace — a '#' in mid-line is part of the
 * value. Leading indentation is ignored (no continuation lines). Unknown sections and keys,
 * keys given twice, bad values and lines longer than libinih's limit (198 characters) are
 * errors, reported as "FILE:LINE: what" (the first error, and how many more there were).
 *
 * Enum keys hold the index into their list of names; the lists are the engine's names, so
 * the daemon maps them with the engine's own parsers: tl_filter_parse(tl_settings_enum_name(
 * "engine.filter", c.filter), &f). This module does not include gpu/ headers.
 */
#ifndef TL_DAEMON_SETTINGS_H
#define TL_DAEMON_SETTINGS_H

#include <config.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define TL_SETTINGS_ENDPOINT_MAX 256
#define TL_SETTINGS_TEXT_MAX 64
#define TL_SETTINGS_MAX_GPUS 16 /* = TL_ENGINE_MAX_DEVICES */

typedef struct {
    /* [daemon] */
    int log_level; /* enum error|warn|info|debug (= TL_LOG_*), default info, reloadable */
    int backend;   /* enum auto|cpu|cuda, default auto */
    int device;    /* CUDA device ordinal, 0..63, default 0 */
    char gpus
        [TL_SETTINGS_TEXT_MAX]; /* "" (device only), "all" or "0,1,...": rows split across them */
    int threads;                /* CPU backend threads, 0 = all cores, 0..1024 */
    double
        status_interval; /* seconds between STATUS= updates and status log lines, 0.1..3600, default 5, reloadable */
    /* [ingest] */
    char ingest_endpoint[TL_SETTINGS_ENDPOINT_MAX]; /* default: tcp, all interfaces, port 5600 */
    int ingest_format; /* enum: the stream format (adapter) of the ingest socket, default tomolive */
    bool ingest_bind;  /* bind (true, default) or connect (false, e.g. to a detector's PUSH) */
    int ingest_rcvhwm; /* ZMQ_RCVHWM, messages, 1..1000000, default 1000 */
    int ingest_queue;  /* frames between the ingest thread and the engine, 1..65536, default 64 */
    int ingest_overflow; /* enum block|drop: a full queue blocks the sender or drops, default block, reloadable */
    int io_threads;         /* ZeroMQ I/O threads, 1..64, default 2 */
    int ingest_band_frames; /* frames sent in row bands in assembly at once, 1..256, default 16 */
    int ingest_band_timeout_ms; /* a frame's bands must all come within this, 1..600000, default 1000, reloadable */
    /* [ingest], for stream formats other than tomolive's (daemon/adapter_*.c) */
    int ingest_window; /* projections in the window when the stream does not say, 0..1048576, 0 = from the stream */
    double ingest_angle_start; /* degrees, when the stream carries no angles, default 0 */
    double ingest_angle_step;  /* degrees per projection index, 0 = 180 / window */
    int ingest_darks; /* unlabelled frames at the start of a series that are darks, default 0 */
    int ingest_flats; /* ... and flats after them, default 0 */
    char ingest_series_kinds
        [TL_SETTINGS_TEXT_MAX]; /* kinds of successive detector series, cycled: "proj", "dark,flat,proj" */
    char ingest_goniometer_axis
        [TL_SETTINGS_TEXT_MAX]; /* DECTRIS goniometer axis with the rotation, default omega */
    char ingest_channel[TL_SETTINGS_TEXT_MAX]; /* DECTRIS Stream V2 channel, "" = the first */
    int ingest_max_frame_mb; /* largest decoded frame, MiB, 1..16384, default 1024 */
    /* [control] */
    char control_endpoint[TL_SETTINGS_ENDPOINT_MAX]; /* default: tcp, loopback, port 5601 */
    /* [slices] */
    char slices_endpoint[TL_SETTINGS_ENDPOINT_MAX]; /* default: tcp, all interfaces, port 5602 */
    int slices_sndhwm;   /* per-subscriber ZMQ_SNDHWM, messages, 1..100000, default 4 */
    int slices_stall_ms; /* wait for a full subscriber before serving the others, default 500 */
    int slices_max;      /* slices served at once, 1..4096, default 64 */
    char slices_shm[TL_SETTINGS_TEXT_MAX]; /* shared-memory name prefix, "" = no shm delivery */
    int slices_shm_slots;                  /* slots per slice in shared memory, 2..64, default 4 */
    bool
        slices_incremental; /* keep watched slices up to date per projection, default true, reloadable */
    int update_every; /* publish every K new projections, 1..1000000, default 1, reloadable */
    bool
        update_on_complete; /* also publish when the window becomes complete, default true, reloadable */
    double
        update_max_rate; /* maximum publish rate per slice in Hz, 0.01..1000, default 10, reloadable */
    /* [engine] */
    int filter;  /* enum ram-lak|shepp-logan|cosine|hamming|hann|parzen, reloadable (next scan) */
    bool engine_iterative; /* keep the measurements for iterative slices, default false,
                              reloadable (next scan) */
    int quality; /* enum exact|fast|preview, default exact, reloadable (next scan) */
    int weights; /* enum uniform|angles, default uniform, reloadable (next scan) */
    /* [engine]: the kernel autotuner (gpu/tune.h, daemon/tuning.c); reloadable, for the
     * slice sizes resolved from then on */
    int tune;                                  /* enum auto|cached|off, default auto */
    char tune_cache[TL_SETTINGS_ENDPOINT_MAX]; /* cache file, "" = tl_tune_default_path */
    double tune_budget;   /* seconds of timing per slice size, 1..120, default 15 */
    int tune_batch;       /* enum 1|2|4 (an index: tl_settings_tune_batch), default 4 */
    bool tune_one_kernel; /* time a size with one candidate kernel too, default false */
    /* [http] */
    char http_listen[TL_SETTINGS_ENDPOINT_MAX]; /* HOST:PORT, default 127.0.0.1:8600, "" = off */
    int http_preview_size; /* largest side sent to preview pages, 64..4096, default 512, reloadable */
    char http_root
        [TL_SETTINGS_ENDPOINT_MAX]; /* the page's directory, "" = installed ($(pkgdatadir)/www) */
    /* [http] access (daemon/serve/http.h says how they combine) */
    char http_origins[TL_SETTINGS_ENDPOINT_MAX]; /* allowed Origins, "" = the page's own, reloadable */
    char http_token_file[TL_SETTINGS_ENDPOINT_MAX]; /* the operator token, "" = no actions */
    bool http_open_views; /* images, status, metrics without the token, default false, reloadable */
    char http_tls_cert[TL_SETTINGS_ENDPOINT_MAX]; /* PEM certificate (chain), "" = plain HTTP */
    char http_tls_key[TL_SETTINGS_ENDPOINT_MAX];  /* PEM private key of tls_cert */
    /* [recast3d] (daemon/recast3d.c) */
    char recast3d_server
        [TL_SETTINGS_ENDPOINT_MAX]; /* RECAST3D's REP socket (tcp://host:5555), "" = off */
    char
        recast3d_subscribe[TL_SETTINGS_ENDPOINT_MAX]; /* RECAST3D's PUB socket (tcp://host:5556) */
    char recast3d_scene[TL_SETTINGS_TEXT_MAX];        /* the scene's name, default tomolive */
    int recast3d_slice_size; /* pixels per side of slices sent to RECAST3D, 0 = detector width */
    /* [security] (daemon/base/auth.h, daemon/ingest/release_allow.h) */
    bool curve;                                   /* CURVE on the bound sockets, default false */
    char server_key[TL_SETTINGS_ENDPOINT_MAX];    /* the daemon's secret certificate */
    char clients_dir[TL_SETTINGS_ENDPOINT_MAX];   /* clients' public certificates */
    char plain[TL_SETTINGS_TEXT_MAX];             /* sockets left plain: ingest,control,slices */
    char release_hosts[TL_SETTINGS_ENDPOINT_MAX]; /* hosts release endpoints may name */
} tl_settings;

/* Indices of the enum keys' names (the order of the lists in settings.c). */
enum { TL_SETTINGS_BACKEND_AUTO = 0, TL_SETTINGS_BACKEND_CPU, TL_SETTINGS_BACKEND_CUDA };
enum {
    TL_SETTINGS_FILTER_RAM_LAK = 0,
    TL_SETTINGS_FILTER_SHEPP_LOGAN,
    TL_SETTINGS_FILTER_COSINE,
    TL_SETTINGS_FILTER_HAMMING,
    TL_SETTINGS_FILTER_HANN,
    TL_SETTINGS_FILTER_PARZEN
};
enum { TL_SETTINGS_QUALITY_EXACT = 0, TL_SETTINGS_QUALITY_FAST, TL_SETTINGS_QUALITY_PREVIEW };
enum { TL_SETTINGS_WEIGHTS_UNIFORM = 0, TL_SETTINGS_WEIGHTS_ANGLES };
enum { TL_SETTINGS_TUNE_AUTO = 0, TL_SETTINGS_TUNE_CACHED, TL_SETTINGS_TUNE_OFF };
/* engine.tune_batch is an enum of the names "1", "2", "4": the number it stands for. */
static inline unsigned tl_settings_tune_batch(const tl_settings *c)
{
    return 1u << c->tune_batch;
}
enum { TL_SETTINGS_OVERFLOW_BLOCK = 0, TL_SETTINGS_OVERFLOW_DROP };
/* ingest.format: the adapters of daemon/adapter.h, in the order of their names */
enum {
    TL_SETTINGS_FORMAT_TOMOLIVE = 0,
    TL_SETTINGS_FORMAT_DECTRIS_V2,
    TL_SETTINGS_FORMAT_DECTRIS_V1,
    TL_SETTINGS_FORMAT_STD_DAQ,
    TL_SETTINGS_FORMAT_CONCERT,
    TL_SETTINGS_FORMAT_ARRAY_1_0,
    TL_SETTINGS_FORMAT_TOMOPACKETS
};

void tl_settings_defaults(tl_settings *c);

/* Applies the file's keys over *c (keys it does not name keep their value). All or
 * nothing: on error *c is unchanged and err holds "PATH:LINE: message". Also runs
 * tl_settings_check, so the file must be consistent on its own. Returns 0 or -1. */
int tl_settings_load(tl_settings *c, const char *path, char *err, size_t errlen);

/* Sets one key by its dotted name ("ingest.endpoint"), validated as in a file; for
 * command-line overrides. On error *c is unchanged and err holds "KEY: message". */
int tl_settings_set(tl_settings *c, const char *dotted_key, const char *value, char *err,
                    size_t errlen);

/* Rules that involve more than one key (a connecting ingest socket needs a host, not '*').
 * Call after the last tl_settings_set. Returns 0 or -1 with err set. */
int tl_settings_check(const tl_settings *c, char *err, size_t errlen);

/* Writes *c as INI text that tl_settings_load reads back. Without help: every key, set.
 * With help: a header, then each key preceded by its help, range and default and whether a
 * reload applies it; keys at their default are written commented out ("#key = value"),
 * keys that differ are set. etc/tomolive.conf is this output for the defaults. */
void tl_settings_write(const tl_settings *c, FILE *f, bool with_help);

/* Calls fn (if not NULL) for every key whose value differs between a and b, in table order,
 * saying whether it can change at run time. Returns the number of differing keys. */
int tl_settings_diff(const tl_settings *a, const tl_settings *b,
                     void (*fn)(const char *dotted_key, bool reloadable, void *ctx), void *ctx);

/* Copies every reloadable key whose value differs from fresh into running (what SIGHUP
 * applies); keys that need a restart keep their running value. Returns how many changed. */
int tl_settings_apply_reloadable(tl_settings *running, const tl_settings *fresh);

/* Enum keys: the name of a value, NULL if the key is not an enum or value is out of range;
 * the value of a name, -1 if unknown; the list of names (NULL-terminated, NULL if the key is
 * not an enum). */
const char *tl_settings_enum_name(const char *dotted_key, int value);
int tl_settings_enum_value(const char *dotted_key, const char *name);
const char *const *tl_settings_enum_names(const char *dotted_key);

/* Whether a key exists, and whether it is reloadable (false for unknown keys). */
bool tl_settings_has_key(const char *dotted_key);
bool tl_settings_reloadable(const char *dotted_key);

/* Validates a ZeroMQ endpoint as the configuration does: tcp://HOST:PORT (HOST a name, an
 * address, [IPv6], an interface or '*'; PORT 1..65535 or '*'), ipc://PATH (at most 107
 * bytes; '@' for the abstract namespace) or inproc://NAME; no whitespace anywhere.
 * Returns 0, or -1 with the reason in err. */
/* daemon.gpus as ordinals: devices gets up to TL_SETTINGS_MAX_GPUS, *n their count (0 for
 * empty: daemon.device alone; -1 for "all", resolved when a scan starts). 0, or -1 with err. */
int tl_settings_gpus(const tl_settings *c, int *devices, int *n, char *err, size_t errlen);
int tl_settings_check_endpoint(const char *endpoint, char *err, size_t errlen);

/* Whether security.plain names socket ("ingest", "control" or "slices"). */
bool tl_settings_plain(const tl_settings *c, const char *socket);

#endif
