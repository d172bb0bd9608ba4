/* tune_cache.c — the autotuner's cache file (tune.h): tuning results keyed by device and
 * shape, so a daemon restarting on the same card and scan does not tune again.
 *
 * One JSON document, so a person can read and edit it:
 *   {"version": 1, "entries": [{"device": ..., "uuid": ..., "driver": ..., "runtime": ...,
 *     "height": ..., "width": ..., "window": ..., "batch": ...,       <- the key
 *     ["geometry": "cone"],                        <- too, absent for parallel beam
 *     "cc": [9, 0], "sm_count": ..., "when": ..., "reps": ..., "seconds": ...,
 *     "choice": {"single": {"exact": ..., ...}, "batch": {...}},
 *     "entries": [{"kernel": ..., "quality": "exact", "slices": ..., "batch": ...,
 *                  "ms": ..., "updates_per_s": ...}, ...]}, ...]}
 * The file is read whole and written whole, atomically (temporary file in the same
 * directory, fsync, rename), so a reader never sees half a file and a crash keeps the old
 * one. Its content is not trusted: an entry with a wrong type, a string longer than its
 * field or more timings than a result holds is ignored, never copied. A file that is not
 * such a document is an error for both lookup and store: store does not overwrite what it
 * cannot read (it may be a file the user pointed at by mistake). Two processes storing at
 * once may lose one of the two entries (last rename wins), never corrupt the file.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpu/base/fail.h"
#include "gpu/tune.h"

#define CACHE_VERSION 1
/* A cache file larger than this is not ours (an entry is a few KiB). */
#define CACHE_MAX_BYTES (16 << 20)
/* Entries kept per file; the oldest go first (a card sees a handful of shapes). */
#define CACHE_MAX_KEYS 256
#define CACHE_DIR_MODE 0755
#define CACHE_FILE_MODE 0644
#define CACHE_PATH_MAX 4096
/* Room for getpwuid_r's strings. */
#define PASSWD_BUF 4096
#define STR(x) #x
#define XSTR(x) STR(x)

/* tune.c's thread-local error buffer. */
tl_errbuf *tl_tune_errbuf(void);
#define fail(st, ...) tl_fail(tl_tune_errbuf(), (st), __VA_ARGS__)

static const char *const quality_keys[TL_QUALITY_COUNT] = {"exact", "fast", "preview"};

const char *tl_tune_default_path(char *buf, size_t len)
{
    if (len == 0)
        return buf;
    const char *env = getenv("TOMOLIVE_TUNE_CACHE");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n;
    if (env && *env)
        n = snprintf(buf, len, "%s", env);
    else if (xdg && xdg[0] == '/') /* the XDG spec ignores relative paths */
        n = snprintf(buf, len, "%s/tomolive/tune.json", xdg);
    else {
        struct passwd pw, *found = NULL;
        char pwbuf[PASSWD_BUF];
        if ((!home || !*home) && getpwuid_r(getuid(), &pw, pwbuf, sizeof pwbuf, &found) == 0 &&
            found)
            home = found->pw_dir; /* a service without $HOME */
        n = home && *home ? snprintf(buf, len, "%s/.cache/tomolive/tune.json", home) : -1;
    }
    if (n < 0 || (size_t)n >= len)
        buf[0] = '\0'; /* no home, or a path that does not fit: no cache */
    return buf;
}

static tl_status resolve_path(const char *path, char *buf, const char **out)
{
    *out = path ? path : tl_tune_default_path(buf, CACHE_PATH_MAX);
    if (!**out)
        return fail(TL_EINVAL, "tuning cache: no path (set TOMOLIVE_TUNE_CACHE or HOME)");
    return TL_OK;
}

/* ---- reading ------------------------------------------------------------------------- */

