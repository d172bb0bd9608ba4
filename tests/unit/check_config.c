/* check_config.c — daemon/base/settings: defaults, files, errors with their line, overrides,
 * diff, writing, and the shipped etc/tomolive.conf. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/base/settings.h"
#include "daemon/base/log.h"
#include "tests/testutil.h"

static char *tmpdir;
static char path[1024];
static char err[1024];

/* Writes text to a fresh file and loads it over *c; returns tl_settings_load's result. */
static int load_text(tl_settings *c, const char *text)
{
    static int n;
    snprintf(path, sizeof path, "%s/t%d.conf", tmpdir, n++);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    err[0] = '\0';
    return tl_settings_load(c, path, err, sizeof err);
}

/* Asserts that text fails to load, with "PATH:LINE: " followed by the expected message start,
 * and that the configuration is left as it was. */
static void expect_error(const char *text, int line, const char *msg)
{
    tl_settings c, before;
    tl_settings_defaults(&c);
    c.threads = 7;
    before = c;
    ck_assert_int_eq(load_text(&c, text), -1);
    char want[2048];
    snprintf(want, sizeof want, "%s:%d: %s", path, line, msg);
    ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "got  \"%s\"\nwant \"%s...\"", err, want);
    ck_assert_int_eq(tl_settings_diff(&c, &before, NULL, NULL), 0);
    ck_assert_int_eq(c.threads, 7);
}

static char *write_to_string(const tl_settings *c, bool with_help)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    tl_settings_write(c, f, with_help);
    fclose(f);
    return buf;
}

START_TEST(test_defaults)
{
    tl_settings c;
    memset(&c, 0x5a, sizeof c);
    tl_settings_defaults(&c);
    ck_assert_int_eq(c.log_level, TL_LOG_INFO);
    ck_assert_int_eq(c.backend, TL_SETTINGS_BACKEND_AUTO);
    ck_assert_int_eq(c.device, 0);
    ck_assert_int_eq(c.threads, 0);
    ck_assert_double_eq(c.status_interval, 5.0);
    ck_assert_str_eq(c.ingest_endpoint, "tcp://*:5600");
    ck_assert(c.ingest_bind);
    ck_assert_int_eq(c.ingest_rcvhwm, 1000);
    ck_assert_int_eq(c.ingest_queue, 64);
    ck_assert_int_eq(c.io_threads, 2);
    ck_assert_str_eq(c.control_endpoint, "tcp://127.0.0.1:5601");
    ck_assert_str_eq(c.slices_endpoint, "tcp://*:5602");
    ck_assert_int_eq(c.slices_sndhwm, 4);
    ck_assert_int_eq(c.slices_max, 64);
    ck_assert_int_eq(c.update_every, 1);
    ck_assert(c.update_on_complete);
    ck_assert_double_eq(c.update_max_rate, 10.0);
    ck_assert_int_eq(c.filter, TL_SETTINGS_FILTER_RAM_LAK);
    ck_assert_int_eq(c.quality, TL_SETTINGS_QUALITY_EXACT);
    ck_assert_int_eq(c.weights, TL_SETTINGS_WEIGHTS_UNIFORM);
    ck_assert_int_eq(tl_settings_check(&c, err, sizeof err), 0);
}
END_TEST

