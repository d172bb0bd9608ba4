/* fuzz_adapters.c — libFuzzer target over the ingest formats (daemon/ingest/adapter.h):
 * tomolive's own, DECTRIS Stream V2 (CBOR, bitshuffle/LZ4) and V1 (JSON parts), the JSON
 * header + blob presets and tomopackets. fuzz_adapters.h says what an input is.
 *
 * Beyond "no crash, no leak, no UB" (ASan + UBSan) it checks, message by message:
 *   - decode answers 1, 0 or -1, and -1 only with a protocol error code (one that has a
 *     name) and a message; 0 and 1 leave the error unset; a refusal leaves no payload;
 *   - every item is a scan, frame or end with fields in the protocol's ranges, no pointer
 *     into the message parts (they are closed before the item is looked at, as the ingest
 *     thread closes them before queueing it);
 *   - a frame's payload is exactly its shape (or its band) times its sample size, and
 *     every byte of it readable; a frame in GPU memory has none;
 *   - the foreign formats (all but tomolive's own, whose scans the daemon checks) put each
 *     frame into the scan they opened last: its series, shape and dtype; an end ends it;
 *   - next stops: a message produces at most a handful of items.
 * The replay driver (check_adapters_corpus.c, `make check`) runs the same checks over the
 * seed corpus with a plain build. tests/fuzz.mk builds this target once per format
 * (TLT_FZ_ONLY: the selector's format bits are ignored), so each format has its own
 * executions and coverage: `make fuzz-adapters` runs the seven.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "daemon/base/log.h"
#include "daemon/base/settings.h"
#include "daemon/ingest/adapter.h"
#include "tests/fuzz/fuzz_adapters.h"

#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "property failed: %s (line %d)\n", #c, __LINE__); \
            abort();                                                          \
        }                                                                     \
    } while (0)

#define NFORMATS 8
#define MAX_ITEMS 4 /* a synthesised scan and its frame, with room to spare */

static const char *const format_names[NFORMATS] = {"tomolive",    "dectris-v2", "dectris-v1",
                                                   "std-daq",     "concert",    "array-1.0",
                                                   "tomopackets", "dectris-v2"};

/* The settings variants. The first keeps the defaults where the format allows them (the
 * stream says the window), the JSON presets need a window; the second labels the first
 * frames darks and flats, cycles DECTRIS series kinds, picks another channel and caps
 * frames at 4 MiB (a recorded image is 2 MiB). Both keep frames small enough for the fuzzer's memory. */
static const char *const variant_a[] = {"ingest.max_frame_mb=64", NULL};
static const char *const variant_a_json[] = {"ingest.max_frame_mb=64", "ingest.window=8", NULL};
static const char *const variant_b[] = {"ingest.window=4",
                                        "ingest.darks=1",
                                        "ingest.flats=1",
                                        "ingest.angle_step=1.5",
                                        "ingest.channel=threshold_2",
                                        "ingest.series_kinds=dark,flat,proj",
                                        "ingest.max_frame_mb=4",
                                        NULL};

const char *tlt_fz_format(uint8_t selector)
{
    return format_names[selector & 7];
}

static const tl_settings *settings(uint8_t selector)
{
    static tl_settings cfg[NFORMATS][2];
    static bool made[NFORMATS][2];
    int fmt = selector & 7, var = (selector & TLT_FZ_VARIANT) != 0;
    if (!made[fmt][var]) {
        bool json = fmt == TLT_FZ_STD_DAQ || fmt == TLT_FZ_CONCERT || fmt == TLT_FZ_ARRAY10;
        const char *const *sets = var ? variant_b : json ? variant_a_json : variant_a;
        tl_settings_defaults(&cfg[fmt][var]);
        for (int i = 0; sets[i]; i++) {
            char key[64], err[256];
            const char *eq = strchr(sets[i], '=');
            snprintf(key, sizeof key, "%.*s", (int)(eq - sets[i]), sets[i]);
            if (tl_settings_set(&cfg[fmt][var], key, eq + 1, err, sizeof err) != 0) {
                fprintf(stderr, "fuzz_adapters: %s\n", err);
                abort();
            }
        }
        made[fmt][var] = true;
    }
    return &cfg[fmt][var];
}

