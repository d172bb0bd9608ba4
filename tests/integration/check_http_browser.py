#!/usr/bin/python3
"""check_http_browser.py — the live preview page in a real browser.

Starts tomolived (CPU backend, private ipc:// endpoints, HTTP on a free loopback port, the
page from the source tree) and headless Chromium, drives the page over the DevTools
protocol, and feeds the daemon a simulated phantom scan (`tomolive push`):
  - the page connects, the four canvases fill, the row canvas shows the phantom's bright
    elliptical ring (the modified Shepp-Logan skull) where the geometry puts it, darker
    inside and dark outside, and the ortho-slice through the axis shows the ring's two
    walls; a screenshot is saved as tests/integration/check_http_browser.png;
  - dragging the x crosshair in the z view (DevTools mouse events) moves the x ortho-slice:
    a new slice arrives at the new position, with the ring's walls closer together (the
    screenshot after it: check_http_browser-moved.png);
  - the daemon restarts and the page reconnects by itself, and shows the next scan.

Exit 0 pass, 1 fail, 77 skip (no chromium, or no python3-websocket).
"""
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

try:
    import websocket  # Debian python3-websocket (websocket-client)
except ImportError:
    # run by another python (a pyenv one on PATH): Debian's has the module
    if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    print("SKIP: python3-websocket is not installed")
    sys.exit(77)

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
if not CHROMIUM:
    print("SKIP: chromium is not installed")
    sys.exit(77)

BUILD = os.path.abspath(os.environ.get("top_builddir", "."))
SRC = os.path.abspath(os.environ.get("top_srcdir", os.path.join(os.path.dirname(__file__), "..", "..")))
SHOT = os.path.join(BUILD, "tests", "integration", "check_http_browser.png")
ROWS, COLS, NPROJ = 64, 256, 360


def log(*a):
    print(*a, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(what, fn, timeout=30.0, every=0.1):
    t0 = time.time()
    while time.time() - t0 < timeout:
        v = fn()
        if v:
            return v
        time.sleep(every)
    raise AssertionError("timed out waiting for " + what)


class Daemon:
    def __init__(self, tmp, port, tag):
        self.ep = {k: "ipc://%s/%s-%s" % (tmp, tag, k) for k in ("ingest", "control", "slices")}
        self.port = port
        self.log_path = os.path.join(tmp, tag + ".log")
        cmd = [os.path.join(BUILD, "daemon", "tomolived"), "--backend", "cpu",
               "--set", "ingest.endpoint=" + self.ep["ingest"],
               "--set", "control.endpoint=" + self.ep["control"],
               "--set", "slices.endpoint=" + self.ep["slices"],
               "--set", "http.listen=127.0.0.1:%d" % port,
               "--set", "http.root=" + os.path.join(SRC, "daemon", "www"),
               # no kernel timing (seconds per slice size, while frames queue), and no cache
               # of the user's: the test must not depend on what ran before it
               "--set", "engine.tune=off",
               "--set", "engine.tune_cache=" + os.path.join(tmp, tag + "-tune.json")]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(self.log_path, "w"))
        wait_for("the daemon's HTTP server", self.up, 15)

    def up(self):
        if self.proc.poll() is not None:
            raise AssertionError("tomolived exited:\n" + open(self.log_path).read())
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/api/status" % self.port, timeout=2).read()
            return True
        except OSError:
            return False

    def push(self, *args):
        tool = os.path.join(BUILD, "clients", "tomolive")
        subprocess.run([tool, "push", "--endpoint", self.ep["ingest"], "--quiet"] + list(args),
                       check=True, timeout=120)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