START_TEST(test_enum_names)
{
    /* the engine's names, in the order of the TL_SETTINGS_* constants */
    ck_assert_str_eq(tl_settings_enum_name("engine.filter", TL_SETTINGS_FILTER_SHEPP_LOGAN),
                     "shepp-logan");
    ck_assert_str_eq(tl_settings_enum_name("engine.filter", TL_SETTINGS_FILTER_PARZEN), "parzen");
    ck_assert_str_eq(tl_settings_enum_name("engine.quality", TL_SETTINGS_QUALITY_PREVIEW),
                     "preview");
    ck_assert_str_eq(tl_settings_enum_name("engine.weights", TL_SETTINGS_WEIGHTS_ANGLES),
                     "angles");
    ck_assert_str_eq(tl_settings_enum_name("daemon.backend", TL_SETTINGS_BACKEND_CUDA), "cuda");
    for (int l = TL_LOG_ERROR; l <= TL_LOG_DEBUG; l++)
        ck_assert_str_eq(tl_settings_enum_name("daemon.log_level", l), tl_log_level_name(l));
    ck_assert_ptr_null(tl_settings_enum_name("engine.filter", 6));
    ck_assert_ptr_null(tl_settings_enum_name("engine.filter", -1));
    ck_assert_ptr_null(tl_settings_enum_name("ingest.rcvhwm", 0));
    ck_assert_ptr_null(tl_settings_enum_name("engine.nope", 0));
    ck_assert_int_eq(tl_settings_enum_value("engine.filter", "hann"), TL_SETTINGS_FILTER_HANN);
    ck_assert_int_eq(tl_settings_enum_value("engine.filter", "ramp"), -1);
    const char *const *names = tl_settings_enum_names("engine.quality");
    ck_assert_ptr_nonnull(names);
    ck_assert_str_eq(names[1], "fast");
    ck_assert_ptr_null(names[3]);
    ck_assert_ptr_null(tl_settings_enum_names("slices.endpoint"));
    ck_assert(tl_settings_has_key("slices.update_max_rate"));
    ck_assert(!tl_settings_has_key("slices.update_max"));
    ck_assert(tl_settings_reloadable("engine.filter"));
    ck_assert(!tl_settings_reloadable("ingest.endpoint"));
}
END_TEST

START_TEST(test_load_valid)
{
    tl_settings c;
    tl_settings_defaults(&c);
    c.threads = 12; /* not in the file: must survive */
    const char *text =
        "\xEF\xBB\xBF# a comment line\n"
        "; another\n"
        "\n"
        "[daemon]\n"
        "log_level = debug\n"
        "   backend = cpu\n" /* indentation is not a continuation */
        "status_interval = 0.25 ; inline comment after a space\n"
        "[ingest]\n"
        "endpoint = tcp://detector.example:9999\r\n"
        "bind = No\n"
        "rcvhwm=2000\n"
        "io_threads : 4\n" /* inih also takes ':' */
        "[slices]\n"
        "endpoint = ipc:///run/tomolive/slices;x\n" /* ';' without a space is kept */
        "update_on_complete = off\n"
        "update_max_rate = 1e2\n"
        "[engine]\n"
        "filter = shepp-logan\n"
        "quality = FAST\n"
        "[daemon]\n" /* a section may come back */
        "device = 63\n";
    ck_assert_msg(load_text(&c, text) == 0, "%s", err);
    ck_assert_int_eq(c.log_level, TL_LOG_DEBUG);
    ck_assert_int_eq(c.backend, TL_SETTINGS_BACKEND_CPU);
    ck_assert_double_eq(c.status_interval, 0.25);
    ck_assert_str_eq(c.ingest_endpoint, "tcp://detector.example:9999");
    ck_assert(!c.ingest_bind);
    ck_assert_int_eq(c.ingest_rcvhwm, 2000);
    ck_assert_int_eq(c.io_threads, 4);
    ck_assert_str_eq(c.slices_endpoint, "ipc:///run/tomolive/slices;x");
    ck_assert(!c.update_on_complete);
    ck_assert_double_eq(c.update_max_rate, 100.0);
    ck_assert_int_eq(c.filter, TL_SETTINGS_FILTER_SHEPP_LOGAN);
    ck_assert_int_eq(c.quality, TL_SETTINGS_QUALITY_FAST);
    ck_assert_int_eq(c.device, 63);
    ck_assert_int_eq(c.threads, 12);
    ck_assert_str_eq(c.control_endpoint, "tcp://127.0.0.1:5601");

    tl_settings d;
    tl_settings_defaults(&d);
    ck_assert_int_eq(load_text(&d, ""), 0);
    tl_settings e;
    tl_settings_defaults(&e);
    ck_assert_int_eq(tl_settings_diff(&d, &e, NULL, NULL), 0);
}
END_TEST

