/* check_proto_bad.c — malformed and hostile input: each case asserts the *specific* error
 * code PROTOCOL.md assigns to the defect, and that the message names the culprit.
 *
 * Most cases are written as the header they send (JSON-like text, see check_proto_util.h),
 * usually a valid base header with one key changed or removed, so each case differs from a
 * valid message in exactly one defect. Byte-level cases are written in hex. Part-layout
 * cases build zmq_msg_t parts directly (no sockets needed).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/protocol.h"
#include "tests/testutil.h"
#include "tests/unit/check_proto_util.h"

#define ALL                                                                             \
    (TL_MSG_SCAN | TL_MSG_FRAME | TL_MSG_END | TL_MSG_REQ | TL_MSG_REP | TL_MSG_SLICE | \
     TL_MSG_RELEASE)

#define FRAME                                                                            \
    "{\"v\": 1, \"type\": \"frame\", \"series\": 7, \"index\": 42, \"kind\": \"proj\", " \
    "\"dtype\": \"u16\", \"shape\": [4, 6], \"angle\": 0.5, \"t_acq\": 17}"
/* FRAME in GPU memory: a 64-byte handle, rows of 12 bytes at a pitch of 16 from offset 1024
 * of a 4096-byte allocation */
#define IPC_FRAME                                                                             \
    "{\"v\": 1, \"type\": \"frame\", \"series\": 7, \"index\": 42, "                          \
    "\"kind\": \"proj\", \"dtype\": \"u16\", \"shape\": [4, 6], \"angle\": 0.5, "             \
    "\"ipc_handle\": b\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\", " \
    "\"ipc_buffer\": 3, \"ipc_size\": 4096, \"ipc_offset\": 1024, \"ipc_pitch\": 16, "        \
    "\"ipc_device\": \"GPU-8695f54f-567f-78f5-adb5-abcd659e9ff1\", \"ipc_slot\": 2}"
#define RELEASE                                                        \
    "{\"v\": 1, \"type\": \"release\", \"series\": 7, \"index\": 42, " \
    "\"slot\": 2, \"ok\": false, \"code\": 36, \"message\": \"not supported\"}"
#define SCAN                                                                     \
    "{\"v\": 1, \"type\": \"scan\", \"series\": 7, \"geometry\": \"parallel\", " \
    "\"shape\": [4, 6], \"dtype\": \"u16\", \"window\": 180}"
/* SCAN in cone beam (PROTOCOL.md 8.1.1): source 500 mm from the axis, 750 mm from the
 * detector, 0.2 mm pixels */
#define CONE_SCAN                                                                      \
    "{\"v\": 1, \"type\": \"scan\", \"series\": 7, \"geometry\": \"cone\", "           \
    "\"shape\": [4, 6], \"dtype\": \"u16\", \"window\": 180, \"source_origin\": 500, " \
    "\"source_detector\": 750.5, \"pixel_size\": 0.2}"
/* one projection matrix (a valid shape; the engine judges the geometry) */
#define MAT "[1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 500]"
#define SLICE                                                                         \
    "{\"v\": 1, \"type\": \"slice\", \"id\": \"z0\", \"seq\": 3, \"shape\": [4, 4], " \
    "\"dtype\": \"f32\", \"orientation\": [1, 0, 0, 0, 1, 0, 0, 0, 0.5], "            \
    "\"projections_used\": 180, \"missing\": 0, \"window\": [10, 189], "              \
    "\"t_acq\": 1, \"t_pub\": 2, \"kernel\": \"cpu-ref\"}"
/* SLICE as a box (PROTOCOL.md 10): two planes of 2 x 4 */
#define BOX_SLICE                                                                     \
    "{\"v\": 1, \"type\": \"slice\", \"id\": \"z0\", \"seq\": 3, \"shape\": [4, 4], " \
    "\"dtype\": \"f32\", \"orientation\": [1, 0, 0, 0, 1, 0, 0, 0, 0.5], "            \
    "\"projections_used\": 180, \"missing\": 0, \"window\": [10, 189], "              \
    "\"t_acq\": 1, \"t_pub\": 2, \"kernel\": \"cpu-ref\", \"planes\": 2, \"box_step\": 1}"
/* SLICE in shared memory (PROTOCOL.md 10.1): topic "shm/z0/", no payload part */
#define SHM_SLICE                                                                             \
    "{\"v\": 1, \"type\": \"slice\", \"id\": \"z0\", \"seq\": 3, "                            \
    "\"shape\": [4, 4], \"dtype\": \"f32\", \"orientation\": [1, 0, 0, 0, 1, 0, 0, 0, 0.5], " \
    "\"projections_used\": 180, \"missing\": 0, \"window\": [10, 189], \"t_acq\": 1, "        \
    "\"t_pub\": 2, \"kernel\": \"cpu-ref\", \"shm_name\": \"/tomolive-z0-1\", "               \
    "\"shm_offset\": 4096}"
/* shm names of 255 (the most) and 256 bytes, the leading '/' included */
#define X8 "xxxxxxxx"
#define X32 X8 X8 X8 X8
#define NAME255 "\"/" X32 X32 X32 X32 X32 X32 X32 X8 X8 X8 "xxxxxx\""
#define NAME256 "\"/" X32 X32 X32 X32 X32 X32 X32 X8 X8 X8 "xxxxxxx\""
#define REQ "{\"v\": 1, \"type\": \"req\", \"id\": 5, \"cmd\": \"status\"}"
#define REP_ERR                                                \
    "{\"v\": 1, \"type\": \"rep\", \"id\": 5, \"ok\": false, " \
    "\"error\": {\"code\": 32, \"message\": \"no such command\"}}"

typedef enum { TEXT, HEX, WITH } form;

typedef struct {
    const char *name;
    form f;
    const char *a;     /* TEXT: header text; HEX: bytes; WITH: base header text */
    const char *key;   /* WITH: key to change */
    const char *value; /* WITH: new value text, NULL = remove the key */
    unsigned accept;   /* 0 = every type */
    tl_proto_err want;
    const char *says; /* a substring the message must contain (the key), or NULL */
} bad_case;

