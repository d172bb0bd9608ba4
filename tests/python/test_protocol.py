"""The Python client's protocol module without a daemon: the error codes are those of
PROTOCOL.md section 11, builders refuse what the daemon would refuse (with the same
code), and readers check version, type, keys, topic and payload length (and the keys of
a slice in shared memory); the C encoders' golden slice headers decode."""
from __future__ import annotations

import os
import re
import unittest

import msgpack
import numpy as np

import tlfixture  # noqa: F401  (puts clients/python on sys.path)
import tomolive
from tomolive import protocol as P


class ErrorCodes(unittest.TestCase):
    def test_codes_match_protocol_md(self):
        """Every row of the table in PROTOCOL.md section 11 is an ErrorCode of the same
        name and value, and every ErrorCode is in the table."""
        with open(os.path.join(tlfixture.SRCDIR, "protocol", "PROTOCOL.md")) as f:
            text = f.read()
        sec = text[text.index("## 11. Error codes"):text.index("## 12.")]
        rows = re.findall(r"^\| (\d+) \| `(\w+)` \|", sec, re.M)
        self.assertEqual(len(rows), 25)
        doc = {name: int(code) for code, name in rows}
        self.assertEqual(doc, {e.name: int(e) for e in tomolive.ErrorCode})

    def test_one_class_per_code(self):
        classes = set()
        for code in tomolive.ErrorCode:
            if code == 0:
                continue
            cls = tomolive.error_class(code)
            self.assertIsNot(cls, tomolive.TomoliveError, code.name)
            self.assertEqual(cls.code, code)
            self.assertTrue(issubclass(cls, tomolive.ProtocolError if code < 32
                                       else tomolive.RequestError), code.name)
            classes.add(cls)
        self.assertEqual(len(classes), 24)
        e = tomolive.error_from_reply(34, 'no slice "x"', "remove_slice")
        self.assertIsInstance(e, tomolive.NotFound)
        self.assertEqual((e.code, e.name, e.message), (34, "E_NOT_FOUND", 'no slice "x"'))
        self.assertEqual(str(e), 'remove_slice: E_NOT_FOUND (34): no slice "x"')
        # a code from a newer daemon: the base class, with the number kept
        e = tomolive.error_from_reply(99, "new")
        self.assertIs(type(e), tomolive.TomoliveError)
        self.assertEqual((e.code, e.name), (99, "E_99"))