START_TEST(test_errors)
{
    expect_error("[ingest]\nendpoint = tcp://*:5600\n\nfoo = 1\n", 4,
                 "unknown key \"foo\" in [ingest]");
    expect_error("[daemon]\nio_threads = 3\n", 2,
                 "unknown key \"io_threads\" in [daemon] (did you mean [ingest]?)");
    expect_error("[daemon]\nthreads = 1\n[gpu]\ndevice = 0\n", 3, "unknown section [gpu]");
    expect_error("# empty but unknown\n[metrics]\n", 2, "unknown section [metrics]");
    expect_error("[ingest]\nbind = maybe\n", 2, "ingest.bind: \"maybe\" is not a boolean");
    expect_error("[slices]\n\nsndhwm = 0\n", 3, "slices.sndhwm: 0 is out of range 1..100000");
    expect_error("[slices]\nsndhwm = 100001\n", 2, "slices.sndhwm: 100001 is out of range");
    expect_error("[daemon]\ndevice = 99999999999999999999\n", 2,
                 "daemon.device: 99999999999999999999 is out of range");
    expect_error("[daemon]\nthreads = 4x\n", 2, "daemon.threads: \"4x\" is not an integer");
    expect_error("[daemon]\nstatus_interval = 0.01\n", 2,
                 "daemon.status_interval: 0.01 is out of range 0.1..3600");
    expect_error("[daemon]\nstatus_interval = nan\n", 2,
                 "daemon.status_interval: \"nan\" is not a number");
    expect_error("[engine]\nfilter = ramp\n", 2,
                 "engine.filter: \"ramp\" is not one of ram-lak, shepp-logan, cosine, hamming, "
                 "hann, parzen");
    expect_error(
        "[control]\nendpoint = tcp://localhost\n", 2,
        "control.endpoint: \"tcp://localhost\" is not a ZeroMQ endpoint: tcp needs HOST:PORT");
    expect_error("[control]\nendpoint = udp://*:5601\n", 2,
                 "control.endpoint: \"udp://*:5601\" is not a ZeroMQ endpoint: expected");
    expect_error("[slices]\nendpoint = \"tcp://*:5602\"\n", 2,
                 "slices.endpoint: \"\"tcp://*:5602\"\" is not a ZeroMQ endpoint");
    /* values that would not read back the same once written as "key = value" (fuzz) */
    expect_error("\n\n[http]\nlisten =;\001.:80\n", 4,
                 "http.listen: a control character (0x01) at offset 1");
    expect_error("[http]\nlisten =;x:80\n", 2,
                 "http.listen: \";x:80\" starts with ';', which reads as a comment");
    expect_error("[daemon]\nthreads = 2\nthis line has no equals sign\n", 3, "syntax error");
    expect_error("[daemon\nthreads = 2\n", 1, "syntax error: missing ']'");
    expect_error("threads = 2\n[daemon]\n", 1, "key \"threads\" comes before any [section]");
    expect_error("[daemon]\nthreads = 2\n\n[daemon]\nthreads = 3\n", 5,
                 "duplicate key \"threads\" in [daemon] (first set on line 2)");
    /* several errors: the first is named, the rest counted */
    expect_error("[daemon]\nthreads = -1\nbogus = 1\n[x]\n", 2,
                 "daemon.threads: -1 is out of range 0..1024 (and 2 more errors)");

    /* the message says why, for the cases that confuse people */
    tl_settings c;
    tl_settings_defaults(&c);
    ck_assert_int_eq(load_text(&c, "[slices]\nendpoint = \"tcp://*:5602\"\n"), -1);
    ck_assert_msg(strstr(err, "values are written without quotes"), "%s", err);
    ck_assert_int_eq(tl_settings_load(&c, "/nonexistent/tomolive.conf", err, sizeof err), -1);
    ck_assert_str_eq(err, "/nonexistent/tomolive.conf: cannot open: No such file or directory");
    ck_assert_int_eq(tl_settings_load(&c, tmpdir, err, sizeof err), -1); /* a directory */
    ck_assert_msg(strstr(err, "cannot read") || strstr(err, "cannot open"), "%s", err);
}
END_TEST

/* inih truncates lines over its buffer (200 bytes) and parses the rest as a new line; we
 * refuse such a line and name it, not the line after. */
