"""The Python client against a real tomolived (tlfixture.Daemon): a scan pushed from
NumPy comes back as slices equal to what `tomolive sub` saves and to the analytic
object; control round trips; every typed error; zero-copy receive; seq gaps; timeouts;
slices through shared memory equal to the same slices over TCP, and (against a hand-made
publisher and object) stale and unreadable shared memory counted as missed."""
from __future__ import annotations

import math
import mmap
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import warnings

import numpy as np
import zmq

import tlfixture as F
import tomolive

R, W, N = 4, 64, 180                     # detector rows, columns; projections (180 deg)
RADIUS, X0, Y0, MU = 14.0, 6.0, -3.0, 0.05  # the cylinder: off-axis, so flips would show


class DaemonCase(unittest.TestCase):
    """A daemon per test class, stopped (and its log shown) when the class ends."""

    extra: tuple = ()

    @classmethod
    def setUpClass(cls):
        cls.d = F.Daemon(cls.__name__.lower(), cls.extra)
        cls.addClassCleanup(cls._stop)
        cls.ctl = tomolive.Control(cls.d.control, timeout=10)

    @classmethod
    def _stop(cls):
        cls.ctl.close()
        log = cls.d.log()
        rc = cls.d.stop()
        sys.stderr.write("--- %s: tomolived exited %s; log tail:\n%s\n"
                         % (cls.__name__, rc, "\n".join(log.splitlines()[-15:])))
        assert rc == 0, "tomolived exited %s" % rc


def push_disk(d: F.Daemon, series: int, dtype: str = "f32") -> None:
    """The cylinder as a scan: float32 line integrals (already_linear), or uint16 camera
    counts (flux x exp(-line integral) + dark 100) with 4 darks and 4 flats."""
    li = F.disk_sinogram(R, W, N, RADIUS, X0, Y0, MU)
    with tomolive.Pusher(d.ingest) as p:
        if dtype == "f32":
            p.scan((R, W), np.float32, N, series=series, already_linear=True)
        else:
            p.scan((R, W), np.uint16, N, series=series, darks=4, flats=4)
            for i in range(4):
                p.frame(i, np.full((R, W), 100, np.uint16), "dark")
            for i in range(4):
                p.frame(i, np.full((R, W), 10100, np.uint16), "flat")
        for k in range(N):
            frame = li[k] if dtype == "f32" else \
                np.round(10000 * np.exp(-li[k].astype(np.float64)) + 100).astype(np.uint16)
            p.frame(k, frame, "proj", angle=math.pi * k / N)
        p.end()


def final_slice(sub: tomolive.Subscriber, since_ns: int) -> list:
    """The slices up to the final one of the scan pushed after ``since_ns`` (CLOCK_REALTIME):
    a final image of an earlier scan (its end still queued when the slice was defined)
    is skipped, by its acquisition time."""
    got = []
    for s in sub.slices(timeout=60):
        if s.t_acq < since_ns:
            continue
        got.append(s)
        if s.final:
            return got


def disk_errors(s: tomolive.Slice, x0: float = X0):
    """Relative L2 error against the cylinder (pixels inside the reconstruction circle
    and 2 pixels away from the disk's edge), and the mean inside the disk."""
    truth, mask = F.disk_image(s, RADIUS, x0, Y0, MU)
    x, y, _ = s.coordinates()
    mask &= np.hypot(x, y) < W / 2 - 2
    e = (s.image - truth)[mask]
    return (float(np.linalg.norm(e) / np.linalg.norm(truth[mask])),
            float(s.image[mask & (truth > 0)].mean()))


