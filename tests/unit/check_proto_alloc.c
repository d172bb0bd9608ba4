/* check_proto_alloc.c — the decoder's memory behaviour, measured rather than assumed:
 *   - steady state: after warm-up, decoding (and encoding into a reused buffer) performs no
 *     heap allocation at all;
 *   - hostile headers: a 5-byte header declaring 2^32-1 elements allocates nothing, and the
 *     worst legal header (64 KiB of one-byte elements) allocates at most 48 bytes per byte.
 *
 * malloc/calloc/realloc are interposed in this executable (glibc exports the real ones as
 * __libc_*), which also catches allocations inside libmsgpackc. Under valgrind, which
 * replaces the allocator itself, the counters stay at zero; the test notices that with a
 * probe allocation and then only checks results, not counts.
 */
#include "config.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/protocol.h"
#include "tests/testutil.h"

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t m);
extern void *__libc_realloc(void *p, size_t n);

static atomic_bool counting;
static atomic_long n_allocs;
static atomic_size_t n_bytes;

static void note(size_t n)
{
    if (atomic_load_explicit(&counting, memory_order_relaxed)) {
        atomic_fetch_add(&n_allocs, 1);
        atomic_fetch_add(&n_bytes, n);
    }
}

#if !TL_TEST_ASAN /* ASan owns the allocator: main skips */
void *malloc(size_t n)
{
    note(n);
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
    note(n * m);
    return __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
    note(n);
    return __libc_realloc(p, n);
}
#endif

static void count_on(void)
{
    atomic_store(&n_allocs, 0);
    atomic_store(&n_bytes, 0);
    atomic_store(&counting, true);
}

static long count_off(void)
{
    atomic_store(&counting, false);
    return atomic_load(&n_allocs);
}

/* Whether the interposition works here (not under valgrind). */
static bool interposed(void)
{
    void *(*volatile m)(size_t) = malloc; /* volatile: the compiler may not elide the pair */
    count_on();
    void *p = m(16);
    long n = count_off();
    free(p);
    if (n == 0)
        fprintf(stderr, "malloc not interposed (valgrind?): allocation counts not checked\n");
    return n > 0;
}

/* A mix of every message type, headers packed once up front. */
static msgpack_sbuffer hdr[6];

static void pack_headers(void)
{
    for (int i = 0; i < 6; i++)
        msgpack_sbuffer_init(&hdr[i]);
    tl_proto_scan sc = {.series = 1,
                        .rows = 2048,
                        .cols = 2048,
                        .dtype = TL_PROTO_U16,
                        .window = 1800,
                        .darks = 10,
                        .flats = 10,
                        .has_center = true,
                        .center = 1023.5,
                        .has_angles = true,
                        .angle_step = 0.001,
                        .filter = {"ram-lak", 7}};
    tl_proto_frame fr = {.series = 1,
                         .index = 99,
                         .kind = TL_PROTO_PROJ,
                         .dtype = TL_PROTO_U16,
                         .rows = 2048,
                         .cols = 2048,
                         .has_angle = true,
                         .angle = 0.1,
                         .has_t_acq = true,
                         .t_acq = 1};
    tl_proto_end en = {.series = 1};
    tl_proto_slice sl = {.id = {"z0", 2},
                         .seq = 1,
                         .shape = {2048, 2048},
                         .dtype = TL_PROTO_F32,
                         .orientation = {1, 0, 0, 0, 1, 0, 0, 0, 0},
                         .projections_used = 1800,
                         .window_last = 1799,
                         .t_acq = 1,
                         .t_pub = 2,
                         .kernel = {"tex", 3}};
    ck_assert_int_eq(tl_proto_encode_scan(&hdr[0], &sc), 0);
    ck_assert_int_eq(tl_proto_encode_frame(&hdr[1], &fr), 0);
    ck_assert_int_eq(tl_proto_encode_end(&hdr[2], &en), 0);
    ck_assert_int_eq(tl_proto_encode_slice(&hdr[3], &sl), 0);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &hdr[4], msgpack_sbuffer_write);
    tl_proto_begin_req(&pk, 7, "set_slice", true);
    msgpack_pack_map(&pk, 3);
    tl_proto_pack_kv_str(&pk, "id", "z0");
    tl_proto_pack_kv_u64(&pk, "z", 1024);
    tl_proto_pack_cstr(&pk, "orientation");
    msgpack_pack_array(&pk, 9);
    for (int i = 0; i < 9; i++)
        msgpack_pack_float(&pk, (float)i);
    msgpack_packer_init(&pk, &hdr[5], msgpack_sbuffer_write);
    tl_proto_pack_rep_error(&pk, 7, TL_PROTO_E_NOT_FOUND, "no such slice");
}

static void free_headers(void)
{
    for (int i = 0; i < 6; i++)
        msgpack_sbuffer_destroy(&hdr[i]);
}