/* The scan the foreign formats' frames must fit. */
typedef struct {
    bool foreign;
    bool open;
    tl_proto_scan scan;
} scan_track;

static void check_refusal(const tl_proto_error *err)
{
    CHECK(err->code != TL_PROTO_OK);
    CHECK(strcmp(tl_proto_err_name(err->code), "E_?") != 0);
    CHECK(memchr(err->message, '\0', sizeof err->message) != NULL);
    CHECK(err->message[0] != '\0');
}

static void check_dims(uint32_t rows, uint32_t cols, tl_proto_dtype dtype)
{
    size_t bytes;
    CHECK(rows >= 1 && rows <= TL_PROTO_MAX_DIM);
    CHECK(cols >= 1 && cols <= TL_PROTO_MAX_DIM);
    CHECK(dtype >= TL_PROTO_U8 && dtype <= TL_PROTO_F32);
    CHECK(tl_proto_frame_bytes(rows, cols, dtype, &bytes, NULL) == TL_PROTO_OK);
}

static void check_scan(const tl_item *it, scan_track *t)
{
    const tl_proto_scan *s = &it->scan;
    check_dims(s->rows, s->cols, s->dtype);
    CHECK(s->geometry == TL_PROTO_PARALLEL || s->geometry == TL_PROTO_CONE);
    CHECK(s->window >= 1 && s->window <= TL_PROTO_MAX_WINDOW);
    CHECK(!s->has_angles || (isfinite(s->angle_start) && isfinite(s->angle_step)));
    CHECK(!s->has_center || isfinite(s->center));
    CHECK(s->filter.len == 0 && s->release.len == 0); /* the header part is gone */
    CHECK(memchr(it->filter, '\0', sizeof it->filter) != NULL);
    CHECK(memchr(it->release, '\0', sizeof it->release) != NULL);
    CHECK(zmq_msg_size((zmq_msg_t *)&it->payload) == 0);
    t->open = true;
    t->scan = *s;
}

static void check_frame(tl_item *it, scan_track *t)
{
    const tl_proto_frame *f = &it->frame;
    check_dims(f->rows, f->cols, f->dtype);
    CHECK(f->kind == TL_PROTO_DARK || f->kind == TL_PROTO_FLAT || f->kind == TL_PROTO_PROJ);
    CHECK(!f->has_angle || isfinite(f->angle));
    CHECK(!f->has_center_offset || isfinite(f->center_offset));
    CHECK(f->payload == NULL); /* the pixels are in it->payload, not in a closed part */
    size_t esize = tl_proto_dtype_size(f->dtype), want = (size_t)f->rows * f->cols * esize;
    if (f->has_band) {
        CHECK(f->band_rows >= 1 && f->band_first < f->rows &&
              f->band_rows <= f->rows - f->band_first);
        want = (size_t)f->band_rows * f->cols * esize;
    }
    size_t got = zmq_msg_size(&it->payload);
    if (f->has_ipc) {
        CHECK(got == 0);
        CHECK(f->ipc.handle == NULL && f->ipc.device.len == 0);
        CHECK(memchr(it->ipc_device, '\0', sizeof it->ipc_device) != NULL);
    } else {
        CHECK(got == want);
        const volatile uint8_t *px = zmq_msg_data(&it->payload);
        uint8_t sum = 0;
        for (size_t i = 0; i < got; i++) /* every byte readable (ASan) */
            sum ^= px[i];
        (void)sum;
    }
    if (t->foreign) {
        CHECK(t->open);
        CHECK(f->series == t->scan.series);
        CHECK(f->rows == t->scan.rows && f->cols == t->scan.cols && f->dtype == t->scan.dtype);
    }
}