/* Loads the document; TL_ENOTFOUND when the file does not exist. */
static tl_status load(const char *path, json_t **root)
{
    *root = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return errno == ENOENT ? fail(TL_ENOTFOUND, "tuning cache %s does not exist", path)
                               : fail(TL_EIO, "tuning cache %s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode) || sb.st_size > CACHE_MAX_BYTES)
        return fail(TL_EIO, "tuning cache %s: not a regular file of at most %d bytes", path,
                    CACHE_MAX_BYTES);
    json_error_t err;
    json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    if (!j)
        return fail(TL_EIO, "tuning cache %s: line %d, column %d: %s", path, err.line, err.column,
                    err.text);
    json_t *v = json_object_get(j, "version");
    if (!json_is_object(j) || !json_is_integer(v) ||
        !json_is_array(json_object_get(j, "entries"))) {
        json_decref(j);
        return fail(TL_EIO,
                    "tuning cache %s: not a tuning cache (an object with \"version\" "
                    "and \"entries\")",
                    path);
    }
    long long version = (long long)json_integer_value(v);
    if (version != CACHE_VERSION) {
        json_decref(j);
        return fail(TL_EIO, "tuning cache %s: version %lld, this program reads version %d", path,
                    version, CACHE_VERSION);
    }
    *root = j;
    return TL_OK;
}

/* Copies a JSON string into a field of cap bytes; false when it is not a string or does
 * not fit. */
static bool get_str(const json_t *o, const char *key, char *dst, size_t cap)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_string(v) || json_string_length(v) >= cap ||
        strlen(json_string_value(v)) != json_string_length(v)) /* no embedded NUL */
        return false;
    memcpy(dst, json_string_value(v), json_string_length(v) + 1);
    return true;
}

static bool get_u32(const json_t *o, const char *key, uint32_t *dst)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX)
        return false;
    *dst = (uint32_t)json_integer_value(v);
    return true;
}

static bool as_int(const json_t *v, int *dst)
{
    if (!json_is_integer(v) || json_integer_value(v) < INT_MIN || json_integer_value(v) > INT_MAX)
        return false;
    *dst = (int)json_integer_value(v);
    return true;
}

static bool get_int(const json_t *o, const char *key, int *dst)
{
    return as_int(json_object_get(o, key), dst);
}

/* A finite number >= 0. */
static bool get_num(const json_t *o, const char *key, double *dst)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < 0)
        return false;
    *dst = json_number_value(v);
    return true;
}

static bool get_quality(const json_t *o, const char *key, tl_quality *q)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s && tl_quality_parse(s, q);
}

static bool same_str(const json_t *o, const char *key, const char *want)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s && strcmp(s, want) == 0;
}

/* An entry's geometry: "geometry": "cone", or parallel beam where the key is absent (the
 * entries written before cone beam). */
static tl_geometry entry_geometry(const json_t *o)
{
    return same_str(o, "geometry", "cone") ? TL_GEOMETRY_CONE : TL_GEOMETRY_PARALLEL;
}

static bool same_key(const json_t *o, const tl_device_id *d, const tl_tune_shape *sh,
                     tl_geometry geometry)
{
    tl_tune_shape k;
    return json_is_object(o) && entry_geometry(o) == geometry &&
           same_str(o, "device", d->name) && same_str(o, "uuid", d->uuid) &&
           same_str(o, "driver", d->driver) && same_str(o, "runtime", d->runtime) &&
           get_u32(o, "height", &k.height) && k.height == sh->height &&
           get_u32(o, "width", &k.width) && k.width == sh->width &&
           get_u32(o, "window", &k.window) && k.window == sh->window &&
           get_u32(o, "batch", &k.batch) && k.batch == sh->batch;
}

static bool get_choice(const json_t *o, tl_kernel_choice *c)
{
    const json_t *ch = json_object_get(o, "choice");
    const json_t *s = json_object_get(ch, "single"), *b = json_object_get(ch, "batch");
    if (!json_is_object(s) || !json_is_object(b))
        return false;
    for (int q = 0; q < TL_QUALITY_COUNT; q++)
        if (!get_str(s, quality_keys[q], c->single[q], sizeof c->single[q]) ||
            !get_str(b, quality_keys[q], c->batch[q], sizeof c->batch[q]))
            return false;
    return true;
}

static bool get_entry(const json_t *o, tl_tune_entry *t)
{
    return json_is_object(o) && get_str(o, "kernel", t->kernel, sizeof t->kernel) &&
           get_quality(o, "quality", &t->quality) && get_u32(o, "slices", &t->slices) &&
           get_u32(o, "batch", &t->batch) && get_num(o, "ms", &t->ms) &&
           get_num(o, "updates_per_s", &t->updates_per_s);
}

