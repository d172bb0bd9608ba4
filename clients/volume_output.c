/* volume_output.c — see volume_output.h. Durability: data, then a sync, then the progress
 * record, then a sync, so the record never counts a slab whose data could still be lost.
 * The sync is fdatasync (the data and what reading it back needs: the size, the blocks; a
 * timestamp is not worth a journal commit); the serial writer keeps the fsync it had.
 * The slab's samples are converted and written by volume_slab.c; the syncs and the records
 * are here. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clients/cli.h"
#include "clients/volume_convert.h"
#include "clients/volume_output.h"
#include "clients/volume_slab.h"

#define DSET "/volume"
#define ATTR_DONE "tomolive_rows_done"
#define ATTR_JOB "tomolive_job"

#define FAIL(...) tl_cli_errf(err, errlen, __VA_ARGS__)

static const char *const dtype_names[] = {"float32", "uint16", "float16"};

bool tl_out_dtype_parse(const char *s, tl_out_dtype *out)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, dtype_names[i]))
            return *out = (tl_out_dtype)i, true;
    return false;
}

size_t tl_out_dtype_size(tl_out_dtype t)
{
    return t == TL_OUT_F32 ? 4 : 2;
}

tl_out_form tl_out_form_of(const char *path)
{
    struct stat st;
    size_t n = strlen(path);
    if ((n && path[n - 1] == '/') || (stat(path, &st) == 0 && S_ISDIR(st.st_mode)))
        return TL_OUT_TIFF_FILES;
    const char *dot = strrchr(path, '.');
    if (dot && (!strcmp(dot, ".h5") || !strcmp(dot, ".hdf5") || !strcmp(dot, ".nxs")))
        return TL_OUT_HDF5;
    return TL_OUT_TIFF_PAGES;
}

/* ---- samples -------------------------------------------------------------------------- */

static void set_range(tl_volume_output *o, double lo, double hi)
{
    o->offset = lo;
    o->scale = hi > lo ? 65535.0 / (hi - lo) : 1.0;
    o->scaled = true;
}

/* Serial: one slice in the file's dtype (o->conv), or the floats themselves. */
static const void *convert(tl_volume_output *o, const float *v)
{
    size_t n = (size_t)o->spec.size * o->spec.size;
    if (o->spec.dtype == TL_OUT_F32)
        return v;
    uint16_t *d = o->conv;
    if (o->spec.dtype == TL_OUT_F16)
        tl_half_of_floats_scalar(d, v, n);
    else
        tl_u16_of_floats_scalar(d, v, n, o->offset, o->scale);
    return d;
}

/* ---- HDF5 ----------------------------------------------------------------------------- */

static hid_t file_type(tl_out_dtype t)
{
    if (t == TL_OUT_F32)
        return H5Tcopy(H5T_IEEE_F32LE);
    if (t == TL_OUT_U16)
        return H5Tcopy(H5T_STD_U16LE);
    /* IEEE binary16, as h5py and numpy spell it: sign bit 15, exponent 10..14 (bias 15),
     * mantissa 0..9 */
    hid_t h = H5Tcopy(H5T_IEEE_F32LE);
    if (h >= 0 && (H5Tset_fields(h, 15, 10, 5, 0, 10) < 0 || H5Tset_size(h, 2) < 0 ||
                   H5Tset_ebias(h, 15) < 0)) {
        H5Tclose(h);
        return -1;
    }
    return h;
}

static int sync_fd(const tl_volume_output *o, int fd)
{
    return o->spec.serial ? fsync(fd) : fdatasync(fd);
}

/* The file's descriptor (the sec2 driver's), for the syncs and the writeback. */
static int h5_fd(tl_volume_output *o, char *err, size_t errlen)
{
    void *handle = NULL;
    if (H5Fget_vfd_handle(o->file, H5P_DEFAULT, &handle) < 0 || !handle)
        return FAIL("'%s': the HDF5 file has no descriptor", o->spec.path);
    o->fd = *(int *)handle;
    return 0;
}

static int fsync_h5(tl_volume_output *o, char *err, size_t errlen)
{
    if (H5Fflush(o->file, H5F_SCOPE_GLOBAL) < 0)
        return FAIL("'%s': cannot flush the volume to disk", o->spec.path);
    if (sync_fd(o, o->fd) != 0)
        return FAIL("'%s': cannot flush the volume to disk: %s", o->spec.path, strerror(errno));
    return 0;
}