class Builders(unittest.TestCase):
    def test_dtypes(self):
        for dt, name in ((np.uint8, "u8"), (np.uint16, "u16"), (np.uint32, "u32"),
                         (np.float32, "f32"), ("<f4", "f32"), ("f32", "f32")):
            self.assertEqual(P.dtype_name(dt), name)
        for bad in (np.float64, np.int16, np.int32, ">f4", ">u2", np.complex64, "f64"):
            with self.assertRaises(tomolive.BadDtype, msg=str(bad)):
                P.dtype_name(bad)
        self.assertEqual(P.numpy_dtype("u16"), np.dtype("<u2"))
        with self.assertRaises(tomolive.BadDtype):
            P.numpy_dtype("float")

    def test_frame_arrays(self):
        self.assertEqual(P.check_array(np.zeros((3, 5), np.uint16)), ("u16", (3, 5)))
        cases = [
            (np.zeros((3, 5)), tomolive.BadDtype),                   # float64
            (np.zeros((3, 5), ">f4"), tomolive.BadDtype),            # big-endian
            (np.zeros((3, 5), np.int32), tomolive.BadDtype),
            (np.zeros(15, np.float32), tomolive.OutOfRange),         # 1-D
            (np.zeros((1, 3, 5), np.float32), tomolive.OutOfRange),  # 3-D
            (np.zeros((0, 5), np.float32), tomolive.OutOfRange),     # empty side
            (np.zeros((3, 65537), np.uint8), tomolive.OutOfRange),   # side > 65536
            (np.zeros((6, 10), np.float32)[::2, ::2], tomolive.PayloadLength),  # strided
            (np.zeros((5, 3), np.float32).T, tomolive.PayloadLength),  # Fortran order
            ([[1, 2], [3, 4]], tomolive.KeyTypeError),                 # not an array
        ]
        for arr, exc in cases:
            with self.assertRaises(exc, msg=repr(arr)[:60]):
                P.check_array(arr)
        # 2 GiB or more is E_OVERFLOW, checked from the shape alone
        with self.assertRaises(tomolive.PayloadOverflow):
            P.frame_bytes((65536, 8192), "f32")
        self.assertEqual(P.frame_bytes((65536, 8191), "f32"), 65536 * 8191 * 4)

    def test_frame_header(self):
        h = P.frame_header(7, 1042, "proj", np.uint16, (2048, 2560), angle=np.float32(1.5),
                           t_acq=1761234567890123456)
        self.assertEqual(h, {"v": 1, "type": "frame", "series": 7, "index": 1042,
                             "kind": "proj", "dtype": "u16", "shape": [2048, 2560],
                             "angle": 1.5, "t_acq": 1761234567890123456})
        # msgpack of the header decodes to the same map, with str keys
        self.assertEqual(msgpack.unpackb(P.pack(h), raw=False), h)
        bad = [
            (dict(kind="projection"), tomolive.BadKind),
            (dict(kind=b"proj"), tomolive.KeyTypeError),
            (dict(index=-1), tomolive.OutOfRange),
            (dict(index=2 ** 64), tomolive.OutOfRange),
            (dict(index=1.0), tomolive.KeyTypeError),
            (dict(index=True), tomolive.KeyTypeError),
            (dict(angle=float("nan")), tomolive.NotFinite),
            (dict(angle=float("inf")), tomolive.NotFinite),
            (dict(angle="0.5"), tomolive.KeyTypeError),
            (dict(angle=True), tomolive.KeyTypeError),
            (dict(dtype="f64"), tomolive.BadDtype),
            (dict(shape=(4,)), tomolive.OutOfRange),
            (dict(shape=(4, 0)), tomolive.OutOfRange),
            (dict(shape=(4, -1)), tomolive.OutOfRange),
            (dict(shape="4x4"), tomolive.KeyTypeError),
        ]
        for change, exc in bad:
            args = dict(series=1, index=0, kind="proj", dtype="f32", shape=(4, 4), angle=0.0)
            args.update(change)
            with self.assertRaises(exc, msg=str(change)):
                P.frame_header(**args)

    def test_scan_header(self):
        h = P.scan_header(3, (64, 256), "u16", 720, darks=10, flats=10, center=127.5,
                          filter="shepp-logan", already_linear=False)
        self.assertEqual(h, {"v": 1, "type": "scan", "series": 3, "geometry": "parallel",
                             "dtype": "u16", "shape": [64, 256], "window": 720, "darks": 10,
                             "flats": 10, "center": 127.5, "filter": "shepp-logan"})
        with self.assertRaises(tomolive.OutOfRange):
            P.scan_header(1, (4, 4), "f32", 0)
        with self.assertRaises(tomolive.OutOfRange):
            P.scan_header(1, (4, 4), "f32", 2 ** 20 + 1)
        with self.assertRaises(tomolive.BadKind):
            P.scan_header(1, (4, 4), "f32", 10, geometry="fan")
        with self.assertRaises(tomolive.MissingKey) as cm:
            P.scan_header(1, (4, 4), "f32", 10, angle_start=0.0)
        self.assertIn("angle_step", str(cm.exception))
        with self.assertRaises(tomolive.OutOfRange):
            P.scan_header(1, (4, 4), "f32", 10, filter="x" * 33)
        with self.assertRaises(tomolive.PayloadOverflow):
            P.scan_header(1, (65536, 65536), "u8", 10)

    def test_scan_header_cone(self):
        """Cone beam (section 8.1.1): the keys go out as given, and what the daemon's
        decoder refuses is refused here with the same code, naming the key."""
        h = P.scan_header(4, (96, 128), "u16", 360, geometry="cone", source_origin=300,
                          source_detector=450.5, pixel_size=0.2)
        self.assertEqual(h, {"v": 1, "type": "scan", "series": 4, "geometry": "cone",
                             "dtype": "u16", "shape": [96, 128], "window": 360,
                             "source_origin": 300.0, "source_detector": 450.5,
                             "pixel_size": 0.2})
        h = P.scan_header(4, (96, 128), "u16", 360, geometry="cone", source_origin=300,
                          source_detector=450, pixel_size=(0.2, np.float32(0.25)),
                          detector_offset=np.array([1.5, -2.0]))
        self.assertEqual(h["pixel_size"], [0.2, 0.25])
        self.assertEqual(h["detector_offset"], [1.5, -2.0])
        self.assertEqual(msgpack.unpackb(P.pack(h), raw=False), h)
        # with a centre the offset may move the principal row only
        h = P.scan_header(4, (96, 128), "u16", 360, geometry="cone", source_origin=300,
                          source_detector=450, pixel_size=0.2, center=60.0,
                          detector_offset=(0, 3))
        self.assertEqual((h["center"], h["detector_offset"]), (60.0, [0.0, 3.0]))
        h = P.scan_header(4, (96, 128), "u16", 360, geometry="cone", source_origin=300,
                          source_detector=450, pixel_size=0.2, short_scan=(-0.25, 3.75))
        self.assertEqual(h["short_scan"], [-0.25, 3.75])
        cone = dict(geometry="cone", source_origin=300, source_detector=450, pixel_size=0.2)
        bad = [
            (dict(source_origin=None), tomolive.MissingKey, "source_origin"),
            (dict(source_detector=None), tomolive.MissingKey, "source_detector"),
            (dict(pixel_size=None), tomolive.MissingKey, "pixel_size"),
            (dict(source_origin=0), tomolive.OutOfRange, "source_origin"),
            (dict(source_detector=-450), tomolive.OutOfRange, "source_detector"),
            (dict(source_origin=float("nan")), tomolive.NotFinite, "source_origin"),
            (dict(source_detector=float("inf")), tomolive.NotFinite, "source_detector"),
            (dict(source_origin="300"), tomolive.KeyTypeError, "source_origin"),
            (dict(pixel_size=0.0), tomolive.OutOfRange, "pixel_size"),
            (dict(pixel_size=(0.2, -0.1)), tomolive.OutOfRange, "pixel_size[1]"),
            (dict(pixel_size=(0.2,)), tomolive.OutOfRange, "pixel_size"),
            (dict(pixel_size="0.2"), tomolive.KeyTypeError, "pixel_size"),
            (dict(detector_offset=(0, float("nan"))), tomolive.NotFinite, "detector_offset[1]"),
            (dict(detector_offset=2.5), tomolive.KeyTypeError, "detector_offset"),
            (dict(detector_offset=(1.5, 0), center=60.0), tomolive.Unsupported, "center"),
            (dict(geometry="parallel"), tomolive.Unsupported, "source_origin"),
            (dict(short_scan=(0, 0)), tomolive.OutOfRange, "short_scan[1]"),
            (dict(short_scan=(0, 7)), tomolive.OutOfRange, "short_scan[1]"),
            (dict(short_scan=(float("nan"), 4)), tomolive.NotFinite, "short_scan[0]"),
        ]
        for change, exc, says in bad:
            args = dict(cone)
            args.update(change)
            with self.assertRaises(exc, msg=str(change)) as cm:
                P.scan_header(1, (4, 4), "f32", 10, **{k: v for k, v in args.items()})
            self.assertIn(says, str(cm.exception), str(change))
        with self.assertRaises(tomolive.Unsupported) as cm:
            P.scan_header(1, (4, 4), "f32", 10, detector_offset=(0, 0))
        self.assertIn("detector_offset", str(cm.exception))

    def test_scan_header_matrices(self):
        """Cone-beam matrices (section 8.1.1): lists or an N x 12 (N x 3 x 4) array go out
        as float64 rows; what the daemon's decoder refuses is refused here, naming it."""
        m = np.arange(24, dtype=np.float64).reshape(2, 12) / 7 + 1
        cone = dict(geometry="cone", source_origin=300, source_detector=450, pixel_size=0.2)
        h = P.scan_header(4, (96, 128), "u16", 2, matrices=m, **cone)
        self.assertEqual(h["matrices"], m.tolist())
        self.assertEqual(P.scan_header(4, (96, 128), "u16", 2, matrices=m.reshape(2, 3, 4),
                                       **cone)["matrices"], m.tolist())
        self.assertEqual(P.scan_header(4, (96, 128), "u16", 2, matrices=m.tolist(),
                                       **cone)["matrices"], m.tolist())
        packed = P.pack(h)
        self.assertIn(b"\xcb", packed)  # float64, not float32
        self.assertEqual(msgpack.unpackb(packed, raw=False)["matrices"], m.tolist())
        # detector_offset v stays (the volume's rows)
        P.scan_header(4, (96, 128), "u16", 2, matrices=m, detector_offset=(0, 2), **cone)
        row = list(range(12))
        bad = [
            (dict(matrices=[row[:11]]), tomolive.OutOfRange, "matrices[0]"),
            (dict(matrices=[row, row + [0]]), tomolive.OutOfRange, "matrices[1]"),
            (dict(matrices=[row[:4] + [float("nan")] + row[5:]]), tomolive.NotFinite,
             "matrices[0][4]"),
            (dict(matrices=[row] * 513), tomolive.OutOfRange, "513 matrices"),
            (dict(matrices=[]), tomolive.OutOfRange, "0 matrices"),
            (dict(matrices=3), tomolive.KeyTypeError, "matrices"),
            (dict(matrices=[3]), tomolive.KeyTypeError, "matrices[0]"),
            (dict(matrices=[row], center=60.0), tomolive.Unsupported, "center"),
            (dict(matrices=[row], detector_offset=(1, 0)), tomolive.Unsupported,
             "detector_offset[0]"),
            (dict(matrices=[row], short_scan=(0, 4)), tomolive.Unsupported, "short_scan"),
            (dict(matrices=[row], geometry="parallel"), tomolive.Unsupported, "'source_origin'"),
        ]
        for change, exc, says in bad:
            args = dict(cone)
            args.update(change)
            with self.assertRaises(exc, msg=str(change)) as cm:
                P.scan_header(1, (4, 4), "f32", 10, **args)
            self.assertIn(says, str(cm.exception), str(change))
        with self.assertRaises(tomolive.Unsupported) as cm:
            P.scan_header(1, (4, 4), "f32", 10, matrices=[row])
        self.assertIn("matrices", str(cm.exception))

    def test_requests(self):
        self.assertEqual(P.req_header(5, "status"), {"v": 1, "type": "req", "id": 5,
                                                     "cmd": "status"})
        self.assertEqual(P.req_header(5, "remove_slice", {"id": "a"})["args"], {"id": "a"})
        with self.assertRaises(tomolive.OutOfRange):
            P.req_header(1, "")
        with self.assertRaises(tomolive.OutOfRange):
            P.req_header(1, "x" * 65)
        with self.assertRaises(tomolive.KeyTypeError):
            P.req_header(1, "set_slice", [("id", "a")])
        with self.assertRaises(tomolive.NotAMap):
            P.req_header(1, "set_slice", {1: "a"})
        with self.assertRaises(tomolive.HeaderTooBig):
            P.pack(P.req_header(1, "set_slice", {"id": "x" * 70000}))

    def test_slice_ids(self):
        self.assertEqual(P.slice_topic("z-mid.0_A"), b"slice/z-mid.0_A/")
        for bad in ("", "a/b", "a b", "x" * 65, "é"):
            with self.assertRaises(tomolive.OutOfRange, msg=bad):
                P.slice_topic(bad)


