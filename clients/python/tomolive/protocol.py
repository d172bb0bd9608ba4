"""Building and checking tomolive protocol v1 messages (protocol/PROTOCOL.md).

This module knows the wire format and nothing about sockets.  Builders (``scan_header``,
``frame_header``, ``end_header``, ``req_header``) check every value as the daemon's
decoder would and raise the exception of the code the daemon would have answered
(errors.py), so a bad message fails here, with a message naming the key, instead of
being dropped and counted by the daemon.  Readers (``decode_rep``, ``decode_slice``)
check what arrives: version, type, required keys, value types, and that a payload's
length equals ``rows x cols x size(dtype)``.  Unknown keys are ignored (section 4).

Headers are msgpack maps packed with ``use_bin_type=True`` (``str`` stays ``str``);
payloads are raw little-endian samples in C order, in a ZeroMQ part of their own.
"""
from __future__ import annotations

import math
import re
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import msgpack
import numpy as np

from .errors import (BadDtype, BadKind, DuplicateKey, ErrorCode, HeaderTooBig,
                     KeyTypeError, LimitExceeded, MalformedHeader, MissingKey, NotAMap,
                     NotFinite, OutOfRange, PartsError, PayloadLength, PayloadOverflow,
                     ProtocolError, Unsupported, UnsupportedVersion, WrongType)

__all__ = [
    "VERSION", "MAX_HEADER", "MAX_DEPTH", "MAX_DIM", "MAX_FRAME_BYTES", "MAX_WINDOW",
    "MAX_MATRICES",
    "MAX_ID", "MAX_CMD", "MAX_FILTER", "DTYPES", "KINDS", "GEOMETRIES", "FILTERS",
    "ErrorCode", "numpy_dtype", "dtype_name", "frame_bytes", "check_shape", "check_array",
    "MAX_SHM_NAME", "SHM_ALIGN",
    "check_slice_id", "slice_topic", "shm_topic", "scan_header", "frame_header", "end_header",
    "req_header", "pack", "unpack", "decode_rep", "decode_slice", "SLICE_DTYPES",
    "slice_pixels",
]

VERSION = 1                  # the major version this module speaks (section 4)
MAX_HEADER = 64 * 1024       # bytes in a header part (section 6)
MAX_DEPTH = 8                # nesting of maps/arrays; the header map is depth 1
MAX_DIM = 65536              # rows, cols, slice h and w
MAX_FRAME_BYTES = 1 << 31    # rows x cols x size(dtype), exclusive
MAX_WINDOW = 1 << 20         # projections in a rolling window
MAX_MATRICES = 512           # cone-beam projection matrices in a scan (section 8.1.1)
MAX_ID = 64                  # bytes in a slice id
MAX_CMD = 64                 # bytes in a command name
MAX_FILTER = 32              # bytes in a filter name
MAX_SHM_NAME = 255           # bytes in a shared-memory object name, "/name" (section 10.1)
SHM_ALIGN = 64               # shm_offset is a positive multiple of this
U64_MAX = (1 << 64) - 1
U32_MAX = (1 << 32) - 1

#: protocol dtype name -> the NumPy dtype of its samples (always little-endian)
DTYPES: Dict[str, np.dtype] = {
    "u8": np.dtype("<u1"), "u16": np.dtype("<u2"), "u32": np.dtype("<u4"),
    "f32": np.dtype("<f4"),
}
#: slices may also come compact (section 10.3): IEEE binary16, and uint16 codes meaning
#: ``offset + scale * code``
SLICE_DTYPES: Dict[str, np.dtype] = {**DTYPES, "f16": np.dtype("<f2"), "q16": np.dtype("<u2")}
KINDS = ("dark", "flat", "proj")
GEOMETRIES = ("parallel", "cone")
FILTERS = ("ram-lak", "shepp-logan", "cosine", "hamming", "hann", "parzen")
MESSAGE_TYPES = ("scan", "frame", "end", "req", "rep", "slice")

_ID_RE = re.compile(r"[A-Za-z0-9_.-]{1,%d}\Z" % MAX_ID)


# ---- values (section 5) -------------------------------------------------------------------

def _is_int(v: Any) -> bool:
    # bool is an int in Python, never in msgpack
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _u64(key: str, v: Any, top: int = U64_MAX) -> int:
    if not _is_int(v):
        raise KeyTypeError("%r: expected an unsigned integer, got %s" % (key, type(v).__name__))
    v = int(v)
    if v < 0 or v > top:
        raise OutOfRange("%r: %d is outside 0..%d" % (key, v, top))
    return v


