/* hdf5.c — see hdf5.h. libhdf5's automatic error printing is turned off: every failure
 * becomes one message naming the file and the dataset. */
#include "config.h"

#include <hdf5.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/hdf5.h"

static int __attribute__((format(printf, 3, 4)))
failf(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}
#define FAIL(...) failf(err, errlen, __VA_ARGS__)

bool tl_hdf5_is_hdf5(const char *path)
{
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    FILE *f = fopen(path, "rb");
    if (f) {
        bool yes = false;
        for (long off = 0; !yes && off <= 2048; off = off ? off * 2 : 512) {
            unsigned char b[8];
            yes = fseek(f, off, SEEK_SET) == 0 && fread(b, 1, 8, f) == 8 && memcmp(b, sig, 8) == 0;
        }
        fclose(f);
        return yes;
    }
    const char *dot = strrchr(path, '.');
    return dot && (!strcmp(dot, ".h5") || !strcmp(dot, ".hdf5") || !strcmp(dot, ".hdf") ||
                   !strcmp(dot, ".nxs") || !strcmp(dot, ".cxi"));
}

/* Whether the object at an absolute path exists (every link on the way). */
static bool exists(hid_t file, const char *path)
{
    char part[256];
    for (const char *p = strchr(path + 1, '/');; p = strchr(p + 1, '/')) {
        size_t n = p ? (size_t)(p - path) : strlen(path);
        if (n >= sizeof part)
            return false;
        memcpy(part, path, n);
        part[n] = 0;
        if (H5Lexists(file, part, H5P_DEFAULT) <= 0)
            return false;
        if (!p)
            return true;
    }
}

static const char *first_of(hid_t file, const char *const *paths)
{
    for (int i = 0; paths[i]; i++)
        if (exists(file, paths[i]))
            return paths[i];
    return NULL;
}

/* A 3-D dataset: its frame count and frame shape, and the dtype it is stored in (false
 * for types the engine does not take). */
static int open_stack(tl_hdf5_reader *r, const char *name, int kind, uint32_t *frames,
                      bool *native, tl_dtype *dt, char *err, size_t errlen)
{
    hid_t d = H5Dopen2(r->file, name, H5P_DEFAULT);
    if (d < 0)
        return FAIL("%s: cannot open dataset %s", r->path, name);
    r->dset[kind] = d;
    hid_t s = H5Dget_space(d);
    hsize_t dims[3];
    int nd = s >= 0 ? H5Sget_simple_extent_ndims(s) : -1;
    if (nd == 3)
        H5Sget_simple_extent_dims(s, dims, NULL);
    H5Sclose(s);
    if (nd != 3)
        return FAIL("%s: dataset %s has %d dimensions, expected 3 (frames, rows, cols)", r->path,
                    name, nd);
    if (dims[1] < 1 || dims[1] > 65536 || dims[2] < 1 || dims[2] > 65536 || dims[0] > UINT32_MAX)
        return FAIL("%s: dataset %s is %llu x %llu x %llu", r->path, name,
                    (unsigned long long)dims[0], (unsigned long long)dims[1],
                    (unsigned long long)dims[2]);
    if (r->rows && (dims[1] != r->rows || dims[2] != r->cols))
        return FAIL("%s: dataset %s has frames of %llu x %llu, the projections %u x %u", r->path,
                    name, (unsigned long long)dims[1], (unsigned long long)dims[2], r->rows,
                    r->cols);
    r->rows = (uint32_t)dims[1];
    r->cols = (uint32_t)dims[2];
    *frames = (uint32_t)dims[0];
    hid_t t = H5Dget_type(d);
    H5T_class_t cls = H5Tget_class(t);
    size_t size = H5Tget_size(t);
    *native = true;
    if (cls == H5T_INTEGER && H5Tget_sign(t) == H5T_SGN_NONE &&
        (size == 1 || size == 2 || size == 4))
        *dt = size == 1 ? TL_DTYPE_U8 : size == 2 ? TL_DTYPE_U16 : TL_DTYPE_U32;
    else if (cls == H5T_FLOAT && size == 4)
        *dt = TL_DTYPE_F32;
    else if (cls == H5T_INTEGER || cls == H5T_FLOAT)
        *native = false; /* read through float32 */
    else
        return H5Tclose(t),
               FAIL("%s: dataset %s holds neither integers nor floats", r->path, name);
    H5Tclose(t);
    return 0;
}

/* A 1-D dataset of n values as doubles (malloc'ed). */
static double *read_vector(tl_hdf5_reader *r, const char *name, uint32_t n, char *err,
                           size_t errlen)
{
    hid_t d = H5Dopen2(r->file, name, H5P_DEFAULT);
    if (d < 0)
        return (void)FAIL("%s: cannot open dataset %s", r->path, name), NULL;
    hid_t s = H5Dget_space(d);
    hssize_t got = H5Sget_simple_extent_npoints(s);
    H5Sclose(s);
    double *v = NULL;
    if (got != (hssize_t)n)
        FAIL("%s: dataset %s has %lld values, expected %u", r->path, name, (long long)got, n);
    else if (!(v = malloc((n ? n : 1) * sizeof *v)))
        FAIL("out of memory");
    else if (H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0) {
        FAIL("%s: cannot read dataset %s", r->path, name);
        free(v);
        v = NULL;
    }
    H5Dclose(d);
    return v;
}