static int write_attr(hid_t obj, const char *name, hid_t type, const void *v)
{
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Aexists(obj, name) > 0 ? H5Aopen(obj, name, H5P_DEFAULT)
                                       : H5Acreate2(obj, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t st = a >= 0 ? H5Awrite(a, type, v) : -1;
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(sp);
    return st < 0 ? -1 : 0;
}

static int read_attr(hid_t obj, const char *name, hid_t type, void *v)
{
    if (H5Aexists(obj, name) <= 0)
        return -1;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    herr_t st = a >= 0 ? H5Aread(a, type, v) : -1;
    if (a >= 0)
        H5Aclose(a);
    return st < 0 ? -1 : 0;
}

static hid_t string_type(size_t n)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, n ? n : 1);
    H5Tset_strpad(t, H5T_STR_NULLTERM);
    return t;
}

static int write_scale(tl_volume_output *o)
{
    return write_attr(o->dset, "scale", H5T_NATIVE_DOUBLE, &o->scale) ||
           write_attr(o->dset, "offset", H5T_NATIVE_DOUBLE, &o->offset);
}

static int resume_h5(tl_volume_output *o, char *err, size_t errlen)
{
    const tl_volume_output_spec *s = &o->spec;
    o->file = H5Fopen(s->path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (o->file < 0)
        return FAIL("--resume: cannot open '%s' as HDF5", s->path);
    o->dset = H5Dopen2(o->file, DSET, H5P_DEFAULT);
    if (o->dset < 0)
        return FAIL("--resume: '%s' has no dataset " DSET, s->path);
    if (h5_fd(o, err, errlen) != 0)
        return -1;
    char job[4096] = "";
    uint64_t done = 0;
    hid_t st = string_type(sizeof job);
    int rc = read_attr(o->dset, ATTR_JOB, st, job);
    H5Tclose(st);
    if (rc != 0 || read_attr(o->dset, ATTR_DONE, H5T_NATIVE_UINT64, &done) != 0)
        return FAIL("--resume: '%s' was not written by tomolive recon (no progress record)",
                    s->path);
    if (strcmp(job, s->job) != 0)
        return FAIL("--resume: '%s' was written by another job (%s), not this one (%s)",
                    s->path, job, s->job);
    if (done > s->rows)
        return FAIL("--resume: '%s' records %llu rows done of %u", s->path,
                    (unsigned long long)done, s->rows);
    if (s->dtype == TL_OUT_U16 && read_attr(o->dset, "scale", H5T_NATIVE_DOUBLE, &o->scale) == 0 &&
        read_attr(o->dset, "offset", H5T_NATIVE_DOUBLE, &o->offset) == 0)
        o->scaled = true;
    o->rows_done = (uint32_t)done;
    return 0;
}

static int create_h5(tl_volume_output *o, char *err, size_t errlen)
{
    const tl_volume_output_spec *s = &o->spec;
    o->file = H5Fcreate(s->path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (o->file < 0)
        return FAIL("cannot create '%s' (HDF5): %s", s->path,
                    access(s->path, F_OK) == 0 || errno != ENOENT ? "not writable"
                                                                  : "no such directory");
    hsize_t dims[3] = {s->rows, s->size, s->size}, chunk[3] = {1, s->size, s->size};
    hid_t sp = H5Screate_simple(3, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hid_t ft = file_type(s->dtype);
    int rc = sp >= 0 && dcpl >= 0 && ft >= 0 && H5Pset_chunk(dcpl, 3, chunk) >= 0 &&
                     H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) >= 0
                 ? 0
                 : -1;
    if (rc == 0 && s->deflate > 0)
        rc = H5Pset_deflate(dcpl, (unsigned)s->deflate) < 0 ? -1 : 0;
    else if (rc == 0) /* every chunk's place fixed now: writes never touch metadata */
        rc = H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY) < 0 ? -1 : 0;
    if (rc == 0)
        o->dset = H5Dcreate2(o->file, DSET, ft, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (ft >= 0)
        H5Tclose(ft);
    if (sp >= 0)
        H5Sclose(sp);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (rc != 0 || o->dset < 0)
        return FAIL("'%s': cannot create dataset " DSET " of %u x %u x %u (out of disk space?)",
                    s->path, s->rows, s->size, s->size);
    if (h5_fd(o, err, errlen) != 0)
        return -1;
    uint64_t zero = 0;
    hid_t st = string_type(strlen(s->job) + 1);
    rc = write_attr(o->dset, ATTR_JOB, st, s->job) ||
         write_attr(o->dset, ATTR_DONE, H5T_NATIVE_UINT64, &zero);
    H5Tclose(st);
    if (rc == 0 && o->scaled)
        rc = write_scale(o);
    if (rc != 0 || fsync_h5(o, err, errlen) != 0)
        return FAIL("'%s': cannot write the volume's attributes (%s)", s->path,
                    errno ? strerror(errno) : "disk full?");
    return 0;
}

/* Serial: an H5Dwrite of a hyperslab per slice, through libhdf5's type conversion and
 * filters. */
static int write_h5_serial(tl_volume_output *o, uint32_t z0, uint32_t h, const float *slab,
                           char *err, size_t errlen)
{
    const tl_volume_output_spec *s = &o->spec;
    size_t npx = (size_t)s->size * s->size;
    hid_t fs = H5Dget_space(o->dset);
    hsize_t one[3] = {1, s->size, s->size};
    hid_t ms = H5Screate_simple(3, one, NULL);
    hid_t mt = file_type(s->dtype); /* the converted slice is in the file's layout */
    herr_t st = fs >= 0 && ms >= 0 && mt >= 0 ? 0 : -1;
    for (uint32_t k = 0; st >= 0 && k < h; k++) {
        hsize_t start[3] = {z0 + k, 0, 0};
        st = H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, one, NULL);
        if (st >= 0)
            st = H5Dwrite(o->dset, s->dtype == TL_OUT_F32 ? H5T_NATIVE_FLOAT : mt, ms, fs,
                          H5P_DEFAULT, convert(o, slab + k * npx));
    }
    if (fs >= 0)
        H5Sclose(fs);
    if (ms >= 0)
        H5Sclose(ms);
    if (mt >= 0)
        H5Tclose(mt);
    if (st < 0)
        return FAIL("'%s': cannot write slices %u .. %u (%s)", s->path, z0, z0 + h - 1,
                    errno ? strerror(errno) : "disk full?");
    return 0;
}

static int write_h5(tl_volume_output *o, uint32_t z0, uint32_t h, const float *slab, char *err,
                    size_t errlen)
{
    const tl_volume_output_spec *s = &o->spec;
    int rc = s->serial ? write_h5_serial(o, z0, h, slab, err, errlen)
                       : tl_vslab_ordered(o, z0, h, slab, err, errlen);
    if (rc != 0 || fsync_h5(o, err, errlen) != 0)
        return -1;
    uint64_t done = (uint64_t)z0 + h;
    if (write_attr(o->dset, ATTR_DONE, H5T_NATIVE_UINT64, &done) != 0)
        return FAIL("'%s': cannot record slices %u .. %u as written", s->path, z0, z0 + h - 1);
    return fsync_h5(o, err, errlen);
}

/* ---- TIFF stack ----------------------------------------------------------------------- */

static int fsync_path(const tl_volume_output *o, const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    int rc = sync_fd(o, fd);
    close(fd);
    return rc;
}

/* The progress file, replaced atomically. */
static int write_progress(tl_volume_output *o, uint32_t done, char *err, size_t errlen)
{
    char tmp[1200];
    snprintf(tmp, sizeof tmp, "%s.tmp", o->progress);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return FAIL("cannot write '%s': %s", tmp, strerror(errno));
    fprintf(f, "tomolive volume progress\njob %s\nrows %u size %u dtype %s\n", o->spec.job,
            o->spec.rows, o->spec.size, dtype_names[o->spec.dtype]);
    if (o->spec.dtype == TL_OUT_U16 && o->scaled)
        fprintf(f, "scale %.17g offset %.17g (value = stored / scale + offset)\n", o->scale,
                o->offset);
    fprintf(f, "rows_done %u\n", done);
    int rc = fflush(f) == 0 && fsync(fileno(f)) == 0 ? 0 : -1;
    int e = errno;
    if (fclose(f) != 0 && rc == 0)
        rc = -1, e = errno;
    if (rc == 0 && rename(tmp, o->progress) != 0)
        rc = -1, e = errno;
    if (rc != 0) {
        unlink(tmp);
        return FAIL("cannot write '%s': %s", o->progress, strerror(e));
    }
    fsync_path(o, o->spec.path); /* the rename itself */
    return 0;
}

static int resume_files(tl_volume_output *o, char *err, size_t errlen)
{
    FILE *f = fopen(o->progress, "r");
    if (!f)
        return FAIL("--resume: no progress record '%s'", o->progress);
    char line[4200], job[4200] = "";
    long done = -1;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "job ", 4))
            snprintf(job, sizeof job, "%s", line + 4);
        else if (!strncmp(line, "rows_done ", 10))
            done = strtol(line + 10, NULL, 10);
        else if (!strncmp(line, "scale ", 6) &&
                 sscanf(line, "scale %lf offset %lf", &o->scale, &o->offset) == 2)
            o->scaled = true;
    }
    fclose(f);
    if (strcmp(job, o->spec.job) != 0)
        return FAIL("--resume: '%s' was written by another job (%s), not this one (%s)",
                    o->spec.path, job, o->spec.job);
    if (done < 0 || done > o->spec.rows)
        return FAIL("--resume: '%s' holds no valid rows_done", o->progress);
    o->rows_done = (uint32_t)done;
    return 0;
}