def _u32(key: str, v: Any) -> int:
    return _u64(key, v, U32_MAX)


def _f64(key: str, v: Any) -> float:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer,
                                                                 np.floating)):
        raise KeyTypeError("%r: expected a number, got %s" % (key, type(v).__name__))
    v = float(v)
    if not math.isfinite(v):
        raise NotFinite("%r: %r is not finite" % (key, v))
    return v


def _bool(key: str, v: Any) -> bool:
    if not isinstance(v, (bool, np.bool_)):
        raise KeyTypeError("%r: expected true or false, got %s" % (key, type(v).__name__))
    return bool(v)


def _str(key: str, v: Any, lo: int = 0, hi: Optional[int] = None) -> str:
    if not isinstance(v, str):
        raise KeyTypeError("%r: expected a string, got %s" % (key, type(v).__name__))
    n = len(v.encode("utf-8"))
    if n < lo or (hi is not None and n > hi):
        raise OutOfRange("%r: %d bytes, expected %d..%d" % (key, n, lo, hi))
    return v


def _enum(key: str, v: Any, names: Sequence[str], exc: type = BadKind) -> str:
    _str(key, v)
    if v not in names:
        raise exc("%r: %r is not one of %s" % (key, v, ", ".join(names)))
    return v


# ---- dtypes, shapes, payloads -------------------------------------------------------------

def numpy_dtype(name: Any) -> np.dtype:
    """The NumPy dtype of a protocol dtype name (``"u16"`` -> ``<u2``); BadDtype otherwise."""
    _str("dtype", name)
    try:
        return DTYPES[name]
    except KeyError:
        raise BadDtype("'dtype': %r is not one of %s" % (name, ", ".join(DTYPES))) from None


def dtype_name(dtype: Any) -> str:
    """The protocol name of a NumPy dtype (or of a protocol name); BadDtype otherwise.

    Only uint8, uint16, uint32 and float32 in little-endian (or native little-endian)
    byte order exist on the wire: a float64 or a big-endian array is refused, never
    converted behind the caller's back.
    """
    if isinstance(dtype, str) and dtype in DTYPES:
        return dtype
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise BadDtype("'dtype': %r is not a dtype" % (dtype,)) from None
    for name, want in DTYPES.items():
        if dt == want:  # '=' native order compares equal to '<' on little-endian hosts
            return name
    raise BadDtype("'dtype': %s is not one of uint8, uint16, uint32, float32 (little-endian)"
                   % dt.str)


def frame_bytes(shape: Sequence[int], dtype: Any) -> int:
    """rows x cols x size(dtype) of a valid shape; PayloadOverflow at 2 GiB or more."""
    rows, cols = check_shape(shape)
    n = rows * cols * numpy_dtype(dtype_name(dtype)).itemsize
    if n >= MAX_FRAME_BYTES:
        raise PayloadOverflow("'shape': %d x %d x %s is %d bytes, at least 2 GiB"
                              % (rows, cols, dtype_name(dtype), n))
    return n


def check_shape(shape: Any, key: str = "shape") -> Tuple[int, int]:
    """A ``[rows, cols]`` pair of 1..65536 each, as ``(rows, cols)``."""
    if not isinstance(shape, (list, tuple)):
        raise KeyTypeError("%r: expected [rows, cols], got %s" % (key, type(shape).__name__))
    if len(shape) != 2:
        raise OutOfRange("%r: %d elements, expected 2 ([rows, cols])" % (key, len(shape)))
    out = []
    for i, d in enumerate(shape):
        d = _u32("%s[%d]" % (key, i), d)
        if d < 1 or d > MAX_DIM:
            raise OutOfRange("'%s[%d]': %d is outside 1..%d" % (key, i, d, MAX_DIM))
        out.append(d)
    return out[0], out[1]