static const bad_case cases[] = {
    /* syntax and limits */
    {"json text", TEXT, NULL, NULL, NULL, 0, TL_PROTO_E_MALFORMED, "trailing"},
    {"reserved byte 0xc1", HEX, "81 a1 76 c1", NULL, NULL, 0, TL_PROTO_E_MALFORMED, "0xc1"},
    {"trailing byte", HEX, "83 a1 76 01 a4 74 79 70 65 a3 65 6e 64 a6 73 65 72 69 65 73 01 00",
     NULL, NULL, 0, TL_PROTO_E_MALFORMED, "trailing"},
    {"second object", HEX, "81 a1 76 01 81 a1 76 01", NULL, NULL, 0, TL_PROTO_E_MALFORMED, NULL},
    {"array32 of 2^32-1 in 5 bytes", HEX, "dd ff ff ff ff", NULL, NULL, 0, TL_PROTO_E_LIMIT,
     "4294967295"},
    {"map32 of 2^32-1 in 5 bytes", HEX, "df ff ff ff ff", NULL, NULL, 0, TL_PROTO_E_LIMIT,
     "4294967295"},
    {"str32 of 2^32-1 in 5 bytes", HEX, "db ff ff ff ff", NULL, NULL, 0, TL_PROTO_E_MALFORMED,
     "truncated"},
    {"bin32 of 2^32-1 in 5 bytes", HEX, "c6 ff ff ff ff", NULL, NULL, 0, TL_PROTO_E_MALFORMED,
     "truncated"},
    {"ext32 of 2^32-1 in 6 bytes", HEX, "c9 ff ff ff ff 01", NULL, NULL, 0, TL_PROTO_E_MALFORMED,
     "truncated"},
    {"array16 inside a map, too long", HEX, "82 a1 76 01 a1 78 dc ff ff 01 02 03", NULL, NULL, 0,
     TL_PROTO_E_LIMIT, "65535"},
    {"map entries need 2 bytes each", HEX, "83 a1 76 01 a1", NULL, NULL, 0, TL_PROTO_E_LIMIT,
     NULL},
    {"length field cut off", HEX, "81 a1 76 da 00", NULL, NULL, 0, TL_PROTO_E_MALFORMED, NULL},
    {"depth 9", WITH, REQ, "args", "{\"a\": [[[[[[[1]]]]]]]}", 0, TL_PROTO_E_LIMIT, "deeper"},
    {"depth 9 of empty arrays", WITH, REQ, "args", "{\"a\": [[[[[[[]]]]]]]}", 0, TL_PROTO_E_LIMIT,
     "deeper"},
    /* structure */
    {"header is an array", TEXT, "[1, \"frame\"]", NULL, NULL, 0, TL_PROTO_E_NOT_MAP, "array"},
    {"header is a str", TEXT, "\"frame\"", NULL, NULL, 0, TL_PROTO_E_NOT_MAP, "str"},
    {"header is nil", TEXT, "null", NULL, NULL, 0, TL_PROTO_E_NOT_MAP, "nil"},
    {"integer key", TEXT, "{\"v\": 1, 5: 1, \"type\": \"end\", \"series\": 1}", NULL, NULL, 0,
     TL_PROTO_E_NOT_MAP, "key #2"},
    {"bin key", TEXT, "{b\"v\": 1, \"type\": \"end\", \"series\": 1}", NULL, NULL, 0,
     TL_PROTO_E_NOT_MAP, "bin"},
    {"duplicate key", TEXT, "{\"v\": 1, \"type\": \"end\", \"series\": 1, \"series\": 2}", NULL,
     NULL, 0, TL_PROTO_E_DUP_KEY, "series"},
    {"duplicate unknown key", WITH, FRAME, "x-note", "1, \"x-note\": 2", 0, TL_PROTO_E_DUP_KEY,
     "x-note"},
    {"duplicate v", WITH, FRAME, "v", "1, \"v\": 1", 0, TL_PROTO_E_DUP_KEY, "\"v\""},
    /* version */
    {"missing v", WITH, FRAME, "v", NULL, 0, TL_PROTO_E_MISSING, "\"v\""},
    {"v = 2", WITH, FRAME, "v", "2", 0, TL_PROTO_E_VERSION, "2"},
    {"v = 0", WITH, FRAME, "v", "0", 0, TL_PROTO_E_VERSION, NULL},
    {"v as string", WITH, FRAME, "v", "\"1\"", 0, TL_PROTO_E_KEY_TYPE, "\"v\""},
    {"v as float", WITH, FRAME, "v", "1.0", 0, TL_PROTO_E_KEY_TYPE, "\"v\""},
    {"v negative", WITH, FRAME, "v", "-1", 0, TL_PROTO_E_RANGE, "\"v\""},
    /* type */
    {"missing type", WITH, FRAME, "type", NULL, 0, TL_PROTO_E_MISSING, "\"type\""},
    {"unknown type", WITH, FRAME, "type", "\"image\"", 0, TL_PROTO_E_TYPE, "image"},
    {"type as integer", WITH, FRAME, "type", "2", 0, TL_PROTO_E_KEY_TYPE, "\"type\""},
    {"type as bin", WITH, FRAME, "type", "b\"frame\"", 0, TL_PROTO_E_KEY_TYPE, "bin"},
    {"scan on the control socket", TEXT, SCAN, NULL, NULL, TL_PROTO_CONTROL, TL_PROTO_E_TYPE,
     "not accepted"},
    {"req on the ingest socket", TEXT, REQ, NULL, NULL, TL_PROTO_INGEST, TL_PROTO_E_TYPE,
     "not accepted"},
    {"type with a NUL byte", WITH, FRAME, "type", "\"frame\\0\"", 0, TL_PROTO_E_TYPE, NULL},
    /* frames in GPU memory (CUDA IPC) */
    {"ipc without handle", WITH, IPC_FRAME, "ipc_handle", NULL, 0, TL_PROTO_E_MISSING,
     "ipc_handle"},
    {"ipc without slot", WITH, IPC_FRAME, "ipc_slot", NULL, 0, TL_PROTO_E_MISSING, "ipc_slot"},
    {"ipc alone", WITH, FRAME, "ipc_pitch", "16", 0, TL_PROTO_E_MISSING, "ipc_handle"},
    {"ipc handle as str", WITH, IPC_FRAME, "ipc_handle", "\"0123\"", 0, TL_PROTO_E_KEY_TYPE,
     "ipc_handle"},
    {"ipc handle of 63 bytes", WITH, IPC_FRAME, "ipc_handle",
     "b\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\"", 0, TL_PROTO_E_RANGE,
     "ipc_handle"},
    {"ipc pitch below a row", WITH, IPC_FRAME, "ipc_pitch", "11", 0, TL_PROTO_E_RANGE,
     "ipc_pitch"},
    {"ipc rows past the allocation", WITH, IPC_FRAME, "ipc_offset", "4049", 0, TL_PROTO_E_RANGE,
     "ipc_size"},
    {"ipc offset 2^64-1", WITH, IPC_FRAME, "ipc_offset", "18446744073709551615", 0,
     TL_PROTO_E_RANGE, "ipc_size"},
    {"ipc pitch overflowing", WITH, IPC_FRAME, "ipc_pitch", "9223372036854775808", 0,
     TL_PROTO_E_RANGE, "ipc_size"},
    {"ipc device not a UUID", WITH, IPC_FRAME, "ipc_device", "\"GPU-0\"", 0, TL_PROTO_E_RANGE,
     "ipc_device"},
    {"ipc device with a bad digit", WITH, IPC_FRAME, "ipc_device",
     "\"GPU-8695f54f-567f-78f5-adb5-abcd659e9ffg\"", 0, TL_PROTO_E_RANGE, "ipc_device"},
    {"ipc device as int", WITH, IPC_FRAME, "ipc_device", "5", 0, TL_PROTO_E_KEY_TYPE,
     "ipc_device"},
    {"ipc slot negative", WITH, IPC_FRAME, "ipc_slot", "-1", 0, TL_PROTO_E_RANGE, "ipc_slot"},
    {"scan release empty", WITH, SCAN, "release", "\"\"", 0, TL_PROTO_E_RANGE, "release"},
    {"scan release as int", WITH, SCAN, "release", "5", 0, TL_PROTO_E_KEY_TYPE, "release"},
    {"scan dezinger negative", WITH, SCAN, "dezinger", "-1.5", 0, TL_PROTO_E_RANGE, "dezinger"},
    {"scan dezinger as str", WITH, SCAN, "dezinger", "\"5\"", 0, TL_PROTO_E_KEY_TYPE, "dezinger"},
    {"scan rings empty", WITH, SCAN, "rings", "\"\"", 0, TL_PROTO_E_RANGE, "rings"},
    {"scan rings as int", WITH, SCAN, "rings", "3", 0, TL_PROTO_E_KEY_TYPE, "rings"},
    {"scan paganin of 3", WITH, SCAN, "paganin", "[20, 0.1, 6.5]", 0, TL_PROTO_E_RANGE, "paganin"},
    {"scan paganin NaN", WITH, SCAN, "paganin", "[20, NaN, 6.5, 100]", 0, TL_PROTO_E_NOT_FINITE,
     "paganin"},
    {"release without slot", WITH, RELEASE, "slot", NULL, 0, TL_PROTO_E_MISSING, "slot"},
    {"release without ok", WITH, RELEASE, "ok", NULL, 0, TL_PROTO_E_MISSING, "ok"},
    {"failed release without code", WITH, RELEASE, "code", NULL, 0, TL_PROTO_E_MISSING, "code"},
    {"failed release, code 0", WITH, RELEASE, "code", "0", 0, TL_PROTO_E_RANGE, "code"},
    {"release on ingest", TEXT, RELEASE, NULL, NULL, TL_PROTO_INGEST, TL_PROTO_E_TYPE, "release"},
    /* frame: required keys */
    {"frame without series", WITH, FRAME, "series", NULL, 0, TL_PROTO_E_MISSING, "series"},
    {"frame without index", WITH, FRAME, "index", NULL, 0, TL_PROTO_E_MISSING, "index"},
    {"frame without kind", WITH, FRAME, "kind", NULL, 0, TL_PROTO_E_MISSING, "kind"},
    {"frame without dtype", WITH, FRAME, "dtype", NULL, 0, TL_PROTO_E_MISSING, "dtype"},
    {"frame without shape", WITH, FRAME, "shape", NULL, 0, TL_PROTO_E_MISSING, "shape"},
    /* frame: values */
    {"negative index", WITH, FRAME, "index", "-3", 0, TL_PROTO_E_RANGE, "index"},
    {"float index", WITH, FRAME, "index", "3.0", 0, TL_PROTO_E_KEY_TYPE, "index"},
    {"string index", WITH, FRAME, "index", "\"3\"", 0, TL_PROTO_E_KEY_TYPE, "index"},
    {"bool index", WITH, FRAME, "index", "true", 0, TL_PROTO_E_KEY_TYPE, "index"},
    {"negative series", WITH, FRAME, "series", "-9223372036854775807", 0, TL_PROTO_E_RANGE,
     "series"},
    {"NaN angle", WITH, FRAME, "angle", "NaN", 0, TL_PROTO_E_NOT_FINITE, "angle"},
    {"float32 NaN angle", WITH, FRAME, "angle", "f32(nan)", 0, TL_PROTO_E_NOT_FINITE, "angle"},
    {"inf angle", WITH, FRAME, "angle", "-Infinity", 0, TL_PROTO_E_NOT_FINITE, "angle"},
    {"string angle", WITH, FRAME, "angle", "\"0.5\"", 0, TL_PROTO_E_KEY_TYPE, "angle"},
    {"nil angle", WITH, FRAME, "angle", "null", 0, TL_PROTO_E_KEY_TYPE, "angle"},
    {"inf center_offset", WITH, FRAME, "center_offset", "Infinity", 0, TL_PROTO_E_NOT_FINITE,
     "center_offset"},
    {"negative t_acq", WITH, FRAME, "t_acq", "-1", 0, TL_PROTO_E_RANGE, "t_acq"},
    {"band of 0 rows", WITH, FRAME, "band", "[1, 0]", 0, TL_PROTO_E_RANGE, "band"},
    {"band past the last row", WITH, FRAME, "band", "[2, 3]", 0, TL_PROTO_E_RANGE, "4 rows"},
    {"band from row 2^32", WITH, FRAME, "band", "[4294967296, 1]", 0, TL_PROTO_E_RANGE, "band"},
    {"band of 3 values", WITH, FRAME, "band", "[0, 1, 2]", 0, TL_PROTO_E_RANGE, "2 unsigned"},
    {"negative band row", WITH, FRAME, "band", "[-1, 2]", 0, TL_PROTO_E_RANGE, "band[0]"},
    {"band in GPU memory", WITH, IPC_FRAME, "band", "[0, 2]", 0, TL_PROTO_E_UNSUPPORTED,
     "GPU memory"},
    {"zero rows", WITH, FRAME, "shape", "[0, 6]", 0, TL_PROTO_E_RANGE, "shape[0]"},
    {"zero cols", WITH, FRAME, "shape", "[4, 0]", 0, TL_PROTO_E_RANGE, "shape[1]"},
    {"rows 65537", WITH, FRAME, "shape", "[65537, 6]", 0, TL_PROTO_E_RANGE, "65537"},
    {"cols 2^32", WITH, FRAME, "shape", "[4, 4294967296]", 0, TL_PROTO_E_RANGE, "shape[1]"},
    {"negative cols", WITH, FRAME, "shape", "[4, -6]", 0, TL_PROTO_E_RANGE, "shape[1]"},
    {"float cols", WITH, FRAME, "shape", "[4, 6.0]", 0, TL_PROTO_E_KEY_TYPE, "shape[1]"},
    {"shape with 3 elements", WITH, FRAME, "shape", "[4, 6, 1]", 0, TL_PROTO_E_RANGE, "shape"},
    {"shape with 1 element", WITH, FRAME, "shape", "[24]", 0, TL_PROTO_E_RANGE, "shape"},
    {"shape not an array", WITH, FRAME, "shape", "\"4x6\"", 0, TL_PROTO_E_KEY_TYPE, "shape"},
    {"shape as a map", WITH, FRAME, "shape", "{\"rows\": 4, \"cols\": 6}", 0, TL_PROTO_E_KEY_TYPE,
     "shape"},
    {"unknown dtype", WITH, FRAME, "dtype", "\"u64\"", 0, TL_PROTO_E_DTYPE, "u64"},
    {"numpy dtype", WITH, FRAME, "dtype", "\"<u2\"", 0, TL_PROTO_E_DTYPE, "<u2"},
    {"dtype as integer", WITH, FRAME, "dtype", "2", 0, TL_PROTO_E_KEY_TYPE, "dtype"},
    {"unknown kind", WITH, FRAME, "kind", "\"white\"", 0, TL_PROTO_E_KIND, "white"},
    {"kind in capitals", WITH, FRAME, "kind", "\"PROJ\"", 0, TL_PROTO_E_KIND, "kind"},
    {"overflow 65536 x 65536 f32", TEXT,
     "{\"v\": 1, \"type\": \"frame\", \"series\": 1, "
     "\"index\": 0, \"kind\": \"proj\", \"dtype\": \"f32\", \"shape\": [65536, 65536]}",
     NULL, NULL, 0, TL_PROTO_E_OVERFLOW, "65536"},
    {"overflow 65536 x 65536 u16", WITH, FRAME, "shape", "[65536, 65536]", 0, TL_PROTO_E_OVERFLOW,
     "u16"},
    {"overflow 2^31 bytes exactly", TEXT,
     "{\"v\": 1, \"type\": \"frame\", \"series\": 1, "
     "\"index\": 0, \"kind\": \"dark\", \"dtype\": \"u8\", \"shape\": [32768, 65536]}",
     NULL, NULL, 0, TL_PROTO_E_OVERFLOW, NULL},
    /* scan */
    {"scan without series", WITH, SCAN, "series", NULL, 0, TL_PROTO_E_MISSING, "series"},
    {"scan without geometry", WITH, SCAN, "geometry", NULL, 0, TL_PROTO_E_MISSING, "geometry"},
    {"scan without shape", WITH, SCAN, "shape", NULL, 0, TL_PROTO_E_MISSING, "shape"},
    {"scan without dtype", WITH, SCAN, "dtype", NULL, 0, TL_PROTO_E_MISSING, "dtype"},
    {"scan without window", WITH, SCAN, "window", NULL, 0, TL_PROTO_E_MISSING, "window"},
    {"unknown geometry", WITH, SCAN, "geometry", "\"fan\"", 0, TL_PROTO_E_KIND, "fan"},
    {"window 0", WITH, SCAN, "window", "0", 0, TL_PROTO_E_RANGE, "window"},
    {"window 2^20 + 1", WITH, SCAN, "window", "1048577", 0, TL_PROTO_E_RANGE, "1048577"},
    {"darks 2^32", WITH, SCAN, "darks", "4294967296", 0, TL_PROTO_E_RANGE, "darks"},
    {"negative flats", WITH, SCAN, "flats", "-1", 0, TL_PROTO_E_RANGE, "flats"},
    {"inf center", WITH, SCAN, "center", "Infinity", 0, TL_PROTO_E_NOT_FINITE, "center"},
    {"NaN angle_step", WITH, SCAN, "angle_step", "NaN, \"angle_start\": 0", 0,
     TL_PROTO_E_NOT_FINITE, "angle_step"},
    {"angle_start without angle_step", WITH, SCAN, "angle_start", "0.0", 0, TL_PROTO_E_MISSING,
     "angle_step"},
    {"angle_step without angle_start", WITH, SCAN, "angle_step", "0.01", 0, TL_PROTO_E_MISSING,
     "angle_start"},
    {"filter of 33 bytes", WITH, SCAN, "filter", "\"ram-lak-ram-lak-ram-lak-ram-lak-x\"", 0,
     TL_PROTO_E_RANGE, "filter"},
    {"empty filter", WITH, SCAN, "filter", "\"\"", 0, TL_PROTO_E_RANGE, "filter"},
    {"filter as bin", WITH, SCAN, "filter", "b\"ram-lak\"", 0, TL_PROTO_E_KEY_TYPE, "filter"},
    {"already_linear as 1", WITH, SCAN, "already_linear", "1", 0, TL_PROTO_E_KEY_TYPE,
     "already_linear"},
    {"scan overflow", WITH, SCAN, "shape", "[65536, 65536]", 0, TL_PROTO_E_OVERFLOW, NULL},
    /* cone beam (8.1.1): each key required, typed, finite and > 0; none with parallel */
    {"cone without source_origin", WITH, CONE_SCAN, "source_origin", NULL, 0, TL_PROTO_E_MISSING,
     "\"source_origin\""},
    {"cone without source_detector", WITH, CONE_SCAN, "source_detector", NULL, 0,
     TL_PROTO_E_MISSING, "\"source_detector\""},
    {"cone without pixel_size", WITH, CONE_SCAN, "pixel_size", NULL, 0, TL_PROTO_E_MISSING,
     "\"pixel_size\""},
    {"cone source_origin 0", WITH, CONE_SCAN, "source_origin", "0", 0, TL_PROTO_E_RANGE,
     "source_origin"},
    {"cone source_origin negative", WITH, CONE_SCAN, "source_origin", "-500.0", 0,
     TL_PROTO_E_RANGE, "source_origin"},
    {"cone source_origin NaN", WITH, CONE_SCAN, "source_origin", "NaN", 0, TL_PROTO_E_NOT_FINITE,
     "source_origin"},
    {"cone source_origin as str", WITH, CONE_SCAN, "source_origin", "\"500\"", 0,
     TL_PROTO_E_KEY_TYPE, "source_origin"},
    {"cone source_detector inf", WITH, CONE_SCAN, "source_detector", "Infinity", 0,
     TL_PROTO_E_NOT_FINITE, "source_detector"},
    {"cone source_detector 0", WITH, CONE_SCAN, "source_detector", "0.0", 0, TL_PROTO_E_RANGE,
     "source_detector"},
    {"cone pixel_size 0", WITH, CONE_SCAN, "pixel_size", "0", 0, TL_PROTO_E_RANGE, "pixel_size"},
    {"cone pixel_size -inf", WITH, CONE_SCAN, "pixel_size", "-Infinity", 0, TL_PROTO_E_NOT_FINITE,
     "pixel_size"},
    {"cone pixel_size v negative", WITH, CONE_SCAN, "pixel_size", "[0.2, -0.1]", 0,
     TL_PROTO_E_RANGE, "pixel_size[1]"},
    {"cone pixel_size u NaN", WITH, CONE_SCAN, "pixel_size", "[NaN, 0.1]", 0,
     TL_PROTO_E_NOT_FINITE, "pixel_size[0]"},
    {"cone pixel_size of 3", WITH, CONE_SCAN, "pixel_size", "[0.2, 0.2, 0.2]", 0, TL_PROTO_E_RANGE,
     "pixel_size"},
    {"cone pixel_size as str", WITH, CONE_SCAN, "pixel_size", "\"0.2\"", 0, TL_PROTO_E_KEY_TYPE,
     "a number or an array"},
    {"cone detector_offset of 1", WITH, CONE_SCAN, "detector_offset", "[1.5]", 0, TL_PROTO_E_RANGE,
     "detector_offset"},
    {"cone detector_offset NaN", WITH, CONE_SCAN, "detector_offset", "[0, NaN]", 0,
     TL_PROTO_E_NOT_FINITE, "detector_offset[1]"},
    {"cone detector_offset as number", WITH, CONE_SCAN, "detector_offset", "2.5", 0,
     TL_PROTO_E_KEY_TYPE, "detector_offset"},
    {"cone detector_offset u with center", WITH, CONE_SCAN, "detector_offset",
     "[1.5, 0], \"center\": 2.5", 0, TL_PROTO_E_UNSUPPORTED, "center"},
    {"parallel with source_origin", WITH, SCAN, "source_origin", "500", 0, TL_PROTO_E_UNSUPPORTED,
     "source_origin"},
    {"parallel with source_detector", WITH, SCAN, "source_detector", "750", 0,
     TL_PROTO_E_UNSUPPORTED, "source_detector"},
    {"parallel with pixel_size", WITH, SCAN, "pixel_size", "0.2", 0, TL_PROTO_E_UNSUPPORTED,
     "pixel_size"},
    {"parallel with detector_offset", WITH, SCAN, "detector_offset", "[0, 0]", 0,
     TL_PROTO_E_UNSUPPORTED, "detector_offset"},
    {"parallel with short_scan", WITH, SCAN, "short_scan", "[0, 4]", 0, TL_PROTO_E_UNSUPPORTED,
     "short_scan"},
    {"cone short_scan range 0", WITH, CONE_SCAN, "short_scan", "[0, 0]", 0, TL_PROTO_E_RANGE,
     "short_scan[1]"},
    {"cone short_scan a turn", WITH, CONE_SCAN, "short_scan", "[0, 6.3]", 0, TL_PROTO_E_RANGE,
     "short_scan[1]"},
    {"cone short_scan NaN start", WITH, CONE_SCAN, "short_scan", "[NaN, 4]", 0,
     TL_PROTO_E_NOT_FINITE, "short_scan[0]"},
    {"cone short_scan of 1", WITH, CONE_SCAN, "short_scan", "[4]", 0, TL_PROTO_E_RANGE,
     "short_scan"},
    /* matrices (8.1.1): arrays of 12 finite numbers, 1..512 of them, cone only, and alone
     * in placing the detector (the count limit: check_proto.c scan_matrices_limit) */
    {"parallel with matrices", WITH, SCAN, "matrices", "[" MAT "]", 0, TL_PROTO_E_UNSUPPORTED,
     "matrices"},
    {"cone matrices as number", WITH, CONE_SCAN, "matrices", "3", 0, TL_PROTO_E_KEY_TYPE,
     "matrices"},
    {"cone matrices empty", WITH, CONE_SCAN, "matrices", "[]", 0, TL_PROTO_E_RANGE, "0 matrices"},
    {"cone matrices flat", WITH, CONE_SCAN, "matrices", MAT, 0, TL_PROTO_E_KEY_TYPE,
     "matrices[0]"},
    {"cone matrix of 11", WITH, CONE_SCAN, "matrices",
     "[" MAT ", [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]]", 0, TL_PROTO_E_RANGE, "matrices[1]"},
    {"cone matrix of 13", WITH, CONE_SCAN, "matrices",
     "[[1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 500, 0]]", 0, TL_PROTO_E_RANGE, "got 13 elements"},
    {"cone matrix NaN", WITH, CONE_SCAN, "matrices",
     "[" MAT ", " MAT ", [1, 0, 0, 0, NaN, 1, 0, 0, 0, 0, 1, 500]]", 0, TL_PROTO_E_NOT_FINITE,
     "matrices[2][4]"},
    {"cone matrix inf", WITH, CONE_SCAN, "matrices",
     "[[1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, "
     "-Infinity]]",
     0, TL_PROTO_E_NOT_FINITE, "matrices[0][11]"},
    {"cone matrix str number", WITH, CONE_SCAN, "matrices",
     "[[1, 0, 0, \"0\", 0, 1, 0, 0, 0, 0, 1, 500]]", 0, TL_PROTO_E_KEY_TYPE, "matrices[0][3]"},
    {"cone matrices with center", WITH, CONE_SCAN, "matrices", "[" MAT "], \"center\": 2.5", 0,
     TL_PROTO_E_UNSUPPORTED, "center"},
    {"cone matrices with offset u", WITH, CONE_SCAN, "matrices",
     "[" MAT "], \"detector_offset\": [1, 0]", 0, TL_PROTO_E_UNSUPPORTED, "detector_offset[0]"},
    {"cone matrices with short_scan", WITH, CONE_SCAN, "matrices",
     "[" MAT "], \"short_scan\": [0, 4]", 0, TL_PROTO_E_UNSUPPORTED, "short_scan"},
    /* end */
    {"end without series", TEXT, "{\"v\": 1, \"type\": \"end\"}", NULL, NULL, 0,
     TL_PROTO_E_MISSING, "series"},
    /* req */
    {"req without id", WITH, REQ, "id", NULL, 0, TL_PROTO_E_MISSING, "\"id\""},
    {"req without cmd", WITH, REQ, "cmd", NULL, 0, TL_PROTO_E_MISSING, "cmd"},
    {"empty cmd", WITH, REQ, "cmd", "\"\"", 0, TL_PROTO_E_RANGE, "cmd"},
    {"cmd of 65 bytes", WITH, REQ, "cmd",
     "\"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklm\"", 0, TL_PROTO_E_RANGE,
     "65"},
    {"args not a map", WITH, REQ, "args", "[1, 2]", 0, TL_PROTO_E_KEY_TYPE, "args"},
    {"args nil", WITH, REQ, "args", "null", 0, TL_PROTO_E_KEY_TYPE, "args"},
    {"args with integer key", WITH, REQ, "args", "{1: 2}", 0, TL_PROTO_E_NOT_MAP, "args"},
    {"args with duplicate key", WITH, REQ, "args", "{\"z\": 1, \"z\": 2}", 0, TL_PROTO_E_DUP_KEY,
     "\"z\""},
    /* rep */
    {"rep error without message", WITH, REP_ERR, "error", "{\"code\": 32}", 0, TL_PROTO_E_MISSING,
     "message"},
    {"rep error without code", WITH, REP_ERR, "error", "{\"message\": \"x\"}", 0,
     TL_PROTO_E_MISSING, "code"},
    {"rep not ok without error", WITH, REP_ERR, "error", NULL, 0, TL_PROTO_E_MISSING, "error"},
    {"rep error not a map", WITH, REP_ERR, "error", "\"bad\"", 0, TL_PROTO_E_KEY_TYPE, "error"},
    {"rep error code negative", WITH, REP_ERR, "error", "{\"code\": -1, \"message\": \"x\"}", 0,
     TL_PROTO_E_RANGE, "code"},
    {"rep error message as bin", WITH, REP_ERR, "error", "{\"code\": 1, \"message\": b\"x\"}", 0,
     TL_PROTO_E_KEY_TYPE, "message"},
    {"rep ok as integer", WITH, REP_ERR, "ok", "0", 0, TL_PROTO_E_KEY_TYPE, "ok"},
    {"rep without ok", WITH, REP_ERR, "ok", NULL, 0, TL_PROTO_E_MISSING, "ok"},
    /* slice */
    {"orientation of 8 numbers", WITH, SLICE, "orientation", "[1, 0, 0, 0, 1, 0, 0, 0]", 0,
     TL_PROTO_E_RANGE, "orientation"},
    {"orientation with NaN", WITH, SLICE, "orientation", "[1, 0, 0, 0, 1, 0, 0, NaN, 0]", 0,
     TL_PROTO_E_NOT_FINITE, "orientation[7]"},
    {"orientation beyond float32", WITH, SLICE, "orientation", "[1, 0, 0, 0, 1, 0, 0, 1e300, 0]",
     0, TL_PROTO_E_RANGE, "orientation[7]"},
    {"orientation with a str", WITH, SLICE, "orientation", "[1, 0, 0, 0, \"1\", 0, 0, 0, 0]", 0,
     TL_PROTO_E_KEY_TYPE, "orientation[4]"},
    {"window first > last", WITH, SLICE, "window", "[190, 189]", 0, TL_PROTO_E_RANGE, "window"},
    {"window of 1 element", WITH, SLICE, "window", "[10]", 0, TL_PROTO_E_RANGE, "window"},
    {"slice id with a slash", WITH, SLICE, "id", "\"a/b\"", 0, TL_PROTO_E_RANGE, "\"id\""},
    {"empty slice id", WITH, SLICE, "id", "\"\"", 0, TL_PROTO_E_RANGE, "\"id\""},
    {"slice id of 65 bytes", WITH, SLICE, "id",
     "\"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklm\"", 0, TL_PROTO_E_RANGE,
     "\"id\""},
    {"slice without kernel", WITH, SLICE, "kernel", NULL, 0, TL_PROTO_E_MISSING, "kernel"},
    {"slice without t_pub", WITH, SLICE, "t_pub", NULL, 0, TL_PROTO_E_MISSING, "t_pub"},
    {"slice without missing", WITH, SLICE, "missing", NULL, 0, TL_PROTO_E_MISSING, "missing"},
    {"slice missing negative", WITH, SLICE, "missing", "-1", 0, TL_PROTO_E_RANGE, "missing"},
    {"slice t_recv as float", WITH, SLICE, "t_recv", "1.5", 0, TL_PROTO_E_KEY_TYPE, "t_recv"},
    {"slice final as 1", WITH, SLICE, "final", "1", 0, TL_PROTO_E_KEY_TYPE, "final"},
    /* a box: planes with box_step, planes dividing the rows, a step > 0 */
    {"box_step without planes", WITH, SLICE, "box_step", "1", 0, TL_PROTO_E_MISSING, "box_step"},
    {"planes without box_step", WITH, BOX_SLICE, "box_step", NULL, 0, TL_PROTO_E_MISSING,
     "box_step"},
    {"planes not dividing the rows", WITH, BOX_SLICE, "planes", "3", 0, TL_PROTO_E_RANGE,
     "planes"},
    {"box_step 0", WITH, BOX_SLICE, "box_step", "0", 0, TL_PROTO_E_RANGE, "box_step"},
    {"box_step as str", WITH, BOX_SLICE, "box_step", "\"1\"", 0, TL_PROTO_E_KEY_TYPE,
     "box_step"},
    /* slice in shared memory: both keys or neither, one POSIX name, an aligned offset */
    {"shm_offset without shm_name", WITH, SLICE, "shm_offset", "4096", 0, TL_PROTO_E_MISSING,
     "shm_name"},
    {"shm_name without shm_offset", WITH, SHM_SLICE, "shm_offset", NULL, 0, TL_PROTO_E_MISSING,
     "shm_offset"},
    {"shm_name without '/'", WITH, SHM_SLICE, "shm_name", "\"tomolive-z0-1\"", 0, TL_PROTO_E_RANGE,
     "shm_name"},
    {"shm_name with a second '/'", WITH, SHM_SLICE, "shm_name", "\"/dev/shm/x\"", 0,
     TL_PROTO_E_RANGE, "shm_name"},
    {"shm_name ending in '/'", WITH, SHM_SLICE, "shm_name", "\"/x/\"", 0, TL_PROTO_E_RANGE,
     "shm_name"},
    {"empty shm_name", WITH, SHM_SLICE, "shm_name", "\"\"", 0, TL_PROTO_E_RANGE, "shm_name"},
    {"shm_name of '/' alone", WITH, SHM_SLICE, "shm_name", "\"/\"", 0, TL_PROTO_E_RANGE,
     "shm_name"},
    {"shm_name of 256 bytes", WITH, SHM_SLICE, "shm_name", NAME256, 0, TL_PROTO_E_RANGE,
     "shm_name"},
    {"shm_name as bin", WITH, SHM_SLICE, "shm_name", "b\"/tomolive-z0-1\"", 0, TL_PROTO_E_KEY_TYPE,
     "shm_name"},
    {"shm_offset 0", WITH, SHM_SLICE, "shm_offset", "0", 0, TL_PROTO_E_RANGE, "shm_offset"},
    {"shm_offset not a multiple of 64", WITH, SHM_SLICE, "shm_offset", "4100", 0, TL_PROTO_E_RANGE,
     "shm_offset"},
    {"shm_offset 32", WITH, SHM_SLICE, "shm_offset", "32", 0, TL_PROTO_E_RANGE, "shm_offset"},
    {"shm_offset negative", WITH, SHM_SLICE, "shm_offset", "-64", 0, TL_PROTO_E_RANGE,
     "shm_offset"},
    {"shm_offset as float", WITH, SHM_SLICE, "shm_offset", "4096.0", 0, TL_PROTO_E_KEY_TYPE,
     "shm_offset"},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static tl_proto_decoder *dec;
static msgpack_sbuffer sb;

static void setup(void)
{
    dec = tl_proto_decoder_new();
    ck_assert_ptr_nonnull(dec);
    msgpack_sbuffer_init(&sb);
}

static void teardown(void)
{
    tl_proto_decoder_free(dec);
    msgpack_sbuffer_destroy(&sb);
}

static void expect(const void *p, size_t n, unsigned accept, tl_proto_err want, const char *says,
                   const char *name)
{
    tl_proto_msg m;
    tl_proto_error err = {TL_PROTO_OK, ""};
    tl_proto_err rc = tl_proto_decode(dec, p, n, accept ? accept : ALL, &m, &err);
    ck_assert_msg(rc == want, "%s: got %s (%s), want %s", name, tl_proto_err_name(rc), err.message,
                  tl_proto_err_name(want));
    ck_assert_int_eq(err.code, rc);
    if (rc == TL_PROTO_OK && m.type == TL_MSG_SCAN)
        tl_proto_scan_free(&m.scan);
    ck_assert_ptr_null(m.type == TL_MSG_SCAN ? m.scan.matrices : NULL); /* a refusal owns none */
    if (rc != TL_PROTO_OK)
        ck_assert_msg(strlen(err.message) > 0, "%s: empty message", name);
    if (says)
        ck_assert_msg(strstr(err.message, says), "%s: message \"%s\" does not mention \"%s\"",
                      name, err.message, says);
}

/* The base headers themselves are valid, so each case's defect is the only one. */
START_TEST(bases_are_valid)
{
    const char *bases[] = {FRAME, SCAN, CONE_SCAN, SLICE, SHM_SLICE, REQ, REP_ERR};
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++) {
        msgpack_sbuffer_clear(&sb);
        tlt_pack_text(&sb, bases[i]);
        expect(sb.data, sb.size, 0, TL_PROTO_OK, NULL, bases[i]);
    }
}
END_TEST

