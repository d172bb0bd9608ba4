/* volume_vds.c — see volume_vds.h. */
#include "config.h"

#include <hdf5.h>
#include <stdio.h>
#include <string.h>

#include "clients/cli.h"
#include "clients/volume_vds.h"
#include "gpu/engine.h"

#define DSET "/volume"

void tl_volume_vds_part(const char *path, uint32_t k, uint32_t parts, char *buf, size_t n)
{
    const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
    if (!dot || (slash && dot < slash))
        dot = path + strlen(path);
    int digits = 1;
    for (uint32_t v = parts > 1 ? parts - 1 : 0; v >= 10; v /= 10)
        digits++;
    snprintf(buf, n, "%.*s-part%0*u%s", (int)(dot - path), path, digits, k, dot);
}

/* Copies every attribute of src onto dst (a part's scale, offset, job, rows done). */
static herr_t copy_attr(hid_t src, const char *name, const H5A_info_t *info, void *dst)
{
    hid_t a = H5Aopen(src, name, H5P_DEFAULT);
    hid_t t = a >= 0 ? H5Aget_type(a) : -1, sp = a >= 0 ? H5Aget_space(a) : -1;
    size_t bytes = t >= 0 ? H5Tget_size(t) * (size_t)H5Sget_simple_extent_npoints(sp) : 0;
    char buf[8192];
    herr_t st = -1;
    if (a >= 0 && t >= 0 && sp >= 0 && bytes <= sizeof buf && H5Aread(a, t, buf) >= 0) {
        hid_t b = H5Acreate2(*(hid_t *)dst, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
        st = b >= 0 && H5Awrite(b, t, buf) >= 0 ? 0 : -1;
        if (b >= 0)
            H5Aclose(b);
    }
    if (sp >= 0)
        H5Sclose(sp);
    if (t >= 0)
        H5Tclose(t);
    if (a >= 0)
        H5Aclose(a);
    return st;
}

int tl_volume_vds_create(const char *path, uint32_t parts, uint32_t rows, uint32_t size, char *err,
                         size_t errlen)
{
    char part[1100];
    tl_volume_vds_part(path, 0, parts, part, sizeof part);
    hid_t f0 = H5Fopen(part, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d0 = f0 >= 0 ? H5Dopen2(f0, DSET, H5P_DEFAULT) : -1;
    hid_t type = d0 >= 0 ? H5Dget_type(d0) : -1;
    if (type < 0) {
        if (f0 >= 0)
            H5Fclose(f0);
        return tl_cli_errf(err, errlen, "cannot read " DSET " of the part '%s'", part);
    }
    hsize_t dims[3] = {rows, size, size};
    hid_t vspace = H5Screate_simple(3, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    int rc = vspace >= 0 && dcpl >= 0 ? 0 : -1;
    for (uint32_t k = 0; rc == 0 && k < parts; k++) {
        uint32_t first, end;
        tl_engine_split_rows(rows, parts, k, &first, &end);
        tl_volume_vds_part(path, k, parts, part, sizeof part);
        const char *slash = strrchr(part, '/'), *name = slash ? slash + 1 : part;
        hsize_t sdims[3] = {end - first, size, size}, start[3] = {first, 0, 0};
        hid_t sspace = H5Screate_simple(3, sdims, NULL);
        rc = sspace >= 0 &&
                     H5Sselect_hyperslab(vspace, H5S_SELECT_SET, start, NULL, sdims, NULL) >= 0 &&
                     H5Pset_virtual(dcpl, vspace, name, DSET, sspace) >= 0
                 ? 0
                 : -1;
        if (sspace >= 0)
            H5Sclose(sspace);
    }
    hid_t f = rc == 0 ? H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT) : -1;
    H5Sselect_all(vspace);
    hid_t d = f >= 0 ? H5Dcreate2(f, DSET, type, vspace, H5P_DEFAULT, dcpl, H5P_DEFAULT) : -1;
    if (d >= 0 && H5Aiterate2(d0, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, copy_attr, &d) < 0)
        rc = -1;
    uint64_t done = rows; /* the whole volume, where part 0 said its own rows */
    hid_t a = d >= 0 ? H5Aopen(d, "tomolive_rows_done", H5P_DEFAULT) : -1;
    if (a >= 0) {
        rc |= H5Awrite(a, H5T_NATIVE_UINT64, &done) < 0 ? -1 : 0;
        H5Aclose(a);
    }
    if (d < 0)
        rc = -1;
    if (d >= 0)
        H5Dclose(d);
    if (f >= 0 && H5Fclose(f) < 0)
        rc = -1;
    H5Pclose(dcpl);
    H5Sclose(vspace);
    H5Tclose(type);
    H5Dclose(d0);
    H5Fclose(f0);
    if (rc != 0)
        return tl_cli_errf(err, errlen, "cannot create the virtual volume '%s' of %u parts", path,
                           parts);
    return 0;
}