class Browser:
    """Headless Chromium and one page, over the DevTools protocol."""

    def __init__(self, tmp):
        self.port = free_port()
        profile = os.path.join(tmp, "profile")
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-dev-shm-usage", "--user-data-dir=" + profile,
             "--remote-debugging-port=%d" % self.port, "--remote-allow-origins=*",
             "--window-size=1280,900", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "chromium.log"), "w"))
        target = wait_for("chromium's DevTools", self._page_target, 30, 0.2)
        self.ws = websocket.create_connection(target, timeout=30, suppress_origin=True)
        self.next_id = 0
        self.call("Page.enable")
        self.call("Runtime.enable")

    def _page_target(self):
        if self.proc.poll() is not None:
            raise AssertionError("chromium exited")
        try:
            pages = json.loads(urllib.request.urlopen("http://127.0.0.1:%d/json/list" % self.port, timeout=2).read())
        except OSError:
            return None
        for p in pages:
            if p.get("type") == "page" and p.get("webSocketDebuggerUrl"):
                return p["webSocketDebuggerUrl"]
        return None

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            m = json.loads(self.ws.recv())
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise AssertionError("%s: %s" % (method, m["error"]))
                return m.get("result", {})
            if m.get("method") == "Runtime.exceptionThrown":
                log("page exception:", json.dumps(m["params"])[:500])

    def eval(self, expr, await_promise=False):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=await_promise)
        if "exceptionDetails" in r:
            raise AssertionError("%s: %s" % (expr[:80], json.dumps(r["exceptionDetails"])[:800]))
        return r["result"].get("value")

    def mouse(self, kind, x, y, buttons):
        self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", buttons=buttons,
                  clickCount=1 if kind != "mouseMoved" else 0)

    def close(self):
        try:
            self.ws.close()
        except Exception:
            pass
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


FRAMES_JS = """JSON.stringify(Object.fromEntries(Object.entries(tomolive.state.frames).map(([k, f]) =>
  [k, {seq: f.seq, proj: f.projections, w: f.width, h: f.height, o: f.orientation, count: f.count,
       final: f.final}])))"""

# Luminance statistics of a canvas (the gray colour map: R = G = B) in regions given by a
# function of the volume coordinates of each pixel's centre: JS returns, per region name,
# the mean and the pixel count, plus the whole image's mean and standard deviation.
REGIONS_JS = """(() => {
  const id = %s, f = tomolive.state.frames[id], c = tomolive.canvas(id);
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  const o = f.orientation, W = c.width, H = c.height, regions = %s, acc = {};
  let sum = 0, sum2 = 0;
  for (let i = 0; i < H; i++) for (let j = 0; j < W; j++) {
    const s = (j + 0.5) / W, t = 1 - (i + 0.5) / H;
    const p = [0, 1, 2].map((k) => o[6 + k] + s * o[k] + t * o[3 + k]);
    const v = d[4 * (i * W + j)];
    sum += v; sum2 += v * v;
    const r = regions(p[0], p[1], p[2]);
    if (r) { acc[r] = acc[r] || [0, 0]; acc[r][0] += v; acc[r][1]++; }
  }
  const n = W * H, out = {mean: sum / n, std: Math.sqrt(Math.max(0, sum2 / n - (sum / n) ** 2)), w: W, h: H};
  for (const r in acc) out[r] = acc[r][0] / acc[r][1];
  return out;
})()"""

# The modified Shepp-Logan skull as `tomolive push` scales it: radius 0.45 cols, outer
# ellipsoid semi-axes 0.69 (x), 0.92 (y), 0.81 (z, of 0.45 rows) around the middle row.
R, RZ, ZC = 0.45 * COLS, 0.45 * ROWS, (ROWS - 1) / 2.0
A, B, C = 0.69 * R, 0.92 * R, 0.81 * RZ
A2, B2, Y2 = 0.6624 * R, 0.874 * R, -0.0184 * R  # the inner (-0.8) ellipsoid: the skull is between


def wall_bands(x):
    """Columns of the skull's two walls on the middle row of the ortho-slice at x (image
    columns run along y: column j is y = j + 0.5 - COLS / 2): (left, right) as (lo, hi)."""
    outer = B * math.sqrt(1 - (x / A) ** 2)
    inner = B2 * math.sqrt(1 - (x / A2) ** 2)
    col = lambda y: y + COLS / 2 - 0.5
    return (col(-outer), col(Y2 - inner)), (col(Y2 + inner), col(outer))


