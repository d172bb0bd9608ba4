/* check_shm.c — slices in shared memory (protocol/shm.h): the daemon's writer ring and a
 * subscriber's reader, in one process. Round trips (pixels, the offset of each slot, the
 * slots used in turn, the sequence word where PROTOCOL.md says it is), a reader that fell
 * behind (lapped slot, slot being written) getting TL_SHM_STALE, the pixels viewed in
 * place (tl_shm_view, valid until the slot is reused), the errors (offset outside the
 * object, no such object, a slice not in shared memory), a name change remapping, and
 * destroy unlinking. A writer thread rewriting slots under a reader checks that a copy the
 * reader accepts is never torn. Object names carry the pid, so parallel runs never meet.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "protocol/shm.h"
#include "tests/testutil.h"

enum { H = 6, W = 5, NPX = H * W };

static char name_a[64], name_b[64], name_none[64];

/* Names unique to this run (the pid of the process running the suite; the tests run one
 * at a time, and each destroys what it creates). */
static void names(void)
{
    snprintf(name_a, sizeof name_a, "/tlt-shm-%d-a", (int)getpid());
    snprintf(name_b, sizeof name_b, "/tlt-shm-%d-b", (int)getpid());
    snprintf(name_none, sizeof name_none, "/tlt-shm-%d-none", (int)getpid());
}

/* A failed test ends its process before it destroys its objects: unlinked here, in the
 * process running the suite, after the last test. */
static void cleanup(void)
{
    shm_unlink(name_a);
    shm_unlink(name_b);
}

/* The header a subscriber would decode for seq, at offset of object name. */
static tl_proto_slice header(const char *name, uint64_t offset, uint64_t seq)
{
    return (tl_proto_slice){.id = {"z0", 2},
                            .seq = seq,
                            .shape = {H, W},
                            .dtype = TL_PROTO_F32,
                            .has_shm = true,
                            .shm_name = {name, strlen(name)},
                            .shm_offset = offset};
}

/* Pixels that differ for every seq and every pixel. */
static void fill(float *px, uint64_t seq)
{
    for (int i = 0; i < NPX; i++)
        px[i] = (float)(seq * 1000 + (uint64_t)i);
}

/* Writes slice seq into the ring's next slot as the daemon does; returns its offset. */
static uint64_t put(tl_shm_ring *r, uint64_t seq)
{
    uint64_t off;
    float *px = tl_shm_ring_begin(r, &off);
    fill(px, seq);
    tl_shm_ring_commit(r, off, seq);
    return off;
}

static uint64_t word(const tl_shm_ring *r, uint64_t off)
{
    uint64_t w;
    memcpy(&w, (const char *)r->base + off - TL_SHM_WORD_BACK, sizeof w);
    return w; /* little-endian host: the layout's byte order */
}

START_TEST(round_trip_slots_in_turn)
{
    char err[512];
    tl_shm_ring r;
    ck_assert_msg(tl_shm_ring_create(&r, name_a, 3, NPX * sizeof(float), err, sizeof err) == 0,
                  "%s", err);
    ck_assert_uint_eq(r.slot_bytes, 2 * TL_SHM_PAGE); /* header page + pixels rounded up */
    ck_assert_uint_eq(r.size, 3 * r.slot_bytes);
    tl_shm_reader rd = {0};
    for (uint64_t seq = 1; seq <= 7; seq++) {
        uint64_t off = put(&r, seq);
        uint64_t slot = (seq - 1) % 3;
        ck_assert_uint_eq(off, slot * r.slot_bytes + TL_SHM_PAGE);
        ck_assert_uint_eq(off % TL_PROTO_SHM_ALIGN, 0);
        ck_assert_uint_eq(word(&r, off), seq);
        float got[NPX], want[NPX];
        memset(got, 0, sizeof got);
        tl_proto_slice s = header(name_a, off, seq);
        ck_assert_msg(tl_shm_read(&rd, &s, got, err, sizeof err) == 0, "seq %llu: %s",
                      (unsigned long long)seq, err);
        fill(want, seq);
        ck_assert_msg(!memcmp(got, want, sizeof got), "seq %llu: other pixels",
                      (unsigned long long)seq);
    }
    ck_assert_str_eq(rd.name, name_a);
    ck_assert_uint_eq(rd.size, r.size);
    tl_shm_reader_close(&rd);
    ck_assert_ptr_null(rd.base);
    tl_shm_ring_destroy(&r);
}
END_TEST

