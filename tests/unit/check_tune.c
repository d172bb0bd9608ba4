/* check_tune.c — the autotuner (gpu/tune.h) on the CPU backend: tl_tune_run times the one
 * kernel for every batch size the engine allows, the choice rule (tl_tune_choose) on
 * made-up rankings of several modes, the engine's acceptance of choices, and the cache
 * file: round trip, the key (device, driver, runtime, shape), replacement, corrupt and
 * hostile files, directory creation and the default path.
 */
#include "config.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gpu/engine.h"
#include "gpu/tune.h"
#include "tests/testutil.h"

#define ROWS 4
#define COLS 48
#define WINDOW 24

static char *dir;
static char path[1024];

static void setup(void)
{
    dir = tl_tmpdir("tune");
    ck_assert_ptr_nonnull(dir);
    snprintf(path, sizeof path, "%s/cache/tune.json", dir);
}

static void teardown(void)
{
    tl_rm_rf(dir);
    free(dir);
}

static tl_engine *make(uint32_t rows)
{
    tl_engine_config c;
    tl_engine_config_init(&c, rows, COLS, WINDOW);
    c.backend = TL_BACKEND_CPU;
    c.dtype = TL_DTYPE_F32;
    c.already_linear = true;
    c.threads = 2;
    tl_engine *e = NULL;
    ck_assert_msg(tl_engine_create(&c, &e) == TL_OK, "create: %s", tl_engine_last_error(NULL));
    return e;
}

static const tl_tune_shape shape = {.height = COLS, .width = COLS, .window = WINDOW, .batch = 4};
/* a quick tuning: the test is about what is measured, not how well */
static const tl_tune_options quick = {.budget_s = 0.2, .min_reps = 1, .max_reps = 3};

