"""Pusher: send a scan to tomolived's ingest socket from NumPy arrays.

A ZeroMQ PUSH socket, as an acquisition system would use: ``scan()`` opens a series,
``frame()`` sends one detector frame (dark, flat or projection), ``end()`` closes the
series.  Every header is checked before it is sent (protocol.py), including that a frame
matches the shape and dtype of the scan this Pusher opened, because the daemon would
only count such a frame as rejected.

The payload goes out zero-copy by default: ZeroMQ reads the array's own memory, and
pyzmq keeps a reference to the array until ZeroMQ is done with it.  Do not write into
an array after passing it to ``frame()`` until it has been sent (pass ``copy=True`` to
reuse one buffer for every frame).  Sends block while the daemon's queue is full
(back-pressure: nothing is lost); ``timeout`` turns a long block into TimeoutError.

    with Pusher("tcp://localhost:5600") as p:
        p.scan(shape=(64, 256), dtype="f32", window=720, already_linear=True)
        for i, a in enumerate(angles):
            p.frame(i, sinogram_frames[i], "proj", angle=a)
        p.end()
"""
from __future__ import annotations

import time
from typing import Any, Dict, Optional, Sequence

import numpy as np
import zmq

from . import protocol
from .errors import BadArgument
from .keys import apply_curve

__all__ = ["Pusher"]


class Pusher:
    """A PUSH socket connected (or bound, ``bind=True``) to the daemon's ingest endpoint.

    ``sndhwm`` is the send high-water mark in messages; ``linger`` (ms, -1 = until
    delivered) is how long ``close()`` waits for frames still queued.  With
    ``immediate`` (the default) nothing is queued for a connection that is not up yet, so
    the first send blocks until the daemon is there rather than racing it.  ``key``,
    ``server_key``: CURVE certificates (role ingest) for a daemon with ``[security] curve``
    (keys.py).
    """

    def __init__(self, endpoint: str = "tcp://localhost:5600", *, bind: bool = False,
                 sndhwm: int = 1000, linger: int = -1, immediate: bool = True,
                 context: Optional[zmq.Context] = None, key: Optional[str] = None,
                 server_key: Optional[str] = None):
        self._ctx = context or zmq.Context.instance()
        self._sock = self._ctx.socket(zmq.PUSH)
        self._sock.setsockopt(zmq.SNDHWM, sndhwm)
        self._sock.setsockopt(zmq.LINGER, linger)
        self._sock.setsockopt(zmq.IMMEDIATE, 1 if immediate else 0)
        try:
            if not bind:  # a bound PUSH stands for a detector, which has no keys
                apply_curve(self._sock, key, server_key)  # keys.py; with the environment's
        except Exception:
            self._sock.close()
            raise
        (self._sock.bind if bind else self._sock.connect)(endpoint)
        self.endpoint = endpoint
        self.series: Optional[int] = None
        self._scan: Optional[Dict[str, Any]] = None
        self.frames_sent = 0
        self.bytes_sent = 0

    # -- sending ------------------------------------------------------------------------

    def _send(self, parts: Sequence[Any], timeout: Optional[float], copy: bool) -> None:
        if timeout is not None:
            self._sock.setsockopt(zmq.SNDTIMEO, max(0, int(timeout * 1000)))
        try:
            self._sock.send_multipart(parts, copy=copy)
        except zmq.Again:
            raise TimeoutError("%s: not sent within %g s (is the daemon there? is its "
                               "queue full?)" % (self.endpoint, timeout)) from None
        finally:
            if timeout is not None:
                self._sock.setsockopt(zmq.SNDTIMEO, -1)

    def scan(self, shape: Sequence[int], dtype: Any, window: int, *, series: int = 1,
             timeout: Optional[float] = None, **keys: Any) -> Dict[str, Any]:
        """Opens (or redefines) a series.  ``shape`` is ``(rows, cols)``; ``dtype`` a
        protocol name or a NumPy dtype (uint8/16/32, float32); ``window`` the projections
        the daemon keeps.  Other keys of section 8.1 as keyword arguments: ``darks``,
        ``flats``, ``first_index``, ``center``, ``angle_start`` + ``angle_step``,
        ``filter``, ``already_linear``, ``geometry``; for ``geometry="cone"`` (section
        8.1.1) ``source_origin``, ``source_detector`` (mm), ``pixel_size`` (mm, a number
        or ``(u, v)``) and optionally ``detector_offset`` (``(u, v)`` pixels),
        ``short_scan`` (``(start, range)`` radians) or ``matrices`` (one 3x4 projection
        matrix per projection, row-major: 12-number lists or an N x 12 NumPy array, at
        most 512; frame index ``first_index + i`` has matrix i).  Returns the header
        sent."""
        h = protocol.scan_header(series, shape, dtype, window, **keys)
        self._send([protocol.pack(h)], timeout, True)
        self.series = series
        self._scan = h
        return h

    def frame(self, index: int, array: np.ndarray, kind: str = "proj",
              angle: Optional[float] = None, t_acq: Optional[int] = None, *,
              series: Optional[int] = None, center_offset: Optional[float] = None,
              copy: bool = False, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Sends one frame: ``array`` is 2-D ``(rows, cols)``, C-contiguous, of uint8,
        uint16, uint32 or float32.  ``kind`` is ``"dark"``, ``"flat"`` or ``"proj"``; a
        projection needs ``angle`` (radians) unless the scan has an angle schedule.
        ``t_acq`` is the acquisition time in ns since the epoch (default: now).
        ``copy=False`` (the default) sends the array's memory without copying it (pyzmq
        copies payloads smaller than ``zmq.COPY_THRESHOLD``, 64 KiB, anyway).
        Returns the header sent."""
        name, shape = protocol.check_array(array)
        if series is None:
            series = self.series if self.series is not None else 1
        sc = self._scan if self._scan is not None and self._scan["series"] == series else None
        if sc is not None:
            if list(shape) != sc["shape"] or name != sc["dtype"]:
                raise BadArgument("frame %d is %d x %d %s; the scan of series %d is %d x %d %s"
                                  % (index, shape[0], shape[1], name, series, sc["shape"][0],
                                     sc["shape"][1], sc["dtype"]))
            if kind == "proj" and angle is None and "angle_start" not in sc:
                raise BadArgument("projection %d has no angle and the scan no angle schedule"
                                  % index)
        if t_acq is None:
            t_acq = time.time_ns()
        h = protocol.frame_header(series, index, kind, name, shape, angle, t_acq,
                                  center_offset)
        # zero-copy: pyzmq hands ZeroMQ the array's buffer and holds a reference to it
        self._send([protocol.pack(h), array], timeout, copy)
        self.frames_sent += 1
        self.bytes_sent += array.nbytes
        return h

    def end(self, series: Optional[int] = None, *, timeout: Optional[float] = None) -> None:
        """Closes the series (default: the last one opened); the daemon then publishes a
        final image of every wanted slice."""
        if series is None:
            series = self.series if self.series is not None else 1
        self._send([protocol.pack(protocol.end_header(series))], timeout, True)

    # -- lifetime -----------------------------------------------------------------------

    def close(self, linger: Optional[int] = None) -> None:
        """Closes the socket; ``linger`` ms overrides the constructor's (-1: wait until
        every frame is delivered)."""
        if not self._sock.closed:
            self._sock.close(linger=linger)

    def __enter__(self) -> "Pusher":
        return self

    def __exit__(self, *exc: Any) -> None:
        # after an error, do not hang on frames nobody will take
        self.close(0 if exc[0] is not None else None)