def slice_header(**change):
    h = {"v": 1, "type": "slice", "id": "z-mid", "seq": 17, "shape": [2, 3], "dtype": "f32",
         "orientation": [3, 0, 0, 0, 2, 0, -1.5, -1, 4], "projections_used": 898,
         "missing": 2, "window": [100, 999], "t_acq": 1761234567890123456,
         "t_pub": 1761234567893123456, "kernel": "cpu-ref"}
    h.update(change)
    return {k: v for k, v in h.items() if v is not None}


class Readers(unittest.TestCase):
    def test_slice(self):
        hb = msgpack.packb(slice_header(**{"x-private": [1, {"a": None}], "final": True}))
        h = P.decode_slice(b"slice/z-mid/", hb, 24)
        self.assertEqual(h["seq"], 17)
        self.assertTrue(h["final"])
        cases = [
            (dict(v=2), tomolive.UnsupportedVersion),
            (dict(v=None), tomolive.MissingKey),
            (dict(v="1"), tomolive.KeyTypeError),
            (dict(type="frame"), tomolive.WrongType),
            (dict(type=None), tomolive.MissingKey),
            (dict(seq=None), tomolive.MissingKey),
            (dict(kernel=None), tomolive.MissingKey),
            (dict(seq=-1), tomolive.OutOfRange),
            (dict(dtype="f64"), tomolive.BadDtype),
            (dict(dtype="q16"), tomolive.MissingKey),  # q16 needs scale and offset
            (dict(dtype="q16", scale=0.0, offset=0.0), tomolive.OutOfRange),
            (dict(compression="zstd"), tomolive.OutOfRange),
            (dict(shape=[2, 3, 1]), tomolive.OutOfRange),
            (dict(orientation=[0] * 8), tomolive.OutOfRange),
            (dict(orientation=[0] * 8 + [float("nan")]), tomolive.NotFinite),
            (dict(window=[5, 4]), tomolive.OutOfRange),
            (dict(final=1), tomolive.KeyTypeError),
            (dict(id="a b"), tomolive.OutOfRange),
        ]
        for change, exc in cases:
            with self.assertRaises(exc, msg=str(change)):
                P.decode_slice(b"slice/z-mid/", msgpack.packb(slice_header(**change)), 24)
        with self.assertRaises(tomolive.PayloadLength):
            P.decode_slice(b"slice/z-mid/", hb, 23)
        with self.assertRaises(tomolive.PartsError):
            P.decode_slice(b"slice/z-mi/", hb, 24)

    def test_box(self):
        """Section 10: a box's header carries planes (dividing the rows) and box_step;
        Slice.volume views its image as planes x h x w."""
        box = dict(shape=[6, 1], planes=3, box_step=0.5)
        h = P.decode_slice(b"slice/z-mid/", msgpack.packb(slice_header(**box)), 24)
        image = P.slice_pixels(h, np.arange(6, dtype=np.float32).tobytes())
        s = tomolive.Slice(h, image, None, 0)
        self.assertEqual(s.planes, 3)
        self.assertEqual(s.volume.shape, (3, 2, 1))
        self.assertEqual(s.volume[2, 1, 0], 5.0)
        self.assertEqual(tomolive.Slice(slice_header(), image.reshape(2, 3), None, 0)
                         .volume.shape, (1, 2, 3))
        cases = [
            (dict(box, planes=4), tomolive.OutOfRange),     # 4 planes of 6 rows
            (dict(box, planes=0), tomolive.OutOfRange),
            (dict(box, box_step=0.0), tomolive.OutOfRange),
            (dict(box, box_step=None), tomolive.MissingKey),
            (dict(box_step=1.0), tomolive.MissingKey),      # no planes
            (dict(box, box_step="1"), tomolive.KeyTypeError),
        ]
        for change, exc in cases:
            with self.assertRaises(exc, msg=str(change)):
                P.decode_slice(b"slice/z-mid/", msgpack.packb(slice_header(**change)), 24)

    def test_slice_in_shared_memory(self):
        """Section 10.1: [topic "shm/<id>/", header] with shm_name and shm_offset, no
        payload part; each defect raises the class of the daemon's error code."""
        shm = dict(shm_name="/tomolive-z-mid-1", shm_offset=4096)
        hb = msgpack.packb(slice_header(**shm))
        h = P.decode_slice(b"shm/z-mid/", hb, None)
        self.assertEqual((h["shm_name"], h["shm_offset"]), ("/tomolive-z-mid-1", 4096))
        self.assertEqual(P.shm_topic("z-mid"), b"shm/z-mid/")
        for edge in (dict(shm_name="/" + "n" * 254), dict(shm_offset=64),
                     dict(shm_offset=(1 << 64) - 64)):
            P.decode_slice(b"shm/z-mid/", msgpack.packb(slice_header(**{**shm, **edge})), None)
        cases = [
            (dict(shm_offset=4096), tomolive.MissingKey),                  # no shm_name
            (dict(shm_name="/a"), tomolive.MissingKey),                    # no shm_offset
            (dict(shm, shm_name="tomolive-z-mid-1"), tomolive.OutOfRange),  # no leading '/'
            (dict(shm, shm_name="/dev/shm/x"), tomolive.OutOfRange),        # a second '/'
            (dict(shm, shm_name=""), tomolive.OutOfRange),
            (dict(shm, shm_name="/"), tomolive.OutOfRange),
            (dict(shm, shm_name="/" + "n" * 255), tomolive.OutOfRange),     # 256 bytes
            (dict(shm, shm_name=b"/x"), tomolive.KeyTypeError),
            (dict(shm, shm_offset=0), tomolive.OutOfRange),
            (dict(shm, shm_offset=4100), tomolive.OutOfRange),
            (dict(shm, shm_offset=-64), tomolive.OutOfRange),
            (dict(shm, shm_offset=4096.0), tomolive.KeyTypeError),
        ]
        for change, exc in cases:
            with self.assertRaises(exc, msg=str(change)):
                P.decode_slice(b"shm/z-mid/", msgpack.packb(slice_header(**change)), None)
        plain = msgpack.packb(slice_header())
        for topic, head, payload_len in [
                (b"shm/z-mid/", hb, 24),        # a payload part after a shm header
                (b"slice/z-mid/", hb, None),    # a shm header under slice/
                (b"slice/z-mid/", hb, 24),
                (b"shm/z-mid/", plain, 24),     # a plain header under shm/
                (b"slice/z-mid/", plain, None),  # a plain header without payload
                (b"shm/z-mi/", hb, None)]:      # another id
            with self.assertRaises(tomolive.PartsError, msg=str((topic, payload_len))):
                P.decode_slice(topic, head, payload_len)

    def test_golden_corpus(self):
        """Every checked-in golden slice header (tests/fuzz/corpus, written by the C
        encoders) decodes here too, the one in shared memory under its own topic."""
        corpus = os.path.join(tlfixture.SRCDIR, "tests", "fuzz", "corpus")
        seen, in_shm = 0, 0
        for name in sorted(os.listdir(corpus)):
            if not name.startswith("slice-"):
                continue
            with open(os.path.join(corpus, name), "rb") as f:
                data = f.read()
            h = P.unpack(data, ("slice",))
            shm = "shm_name" in h
            topic = (P.shm_topic if shm else P.slice_topic)(h["id"])
            size = None if shm else P.frame_bytes(h["shape"], h["dtype"])
            self.assertEqual(P.decode_slice(topic, data, size)["seq"], h["seq"], name)
            seen += 1
            in_shm += shm
        self.assertGreaterEqual(seen, 3)
        self.assertEqual(in_shm, 1)

    def test_syntax(self):
        good = msgpack.packb(slice_header())
        with self.assertRaises(tomolive.MalformedHeader):
            P.unpack(b"")
        with self.assertRaises(tomolive.MalformedHeader):
            P.unpack(good[:-1])                  # truncated
        with self.assertRaises(tomolive.MalformedHeader):
            P.unpack(good + b"\xc0")             # trailing bytes
        with self.assertRaises(tomolive.MalformedHeader):
            P.unpack(b"\xc1")                    # the reserved byte
        with self.assertRaises(tomolive.NotAMap):
            P.unpack(msgpack.packb([1, 2]))
        with self.assertRaises(tomolive.NotAMap):
            P.unpack(msgpack.packb({1: 1, "v": 1}, strict_types=False))
        with self.assertRaises(tomolive.DuplicateKey):
            P.unpack(b"\x83\xa1v\x01\xa4type\xa3rep\xa1v\x01")
        with self.assertRaises(tomolive.HeaderTooBig):
            P.unpack(b"\x00" * (64 * 1024 + 1))
        deep = 1
        for _ in range(8):
            deep = [deep]
        with self.assertRaises(tomolive.LimitExceeded):
            P.unpack(msgpack.packb({"v": 1, "type": "rep", "x": deep}))
        with self.assertRaises(tomolive.KeyTypeError):  # bin is never a str
            P.unpack(msgpack.packb({"v": 1, "type": b"rep"}, use_bin_type=True))

    def test_rep(self):
        ok = P.decode_rep(msgpack.packb({"v": 1, "type": "rep", "id": 3, "ok": True}))
        self.assertIsNone(ok.get("result"))
        err = P.decode_rep(msgpack.packb({"v": 1, "type": "rep", "id": 3, "ok": False,
                                          "error": {"code": 33, "message": "m"}}))
        self.assertEqual(err["error"]["code"], 33)
        for h, exc in (({"id": 1, "ok": False}, tomolive.MissingKey),
                       ({"id": 1, "ok": False, "error": {"code": 1}}, tomolive.MissingKey),
                       ({"id": 1, "ok": False, "error": "x"}, tomolive.KeyTypeError),
                       ({"id": 1, "ok": 1}, tomolive.KeyTypeError),
                       ({"ok": True}, tomolive.MissingKey)):
            with self.assertRaises(exc, msg=str(h)):
                P.decode_rep(msgpack.packb({"v": 1, "type": "rep", **h}))


if __name__ == "__main__":
    unittest.main(verbosity=2)