static void write_file(const char *p, const char *text)
{
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* ---- tuning ------------------------------------------------------------------------------ */

START_TEST(run_cpu)
{
    tl_engine *e = make(ROWS);
    static tl_tune_result r;
    ck_assert_msg(tl_tune_run(e, &shape, &quick, &r) == TL_OK, "%s", tl_tune_last_error());
    ck_assert_uint_eq(r.nentries, 3);
    for (size_t i = 0; i < r.nentries; i++) {
        ck_assert_str_eq(r.entries[i].kernel, "cpu-f32");
        ck_assert_int_eq(r.entries[i].quality, TL_QUALITY_EXACT);
        ck_assert_uint_eq(r.entries[i].slices, 1);
        ck_assert_uint_eq(r.entries[i].batch, 1u << i); /* 1, 2, 4 */
        ck_assert(r.entries[i].ms > 0);
        double ups = (double)COLS * COLS * WINDOW * r.entries[i].batch / (r.entries[i].ms * 1e-3);
        ck_assert_double_eq_tol(r.entries[i].updates_per_s, ups, ups * 1e-9);
    }
    for (int q = 0; q < TL_QUALITY_COUNT; q++) {
        ck_assert_str_eq(r.choice.single[q], "cpu-f32");
        ck_assert_str_eq(r.choice.batch[q], "cpu-f32");
    }
    ck_assert_uint_eq(r.choice.height, COLS);
    ck_assert_uint_eq(r.choice.width, COLS);
    ck_assert(r.reps >= 1 && r.reps <= 3);
    ck_assert(r.seconds > 0 && r.when > 0);
    ck_assert_str_eq(r.device.uuid, "cpu");
    ck_assert(memcmp(&r.shape, &shape, sizeof shape) == 0);

    /* the slices added for timing are gone, and no choice was set */
    tl_engine_state st;
    tl_engine_get_state(e, &st);
    ck_assert_int_eq(st.slices, 0);
    ck_assert(!tl_engine_get_choice(e, COLS, COLS, NULL));
    ck_assert_int_eq(tl_engine_set_choice(e, &r.choice), TL_OK);
    tl_kernel_choice got;
    ck_assert(tl_engine_get_choice(e, COLS, COLS, &got));
    ck_assert_str_eq(got.batch[TL_QUALITY_PREVIEW], "cpu-f32");

    tl_kernel_choice bad = r.choice;
    snprintf(bad.single[TL_QUALITY_FAST], sizeof bad.single[0], "no-such-kernel");
    ck_assert_int_eq(tl_engine_set_choice(e, &bad), TL_EINVAL);
    tl_engine_destroy(e);
}
END_TEST

START_TEST(run_batches_limited)
{
    /* two detector rows: batches 1 and 2 only; a shape of batch 1: batch 1 only */
    tl_engine *e = make(2);
    static tl_tune_result r;
    ck_assert_int_eq(tl_tune_run(e, &shape, &quick, &r), TL_OK);
    ck_assert_uint_eq(r.nentries, 2);
    ck_assert_uint_eq(r.entries[1].batch, 2);
    tl_tune_shape one = shape;
    one.batch = 1;
    ck_assert_int_eq(tl_tune_run(e, &one, NULL /* defaults */, &r), TL_OK);
    ck_assert_uint_eq(r.nentries, 1);
    ck_assert(r.reps >= 3 && r.reps <= 20);

    tl_tune_shape bad = shape;
    bad.window = WINDOW + 1;
    ck_assert_int_eq(tl_tune_run(e, &bad, &quick, &r), TL_EINVAL);
    ck_assert(strstr(tl_tune_last_error(), "window") != NULL);
    bad = shape;
    bad.height = 0;
    ck_assert_int_eq(tl_tune_run(e, &bad, &quick, &r), TL_EINVAL);
    bad = shape;
    bad.batch = 3;
    ck_assert_int_eq(tl_tune_run(e, &bad, &quick, &r), TL_EINVAL);
    tl_engine_destroy(e);
}
END_TEST

/* ---- the choice rule --------------------------------------------------------------------- */

static void add(tl_tune_result *r, const char *k, tl_quality q, uint32_t batch, double ms)
{
    tl_tune_entry *t = &r->entries[r->nentries++];
    snprintf(t->kernel, sizeof t->kernel, "%s", k);
    t->quality = q;
    t->slices = 1;
    t->batch = batch;
    t->ms = ms;
    t->updates_per_s = 1e6 * batch / ms;
}

START_TEST(choose_by_mode)
{
    static tl_tune_result r;
    memset(&r, 0, sizeof r);
    r.shape = (tl_tune_shape){.height = 64, .width = 32, .window = 100, .batch = 4};
    add(&r, "exact-a", TL_QUALITY_EXACT, 1, 10);
    add(&r, "exact-a", TL_QUALITY_EXACT, 4, 30);  /* 1.33e5/ms: exact's best batch */
    add(&r, "exact-b", TL_QUALITY_EXACT, 1, 8);   /* exact's fastest single */
    add(&r, "exact-b", TL_QUALITY_EXACT, 2, 16);  /* 1.25e5 */
    add(&r, "fast-a", TL_QUALITY_FAST, 1, 9);     /* slower than exact-b: fast gets exact-b */
    add(&r, "fast-a", TL_QUALITY_FAST, 4, 20);    /* 2e5: fast's best batch */
    add(&r, "prev-a", TL_QUALITY_PREVIEW, 1, 6);  /* preview's single (1.67e5) */
    add(&r, "prev-a", TL_QUALITY_PREVIEW, 2, 10); /* 2e5, a tie with fast-a at batch 4 */
    add(&r, "prev-b", TL_QUALITY_PREVIEW, 4, 20); /* 2e5 at batch 4: the tie goes to batch 2 */
    tl_tune_choose(&r);
    ck_assert_uint_eq(r.choice.height, 64);
    ck_assert_uint_eq(r.choice.width, 32);
    ck_assert_str_eq(r.choice.single[TL_QUALITY_EXACT], "exact-b");
    ck_assert_str_eq(r.choice.single[TL_QUALITY_FAST], "exact-b");
    ck_assert_str_eq(r.choice.single[TL_QUALITY_PREVIEW], "prev-a");
    ck_assert_str_eq(r.choice.batch[TL_QUALITY_EXACT], "exact-a");
    ck_assert_str_eq(r.choice.batch[TL_QUALITY_FAST], "fast-a");
    ck_assert_str_eq(r.choice.batch[TL_QUALITY_PREVIEW], "prev-a");

    /* only preview kernels: nothing for exact and fast; no batch-1 timing: no single */
    memset(&r, 0, sizeof r);
    add(&r, "prev-a", TL_QUALITY_PREVIEW, 2, 10);
    tl_tune_choose(&r);
    ck_assert_str_eq(r.choice.single[TL_QUALITY_PREVIEW], "");
    ck_assert_str_eq(r.choice.batch[TL_QUALITY_PREVIEW], "prev-a");
    ck_assert_str_eq(r.choice.batch[TL_QUALITY_EXACT], "");
    ck_assert_str_eq(r.choice.single[TL_QUALITY_FAST], "");
}
END_TEST

/* ---- the cache --------------------------------------------------------------------------- */

/* A result keyed to engine e with made-up timings (no tuning needed). */
static void fake(tl_tune_result *r, const tl_engine *e, const tl_tune_shape *sh, double ms)
{
    memset(r, 0, sizeof *r);
    r->shape = *sh;
    tl_engine_device_id(e, &r->device);
    for (uint32_t b = 1; b <= sh->batch; b *= 2)
        add(r, "cpu-f32", TL_QUALITY_EXACT, b, ms * b);
    r->entries[0].ms = ms + 1.0 / 3; /* not a short decimal: the round trip must be exact */
    r->when = 1700000000;
    r->reps = 7;
    r->seconds = 1.5;
    tl_tune_choose(r);
}

static void assert_same(const tl_tune_result *a, const tl_tune_result *b)
{
    ck_assert(memcmp(&a->shape, &b->shape, sizeof a->shape) == 0);
    ck_assert(memcmp(&a->device, &b->device, sizeof a->device) == 0);
    ck_assert(memcmp(&a->choice, &b->choice, sizeof a->choice) == 0);
    ck_assert_uint_eq(a->nentries, b->nentries);
    for (size_t i = 0; i < a->nentries; i++) {
        const tl_tune_entry *x = &a->entries[i], *y = &b->entries[i];
        ck_assert_str_eq(x->kernel, y->kernel);
        ck_assert_int_eq(x->quality, y->quality);
        ck_assert_uint_eq(x->slices, y->slices);
        ck_assert_uint_eq(x->batch, y->batch);
        ck_assert(x->ms == y->ms);
        ck_assert(x->updates_per_s == y->updates_per_s);
    }
    ck_assert_int_eq(a->when, b->when);
    ck_assert_int_eq(a->reps, b->reps);
}

START_TEST(cache_round_trip)
{
    tl_engine *e = make(ROWS);
    static tl_tune_result r, got;
    ck_assert_int_eq(tl_tune_cache_lookup(path, e, &shape, &got), TL_ENOTFOUND);
    ck_assert_msg(tl_tune_run(e, &shape, &quick, &r) == TL_OK, "%s", tl_tune_last_error());
    /* the directory does not exist yet: created */
    ck_assert_msg(tl_tune_cache_store(path, &r) == TL_OK, "%s", tl_tune_last_error());
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_msg(tl_tune_cache_lookup(path, e, &shape, &got) == TL_OK, "%s",
                  tl_tune_last_error());
    assert_same(&r, &got);
    ck_assert(got.seconds == 0); /* nothing was timed */
    ck_assert_int_eq(tl_engine_set_choice(e, &got.choice), TL_OK);
    tl_engine_destroy(e);
}
END_TEST

/* Cone and parallel beam keep their own entries for the same device and shape: each has
 * kernels of its own (a CUDA engine lists only its geometry's), so one's choice must never
 * be looked up, or overwritten, by the other's. */
START_TEST(cache_geometry)
{
    tl_engine *par = make(ROWS);
    tl_engine_config c;
    tl_engine_config_init(&c, ROWS, COLS, WINDOW);
    c.backend = TL_BACKEND_CPU;
    c.dtype = TL_DTYPE_F32;
    c.already_linear = true;
    c.threads = 2;
    c.geometry = TL_GEOMETRY_CONE;
    c.cone = (tl_cone_config){.source_origin = 200, .source_detector = 400, .pixel_u = 1,
                              .pixel_v = 1};
    tl_engine *cone = NULL;
    ck_assert_msg(tl_engine_create(&c, &cone) == TL_OK, "%s", tl_engine_last_error(NULL));
    static tl_tune_result rp, rc, got;
    fake(&rp, par, &shape, 2.0);
    ck_assert_int_eq(tl_tune_cache_store(path, &rp), TL_OK);
    ck_assert_int_eq(tl_tune_cache_lookup(path, cone, &shape, &got), TL_ENOTFOUND);
    ck_assert_msg(tl_tune_run(cone, &shape, &quick, &rc) == TL_OK, "%s", tl_tune_last_error());
    ck_assert_int_eq(rc.shape.geometry, TL_GEOMETRY_CONE);
    ck_assert_int_eq(tl_tune_cache_store(path, &rc), TL_OK);
    ck_assert_int_eq(tl_tune_cache_lookup(path, cone, &shape, &got), TL_OK);
    ck_assert_int_eq(got.shape.geometry, TL_GEOMETRY_CONE);
    ck_assert(got.when == rc.when);
    ck_assert_int_eq(tl_tune_cache_lookup(path, par, &shape, &got), TL_OK); /* still there */
    ck_assert_int_eq(got.shape.geometry, TL_GEOMETRY_PARALLEL);
    ck_assert(got.when == rp.when);
    tl_engine_destroy(par);
    tl_engine_destroy(cone);
}
END_TEST

START_TEST(cache_key)
{
    tl_engine *e = make(ROWS);
    static tl_tune_result r, got;
    fake(&r, e, &shape, 2.0);
    ck_assert_int_eq(tl_tune_cache_store(path, &r), TL_OK);
    /* another device, driver or runtime: not this engine's entry */
    const size_t offs[] = {offsetof(tl_device_id, uuid), offsetof(tl_device_id, driver),
                           offsetof(tl_device_id, runtime), offsetof(tl_device_id, name)};
    for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
        char p2[1100];
        snprintf(p2, sizeof p2, "%s/other%zu.json", dir, i);
        tl_tune_result o = r;
        strcpy((char *)&o.device + offs[i], "other");
        ck_assert_int_eq(tl_tune_cache_store(p2, &o), TL_OK);
        ck_assert_int_eq(tl_tune_cache_lookup(p2, e, &shape, &got), TL_ENOTFOUND);
    }
    /* another shape: not found; then stored as well, and both are found */
    const tl_tune_shape others[] = {{COLS + 1, COLS, WINDOW, 4, TL_GEOMETRY_PARALLEL},
                                    {COLS, COLS + 1, WINDOW, 4, TL_GEOMETRY_PARALLEL},
                                    {COLS, COLS, WINDOW + 1, 4, TL_GEOMETRY_PARALLEL},
                                    {COLS, COLS, WINDOW, 2, TL_GEOMETRY_PARALLEL}};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
        ck_assert_int_eq(tl_tune_cache_lookup(path, e, &others[i], &got), TL_ENOTFOUND);
    static tl_tune_result r2;
    fake(&r2, e, &others[3], 5.0);
    ck_assert_int_eq(tl_tune_cache_store(path, &r2), TL_OK);
    ck_assert_int_eq(tl_tune_cache_lookup(path, e, &shape, &got), TL_OK);
    assert_same(&r, &got);
    ck_assert_int_eq(tl_tune_cache_lookup(path, e, &others[3], &got), TL_OK);
    assert_same(&r2, &got);

    /* the same key again replaces its entry */
    fake(&r, e, &shape, 3.0);
    ck_assert_int_eq(tl_tune_cache_store(path, &r), TL_OK);
    ck_assert_int_eq(tl_tune_cache_lookup(path, e, &shape, &got), TL_OK);
    assert_same(&r, &got);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char text[65536];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    int keys = 0;
    for (const char *p = text; (p = strstr(p, "\"reps\"")) != NULL; p++)
        keys++;
    ck_assert_int_eq(keys, 2);
    tl_engine_destroy(e);
}
END_TEST

