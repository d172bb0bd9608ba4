/* push_dectris.c — see push_dectris.h. The files are sent exactly as they are (a
 * detector's bytes are the test); only the synthesised start is written here, with
 * libcbor, from the parts of the first image that say what a start would. */
#include "config.h"

#include <cbor.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "clients/cli.h"
#include "clients/push_dectris.h"
#include "clients/push_socket.h"
#include "gpu/base/clock.h"

#define ME "tomolive push"
#define fail(rc, ...) tl_cli_fail(ME, (rc), __VA_ARGS__)

enum { MSG_START, MSG_IMAGE, MSG_END, MSG_OTHER };

typedef struct {
    char *name;
    int type; /* MSG_* */
} recorded;

/* ---- the message type: the value of the map's first key, "type" ------------------------ */

typedef struct {
    int step; /* 0 tag or map, 1 key, 2 value, 3 done */
    bool ok;
    const char *text;
    size_t len;
} head_state;

/* clang-format off */
static void head_tag(void *ctx, uint64_t v) { head_state *h = ctx; h->ok = h->step == 0 && v == 55799; }
static void head_map(void *ctx, size_t n) { head_state *h = ctx; h->ok = h->step == 0 && n > 0; h->step = 1; }
static void head_text(void *ctx, cbor_data d, size_t n) { head_state *h = ctx; h->ok = h->step >= 1; h->text = (const char *)d; h->len = n; h->step++; }
/* clang-format on */

static int message_type(const uint8_t *p, size_t len)
{
    struct cbor_callbacks cb = cbor_empty_callbacks;
    cb.tag = head_tag;
    cb.map_start = head_map;
    cb.string = head_text;
    head_state h = {0};
    for (size_t at = 0, i = 0; i < 4 && at < len; i++) {
        h.ok = false;
        struct cbor_decoder_result r = cbor_stream_decode(p + at, len - at, &cb, &h);
        if (r.status != CBOR_DECODER_FINISHED || !h.ok)
            return MSG_OTHER;
        at += r.read;
        if (h.step == 2 && (h.len != 4 || memcmp(h.text, "type", 4) != 0))
            return MSG_OTHER; /* the specification puts "type" first */
        if (h.step == 3)
            break;
    }
    if (h.step != 3)
        return MSG_OTHER;
    return h.len == 5 && !memcmp(h.text, "start", 5)   ? MSG_START
           : h.len == 5 && !memcmp(h.text, "image", 5) ? MSG_IMAGE
           : h.len == 3 && !memcmp(h.text, "end", 3)   ? MSG_END
                                                       : MSG_OTHER;
}

/* ---- the directory ------------------------------------------------------------------- */

static int by_name(const void *a, const void *b)
{
    return strcmp(((const recorded *)a)->name, ((const recorded *)b)->name);
}

static void *read_file(const char *dir, const char *name, size_t *len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    void *buf = NULL;
    long n = fseek(fp, 0, SEEK_END) == 0 ? ftell(fp) : -1;
    if (n > 0 && fseek(fp, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n)) &&
        fread(buf, 1, (size_t)n, fp) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(fp);
    *len = (size_t)(n > 0 ? n : 0);
    return buf;
}

/* The *.cbor files of dir, sorted by name, each with its message type. */
static int list_dir(const char *dir, recorded **out, size_t *count)
{
    DIR *d = opendir(dir);
    if (!d)
        return fail(1, "--dectris: cannot open %s: %s", dir, strerror(errno));
    recorded *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len < 6 || strcmp(e->d_name + len - 5, ".cbor") != 0)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            recorded *nv = realloc(v, cap * sizeof *v);
            if (!nv) {
                rc = fail(1, "out of memory");
                break;
            }
            v = nv;
        }
        v[n].name = strdup(e->d_name);
        v[n++].type = MSG_OTHER;
    }
    closedir(d);
    if (rc == 0 && n == 0)
        rc = fail(1, "--dectris: no *.cbor messages in %s", dir);
    qsort(v, n, sizeof *v, by_name);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        size_t len;
        uint8_t *buf = read_file(dir, v[i].name, &len);
        if (!buf)
            rc = fail(1, "--dectris: cannot read %s/%s", dir, v[i].name);
        else
            v[i].type = message_type(buf, len < 256 ? len : 256);
        free(buf);
    }
    *out = v;
    *count = n;
    return rc;
}