START_TEST(test_long_line)
{
    char text[1024], val[400];
    memset(val, 'a', 250);
    val[250] = '\0';
    snprintf(text, sizeof text, "[ingest]\n# fine\nendpoint = inproc://%s\nqueue = 8\n", val);
    expect_error(text, 3, "line longer than 198 characters");

    /* a line of exactly 198 characters is read whole */
    memset(val, 'b', 198 - strlen("endpoint = inproc://"));
    val[198 - strlen("endpoint = inproc://")] = '\0';
    snprintf(text, sizeof text, "[ingest]\nendpoint = inproc://%s\n", val);
    tl_settings c;
    tl_settings_defaults(&c);
    ck_assert_msg(load_text(&c, text) == 0, "%s", err);
    ck_assert_uint_eq(strlen(c.ingest_endpoint), 198 - strlen("endpoint = "));
}
END_TEST

/* '#' starts a comment only at the beginning of a line: mid-line it is part of the value.
 * An endpoint with a trailing "# comment" therefore fails validation, and says why. */
START_TEST(test_hash_mid_line)
{
    tl_settings c;
    tl_settings_defaults(&c);
    ck_assert_int_eq(load_text(&c, "[ingest]\nendpoint = tcp://*:5600 # the detector\n"), -1);
    char want[2048];
    snprintf(want, sizeof want,
             "%s:2: ingest.endpoint: \"tcp://*:5600 # the detector\" is "
             "not a ZeroMQ endpoint: it contains whitespace ('#' starts a comment only at the "
             "beginning of a line",
             path);
    ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "%s", err);

    /* in a number, too */
    ck_assert_int_eq(load_text(&c, "[ingest]\nqueue = 8 # frames\n"), -1);
    ck_assert_msg(strstr(err, ":2: ingest.queue: \"8 # frames\" is not an integer ('#'"), "%s",
                  err);

    /* ';' after a space is the inline comment */
    ck_assert_msg(load_text(&c, "[ingest]\nqueue = 8 ; frames\n# whole-line comment\n") == 0, "%s",
                  err);
    ck_assert_int_eq(c.ingest_queue, 8);
}
END_TEST

START_TEST(test_endpoints)
{
    static const char *const good[] = {
        "tcp://*:5600",
        "tcp://127.0.0.1:1",
        "tcp://[::1]:65535",
        "tcp://eth0:*",
        "tcp://host.example.org:5600",
        "ipc:///run/tomolive/ingest",
        "ipc://@tomolive",
        "inproc://frames",
    };
    static const char *const bad[] = {
        "",
        "tcp://",
        "tcp://*",
        "tcp://:5600",
        "tcp://*:0",
        "tcp://*:65536",
        "tcp://*:-1",
        "tcp://*:56a0",
        "tcp://*:5600 ",
        "ipc://",
        "inproc://",
        "pgm://eth0;239.1.1.1:5555",
        "5600",
        "tcp:/*:5600",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        ck_assert_msg(tl_settings_check_endpoint(good[i], err, sizeof err) == 0, "%s: %s", good[i],
                      err);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        ck_assert_msg(tl_settings_check_endpoint(bad[i], err, sizeof err) < 0, "%s accepted",
                      bad[i]);
        ck_assert_msg(strstr(err, "is not a ZeroMQ endpoint"), "%s", err);
    }
    char longpath[200] = "ipc:///";
    memset(longpath + 7, 'p', 107); /* 108 bytes of path: one too many for sun_path */
    ck_assert_int_lt(tl_settings_check_endpoint(longpath, err, sizeof err), 0);
    longpath[6 + 107] = '\0';
    ck_assert_int_eq(tl_settings_check_endpoint(longpath, err, sizeof err), 0);
}
END_TEST

