/* volume_stack.c — see volume_stack.h. A TIFF stack keeps one file open at a time (a stack
 * of thousands of files would run out of descriptors otherwise); reading frames in order,
 * as the reader does, opens each file once per band. */
#include "config.h"

#include <dirent.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "clients/volume_stack.h"

#define NONE UINT32_MAX

bool tl_volume_stack_is_multi(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0)
        return S_ISDIR(st.st_mode);
    return strpbrk(path, "*?[") != NULL;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool tiff_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && (!strcasecmp(dot, ".tif") || !strcasecmp(dot, ".tiff"));
}

/* The files of a directory (TIFF names) or a pattern, sorted; *n of them. */
static char **list_files(const char *path, uint32_t *n, char *err, size_t errlen)
{
    char **v = NULL;
    size_t count = 0, cap = 0;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d) {
            snprintf(err, errlen, "cannot open directory '%s'", path);
            return NULL;
        }
        for (struct dirent *e; (e = readdir(d));) {
            if (!tiff_name(e->d_name))
                continue;
            if (count == cap) {
                cap = cap ? 2 * cap : 256;
                char **g = realloc(v, cap * sizeof *v);
                if (!g)
                    break;
                v = g;
            }
            size_t len = strlen(path) + strlen(e->d_name) + 2;
            if (!(v[count] = malloc(len)))
                break;
            snprintf(v[count++], len, "%s/%s", path, e->d_name);
        }
        closedir(d);
    } else {
        glob_t g;
        if (glob(path, 0, NULL, &g) == 0) {
            v = calloc(g.gl_pathc ? g.gl_pathc : 1, sizeof *v);
            for (size_t i = 0; v && i < g.gl_pathc; i++)
                if ((v[count] = strdup(g.gl_pathv[i])))
                    count++;
        }
        globfree(&g);
    }
    if (count == 0) {
        free(v);
        snprintf(err, errlen, "'%s': no TIFF files", path);
        return NULL;
    }
    qsort(v, count, sizeof *v, by_name);
    *n = (uint32_t)count;
    return v;
}

/* Every file of the stack: one page of the first file's shape and sample type. */
static int check_files(tl_volume_stack *s, char *err, size_t errlen)
{
    for (uint32_t i = 0; i < s->frames; i++) {
        tl_tiff_reader r;
        if (tl_tiff_open(&r, s->files[i], err, errlen) != 0)
            return -1;
        int rc = 0;
        if (r.pages != 1)
            rc = (snprintf(err, errlen, "'%s' has %u pages; a TIFF stack needs one per file",
                           s->files[i], r.pages),
                  -1);
        else if (i == 0) {
            s->rows = r.rows;
            s->cols = r.cols;
            s->dtype = r.dtype;
        } else if (r.rows != s->rows || r.cols != s->cols || r.dtype != s->dtype)
            rc = (snprintf(err, errlen,
                          "'%s' is %u x %u of %zu-byte samples, '%s' is %u x %u of %zu-byte "
                          "samples: the stack's files differ",
                          s->files[i], r.rows, r.cols, tl_dtype_size(r.dtype), s->files[0],
                          s->rows, s->cols, tl_dtype_size(s->dtype)),
                  -1);
        tl_tiff_close(&r);
        if (rc != 0)
            return -1;
    }
    return 0;
}

int tl_volume_stack_open(tl_volume_stack *s, const char *path, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->path = path;
    s->open_file = NONE;
    if (!tl_volume_stack_is_multi(path)) {
        s->type = TL_STACK_TIFF_PAGES;
        if (tl_tiff_open(&s->tif, path, err, errlen) != 0)
            return -1;
        s->frames = s->tif.pages;
        s->rows = s->tif.rows;
        s->cols = s->tif.cols;
        s->dtype = s->tif.dtype;
        return 0;
    }
    s->type = TL_STACK_TIFF_FILES;
    if (!(s->files = list_files(path, &s->frames, err, errlen)) ||
        check_files(s, err, errlen) != 0) {
        tl_volume_stack_close(s);
        return -1;
    }
    return 0;
}

void tl_volume_stack_hdf5(tl_volume_stack *s, tl_hdf5_reader *h, tl_frame_kind kind)
{
    memset(s, 0, sizeof *s);
    s->type = TL_STACK_HDF5;
    s->path = h->path;
    s->h5 = h;
    s->kind = kind;
    s->frames = h->count[kind];
    s->rows = h->rows;
    s->cols = h->cols;
    s->dtype = h->dtype;
    s->open_file = NONE;
}

int tl_volume_stack_read(tl_volume_stack *s, uint32_t first, uint32_t n, uint32_t row0,
                         uint32_t nrows, void *buf, char *err, size_t errlen)
{
    if (s->type == TL_STACK_HDF5)
        return tl_hdf5_read_band(s->h5, s->kind, first, n, row0, nrows, buf, err, errlen);
    if (first > s->frames || n > s->frames - first) {
        snprintf(err, errlen, "'%s': no frames %u .. %u (it has %u)", s->path, first,
                 first + n - 1, s->frames);
        return -1;
    }
    size_t bytes = (size_t)nrows * s->cols * tl_dtype_size(s->dtype);
    for (uint32_t i = 0; i < n; i++) {
        uint8_t *dst = (uint8_t *)buf + i * bytes;
        uint32_t page = first + i;
        if (s->type == TL_STACK_TIFF_FILES) {
            if (s->open_file != first + i) {
                tl_tiff_close(&s->tif);
                s->open_file = NONE;
                if (tl_tiff_open(&s->tif, s->files[first + i], err, errlen) != 0)
                    return -1;
                /* the file may have changed since the stack was checked */
                if (s->tif.rows != s->rows || s->tif.cols != s->cols || s->tif.dtype != s->dtype) {
                    snprintf(err, errlen, "'%s' changed shape since it was opened",
                             s->files[first + i]);
                    return -1;
                }
                s->open_file = first + i;
            }
            page = 0;
        }
        if (tl_tiff_read_rows(&s->tif, page, row0, nrows, dst, err, errlen) != 0)
            return -1;
    }
    return 0;
}

uint32_t tl_volume_stack_read_rows(const tl_volume_stack *s)
{
    uint32_t r = s->type == TL_STACK_HDF5 ? tl_hdf5_chunk_rows(s->h5) : 1;
    return r ? r : 1;
}

void tl_volume_stack_close(tl_volume_stack *s)
{
    tl_tiff_close(&s->tif);
    for (uint32_t i = 0; s->files && i < s->frames; i++)
        free(s->files[i]);
    free(s->files);
    s->files = NULL;
}