/* The writer came round to the slot again: the old message's copy is discarded. */
START_TEST(lapped_slot_is_stale)
{
    char err[512];
    tl_shm_ring r;
    ck_assert(tl_shm_ring_create(&r, name_a, 2, NPX * sizeof(float), err, sizeof err) == 0);
    uint64_t off1 = put(&r, 1);
    put(&r, 2);
    uint64_t off3 = put(&r, 3);
    ck_assert_uint_eq(off3, off1); /* two slots: seq 3 went where seq 1 was */
    tl_shm_reader rd = {0};
    float got[NPX];
    tl_proto_slice s1 = header(name_a, off1, 1);
    ck_assert_int_eq(tl_shm_read(&rd, &s1, got, err, sizeof err), TL_SHM_STALE);
    tl_proto_slice s3 = header(name_a, off3, 3);
    ck_assert_int_eq(tl_shm_read(&rd, &s3, got, err, sizeof err), 0);
    /* a seq from the future (a header that lies) is no better than an old one */
    tl_proto_slice s9 = header(name_a, off3, 9);
    ck_assert_int_eq(tl_shm_read(&rd, &s9, got, err, sizeof err), TL_SHM_STALE);
    tl_shm_reader_close(&rd);
    tl_shm_ring_destroy(&r);
}
END_TEST

/* A kept slot (a scan's final) is skipped until another is kept: its reader can come
 * after any number of newer publications; the others turn over among the other slots. */
START_TEST(kept_slot_survives)
{
    char err[512];
    tl_shm_ring r;
    ck_assert(tl_shm_ring_create(&r, name_a, 3, NPX * sizeof(float), err, sizeof err) == 0);
    put(&r, 1);
    uint64_t final = put(&r, 2);
    tl_shm_ring_keep(&r, final);
    for (uint64_t seq = 3; seq <= 12; seq++)
        ck_assert_uint_ne(put(&r, seq), final);
    tl_shm_reader rd = {0};
    float got[NPX], want[NPX];
    tl_proto_slice s2 = header(name_a, final, 2);
    ck_assert_int_eq(tl_shm_read(&rd, &s2, got, err, sizeof err), 0);
    fill(want, 2);
    ck_assert(!memcmp(got, want, sizeof got));
    /* the next final is kept instead: the old one turns over again */
    uint64_t next_final = put(&r, 13);
    tl_shm_ring_keep(&r, next_final);
    bool reused = false;
    for (uint64_t seq = 14; seq <= 16; seq++) {
        uint64_t off = put(&r, seq);
        ck_assert_uint_ne(off, next_final);
        reused = reused || off == final;
    }
    ck_assert(reused);
    ck_assert_int_eq(tl_shm_read(&rd, &s2, got, err, sizeof err), TL_SHM_STALE);
    tl_shm_reader_close(&rd);
    tl_shm_ring_destroy(&r);
}
END_TEST

/* A slot the daemon is writing (begun, not committed) holds no slice, and nor does a slot
 * never written. */
START_TEST(uncommitted_slot_is_stale)
{
    char err[512];
    tl_shm_ring r;
    ck_assert(tl_shm_ring_create(&r, name_a, 2, NPX * sizeof(float), err, sizeof err) == 0);
    tl_shm_reader rd = {0};
    float got[NPX];
    tl_proto_slice never = header(name_a, TL_SHM_PAGE, 1);
    ck_assert_int_eq(tl_shm_read(&rd, &never, got, err, sizeof err), TL_SHM_STALE);
    uint64_t off1 = put(&r, 1);
    put(&r, 2);
    tl_proto_slice s1 = header(name_a, off1, 1);
    ck_assert_int_eq(tl_shm_read(&rd, &s1, got, err, sizeof err), 0);
    uint64_t off;
    float *px = tl_shm_ring_begin(&r, &off); /* seq 3 into seq 1's slot, not committed */
    ck_assert_uint_eq(off, off1);
    ck_assert_uint_eq(word(&r, off), 0);
    ck_assert_int_eq(tl_shm_read(&rd, &s1, got, err, sizeof err), TL_SHM_STALE);
    fill(px, 3);
    tl_proto_slice s3 = header(name_a, off, 3);
    ck_assert_int_eq(tl_shm_read(&rd, &s3, got, err, sizeof err), TL_SHM_STALE);
    tl_shm_ring_commit(&r, off, 3);
    ck_assert_int_eq(tl_shm_read(&rd, &s3, got, err, sizeof err), 0);
    tl_shm_reader_close(&rd);
    tl_shm_ring_destroy(&r);
}
END_TEST