def check_walls(w, x):
    (l0, l1), (r0, r1) = wall_bands(x)
    log("  expected walls in columns %.1f..%.1f and %.1f..%.1f" % (l0, l1, r0, r1))
    assert l0 - 2 <= w["left"] <= l1 + 2 and r0 - 2 <= w["right"] <= r1 + 2, w
    assert w["peak"] > w["centre"] + 40, w


def ring_regions(x_plane=None):
    """JS: classify a point by its elliptical radius in the skull (ring, inside, outside)."""
    return """((x, y, z) => {
      const rho = Math.sqrt((x / %f) ** 2 + (y / %f) ** 2 + ((z - %f) / %f) ** 2);
      return rho > 0.955 && rho < 1.0 ? 'ring' : rho < 0.8 ? 'inside' : rho > 1.12 && rho < 1.35 ? 'outside' : null;
    })""" % (A, B, ZC, C)


def check_ring(browser, view, label):
    st = browser.eval(REGIONS_JS % (json.dumps(view), ring_regions()))
    log("%s: %s" % (label, json.dumps({k: round(v, 1) for k, v in st.items()})))
    assert st["std"] > 10, "%s looks blank: %s" % (label, st)
    assert st["ring"] > st["inside"] + 40, "%s: no bright ring: %s" % (label, st)
    assert st["ring"] > st["outside"] + 60, "%s: ring not brighter than outside: %s" % (label, st)
    assert st["inside"] > st["outside"], "%s: inside not brighter than outside: %s" % (label, st)
    return st


def walls(browser, view):
    """Columns of the two brightest points of the middle row of an ortho view (left half,
    right half) and the brightness at the centre, from the canvas."""
    return browser.eval("""(() => {
      const c = tomolive.canvas(%s), W = c.width, H = c.height;
      const d = c.getContext('2d').getImageData(0, Math.floor(H / 2), W, 1).data;
      let l = 0, r = W - 1;
      for (let j = 0; j < W / 2; j++) if (d[4 * j] > d[4 * l]) l = j;
      for (let j = Math.ceil(W / 2); j < W; j++) if (d[4 * j] > d[4 * r]) r = j;
      return {left: l, right: r, width: W, peak: Math.min(d[4 * l], d[4 * r]), centre: d[4 * Math.floor(W / 2)]};
    })()""" % json.dumps(view))


def frames(browser):
    return json.loads(browser.eval(FRAMES_JS))