/* Fills r from a cache entry whose key matched; NULL when it is well formed, else why not. */
static const char *parse_result(const json_t *o, tl_tune_result *r)
{
    memset(r, 0, sizeof *r);
    tl_device_id *d = &r->device;
    const json_t *cc = json_object_get(o, "cc");
    bool dev = get_str(o, "device", d->name, sizeof d->name) &&
               get_str(o, "uuid", d->uuid, sizeof d->uuid) &&
               get_str(o, "driver", d->driver, sizeof d->driver) &&
               get_str(o, "runtime", d->runtime, sizeof d->runtime) &&
               get_int(o, "sm_count", &d->sm_count) && json_array_size(cc) == 2 &&
               as_int(json_array_get(cc, 0), &d->cc_major) &&
               as_int(json_array_get(cc, 1), &d->cc_minor);
    if (!dev)
        return "device fields";
    json_int_t when;
    if (!get_u32(o, "height", &r->shape.height) || !get_u32(o, "width", &r->shape.width) ||
        !get_u32(o, "window", &r->shape.window) || !get_u32(o, "batch", &r->shape.batch))
        return "shape fields";
    r->shape.geometry = entry_geometry(o);
    if (!json_is_integer(json_object_get(o, "when")) || !get_int(o, "reps", &r->reps))
        return "\"when\" or \"reps\"";
    when = json_integer_value(json_object_get(o, "when"));
    r->when = (int64_t)when;
    if (!get_choice(o, &r->choice))
        return "\"choice\"";
    r->choice.height = r->shape.height;
    r->choice.width = r->shape.width;
    const json_t *list = json_object_get(o, "entries");
    if (!json_is_array(list) || json_array_size(list) > TL_TUNE_MAX_ENTRIES)
        return "\"entries\" (not an array of at most " XSTR(TL_TUNE_MAX_ENTRIES) " timings)";
    for (size_t i = 0; i < json_array_size(list); i++)
        if (!get_entry(json_array_get(list, i), &r->entries[r->nentries++]))
            return "a timing in \"entries\"";
    return NULL; /* seconds stays 0: nothing was timed now */
}

/* The first kernel r names that the engine does not have, NULL when it has them all (a
 * different build may have other kernels: then the ranking is stale and the shape is
 * tuned again). */
static const char *missing_kernel(const tl_engine *e, const tl_tune_result *r)
{
    tl_kernel_info k[TL_TUNE_MAX_ENTRIES];
    size_t nk = tl_engine_kernels(e, k, TL_TUNE_MAX_ENTRIES);
    if (nk > TL_TUNE_MAX_ENTRIES)
        nk = TL_TUNE_MAX_ENTRIES;
    const char *names[2 * TL_QUALITY_COUNT + TL_TUNE_MAX_ENTRIES];
    size_t n = 0;
    for (int q = 0; q < TL_QUALITY_COUNT; q++) {
        names[n++] = r->choice.single[q];
        names[n++] = r->choice.batch[q];
    }
    for (size_t i = 0; i < r->nentries; i++)
        names[n++] = r->entries[i].kernel;
    for (size_t i = 0; i < n; i++) {
        bool found = !names[i][0];
        for (size_t j = 0; !found && j < nk; j++)
            found = strcmp(k[j].name, names[i]) == 0;
        if (!found)
            return names[i];
    }
    return NULL;
}

tl_status tl_tune_cache_lookup(const char *path, const tl_engine *e, const tl_tune_shape *shape,
                               tl_tune_result *r)
{
    char buf[CACHE_PATH_MAX];
    if (!e || !shape || !r)
        return fail(TL_EINVAL, "tl_tune_cache_lookup: no engine, shape or result");
    tl_status st = resolve_path(path, buf, &path);
    json_t *root = NULL;
    if (st == TL_OK)
        st = load(path, &root);
    if (st != TL_OK)
        return st;
    tl_device_id d;
    tl_engine_device_id(e, &d);
    const json_t *list = json_object_get(root, "entries");
    st = fail(TL_ENOTFOUND,
              "tuning cache %s: nothing for %s (%s), %ux%u slices, window %u, "
              "batch %u",
              path, d.name, d.uuid, shape->height, shape->width, shape->window, shape->batch);
    /* the newest entry of the key wins (store appends, a hand-edited file may repeat) */
    for (size_t i = json_array_size(list); i-- > 0;) {
        const json_t *o = json_array_get(list, i);
        if (!same_key(o, &d, shape, tl_engine_get_config(e)->geometry))
            continue;
        const char *why = parse_result(o, r), *gone = NULL;
        if (!why && (gone = missing_kernel(e, r)) == NULL) {
            st = TL_OK;
            break;
        }
        if (why)
            fail(TL_ENOTFOUND, "tuning cache %s: entry %zu has bad %s: ignored", path, i, why);
        else
            fail(TL_ENOTFOUND,
                 "tuning cache %s: entry %zu names kernel \"%s\", which this "
                 "build does not have: to be tuned again",
                 path, i, gone);
    }
    if (st != TL_OK)
        memset(r, 0, sizeof *r);
    json_decref(root);
    return st;
}