/* The pixels in place (tl_shm_view): where the offset says, and only the slice's while
 * tl_shm_valid holds; a slot already reused is stale at once. */
START_TEST(view_in_place)
{
    char err[512];
    tl_shm_ring r;
    ck_assert(tl_shm_ring_create(&r, name_a, 2, NPX * sizeof(float), err, sizeof err) == 0);
    uint64_t off1 = put(&r, 1);
    tl_shm_reader rd = {0};
    tl_proto_slice s1 = header(name_a, off1, 1);
    const void *px = NULL;
    ck_assert_msg(tl_shm_view(&rd, &s1, &px, err, sizeof err) == 0, "%s", err);
    ck_assert_ptr_eq(px, (const char *)rd.base + off1);
    float want[NPX];
    fill(want, 1);
    ck_assert(!memcmp(px, want, sizeof want));
    ck_assert(tl_shm_valid(&rd, &s1));
    put(&r, 2);
    ck_assert(tl_shm_valid(&rd, &s1));
    put(&r, 3); /* into seq 1's slot: what was read from px no longer counts */
    ck_assert(!tl_shm_valid(&rd, &s1));
    ck_assert_int_eq(tl_shm_view(&rd, &s1, &px, err, sizeof err), TL_SHM_STALE);
    tl_proto_slice far = header(name_a, r.size, 3);
    ck_assert_int_eq(tl_shm_view(&rd, &far, &px, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "outside"));
    tl_shm_reader_close(&rd);
    tl_shm_ring_destroy(&r);
}
END_TEST

/* Each error is -1 with a message that says what is wrong. */
static void expect_error(tl_shm_reader *rd, const tl_proto_slice *s, const char *says)
{
    char err[512] = "";
    float got[NPX];
    ck_assert_int_eq(tl_shm_read(rd, s, got, err, sizeof err), -1);
    ck_assert_msg(strstr(err, says) != NULL, "message \"%s\" lacks \"%s\"", err, says);
}

START_TEST(errors)
{
    char err[512];
    tl_shm_ring r;
    ck_assert(tl_shm_ring_create(&r, name_a, 2, NPX * sizeof(float), err, sizeof err) == 0);
    uint64_t off = put(&r, 1);
    tl_shm_reader rd = {0};
    tl_proto_slice s = header(name_a, r.size, 1); /* just past the end */
    expect_error(&rd, &s, "outside");
    s.shm_offset = r.size - 64; /* starts inside, the pixels run past the end */
    expect_error(&rd, &s, "outside");
    s.shm_offset = (uint64_t)1 << 62;
    expect_error(&rd, &s, "outside");
    s.shm_offset = 0; /* no room for the sequence word before it */
    expect_error(&rd, &s, "outside");
    s.shm_offset = off; /* the same reader still works */
    float got[NPX];
    ck_assert_int_eq(tl_shm_read(&rd, &s, got, err, sizeof err), 0);

    tl_proto_slice none = header(name_none, TL_SHM_PAGE, 1);
    expect_error(&rd, &none, name_none);
    expect_error(&rd, &none, strerror(ENOENT));
    ck_assert_ptr_null(rd.base);
    tl_proto_slice plain = header(name_a, off, 1);
    plain.has_shm = false;
    expect_error(&rd, &plain, "not in shared memory");
    tl_proto_slice bad_shape = header(name_a, off, 1);
    bad_shape.shape[0] = 0;
    err[0] = 0;
    ck_assert_int_eq(tl_shm_read(&rd, &bad_shape, got, err, sizeof err), -1);
    ck_assert(err[0] != 0);
    tl_shm_reader_close(&rd);
    tl_shm_ring_destroy(&r);

    /* the writer refuses names that are not "/name" and rings without slots */
    tl_shm_ring bad;
    ck_assert_int_eq(tl_shm_ring_create(&bad, "tlt-no-slash", 2, 64, err, sizeof err), -1);
    ck_assert_int_eq(tl_shm_ring_create(&bad, name_b, 0, 64, err, sizeof err), -1);
    ck_assert_ptr_null(bad.base);
    ck_assert_int_eq(shm_open(name_b, O_RDONLY, 0), -1);
}
END_TEST