START_TEST(test_overrides)
{
    tl_settings c;
    tl_settings_defaults(&c);
    ck_assert_int_eq(tl_settings_set(&c, "ingest.endpoint", "tcp://10.0.0.5:9000", err,
                                     sizeof err),
                     0);
    ck_assert_int_eq(tl_settings_set(&c, "ingest.bind", "false", err, sizeof err), 0);
    ck_assert_int_eq(tl_settings_set(&c, "engine.filter", "hamming", err, sizeof err), 0);
    ck_assert_int_eq(tl_settings_set(&c, "slices.update_max_rate", "0.5", err, sizeof err), 0);
    ck_assert_str_eq(c.ingest_endpoint, "tcp://10.0.0.5:9000");
    ck_assert(!c.ingest_bind);
    ck_assert_int_eq(c.filter, TL_SETTINGS_FILTER_HAMMING);
    ck_assert_double_eq(c.update_max_rate, 0.5);

    tl_settings before = c;
    ck_assert_int_eq(tl_settings_set(&c, "ingest.queue", "0", err, sizeof err), -1);
    ck_assert_str_eq(err, "ingest.queue: 0 is out of range 1..65536");
    ck_assert_int_eq(tl_settings_set(&c, "ingest.nope", "1", err, sizeof err), -1);
    ck_assert_msg(strstr(err, "unknown key \"ingest.nope\""), "%s", err);
    ck_assert_int_eq(tl_settings_set(&c, "queue", "1", err, sizeof err), -1);
    ck_assert_int_eq(tl_settings_set(&c, "ingest.endpoint", "tcp://x", err, sizeof err), -1);
    ck_assert_int_eq(tl_settings_diff(&c, &before, NULL, NULL), 0);
}
END_TEST

START_TEST(test_check_across_keys)
{
    tl_settings c;
    tl_settings_defaults(&c);
    /* one at a time, a connecting ingest socket may still hold '*' ... */
    ck_assert_int_eq(tl_settings_set(&c, "ingest.bind", "false", err, sizeof err), 0);
    /* ... but not once all is set */
    ck_assert_int_eq(tl_settings_check(&c, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "ingest.bind = false"), "%s", err);
    ck_assert_int_eq(tl_settings_set(&c, "ingest.endpoint", "tcp://det:5600", err, sizeof err), 0);
    ck_assert_int_eq(tl_settings_check(&c, err, sizeof err), 0);

    /* in a file, the error names the later of the two lines */
    expect_error("[ingest]\nbind = false\n\n", 2,
                 "ingest.endpoint \"tcp://*:5600\": with ingest.bind = false");

    /* two sockets cannot bind the same endpoint */
    expect_error("[control]\nendpoint = tcp://*:7000\n[slices]\nendpoint = tcp://*:7000\n", 4,
                 "control.endpoint and slices.endpoint are both \"tcp://*:7000\"");
    tl_settings_defaults(&c);
    ck_assert_int_eq(tl_settings_set(&c, "ingest.endpoint", "tcp://*:5601", err, sizeof err), 0);
    ck_assert_int_eq(tl_settings_check(&c, err, sizeof err), -1);
    ck_assert_int_eq(tl_settings_set(&c, "ingest.bind", "no", err, sizeof err), 0);
    ck_assert_int_eq(tl_settings_check(&c, err, sizeof err), -1); /* connect to '*' */

    /* [security]: curve needs both keys; plain names sockets, only with curve; a connecting
     * ingest socket must be plain under curve */
    expect_error("[security]\ncurve = true\nserver_key = /k/server.key_secret\n", 2,
                 "security.curve = true needs security.server_key");
    expect_error("[security]\nplain = ingest\n", 2, "security.plain = ingest means something "
                 "only with security.curve = true");
    expect_error("[security]\ncurve = true\nserver_key = /s\nclients = /c\nplain = ingest,http\n",
                 5, "security.plain \"ingest,http\": \"http\" is not ingest, control or slices");
    expect_error("[ingest]\nbind = false\nendpoint = tcp://det:9999\n"
                 "[security]\ncurve = true\nserver_key = /s\nclients = /c\n",
                 5, "ingest.bind = false connects to a detector");
    tl_settings_defaults(&c);
    ck_assert_int_eq(load_text(&c, "[security]\ncurve = true\nserver_key = /s\nclients = /c\n"
                                   "plain = slices,ingest\nrelease_hosts = 10.0.0.7,det-1\n"),
                     0);
    ck_assert(c.curve);
    ck_assert(tl_settings_plain(&c, "ingest") && tl_settings_plain(&c, "slices"));
    ck_assert(!tl_settings_plain(&c, "control") && !tl_settings_plain(&c, "slice"));
    ck_assert_str_eq(c.release_hosts, "10.0.0.7,det-1");

    /* daemon.gpus: all, or distinct ordinals */
    int gpus[TL_SETTINGS_MAX_GPUS], n = 99;
    tl_settings_defaults(&c);
    ck_assert_int_eq(tl_settings_gpus(&c, gpus, &n, err, sizeof err), 0);
    ck_assert_int_eq(n, 0); /* empty: daemon.device alone */
    ck_assert_int_eq(tl_settings_set(&c, "daemon.gpus", "all", err, sizeof err), 0);
    ck_assert_int_eq(tl_settings_gpus(&c, gpus, &n, err, sizeof err), 0);
    ck_assert_int_eq(n, -1);
    ck_assert_int_eq(tl_settings_set(&c, "daemon.gpus", "2,0", err, sizeof err), 0);
    ck_assert_int_eq(tl_settings_gpus(&c, gpus, &n, err, sizeof err), 0);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(gpus[0], 2);
    ck_assert_int_eq(gpus[1], 0);
    const char *bad[] = {"0,0", "1,x", "64", "-1", "0,,1x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (tl_settings_set(&c, "daemon.gpus", bad[i], err, sizeof err) != 0)
            continue; /* refused as text already */
        ck_assert_msg(tl_settings_check(&c, err, sizeof err) == -1, "%s accepted", bad[i]);
        ck_assert_msg(strstr(err, "daemon.gpus"), "%s", err);
    }
}
END_TEST