static void check_item(tl_item *it, scan_track *t)
{
    switch (it->type) {
        case TL_MSG_SCAN:
            check_scan(it, t);
            CHECK((it->scan.matrices != NULL) == (it->scan.nmatrices != 0));
            tl_proto_scan_free(&it->scan); /* the worker frees them once the engine copied */
            break;
        case TL_MSG_FRAME: check_frame(it, t); break;
        case TL_MSG_END:
            CHECK(zmq_msg_size(&it->payload) == 0);
            if (t->foreign)
                CHECK(t->open && it->end.series == t->scan.series);
            t->open = false;
            break;
        default: CHECK(!"an item that is not a scan, frame or end");
    }
    zmq_msg_close(&it->payload); /* the worker is done with it */
    zmq_msg_init(&it->payload);
}

static void free_part(void *data, void *hint)
{
    (void)hint;
    free(data);
}

/* The next message of the input into parts (each its own allocation of exactly its size,
 * so ASan sees a read past its end); its part count, or 0 at the end of the input. */
static int next_message(const uint8_t **p, const uint8_t *end, zmq_msg_t *parts)
{
    if (*p >= end)
        return 0;
    int n = (**p & 3) + 1;
    (*p)++;
    for (int i = 0; i < n; i++) {
        size_t len = 0;
        for (int k = 0; k < 4 && *p < end; k++, (*p)++)
            len |= (size_t) * *p << (8 * k);
        if (len > (size_t)(end - *p))
            len = (size_t)(end - *p);
        void *buf = malloc(len ? len : 1);
        CHECK(buf != NULL);
        if (len)
            memcpy(buf, *p, len);
        *p += len;
        CHECK(zmq_msg_init_data(&parts[i], buf, len, free_part, NULL) == 0);
    }
    return n;
}

void tlt_fz_run(const uint8_t *data, size_t size, tlt_fz_result *res)
{
    static tlt_fz_result scratch;
    if (!res)
        res = &scratch;
    memset(res, 0, sizeof *res);
    if (size < 1)
        return;
    uint8_t selector = data[0];
#ifdef TLT_FZ_ONLY /* a target of one format (tests/fuzz.mk): the byte picks the variant */
    selector = (uint8_t)((selector & ~7) | TLT_FZ_ONLY);
#endif
    const tl_adapter_ops *ops = tl_adapter_find(tlt_fz_format(selector));
    CHECK(ops != NULL);
    char why[256] = "";
    void *state = ops->create(settings(selector), why, sizeof why);
    CHECK(state != NULL);
    scan_track track = {.foreign = (selector & 7) != TLT_FZ_NATIVE};
    tl_item it;
    memset(&it, 0, sizeof it); /* as the ingest thread: once, then reused */
    zmq_msg_init(&it.payload);
    const uint8_t *p = data + 1, *end = data + size;
    zmq_msg_t parts[TL_PROTO_MAX_PARTS];
    int n;
    while (res->nmsgs < TLT_FZ_MAX_MSGS && (n = next_message(&p, end, parts)) > 0) {
        int m = res->nmsgs++;
        tl_proto_error *err = &res->err[m];
        it.release[0] = 0;
        int rc = ops->decode(state, parts, n, &it, err);
        for (int i = 0; i < n; i++) /* before the items are looked at, as in the daemon */
            zmq_msg_close(&parts[i]);
        res->rc[m] = rc;
        CHECK(rc == 1 || rc == 0 || rc == -1);
        if (rc < 0) {
            check_refusal(err);
            CHECK(zmq_msg_size(&it.payload) == 0);
            continue;
        }
        CHECK(err->code == TL_PROTO_OK);
        if (rc == 0) {
            CHECK(zmq_msg_size(&it.payload) == 0);
            continue;
        }
        res->nitems[m] = 1;
        check_item(&it, &track);
        while (ops->next && ops->next(state, &it) > 0) {
            CHECK(++res->nitems[m] <= MAX_ITEMS);
            check_item(&it, &track);
        }
    }
    zmq_msg_close(&it.payload);
    ops->destroy(state);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    tl_log_set_level(TL_LOG_ERROR); /* scans synthesised, series started: not news here */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tlt_fz_run(data, size, NULL);
    return 0;
}