static int write_files(tl_volume_output *o, uint32_t z0, uint32_t h, const float *slab,
                       char *err, size_t errlen)
{
    const tl_volume_output_spec *s = &o->spec;
    if (!s->serial) {
        if (tl_vslab_files(o, z0, h, slab, err, errlen) != 0)
            return -1;
        /* the slices' names are data too: durable before the record counts them */
        if (fsync_path(o, s->path) != 0)
            return FAIL("cannot flush '%s' to disk: %s", s->path, strerror(errno));
        return write_progress(o, z0 + h, err, errlen);
    }
    size_t npx = (size_t)s->size * s->size;
    tl_dtype dt = s->dtype == TL_OUT_U16 ? TL_DTYPE_U16 : TL_DTYPE_F32;
    for (uint32_t k = 0; k < h; k++) {
        char path[1100];
        tl_vslab_path(o, z0 + k, path, sizeof path);
        tl_tiff_writer w;
        if (tl_tiff_create(&w, path, npx * tl_out_dtype_size(s->dtype), err, errlen) != 0)
            return -1;
        if (tl_tiff_write_page(&w, dt, convert(o, slab + k * npx), s->size, s->size, err,
                               errlen) != 0) {
            tl_tiff_finish(&w, NULL, 0);
            return -1;
        }
        if (tl_tiff_finish(&w, err, errlen) != 0)
            return -1;
        if (fsync_path(o, path) != 0)
            return FAIL("cannot flush '%s' to disk: %s", path, strerror(errno));
    }
    return write_progress(o, z0 + h, err, errlen);
}