START_TEST(bad_header)
{
    const bad_case *c = &cases[_i];
    uint8_t raw[256];
    msgpack_sbuffer_clear(&sb);
    switch (c->f) {
        case TEXT:
            if (!c->a) { /* JSON instead of msgpack: '{' is a fixint, the rest trails */
                const char *json = "{\"v\":1,\"type\":\"end\",\"series\":1}";
                expect(json, strlen(json), 0, c->want, c->says, c->name);
                return;
            }
            tlt_pack_text(&sb, c->a);
            break;
        case WITH: tlt_pack_text(&sb, tlt_with(c->a, c->key, c->value)); break;
        case HEX: {
            size_t n = tlt_hex(raw, sizeof raw, c->a);
            expect(raw, n, c->accept, c->want, c->says, c->name);
            return;
        }
    }
    expect(sb.data, sb.size, c->accept, c->want, c->says, c->name);
}
END_TEST

/* The edges of a valid shm slice: the longest name, the smallest offset, a huge offset
 * (the decoder cannot know the object's size: the reader checks it, protocol/shm.h). */
START_TEST(shm_edges_accepted)
{
    const char *keys[] = {"shm_name", "shm_offset", "shm_offset"};
    const char *values[] = {NAME255, "64", "18446744073709551552"};
    for (int i = 0; i < 3; i++) {
        msgpack_sbuffer_clear(&sb);
        tlt_pack_text(&sb, tlt_with(SHM_SLICE, keys[i], values[i]));
        expect(sb.data, sb.size, 0, TL_PROTO_OK, NULL, values[i]);
    }
}
END_TEST

