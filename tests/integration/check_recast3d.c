/* check_recast3d.c — tomolive as a tomopackets reconstructor toward a fake RECAST3D: the
 * test binds the viewer's REP (scene requests, slice data) and PUB (slice requests)
 * sockets itself, only after the daemon has been trying for a while, so the scene must
 * come from a retried MakeScene. Then a phantom scan is streamed (native protocol), the
 * viewer sets two slices (a horizontal one and a vertical one, in its [-1, 1]^3 box) and
 * must receive SliceData for each whose pixels equal the daemon's own slices of the
 * documented geometry (recast3d.h: x, y = X, Y * W/2, z = (H-1)/2 - Z * H/2) with rows
 * bottom-up; RemoveSlice and KillScene must take the slices away again.
 */
#include "config.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "gpu/phantom.h"
#include "tests/daemon_fixture.h"
#include "tests/testutil.h"

enum { R = 8, W = 32, N = 60, SCENE = 5 };

static int32_t get_i32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

static void put_i32(uint8_t *p, int32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)((uint32_t)v >> (8 * i));
}

static void put_f32(uint8_t *p, float f)
{
    int32_t v;
    memcpy(&v, &f, 4);
    put_i32(p, v);
}

/* The viewer's sockets and what it has received. */
typedef struct {
    void *rep, *pub;
    int scenes;     /* MakeScene requests */
    float *data[3]; /* latest SliceData per slice id 1, 2 */
    int received[3];
} viewer;

/* Answers requests on the REP socket for up to ms milliseconds. */
static void serve(viewer *v, int ms)
{
    zmq_pollitem_t it = {v->rep, 0, ZMQ_POLLIN, 0};
    for (double t0 = tl_fx_seconds(); tl_fx_seconds() - t0 < ms / 1000.0;) {
        if (zmq_poll(&it, 1, 50) <= 0)
            continue;
        zmq_msg_t m;
        zmq_msg_init(&m);
        ck_assert_int_ge(zmq_msg_recv(&m, v->rep, 0), 4);
        const uint8_t *p = zmq_msg_data(&m);
        size_t len = zmq_msg_size(&m);
        int32_t desc = get_i32(p);
        uint8_t reply[4];
        put_i32(reply, 0);
        if (desc == 0x101) { /* MakeScene: name, NUL, dimension */
            ck_assert_uint_eq(len, 4 + strlen("tomolive") + 1 + 4);
            ck_assert_str_eq((const char *)p + 4, "tomolive");
            ck_assert_int_eq(get_i32(p + len - 4), 3);
            put_i32(reply, SCENE);
            v->scenes++;
        } else {
            ck_assert_int_eq(desc, 0x201); /* SliceData */
            ck_assert_int_eq(get_i32(p + 4), SCENE);
            int32_t id = get_i32(p + 8), w = get_i32(p + 12), h = get_i32(p + 16),
                    n = get_i32(p + 20);
            ck_assert(id == 1 || id == 2);
            ck_assert(w == W && h == W && n == W * W);
            ck_assert_uint_eq(len, 24 + 4 * (size_t)n + 1);
            ck_assert_int_eq(p[len - 1], 0); /* additive: false */
            free(v->data[id]);
            v->data[id] = malloc((size_t)n * sizeof(float));
            memcpy(v->data[id], p + 24, (size_t)n * sizeof(float)); /* little-endian host */
            v->received[id]++;
        }
        zmq_msg_close(&m);
        ck_assert_int_eq(zmq_send(v->rep, reply, 4, 0), 4);
    }
}

static void publish(viewer *v, int32_t desc, int32_t slice, const float *orientation)
{
    uint8_t p[48];
    size_t n = 8;
    put_i32(p, desc);
    put_i32(p + 4, SCENE);
    if (slice >= 0) {
        put_i32(p + 8, slice);
        n = 12;
    }
    for (int i = 0; orientation && i < 9; i++, n += 4)
        put_f32(p + 12 + 4 * i, orientation[i]);
    ck_assert_int_eq(zmq_send(v->pub, p, n, 0), (int)n);
}

/* The daemon's slice ids, as one string. */
static bool has_slice(tl_fixture *f, const char *id)
{
    json_t *l = tl_fx_ok(f, "list_slices", NULL);
    bool found = false;
    for (size_t i = 0; i < json_array_size(l); i++)
        found |= strcmp(json_string_value(json_object_get(json_array_get(l, i), "id")), id) == 0;
    json_decref(l);
    return found;
}