def check_array(array: Any) -> Tuple[str, Tuple[int, int]]:
    """What a frame payload must be: a 2-D C-contiguous array of a wire dtype.

    Returns ``(dtype name, (rows, cols))``.  Raises BadDtype, OutOfRange (not 2-D, a side
    of 0 or over 65536), PayloadOverflow, or PayloadLength (not C-contiguous: the
    protocol has no strides, and a silent copy would hide the cost).
    """
    if not isinstance(array, np.ndarray):
        raise KeyTypeError("the payload must be a numpy.ndarray, got %s" % type(array).__name__)
    name = dtype_name(array.dtype)
    if array.ndim != 2:
        raise OutOfRange("'shape': the array has %d dimensions, expected 2 ([rows, cols])"
                         % array.ndim)
    shape = check_shape(list(array.shape))
    frame_bytes(shape, name)
    if not array.flags.c_contiguous:
        raise PayloadLength("the payload must be C-contiguous (row-major, no strides); "
                            "use numpy.ascontiguousarray()")
    return name, shape


def check_slice_id(sid: Any) -> str:
    """A slice id: 1..64 bytes of ``[A-Za-z0-9_.-]``."""
    _str("id", sid)
    if not _ID_RE.match(sid):
        raise OutOfRange("'id': %r is not 1..%d bytes of [A-Za-z0-9_.-]" % (sid, MAX_ID))
    return sid


def slice_topic(sid: str) -> bytes:
    """The topic of a slice, ``b"slice/<id>/"`` (the trailing ``/`` ends the id)."""
    return b"slice/" + check_slice_id(sid).encode("ascii") + b"/"


def shm_topic(sid: str) -> bytes:
    """The topic of a slice delivered through shared memory, ``b"shm/<id>/"``
    (section 10.1: the message is the header alone; the pixels are in the daemon's
    shared memory, for subscribers on its host)."""
    return b"shm/" + check_slice_id(sid).encode("ascii") + b"/"


def _check_shm(h: Dict[str, Any]) -> bool:
    """The shared-memory keys of a slice header: both or neither, a name ``"/name"`` (one
    leading ``/``, 2..255 bytes, no NUL) and an offset that is a positive multiple of 64.
    Returns whether the slice is in shared memory."""
    if "shm_name" not in h:
        if "shm_offset" in h:
            raise MissingKey("'shm_offset' without 'shm_name'")
        return False
    name = _str("shm_name", h["shm_name"])
    off = _u64("shm_offset", _need(h, "shm_offset"))
    n = len(name.encode("utf-8"))
    if not (2 <= n <= MAX_SHM_NAME and name[0] == "/" and "/" not in name[1:]
            and "\0" not in name):
        raise OutOfRange("'shm_name': %r is not \"/name\" (2..%d bytes, one leading '/')"
                         % (name[:70], MAX_SHM_NAME))
    if off < SHM_ALIGN or off % SHM_ALIGN:
        raise OutOfRange("'shm_offset': %d is not a positive multiple of %d" % (off, SHM_ALIGN))
    return True


# ---- builders -----------------------------------------------------------------------------

def _positive(key: str, v: Any) -> float:
    v = _f64(key, v)
    if not v > 0:
        raise OutOfRange("%r: %r mm, must be > 0" % (key, v))
    return v


def _pair(key: str, v: Any) -> Tuple[Any, Any]:
    if not isinstance(v, (list, tuple, np.ndarray)):
        raise KeyTypeError("%r: expected an array of 2 numbers, got %s" % (key, type(v).__name__))
    if len(v) != 2:
        raise OutOfRange("%r: expected an array of 2 numbers, got %d elements" % (key, len(v)))
    return v[0], v[1]


_CONE_KEYS = ("source_origin", "source_detector", "pixel_size", "detector_offset", "short_scan",
              "matrices")


def _matrices(v: Any) -> list:
    """'matrices' (section 8.1.1): 1..MAX_MATRICES rows of 12 finite numbers (a 3x4
    matrix row-major), from a list of 12-sequences or an N x 12 (or N x 3 x 4) array,
    as float64 lists (msgpack packs Python floats as float64)."""
    if isinstance(v, np.ndarray):
        if v.ndim == 3 and v.shape[1:] == (3, 4):
            v = v.reshape(len(v), 12)
        if v.ndim != 2:
            raise KeyTypeError("'matrices': expected an N x 12 array, got shape %s"
                               % (v.shape,))
    elif not isinstance(v, (list, tuple)):
        raise KeyTypeError("'matrices': expected an array of arrays of 12 numbers, got %s"
                           % type(v).__name__)
    if not 1 <= len(v) <= MAX_MATRICES:
        raise OutOfRange("'matrices': %d matrices, expected 1..%d (what fits a %d-byte "
                         "header)" % (len(v), MAX_MATRICES, MAX_HEADER))
    out = []
    for i, row in enumerate(v):
        key = "matrices[%d]" % i
        if not isinstance(row, (list, tuple, np.ndarray)):
            raise KeyTypeError("%r: expected an array of 12 numbers, got %s"
                               % (key, type(row).__name__))
        if len(row) != 12:
            raise OutOfRange("%r: expected an array of 12 numbers, got %d elements"
                             % (key, len(row)))
        out.append([_f64("%s[%d]" % (key, k), x) for k, x in enumerate(row)])
    return out


