"""Subscriber: receive the slices tomolived publishes, as NumPy arrays.

A ZeroMQ SUB socket subscribed to ``slice/<id>/`` for each wanted id (or to ``slice/``
for all).  Each message is checked (protocol.decode_slice) and returned as a
:class:`Slice`, whose ``image`` is made with ``np.frombuffer`` on the received
``zmq.Frame`` itself: no copy of the pixels is made, the array is read-only and keeps
the frame alive.  Call ``image.copy()`` for a writable array of your own.

Gaps in a slice's ``seq`` (slices the daemon published but this subscriber did not get:
the publisher drops beyond its high-water mark when a subscriber is slow) are counted
per id in ``missed``.  Malformed messages are counted in ``rejected`` and skipped, or
raised with ``strict=True``.

With ``shm=True`` (a subscriber on the daemon's host, the daemon configured with
``slices.shm``) the topics are ``shm/<id>/`` and the pixels are copied out of the
daemon's shared memory (shm.py): ``image`` is then that copy (read-only all the same)
and ``frame`` is None.  A slice whose slot the daemon reused before the copy was done is
skipped and counted in ``missed`` and in ``stale``; one whose shared memory cannot be
read at all is counted in ``missed`` and ``unreadable`` (a warning the first time; raised
with ``strict=True``).

    with Subscriber("tcp://localhost:5602", ["row0"]) as sub:
        for s in sub.slices(timeout=10, until_final=True):
            print(s.id, s.seq, s.image.shape, s.latency)
"""
from __future__ import annotations

import time
import warnings
from typing import Any, Dict, Iterable, Iterator, Optional, Tuple

import numpy as np
import zmq

from . import protocol
from .errors import PartsError, ProtocolError
from .keys import apply_curve
from .shm import ShmError, ShmReader

__all__ = ["Slice", "Subscriber"]