struct seen {
    int n;
    char keys[8][64];
    bool reload[8];
};

static void record(const char *key, bool reloadable, void *ctx)
{
    struct seen *s = ctx;
    if (s->n < 8) {
        snprintf(s->keys[s->n], sizeof s->keys[0], "%s", key);
        s->reload[s->n] = reloadable;
    }
    s->n++;
}

START_TEST(test_diff)
{
    tl_settings a, b;
    tl_settings_defaults(&a);
    tl_settings_defaults(&b);
    struct seen s = {0};
    ck_assert_int_eq(tl_settings_diff(&a, &b, record, &s), 0);
    ck_assert_int_eq(s.n, 0);

    b.log_level = TL_LOG_DEBUG;
    snprintf(b.ingest_endpoint, sizeof b.ingest_endpoint, "tcp://*:6000");
    b.update_on_complete = false;
    b.status_interval = 5.5;
    b.weights = TL_SETTINGS_WEIGHTS_ANGLES;
    ck_assert_int_eq(tl_settings_diff(&a, &b, record, &s), 5);
    ck_assert_int_eq(s.n, 5);
    const char *want[] = {"daemon.log_level", "daemon.status_interval", "ingest.endpoint",
                          "slices.update_on_complete", "engine.weights"};
    const bool rel[] = {true, true, false, true, true};
    for (int i = 0; i < 5; i++) {
        ck_assert_str_eq(s.keys[i], want[i]);
        ck_assert_int_eq(s.reload[i], rel[i]);
    }
    ck_assert_int_eq(tl_settings_diff(&b, &a, NULL, NULL), 5);
}
END_TEST

/* What write prints, load reads back to the same values, with and without help. */
START_TEST(test_write_roundtrip)
{
    tl_settings c;
    tl_settings_defaults(&c);
    c.log_level = TL_LOG_WARN;
    c.backend = TL_SETTINGS_BACKEND_CUDA;
    c.device = 3;
    c.status_interval = 0.1;
    c.update_max_rate = 1.0 / 3.0; /* needs all 17 digits */
    c.ingest_bind = false;
    snprintf(c.ingest_endpoint, sizeof c.ingest_endpoint, "tcp://det.example:5600");
    c.filter = TL_SETTINGS_FILTER_PARZEN;
    c.update_on_complete = false;
    for (int help = 0; help <= 1; help++) {
        char *text = write_to_string(&c, help);
        tl_settings d;
        tl_settings_defaults(&d);
        ck_assert_msg(load_text(&d, text) == 0, "%s\n%s", err, text);
        ck_assert_int_eq(tl_settings_diff(&c, &d, NULL, NULL), 0);
        if (help) { /* changed keys are set, defaults commented out */
            ck_assert_ptr_nonnull(strstr(text, "\nfilter = parzen\n"));
            ck_assert_ptr_nonnull(strstr(text, "\n#quality = exact\n"));
        } else {
            ck_assert_ptr_nonnull(strstr(text, "[daemon]\nlog_level = warn\n"));
            ck_assert_ptr_nonnull(strstr(text, "\nquality = exact\n"));
        }
        free(text);
    }
}
END_TEST