/* A message naming another object (a new size makes a new one) is read from that object. */
START_TEST(name_change_remaps)
{
    char err[512];
    tl_shm_ring a, b;
    ck_assert(tl_shm_ring_create(&a, name_a, 2, NPX * sizeof(float), err, sizeof err) == 0);
    ck_assert(tl_shm_ring_create(&b, name_b, 3, 2 * NPX * sizeof(float), err, sizeof err) == 0);
    uint64_t oa = put(&a, 1);
    put(&b, 1);
    uint64_t ob = put(&b, 2); /* b's second slot; a has no such offset with pixels of seq 2 */
    tl_shm_reader rd = {0};
    float got[NPX], want[NPX];
    tl_proto_slice sa = header(name_a, oa, 1), sb = header(name_b, ob, 2);
    ck_assert_int_eq(tl_shm_read(&rd, &sa, got, err, sizeof err), 0);
    ck_assert_str_eq(rd.name, name_a);
    ck_assert_int_eq(tl_shm_read(&rd, &sb, got, err, sizeof err), 0);
    ck_assert_str_eq(rd.name, name_b);
    ck_assert_uint_eq(rd.size, b.size);
    fill(want, 2);
    ck_assert(!memcmp(got, want, sizeof got));
    ck_assert_int_eq(tl_shm_read(&rd, &sa, got, err, sizeof err), 0); /* and back */
    ck_assert_str_eq(rd.name, name_a);
    fill(want, 1);
    ck_assert(!memcmp(got, want, sizeof got));
    tl_shm_reader_close(&rd);
    tl_shm_ring_destroy(&a);
    tl_shm_ring_destroy(&b);
}
END_TEST