START_TEST(cache_corrupt)
{
    tl_engine *e = make(ROWS);
    static tl_tune_result r;
    fake(&r, e, &shape, 2.0);
    ck_assert_int_eq(tl_tune_cache_store(path, &r), TL_OK); /* makes the directory */
    const char *bad[] = {
        "{\"version\": 1, \"entries\": [", /* truncated */
        "not json at all",
        "[1, 2, 3]",                         /* JSON, not a cache */
        "{\"version\": 2, \"entries\": []}", /* a later format */
        "{\"version\": 1, \"entries\": {}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(path, bad[i]);
        ck_assert_int_eq(tl_tune_cache_lookup(path, e, &shape, &r), TL_EIO);
        ck_assert_msg(strstr(tl_tune_last_error(), path) != NULL, "%s", tl_tune_last_error());
        /* and store does not overwrite it */
        fake(&r, e, &shape, 2.0);
        ck_assert_int_eq(tl_tune_cache_store(path, &r), TL_EIO);
    }
    write_file(path, "{\"version\": 1,\n \"entries\": [}");
    ck_assert_int_eq(tl_tune_cache_lookup(path, e, &shape, &r), TL_EIO);
    ck_assert_msg(strstr(tl_tune_last_error(), "line 2") != NULL, "%s", tl_tune_last_error());
    tl_engine_destroy(e);
}
END_TEST

