/* shm.c — see shm.h. The sequence word is a seqlock with one writer: the writer zeroes it
 * before the pixels change and stores the seq (release) once they are complete; a reader
 * loads it (acquire) before the copy and again after an acquire fence, so a copy that
 * overlapped a rewrite is always noticed. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "protocol/shm.h"

static size_t round_page(size_t n)
{
    return (n + TL_SHM_PAGE - 1) / TL_SHM_PAGE * TL_SHM_PAGE;
}

static _Atomic uint64_t *word_at(const void *base, uint64_t offset)
{
    return (_Atomic uint64_t *)((char *)base + offset - TL_SHM_WORD_BACK);
}

int tl_shm_ring_create(tl_shm_ring *r, const char *name, uint32_t slots, size_t pixel_bytes,
                       char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    if (slots == 0 || strlen(name) > TL_PROTO_SHM_NAME_MAX || name[0] != '/') {
        snprintf(err, errlen, "shared memory \"%s\": bad name or no slots", name);
        return -1;
    }
    r->slots = slots;
    r->pixel_bytes = pixel_bytes;
    r->slot_bytes = TL_SHM_PAGE + round_page(pixel_bytes);
    r->size = (size_t)slots * r->slot_bytes;
    shm_unlink(name); /* a leftover of a daemon that was killed */
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "shm_open %s: %s", name, strerror(errno));
        return -1;
    }
    /* ftruncate zero-fills: every sequence word starts at 0, "no slice here" */
    if (ftruncate(fd, (off_t)r->size) != 0) {
        snprintf(err, errlen, "ftruncate %s to %zu bytes: %s", name, r->size, strerror(errno));
        close(fd);
        shm_unlink(name);
        return -1;
    }
    /* ...but leaves the object sparse: on a full /dev/shm the first write into a page would
     * fault (SIGBUS, or a hang) in the middle of a read-out. Taking the pages now turns a
     * full /dev/shm into this error instead. */
    int fe = posix_fallocate(fd, 0, (off_t)r->size);
    if (fe != 0) {
        snprintf(err, errlen, "posix_fallocate %s, %zu bytes: %s", name, r->size, strerror(fe));
        close(fd);
        shm_unlink(name);
        return -1;
    }
    void *base = mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd); /* the mapping keeps the object */
    if (base == MAP_FAILED) {
        snprintf(err, errlen, "mmap %s (%zu bytes): %s", name, r->size, strerror(errno));
        shm_unlink(name);
        return -1;
    }
    r->base = base;
    snprintf(r->name, sizeof r->name, "%s", name);
    return 0;
}

void *tl_shm_ring_begin(tl_shm_ring *r, uint64_t *offset)
{
    uint32_t k = r->next++ % r->slots;
    if (r->kept == k + 1 && r->slots > 1) /* the kept final: its reader may still come */
        k = r->next++ % r->slots;
    *offset = (uint64_t)k * r->slot_bytes + TL_SHM_PAGE;
    atomic_store_explicit(word_at(r->base, *offset), 0, memory_order_relaxed);
    atomic_thread_fence(memory_order_release); /* readers see 0 before any new pixel */
    return (char *)r->base + *offset;
}

void tl_shm_ring_commit(tl_shm_ring *r, uint64_t offset, uint64_t seq)
{
    atomic_store_explicit(word_at(r->base, offset), seq, memory_order_release);
}

void tl_shm_ring_keep(tl_shm_ring *r, uint64_t offset)
{
    r->kept = (uint32_t)((offset - TL_SHM_PAGE) / r->slot_bytes) + 1;
}

void tl_shm_ring_destroy(tl_shm_ring *r)
{
    if (r->base) {
        munmap(r->base, r->size);
        shm_unlink(r->name);
    }
    memset(r, 0, sizeof *r);
}

static int map(tl_shm_reader *rd, const tl_proto_str *name, char *err, size_t errlen)
{
    if (rd->base && strlen(rd->name) == name->len && memcmp(rd->name, name->ptr, name->len) == 0)
        return 0;
    tl_shm_reader_close(rd);
    snprintf(rd->name, sizeof rd->name, "%.*s", (int)name->len, name->ptr);
    int fd = shm_open(rd->name, O_RDONLY, 0);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "shared memory %s: %s (is the subscriber on the daemon's host?)",
                 rd->name, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    void *base =
        st.st_size > 0 ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    close(fd);
    if (base == MAP_FAILED) {
        snprintf(err, errlen, "mmap %s: %s", rd->name, st.st_size > 0 ? strerror(errno) : "empty");
        return -1;
    }
    rd->base = base;
    rd->size = (size_t)st.st_size;
    return 0;
}

int tl_shm_view(tl_shm_reader *rd, const tl_proto_slice *s, const void **pixels, char *err,
                size_t errlen)
{
    tl_proto_error perr;
    size_t bytes;
    if (!s->has_shm) {
        snprintf(err, errlen, "slice %.*s is not in shared memory", (int)s->id.len, s->id.ptr);
        return -1;
    }
    if (tl_proto_frame_bytes(s->shape[0], s->shape[1], s->dtype, &bytes, &perr) != TL_PROTO_OK) {
        snprintf(err, errlen, "%s", perr.message);
        return -1;
    }
    if (map(rd, &s->shm_name, err, errlen) != 0)
        return -1;
    if (s->shm_offset < TL_SHM_WORD_BACK || s->shm_offset > rd->size ||
        bytes > rd->size - s->shm_offset) {
        snprintf(err, errlen, "slice %.*s: %zu bytes at offset %llu lie outside %s (%zu bytes)",
                 (int)s->id.len, s->id.ptr, bytes, (unsigned long long)s->shm_offset, rd->name,
                 rd->size);
        return -1;
    }
    if (atomic_load_explicit(word_at(rd->base, s->shm_offset), memory_order_acquire) != s->seq)
        return TL_SHM_STALE;
    *pixels = (const char *)rd->base + s->shm_offset;
    return 0;
}

bool tl_shm_valid(const tl_shm_reader *rd, const tl_proto_slice *s)
{
    atomic_thread_fence(memory_order_acquire); /* every read of the pixels is done before */
    return atomic_load_explicit(word_at(rd->base, s->shm_offset), memory_order_relaxed) == s->seq;
}

int tl_shm_read(tl_shm_reader *rd, const tl_proto_slice *s, void *dst, char *err, size_t errlen)
{
    const void *px;
    int rc = tl_shm_view(rd, s, &px, err, errlen);
    if (rc != 0)
        return rc;
    memcpy(dst, px, (size_t)s->shape[0] * s->shape[1] * tl_proto_dtype_size(s->dtype));
    return tl_shm_valid(rd, s) ? 0 : TL_SHM_STALE;
}

void tl_shm_reader_close(tl_shm_reader *rd)
{
    if (rd->base)
        munmap((void *)rd->base, rd->size);
    rd->base = NULL;
    rd->size = 0;
    rd->name[0] = 0;
}