static int open_dx(tl_hdf5_reader *r, char *err, size_t errlen)
{
    static const char *const names[3] = {"/exchange/data_dark", "/exchange/data_white",
                                         "/exchange/data"};
    bool native[3] = {true, true, true};
    tl_dtype dt[3] = {TL_DTYPE_F32, TL_DTYPE_F32, TL_DTYPE_F32};
    for (int k = 2; k >= 0; k--) /* projections first: they define the shape */
        if ((k == 2 || exists(r->file, names[k])) &&
            open_stack(r, names[k], k, &r->count[k], &native[k], &dt[k], err, errlen) != 0)
            return -1;
    r->dtype = dt[2];
    for (int k = 0; k < 3; k++)
        if (r->dset[k] >= 0 && (!native[k] || dt[k] != dt[2]))
            r->dtype = TL_DTYPE_F32;
    if (exists(r->file, "/exchange/theta")) {
        r->angles = read_vector(r, "/exchange/theta", r->count[2], err, errlen);
        if (!r->angles)
            return -1;
        for (uint32_t i = 0; i < r->count[2]; i++)
            r->angles[i] *= M_PI / 180.0;
    }
    return 0;
}

static int open_nx(tl_hdf5_reader *r, const char *data, char *err, size_t errlen)
{
    uint32_t n;
    bool native;
    tl_dtype dt = TL_DTYPE_F32;
    if (open_stack(r, data, 2, &n, &native, &dt, err, errlen) != 0)
        return -1;
    r->dset[0] = r->dset[1] = r->dset[2];
    r->dtype = native ? dt : TL_DTYPE_F32;
    static const char *const keys[] = {"/entry/data/image_key",
                                       "/entry/instrument/detector/image_key", NULL};
    static const char *const angles[] = {"/entry/sample/rotation_angle",
                                         "/entry/data/rotation_angle", NULL};
    const char *kname = first_of(r->file, keys), *aname = first_of(r->file, angles);
    double *key = kname ? read_vector(r, kname, n, err, errlen) : NULL;
    double *ang = aname ? read_vector(r, aname, n, err, errlen) : NULL;
    if ((kname && !key) || (aname && !ang)) {
        free(key);
        free(ang);
        return -1;
    }
    for (int k = 0; k < 3; k++)
        if (!(r->frames[k] = malloc((n ? n : 1) * sizeof *r->frames[k]))) {
            free(key);
            free(ang);
            return FAIL("out of memory");
        }
    /* image_key: 0 projection, 1 flat, 2 dark, 3 invalid */
    static const int kind_of_key[4] = {TL_FRAME_PROJ, TL_FRAME_FLAT, TL_FRAME_DARK, -1};
    int rc = 0;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        double kv = key ? key[i] : 0;
        if (kv != 0 && kv != 1 && kv != 2 && kv != 3)
            rc = FAIL("%s: image_key %g of frame %u is not 0, 1, 2 or 3", r->path, kv, i);
        else if (kind_of_key[(int)kv] >= 0) {
            int k = kind_of_key[(int)kv];
            r->frames[k][r->count[k]++] = i;
        }
    }
    if (rc == 0 && ang) {
        r->angles = malloc((r->count[2] ? r->count[2] : 1) * sizeof *r->angles);
        if (!r->angles)
            rc = FAIL("out of memory");
        for (uint32_t j = 0; rc == 0 && j < r->count[2]; j++)
            r->angles[j] = ang[r->frames[2][j]] * M_PI / 180.0;
    }
    free(key);
    free(ang);
    return rc;
}

int tl_hdf5_open(tl_hdf5_reader *r, const char *path, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    r->file = r->dset[0] = r->dset[1] = r->dset[2] = -1;
    snprintf(r->path, sizeof r->path, "%s", path);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    r->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (r->file < 0)
        return FAIL("%s: cannot open as HDF5", path);
    static const char *const nx[] = {"/entry/data/data", "/entry/instrument/detector/data", NULL};
    const char *nxdata = first_of(r->file, nx);
    int rc;
    if (exists(r->file, "/exchange/data")) {
        r->layout = TL_HDF5_DATA_EXCHANGE;
        rc = open_dx(r, err, errlen);
    } else if (nxdata) {
        r->layout = TL_HDF5_NXTOMO;
        rc = open_nx(r, nxdata, err, errlen);
    } else {
        rc =
            FAIL("%s: neither Data Exchange (/exchange/data) nor NXtomo (/entry/data/data)", path);
    }
    if (rc == 0 && r->count[TL_FRAME_PROJ] == 0)
        rc = FAIL("%s: no projections", path);
    r->memtype = r->dtype == TL_DTYPE_U8    ? H5T_NATIVE_UINT8
                 : r->dtype == TL_DTYPE_U16 ? H5T_NATIVE_UINT16
                 : r->dtype == TL_DTYPE_U32 ? H5T_NATIVE_UINT32
                                            : H5T_NATIVE_FLOAT;
    if (rc != 0)
        tl_hdf5_close(r);
    return rc;
}