/* Hostile entries with this engine's key: each is ignored (TL_ENOTFOUND), never read. */
START_TEST(cache_hostile)
{
    tl_engine *e = make(ROWS);
    tl_device_id d;
    tl_engine_device_id(e, &d);
    char key[512];
    snprintf(key, sizeof key,
             "\"device\": \"%s\", \"uuid\": \"%s\", \"driver\": \"%s\", "
             "\"runtime\": \"%s\", \"height\": %d, \"width\": %d, \"window\": %d, \"batch\": 4",
             d.name, d.uuid, d.driver, d.runtime, COLS, COLS, WINDOW);
    const char *choice = "\"choice\": {\"single\": {\"exact\": \"cpu-f32\", \"fast\": \"\", "
                         "\"preview\": \"\"}, \"batch\": {\"exact\": \"\", \"fast\": \"\", "
                         "\"preview\": \"\"}}";
    const char *rest = "\"cc\": [0, 0], \"sm_count\": 2, \"when\": 5, \"reps\": 3";
    const char *timing = "{\"kernel\": \"cpu-f32\", \"quality\": \"exact\", \"slices\": 1, "
                         "\"batch\": 1, \"ms\": 1.5, \"updates_per_s\": 1e9}";
    size_t cap = 64 + 200 * (TL_TUNE_MAX_ENTRIES + 1);
    char *many = malloc(cap), *doc = malloc(cap + 2048);
    ck_assert(many && doc);
    strcpy(many, "[");
    for (int i = 0; i <= TL_TUNE_MAX_ENTRIES; i++) /* one more than a result holds */
        strcat(strcat(many, i ? ", " : ""), timing);
    strcat(many, "]");
    char one[300];
    snprintf(one, sizeof one, "[%s]", timing);
    char longname[100];
    memset(longname, 'k', 40);
    longname[40] = '\0';
    char longchoice[400];
    snprintf(longchoice, sizeof longchoice,
             "\"choice\": {\"single\": {\"exact\": \"%s\", "
             "\"fast\": \"\", \"preview\": \"\"}, \"batch\": {\"exact\": \"\", \"fast\": \"\", "
             "\"preview\": \"\"}}",
             longname);
    const struct {
        const char *choice, *rest, *entries;
    } cases[] = {
        {choice, rest, many},    /* too many timings */
        {longchoice, rest, one}, /* name longer than a field */
        {choice, "\"cc\": [0, 0], \"sm_count\": \"2\", \"when\": 5, \"reps\": 3", one},
        {choice, "\"cc\": 0, \"sm_count\": 2, \"when\": 5, \"reps\": 3", one},
        {choice, "\"cc\": [0, 0], \"sm_count\": 2, \"when\": 5.5, \"reps\": 3", one},
        {"\"choice\": [1]", rest, one},
        {choice, rest, "[{\"kernel\": 7}]"},
        {choice, rest,
         "[{\"kernel\": \"cpu-f32\", \"quality\": \"superb\", \"slices\": 1, "
         "\"batch\": 1, \"ms\": 1, \"updates_per_s\": 1}]"},
        {choice, rest,
         "[{\"kernel\": \"cpu-f32\", \"quality\": \"exact\", \"slices\": -1, "
         "\"batch\": 1, \"ms\": 1, \"updates_per_s\": 1}]"},
        {choice, rest,
         "[{\"kernel\": \"cpu-f32\", \"quality\": \"exact\", \"slices\": 1, "
         "\"batch\": 1, \"ms\": -1, \"updates_per_s\": 1}]"},
        {choice, rest,
         "[{\"kernel\": \"gone\", \"quality\": \"exact\", \"slices\": 1, "
         "\"batch\": 1, \"ms\": 1, \"updates_per_s\": 1}]"}, /* not a kernel */
        {choice, rest, "\"x\""},
    };
    char sub[1100];
    snprintf(sub, sizeof sub, "%s/cache", dir);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    static tl_tune_result r;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(doc, cap + 2048,
                 "{\"version\": 1, \"entries\": [7, \"x\", {%s, %s, %s, "
                 "\"entries\": %s}]}",
                 key, cases[i].choice, cases[i].rest, cases[i].entries);
        write_file(path, doc);
        ck_assert_msg(tl_tune_cache_lookup(path, e, &shape, &r) == TL_ENOTFOUND, "case %zu: %s", i,
                      tl_tune_last_error());
        /* the key matched and the entry was turned down, with the reason */
        ck_assert_msg(strstr(tl_tune_last_error(), "entry 2 ") != NULL, "case %zu: %s", i,
                      tl_tune_last_error());
    }
    /* the well-formed entry is read, beside the junk entries */
    snprintf(doc, cap + 2048,
             "{\"version\": 1, \"entries\": [7, \"x\", {%s, %s, %s, "
             "\"entries\": %s}]}",
             key, choice, rest, one);
    write_file(path, doc);
    ck_assert_msg(tl_tune_cache_lookup(path, e, &shape, &r) == TL_OK, "%s", tl_tune_last_error());
    ck_assert_str_eq(r.choice.single[0], "cpu-f32");
    ck_assert_uint_eq(r.nentries, 1);
    /* store keeps the junk it does not own, and replaces the entry */
    fake(&r, e, &shape, 4.0);
    ck_assert_int_eq(tl_tune_cache_store(path, &r), TL_OK);
    static tl_tune_result got;
    ck_assert_int_eq(tl_tune_cache_lookup(path, e, &shape, &got), TL_OK);
    assert_same(&r, &got);
    free(many);
    free(doc);
    tl_engine_destroy(e);
}
END_TEST