def main():
    tmp = tempfile.mkdtemp(prefix="tomolive-browser-")
    port = free_port()
    daemon = browser = None
    ok = False
    try:
        daemon = Daemon(tmp, port, "d1")
        browser = Browser(tmp)
        browser.call("Page.navigate", url="http://127.0.0.1:%d/" % port)
        wait_for("the page to connect", lambda: browser.eval(
            "!!(window.tomolive && tomolive.state.connected)"), 20)
        log("page connected")

        # a phantom scan; every view complete (all projections in its window)
        daemon.push("--rows", str(ROWS), "--cols", str(COLS), "--projections", str(NPROJ),
                    "--darks", "4", "--flats", "4", "--rate", "400")
        views = ["preview-row", "preview-x", "preview-y", "preview-z"]
        fr = wait_for("the four views of the full window", lambda: (lambda f: f if all(
            v in f and f[v]["proj"] == NPROJ for v in views) else None)(frames(browser)), 60)
        # the scan has ended: the final slices, so no newer image replaces a canvas under test
        fr = wait_for("the four views' final slices", lambda: (lambda f: f if all(
            f[v]["final"] for v in views) else None)(frames(browser)), 30)
        log("frames:", json.dumps({k: {"seq": v["seq"], "size": [v["w"], v["h"]], "final": v["final"]}
                                   for k, v in fr.items()}))
        assert (fr["preview-row"]["w"], fr["preview-row"]["h"]) == (COLS, COLS)
        assert (fr["preview-x"]["w"], fr["preview-x"]["h"]) == (COLS, ROWS)

        # the phantom's structure on the canvases
        check_ring(browser, "preview-row", "row z=%d" % (ROWS // 2))
        check_ring(browser, "preview-z", "ortho z")
        wx = walls(browser, "preview-x")
        log("ortho x=0, middle row:", wx)
        check_walls(wx, 0.0)  # the brightest points of the middle row lie in the skull's walls

        shot = browser.call("Page.captureScreenshot", format="png")
        import base64
        os.makedirs(os.path.dirname(SHOT), exist_ok=True)
        with open(SHOT, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        log("screenshot:", SHOT)

        # drag the x crosshair (the red vertical line) of the z view from x = 0 to x = 40
        seq0 = fr["preview-x"]["seq"]
        rect = browser.eval("""(() => { const o = document.querySelector('#canvas-preview-z')
            .parentElement.querySelector('canvas.overlay');
            o.scrollIntoView({block: 'center'});
            const r = o.getBoundingClientRect();
            return {left: r.left, top: r.top, width: r.width, height: r.height}; })()""")
        o = fr["preview-z"]["o"]
        to_x = lambda vx: rect["left"] + (vx - o[6]) / o[0] * rect["width"]
        y = rect["top"] + rect["height"] * 0.3
        browser.mouse("mousePressed", to_x(0), y, 1)
        for k in range(1, 11):
            browser.mouse("mouseMoved", to_x(4 * k), y, 1)
            time.sleep(0.03)  # the pace of a hand dragging: part of what is tested
        browser.mouse("mouseReleased", to_x(40), y, 0)
        moved = wait_for("a new x slice at x = 40", lambda: (lambda f: f if f["preview-x"]["seq"] > seq0 and
                         abs(f["preview-x"]["o"][6] - 40) < 1.0 else None)(frames(browser)), 30)
        wait_for("the page's moves of x all answered", lambda: browser.eval(
            "!('preview-x' in tomolive.state.local)"), 10)
        pos = browser.eval("tomolive.state.positions['preview-x']")
        log("moved: preview-x at x = %.2f (seq %d -> %d), page position %.2f" % (
            moved["preview-x"]["o"][6], seq0, moved["preview-x"]["seq"], pos))
        assert abs(pos - 40) < 1.0
        wx2 = walls(browser, "preview-x")
        log("ortho x=%.2f, middle row:" % moved["preview-x"]["o"][6], wx2)
        check_walls(wx2, moved["preview-x"]["o"][6])  # closer together than at x = 0
        shot = browser.call("Page.captureScreenshot", format="png")
        with open(SHOT.replace(".png", "-moved.png"), "wb") as f:
            f.write(base64.b64decode(shot["data"]))

        # the daemon restarts on the same port: the page reconnects, and shows the next scan
        assert daemon.stop() == 0, open(daemon.log_path).read()
        wait_for("the page to see the daemon go", lambda: browser.eval("!tomolive.state.connected"), 10)
        daemon = Daemon(tmp, port, "d2")
        wait_for("the page to reconnect", lambda: browser.eval(
            "tomolive.state.connected && tomolive.state.reconnects >= 1"), 20)
        log("page reconnected")
        before = frames(browser)["preview-row"]["count"]
        daemon.push("--rows", "32", "--cols", "128", "--projections", "180", "--series", "2")
        wait_for("the next scan's slices", lambda: (lambda f: f["preview-row"]["count"] > before and
                 f["preview-row"]["w"] == 128 and f["preview-row"]["proj"] == 180)(frames(browser)), 60)
        log("second scan shown:", frames(browser)["preview-row"])
        assert daemon.stop() == 0
        ok = True
    finally:
        if browser:
            browser.close()
        if daemon:
            daemon.stop()
        if not ok:
            for name in sorted(os.listdir(tmp)):
                if name.endswith(".log"):
                    log("===== %s (last 30 lines)" % name)
                    log("".join(open(os.path.join(tmp, name), errors="replace").readlines()[-30:]))
        shutil.rmtree(tmp, ignore_errors=True)
    log("PASS: page, phantom, crosshair drag, reconnect")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AssertionError as e:
        log("FAIL:", e)
        sys.exit(1)