/* Depth 8 (header map + args map + 6 arrays) is the deepest legal nesting. */
START_TEST(depth_8_accepted)
{
    tlt_pack_text(&sb, tlt_with(REQ, "args", "{\"a\": [[[[[[1]]]]]]}"));
    expect(sb.data, sb.size, 0, TL_PROTO_OK, NULL, "depth 8");
}
END_TEST

START_TEST(empty_header)
{
    expect("", 0, 0, TL_PROTO_E_MALFORMED, "empty", "empty");
}
END_TEST

START_TEST(header_over_limit)
{
    size_t n = TL_PROTO_MAX_HEADER + 1;
    uint8_t *p = calloc(1, n);
    ck_assert_ptr_nonnull(p);
    /* a valid map whose last value is a big str, so size is the only defect */
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 4);
    tl_proto_pack_kv_u64(&pk, "v", 1);
    tl_proto_pack_kv_str(&pk, "type", "end");
    tl_proto_pack_kv_u64(&pk, "series", 1);
    tl_proto_pack_cstr(&pk, "pad");
    size_t pad = n - sb.size - 3;
    memset(p, 'x', pad);
    msgpack_pack_str_with_body(&pk, p, pad);
    ck_assert_uint_eq(sb.size, n);
    expect(sb.data, sb.size, 0, TL_PROTO_E_TOO_BIG, "65537", "64 KiB + 1");
    free(p);
}
END_TEST