def _cone(h: Dict[str, Any], cone: Dict[str, Any]) -> None:
    """The cone-beam keys (section 8.1.1) into h: required with geometry cone, refused
    (E_UNSUPPORTED) with parallel, as the daemon's decoder does."""
    given = [k for k in _CONE_KEYS if cone[k] is not None]
    if h["geometry"] != "cone":
        if given:
            raise Unsupported("%r: a cone-beam key, but 'geometry' is %r"
                              % (given[0], h["geometry"]))
        return
    for k in _CONE_KEYS[:3]:
        if cone[k] is None:
            raise MissingKey("missing required key %r: geometry 'cone' needs source_origin, "
                             "source_detector and pixel_size" % k)
    h["source_origin"] = _positive("source_origin", cone["source_origin"])
    h["source_detector"] = _positive("source_detector", cone["source_detector"])
    px = cone["pixel_size"]
    if isinstance(px, (int, float, np.integer, np.floating)) and not isinstance(px, bool):
        h["pixel_size"] = _positive("pixel_size", px)
    else:
        u, v = _pair("pixel_size", px)
        h["pixel_size"] = [_positive("pixel_size[0]", u), _positive("pixel_size[1]", v)]
    off = cone["detector_offset"]
    if off is not None:
        u, v = _pair("detector_offset", off)
        h["detector_offset"] = [_f64("detector_offset[0]", u), _f64("detector_offset[1]", v)]
        if "center" in h and h["detector_offset"][0] != 0:
            raise Unsupported("'detector_offset[0]': %r pixels and 'center' %r both place the "
                              "principal column: give one of them"
                              % (h["detector_offset"][0], h["center"]))
    short = cone["short_scan"]
    if short is not None:
        start, length = _pair("short_scan", short)
        h["short_scan"] = [_f64("short_scan[0]", start), _f64("short_scan[1]", length)]
        if not 0 < h["short_scan"][1] < 2 * math.pi:
            raise OutOfRange("'short_scan[1]': a range of %r rad, must be in (0, 2 pi)"
                             % h["short_scan"][1])
    if cone["matrices"] is not None:
        # the matrices place the detector and the trajectory: nothing else may
        other = ("center" if "center" in h else
                 "detector_offset[0]" if h.get("detector_offset", [0])[0] != 0 else
                 "short_scan" if "short_scan" in h else None)
        if other:
            raise Unsupported("%r with 'matrices': the matrices place the detector and the "
                              "trajectory (give the principal point in them)" % other)
        h["matrices"] = _matrices(cone["matrices"])