/* ---- the module ----------------------------------------------------------------------- */

size_t tl_volume_output_buffer_bytes(const tl_volume_output_spec *spec)
{
    if (spec->serial)
        return spec->dtype == TL_OUT_F32 ? 0 : (size_t)spec->size * spec->size * sizeof(uint16_t);
    return tl_vslab_bytes(spec);
}

static int open_form(tl_volume_output *o, char *err, size_t errlen)
{
    const tl_volume_output_spec *spec = &o->spec;
    switch (o->form) {
        case TL_OUT_HDF5:
            return spec->resume ? resume_h5(o, err, errlen) : create_h5(o, err, errlen);
        case TL_OUT_TIFF_FILES: {
            size_t n = strlen(spec->path);
            snprintf(o->progress, sizeof o->progress, "%.*s/%s",
                     (int)(n > 1 && spec->path[n - 1] == '/' ? n - 1 : n), spec->path,
                     spec->progress_name ? spec->progress_name : "tomolive-progress");
            if (mkdir(spec->path, 0777) != 0 && errno != EEXIST)
                return FAIL("cannot create directory '%s': %s", spec->path, strerror(errno));
            return spec->resume ? resume_files(o, err, errlen) : write_progress(o, 0, err, errlen);
        }
        default:
            return tl_tiff_create(&o->pages, spec->path,
                                  (uint64_t)spec->rows * spec->size * spec->size *
                                      tl_out_dtype_size(spec->dtype),
                                  err, errlen);
    }
}

int tl_volume_output_open(tl_volume_output *o, const tl_volume_output_spec *spec, char *err,
                          size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->spec = *spec;
    o->file = o->dset = -1;
    o->fd = -1;
    o->form = tl_out_form_of(spec->path);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if (spec->dtype == TL_OUT_F16 && o->form != TL_OUT_HDF5)
        return FAIL("float16 output needs an HDF5 file (.h5)");
    if (spec->deflate && o->form != TL_OUT_HDF5)
        return FAIL("--compress needs an HDF5 output file (.h5)");
    if (spec->resume && o->form == TL_OUT_TIFF_PAGES)
        return FAIL("--resume needs an HDF5 file (.h5) or a TIFF stack (a directory) as "
                    "output, not the multi-page TIFF '%s'",
                    spec->path);
    if (spec->dtype == TL_OUT_U16 && spec->have_range)
        set_range(o, spec->lo, spec->hi);
    if (spec->serial && spec->dtype != TL_OUT_F32 &&
        !(o->conv = malloc((size_t)spec->size * spec->size * sizeof(uint16_t))))
        return FAIL("out of memory for a slice");
    /* the threads first: a volume is not created for a writer that cannot run */
    int rc = spec->serial ? 0 : tl_vslab_start(o, err, errlen);
    if (rc == 0)
        rc = open_form(o, err, errlen);
    if (rc != 0) { /* the threads go now, and the file: a failed --resume is not closed */
        if (o->dset >= 0)
            H5Dclose(o->dset);
        if (o->file >= 0)
            H5Fclose(o->file);
        o->dset = o->file = -1;
        tl_vslab_stop(o);
        free(o->conv);
        o->conv = NULL;
    }
    return rc;
}