/* Destroy unlinks the name; a reader that mapped the object before keeps a valid mapping. */
START_TEST(destroy_unlinks)
{
    char err[512];
    tl_shm_ring r;
    ck_assert(tl_shm_ring_create(&r, name_a, 2, NPX * sizeof(float), err, sizeof err) == 0);
    struct stat st;
    int fd = shm_open(name_a, O_RDONLY, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(fstat(fd, &st), 0);
    ck_assert_int_eq(st.st_size, (off_t)r.size);
    close(fd);
    uint64_t off = put(&r, 1);
    tl_shm_reader rd = {0};
    float got[NPX], want[NPX];
    tl_proto_slice s = header(name_a, off, 1);
    ck_assert_int_eq(tl_shm_read(&rd, &s, got, err, sizeof err), 0);
    tl_shm_ring_destroy(&r);
    ck_assert_ptr_null(r.base);
    errno = 0;
    ck_assert_int_eq(shm_open(name_a, O_RDONLY, 0), -1);
    ck_assert_int_eq(errno, ENOENT);
    memset(got, 0, sizeof got);
    ck_assert_int_eq(tl_shm_read(&rd, &s, got, err, sizeof err), 0);
    fill(want, 1);
    ck_assert(!memcmp(got, want, sizeof got));
    tl_shm_reader_close(&rd);
    tl_shm_reader_close(&rd); /* twice is harmless, and so is destroying twice */
    tl_shm_ring_destroy(&r);
}
END_TEST

/* A leftover object of the name (a daemon that was killed) is replaced, size and all. */
START_TEST(create_replaces_leftover)
{
    int fd = shm_open(name_a, O_CREAT | O_RDWR, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, 3 * TL_SHM_PAGE), 0);
    close(fd);
    char err[512];
    tl_shm_ring r;
    ck_assert_msg(tl_shm_ring_create(&r, name_a, 4, NPX * sizeof(float), err, sizeof err) == 0,
                  "%s", err);
    struct stat st;
    fd = shm_open(name_a, O_RDONLY, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(fstat(fd, &st), 0);
    close(fd);
    ck_assert_int_eq(st.st_size, (off_t)(4 * 2 * TL_SHM_PAGE));
    for (uint64_t k = 0; k < 4; k++) /* zero-filled: no slot claims a slice */
        ck_assert_uint_eq(word(&r, k * r.slot_bytes + TL_SHM_PAGE), 0);
    tl_shm_ring_destroy(&r);
}
END_TEST

/* ---- a writer racing a reader ------------------------------------------------------------ */

enum { BIG = 64 * 1024 }; /* floats per slice: a copy takes long enough to be overtaken */

typedef struct {
    tl_shm_ring *r;
    _Atomic uint64_t announced; /* offset << 20 | seq of the latest commit, as a message */
    atomic_bool stop;
} race;

static void *writer(void *arg)
{
    race *x = arg;
    for (uint64_t seq = 1; !atomic_load(&x->stop) && seq < (1u << 20); seq++) {
        uint64_t off;
        float *px = tl_shm_ring_begin(x->r, &off);
        for (int i = 0; i < BIG; i++)
            px[i] = (float)seq;
        tl_shm_ring_commit(x->r, off, seq);
        atomic_store(&x->announced, off << 20 | seq);
    }
    return NULL;
}

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* Every copy the reader accepts holds exactly one slice; stale ones are reported. */
START_TEST(racing_writer_never_tears)
{
    char err[512];
    tl_shm_ring r;
    ck_assert(tl_shm_ring_create(&r, name_a, 2, BIG * sizeof(float), err, sizeof err) == 0);
    race x = {.r = &r};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, writer, &x), 0);
    static float got[BIG];
    tl_shm_reader rd = {0};
    long ok = 0, stale = 0;
    double t0 = seconds();
    do {
        uint64_t a = atomic_load(&x.announced);
        if (!a)
            continue;
        tl_proto_slice s = {.id = {"big", 3},
                            .seq = a & 0xfffff,
                            .shape = {256, 256},
                            .dtype = TL_PROTO_F32,
                            .has_shm = true,
                            .shm_name = {name_a, strlen(name_a)},
                            .shm_offset = a >> 20};
        int rc = tl_shm_read(&rd, &s, got, err, sizeof err);
        ck_assert_msg(rc == 0 || rc == TL_SHM_STALE, "%s", err);
        if (rc == TL_SHM_STALE) {
            stale++;
            continue;
        }
        ok++;
        int i = 0; /* one check per copy, not per pixel: each ck_assert costs a write */
        while (i < BIG && got[i] == (float)s.seq)
            i++;
        if (i < BIG)
            ck_abort_msg("torn copy: pixel %d is %g in seq %llu", i, got[i],
                         (unsigned long long)s.seq);
    } while (seconds() - t0 < 0.5);
    atomic_store(&x.stop, true);
    pthread_join(t, NULL);
    printf("racing writer: %ld copies accepted, %ld stale\n", ok, stale);
    ck_assert_int_gt(ok, 0);
    tl_shm_reader_close(&rd);
    tl_shm_ring_destroy(&r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("shm");
    TCase *tc = tcase_create("shm");
    tcase_add_unchecked_fixture(tc, NULL, cleanup);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, round_trip_slots_in_turn);
    tcase_add_test(tc, lapped_slot_is_stale);
    tcase_add_test(tc, kept_slot_survives);
    tcase_add_test(tc, uncommitted_slot_is_stale);
    tcase_add_test(tc, view_in_place);
    tcase_add_test(tc, errors);
    tcase_add_test(tc, name_change_remaps);
    tcase_add_test(tc, destroy_unlinks);
    tcase_add_test(tc, create_replaces_leftover);
    tcase_add_test(tc, racing_writer_never_tears);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    names();
    return tl_run_suite(suite(), false);
}