def scan_header(series: int, shape: Sequence[int], dtype: Any, window: int, *,
                geometry: str = "parallel", darks: int = 0, flats: int = 0,
                first_index: int = 0, center: Optional[float] = None,
                angle_start: Optional[float] = None, angle_step: Optional[float] = None,
                filter: Optional[str] = None, already_linear: bool = False,
                source_origin: Optional[float] = None, source_detector: Optional[float] = None,
                pixel_size: Any = None, detector_offset: Optional[Sequence[float]] = None,
                short_scan: Optional[Sequence[float]] = None,
                matrices: Any = None) -> Dict[str, Any]:
    """The header of a ``scan`` message (section 8.1), checked.  Cone beam (section
    8.1.1): ``geometry="cone"`` with ``source_origin`` and ``source_detector`` (mm),
    ``pixel_size`` (mm: a number, or ``(u, v)``) and optionally ``detector_offset``
    (``(u, v)`` pixels: the principal point minus the detector's middle; a non-zero u
    and ``center`` are refused together), and ``short_scan`` (``(start, range)`` radians:
    a scan of less than a turn, weighed with Parker's weights), or ``matrices``: one 3x4
    projection matrix per projection (a list of 12-number rows, row-major, or an N x 12
    NumPy array; at most 512), an arbitrary trajectory, with which ``center``, a non-zero
    ``detector_offset`` u and ``short_scan`` are refused."""
    h: Dict[str, Any] = {"v": VERSION, "type": "scan", "series": _u64("series", series),
                         "geometry": _enum("geometry", geometry, GEOMETRIES),
                         "dtype": dtype_name(dtype)}
    rows, cols = check_shape(shape)
    frame_bytes((rows, cols), h["dtype"])
    h["shape"] = [rows, cols]
    window = _u32("window", window)
    if not 1 <= window <= MAX_WINDOW:
        raise OutOfRange("'window': %d is outside 1..%d" % (window, MAX_WINDOW))
    h["window"] = window
    if darks:
        h["darks"] = _u32("darks", darks)
    if flats:
        h["flats"] = _u32("flats", flats)
    if first_index:
        h["first_index"] = _u64("first_index", first_index)
    if center is not None:
        h["center"] = _f64("center", center)
    if (angle_start is None) != (angle_step is None):
        missing = "angle_step" if angle_step is None else "angle_start"
        raise MissingKey("missing required key %r (angle_start and angle_step come together)"
                         % missing)
    if angle_start is not None:
        h["angle_start"] = _f64("angle_start", angle_start)
        h["angle_step"] = _f64("angle_step", angle_step)
    if filter is not None:
        h["filter"] = _str("filter", filter, 1, MAX_FILTER)
    if already_linear:
        h["already_linear"] = _bool("already_linear", already_linear)
    _cone(h, {"source_origin": source_origin, "source_detector": source_detector,
              "pixel_size": pixel_size, "detector_offset": detector_offset,
              "short_scan": short_scan, "matrices": matrices})
    return h


def frame_header(series: int, index: int, kind: str, dtype: Any, shape: Sequence[int],
                 angle: Optional[float] = None, t_acq: Optional[int] = None,
                 center_offset: Optional[float] = None) -> Dict[str, Any]:
    """The header of a ``frame`` message (section 8.2), checked.  Absent optional keys
    (None) are left out: the protocol has no nil for "absent"."""
    h: Dict[str, Any] = {"v": VERSION, "type": "frame", "series": _u64("series", series),
                         "index": _u64("index", index), "kind": _enum("kind", kind, KINDS),
                         "dtype": dtype_name(dtype)}
    h["shape"] = list(check_shape(shape))
    frame_bytes(h["shape"], h["dtype"])
    if angle is not None:
        h["angle"] = _f64("angle", angle)
    if t_acq is not None:
        h["t_acq"] = _u64("t_acq", t_acq)
    if center_offset is not None:
        h["center_offset"] = _f64("center_offset", center_offset)
    return h


def end_header(series: int) -> Dict[str, Any]:
    """The header of an ``end`` message (section 8.3)."""
    return {"v": VERSION, "type": "end", "series": _u64("series", series)}