int tl_volume_output_write(tl_volume_output *o, uint32_t z0, uint32_t h, const float *slab,
                           char *err, size_t errlen)
{
    if (z0 != o->rows_done || h > o->spec.rows - z0)
        return FAIL("'%s': slices %u .. %u out of order (%u done)", o->spec.path, z0, z0 + h - 1,
                    o->rows_done);
    if (o->spec.dtype == TL_OUT_U16 && !o->scaled) {
        /* no range given: the first slab's, stated in the file before any data */
        float lo = INFINITY, hi = -INFINITY;
        if (o->spec.serial)
            tl_finite_range(slab, (size_t)h * o->spec.size * o->spec.size, &lo, &hi);
        else
            tl_vslab_range(o, slab, h, &lo, &hi);
        set_range(o, isfinite(lo) ? lo : 0, isfinite(hi) ? hi : 1);
        if (o->form == TL_OUT_HDF5 && write_scale(o) != 0)
            return FAIL("'%s': cannot write the scale attributes", o->spec.path);
    }
    int rc;
    if (o->form == TL_OUT_HDF5)
        rc = write_h5(o, z0, h, slab, err, errlen);
    else if (o->form == TL_OUT_TIFF_FILES)
        rc = write_files(o, z0, h, slab, err, errlen);
    else if (!o->spec.serial)
        rc = tl_vslab_ordered(o, z0, h, slab, err, errlen);
    else {
        size_t npx = (size_t)o->spec.size * o->spec.size;
        rc = 0;
        for (uint32_t k = 0; rc == 0 && k < h; k++)
            rc = tl_tiff_write_page(&o->pages,
                                    o->spec.dtype == TL_OUT_U16 ? TL_DTYPE_U16 : TL_DTYPE_F32,
                                    convert(o, slab + k * npx), o->spec.size, o->spec.size, err,
                                    errlen);
    }
    if (rc == 0)
        o->rows_done = z0 + h;
    return rc;
}

int tl_volume_output_close(tl_volume_output *o, tl_output_end end, char *err, size_t errlen)
{
    int rc = 0;
    if (o->form == TL_OUT_HDF5) {
        if (o->dset >= 0 && H5Dclose(o->dset) < 0)
            rc = -1;
        if (o->file >= 0 && H5Fclose(o->file) < 0)
            rc = -1;
        o->dset = o->file = -1;
        o->fd = -1;
        if (rc != 0 && end == TL_OUTPUT_DONE)
            FAIL("'%s': cannot close the HDF5 file", o->spec.path);
        else if (end == TL_OUTPUT_DONE && !o->spec.serial && fsync_path(o, o->spec.path) != 0)
            rc = FAIL("'%s': cannot flush the volume to disk: %s", o->spec.path,
                      strerror(errno)); /* what closing wrote */
        if (end == TL_OUTPUT_REMOVE)
            unlink(o->spec.path);
    } else if (o->form == TL_OUT_TIFF_PAGES) {
        if (o->pages.tif)
            rc = tl_tiff_finish(&o->pages, end == TL_OUTPUT_DONE ? err : NULL, errlen);
        if (rc == 0 && end == TL_OUTPUT_DONE && !o->spec.serial &&
            fsync_path(o, o->spec.path) != 0)
            rc = FAIL("cannot flush '%s' to disk: %s", o->spec.path, strerror(errno));
        if (end != TL_OUTPUT_DONE)
            unlink(o->spec.path); /* not resumable: a half-written stack is worse than none */
    } else if (end == TL_OUTPUT_REMOVE) {
        for (uint32_t z = 0; z < o->spec.rows; z++) {
            char path[1100];
            tl_vslab_path(o, z, path, sizeof path);
            unlink(path);
        }
        unlink(o->progress);
        rmdir(o->spec.path);
    }
    tl_vslab_stop(o);
    free(o->conv);
    o->conv = NULL;
    return rc;
}
