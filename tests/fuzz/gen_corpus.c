/* gen_corpus.c — writes the golden headers: one file per message variant, each a valid
 * header as the public encoders produce it. They seed the fuzzer (tests/fuzz/corpus) and
 * check_proto decodes every one of them, so a change of wire format shows up as a diff of
 * these files. Usage: gen_corpus DIR (run by `make fuzz-corpus`).
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/protocol.h"

static const char *dir;
static msgpack_sbuffer sb;
static msgpack_packer pk;

static void begin(void)
{
    msgpack_sbuffer_clear(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
}

static void put(const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.mp", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(sb.data, 1, sb.size, f) != sb.size || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

static tl_proto_str S(const char *s)
{
    return (tl_proto_str){s, strlen(s)};
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    msgpack_sbuffer_init(&sb);

    begin();
    tl_proto_encode_scan(&sb, &(tl_proto_scan){.series = 1,
                                               .rows = 2048,
                                               .cols = 2048,
                                               .dtype = TL_PROTO_U16,
                                               .window = 1800});
    put("scan-min");
    begin();
    tl_proto_encode_scan(&sb, &(tl_proto_scan){.series = 2,
                                               .geometry = TL_PROTO_CONE,
                                               .rows = 1024,
                                               .cols = 1536,
                                               .dtype = TL_PROTO_F32,
                                               .window = 900,
                                               .darks = 20,
                                               .flats = 20,
                                               .first_index = 40,
                                               .has_center = true,
                                               .center = 767.25,
                                               .has_angles = true,
                                               .angle_start = 0,
                                               .angle_step = M_PI / 900,
                                               .filter = S("shepp-logan"),
                                               .already_linear = true,
                                               .source_origin = 400,
                                               .source_detector = 800,
                                               .pixel_size = {0.1, 0.125},
                                               .has_detector_offset = true,
                                               .detector_offset = {0, 1.5},
                                               .has_short_scan = true,
                                               .short_scan = {-0.1, 3.9}});
    put("scan-full");
    /* an arbitrary trajectory (8.1.1 "matrices"): 4 matrices shaped like a circular scan's
     * (the decoder checks the shape and finiteness; the engine the geometry) */
    double P[4][12];
    for (int i = 0; i < 4; i++) {
        double c = cos(i * M_PI / 2), s = sin(i * M_PI / 2);
        double m[12] = {800 * c / 0.1 + 767.5 * s,
                        -800 * s / 0.1 + 767.5 * c,
                        0,
                        400 * 767.5,
                        511.5 * s,
                        511.5 * c,
                        800 / 0.125,
                        400 * 511.5,
                        s,
                        c,
                        0,
                        400};
        memcpy(P[i], m, sizeof m);
    }
    begin();
    tl_proto_encode_scan(&sb, &(tl_proto_scan){.series = 3,
                                               .geometry = TL_PROTO_CONE,
                                               .rows = 1024,
                                               .cols = 1536,
                                               .dtype = TL_PROTO_U16,
                                               .window = 4,
                                               .source_origin = 400,
                                               .source_detector = 800,
                                               .pixel_size = {0.1, 0.125},
                                               .matrices = P,
                                               .nmatrices = 4});
    put("scan-matrices");

    const tl_proto_dtype dt[] = {TL_PROTO_U8, TL_PROTO_U16, TL_PROTO_U32, TL_PROTO_F32};
    for (int k = 0; k < 3; k++) {
        begin();
        bool proj = k == TL_PROTO_PROJ;
        tl_proto_encode_frame(&sb, &(tl_proto_frame){.series = 2,
                                                     .index = 40 + (uint64_t)k,
                                                     .kind = (tl_proto_kind)k,
                                                     .dtype = dt[k + 1],
                                                     .rows = 1024,
                                                     .cols = 1536,
                                                     .has_angle = proj,
                                                     .angle = 0.25,
                                                     .has_t_acq = true,
                                                     .t_acq = 1761234567890123456ull,
                                                     .has_center_offset = proj,
                                                     .center_offset = -0.5});
        char name[64];
        snprintf(name, sizeof name, "frame-%s-%s", tl_proto_kind_name((tl_proto_kind)k),
                 tl_proto_dtype_name(dt[k + 1]));
        put(name);
    }
    begin();
    tl_proto_encode_frame(&sb, &(tl_proto_frame){.series = 3,
                                                 .index = 0,
                                                 .kind = TL_PROTO_PROJ,
                                                 .dtype = TL_PROTO_U8,
                                                 .rows = 4,
                                                 .cols = 6});
    put("frame-min-u8");
    begin();
    uint8_t handle[TL_PROTO_IPC_HANDLE];
    for (int i = 0; i < TL_PROTO_IPC_HANDLE; i++)
        handle[i] = (uint8_t)(i * 37 + 11);
    tl_proto_encode_frame(
        &sb, &(tl_proto_frame){.series = 4,
                               .index = 7,
                               .kind = TL_PROTO_PROJ,
                               .dtype = TL_PROTO_U16,
                               .rows = 2048,
                               .cols = 2048,
                               .has_angle = true,
                               .angle = 0.5,
                               .has_t_acq = true,
                               .t_acq = 1761234567890123456ull,
                               .has_ipc = true,
                               .ipc = {.handle = handle,
                                       .buffer = 1,
                                       .size = 64ull << 20,
                                       .offset = 8ull << 20,
                                       .pitch = 4096,
                                       .device = S("GPU-8695f54f-567f-78f5-adb5-abcd659e9ff1"),
                                       .slot = 3}});
    put("frame-gpu-u16");
    begin();
    tl_proto_encode_release(&sb,
                            &(tl_proto_release){.series = 4, .index = 7, .slot = 3, .ok = true});
    put("release-ok");
    begin();
    tl_proto_encode_release(
        &sb, &(tl_proto_release){
                 .series = 4,
                 .index = 8,
                 .slot = 4,
                 .ok = false,
                 .code = TL_PROTO_E_UNSUPPORTED,
                 .message = S("frame 8 of series 4 is in GPU memory (CUDA IPC): not supported")});
    put("release-error");

    begin();
    tl_proto_encode_end(&sb, &(tl_proto_end){.series = 2});
    put("end");
    /* near the 64 KiB limit (an unknown key carries the bulk): seeds large inputs */
    begin();
    msgpack_pack_map(&pk, 4);
    tl_proto_pack_kv_u64(&pk, "v", TL_PROTO_VERSION);
    tl_proto_pack_kv_str(&pk, "type", "end");
    tl_proto_pack_kv_u64(&pk, "series", 2);
    static char pad[60000];
    memset(pad, '.', sizeof pad);
    tl_proto_pack_cstr(&pk, "x-pad");
    msgpack_pack_str_with_body(&pk, pad, sizeof pad);
    put("end-padded");

    begin();
    tl_proto_begin_req(&pk, 1, "status", false);
    put("req-status");
    begin();
    tl_proto_begin_req(&pk, 2, "set_slice", true);
    msgpack_pack_map(&pk, 4);
    tl_proto_pack_kv_str(&pk, "id", "z-mid");
    tl_proto_pack_kv_u64(&pk, "z", 512);
    tl_proto_pack_kv_bool(&pk, "pinned", true);
    tl_proto_pack_cstr(&pk, "orientation");
    msgpack_pack_array(&pk, 9);
    for (int i = 0; i < 9; i++)
        msgpack_pack_float(&pk, i == 0 || i == 4 ? 1.0f : 0.0f);
    put("req-set_slice");
    /* more keys than the pairwise duplicate check handles: seeds the sorting path */
    begin();
    tl_proto_begin_req(&pk, 3, "configure", true);
    msgpack_pack_map(&pk, 40);
    for (int i = 0; i < 40; i++) {
        char key[16];
        snprintf(key, sizeof key, "opt%02d", i);
        tl_proto_pack_kv_u64(&pk, key, (uint64_t)i * 1000);
    }
    put("req-many-args");

    begin();
    tl_proto_begin_rep_ok(&pk, 1);
    msgpack_pack_map(&pk, 2);
    tl_proto_pack_kv_u64(&pk, "frames", 123456);
    tl_proto_pack_kv_double(&pk, "fps", 812.5);
    put("rep-ok-result");
    begin();
    tl_proto_begin_rep_ok(&pk, 2);
    msgpack_pack_nil(&pk);
    put("rep-ok-nil");
    begin();
    tl_proto_pack_rep_error(&pk, 3, TL_PROTO_E_UNKNOWN_CMD, "unknown command \"stat\"");
    put("rep-error");

    float orient[9] = {1024, 0, 0, 0, 1024, 0, -512, -512, 100}; /* row z = 100 */
    tl_proto_slice s = {.id = S("z-mid"),
                        .seq = 17,
                        .shape = {1024, 1024},
                        .dtype = TL_PROTO_F32,
                        .projections_used = 898,
                        .missing = 2,
                        .window_first = 100,
                        .window_last = 999,
                        .t_acq = 1761234567890123456ull,
                        .t_pub = 1761234567893123456ull,
                        .kernel = S("cpu-ref")};
    memcpy(s.orientation, orient, sizeof orient);
    begin();
    tl_proto_encode_slice(&sb, &s);
    put("slice-min");
    s.t_recv = 1761234567890223456ull;
    s.t_done = 1761234567892123456ull;
    s.id = S("ortho.x_1");
    s.final = true;
    begin();
    tl_proto_encode_slice(&sb, &s);
    put("slice-full");
    /* a slice in shared memory (PROTOCOL.md 10.1): the daemon's name and slot 1 of 4 */
    s.id = S("z-mid");
    s.final = false;
    s.has_shm = true;
    s.shm_name = S("/tomolive-z-mid-1");
    s.shm_offset = (4096 + 1024 * 1024 * 4) + 4096; /* slot 1: a slot size, then its header */
    begin();
    tl_proto_encode_slice(&sb, &s);
    put("slice-shm");
    /* a box (PROTOCOL.md 10): 16 planes of 64 x 64, 0.5 volume units apart */
    float box[9] = {32, 0, 0, 0, 32, 0, -16, -16, 96};
    memcpy(s.orientation, box, sizeof box);
    s.id = S("box-1");
    s.has_shm = false;
    s.shape[0] = 16 * 64;
    s.shape[1] = 64;
    s.planes = 16;
    s.box_step = 0.5;
    begin();
    tl_proto_encode_slice(&sb, &s);
    put("slice-box");

    msgpack_sbuffer_destroy(&sb);
    return 0;
}