def req_header(rid: int, cmd: str, args: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The header of a control request (section 9.1).  ``args`` None: no arguments."""
    h: Dict[str, Any] = {"v": VERSION, "type": "req", "id": _u64("id", rid),
                         "cmd": _str("cmd", cmd, 1, MAX_CMD)}
    if args is not None:
        if not isinstance(args, Mapping):
            raise KeyTypeError("'args': expected a map, got %s" % type(args).__name__)
        for k in args:
            if not isinstance(k, str):
                raise NotAMap("'args': key %r is not a string" % (k,))
        h["args"] = dict(args)
    return h


def _plain(v: Any) -> Any:
    """NumPy scalars and arrays as the Python values msgpack can pack."""
    if isinstance(v, np.ndarray):
        return [_plain(x) for x in v.tolist()]
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, Mapping):
        return {k: _plain(x) for k, x in v.items()}
    return v


def pack(header: Mapping[str, Any]) -> bytes:
    """A header as msgpack bytes; HeaderTooBig over 64 KiB."""
    data = msgpack.packb(_plain(header), use_bin_type=True)
    if len(data) > MAX_HEADER:
        raise HeaderTooBig("the header is %d bytes, over %d" % (len(data), MAX_HEADER))
    return data


# ---- readers ------------------------------------------------------------------------------

def _pairs(pairs):
    """object_pairs_hook: str keys only, no key twice (E_NOT_MAP, E_DUP_KEY)."""
    d: Dict[str, Any] = {}
    for k, v in pairs:
        if not isinstance(k, str):
            raise NotAMap("a map key is %s, not a string" % type(k).__name__)
        if k in d:
            raise DuplicateKey("key %r appears twice" % k)
        d[k] = v
    return d


def _depth(v: Any, level: int = 1) -> None:
    if level > MAX_DEPTH:
        raise LimitExceeded("nesting deeper than %d" % MAX_DEPTH)
    if isinstance(v, dict):
        for x in v.values():
            if isinstance(x, (dict, list)):
                _depth(x, level + 1)
    elif isinstance(v, list):
        for x in v:
            if isinstance(x, (dict, list)):
                _depth(x, level + 1)


def unpack(data: Any, accept: Sequence[str] = MESSAGE_TYPES) -> Dict[str, Any]:
    """Decodes and checks a header part in the order of section 7, steps 2-6: size,
    syntax, a map with unique str keys, ``v``, ``type`` (one of ``accept``)."""
    data = bytes(data)
    if len(data) > MAX_HEADER:
        raise HeaderTooBig("the header is %d bytes, over %d" % (len(data), MAX_HEADER))
    if not data:
        raise MalformedHeader("empty header")
    try:
        h = msgpack.unpackb(data, raw=False, strict_map_key=False, object_pairs_hook=_pairs)
    except ProtocolError:
        raise
    except Exception as e:  # msgpack's ExtraData, FormatError, ValueError, ...
        raise MalformedHeader("not one msgpack object: %s" % e) from None
    if not isinstance(h, dict):
        raise NotAMap("the header is a %s, not a map" % type(h).__name__)
    _depth(h)
    if "v" not in h:
        raise MissingKey("missing required key 'v'")
    if _u64("v", h["v"]) != VERSION:
        raise UnsupportedVersion("'v': %d is not a version this reader speaks (%d)"
                                 % (h["v"], VERSION))
    if "type" not in h:
        raise MissingKey("missing required key 'type'")
    t = _str("type", h["type"])
    if t not in accept:
        raise WrongType("'type': %r is not accepted here (%s)" % (t, ", ".join(accept)))
    return h


def _need(h: Mapping[str, Any], key: str) -> Any:
    if key not in h:
        raise MissingKey("missing required key %r" % key)
    return h[key]


def decode_rep(data: Any) -> Dict[str, Any]:
    """A control reply (section 9.2), checked.  Returns the header; on failure its
    ``error`` map has an int ``code`` and a str ``message``."""
    h = unpack(data, ("rep",))
    _u64("id", _need(h, "id"))
    if _bool("ok", _need(h, "ok")):
        return h
    e = _need(h, "error")
    if not isinstance(e, dict):
        raise KeyTypeError("'error': expected a map, got %s" % type(e).__name__)
    code = _u32("error.code", _need(e, "code"))
    if code > 0x7FFFFFFF:
        raise OutOfRange("'error.code': %d exceeds %d" % (code, 0x7FFFFFFF))
    _str("error.message", _need(e, "message"))
    return h


def decode_slice(topic: Any, data: Any, payload_len: Optional[int]) -> Dict[str, Any]:
    """A slice message (section 10): topic, header and the payload's length (None when
    the message has no payload part), checked in the order of section 7.  A slice in
    shared memory (section 10.1: ``shm_name``, ``shm_offset``) comes under ``shm/<id>/``
    without a payload; any other under ``slice/<id>/`` with one.  Returns the header."""
    h = unpack(data, ("slice",))
    check_slice_id(_need(h, "id"))
    _u64("seq", _need(h, "seq"))
    name = _str("dtype", _need(h, "dtype"))
    if name not in SLICE_DTYPES:
        raise BadDtype("'dtype': %r is not one of %s" % (name, ", ".join(SLICE_DTYPES)))
    shape = check_shape(_need(h, "shape"))
    size = shape[0] * shape[1] * SLICE_DTYPES[name].itemsize
    if size >= MAX_FRAME_BYTES:
        raise PayloadOverflow("shape [%d, %d] of %s is 2 GiB or more" % (shape[0], shape[1], name))
    if name == "q16":
        scale = _f64("scale", _need(h, "scale"))
        _f64("offset", _need(h, "offset"))
        if not scale > 0:
            raise OutOfRange("'scale': %g must be > 0" % scale)
    lz4 = "compression" in h
    if lz4 and _str("compression", h["compression"]) != "lz4":
        raise OutOfRange("'compression': unknown %r (expected lz4)" % h["compression"])
    o = _need(h, "orientation")
    if not isinstance(o, list):
        raise KeyTypeError("'orientation': expected an array of 9 numbers")
    if len(o) != 9:
        raise OutOfRange("'orientation': %d elements, expected 9" % len(o))
    for i, x in enumerate(o):
        _f64("orientation[%d]" % i, x)
    _u32("projections_used", _need(h, "projections_used"))
    _u32("missing", _need(h, "missing"))
    w = _need(h, "window")
    if not isinstance(w, list):
        raise KeyTypeError("'window': expected [first, last]")
    if len(w) != 2:
        raise OutOfRange("'window': %d elements, expected 2" % len(w))
    if _u64("window[0]", w[0]) > _u64("window[1]", w[1]):
        raise OutOfRange("'window': first %d is after last %d" % (w[0], w[1]))
    _u64("t_acq", _need(h, "t_acq"))
    _u64("t_pub", _need(h, "t_pub"))
    for k in ("t_recv", "t_done"):
        if k in h:
            _u64(k, h[k])
    _str("kernel", _need(h, "kernel"))
    if "final" in h:
        _bool("final", h["final"])
    if "planes" in h or "box_step" in h:  # a box: both keys, the planes dividing the rows
        planes = _u32("planes", _need(h, "planes"))
        if _f64("box_step", _need(h, "box_step")) <= 0:
            raise OutOfRange("'box_step': %r must be > 0" % h["box_step"])
        if planes < 1 or shape[0] % planes:
            raise OutOfRange("'planes': %d planes do not divide the image's %d rows"
                             % (planes, shape[0]))
    shm = _check_shm(h)
    if shm != (payload_len is None):
        raise PartsError("a slice %s has %d parts, got %d" % (
            "in shared memory (topic, header)" if shm else "(topic, header, payload)",
            2 if shm else 3, 2 if payload_len is None else 3))
    want = shm_topic(h["id"]) if shm else slice_topic(h["id"])
    if bytes(topic) != want:
        raise PartsError("topic %r does not match the id %r (expected %r)"
                         % (bytes(topic)[:80], h["id"], want))
    if shm:
        return h
    if lz4:  # one LZ4 block: at most LZ4_compressBound(size) bytes
        if not 0 < payload_len <= size + size // 255 + 16:
            raise PayloadLength("LZ4 payload of %d bytes; %d x %d %s compresses to 1..%d"
                                % (payload_len, shape[0], shape[1], name,
                                   size + size // 255 + 16))
        return h
    if payload_len != size:
        raise PayloadLength("payload of %d bytes; %d x %d %s needs %d"
                            % (payload_len, shape[0], shape[1], name, size))
    return h


def slice_pixels(h: Mapping[str, Any], payload: Any) -> np.ndarray:
    """The pixels of a slice decoded by :func:`decode_slice`, from its payload (bytes or a
    buffer): a read-only zero-copy view when they came as they are (f32 and the integer
    dtypes, uncompressed), else float32 decoded from the compact encodings of section
    10.3 (LZ4 needs the ``lz4`` package: Debian python3-lz4)."""
    name, shape = h["dtype"], tuple(h["shape"])
    dt = SLICE_DTYPES[name]
    raw: Any = payload
    if h.get("compression") == "lz4":
        import lz4.block  # only for compressed slices
        n = shape[0] * shape[1] * dt.itemsize
        try:
            raw = lz4.block.decompress(bytes(payload), uncompressed_size=n)
        except Exception as e:  # lz4 raises LZ4BlockError, a plain Exception subclass
            raise PayloadLength("LZ4 payload does not decompress to %d bytes: %s" % (n, e))
        if len(raw) != n:
            raise PayloadLength("LZ4 payload decompresses to %d bytes, not %d" % (len(raw), n))
    image = np.frombuffer(raw, dtype=dt).reshape(shape)
    if name == "f16":
        image = image.astype(np.float32)
    elif name == "q16":
        image = (h["offset"] + h["scale"] * image.astype(np.float64)).astype(np.float32)
    image.flags.writeable = False
    return image