static float *fetch(tl_fixture *f, const char *id, size_t n)
{
    void *sub = zmq_socket(f->zctx, ZMQ_SUB);
    int linger = 0;
    zmq_setsockopt(sub, ZMQ_LINGER, &linger, sizeof linger);
    char topic[64];
    snprintf(topic, sizeof topic, "slice/%s/", id);
    zmq_setsockopt(sub, ZMQ_SUBSCRIBE, topic, strlen(topic));
    zmq_connect(sub, f->slices);
    zmq_pollitem_t it = {sub, 0, ZMQ_POLLIN, 0};
    float *out = NULL;
    tl_proto_decoder *dec = tl_proto_decoder_new();
    for (double t0 = tl_fx_seconds(); !out && tl_fx_seconds() - t0 < 20;) {
        if (zmq_poll(&it, 1, 200) <= 0)
            continue;
        zmq_msg_t parts[4];
        tl_proto_error e;
        int np = tl_proto_recv(sub, parts, 4, 0, &e);
        tl_proto_msg m;
        ck_assert_int_eq(tl_proto_decode_parts(dec, parts, np, TL_MSG_SLICE, &m, &e), TL_PROTO_OK);
        ck_assert_uint_eq(m.slice.payload_len, n * sizeof(float));
        ck_assert_uint_eq(m.slice.projections_used, N);
        out = malloc(m.slice.payload_len);
        memcpy(out, m.slice.payload, m.slice.payload_len);
        tl_proto_close(parts, np);
    }
    tl_proto_decoder_free(dec);
    zmq_close(sub);
    ck_assert_msg(out != NULL, "no slice %s", id);
    return out;
}

/* Rows bottom-up (SliceData) from rows top-down (tomolive). */
static void flip(const float *in, float *out, int n)
{
    for (int r = 0; r < n; r++)
        memcpy(out + (size_t)r * n, in + (size_t)(n - 1 - r) * n, (size_t)n * sizeof *out);
}

