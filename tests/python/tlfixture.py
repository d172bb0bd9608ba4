"""A real tomolived for the Python client's tests (the Python twin of daemon_fixture.h).

Runs the built daemon ($top_builddir/daemon/tomolived) on the CPU backend with ipc://
endpoints in a private temporary directory (parallel tests never collide on ports; the
HTTP server is switched off for the same reason), logs to a file there, waits until it
answers a status request, and stops it with SIGTERM (SIGKILL after 10 s) however the
test ends.  Also: analytic test data (a disk's line integrals) and a minimal reader of
the uncompressed float32 TIFF files `tomolive sub --out` writes.
"""
from __future__ import annotations

import atexit
import math
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from typing import List, Optional, Sequence

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.environ.get("top_srcdir") or os.path.normpath(os.path.join(HERE, "..", ".."))
BUILDDIR = os.environ.get("top_builddir") or "."
sys.path.insert(0, os.path.join(SRCDIR, "clients", "python"))

import tomolive  # noqa: E402  (after the path is set)


def tool(name: str) -> str:
    """Path of a built program: 'tomolived' or 'tomolive'."""
    sub = "daemon" if name == "tomolived" else "clients"
    return os.path.join(BUILDDIR, sub, name)


class Daemon:
    """tomolived on private ipc:// endpoints: ``.ingest``, ``.control``, ``.slices``."""

    def __init__(self, tag: str, extra: Sequence[str] = (), *, key: Optional[str] = None,
                 server_key: Optional[str] = None):
        """``key``, ``server_key``: the certificates the readiness check connects with, for
        a daemon with ``[security] curve`` (extra sets security.*)."""
        self.dir = tempfile.mkdtemp(prefix="tlpy-%s-" % tag)
        self.ingest = "ipc://%s/ingest" % self.dir
        self.control = "ipc://%s/control" % self.dir
        self.slices = "ipc://%s/slices" % self.dir
        self.log_path = os.path.join(self.dir, "daemon.log")
        argv = [tool("tomolived"), "--backend", "cpu", "--log-level", "debug",
                "--set", "ingest.endpoint=" + self.ingest,
                "--set", "control.endpoint=" + self.control,
                "--set", "slices.endpoint=" + self.slices,
                "--set", "http.listen=",
                # no kernel timing (seconds per slice size) unless asked; no cache in ~/.cache
                "--set", "engine.tune=off",
                "--set", "engine.tune_cache=" + os.path.join(self.dir, "tune.json")] + list(extra)
        self._log = open(self.log_path, "wb")
        self.proc: Optional[subprocess.Popen] = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._log)
        atexit.register(self.stop)  # stopped even when the test process dies of an error
        ctl = tomolive.Control(self.control, timeout=0.5, key=key, server_key=server_key)
        try:
            deadline = time.monotonic() + 20
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError("tomolived exited with %d:\n%s"
                                       % (self.proc.returncode, self.log()))
                try:
                    ctl.status()
                    break
                except TimeoutError:
                    if time.monotonic() > deadline:
                        raise RuntimeError("tomolived does not answer:\n" + self.log())
        finally:
            ctl.close()

    def log(self) -> str:
        """The daemon's log so far."""
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self) -> Optional[int]:
        """SIGTERM, wait (SIGKILL after 10 s); returns the exit status. Idempotent."""
        rc = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            rc = self.proc.returncode
            self.proc = None
            self._log.close()
        if self.dir and os.path.isdir(self.dir) and not os.environ.get("TL_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)
        return rc


# ---- test data ----------------------------------------------------------------------------

def disk_sinogram(rows: int, cols: int, n: int, radius: float, x0: float, y0: float,
                  mu: float, center: Optional[float] = None) -> np.ndarray:
    """Line integrals of a cylinder (a disk in every row) of density ``mu`` per pixel,
    radius ``radius``, axis at volume ``(x0, y0)``: ``n`` float32 frames ``rows x cols``
    at angles ``pi k / n``.  ARCHITECTURE.md §3.1: the ray through ``(x, y)`` hits
    ``u = center + x cos(theta) - y sin(theta)``."""
    if center is None:
        center = (cols - 1) / 2.0
    out = np.zeros((n, rows, cols), dtype=np.float32)
    u = np.arange(cols, dtype=np.float64)
    for k in range(n):
        th = math.pi * k / n
        s = u - (center + x0 * math.cos(th) - y0 * math.sin(th))
        out[k, :, :] = (2 * mu * np.sqrt(np.clip(radius ** 2 - s ** 2, 0, None)))[None, :]
    return out


def cone_cylinder(rows: int, cols: int, n: int, sad: float, sdd: float, pitch: float,
                  radius: float, x0: float, y0: float, mu: float) -> np.ndarray:
    """Exact cone-beam line integrals (PROTOCOL.md §8.1.1) of the cylinder of
    ``disk_sinogram`` (radius, axis and density in volume units: pixels at the rotation
    axis, ``pitch * sad / sdd`` mm): ``n`` float32 frames ``rows x cols`` at angles
    ``2 pi k / n``, the principal point at the detector's middle.  The ray of column u, row
    v leaves the source ``-sad (sin b, cos b, 0)`` along ``sdd (sin b, cos b, 0) + (u -
    u0) pitch (cos b, -sin b, 0) + (v - v0) pitch (0, 0, 1)``; its path through the
    (vertical, endless) cylinder is the chord of its horizontal part, stretched by its
    slope."""
    unit = pitch * sad / sdd
    rho, cx, cy, dens = radius * unit, x0 * unit, y0 * unit, mu / unit
    b = 2 * np.pi * np.arange(n) / n
    sb, cb = np.sin(b)[:, None], np.cos(b)[:, None]
    u = (np.arange(cols) - (cols - 1) / 2.0)[None, :] * pitch
    v = (np.arange(rows) - (rows - 1) / 2.0) * pitch
    dx, dy = sdd * sb + u * cb, sdd * cb - u * sb     # horizontal direction, (n, cols)
    sx, sy = -sad * sb, -sad * cb                      # the source
    dh = np.hypot(dx, dy)
    dist = np.abs((cx - sx) * dy - (cy - sy) * dx) / dh
    chord = 2 * np.sqrt(np.maximum(rho * rho - dist * dist, 0.0))
    stretch = np.sqrt(dh[:, None, :] ** 2 + v[None, :, None] ** 2) / dh[:, None, :]
    return (dens * chord[:, None, :] * stretch).astype(np.float32)


def disk_image(sl: "tomolive.Slice", radius: float, x0: float, y0: float, mu: float):
    """The true density at each pixel of a received slice, and a mask of the pixels at
    least 2 pixels away from the disk's edge (where FBP's blur does not reach)."""
    x, y, _ = sl.coordinates()
    r = np.hypot(x - x0, y - y0)
    truth = np.where(r < radius, mu, 0.0)
    return truth, np.abs(r - radius) > 2.0


def read_tiff_f32(path: str) -> np.ndarray:
    """The first page of an uncompressed, strip-organised classic TIFF of one float32
    sample per pixel (what clients/tiff.c writes), as a ``rows x cols`` array."""
    with open(path, "rb") as f:
        data = f.read()
    e = {b"II": "<", b"MM": ">"}[data[:2]]
    magic, ifd = struct.unpack(e + "HI", data[2:8])
    assert magic == 42, "not a classic TIFF"
    (count,) = struct.unpack(e + "H", data[ifd:ifd + 2])
    tags = {}
    sizes = {3: ("H", 2), 4: ("I", 4)}
    for i in range(count):
        tag, typ, num, val = struct.unpack(e + "HHI4s", data[ifd + 2 + 12 * i:ifd + 14 + 12 * i])
        if typ not in sizes:
            continue
        fmt, size = sizes[typ]
        raw = val if num * size <= 4 else data[struct.unpack(e + "I", val)[0]:][:num * size]
        tags[tag] = list(struct.unpack(e + fmt * num, raw[:num * size]))
    cols, rows = tags[256][0], tags[257][0]
    assert tags.get(258, [0])[0] == 32 and tags.get(339, [1])[0] == 3, "not float32"
    assert tags.get(259, [1])[0] == 1, "compressed"
    pixels = b"".join(data[o:o + n] for o, n in zip(tags[273], tags[279]))
    return np.frombuffer(pixels, dtype=e + "f4").reshape(rows, cols)


def run(argv: List[str], timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    """Runs a program, capturing text output."""
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