/* A valid header cut short: inside the "kind" value, inside a uint64, between a key and its
 * value, one byte short. Cut points are found in the bytes, not hard-coded, and lie past the
 * first 2 * entries bytes (before that, the map's own count is what does not fit: E_LIMIT,
 * which every_prefix allows). */
START_TEST(truncated)
{
    tlt_pack_text(&sb, "{\"v\": 1, \"type\": \"frame\", \"t_acq\": 1761234567890123456, "
                       "\"series\": 7, \"index\": 42, \"kind\": \"proj\", \"shape\": [4, 6], "
                       "\"dtype\": \"u16\"}");
    const char *s = sb.data;
    size_t n = sb.size;
    const char *in_kind = memmem(s, n, "proj", 4);
    const char *in_u64 = memchr(memmem(s, n, "t_acq", 5), 0xcf, 8);
    const char *after_key = (const char *)memmem(s, n, "index", 5) + 5;
    ck_assert(in_kind && in_u64 && after_key);
    size_t cuts[] = {(size_t)(in_kind - s) + 2, (size_t)(in_u64 - s) + 4, (size_t)(after_key - s),
                     n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char name[40];
        snprintf(name, sizeof name, "cut at %zu of %zu", cuts[i], n);
        expect(s, cuts[i], 0, TL_PROTO_E_MALFORMED, "truncated", name);
    }
}
END_TEST