START_TEST(fake_recast3d)
{
    char *dir = tl_tmpdir("r3dview");
    char rep_ep[600], pub_ep[600], set_rep[700], set_pub[700];
    snprintf(rep_ep, sizeof rep_ep, "ipc://%s/rep", dir);
    snprintf(pub_ep, sizeof pub_ep, "ipc://%s/pub", dir);
    snprintf(set_rep, sizeof set_rep, "recast3d.server=%s", rep_ep);
    snprintf(set_pub, sizeof set_pub, "recast3d.subscribe=%s", pub_ep);
    const char *args[] = {"--set", set_rep, "--set", set_pub, "--set", "recast3d.slice_size=32",
                          NULL};
    tl_fixture f;
    ck_assert_int_eq(tl_fx_start(&f, "recast3d", args), 0);

    /* the viewer comes up late, once the daemon has found it absent: it must keep trying */
    ck_assert(tl_fx_wait_log(&f, "recast3d_retry", 30));
    viewer v = {0};
    v.rep = zmq_socket(f.zctx, ZMQ_REP);
    v.pub = zmq_socket(f.zctx, ZMQ_PUB);
    int linger = 0;
    zmq_setsockopt(v.rep, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(v.pub, ZMQ_LINGER, &linger, sizeof linger);
    ck_assert_int_eq(zmq_bind(v.rep, rep_ep), 0);
    ck_assert_int_eq(zmq_bind(v.pub, pub_ep), 0);
    for (double t0 = tl_fx_seconds(); v.scenes == 0 && tl_fx_seconds() - t0 < 40;)
        serve(&v, 200);
    ck_assert_int_eq(v.scenes, 1);
    char *log = tl_fx_log(&f);
    ck_assert_msg(strstr(log, "recast3d_retry"), "MakeScene was not retried:\n%s", log);
    free(log);

    /* a phantom scan through the native protocol */
    tl_phantom ph;
    ck_assert_int_eq(tl_phantom_shepp_logan(&ph, 0.45 * W, (R - 1) / 2.0, 0.45 * R * 4), 0);
    float *li = malloc((size_t)R * W * sizeof *li);
    tl_proto_scan s = {.series = 1,
                       .rows = R,
                       .cols = W,
                       .dtype = TL_PROTO_F32,
                       .window = N,
                       .already_linear = true};
    ck_assert_int_eq(tl_fx_send_scan(&f, &s), 0);
    for (int k = 0; k < N; k++) {
        tl_phantom_project(&ph, M_PI * k / N, (W - 1) / 2.0, R, W, li);
        tl_proto_frame fr = {.series = 1,
                             .index = (uint64_t)k,
                             .kind = TL_PROTO_PROJ,
                             .has_angle = true,
                             .angle = M_PI * k / N,
                             .dtype = TL_PROTO_F32,
                             .rows = R,
                             .cols = W};
        ck_assert_int_eq(tl_fx_send_frame(&f, &fr, li, (size_t)R * W * sizeof *li), 0);
    }
    ck_assert_int_eq(tl_fx_send_end(&f, 1), 0);
    ck_assert(tl_fx_wait_messages(&f, N + 2, 30));
    free(li);
    tl_phantom_free(&ph);
    serve(&v, 100);

    /* the daemon's own slices of the documented geometry */
    json_decref(
        tl_fx_ok(&f, "set_slice", "{\"id\":\"ref-h\",\"kind\":\"row\",\"z\":3,\"size\":[32,32]}"));
    json_decref(tl_fx_ok(&f, "set_slice",
                         "{\"id\":\"ref-v\",\"kind\":\"plane\",\"size\":[32,32],"
                         "\"orientation\":[32,0,0, 0,0,-8, -16,0,7.5]}"));
    float *ref_h = fetch(&f, "ref-h", W * W), *ref_v = fetch(&f, "ref-v", W * W);

    /* the viewer's slices: horizontal at Z = 0.125 (detector row 3), and vertical through
     * the axis (Y = 0) over the whole height */
    const float horizontal[9] = {2, 0, 0, 0, 2, 0, -1, -1, 0.125f};
    const float vertical[9] = {2, 0, 0, 0, 0, 2, -1, 0, -1};
    for (double t0 = tl_fx_seconds(); tl_fx_seconds() - t0 < 20;) {
        publish(&v, 0x205, 1, horizontal); /* SetSlice, until the SUB has joined */
        publish(&v, 0x205, 2, vertical);
        serve(&v, 300);
        if (has_slice(&f, "r3d-5-1") && has_slice(&f, "r3d-5-2"))
            break;
    }
    ck_assert(has_slice(&f, "r3d-5-1") && has_slice(&f, "r3d-5-2"));
    float want_h[W * W], want_v[W * W];
    flip(ref_h, want_h, W);
    flip(ref_v, want_v, W);
    double eh = INFINITY, ev = INFINITY;
    for (double t0 = tl_fx_seconds(); (eh > 1e-6 || ev > 1e-6) && tl_fx_seconds() - t0 < 20;) {
        serve(&v, 200);
        if (v.data[1])
            eh = tl_rel_l2(v.data[1], want_h, W * W);
        if (v.data[2])
            ev = tl_rel_l2(v.data[2], want_v, W * W);
    }
    fprintf(stderr, "SliceData: horizontal rel L2 %.3g (%d packets), vertical %.3g (%d packets)\n",
            eh, v.received[1], ev, v.received[2]);
    ck_assert_msg(eh <= 1e-6 && ev <= 1e-6, "horizontal %g vertical %g", eh, ev);
    /* the orientation is not a mirror image: the horizontal slice is not symmetric top-down */
    ck_assert(tl_rel_l2(v.data[1], ref_h, W * W) > 1e-3);

    publish(&v, 0x206, 2, NULL); /* RemoveSlice */
    for (double t0 = tl_fx_seconds(); has_slice(&f, "r3d-5-2") && tl_fx_seconds() - t0 < 10;)
        serve(&v, 200);
    ck_assert(!has_slice(&f, "r3d-5-2") && has_slice(&f, "r3d-5-1"));
    publish(&v, 0x102, -1, NULL); /* KillScene */
    for (double t0 = tl_fx_seconds(); has_slice(&f, "r3d-5-1") && tl_fx_seconds() - t0 < 10;)
        serve(&v, 200);
    ck_assert(!has_slice(&f, "r3d-5-1"));
    ck_assert(has_slice(&f, "ref-h"));

    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    zmq_close(v.rep);
    zmq_close(v.pub);
    tl_fx_cleanup(&f);
    for (int i = 0; i < 3; i++)
        free(v.data[i]);
    free(ref_h);
    free(ref_v);
    tl_rm_rf(dir);
    free(dir);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("recast3d");
    TCase *tc = tcase_create("viewer");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, fake_recast3d);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
