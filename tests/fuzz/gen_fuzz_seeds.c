/* gen_fuzz_seeds.c — writes the checked-in seeds of the fuzz targets control, ws,
 * http-route, settings, tiff, hdf5 and cone-read (tests/fuzz.mk): `make fuzz-seeds`.
 *
 *   gen_fuzz_seeds DIR      writes DIR/control-corpus, DIR/ws-corpus, ... (DIR: tests/fuzz)
 *
 * Each seed is small (a few KB at most) and exercises one path of its decoder that random
 * bytes would take long to find: every command's arguments, every message of the preview
 * page, the routes, a whole configuration file, the sample types and layouts of the TIFF
 * and HDF5 readers, each format of the cone-beam matrix readers (a format byte, then the
 * file). The replay tests (`make check`) run the harnesses over them.
 */
#include "config.h"

#include <errno.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <tiffio.h>

#include "clients/tiff.h"
#include "daemon/base/settings.h"
#include "protocol/protocol.h"

static const char *root;

static void die(const char *what)
{
    fprintf(stderr, "gen_fuzz_seeds: %s: %s\n", what, strerror(errno));
    exit(1);
}

static const char *seed_path(const char *dir, const char *name)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", root, dir);
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        die(path);
    snprintf(path, sizeof path, "%s/%s/%s", root, dir, name);
    return path;
}

static void write_seed(const char *dir, const char *name, const void *data, size_t len)
{
    const char *path = seed_path(dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0)
        die(path);
}

static void text_seed(const char *dir, const char *name, const char *text)
{
    write_seed(dir, name, text, strlen(text));
}

/* ---- control requests ------------------------------------------------------------------------ */

static msgpack_sbuffer sb;
static msgpack_packer pk;