/* Any cut of a valid header fails with a syntax code, never OK and never a crash. */
START_TEST(every_prefix)
{
    tlt_pack_text(&sb, SLICE);
    for (size_t cut = 0; cut < sb.size; cut++) {
        tl_proto_msg m;
        tl_proto_error err;
        tl_proto_err rc = tl_proto_decode(dec, sb.data, cut, ALL, &m, &err);
        ck_assert_msg(rc == TL_PROTO_E_MALFORMED || rc == TL_PROTO_E_LIMIT, "cut %zu: %s", cut,
                      tl_proto_err_name(rc));
    }
}
END_TEST

/* Random bytes: never accepted, never a crash, always a header error code with a message
 * (which code depends on the bytes; both syntax codes must show up). */
START_TEST(random_bytes)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    uint8_t buf[512];
    int seen_malformed = 0, seen_limit = 0;
    for (int iter = 0; iter < 20000; iter++) {
        size_t n = 1 + (size_t)(iter % (int)sizeof buf);
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            buf[i] = (uint8_t)x;
        }
        if (iter % 2)
            buf[0] = 0x80 | (buf[0] & 0x0f); /* half of them start like a map */
        tl_proto_msg m;
        tl_proto_error err;
        tl_proto_err rc = tl_proto_decode(dec, buf, n, ALL, &m, &err);
        ck_assert_msg(rc != TL_PROTO_OK, "random bytes accepted");
        ck_assert_msg(rc >= TL_PROTO_E_PARTS && rc <= TL_PROTO_E_PAYLOAD, "unexpected %s: %s",
                      tl_proto_err_name(rc), err.message);
        ck_assert_int_eq(err.code, rc);
        seen_malformed += rc == TL_PROTO_E_MALFORMED;
        seen_limit += rc == TL_PROTO_E_LIMIT;
    }
    ck_assert_int_gt(seen_malformed, 0);
    ck_assert_int_gt(seen_limit, 0);
}
END_TEST