/* ---- writing ------------------------------------------------------------------------- */

/* Sets key to v, taking the reference; false when v or o is NULL (out of memory, or a real
 * that JSON cannot hold), and then v is released. */
static bool put(json_t *o, const char *key, json_t *v)
{
    return json_object_set_new(o, key, v) == 0;
}

/* Attaches a new container v under key of o and returns it (borrowed: o owns it), NULL on
 * failure. Attaching before filling means one json_decref(o) frees everything. */
static json_t *child(json_t *o, const char *key, json_t *v)
{
    return put(o, key, v) ? v : NULL;
}

static json_t *append(json_t *list, json_t *v)
{
    return json_array_append_new(list, v) == 0 ? v : NULL;
}

/* A fixed-size field as a JSON string (the field need not be terminated). */
static json_t *str(const char *s, size_t cap)
{
    return json_stringn(s, strnlen(s, cap));
}

static json_t *result_json(const tl_tune_result *r)
{
    const tl_device_id *d = &r->device;
    json_t *o = json_object();
    /* the key first, so a person reading the file sees what each entry is for */
    bool ok = put(o, "device", str(d->name, sizeof d->name)) &&
              put(o, "uuid", str(d->uuid, sizeof d->uuid)) &&
              put(o, "driver", str(d->driver, sizeof d->driver)) &&
              put(o, "runtime", str(d->runtime, sizeof d->runtime)) &&
              put(o, "height", json_integer(r->shape.height)) &&
              put(o, "width", json_integer(r->shape.width)) &&
              put(o, "window", json_integer(r->shape.window)) &&
              put(o, "batch", json_integer(r->shape.batch)) &&
              (r->shape.geometry != TL_GEOMETRY_CONE || put(o, "geometry", json_string("cone")));
    json_t *cc = ok ? child(o, "cc", json_array()) : NULL;
    ok = cc && append(cc, json_integer(d->cc_major)) && append(cc, json_integer(d->cc_minor)) &&
         put(o, "sm_count", json_integer(d->sm_count)) && put(o, "when", json_integer(r->when)) &&
         put(o, "reps", json_integer(r->reps)) && put(o, "seconds", json_real(r->seconds));
    json_t *ch = ok ? child(o, "choice", json_object()) : NULL;
    json_t *single = ch ? child(ch, "single", json_object()) : NULL;
    json_t *batch = single ? child(ch, "batch", json_object()) : NULL;
    ok = batch != NULL;
    for (int q = 0; ok && q < TL_QUALITY_COUNT; q++)
        ok = put(single, quality_keys[q], str(r->choice.single[q], sizeof r->choice.single[q])) &&
             put(batch, quality_keys[q], str(r->choice.batch[q], sizeof r->choice.batch[q]));
    json_t *list = ok ? child(o, "entries", json_array()) : NULL;
    ok = list != NULL;
    for (size_t i = 0; ok && i < r->nentries && i < TL_TUNE_MAX_ENTRIES; i++) {
        const tl_tune_entry *t = &r->entries[i];
        json_t *x = append(list, json_object());
        ok = x && put(x, "kernel", str(t->kernel, sizeof t->kernel)) &&
             put(x, "quality", json_string(tl_quality_name(t->quality))) &&
             put(x, "slices", json_integer(t->slices)) &&
             put(x, "batch", json_integer(t->batch)) && put(x, "ms", json_real(t->ms)) &&
             put(x, "updates_per_s", json_real(t->updates_per_s));
    }
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* mkdir -p of the directory part of path. */
static tl_status make_dirs(const char *path)
{
    char dir[CACHE_PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
        return fail(TL_EINVAL, "tuning cache path too long");
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return TL_OK; /* the current directory, or / */
    *slash = '\0';
    for (char *p = dir + 1;; p++) {
        bool end = *p == '\0';
        if (*p == '/' || end) {
            *p = '\0';
            struct stat sb;
            int err = mkdir(dir, CACHE_DIR_MODE) == 0 ? 0 : errno;
            if (err && !(stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode)))
                return fail(TL_EIO, "tuning cache: cannot create directory %s: %s", dir,
                            strerror(err));
            if (end)
                return TL_OK;
            *p = '/';
        }
    }
}

/* Writes text to path atomically: a temporary file beside it, fsync, rename. */
static tl_status write_atomic(const char *path, const char *text)
{
    char tmp[CACHE_PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.XXXXXX", path) >= (int)sizeof tmp)
        return fail(TL_EINVAL, "tuning cache path too long");
    int fd = mkstemp(tmp);
    if (fd < 0)
        return fail(TL_EIO, "tuning cache: cannot create %s: %s", tmp, strerror(errno));
    size_t len = strlen(text), done = 0;
    int err = fchmod(fd, CACHE_FILE_MODE) == 0 ? 0 : errno;
    while (!err && done < len) {
        ssize_t w = write(fd, text + done, len - done);
        if (w < 0 && errno != EINTR)
            err = errno;
        else if (w > 0)
            done += (size_t)w;
    }
    if (!err && fsync(fd) != 0)
        err = errno;
    if (close(fd) != 0 && !err)
        err = errno;
    if (!err && rename(tmp, path) != 0)
        err = errno;
    if (err) {
        unlink(tmp);
        return fail(TL_EIO, "tuning cache: cannot write %s: %s", path, strerror(err));
    }
    /* the rename itself is durable once the directory is synced (best effort) */
    char dir[CACHE_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        slash[slash == dir] = '\0'; /* "/f" -> "/", "a/f" -> "a" */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return TL_OK;
}

tl_status tl_tune_cache_store(const char *path, const tl_tune_result *r)
{
    char buf[CACHE_PATH_MAX];
    if (!r)
        return fail(TL_EINVAL, "tl_tune_cache_store: no result");
    tl_status st = resolve_path(path, buf, &path);
    if (st != TL_OK)
        return st;
    json_t *root = NULL;
    st = load(path, &root);
    if (st == TL_ENOTFOUND) {
        root = json_pack("{s:i, s:[]}", "version", CACHE_VERSION, "entries");
        st = root ? TL_OK : fail(TL_ENOMEM, "tuning cache: out of memory");
    }
    if (st != TL_OK) { /* never overwrite a file that is not a tuning cache */
        char why[sizeof tl_tune_errbuf()->msg];
        snprintf(why, sizeof why, "%s", tl_tune_last_error());
        return fail(st, "%s (not overwritten: remove it to start a new cache)", why);
    }
    json_t *list = json_object_get(root, "entries");
    for (size_t i = json_array_size(list); i-- > 0;)
        if (same_key(json_array_get(list, i), &r->device, &r->shape, r->shape.geometry))
            json_array_remove(list, i);
    while (json_array_size(list) >= CACHE_MAX_KEYS)
        json_array_remove(list, 0); /* the oldest: entries are appended */
    json_t *o = result_json(r);
    char *text = NULL;
    if (!o || json_array_append_new(list, o) != 0)
        st = fail(TL_EINVAL, "tuning cache: cannot encode the result (out of memory, or a "
                             "time that is not a finite number)");
    else if (!(text = json_dumps(root, JSON_INDENT(1))))
        st = fail(TL_ENOMEM, "tuning cache: out of memory");
    json_decref(root);
    if (st == TL_OK && (st = make_dirs(path)) == TL_OK) {
        size_t len = strlen(text);
        /* json_dumps leaves no final newline; a text file has one */
        char *nl = realloc(text, len + 2);
        if (nl) {
            text = nl;
            memcpy(text + len, "\n", 2);
        }
        st = write_atomic(path, text);
    }
    free(text);
    return st;
}