/* ---- a start message from the first image -------------------------------------------- */

static cbor_item_t *map_get(cbor_item_t *map, const char *key)
{
    while (map && cbor_isa_tag(map)) {
        map = cbor_tag_item(map);
        cbor_intermediate_decref(map); /* borrowed: the tag keeps it */
    }
    if (!map || !cbor_isa_map(map))
        return NULL;
    struct cbor_pair *p = cbor_map_handle(map);
    for (size_t i = 0; i < cbor_map_size(map); i++)
        if (cbor_isa_string(p[i].key) && cbor_string_length(p[i].key) == strlen(key) &&
            memcmp(cbor_string_handle(p[i].key), key, strlen(key)) == 0)
            return p[i].value;
    return NULL;
}

static void put(cbor_item_t *map, const char *key, cbor_item_t *value)
{
    cbor_map_add(map, (struct cbor_pair){cbor_move(cbor_build_string(key)), cbor_move(value)});
}

/* The image's size [rows, cols] from its first channel (tag 40 [[rows, cols], array]). */
static bool image_shape(cbor_item_t *data, uint64_t *rows, uint64_t *cols)
{
    if (!data || !cbor_isa_map(data) || cbor_map_size(data) == 0)
        return false;
    cbor_item_t *md = cbor_map_handle(data)[0].value;
    if (!cbor_isa_tag(md) || cbor_tag_value(md) != 40)
        return false;
    cbor_item_t *arr = cbor_tag_item(md);
    bool ok = cbor_isa_array(arr) && cbor_array_size(arr) == 2;
    cbor_item_t *dims = ok ? cbor_array_handle(arr)[0] : NULL;
    ok = ok && cbor_isa_array(dims) && cbor_array_size(dims) == 2 &&
         cbor_isa_uint(cbor_array_handle(dims)[0]) && cbor_isa_uint(cbor_array_handle(dims)[1]);
    if (ok) {
        *rows = cbor_get_int(cbor_array_handle(dims)[0]);
        *cols = cbor_get_int(cbor_array_handle(dims)[1]);
    }
    cbor_decref(&arr);
    return ok;
}

/* A start for the set whose first image is img (nimages images), serialised into *out. */
static int synthesise_start(const uint8_t *img, size_t len, size_t nimages, uint8_t **out,
                            size_t *outlen)
{
    struct cbor_load_result res;
    cbor_item_t *root = cbor_load(img, len, &res);
    if (!root)
        return fail(1, "--dectris: the first image is not CBOR (error %d at byte %zu)",
                    (int)res.error.code, res.error.position);
    cbor_item_t *series = map_get(root, "series_id"), *uid = map_get(root, "series_unique_id"),
                *data = map_get(root, "data");
    uint64_t rows = 0, cols = 0;
    int rc = 0;
    if (!series || !cbor_isa_uint(series) || !image_shape(data, &rows, &cols))
        rc = fail(1, "--dectris: the first image has no series_id or no data channel of "
                     "[rows, cols]: cannot synthesise a start");
    cbor_item_t *start = rc == 0 ? cbor_new_definite_map(8) : NULL;
    if (start) {
        char date[40];
        time_t now = time(NULL);
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
        cbor_item_t *channels = cbor_new_definite_array(cbor_map_size(data));
        for (size_t i = 0; i < cbor_map_size(data); i++)
            cbor_array_push(channels, cbor_map_handle(data)[i].key);
        put(start, "type", cbor_build_string("start"));
        put(start, "series_id", cbor_build_uint64(cbor_get_int(series)));
        if (uid && cbor_isa_string(uid))
            put(start, "series_unique_id", cbor_incref(uid));
        put(start, "arm_date", cbor_build_tag(0, cbor_move(cbor_build_string(date))));
        put(start, "channels", channels);
        put(start, "image_size_x", cbor_build_uint64(cols));
        put(start, "image_size_y", cbor_build_uint64(rows));
        put(start, "number_of_images", cbor_build_uint64(nimages));
        cbor_item_t *tagged = cbor_build_tag(55799, cbor_move(start)); /* as detectors do */
        size_t cap = 0;
        *outlen = cbor_serialize_alloc(tagged, out, &cap);
        cbor_decref(&tagged);
        if (*outlen == 0)
            rc = fail(1, "out of memory");
    }
    cbor_decref(&root);
    return rc;
}