/* A map of many keys (past the pairwise-check size) with one duplicate far apart. */
START_TEST(duplicate_in_large_map)
{
    for (int dup = 0; dup < 2; dup++) {
        msgpack_sbuffer_clear(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        int extra = 1000;
        msgpack_pack_map(&pk, 3 + (size_t)extra);
        tl_proto_pack_kv_u64(&pk, "v", 1);
        tl_proto_pack_kv_str(&pk, "type", "end");
        tl_proto_pack_kv_u64(&pk, "series", 1);
        for (int i = 0; i < extra; i++) {
            char k[16];
            snprintf(k, sizeof k, "k%d", dup && i == extra - 1 ? 17 : i);
            tl_proto_pack_kv_u64(&pk, k, (uint64_t)i);
        }
        expect(sb.data, sb.size, 0, dup ? TL_PROTO_E_DUP_KEY : TL_PROTO_OK, dup ? "k17" : NULL,
               "large map");
    }
}
END_TEST

/* ---- part layout ------------------------------------------------------------------------ */

static zmq_msg_t parts[8];
static int nparts;

static void add_part(const void *p, size_t n)
{
    /* constant (no free function) messages: no copy, nothing to free */
    ck_assert_int_eq(zmq_msg_init_data(&parts[nparts++], (void *)p, n, NULL, NULL), 0);
}

static void parts_reset(void)
{
    tl_proto_close(parts, nparts);
    nparts = 0;
}

static void expect_parts(unsigned accept, tl_proto_err want, const char *says, const char *name)
{
    tl_proto_msg m;
    tl_proto_error err = {TL_PROTO_OK, ""};
    tl_proto_err rc = tl_proto_decode_parts(dec, parts, nparts, accept, &m, &err);
    ck_assert_msg(rc == want, "%s: got %s (%s), want %s", name, tl_proto_err_name(rc), err.message,
                  tl_proto_err_name(want));
    if (says)
        ck_assert_msg(strstr(err.message, says), "%s: \"%s\" lacks \"%s\"", name, err.message,
                      says);
    parts_reset();
}

START_TEST(bad_parts)
{
    static uint8_t pay[4 * 6 * 2 + 1];
    static uint8_t spay[4 * 4 * 4 + 1];
    msgpack_sbuffer fr, sl;
    msgpack_sbuffer_init(&fr);
    msgpack_sbuffer_init(&sl);
    tlt_pack_text(&fr, FRAME);
    tlt_pack_text(&sl, SLICE);
    const size_t fp = 4 * 6 * 2, sp = 4 * 4 * 4;
    const unsigned sub = TL_MSG_SLICE;

    add_part(fr.data, fr.size);
    add_part(pay, fp);
    expect_parts(TL_PROTO_INGEST, TL_PROTO_OK, NULL, "valid frame");

    add_part(fr.data, fr.size);
    expect_parts(TL_PROTO_INGEST, TL_PROTO_E_PARTS, "2 parts", "frame with 1 part");

    add_part(fr.data, fr.size);
    add_part(pay, fp);
    add_part(pay, fp);
    expect_parts(TL_PROTO_INGEST, TL_PROTO_E_PARTS, "got 3", "frame with 3 parts");

    add_part(fr.data, fr.size);
    add_part(pay, fp + 1);
    expect_parts(TL_PROTO_INGEST, TL_PROTO_E_PAYLOAD, "49", "payload one byte long");

    add_part(fr.data, fr.size);
    add_part(pay, fp - 1);
    expect_parts(TL_PROTO_INGEST, TL_PROTO_E_PAYLOAD, "47", "payload one byte short");

    add_part(fr.data, fr.size);
    add_part(pay, 0);
    expect_parts(TL_PROTO_INGEST, TL_PROTO_E_PAYLOAD, NULL, "empty payload");

    /* a band's payload holds its rows only */
    {
        msgpack_sbuffer bd;
        msgpack_sbuffer_init(&bd);
        tlt_pack_text(&bd, "{\"v\": 1, \"type\": \"frame\", \"series\": 7, \"index\": 42, "
                           "\"kind\": \"proj\", \"dtype\": \"u16\", \"shape\": [4, 6], "
                           "\"angle\": 0.5, \"band\": [1, 3]}");
        add_part(bd.data, bd.size);
        add_part(pay, 3 * 6 * 2);
        expect_parts(TL_PROTO_INGEST, TL_PROTO_OK, NULL, "band of 3 rows");
        add_part(bd.data, bd.size);
        add_part(pay, fp);
        expect_parts(TL_PROTO_INGEST, TL_PROTO_E_PAYLOAD, "48",
                     "band with a whole frame's payload");
        msgpack_sbuffer_destroy(&bd);
    }

    /* a frame in GPU memory has no payload part */
    msgpack_sbuffer ipc;
    msgpack_sbuffer_init(&ipc);
    tlt_pack_text(&ipc, IPC_FRAME);
    add_part(ipc.data, ipc.size);
    expect_parts(TL_PROTO_INGEST, TL_PROTO_OK, NULL, "frame in GPU memory");
    add_part(ipc.data, ipc.size);
    add_part(pay, fp);
    expect_parts(TL_PROTO_INGEST, TL_PROTO_E_PARTS, "GPU memory", "GPU frame with a payload");
    msgpack_sbuffer_destroy(&ipc);

    msgpack_sbuffer scan;
    msgpack_sbuffer_init(&scan);
    tlt_pack_text(&scan, SCAN);
    add_part(scan.data, scan.size);
    add_part(pay, 1);
    expect_parts(TL_PROTO_INGEST, TL_PROTO_E_PARTS, "\"scan\" needs 1 part", "scan, 2 parts");
    msgpack_sbuffer_destroy(&scan);

    expect_parts(TL_PROTO_INGEST, TL_PROTO_E_PARTS, "no parts", "no parts");

    for (int i = 0; i < TL_PROTO_MAX_PARTS + 1; i++)
        add_part(fr.data, fr.size);
    expect_parts(TL_PROTO_INGEST, TL_PROTO_E_PARTS, "5 parts", "5 parts");

    add_part(pay, 0);
    add_part(pay, fp);
    expect_parts(TL_PROTO_INGEST, TL_PROTO_E_MALFORMED, NULL, "empty header part");

    /* slices */
    add_part("slice/z0/", 9);
    add_part(sl.data, sl.size);
    add_part(spay, sp);
    expect_parts(sub, TL_PROTO_OK, NULL, "valid slice");

    add_part("slice/z1/", 9);
    add_part(sl.data, sl.size);
    add_part(spay, sp);
    expect_parts(sub, TL_PROTO_E_PARTS, "slice/z1/", "topic of another id");

    add_part("slice/z0", 8);
    add_part(sl.data, sl.size);
    add_part(spay, sp);
    expect_parts(sub, TL_PROTO_E_PARTS, "does not match", "unterminated topic");

    add_part("slice/z0/x", 10);
    add_part(sl.data, sl.size);
    add_part(spay, sp);
    expect_parts(sub, TL_PROTO_E_PARTS, "does not match", "topic with a suffix");

    add_part(sl.data, sl.size);
    add_part(spay, sp);
    expect_parts(sub, TL_PROTO_E_PARTS, "topic", "slice without topic");

    add_part("slice/z0/", 9);
    add_part(sl.data, sl.size);
    expect_parts(sub, TL_PROTO_E_PARTS, "3 parts", "slice without payload");

    add_part("slice/z0/", 9);
    expect_parts(sub, TL_PROTO_E_PARTS, "header", "topic alone");

    add_part("slice/z0/", 9);
    add_part(sl.data, sl.size);
    add_part(spay, sp + 1);
    expect_parts(sub, TL_PROTO_E_PAYLOAD, NULL, "slice payload one byte long");

    add_part("slice/z0/", 9);
    add_part(fr.data, fr.size);
    add_part(pay, fp);
    expect_parts(sub | TL_MSG_FRAME, TL_PROTO_E_PARTS, "topic", "topic before a frame");

    /* slices in shared memory: [topic "shm/<id>/", header], never a payload */
    msgpack_sbuffer shm;
    msgpack_sbuffer_init(&shm);
    tlt_pack_text(&shm, SHM_SLICE);
    add_part("shm/z0/", 7);
    add_part(shm.data, shm.size);
    expect_parts(sub, TL_PROTO_OK, NULL, "valid shm slice");

    add_part("shm/z0/", 7);
    add_part(shm.data, shm.size);
    add_part(spay, sp);
    expect_parts(sub, TL_PROTO_E_PARTS, "shared memory", "shm slice with a payload");

    add_part("slice/z0/", 9);
    add_part(shm.data, shm.size);
    expect_parts(sub, TL_PROTO_E_PARTS, "shm/z0/", "shm header under a slice/ topic");

    add_part("slice/z0/", 9);
    add_part(shm.data, shm.size);
    add_part(spay, sp);
    expect_parts(sub, TL_PROTO_E_PARTS, NULL, "shm header with payload under slice/");

    add_part("shm/z0/", 7);
    add_part(sl.data, sl.size);
    add_part(spay, sp);
    expect_parts(sub, TL_PROTO_E_PARTS, "slice/z0/", "plain header under a shm/ topic");

    add_part("shm/z0/", 7);
    add_part(sl.data, sl.size);
    expect_parts(sub, TL_PROTO_E_PARTS, NULL, "plain header under shm/ without payload");

    add_part("shm/z1/", 7);
    add_part(shm.data, shm.size);
    expect_parts(sub, TL_PROTO_E_PARTS, "shm/z1/", "shm topic of another id");

    add_part("shm/z0", 6);
    add_part(shm.data, shm.size);
    expect_parts(sub, TL_PROTO_E_PARTS, "does not match", "unterminated shm topic");

    add_part("shm/z0/", 7);
    expect_parts(sub, TL_PROTO_E_PARTS, "header", "shm topic alone");

    add_part("shm/z0/", 7);
    add_part(shm.data, shm.size);
    expect_parts(TL_PROTO_INGEST, TL_PROTO_E_MALFORMED, NULL, "shm topic on the ingest socket");
    msgpack_sbuffer_destroy(&shm);

    add_part("slice/z0/", 9); /* where slices are not accepted, a topic is just a bad header */
    add_part(sl.data, sl.size);
    add_part(spay, sp);
    expect_parts(TL_PROTO_INGEST, TL_PROTO_E_MALFORMED, NULL, "topic on the ingest socket");

    msgpack_sbuffer_destroy(&fr);
    msgpack_sbuffer_destroy(&sl);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("proto_bad");
    TCase *tc = tcase_create("headers");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, bases_are_valid);
    tcase_add_loop_test(tc, bad_header, 0, NCASES);
    tcase_add_test(tc, shm_edges_accepted);
    tcase_add_test(tc, depth_8_accepted);
    tcase_add_test(tc, empty_header);
    tcase_add_test(tc, header_over_limit);
    tcase_add_test(tc, truncated);
    tcase_add_test(tc, every_prefix);
    tcase_add_test(tc, random_bytes);
    tcase_add_test(tc, duplicate_in_large_map);
    suite_add_tcase(s, tc);
    TCase *tp = tcase_create("parts");
    tcase_add_checked_fixture(tp, setup, teardown);
    tcase_add_test(tp, bad_parts);
    suite_add_tcase(s, tp);
    return s;
}

int main(void)
{
    printf("%d malformed-header cases in the table\n", NCASES);
    return tl_run_suite(suite(), false);
}