START_TEST(steady_state_decode)
{
    bool check = interposed();
    pack_headers();
    tl_proto_decoder *d = tl_proto_decoder_new();
    tl_proto_msg m;
    tl_proto_error err;
    for (int i = 0; i < 6; i++) /* warm-up */
        ck_assert_int_eq(tl_proto_decode(d, hdr[i].data, hdr[i].size, ~0u, &m, &err), 0);
    uint8_t hostile[] = {0xdd, 0xff, 0xff, 0xff, 0xff};
    count_on();
    int ok = 0;
    for (int it = 0; it < 3000; it++) {
        msgpack_sbuffer *h = &hdr[it % 6];
        ok += tl_proto_decode(d, h->data, h->size, ~0u, &m, &err) == TL_PROTO_OK;
        ok += tl_proto_decode(d, hostile, sizeof hostile, ~0u, &m, &err) == TL_PROTO_E_LIMIT;
    }
    long n = count_off();
    ck_assert_int_eq(ok, 6000);
    if (check)
        ck_assert_msg(n == 0, "%ld allocations (%zu bytes) in 6000 decodes", n,
                      atomic_load(&n_bytes));
    tl_proto_decoder_free(d);
    free_headers();
}
END_TEST

START_TEST(steady_state_decode_parts)
{
    bool check = interposed();
    pack_headers();
    tl_proto_decoder *d = tl_proto_decoder_new();
    static uint8_t payload[2048 * 2048 * 2];
    zmq_msg_t parts[2];
    zmq_msg_init_data(&parts[0], hdr[1].data, hdr[1].size, NULL, NULL);
    zmq_msg_init_data(&parts[1], payload, sizeof payload, NULL, NULL);
    tl_proto_msg m;
    tl_proto_error err;
    ck_assert_int_eq(tl_proto_decode_parts(d, parts, 2, TL_PROTO_INGEST, &m, &err), 0);
    int ok = 0;
    count_on(); /* no ck_assert inside: Check allocates to record each passing assertion */
    for (int it = 0; it < 1000; it++)
        ok += tl_proto_decode_parts(d, parts, 2, TL_PROTO_INGEST, &m, &err) == TL_PROTO_OK;
    long n = count_off();
    ck_assert_int_eq(ok, 1000);
    if (check)
        ck_assert_msg(n == 0, "%ld allocations in 1000 decode_parts", n);
    tl_proto_close(parts, 2);
    tl_proto_decoder_free(d);
    free_headers();
}
END_TEST

START_TEST(steady_state_encode)
{
    bool check = interposed();
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    tl_proto_frame fr = {.series = 1,
                         .index = 0,
                         .kind = TL_PROTO_PROJ,
                         .dtype = TL_PROTO_U16,
                         .rows = 2048,
                         .cols = 2048,
                         .has_angle = true};
    ck_assert_int_eq(tl_proto_encode_frame(&sb, &fr), 0); /* warm-up sizes the buffer */
    int ok = 0;
    count_on();
    for (uint64_t i = 0; i < 1000; i++) {
        msgpack_sbuffer_clear(&sb);
        fr.index = i << 20;
        fr.angle = (double)i * 0.001;
        ok += tl_proto_encode_frame(&sb, &fr) == 0;
    }
    long n = count_off();
    ck_assert_int_eq(ok, 1000);
    if (check)
        ck_assert_msg(n == 0, "%ld allocations in 1000 encodes", n);
    msgpack_sbuffer_destroy(&sb);
}
END_TEST

/* The worst legal header: a 64 KiB map whose one value is an array of one-byte elements.
 * msgpack-c then needs 24 bytes per element (x2 at most for its zone's chunk doubling);
 * that is the bound, and it is paid only after the pre-validator proved the elements are
 * really there. */
START_TEST(worst_legal_header_bounded)
{
    bool check = interposed();
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 4);
    tl_proto_pack_kv_u64(&pk, "v", 1);
    tl_proto_pack_kv_str(&pk, "type", "end");
    tl_proto_pack_kv_u64(&pk, "series", 1);
    tl_proto_pack_cstr(&pk, "junk");
    size_t elems = TL_PROTO_MAX_HEADER - sb.size - 3; /* < 65536: array16, 3-byte head */
    msgpack_pack_array(&pk, elems);
    for (size_t i = 0; i < elems; i++)
        msgpack_pack_uint8(&pk, 1);
    ck_assert_uint_eq(sb.size, TL_PROTO_MAX_HEADER);
    tl_proto_decoder *d = tl_proto_decoder_new();
    tl_proto_msg m;
    tl_proto_error err;
    count_on();
    ck_assert_int_eq(tl_proto_decode(d, sb.data, sb.size, ~0u, &m, &err), TL_PROTO_OK);
    count_off();
    size_t bytes = atomic_load(&n_bytes);
    if (check)
        ck_assert_msg(bytes <= 2 * 24 * (size_t)TL_PROTO_MAX_HEADER, "%zu bytes", bytes);
    fprintf(stderr, "worst legal header (%zu elements): %zu bytes allocated\n", elems, bytes);
    ck_assert_uint_eq(m.end.series, 1);
    tl_proto_decoder_free(d);
    msgpack_sbuffer_destroy(&sb);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("proto_alloc");
    TCase *tc = tcase_create("alloc");
    tcase_add_test(tc, steady_state_decode);
    tcase_add_test(tc, steady_state_decode_parts);
    tcase_add_test(tc, steady_state_encode);
    tcase_add_test(tc, worst_legal_header_bounded);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (TL_TEST_ASAN) {
        puts("skipped: AddressSanitizer owns the allocator this test counts");
        return 77;
    }
    return tl_run_suite(suite(), false);
}