static const char *kind_name(tl_frame_kind kind)
{
    return kind == TL_FRAME_DARK ? "dark" : kind == TL_FRAME_FLAT ? "flat" : "projection";
}

/* Frames [frame, frame + n) of the dataset, rows [row0, row0 + nrows), into buf. */
static int read_run(tl_hdf5_reader *r, tl_frame_kind kind, hsize_t frame, uint32_t n,
                    uint32_t row0, uint32_t nrows, void *buf, char *err, size_t errlen)
{
    hsize_t start[3] = {frame, row0, 0}, count[3] = {n, nrows, r->cols};
    hid_t fs = H5Dget_space(r->dset[kind]);
    hid_t ms = H5Screate_simple(3, count, NULL);
    herr_t st = fs >= 0 && ms >= 0
                    ? H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL)
                    : -1;
    if (st >= 0)
        st = H5Dread(r->dset[kind], r->memtype, ms, fs, H5P_DEFAULT, buf);
    if (fs >= 0)
        H5Sclose(fs);
    if (ms >= 0)
        H5Sclose(ms);
    if (st < 0)
        return n == 1 && nrows == r->rows
                   ? FAIL("%s: cannot read frame %llu", r->path, (unsigned long long)frame)
                   : FAIL("%s: cannot read frames %llu .. %llu, rows %u .. %u", r->path,
                          (unsigned long long)frame, (unsigned long long)frame + n - 1, row0,
                          row0 + nrows - 1);
    return 0;
}

int tl_hdf5_read_band(tl_hdf5_reader *r, tl_frame_kind kind, uint32_t first, uint32_t n,
                      uint32_t row0, uint32_t nrows, void *buf, char *err, size_t errlen)
{
    if (r->file < 0 || r->dset[kind] < 0 || first > r->count[kind] || n > r->count[kind] - first ||
        n == 0)
        return FAIL("%s: no %s frames %u .. %u (it has %u)", r->path, kind_name(kind), first,
                    first + n - 1, r->count[kind]);
    if (nrows == 0 || row0 > r->rows || nrows > r->rows - row0)
        return FAIL("%s: no rows %u .. %u (frames have %u)", r->path, row0, row0 + nrows - 1,
                    r->rows);
    size_t frame_bytes = (size_t)nrows * r->cols * H5Tget_size(r->memtype);
    uint8_t *dst = buf;
    for (uint32_t i = 0; i < n;) {
        /* a run of consecutive frame numbers (always the whole range for Data Exchange) */
        uint32_t k = 1;
        const uint32_t *fr = r->frames[kind] ? r->frames[kind] + first : NULL;
        while (fr && i + k < n && fr[i + k] == fr[i] + k)
            k++;
        if (!fr)
            k = n;
        hsize_t frame = fr ? fr[i] : (hsize_t)first + i;
        if (read_run(r, kind, frame, k, row0, nrows, dst + i * frame_bytes, err, errlen) != 0)
            return -1;
        i += k;
    }
    return 0;
}

int tl_hdf5_read(tl_hdf5_reader *r, tl_frame_kind kind, uint32_t i, void *buf, char *err,
                 size_t errlen)
{
    if (r->file < 0 || r->dset[kind] < 0 || i >= r->count[kind])
        return FAIL("%s: no %s frame %u", r->path, kind_name(kind), i);
    hsize_t frame = r->frames[kind] ? r->frames[kind][i] : i;
    return read_run(r, kind, frame, 1, 0, r->rows, buf, err, errlen);
}

uint32_t tl_hdf5_chunk_rows(const tl_hdf5_reader *r)
{
    hid_t plist = H5Dget_create_plist(r->dset[TL_FRAME_PROJ]);
    hsize_t dims[3] = {0, 0, 0};
    bool chunked = plist >= 0 && H5Pget_layout(plist) == H5D_CHUNKED &&
                   H5Pget_chunk(plist, 3, dims) == 3;
    if (plist >= 0)
        H5Pclose(plist);
    return chunked ? (uint32_t)dims[1] : 0;
}

void tl_hdf5_close(tl_hdf5_reader *r)
{
    for (int k = 0; k < 3; k++) {
        if (r->dset[k] >= 0 && (k == 2 || r->dset[k] != r->dset[2]))
            H5Dclose(r->dset[k]);
        r->dset[k] = -1;
        free(r->frames[k]);
        r->frames[k] = NULL;
    }
    if (r->file >= 0)
        H5Fclose(r->file);
    r->file = -1;
    free(r->angles);
    r->angles = NULL;
}