static void begin(uint64_t id, const char *cmd, int nargs)
{
    msgpack_sbuffer_clear(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    tl_proto_begin_req(&pk, id, cmd, nargs >= 0);
    if (nargs >= 0)
        msgpack_pack_map(&pk, (size_t)nargs);
}

static void key(const char *k)
{
    msgpack_pack_str_with_body(&pk, k, strlen(k));
}

static void kstr(const char *k, const char *v)
{
    key(k);
    msgpack_pack_str_with_body(&pk, v, strlen(v));
}

static void kdouble(const char *k, double v)
{
    key(k);
    msgpack_pack_double(&pk, v);
}

static void kdims(const char *k, uint32_t a, uint32_t b)
{
    key(k);
    msgpack_pack_array(&pk, 2);
    msgpack_pack_uint32(&pk, a);
    msgpack_pack_uint32(&pk, b);
}

static void control_seeds(void)
{
    msgpack_sbuffer_init(&sb);
    const char *dir = "control-corpus";
    begin(1, "status", -1);
    write_seed(dir, "status", sb.data, sb.size);
    begin(2, "set_slice", 6);
    kstr("id", "row-a");
    kstr("kind", "row");
    kdouble("z", 12.5);
    kdims("size", 64, 64);
    key("pin");
    msgpack_pack_true(&pk);
    key("update");
    msgpack_pack_map(&pk, 3);
    key("every");
    msgpack_pack_uint32(&pk, 4);
    key("on_complete");
    msgpack_pack_false(&pk);
    kdouble("max_rate", 10);
    write_seed(dir, "set_slice-row", sb.data, sb.size);
    begin(3, "set_slice", 6);
    kstr("id", "ortho-x");
    kstr("kind", "ortho");
    kstr("axis", "x");
    kdouble("position", -3.25);
    kdouble("scale", 2);
    kstr("dtype", "f16");
    write_seed(dir, "set_slice-ortho", sb.data, sb.size);
    begin(4, "set_slice", 5);
    kstr("id", "plane");
    kstr("kind", "plane");
    key("orientation");
    msgpack_pack_array(&pk, 9);
    for (int i = 0; i < 9; i++)
        msgpack_pack_float(&pk, i % 4 == 0 ? 1.0f : 0.0f);
    kdims("size", 32, 48);
    kstr("compression", "lz4");
    write_seed(dir, "set_slice-plane", sb.data, sb.size);
    begin(5, "remove_slice", 1);
    kstr("id", "row-a");
    write_seed(dir, "remove_slice", sb.data, sb.size);
    begin(6, "set_param", 2);
    kstr("name", "center");
    kdouble("value", 511.5);
    write_seed(dir, "set_param-center", sb.data, sb.size);
    begin(7, "set_param", 2);
    kstr("name", "filter");
    kstr("value", "hann");
    write_seed(dir, "set_param-filter", sb.data, sb.size);
    begin(8, "tune", 1);
    kdims("size", 256, 256);
    write_seed(dir, "tune", sb.data, sb.size);
    begin(9, "resend", 0);
    write_seed(dir, "resend-empty-args", sb.data, sb.size);
    /* refusals: args not a map, repeated args keys, no cmd (the id still read) */
    msgpack_sbuffer_clear(&sb); /* by hand: "args" true */
    msgpack_pack_map(&pk, 4);
    kstr("type", "req");
    key("id");
    msgpack_pack_uint64(&pk, 10);
    kstr("cmd", "reset");
    key("args");
    msgpack_pack_true(&pk);
    write_seed(dir, "bad-args-type", sb.data, sb.size);
    begin(11, "set_param", 2);
    kstr("name", "center");
    kstr("name", "center");
    write_seed(dir, "bad-args-repeated", sb.data, sb.size);
    msgpack_sbuffer_clear(&sb);
    msgpack_pack_map(&pk, 2);
    kstr("type", "req");
    key("id");
    msgpack_pack_uint64(&pk, 12);
    write_seed(dir, "bad-no-cmd", sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
}

/* ---- the preview page's messages, HTTP routes ------------------------------------------------- */

static void ws_seed(const char *name, uint8_t how, const char *const *msgs)
{
    char buf[2048];
    size_t n = 0;
    buf[n++] = (char)how;
    for (int i = 0; msgs[i]; i++) {
        if (i)
            buf[n++] = (char)0xff;
        size_t k = strlen(msgs[i]);
        memcpy(buf + n, msgs[i], k);
        n += k;
    }
    write_seed("ws-corpus", name, buf, n);
}

static void ws_seeds(void)
{
    static const char *const move[] = {
        "{\"req\":1,\"cmd\":\"move\",\"view\":\"preview-row\",\"position\":3.5}",
        "{\"req\":2,\"cmd\":\"move\",\"view\":\"preview-x\",\"position\":-1e300}", NULL};
    static const char *const center[] = {"{\"req\":3,\"cmd\":\"center\",\"value\":100.25}",
                                         "{\"req\":4,\"cmd\":\"center\",\"value\":\"x\"}", NULL};
    static const char *const bits[] = {"{\"req\":5,\"cmd\":\"bits\",\"value\":16}",
                                       "{\"req\":6,\"cmd\":\"bits\",\"value\":12}",
                                       "{\"req\":7,\"cmd\":\"reset_views\"}", NULL};
    static const char *const bad[] = {"not json", "{\"cmd\":7}", "[1,2,3]",
                                      "{\"req\":{\"a\":[]},\"cmd\":\"nope\"}", "", NULL};
    ws_seed("move", 0, move);
    ws_seed("center-fragmented", 1, center);
    ws_seed("bits-reset-close", 4, bits);
    ws_seed("bad-binary-first", 2, bad);
}

static void route_seeds(void)
{
    static const struct {
        const char *name, *text;
    } seeds[] = {
        {"root", "/"},
        {"index", "/index.html"},
        {"app-js", "/app.js"},
        {"metrics", "/metrics"},
        {"status", "/api/status"},
        {"ws", "/ws"},
        {"dotdot", "/../etc/passwd"},
        {"hidden", "/.hidden.css"},
        {"listen-v4", "127.0.0.1:8600"},
        {"listen-any", "*:8600"},
        {"listen-v6", "[::1]:8600"},
        {"listen-localhost", "localhost:0"},
    };
    for (size_t i = 0; i < sizeof seeds / sizeof *seeds; i++)
        text_seed("http-route-corpus", seeds[i].name, seeds[i].text);
}

/* ---- configuration files ---------------------------------------------------------------------- */

static void settings_seeds(void)
{
    const char *dir = "settings-corpus";
    text_seed(dir, "small",
              "# a detector of its own\n[daemon]\nbackend = cpu\nlog_level = warn\n\n"
              "[ingest]\nformat = dectris-v2\nwindow = 8\noverflow = block\n"
              "series_kinds = dark,flat,proj\n\n[http]\nlisten = 127.0.0.1:8600\n");
    text_seed(dir, "errors", "[ingest]\nwindow = -3\nnope = 1\n[daemon\nbackend = gpu\n");
    /* every key, as tl_settings_write writes the defaults */
    tl_settings c;
    tl_settings_defaults(&c);
    FILE *f = fopen(seed_path(dir, "defaults"), "w");
    if (!f)
        die("settings-corpus/defaults");
    tl_settings_write(&c, f, false);
    if (fclose(f) != 0)
        die("settings-corpus/defaults");
}

/* ---- TIFF stacks ------------------------------------------------------------------------------ */

static void tiff_seeds(void)
{
    char err[256];
    uint16_t u16[2][4 * 6];
    float f32[3 * 5];
    uint8_t u8[2 * 3];
    for (int i = 0; i < 4 * 6; i++)
        u16[0][i] = (uint16_t)(i * 1000), u16[1][i] = (uint16_t)(65535 - i);
    for (int i = 0; i < 3 * 5; i++)
        f32[i] = (float)i / 7.0f;
    for (int i = 0; i < 2 * 3; i++)
        u8[i] = (uint8_t)(i * 40);
    tl_tiff_writer w;
    if (tl_tiff_create(&w, seed_path("tiff-corpus", "u16-2pages.tif"), 0, err, sizeof err) ||
        tl_tiff_write_page(&w, TL_DTYPE_U16, u16[0], 4, 6, err, sizeof err) ||
        tl_tiff_write_page(&w, TL_DTYPE_U16, u16[1], 4, 6, err, sizeof err) ||
        tl_tiff_finish(&w, err, sizeof err) ||
        tl_tiff_create(&w, seed_path("tiff-corpus", "f32.tif"), 0, err, sizeof err) ||
        tl_tiff_write_page(&w, TL_DTYPE_F32, f32, 3, 5, err, sizeof err) ||
        tl_tiff_finish(&w, err, sizeof err) ||
        tl_tiff_create(&w, seed_path("tiff-corpus", "u8-bigtiff.tif"), 5ull << 30, err,
                       sizeof err) ||
        tl_tiff_write_page(&w, TL_DTYPE_U8, u8, 2, 3, err, sizeof err) ||
        tl_tiff_finish(&w, err, sizeof err)) {
        fprintf(stderr, "gen_fuzz_seeds: %s\n", err);
        exit(1);
    }
    /* a tiled page (20 x 20 in 16 x 16 tiles: the edges are partial), u32 */
    TIFF *t = TIFFOpen(seed_path("tiff-corpus", "u32-tiled.tif"), "w");
    static uint32_t tile[16 * 16];
    for (int i = 0; i < 16 * 16; i++)
        tile[i] = (uint32_t)i * 7919u;
    if (!t)
        die("tiff-corpus/u32-tiled.tif");
    TIFFSetField(t, TIFFTAG_IMAGEWIDTH, 20);
    TIFFSetField(t, TIFFTAG_IMAGELENGTH, 20);
    TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, 32);
    TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, 1);
    TIFFSetField(t, TIFFTAG_SAMPLEFORMAT, SAMPLEFORMAT_UINT);
    TIFFSetField(t, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
    TIFFSetField(t, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    TIFFSetField(t, TIFFTAG_TILEWIDTH, 16);
    TIFFSetField(t, TIFFTAG_TILELENGTH, 16);
    for (uint32_t y = 0; y < 20; y += 16)
        for (uint32_t x = 0; x < 20; x += 16)
            if (TIFFWriteTile(t, tile, x, y, 0, 0) < 0)
                die("tiff-corpus/u32-tiled.tif: a tile");
    TIFFClose(t);
}

/* ---- HDF5 scans ------------------------------------------------------------------------------- */

static void dataset(hid_t file, const char *name, hid_t type, int rank, const hsize_t *dims,
                    const void *data)
{
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t space = H5Screate_simple(rank, dims, NULL);
    hid_t d = H5Dcreate2(file, name, type, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    if (d < 0 || H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
        die(name);
    H5Dclose(d);
    H5Sclose(space);
    H5Pclose(lcpl);
}

static void hdf5_seeds(void)
{
    /* the smallest files HDF5 writes: the latest format, no free-space slack */
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
    static uint16_t proj[3 * 4 * 5], flat[4 * 5], dark[4 * 5];
    for (int i = 0; i < 3 * 4 * 5; i++)
        proj[i] = (uint16_t)(100 + i);
    for (int i = 0; i < 4 * 5; i++)
        flat[i] = 200, dark[i] = 10;
    double theta[3] = {0, 60, 120};
    hsize_t pd[3] = {3, 4, 5}, fd[3] = {1, 4, 5}, td[1] = {3};
    hid_t f = H5Fcreate(seed_path("hdf5-corpus", "data-exchange.h5"), H5F_ACC_TRUNC, H5P_DEFAULT,
                        fapl);
    if (f < 0)
        die("hdf5-corpus/data-exchange.h5");
    dataset(f, "/exchange/data", H5T_NATIVE_UINT16, 3, pd, proj);
    dataset(f, "/exchange/data_white", H5T_NATIVE_UINT16, 3, fd, flat);
    dataset(f, "/exchange/data_dark", H5T_NATIVE_UINT16, 3, fd, dark);
    dataset(f, "/exchange/theta", H5T_NATIVE_DOUBLE, 1, td, theta);
    H5Fclose(f);

    /* NXtomo: a dark, a flat, three projections and an invalid frame in one dataset */
    static float frames[6 * 3 * 4];
    for (int i = 0; i < 6 * 3 * 4; i++)
        frames[i] = (float)i * 0.5f;
    int32_t keys[6] = {2, 1, 0, 0, 3, 0};
    double angles[6] = {0, 0, 0, 90, 0, 180};
    hsize_t nd[3] = {6, 3, 4}, kd[1] = {6};
    f = H5Fcreate(seed_path("hdf5-corpus", "nxtomo.nxs"), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (f < 0)
        die("hdf5-corpus/nxtomo.nxs");
    dataset(f, "/entry/data/data", H5T_NATIVE_FLOAT, 3, nd, frames);
    dataset(f, "/entry/instrument/detector/image_key", H5T_NATIVE_INT32, 1, kd, keys);
    dataset(f, "/entry/sample/rotation_angle", H5T_NATIVE_DOUBLE, 1, kd, angles);
    H5Fclose(f);
    H5Pclose(fapl);
}

/* ---- cone-beam matrices: a format byte (0 p, 1 astra, 2 rtk), then the file -------------- */

static void cone_seed(const char *name, char format, const void *file, size_t len)
{
    char *b = malloc(len + 1);
    if (!b)
        die(name);
    b[0] = format;
    memcpy(b + 1, file, len);
    write_seed("cone-read-corpus", name, b, len + 1);
    free(b);
}

static void cone_read_seeds(void)
{
    const char *p = "# two matrices\n"
                    "888 0 12 3456, 0 900 10 3000, 0.02 0.9998 0 300\n"
                    "-888 0 12 3456 0 900 10 3000 -0.02 0.9998 0 300 # scaled\n";
    cone_seed("p.txt", 0, p, strlen(p));
    const char *astra = "0 -300 0  0 150 0  0.5 0 0  0 0 0.4\n"
                        "300 0 1  -150 0 -2  0 0.5 0  0 0 0.4\n";
    cone_seed("astra.txt", 1, astra, strlen(astra));
    const char *rtk =
        "<?xml version=\"1.0\"?>\n<!DOCTYPE RTKGEOMETRY>\n"
        "<RTKThreeDCircularGeometry version=\"3\">\n"
        "  <SourceToIsocenterDistance>1000</SourceToIsocenterDistance>\n"
        "  <SourceToDetectorDistance>1536</SourceToDetectorDistance>\n"
        "  <InPlaneAngle>2</InPlaneAngle>\n"
        "  <Projection>\n"
        "    <GantryAngle>271.847274780273</GantryAngle>\n"
        "    <ProjectionOffsetX>-117.056503295898</ProjectionOffsetX>\n"
        "    <SourceOffsetY>3</SourceOffsetY><OutOfPlaneAngle>5</OutOfPlaneAngle>\n"
        "  </Projection>\n"
        "  <Projection><Angle>10</Angle><CollimationVSup>5</CollimationVSup></Projection>\n"
        "  <Projection>\n"
        "    <GantryAngle>0</GantryAngle><InPlaneAngle>0</InPlaneAngle>\n"
        "    <OutOfPlaneAngle>0</OutOfPlaneAngle><SourceOffsetY>0</SourceOffsetY>\n"
        "    <ProjectionOffsetX>0</ProjectionOffsetX>\n"
        "    <Matrix>-1536 0 0 0  0 -1536 0 0  0 0 1 -1000</Matrix>\n"
        "  </Projection>\n"
        "</RTKThreeDCircularGeometry>\n";
    cone_seed("rtk.xml", 2, rtk, strlen(rtk));
    /* .npy, version 1, float64, shape (2, 3, 4): the two text matrices above, and the same
     * as float32 of shape (1, 12) */
    static const double m[2][12] = {{888, 0, 12, 3456, 0, 900, 10, 3000, 0.02, 0.9998, 0, 300},
                                    {888, 0, 12, 3456, 0, 900, 10, 3000, 0.02, 0.9998, 0, 300}};
    unsigned char npy[128 + sizeof m];
    for (int f32 = 0; f32 < 2; f32++) {
        char h[118];
        int n = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                         f32 ? "<f4" : "<f8", f32 ? "(1, 12)" : "(2, 3, 4)");
        memset(h + n, ' ', sizeof h - (size_t)n);
        h[117] = '\n';
        memcpy(npy, "\x93NUMPY\x01\x00\x76\x00", 10);
        memcpy(npy + 10, h, 118);
        size_t len = 128;
        for (int i = 0; i < (f32 ? 12 : 24); i++) {
            double v = m[i / 12][i % 12];
            float x = (float)v;
            memcpy(npy + len, f32 ? (const void *)&x : (const void *)&v, f32 ? 4 : 8);
            len += f32 ? 4 : 8; /* little-endian hosts, as numpy writes '<' */
        }
        cone_seed(f32 ? "f32.npy" : "f64.npy", (char)(f32 ? 1 : 0), npy, len);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_fuzz_seeds DIR (tests/fuzz)\n");
        return 2;
    }
    root = argv[1];
    control_seeds();
    ws_seeds();
    route_seeds();
    settings_seeds();
    tiff_seeds();
    hdf5_seeds();
    cone_read_seeds();
    return 0;
}