class Scan(DaemonCase):
    def test_f32_disk(self):
        """Pusher -> daemon -> Subscriber: the final slice equals the one `tomolive sub`
        saves (the same message, so exactly), and the analytic cylinder within FBP's error;
        the image is a view of the received frame (zero-copy)."""
        self.ctl.set_slice("disk", kind="row", z=1)
        out = tempfile.mkdtemp(prefix="tlpy-sub-")
        self.addCleanup(shutil.rmtree, out, True)
        sub_c = subprocess.Popen([F.tool("tomolive"), "sub", "--endpoint", self.d.slices,
                                  "--all", "--out", out, "--until-final", "--timeout", "60",
                                  "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        try:
            with tomolive.Subscriber(self.d.slices, ["disk"]) as sub:
                # two distinct prefixes: slice/disk/ (us) and slice/ (tomolive sub)
                self.ctl.wait_wanted(["disk"], subscriptions=2)
                t0 = time.time_ns()
                push_disk(self.d, 1)
                got = final_slice(sub, t0)
                self.assertEqual(sub.missed, {})
                self.assertEqual(sub.rejected, 0)
            so, se = sub_c.communicate(timeout=60)
        finally:
            if sub_c.poll() is None:
                sub_c.kill()
        self.assertEqual(sub_c.returncode, 0, se)
        last = got[-1]
        self.assertTrue(last.final)
        self.assertFalse(any(s.final for s in got[:-1]))
        self.assertEqual([s.seq for s in got], list(range(got[0].seq, last.seq + 1)))
        self.assertEqual((last.shape, last.projections_used, last.missing, last.window),
                         ((W, W), N, 0, (0, N - 1)))
        self.assertEqual(last.image.dtype, np.float32)
        self.assertGreaterEqual(last.latency, 0)

        # the same slice, as `tomolive sub` saved it
        tif = F.read_tiff_f32(os.path.join(out, "disk.tif"))
        self.assertEqual(tif.shape, (W, W))
        diff = float(np.max(np.abs(tif - last.image)))
        print("max |python - tomolive sub| = %g" % diff)
        self.assertLessEqual(diff, 1e-6)

        # the analytic cylinder; mirrored in x it would be far off (the orientation counts)
        rel, inside = disk_errors(last)
        rel_flip, _ = disk_errors(last, -X0)
        print("disk: relative L2 %.4f (mirrored %.3f), mean inside %.5f (true %g)"
              % (rel, rel_flip, inside, MU))
        self.assertLess(rel, 0.08)
        self.assertLess(abs(inside - MU), 0.01 * MU)
        self.assertGreater(rel_flip, 0.5)

        # zero-copy: the image views the zmq.Frame's memory; read-only
        base = last.image
        while isinstance(base, np.ndarray):
            base = base.base
        self.assertIsInstance(base, memoryview)
        self.assertIs(base.obj, last.frame)
        addr = np.frombuffer(last.frame.buffer, np.uint8).ctypes.data
        self.assertEqual(last.image.ctypes.data, addr)
        self.assertFalse(last.image.flags.writeable)
        self.assertTrue(last.image.copy().flags.writeable)
        self.ctl.remove_slice("disk")

    def test_compact_encodings(self):
        """Slices asked for as f16 + LZ4 and as q16 (section 10.3) arrive as float32
        within their precision of the f32 twin; resend() publishes the newest again,
        with the same seq."""
        for sid, extra in (("f", {}), ("h", {"dtype": "f16", "compression": "lz4"}),
                           ("q", {"dtype": "q16"})):
            r = self.ctl.set_slice(sid, kind="row", z=1, **extra)
            self.addCleanup(self.ctl.remove_slice, sid)
            self.assertEqual(r["dtype"], extra.get("dtype", "f32"))
        with tomolive.Subscriber(self.d.slices, ["f", "h", "q"]) as sub:
            self.ctl.wait_wanted(["f", "h", "q"], subscriptions=3)
            push_disk(self.d, 1)
            last: dict = {}
            while not all(k in last and last[k].final for k in "fhq"):
                s = sub.recv(timeout=60)  # each slice's messages until its final
                last[s.id] = s
            f, h, q = last["f"], last["h"], last["q"]
            self.assertEqual((h.header["dtype"], h.header["compression"]), ("f16", "lz4"))
            self.assertEqual(h.image.dtype, np.float32)
            self.assertLess(len(h.frame.buffer), f.image.nbytes // 2)
            np.testing.assert_allclose(h.image, f.image, rtol=2 ** -11, atol=1e-7)
            self.assertLessEqual(float(np.max(np.abs(q.image - f.image))),
                                 q.header["scale"] / 2 + 1e-6 * float(np.max(np.abs(f.image))))
            self.assertEqual(self.ctl.resend("h"), 1)
            again = sub.recv(timeout=10)
            self.assertEqual((again.id, again.seq), ("h", h.seq))
            np.testing.assert_array_equal(again.image, h.image)

    def test_box(self):
        """A box (kind "box") through the client: Slice.volume is planes x h x w, plane 0
        the row slice of its size at its z (both kept incrementally: to rounding), and
        the compact f16 encoding carries the whole box."""
        ids = ["cube", "cube16", "z1"]
        self.ctl.set_slice("cube", kind="box", size=[2, 16, 16], center=[0, 0, 1.5])
        self.ctl.set_slice("cube16", kind="box", size=[2, 16, 16], center=[0, 0, 1.5],
                           dtype="f16")
        self.ctl.set_slice("z1", kind="row", z=1, size=[16, 16])
        for sid in ids:
            self.addCleanup(self.ctl.remove_slice, sid)
        with tomolive.Subscriber(self.d.slices, ids) as sub:
            self.ctl.wait_wanted(ids, subscriptions=3)
            push_disk(self.d, 1)
            last: dict = {}
            while not all(k in last and last[k].final for k in ids):
                s = sub.recv(timeout=60)
                last[s.id] = s
        c = last["cube"]
        self.assertEqual((c.planes, c.volume.shape, c.header["box_step"]), (2, (2, 16, 16), 1.0))
        self.assertEqual(last["z1"].volume.shape, (1, 16, 16))
        np.testing.assert_allclose(c.volume[0], last["z1"].image, rtol=1e-5, atol=1e-6)
        self.assertGreater(float(np.max(np.abs(c.volume[0]))), 0)
        np.testing.assert_allclose(last["cube16"].volume, c.volume, rtol=2 ** -11, atol=1e-6)

    def test_u16_camera_frames(self):
        """uint16 camera frames with darks and flats reconstruct the same cylinder."""
        self.ctl.set_slice("cam", kind="row", z=2)
        with tomolive.Subscriber(self.d.slices, "cam") as sub:
            self.ctl.wait_wanted(["cam"])
            t0 = time.time_ns()
            push_disk(self.d, 2, "u16")
            last = final_slice(sub, t0)[-1]
        st = self.ctl.status()
        self.assertEqual(st["scan"]["series"], 2)
        self.assertEqual((st["scan"]["darks"], st["scan"]["flats"]), (4, 4))
        rel, inside = disk_errors(last)
        print("u16 disk: relative L2 %.4f, mean inside %.5f" % (rel, inside))
        self.assertEqual((last.projections_used, last.missing), (N, 0))
        self.assertLess(rel, 0.08)
        self.assertLess(abs(inside - MU), 0.01 * MU)

        # with a scan open: set_param and reset
        self.assertEqual(self.ctl.set_param("center", 31.25), {"name": "center", "value": 31.25})
        self.assertEqual(self.ctl.set_param("filter", "hann"), {"name": "filter",
                                                                "value": "hann"})
        with self.assertRaises(tomolive.BadArgument):
            self.ctl.set_param("filter", "gaussian")
        with self.assertRaises(tomolive.KeyTypeError):
            self.ctl.set_param("center", "middle")
        self.assertIs(self.ctl.reset(), True)
        self.assertEqual(self.ctl.status()["scan"]["held"], 0)
        # and tune: the kernels timed for a size, chosen, and shown in status
        t = self.ctl.tune([16, 24])["sizes"][0]
        self.assertEqual((t["height"], t["width"], t["single"]["exact"]), (16, 24, "cpu-f32"))
        self.assertIn("cpu-f32", [e["kernel"] for e in t["ranking"]])
        k = self.ctl.status()["kernels"]
        self.assertIn((16, 24, "tuned"), [(s["height"], s["width"], s["source"])
                                          for s in k["sizes"]])
        self.assertGreaterEqual(k["tune_runs"], 1)
        self.ctl.remove_slice("cam")

    def test_pusher_checks(self):
        """A frame that does not fit the scan is refused before it is sent."""
        with tomolive.Pusher(self.d.ingest) as p:
            p.scan((R, W), "f32", N, series=9, already_linear=True)
            with self.assertRaises(tomolive.BadArgument):
                p.frame(0, np.zeros((R, W + 1), np.float32), angle=0.0)
            with self.assertRaises(tomolive.BadArgument):
                p.frame(0, np.zeros((R, W), np.uint16), angle=0.0)
            with self.assertRaises(tomolive.BadArgument):
                p.frame(0, np.zeros((R, W), np.float32))          # no angle, no schedule
            with self.assertRaises(tomolive.BadDtype):
                p.frame(0, np.zeros((R, W)), angle=0.0)           # float64
            with self.assertRaises(tomolive.BadKind):
                p.frame(0, np.zeros((R, W), np.float32), "white", angle=0.0)
            h = p.frame(0, np.zeros((R, W), np.float32), angle=0.5, t_acq=123)
            self.assertEqual((h["t_acq"], h["angle"], h["series"]), (123, 0.5, 9))
            p.end()
        self.assertEqual(p.frames_sent, 1)
        # wait until the daemon has taken the end too: a slice defined while it is still
        # queued would get that scan's final image
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            sc = self.ctl.status()["scan"] or {}
            if sc.get("series") == 9 and sc.get("finished"):
                break
            time.sleep(0.02)
        st = self.ctl.status()
        self.assertEqual((st["scan"]["series"], st["scan"]["finished"]), (9, True))
        self.assertEqual(st["scan"]["projections"], 1)
        self.assertEqual(sum(st["frames"]["rejected"].values()), 0)


class IterativeScan(DaemonCase):
    extra = ("--set", "engine.iterative=true")

    def test_sirt_slice(self):
        """An iterative slice through the client: its read-outs carry the method and
        their iterations, growing; the final comes after max_iterations of refinement
        with a residual below the first read-out's of the whole window, and is the cylinder within FBP's
        bound; list_slices reports its options and that it converged."""
        self.ctl.set_slice("it", kind="row", z=1, method="sirt",
                           iterative={"iterations": 5, "max_iterations": 30, "nonneg": True})
        with tomolive.Subscriber(self.d.slices, ["it"]) as sub:
            self.ctl.wait_wanted(["it"])
            t0 = time.time_ns()
            push_disk(self.d, 1)
            got = final_slice(sub, t0)
        last = got[-1]
        self.assertTrue(all(s.kernel == "sirt" for s in got))
        its = [s.iterations for s in got]
        self.assertEqual(its, sorted(its))
        self.assertGreaterEqual(last.iterations, 30)
        # below the first read-out of the whole window: an earlier one, of a few views,
        # may fit them exactly (residual 0, seen in a distcheck run)
        whole = [s for s in got if s.projections_used == N]
        self.assertLess(last.residual, whole[0].residual)
        rel, inside = disk_errors(last)
        print("iterative: %d read-outs, %d iterations, residual %.4f -> %.4f, disk %.4f"
              % (len(got), last.iterations, whole[0].residual, last.residual, rel))
        self.assertLess(rel, 0.08)
        (it,) = [s for s in self.ctl.list_slices() if s["id"] == "it"]
        self.assertEqual(it["method"], "sirt")
        self.assertEqual(it["iterative"]["max_iterations"], 30)
        self.assertTrue(it["iterative"]["converged"])
        with self.assertRaises(tomolive.BadArgument):
            self.ctl.set_slice("bad", kind="row", z=1, method="art")
        self.ctl.remove_slice("it")


class ConeScan(DaemonCase):
    def test_cone_cylinder(self):
        """Cone beam (PROTOCOL.md 8.1.1) from Python: Pusher.scan(geometry="cone", ...)
        with exact cone-beam projections of the off-axis cylinder over a whole turn; the
        final slice in the orbit's plane is the cylinder (mirrored it would not be), and
        status shows the trajectory."""
        rows, n, sad, sdd, pitch = 5, 360, 300.0, 450.0, 0.5
        li = F.cone_cylinder(rows, W, n, sad, sdd, pitch, RADIUS, X0, Y0, MU)
        self.ctl.set_slice("mid", kind="row", z=(rows - 1) / 2)
        with tomolive.Subscriber(self.d.slices, ["mid"]) as sub:
            self.ctl.wait_wanted(["mid"])
            t0 = time.time_ns()
            with tomolive.Pusher(self.d.ingest) as p:
                h = p.scan((rows, W), np.float32, n, series=3, already_linear=True,
                           geometry="cone", source_origin=sad, source_detector=sdd,
                           pixel_size=pitch, detector_offset=(0, 0))
                self.assertEqual(h["geometry"], "cone")
                for k in range(n):
                    p.frame(k, li[k], "proj", angle=2 * math.pi * k / n)
                p.end()
            last = final_slice(sub, t0)[-1]
        scan = self.ctl.status()["scan"]
        self.assertEqual(scan["geometry"], "cone")
        self.assertEqual(scan["cone"], {"source_origin": sad, "source_detector": sdd,
                                        "pixel_size": [pitch, pitch],
                                        "detector_offset": [0.0, 0.0],
                                        "short_scan": None,  # a whole turn
                                        "matrices": None})  # a circle
        rel, inside = disk_errors(last)
        rel_flip, _ = disk_errors(last, -X0)
        print("cone cylinder: relative L2 %.4f (mirrored %.3f), mean inside %.5f (true %g)"
              % (rel, rel_flip, inside, MU))
        self.assertLess(rel, 0.08)
        self.assertLess(abs(inside - MU), 0.01 * MU)
        self.assertGreater(rel_flip, 0.5)
        # the client refuses what the daemon would: here before anything is sent
        with tomolive.Pusher(self.d.ingest) as p:
            with self.assertRaises(tomolive.MissingKey):
                p.scan((rows, W), np.float32, n, geometry="cone", source_origin=sad,
                       source_detector=sdd)
        self.ctl.remove_slice("mid")


class SharedMemory(DaemonCase):
    """slices.shm: a Subscriber with shm=True beside one over TCP."""

    prefix = "tlpy-%d" % os.getpid()
    # slots for every slice of the scan: they are read once it has been pushed
    extra = ("--set", "slices.shm=" + prefix, "--set", "slices.shm_slots=64")

    def test_same_pixels_as_tcp(self):
        """Every slice both got has the same pixels; the final one is there; the image is
        a read-only copy; remove_slice unlinks the object."""
        self.ctl.set_slice("disk", kind="row", z=1)
        with tomolive.Subscriber(self.d.slices, ["disk"], shm=True) as shm, \
                tomolive.Subscriber(self.d.slices, ["disk"]) as tcp:
            # the list's "wanted" counts TCP subscribers only: wait for both prefixes
            self.ctl.wait_wanted(["disk"], subscriptions=2)
            t0 = time.time_ns()
            push_disk(self.d, 7)
            got_shm = {s.seq: s for s in final_slice(shm, t0)}
            got_tcp = {s.seq: s for s in final_slice(tcp, t0)}
            self.assertEqual((shm.stale, shm.unreadable, shm.rejected), ({}, 0, 0))
        both = sorted(set(got_shm) & set(got_tcp))
        print("shared memory: %d slices, TCP %d, %d compared" % (len(got_shm), len(got_tcp),
                                                                  len(both)))
        self.assertIn(max(got_tcp), both)  # the final one
        for seq in both:
            a, b = got_shm[seq], got_tcp[seq]
            self.assertTrue(np.array_equal(a.image, b.image), "seq %d" % seq)
            self.assertTrue(a.header["shm_name"].startswith("/%s-" % self.prefix))
            self.assertIn("-disk-", a.header["shm_name"])
        last = got_shm[max(both)]
        self.assertTrue(last.final)
        self.assertIsNone(last.frame)
        self.assertFalse(last.image.flags.writeable)
        self.assertEqual(last.image.shape, (W, W))
        path = "/dev/shm/" + last.header["shm_name"][1:]
        self.assertTrue(os.path.exists(path))
        self.assertGreater(self.ctl.status()["slices"]["shared_memory"], 0)
        self.assertEqual(self.ctl.status()["slices"]["shm_failed"], 0)
        self.ctl.remove_slice("disk")
        self.assertFalse(os.path.exists(path))


class ControlCommands(DaemonCase):
    extra = ("--set", "slices.max=3")

    def test_round_trips(self):
        c = self.ctl
        self.assertEqual(c.commands(), ["status", "set_slice", "remove_slice", "list_slices",
                                        "resend", "set_param", "reset", "tune", "commands"])
        st = c.status()
        self.assertEqual((st["protocol"], st["backend"], st["scan"]), (1, "cpu", None))
        self.assertIsInstance(st["version"], str)
        a = c.set_slice("a", kind="row", z=3, update={"every": 5}, pin=True)
        self.assertEqual((a["id"], a["topic"], a["kind"], a["pinned"]),
                         ("a", "slice/a/", "row", True))
        self.assertEqual(a["update"]["every"], 5)
        b = c.set_slice("b", kind="ortho", axis="x", position=0.0)
        self.assertEqual(b["kind"], "ortho")
        p = c.request("set_slice", {"id": "p", "kind": "plane", "size": [16, 32]},
                      orientation=[20, 0, 1, 0, 10, 0, -10, -5, 2])
        self.assertEqual(p["shape"], [16, 32])
        self.assertEqual([s["id"] for s in c.list_slices()], ["a", "b", "p"])
        self.assertIs(c.remove_slice("b"), True)
        self.assertEqual([s["id"] for s in c.list_slices()], ["a", "p"])
        for sid in ("a", "p"):
            c.remove_slice(sid)
        self.assertEqual(c.list_slices(), [])

    def test_typed_errors(self):
        """Each error reply raises its class, with the code, the command and a message;
        a refused request changes nothing."""
        c = self.ctl
        c.set_slice("keep", kind="row", z=1)
        cases = [
            (lambda: c.request("stat"), tomolive.UnknownCommand, 32, "stat"),
            (lambda: c.set_slice("x", kind="diagonal"), tomolive.BadKind, 14, "set_slice"),
            (lambda: c.request("set_slice"), tomolive.BadArgument, 33, "set_slice"),
            (lambda: c.set_param("gain", 2), tomolive.BadArgument, 33, "set_param"),
            (lambda: c.remove_slice("nope"), tomolive.NotFound, 34, "remove_slice"),
            (lambda: c.set_param("center", 1.0), tomolive.StateError, 35, "set_param"),
            (lambda: c.reset(), tomolive.StateError, 35, "reset"),
            (lambda: c.set_slice("x", kind="row", z="mid"), tomolive.KeyTypeError, 10,
             "set_slice"),
            (lambda: c.set_slice("x", kind="plane", size=[0, 4],
                                 orientation=[1] * 9), tomolive.OutOfRange, 12, "set_slice"),
            (lambda: c.set_slice("x", kind="row", z=float("nan")), tomolive.NotFinite, 11,
             "set_slice"),
        ]
        for fn, cls, code, cmd in cases:
            with self.assertRaises(cls, msg=cls.__name__) as cm:
                fn()
            e = cm.exception
            self.assertEqual((e.code, e.cmd), (code, cmd), str(e))
            self.assertIsInstance(e, tomolive.TomoliveError)
            self.assertTrue(e.message)
        # slices.max = 3: the fourth is E_RESOURCE
        c.set_slice("s2", kind="row", z=1)
        c.set_slice("s3", kind="row", z=1)
        with self.assertRaises(tomolive.ResourceError):
            c.set_slice("s4", kind="row", z=1)
        self.assertEqual([s["id"] for s in c.list_slices()], ["keep", "s2", "s3"])
        for sid in ("keep", "s2", "s3"):
            c.remove_slice(sid)

    def test_local_checks_and_timeouts(self):
        """Invalid requests fail here, unsent; a silent endpoint times out; a late reply
        to a timed-out request is not taken for the next one's."""
        total = self.ctl.status()["requests"]["total"]
        with self.assertRaises(tomolive.OutOfRange):
            self.ctl.request("x" * 65)
        with self.assertRaises(tomolive.NotAMap):
            self.ctl.request("set_slice", {1: 2})
        self.assertEqual(self.ctl.status()["requests"]["total"], total + 1)

        silent = tomolive.Control("ipc://%s/nobody" % self.d.dir, timeout=0.2)
        t0 = time.monotonic()
        with self.assertRaises(TimeoutError):
            silent.status()
        self.assertLess(time.monotonic() - t0, 2.0)
        silent.close()

        with self.assertRaises(TimeoutError):
            self.ctl.request("list_slices", timeout=0)   # its reply arrives later...
        self.assertEqual(self.ctl.status()["protocol"], 1)  # ...and is skipped here

        p = tomolive.Pusher("ipc://%s/nobody-ingest" % self.d.dir)
        with self.assertRaises(TimeoutError):
            p.end(timeout=0.2)
        p.close(0)


class SubscriberUnit(unittest.TestCase):
    """Subscriber against a hand-made publisher: seq gaps, bad messages, timeouts."""

    def test_gaps_and_rejects(self):
        import msgpack
        d = tempfile.mkdtemp(prefix="tlpy-pub-")
        ep = "ipc://%s/pub" % d
        ctx = zmq.Context.instance()
        pub = ctx.socket(zmq.XPUB)
        pub.bind(ep)
        sub = tomolive.Subscriber(ep, ["s"])
        try:
            self.assertEqual(pub.recv(), b"\x01slice/s/")  # the subscription has arrived

            def send(seq, payload=b"\0" * 8, topic=b"slice/s/", **change):
                h = {"v": 1, "type": "slice", "id": "s", "seq": seq, "shape": [1, 2],
                     "dtype": "f32", "orientation": [2, 0, 0, 0, 1, 0, -1, 0, 0],
                     "projections_used": 1, "missing": 0, "window": [0, 0], "t_acq": 1,
                     "t_pub": 2, "kernel": "k", **change}
                pub.send_multipart([topic, msgpack.packb(h), payload])

            send(1)
            send(2)
            send(3, payload=b"\0" * 7)     # wrong payload length: rejected
            send(5)                        # 3 and 4 missed (3 was sent but was invalid)
            send(6, v=2)                   # another major version: rejected
            got = [sub.recv(5).seq for _ in range(3)]
            self.assertEqual(got, [1, 2, 5])
            self.assertEqual(sub.received, {"s": 3})
            self.assertEqual(sub.missed, {"s": 2})
            self.assertEqual(sub.last_seq, {"s": 5})
            with self.assertRaises(TimeoutError):
                sub.recv(0.2)
            self.assertEqual(sub.rejected, 2)
            self.assertIsInstance(sub.last_error, tomolive.UnsupportedVersion)
            sub.strict = True
            send(7, payload=b"")
            with self.assertRaises(tomolive.PayloadLength):
                sub.recv(5)
        finally:
            sub.close()
            pub.close(0)
            shutil.rmtree(d, True)


class ShmUnit(unittest.TestCase):
    """Subscriber(shm=True) against a hand-made publisher and shared-memory object laid
    out as PROTOCOL.md section 10.1 says: 4096-byte slot headers, the sequence word 64
    bytes before each slot's pixels."""

    SLOT = 2 * 4096  # header page + the pixels rounded up to a page

    def setUp(self):
        self.name = "/tlpy-unit-%d" % os.getpid()
        self.path = "/dev/shm" + self.name
        if not os.path.isdir("/dev/shm"):
            self.skipTest("no /dev/shm")
        self.mm = self.create()
        self.dir = tempfile.mkdtemp(prefix="tlpy-pub-")
        self.ep = "ipc://%s/pub" % self.dir
        self.pub = zmq.Context.instance().socket(zmq.XPUB)
        self.pub.bind(self.ep)

    def tearDown(self):
        self.mm.close()
        self.pub.close(0)
        shutil.rmtree(self.dir, True)
        if os.path.exists(self.path):
            os.unlink(self.path)

    def create(self) -> mmap.mmap:
        """A new object of 4 slots under self.name (replacing one of that name)."""
        if os.path.exists(self.path):
            os.unlink(self.path)
        fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        os.ftruncate(fd, 4 * self.SLOT)
        mm = mmap.mmap(fd, 4 * self.SLOT)
        os.close(fd)
        return mm

    def put(self, mm: mmap.mmap, slot: int, seq: int, word: int = -1) -> int:
        """The pixels of seq in slot (2 x 3 float32: seq, seq+1, ...); the word is seq
        unless given. Returns the offset of the pixels."""
        off = slot * self.SLOT + 4096
        mm[off:off + 24] = np.arange(seq, seq + 6, dtype="<f4").tobytes()
        struct.pack_into("<Q", mm, off - 64, seq if word < 0 else word)
        return off

    def send(self, seq: int, off: int, name: str = "", final: bool = False):
        import msgpack
        h = {"v": 1, "type": "slice", "id": "s", "seq": seq, "shape": [2, 3],
             "dtype": "f32", "orientation": [3, 0, 0, 0, 2, 0, -1.5, -1, 0],
             "projections_used": 1, "missing": 0, "window": [0, 0], "t_acq": 1,
             "t_pub": 2, "kernel": "k", "shm_name": name or self.name, "shm_offset": off}
        if final:
            h["final"] = True
        self.pub.send_multipart([b"shm/s/", msgpack.packb(h)])

    def test_stale_unreadable_and_renewed(self):
        sub = tomolive.Subscriber(self.ep, ["s"], shm=True)
        try:
            self.assertEqual(self.pub.recv(), b"\x01shm/s/")
            self.send(1, self.put(self.mm, 0, 1))
            self.send(2, self.put(self.mm, 1, 2, word=0))  # being written: stale
            self.send(3, self.put(self.mm, 2, 3))
            self.send(4, 4096, name=self.name + "-none")  # no such object
            self.send(5, 4 * self.SLOT)                  # the pixels run past the end
            self.send(6, self.put(self.mm, 3, 6))
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                got = [sub.recv(5) for _ in range(3)]
            self.assertEqual([s.seq for s in got], [1, 3, 6])
            for s in got:
                self.assertTrue(np.array_equal(s.image, np.arange(s.seq, s.seq + 6,
                                                                  dtype=np.float32).reshape(2, 3)))
                self.assertIsNone(s.frame)
            self.assertEqual(len(w), 1)  # the first unreadable one only
            self.assertIn(self.name + "-none", str(w[0].message))
            self.assertEqual((sub.received, sub.missed, sub.stale, sub.unreadable),
                             ({"s": 3}, {"s": 3}, {"s": 1}, 2))
            self.assertIsInstance(sub.last_error, tomolive.ShmError)

            # the object made anew under the same name (a restarted daemon), its slot 0
            # holding seq 1 again with other pixels: read from the new object, not the
            # old mapping
            old = self.mm
            self.mm = self.create()
            off = self.put(self.mm, 0, 1)
            self.mm[off:off + 24] = np.full(6, -1, "<f4").tobytes()
            self.send(1, off)
            s = sub.recv(5)
            self.assertTrue(np.array_equal(s.image, np.full((2, 3), -1, np.float32)))
            old.close()

            # a final slice whose slot was reused still ends until_final
            self.send(8, self.put(self.mm, 1, 8))
            self.send(9, self.put(self.mm, 2, 9, word=10), final=True)
            self.assertEqual([s.seq for s in sub.slices(timeout=5, until_final=True)], [8])
            self.assertEqual(sub.stale, {"s": 2})

            sub.strict = True
            self.send(10, 4096, name=self.name + "-none")
            with self.assertRaises(tomolive.ShmError):
                sub.recv(5)
        finally:
            sub.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