/* ---- sending ------------------------------------------------------------------------- */

static void free_buf(void *data, void *hint)
{
    (void)hint;
    free(data);
}

/* Sends buf (taken: freed once on the wire) at deadline t0 + k / rate. */
static int send_paced(void *sock, uint8_t *buf, size_t len, const tl_push_dectris_opts *o,
                      uint64_t t0, size_t k)
{
    if (o->rate > 0) {
        uint64_t at = t0 + (uint64_t)((double)k / o->rate * 1e9);
        struct timespec ts = {(time_t)(at / 1000000000u), (long)(at % 1000000000u)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
    }
    zmq_msg_t msg;
    if (zmq_msg_init_data(&msg, buf, len, free_buf, NULL) != 0) {
        free(buf);
        return fail(1, "out of memory");
    }
    if (zmq_msg_send(&msg, sock, 0) < 0) {
        zmq_msg_close(&msg);
        return fail(1, "cannot send: %s", zmq_strerror(errno));
    }
    return 0;
}

int tl_push_dectris(const tl_push_dectris_opts *o)
{
    recorded *files = NULL;
    size_t n = 0, counts[4] = {0};
    int rc = list_dir(o->dir, &files, &n);
    for (size_t i = 0; rc == 0 && i < n; i++)
        counts[files[i].type]++;
    size_t first_image = 0;
    while (rc == 0 && first_image < n && files[first_image].type != MSG_IMAGE)
        first_image++;
    uint8_t *start = NULL;
    size_t start_len = 0;
    if (rc == 0 && counts[MSG_START] == 0) {
        size_t len;
        uint8_t *img = first_image < n ? read_file(o->dir, files[first_image].name, &len) : NULL;
        rc = img ? synthesise_start(img, len, counts[MSG_IMAGE], &start, &start_len)
                 : fail(1, "--dectris: %s has neither a start nor an image message", o->dir);
        free(img);
        if (rc == 0 && !o->quiet)
            fprintf(stderr, ME ": %s has no start message: one synthesised from %s\n", o->dir,
                    files[first_image].name);
    }
    void *ctx = NULL, *sock = NULL;
    if (rc == 0)
        rc = tl_push_socket_open(o->endpoint, o->bind, o->sndhwm, NULL, NULL, &ctx, &sock);
    uint64_t t0 = tl_clock_ns(), bytes = 0;
    size_t sent = 0;
    bool handed = false; /* start given to ZeroMQ (send_paced), which frees it */
    if (rc == 0 && start) {
        bytes += start_len;
        handed = true;
        rc = send_paced(sock, start, start_len, o, t0, sent++);
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        size_t len;
        uint8_t *buf = read_file(o->dir, files[i].name, &len);
        if (!buf) {
            rc = fail(1, "--dectris: cannot read %s/%s", o->dir, files[i].name);
            break;
        }
        bytes += len;
        rc = send_paced(sock, buf, len, o, t0, sent++);
    }
    tl_push_socket_close(ctx, sock, rc != 0);
    if (!handed)
        free(start);
    double secs = (double)(tl_clock_ns() - t0) * 1e-9;
    if (rc == 0)
        printf("pushed %zu messages (%zu start%s, %zu images, %zu end, %zu other) in %.3f s: "
               "%.1f messages/s, %.3f GB/s\n",
               sent, counts[MSG_START] + (start != NULL), start ? " synthesised" : "",
               counts[MSG_IMAGE], counts[MSG_END], counts[MSG_OTHER], secs, (double)sent / secs,
               (double)bytes / secs * 1e-9);
    for (size_t i = 0; i < n; i++)
        free(files[i].name);
    free(files);
    return rc;
}