class Slice:
    """One received slice: ``header`` (the decoded header dict), ``image`` (a read-only
    ``h x w`` NumPy array viewing ``frame``'s memory; for a slice from shared memory a
    copy of its pixels, and ``frame`` None) and ``received_ns`` (local CLOCK_REALTIME at
    receipt, after the copy).  Header fields are also attributes."""

    __slots__ = ("header", "image", "frame", "received_ns")

    def __init__(self, header: Dict[str, Any], image: np.ndarray, frame: Any,
                 received_ns: int):
        self.header = header
        self.image = image
        self.frame = frame
        self.received_ns = received_ns

    id = property(lambda self: self.header["id"], doc="the slice id")
    seq = property(lambda self: self.header["seq"], doc="publication counter of this slice")
    shape = property(lambda self: tuple(self.header["shape"]), doc="(h, w)")
    projections_used = property(lambda self: self.header["projections_used"])
    missing = property(lambda self: self.header["missing"])
    window = property(lambda self: tuple(self.header["window"]), doc="(first, last) index")
    kernel = property(lambda self: self.header["kernel"])
    t_acq = property(lambda self: self.header["t_acq"])
    t_pub = property(lambda self: self.header["t_pub"])
    final = property(lambda self: bool(self.header.get("final", False)),
                     doc="the last slice of a scan, published when its end arrived (an "
                         "iterative slice: once it converged after the end)")
    iterations = property(lambda self: int(self.header.get("iterations", 0)),
                          doc="an iterative slice's iterations since its start (its method "
                              "is ``kernel``); 0 for FBP")
    residual = property(lambda self: self.header.get("residual"),
                        doc="an iterative slice's ||b - Ax|| / ||b|| after its last "
                            "iteration; None for FBP")
    planes = property(lambda self: int(self.header.get("planes", 1)),
                      doc="a box's planes (set_slice kind \"box\"), 1 for a slice")

    @property
    def volume(self) -> np.ndarray:
        """The image as ``planes x h x w`` (a view): a box's planes, plane 0 the lowest z,
        plane k ``k * box_step`` volume units above it; ``1 x h x w`` for a slice."""
        n = self.planes
        return self.image.reshape(n, self.image.shape[0] // n, self.image.shape[1])

    @property
    def orientation(self) -> np.ndarray:
        """The plane as 9 floats: x-axis vector, y-axis vector, base point."""
        return np.asarray(self.header["orientation"], dtype=np.float64)

    @property
    def latency(self) -> float:
        """End-to-end latency in seconds: publication minus acquisition time."""
        return (self.header["t_pub"] - self.header["t_acq"]) * 1e-9

    @property
    def age(self) -> float:
        """Seconds from the acquisition of the newest frame used to our receipt."""
        return (self.received_ns - self.header["t_acq"]) * 1e-9

    def coordinates(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Volume coordinates ``(x, y, z)`` of every pixel, each an ``h x w`` array.

        PROTOCOL.md section 10: pixel ``(i, j)`` lies at ``base + s*xaxis + t*yaxis``
        with ``s = (j + 0.5) / w`` and ``t = 1 - (i + 0.5) / h``; ``x``, ``y`` in detector
        pixels from the rotation axis, ``z`` the detector row.
        """
        h, w = self.shape
        o = self.orientation
        s = (np.arange(w) + 0.5) / w
        t = 1.0 - (np.arange(h) + 0.5) / h
        S, T = np.meshgrid(s, t)
        return tuple(o[6 + k] + S * o[k] + T * o[3 + k] for k in range(3))  # type: ignore

    def __repr__(self) -> str:
        return "<Slice %s seq=%d %dx%d projections=%d missing=%d%s%s>" % (
            self.id, self.seq, self.shape[0], self.shape[1], self.projections_used,
            self.missing, " %s iterations=%d" % (self.kernel, self.iterations)
            if self.iterations else "", " final" if self.final else "")


class Subscriber:
    """A SUB socket connected to the daemon's slice endpoint.

    ``ids``: slice ids to subscribe to now (more with ``subscribe()``); ``all=True``
    subscribes to every slice.  ``rcvhwm`` bounds the slices queued here (ZeroMQ's
    default 1000 when None).  ``strict=True`` raises on a malformed message instead of
    counting it in ``rejected``.  ``shm=True`` takes the slices through the daemon's
    shared memory (topics ``shm/<id>/``) instead of in the messages.  ``key``,
    ``server_key``: CURVE certificates for a daemon with ``[security] curve`` (keys.py).
    """

    def __init__(self, endpoint: str = "tcp://localhost:5602", ids: Iterable[str] = (), *,
                 all: bool = False, rcvhwm: Optional[int] = None, strict: bool = False,
                 shm: bool = False, context: Optional[zmq.Context] = None,
                 key: Optional[str] = None, server_key: Optional[str] = None):
        self._ctx = context or zmq.Context.instance()
        self._sock = self._ctx.socket(zmq.SUB)
        self._sock.setsockopt(zmq.LINGER, 0)
        if rcvhwm is not None:
            self._sock.setsockopt(zmq.RCVHWM, rcvhwm)
        try:
            apply_curve(self._sock, key, server_key)  # keys.py; with the environment's
        except Exception:
            self._sock.close()
            raise
        self._sock.connect(endpoint)
        self.endpoint = endpoint
        self.strict = strict
        self.received: Dict[str, int] = {}
        self.missed: Dict[str, int] = {}
        self.last_seq: Dict[str, int] = {}
        self.rejected = 0
        self.last_error: Optional[Exception] = None
        self.shm = shm
        self.stale: Dict[str, int] = {}
        self.unreadable = 0
        self._shm = ShmReader()
        self._topic = protocol.shm_topic if shm else protocol.slice_topic
        if all:
            self._sock.setsockopt(zmq.SUBSCRIBE, b"shm/" if shm else b"slice/")
        if isinstance(ids, str):
            ids = [ids]
        for sid in ids:
            self.subscribe(sid)

    def subscribe(self, sid: str) -> None:
        """Starts receiving slice ``sid`` (the exact topic ``slice/<sid>/``, or
        ``shm/<sid>/`` with ``shm=True``)."""
        self._sock.setsockopt(zmq.SUBSCRIBE, self._topic(sid))

    def unsubscribe(self, sid: str) -> None:
        """Stops receiving slice ``sid``."""
        self._sock.setsockopt(zmq.UNSUBSCRIBE, self._topic(sid))

    def _decode(self, parts: list) -> Tuple[Dict[str, Any], Optional[Slice]]:
        """The header and the slice of a message; the slice is None when it is in shared
        memory and its slot was reused (stale).  ProtocolError or ShmError otherwise."""
        if len(parts) == 2:  # [topic, header]: valid only for a slice in shared memory
            h = protocol.decode_slice(parts[0].bytes, parts[1].bytes, None)
            try:
                pixels = self._shm.read(h)
            except ShmError as e:
                e.header = h  # type: ignore[attr-defined]  (for the count)
                raise
            if pixels is None:
                return h, None
            pixels.flags.writeable = False  # as over TCP: one way to use it
            return h, Slice(h, pixels, None, time.time_ns())
        if len(parts) != 3:
            raise PartsError("a slice message has 3 parts (2 in shared memory), got %d"
                             % len(parts))
        topic, head, payload = parts
        h = protocol.decode_slice(topic.bytes, head.bytes, len(payload))
        # f32: zero-copy, a read-only view of the frame's memory (the view keeps it alive;
        # over inproc:// it may be shared with the publisher); compact: decoded (§10.3)
        image = protocol.slice_pixels(h, payload.buffer)
        return h, Slice(h, image, payload, time.time_ns())

    def _note(self, h: Dict[str, Any], lost: bool) -> None:
        """Counts slice ``h``: a gap in seq since the last one is missed, and so is ``h``
        itself when its pixels were lost (so the gap after it is not counted again)."""
        sid, seq = h["id"], h["seq"]
        gap = seq - self.last_seq[sid] - 1 if sid in self.last_seq else 0
        gap = max(gap, 0) + lost
        if gap:
            self.missed[sid] = self.missed.get(sid, 0) + gap
        self.last_seq[sid] = seq
        if not lost:
            self.received[sid] = self.received.get(sid, 0) + 1

    def _unreadable(self, h: Dict[str, Any], e: ShmError) -> None:
        """Shared memory that cannot be read: said once (it would repeat for every slice),
        counted, raised with strict."""
        self.unreadable += 1
        self.last_error = e
        self._note(h, True)
        if self.strict:
            raise e
        if self.unreadable == 1:
            warnings.warn("tomolive.Subscriber: %s; further ones are only counted" % e,
                          RuntimeWarning, stacklevel=4)

    def _next(self, deadline: Optional[float], timeout: Optional[float]
              ) -> Tuple[Dict[str, Any], Optional[Slice]]:
        """The next well-formed slice message before ``deadline`` (monotonic; None: wait):
        its header, and the slice or None when its pixels were lost (stale, or unreadable
        shared memory; counted)."""
        while True:
            ms = None
            if deadline is not None:
                ms = max(0, int((deadline - time.monotonic()) * 1000))
            if not self._sock.poll(ms):
                raise TimeoutError("no slice from %s within %g s" % (self.endpoint, timeout))
            parts = self._sock.recv_multipart(copy=False)
            try:
                h, s = self._decode(parts)
            except ProtocolError as e:
                self.rejected += 1
                self.last_error = e
                if self.strict:
                    raise
                continue
            except ShmError as e:
                self._unreadable(e.header, e)  # type: ignore[attr-defined]
                return e.header, None  # type: ignore[attr-defined]
            if s is None:
                self.stale[h["id"]] = self.stale.get(h["id"], 0) + 1
            self._note(h, s is None)
            return h, s

    def recv(self, timeout: Optional[float] = None) -> Slice:
        """The next valid slice; TimeoutError after ``timeout`` seconds (None: wait)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            _, s = self._next(deadline, timeout)
            if s is not None:
                return s

    def slices(self, timeout: Optional[float] = None, count: Optional[int] = None,
               until_final: bool = False) -> Iterator[Slice]:
        """Yields slices: at most ``count``; with ``until_final``, until the final slice
        of every subscribed id seen so far has come (a final slice whose pixels were lost
        in shared memory counts: the daemon sends no other).  ``timeout`` applies to each
        wait and raises TimeoutError."""
        n = 0
        pending: Dict[str, bool] = {}
        while count is None or n < count:
            h, s = self._next(None if timeout is None else time.monotonic() + timeout, timeout)
            pending[h["id"]] = bool(h.get("final", False))
            if s is not None:
                n += 1
                yield s
            if until_final and all(pending.values()):
                return

    def __iter__(self) -> Iterator[Slice]:
        return self.slices()

    def close(self) -> None:
        """Closes the socket (queued slices are dropped) and unmaps shared memory."""
        if not self._sock.closed:
            self._sock.close(linger=0)
        self._shm.close()

    def __enter__(self) -> "Subscriber":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
