"""The example (clients/python/examples/live_slice.py, headless) and the progress
display of `tomolive push` and `tomolive sub`, on a terminal (a pseudo-terminal here)
and off one, against a real tomolived."""
from __future__ import annotations

import os
import pty
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

import tlfixture as F
import tomolive
from test_client import DaemonCase, W, push_disk


def run_on_pty(argv, stream: str, timeout: float = 60, **kw):
    """Runs argv with its stdout or stderr (``stream``) on a pseudo-terminal; returns
    (exit status, what the terminal got, the other stream's text)."""
    master, slave = pty.openpty()
    other = subprocess.PIPE
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                         stdout=slave if stream == "stdout" else other,
                         stderr=slave if stream == "stderr" else other, **kw)
    os.close(slave)
    got = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            got += chunk
        elif p.poll() is not None:
            break
    os.close(master)
    pipe = p.stderr if stream == "stdout" else p.stdout
    rest = pipe.read().decode()
    pipe.close()
    p.wait(10)
    return p.returncode, got.decode("utf-8", "replace"), rest


try:
    import matplotlib
    HAVE_MPL = True
except ImportError:
    HAVE_MPL = False


@unittest.skipUnless(HAVE_MPL, "no matplotlib (Debian: python3-matplotlib)")
class Example(DaemonCase):
    def test_live_slice_headless(self):
        """live_slice.py --row --save defines the slice, follows it to the final image and
        writes that image as a PNG of the slice's size that looks like the slice."""
        tmp = tempfile.mkdtemp(prefix="tlpy-ex-")
        self.addCleanup(shutil.rmtree, tmp, True)
        png = os.path.join(tmp, "disk.png")
        ex = os.path.join(F.SRCDIR, "clients", "python", "examples", "live_slice.py")
        env = dict(os.environ, MPLBACKEND="Agg", MPLCONFIGDIR=os.path.dirname(png))
        env.pop("DISPLAY", None)
        p = subprocess.Popen([sys.executable, ex, "--endpoint", self.d.slices, "--control",
                              self.d.control, "--row", "1", "--save", png, "--until-final",
                              "--timeout", "60", "disk"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            while not any(s["id"] == "disk" and s["wanted"] for s in self.ctl.list_slices()):
                self.assertIsNone(p.poll(), p.stderr.read() if p.poll() is not None else "")
                self.assertLess(time.monotonic(), deadline, "the example never subscribed")
                time.sleep(0.05)
            with tomolive.Subscriber(self.d.slices, all=True) as sub:
                # a prefix of our own (slice/), so the daemon's count says it has arrived
                self.ctl.wait_wanted(["disk"], subscriptions=2)
                push_disk(self.d, 1)
                ours = list(sub.slices(timeout=60, until_final=True))[-1]
            out, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
        self.assertEqual(p.returncode, 0, err)
        self.assertIn("final", out)
        self.assertIn("wrote " + png, out)
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        img = plt.imread(png)
        print("PNG %s: %s %s, range %.3f..%.3f" % (png, img.shape, img.dtype, img.min(),
                                                     img.max()))
        self.assertEqual(img.shape[:2], (W, W))
        grey = img[..., :3].mean(axis=2)
        self.assertGreater(float(grey.std()), 0.05)  # not a constant image
        # grey scale of the same slice: the PNG follows the image pixel for pixel
        corr = float(np.corrcoef(grey.ravel(), ours.image.ravel())[0, 1])
        print("correlation of the PNG with the slice: %.4f" % corr)
        self.assertGreater(corr, 0.99)
        self.ctl.remove_slice("disk")


class Progress(DaemonCase):
    def push_argv(self, *more):
        return [F.tool("tomolive"), "push", "--endpoint", self.d.ingest, "--rows", "4",
                "--cols", "32", "--projections", "300", "--darks", "2", "--flats", "2",
                "--rate", "200"] + list(more)

    def test_push_terminal(self):
        """On a terminal: one bar redrawn in place (<= 10 times a second) with percent,
        rate and ETA, ending at 100 %; the summary on stdout as always."""
        t0 = time.monotonic()
        rc, tty, out = run_on_pty(self.push_argv(), "stderr")
        secs = time.monotonic() - t0
        self.assertEqual(rc, 0, tty)
        self.assertRegex(out, r"^pushed 304 frames \(2 darks, 2 flats, 300 projections, "
                              r"0 dropped\) in [\d.]+ s: [\d.]+ frames/s")
        draws = re.findall(r"\r\[([#.]{20})\] +(\d+)% (\d+) frames/s( ETA (\d+ s|--))?", tty)
        print("%d redraws in %.2f s; last: %r" % (len(draws), secs, tty[-80:]))
        self.assertGreaterEqual(len(draws), 5)
        self.assertLessEqual(len(draws), secs * 10 + 3)
        self.assertTrue(all(d[3] for d in draws[:-1]), "every bar but the last has an ETA")
        self.assertEqual((draws[-1][0], draws[-1][1]), ("#" * 20, "100"))
        pct = [int(d[1]) for d in draws]
        self.assertEqual(pct, sorted(pct))
        self.assertTrue(tty.rstrip("\r\n").endswith("\x1b[K"))
        self.assertNotIn("\n", tty.rstrip("\r\n"))  # one line, redrawn

    def test_push_plain_and_quiet(self):
        """Not a terminal: plain lines, at most one a second; --quiet: none."""
        t0 = time.monotonic()
        p = F.run(self.push_argv())
        secs = time.monotonic() - t0
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stderr.splitlines()
        print("%d progress lines in %.2f s: %r" % (len(lines), secs, lines))
        self.assertGreaterEqual(len(lines), 1)
        self.assertLessEqual(len(lines), int(secs) + 1)
        for ln in lines[:-1]:
            self.assertRegex(ln, r"^tomolive push: \d+/304 frames \(\d+%\), [\d.]+ frames/s, "
                                 r"ETA \d+ s$")
        self.assertRegex(lines[-1], r"^tomolive push: 304/304 frames \(100%\), [\d.]+ frames/s$")
        self.assertNotIn("\r", p.stderr)
        q = F.run(self.push_argv("--quiet"))
        self.assertEqual((q.returncode, q.stderr), (0, ""))
        self.assertTrue(q.stdout.startswith("pushed 304 frames"))

    def test_sub_terminal(self):
        """`tomolive sub` on a terminal: a status line with slices/s and latency p50
        instead of a line per slice; the summary after it.  Off a terminal (and with
        --lines): a line per slice."""
        self.ctl.set_slice("pr", kind="row", z=1)
        argv = [F.tool("tomolive"), "sub", "--endpoint", self.d.slices, "--until-final",
                "--timeout", "60", "pr"]
        master = {}

        def pusher():
            self.ctl.wait_wanted(["pr"], timeout=30)
            r = F.run(self.push_argv("--quiet"))
            master["push"] = r.returncode

        import threading
        for mode in ("tty", "pipe", "lines"):
            th = threading.Thread(target=pusher)
            th.start()
            if mode == "tty":
                rc, out, err = run_on_pty(argv, "stdout")
            else:
                r = F.run(argv + (["--lines"] if mode == "lines" else []))
                rc, out, err = r.returncode, r.stdout, r.stderr
            th.join()
            self.assertEqual((rc, master["push"]), (0, 0), err)
            # the daemon sees the unsubscription asynchronously: wait for it
            deadline = time.monotonic() + 10
            while any(s["wanted"] for s in self.ctl.list_slices()) and \
                    time.monotonic() < deadline:
                time.sleep(0.02)
            per_slice = re.findall(r"^id=pr seq=\d+ ", out, re.M)
            self.assertIn("summary id=pr received=", out)
            if mode == "tty":
                status = re.findall(r"\r(\d+) slices  ([\d.]+) slices/s  latency p50 "
                                    r"([\d.]+) ms  last pr seq=(\d+)( final)?", out)
                print("tty: %d status redraws, last %r" % (len(status), status[-1:]))
                self.assertGreaterEqual(len(status), 1)
                self.assertEqual(status[-1][4], " final")
                self.assertEqual(per_slice, [])
                n = int(status[-1][0])
                self.assertIn("summary id=pr received=%d " % n, out)
            else:
                self.assertGreaterEqual(len(per_slice), 1)
                self.assertNotIn("\r", out)
                self.assertNotIn("slices/s", out)
        self.ctl.remove_slice("pr")


if __name__ == "__main__":
    unittest.main(verbosity=2)