START_TEST(default_path)
{
    char buf[1024];
    setenv("TOMOLIVE_TUNE_CACHE", "/x/y.json", 1);
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    ck_assert_str_eq(tl_tune_default_path(buf, sizeof buf), "/x/y.json");
    unsetenv("TOMOLIVE_TUNE_CACHE");
    ck_assert_str_eq(tl_tune_default_path(buf, sizeof buf), "/xdg/tomolive/tune.json");
    setenv("TOMOLIVE_TUNE_CACHE", "", 1);    /* empty: unset */
    setenv("XDG_CACHE_HOME", "relative", 1); /* the XDG spec ignores it */
    setenv("HOME", "/home/me", 1);
    ck_assert_str_eq(tl_tune_default_path(buf, sizeof buf), "/home/me/.cache/tomolive/tune.json");
    unsetenv("XDG_CACHE_HOME");
    ck_assert_str_eq(tl_tune_default_path(buf, sizeof buf), "/home/me/.cache/tomolive/tune.json");
    char small[8];
    ck_assert_str_eq(tl_tune_default_path(small, sizeof small), ""); /* does not fit */

    /* NULL path: the default */
    setenv("TOMOLIVE_TUNE_CACHE", path, 1);
    tl_engine *e = make(ROWS);
    static tl_tune_result r, got;
    fake(&r, e, &shape, 2.0);
    ck_assert_int_eq(tl_tune_cache_store(NULL, &r), TL_OK);
    ck_assert_int_eq(tl_tune_cache_lookup(path, e, &shape, &got), TL_OK);
    ck_assert_int_eq(tl_tune_cache_lookup(NULL, e, &shape, &got), TL_OK);
    unsetenv("TOMOLIVE_TUNE_CACHE");
    tl_engine_destroy(e);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tune");
    TCase *tc = tcase_create("tune");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, run_cpu);
    tcase_add_test(tc, run_batches_limited);
    tcase_add_test(tc, choose_by_mode);
    tcase_add_test(tc, cache_round_trip);
    tcase_add_test(tc, cache_key);
    tcase_add_test(tc, cache_geometry);
    tcase_add_test(tc, cache_corrupt);
    tcase_add_test(tc, cache_hostile);
    tcase_add_test(tc, default_path);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