static char *read_file(const char *p)
{
    FILE *f = fopen(p, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", p);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        fwrite(chunk, 1, n, m);
    fclose(f);
    fclose(m);
    return buf;
}

/* etc/tomolive.conf is exactly the defaults with help, and every line in it is usable. */
START_TEST(test_shipped_conf)
{
    const char *src = getenv("top_srcdir");
    char p[1024];
    snprintf(p, sizeof p, "%s/etc/tomolive.conf", src && *src ? src : ".");
    tl_settings def;
    tl_settings_defaults(&def);
    char *want = write_to_string(&def, true);
    char *have = read_file(p);
    ck_assert_msg(strcmp(have, want) == 0,
                  "%s differs from tl_settings_write(defaults, with_help); regenerate it with "
                  "tests/unit/check_config --print-default-conf",
                  p);

    tl_settings c;
    tl_settings_defaults(&c);
    c.threads = 5;
    ck_assert_msg(tl_settings_load(&c, p, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(c.threads, 5); /* all commented out: nothing set */

    /* uncomment every "#key = value" line: still loads, still the defaults */
    char *un = malloc(strlen(have) + 1), *o = un;
    int keys = 0;
    for (const char *l = have; *l;) {
        size_t len = strcspn(l, "\n");
        ck_assert_uint_le(len, 198);
        size_t name = strspn(l + 1, "abcdefghijklmnopqrstuvwxyz_");
        bool key = l[0] == '#' && name > 0 && strncmp(l + 1 + name, " = ", 3) == 0;
        keys += key;
        memcpy(o, l + key, len - key);
        o += len - key;
        l += len;
        if (*l == '\n')
            *o++ = *l++;
    }
    *o = '\0';
    /* as many as the plain dump (every key, set) has lines */
    char *dump = NULL;
    size_t dlen = 0;
    FILE *mf = open_memstream(&dump, &dlen);
    tl_settings_write(&def, mf, false);
    fclose(mf);
    int expect = 0;
    for (const char *q = dump; (q = strstr(q, " = ")) != NULL; q += 3)
        expect++;
    free(dump);
    ck_assert_int_eq(keys, expect);
    tl_settings_defaults(&c);
    ck_assert_msg(load_text(&c, un) == 0, "%s", err);
    ck_assert_int_eq(tl_settings_diff(&c, &def, NULL, NULL), 0);
    free(un);
    free(have);
    free(want);
}
END_TEST

static Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_enum_names);
    tcase_add_test(tc, test_load_valid);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_long_line);
    tcase_add_test(tc, test_hash_mid_line);
    tcase_add_test(tc, test_endpoints);
    tcase_add_test(tc, test_overrides);
    tcase_add_test(tc, test_check_across_keys);
    tcase_add_test(tc, test_diff);
    tcase_add_test(tc, test_write_roundtrip);
    tcase_add_test(tc, test_shipped_conf);
    suite_add_tcase(s, tc);
    return s;
}

/* `check_config --print-default-conf > etc/tomolive.conf` regenerates the shipped file. */
int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--print-default-conf") == 0) {
        tl_settings def;
        tl_settings_defaults(&def);
        tl_settings_write(&def, stdout, true);
        return ferror(stdout) ? 1 : 0;
    }
    tmpdir = tl_tmpdir("config");
    if (!tmpdir)
        return 99;
    int rc = tl_run_suite(config_suite(), false);
    tl_rm_rf(tmpdir);
    return rc;
}
