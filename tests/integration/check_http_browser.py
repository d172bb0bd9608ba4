#!/usr/bin/python3
"""check_http_browser.py — the live preview page in a real browser.

Starts tomolived (CPU backend, private ipc:// endpoints, HTTP on a free loopback port, the
page from the source tree) and headless Chromium, drives the page over the DevTools
protocol, and feeds the daemon a simulated phantom scan (`tomolive push`):
  - the page connects, the four canvases fill, the row canvas shows the phantom's bright
    elliptical ring (the modified Shepp-Logan skull) where the geometry puts it, darker
    inside and dark outside, and the ortho-slice through the axis shows the ring's two
    walls; a screenshot is saved as tests/integration/check_http_browser.png;
  - the page as an operator's tool, at 1400 x 900: the views fill the window (no strips),
    the four views show four different planes by default, the footer shows the value under
    the pointer without moving any image, a shift-drag draws a line profile, the wheel zooms
    about the pointer, a drag pans and a double-click unzooms, the shown slice exports as a
    float32 TIFF (parsed here) and a PNG snapshot, a moved view is marked stale until its
    new image arrives, and a final slice is marked final;
  - dragging the x crosshair in the z view (DevTools mouse events) moves the x ortho-slice:
    a new slice arrives at the new position, with the ring's walls closer together (the
    screenshot after it: check_http_browser-moved.png);
  - the daemon restarts and the page reconnects by itself, and shows the next scan.
The daemon runs as configured by default (views closed, an operator token): the page asks
for the token in its dialog, a wrong one is refused there, the right one typed in opens the
views and the actions, and after the restart the page gives it again by itself (from
sessionStorage). No Content-Security-Policy violation may happen on the way.

With TL_BROWSER_SHOTS=DIR, more screenshots (the tools in use, a stale view) go to DIR.

Exit 0 pass, 1 fail, 77 skip (no chromium, or no python3-websocket).
"""
import base64
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import struct
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
VW, VH = 1400, 900  # the window the page is judged in
VIEWS = ["preview-row", "preview-x", "preview-y", "preview-z"]
TOKEN = "browser-test-operator-token-0123456789"


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
        token_file = os.path.join(tmp, "token")
        with open(token_file, "w") as f:
            f.write(TOKEN + "\n")
        os.chmod(token_file, 0o600)
        cmd = [os.path.join(BUILD, "daemon", "tomolived"), "--backend", "cpu",
               "--set", "ingest.endpoint=" + self.ep["ingest"],
               "--set", "control.endpoint=" + self.ep["control"],
               "--set", "slices.endpoint=" + self.ep["slices"],
               "--set", "http.listen=127.0.0.1:%d" % port,
               "--set", "http.root=" + os.path.join(SRC, "daemon", "www"),
               "--set", "http.token_file=" + token_file,
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
            req = urllib.request.Request("http://127.0.0.1:%d/api/status" % self.port,
                                         headers={"Authorization": "Bearer " + TOKEN})
            urllib.request.urlopen(req, timeout=2).read()
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
             "--window-size=%d,%d" % (VW, VH), "about:blank"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "chromium.log"), "w"))
        target = wait_for("chromium's DevTools", self._page_target, 30, 0.2)
        self.ws = websocket.create_connection(target, timeout=30, suppress_origin=True)
        self.next_id = 0
        self.call("Page.enable")
        self.call("Runtime.enable")
        # the viewport itself 1400 x 900 (a headless window's size includes no browser chrome,
        # but say it exactly)
        self.call("Emulation.setDeviceMetricsOverride", width=VW, height=VH, deviceScaleFactor=1,
                  mobile=False)
        # what the daemon's Content-Security-Policy would block, kept for the end
        self.call("Page.addScriptToEvaluateOnNewDocument", source="""window.cspViolations = [];
            document.addEventListener('securitypolicyviolation', (e) =>
              window.cspViolations.push(e.violatedDirective + ' ' + e.blockedURI));""")

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

    def mouse(self, kind, x, y, buttons, modifiers=0, clicks=1):
        self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left" if kind != "mouseMoved" or buttons else "none",
                  buttons=buttons, modifiers=modifiers, clickCount=clicks if kind != "mouseMoved" else 0)

    def wheel(self, x, y, delta_y):
        self.call("Input.dispatchMouseEvent", type="mouseWheel", x=x, y=y, deltaX=0, deltaY=delta_y)

    def drag(self, a, b, steps=8, modifiers=0):
        """Presses at a, moves to b in steps, releases there (CSS pixels of the viewport)."""
        self.mouse("mousePressed", a[0], a[1], 1, modifiers)
        for k in range(1, steps + 1):
            t = k / steps
            self.mouse("mouseMoved", a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1]), 1, modifiers)
        self.mouse("mouseReleased", b[0], b[1], 0, modifiers)

    def screenshot(self, path):
        shot = self.call("Page.captureScreenshot", format="png")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))

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


# Every view has its image of the whole window at the plane the page asked for, and the scan
# has ended: its final, or (a view the page moved after the end) the last image it will get.
SETTLED_JS = """(() => {
  const s = tomolive.state;
  return !!s.scan && s.scan.finished && Object.keys(s.local).length === 0 && %s.every((id) =>
    s.frames[id] && s.frames[id].projections === %d && !tomolive.isStale(id));
})()""" % (json.dumps(VIEWS), NPROJ)

# Rectangles [left, top, width, height] in CSS pixels of the viewport: each view's panel, its
# stage (the area its image may use) and its image canvas; the footer; the page's height.
LAYOUT_JS = """(() => {
  const box = (el) => { const b = el.getBoundingClientRect(); return [b.left, b.top, b.width, b.height]; };
  const out = {vw: innerWidth, vh: innerHeight, height: document.documentElement.scrollHeight, views: {},
               footer: box(document.querySelector('footer')), profile: box(document.getElementById('profile'))};
  for (const id of %s) {
    const p = document.getElementById('panel-' + id);
    out.views[id] = {panel: box(p), stage: box(p.querySelector('.stage')), image: box(tomolive.canvas(id))};
  }
  return out;
})()""" % json.dumps(VIEWS)


def layout(browser):
    return browser.eval(LAYOUT_JS)


def visible_area(r):
    x0, y0, x1, y1 = max(0, r[0]), max(0, r[1]), min(VW, r[0] + r[2]), min(VH, r[1] + r[3])
    return max(0, x1 - x0) * max(0, y1 - y0)


def overlap(a, b):
    w = min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0])
    h = min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1])
    return max(0, w) * max(0, h)


def check_layout(browser):
    """The views use the window: they cover most of it, no scrolling, no strips."""
    lay = layout(browser)
    assert (lay["vw"], lay["vh"]) == (VW, VH), lay
    panels = [lay["views"][v]["panel"] for v in VIEWS]
    for k, a in enumerate(panels):
        for b in panels[k + 1:]:
            assert overlap(a, b) < 1, "views overlap: %s %s" % (a, b)
    cover = sum(visible_area(r) for r in panels) / (VW * VH)
    images = sum(visible_area(lay["views"][v]["image"]) for v in VIEWS) / (VW * VH)
    smallest = min(min(lay["views"][v]["stage"][2], lay["views"][v]["stage"][3]) for v in VIEWS)
    main = lay["views"]["preview-row"]["image"]
    log("layout at %dx%d: views cover %.0f %%, images %.0f %%, smallest view side %.0f px, main image %.0fx%.0f" % (
        VW, VH, 100 * cover, 100 * images, smallest, main[2], main[3]))
    assert lay["height"] <= VH, "the page scrolls: %s" % lay["height"]
    assert cover >= 0.80, "the views cover %.0f %% of the window" % (100 * cover)
    assert images >= 0.45, "the images cover %.0f %% of the window" % (100 * images)
    assert smallest >= 150, "a view is a strip: %.0f px" % smallest
    assert main[3] >= 0.7 * VH, "the main view is small: %s" % main
    return lay


def check_planes(browser):
    """No two views show the same plane by default."""
    planes = browser.eval("Object.fromEntries(%s.map((id) => [id, tomolive.plane(id)]))" % json.dumps(VIEWS))
    log("planes:", json.dumps(planes))
    shown = {(p["axis"], round(p["position"], 2)) for p in planes.values()}
    assert len(shown) == len(VIEWS), "two views show the same plane: %s" % planes
    return planes


MARKERS_JS = """(() => {
  const p = document.getElementById('panel-' + %s), shown = (s) => getComputedStyle(p.querySelector(s)).display !== 'none';
  return {stale: shown('.badge.stale'), final: shown('.badge.final'), text: p.querySelector('.badge.stale').textContent};
})()"""


def markers(browser, view):
    return browser.eval(MARKERS_JS % json.dumps(view))


def to_screen(rect, o, w, h, x, y):
    """The viewport point of volume point (x, y) in an unzoomed z-normal view (row or ortho z)."""
    s = (x - o[6]) / o[0]
    t = (y - o[7]) / o[4]
    return rect[0] + s * rect[2], rect[1] + (1 - t) * rect[3]


def check_cursor(browser, fr):
    """Hovering shows the pixel and its value in the footer, and moves no image."""
    before = layout(browser)
    o, rect = fr["preview-row"]["o"], before["views"]["preview-row"]["image"]
    w, h = fr["preview-row"]["w"], fr["preview-row"]["h"]
    got = {}
    for name, x in (("wall", 0.97 * A), ("centre", 0.0)):  # the skull's outer wall, and inside
        px, py = to_screen(rect, o, w, h, x, 0.5)
        browser.mouse("mouseMoved", px, py, 0)
        want_j, want_i = int((px - rect[0]) / rect[2] * w), int((py - rect[1]) / rect[3] * h)
        cur = wait_for("the value under the pointer at the " + name, lambda: (lambda c: c if c and
                       c["j"] == want_j and c["i"] == want_i else None)(browser.eval("tomolive.state.cursor")), 5)
        value = browser.eval("""(() => { const f = tomolive.state.frames['preview-row'];
          return f.lo + f.pixels[%d * f.width + %d] * (f.hi - f.lo) / (f.bits === 8 ? 255 : 65535); })()""" % (want_i, want_j))
        text = browser.eval("document.getElementById('cursor').textContent")
        log("pointer on the %s: %s" % (name, text))
        assert abs(cur["value"] - value) <= 1e-6 * max(1.0, abs(value)), (cur, value)
        assert "pixel (%d, %d)" % (want_j, want_i) in text and "value " in text, text
        got[name] = value
    assert got["wall"] > got["centre"], "the wall is not brighter than the inside: %s" % got
    after = layout(browser)
    assert after == before, "the images moved while the pointer moved over them:\n%s\n%s" % (before, after)


def check_profile(browser, fr):
    """A shift-drag across the row view draws a line profile: the skull's two walls as peaks."""
    lay = layout(browser)
    assert browser.eval("document.getElementById('profile').hidden"), "a profile before any was drawn"
    o, rect = fr["preview-row"]["o"], lay["views"]["preview-row"]["image"]
    w, h = fr["preview-row"]["w"], fr["preview-row"]["h"]
    positions = browser.eval("JSON.stringify(tomolive.state.positions)")
    # along y = 0.5, on the y crosshair: a shift-drag draws, it does not move the slice
    a, b = to_screen(rect, o, w, h, -1.3 * A, 0.5), to_screen(rect, o, w, h, 1.3 * A, 0.5)
    browser.drag(a, b, modifiers=8)  # 8: shift
    prof = wait_for("the profile", lambda: browser.eval("""(() => { const e = document.getElementById('profile'),
        r = e.getBoundingClientRect(); return !e.hidden && r.height > 50 && tomolive.state.profile.values ?
        {values: tomolive.state.profile.values, rect: [r.left, r.top, r.width, r.height]} : null; })()"""), 5)
    v = prof["values"]
    n, span = len(v), max(v) - min(v)
    left, right, centre = max(v[: n // 2]), max(v[n // 2:]), v[n // 2]
    log("profile: %d samples, walls %.4g %.4g, centre %.4g, ends %.4g %.4g; plot at %s" % (
        n, left, right, centre, v[0], v[-1], prof["rect"]))
    assert n >= 2 * A, "too few samples: %d" % n
    assert left - centre > 0.3 * span and right - centre > 0.3 * span, "no walls in the profile"
    assert left - v[0] > 0.3 * span and right - v[-1] > 0.3 * span, "no walls in the profile"
    assert visible_area(prof["rect"]) == prof["rect"][2] * prof["rect"][3], "the profile is off screen"
    after = layout(browser)
    assert after["views"]["preview-row"] == lay["views"]["preview-row"], "the main view moved"
    for x in VIEWS:
        assert overlap(after["views"][x]["panel"], prof["rect"]) < 1, "the profile covers " + x
    assert browser.eval("JSON.stringify(tomolive.state.positions)") == positions, "a slice moved"


def check_zoom(browser, shots):
    """The wheel zooms about the pointer, a drag pans, a double-click unzooms; no slice moves."""
    positions = browser.eval("JSON.stringify(tomolive.state.positions)")
    r0 = layout(browser)["views"]["preview-row"]["image"]
    p = (r0[0] + 0.62 * r0[2], r0[1] + 0.58 * r0[3])  # away from the crosshairs (the middle)
    browser.wheel(p[0], p[1], -400)
    r1 = wait_for("the row view zoomed", lambda: (lambda r: r if r[2] > 1.5 * r0[2] else None)(
        layout(browser)["views"]["preview-row"]["image"]), 5)
    frac = lambda r: ((p[0] - r[0]) / r[2], (p[1] - r[1]) / r[3])
    log("zoomed %.2fx about %s: image point under the pointer %s -> %s" % (
        r1[2] / r0[2], p, frac(r0), frac(r1)))
    assert abs(frac(r1)[0] - frac(r0)[0]) < 0.01 and abs(frac(r1)[1] - frac(r0)[1]) < 0.01
    browser.drag(p, (p[0] - 120, p[1] - 60))
    r2 = layout(browser)["views"]["preview-row"]["image"]
    log("panned by (-120, -60): image at %s -> %s" % (r1[:2], r2[:2]))
    assert abs(r2[0] - (r1[0] - 120)) < 2 and abs(r2[1] - (r1[1] - 60)) < 2 and r2[2] == r1[2]
    if shots:
        browser.screenshot(os.path.join(shots, "tools.png"))
    q = (p[0] - 120, p[1] - 60)
    for clicks in (1, 2):
        browser.mouse("mousePressed", q[0], q[1], 1, clicks=clicks)
        browser.mouse("mouseReleased", q[0], q[1], 0, clicks=clicks)
    r3 = wait_for("the row view unzoomed", lambda: (lambda r: r if abs(r[2] - r0[2]) < 0.5 else None)(
        layout(browser)["views"]["preview-row"]["image"]), 5)
    assert all(abs(r3[k] - r0[k]) < 0.5 for k in range(4)), (r0, r3)
    # a double-click's first click must not move the point: give it its time (the page waits
    # 300 ms for a second click), then nothing may be moving or moved
    time.sleep(0.6)
    assert browser.eval("Object.keys(tomolive.state.local).length") == 0, "the double-click moved a slice"
    assert browser.eval("JSON.stringify(tomolive.state.positions)") == positions, "a slice moved"


def parse_tiff(data):
    """The tags of a little-endian TIFF's first IFD: {tag: (type, count, value)}."""
    assert data[:4] == b"II*\0", data[:4]
    at = struct.unpack_from("<I", data, 4)[0]
    n = struct.unpack_from("<H", data, at)[0]
    tags = {}
    for k in range(n):
        tag, kind, count, value = struct.unpack_from("<HHII", data, at + 2 + 12 * k)
        tags[tag] = (kind, count, value & 0xFFFF if kind == 3 and count == 1 else value)
    assert list(tags) == sorted(tags), "TIFF tags out of order"
    return tags


TIFF_JS = """(async () => {
  const b = tomolive.tiff(%s), a = new Uint8Array(await b.arrayBuffer()), f = tomolive.state.frames[%s];
  let s = '';
  for (let i = 0; i < a.length; i += 8192) s += String.fromCharCode.apply(null, a.subarray(i, i + 8192));
  return {data: btoa(s), type: b.type, w: f.width, h: f.height, lo: f.lo, hi: f.hi, bits: f.bits,
          pixels: Array.from(f.pixels)};
})()"""

PNG_JS = """(async () => {
  const b = await tomolive.snapshot(%s), a = new Uint8Array(await b.arrayBuffer());
  const st = document.getElementById('panel-' + %s).querySelector('.stage');
  return {head: Array.from(a.slice(0, 24)), size: b.size, w: st.clientWidth, h: st.clientHeight};
})()"""


def check_exports(browser, view):
    """The shown slice as a float32 TIFF (header, tags and every value checked), and a PNG
    snapshot of the view's size."""
    t = browser.eval(TIFF_JS % (json.dumps(view), json.dumps(view)), await_promise=True)
    data = base64.b64decode(t["data"])
    tags = parse_tiff(data)
    w, h, n = t["w"], t["h"], t["w"] * t["h"]
    log("TIFF of %s: %d bytes, %s, tags %s" % (view, len(data), t["type"], sorted(tags)))
    assert t["type"] == "image/tiff"
    for tag, want in ((256, w), (257, h), (258, 32), (259, 1), (277, 1), (278, h), (279, 4 * n), (339, 3)):
        assert tags[tag][2] == want, "TIFF tag %d: %s, want %s" % (tag, tags[tag], want)
    start = tags[273][2]
    assert len(data) == start + 4 * n, "TIFF size %d, pixels at %d" % (len(data), start)
    desc = data[tags[270][2]: tags[270][2] + tags[270][1]].rstrip(b"\0").decode()
    assert "bits=%d" % t["bits"] in desc, desc
    values = struct.unpack_from("<%df" % n, data, start)
    qmax = 255.0 if t["bits"] == 8 else 65535.0
    worst = max(abs(v - (t["lo"] + q * (t["hi"] - t["lo"]) / qmax)) for v, q in zip(values, t["pixels"]))
    assert worst <= 1e-6 * max(abs(t["lo"]), abs(t["hi"])), "TIFF values differ from the image's by %g" % worst
    png = browser.eval(PNG_JS % (json.dumps(view), json.dumps(view)), await_promise=True)
    head = bytes(png["head"])
    log("PNG snapshot of %s: %d bytes, %dx%d" % (view, png["size"], *struct.unpack(">II", head[16:24])))
    assert head[:8] == b"\x89PNG\r\n\x1a\n", head
    assert struct.unpack(">II", head[16:24]) == (png["w"], png["h"])


def check_stale(browser, view, position, shots):
    """A moved view is marked stale at once, and unmarked when its new image arrives."""
    m = browser.eval("""(() => { tomolive.move(%s, %f).catch(() => {});
      return %s; })()""" % (json.dumps(view), position, MARKERS_JS.strip() % json.dumps(view)))
    log("right after the move of %s to %g: %s" % (view, position, m))
    assert m["stale"] and "%.2f" % position in m["text"], "no stale marker after a move: %s" % m
    assert not m["final"], "a stale view marked final"
    if shots:
        browser.screenshot(os.path.join(shots, "stale.png"))
    wait_for("the new image of " + view, lambda: abs(browser.eval(
        "tomolive.plane(%s).position" % json.dumps(view)) - position) < 0.01, 30)
    m = markers(browser, view)
    log("when the new image arrived: %s" % m)
    assert not m["stale"], "the stale marker stayed: %s" % m


def enter_token(browser):
    """The views are closed: the dialog asks for the token; a wrong one is refused there,
    the right one, typed in, makes the page an operator."""
    is_open = "document.getElementById('token-dialog').open"
    wait_for("the token dialog", lambda: browser.eval(is_open), 10)
    assert browser.eval("tomolive.state.access.views") == "token"
    assert browser.eval("document.getElementById('access').textContent") == "token needed"
    for token in ("not-the-token-0123456789", TOKEN):
        browser.eval("document.getElementById('token-input').value = ''; "
                     "document.getElementById('token-input').focus()")
        browser.call("Input.insertText", text=token)
        browser.eval("document.getElementById('token-ok').click()")
        if token != TOKEN:
            err = wait_for("the refusal in the dialog", lambda: browser.eval(
                "document.getElementById('token-error').textContent"), 10)
            log("wrong token: the dialog says", repr(err))
            assert "wrong" in err and browser.eval(is_open)
    wait_for("the page to be an operator", lambda: browser.eval("tomolive.state.operator"), 10)
    assert not browser.eval(is_open)
    assert browser.eval("sessionStorage.getItem('tomolive-operator-token')") == TOKEN
    assert browser.eval("document.getElementById('access').textContent") == "operator"
    log("token entered: operator")


def main():
    tmp = tempfile.mkdtemp(prefix="tomolive-browser-")
    port = free_port()
    shots = os.environ.get("TL_BROWSER_SHOTS")
    daemon = browser = None
    ok = False
    try:
        daemon = Daemon(tmp, port, "d1")
        browser = Browser(tmp)
        browser.call("Page.navigate", url="http://127.0.0.1:%d/" % port)
        wait_for("the page to connect", lambda: browser.eval(
            "!!(window.tomolive && tomolive.state.connected)"), 20)
        log("page connected")
        enter_token(browser)

        # a phantom scan; every view complete (all projections in its window). The page adds
        # its views when it sees the scan: the scan must outlast that, or the views come
        # after its end and get no final (1 s late under ASan on a loaded 2-core machine,
        # when 400 frames/s ended the scan in 0.9 s; 100 frames/s takes 3.6 s)
        daemon.push("--rows", str(ROWS), "--cols", str(COLS), "--projections", str(NPROJ),
                    "--darks", "4", "--flats", "4", "--rate", "100")
        views = VIEWS
        fr = wait_for("the four views of the full window", lambda: (lambda f: f if all(
            v in f and f[v]["proj"] == NPROJ for v in views) else None)(frames(browser)), 60)
        # the scan has ended: the final slices (or the image of a plane the page chose after
        # the end), so no newer image replaces a canvas under test
        wait_for("the four views' last slices", lambda: browser.eval(SETTLED_JS), 30)
        fr = frames(browser)
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

        # the page as an operator's tool, at 1400 x 900
        check_layout(browser)
        check_planes(browser)
        wait_for("the row's final marker", lambda: markers(browser, "preview-row")["final"], 10)
        assert not markers(browser, "preview-row")["stale"]
        browser.screenshot(SHOT)
        log("screenshot:", SHOT)
        check_cursor(browser, fr)
        check_profile(browser, fr)
        check_zoom(browser, shots)
        check_exports(browser, "preview-row")
        check_stale(browser, "preview-y", -30.0, shots)
        assert not markers(browser, "preview-y")["final"], "a slice moved after the end marked final"
        fr = frames(browser)

        # drag the x crosshair (the red vertical line) of the z view from x = 0 to x = 40
        seq0 = fr["preview-x"]["seq"]
        rect = browser.eval("""(() => { const o = tomolive.canvas('preview-z');
            o.scrollIntoView({block: 'center'});
            const r = tomolive.imageRect('preview-z');
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
        browser.screenshot(SHOT.replace(".png", "-moved.png"))

        # the daemon restarts on the same port: the page reconnects, and shows the next scan
        assert daemon.stop() == 0, open(daemon.log_path).read()
        wait_for("the page to see the daemon go", lambda: browser.eval("!tomolive.state.connected"), 10)
        daemon = Daemon(tmp, port, "d2")
        wait_for("the page to reconnect", lambda: browser.eval(
            "tomolive.state.connected && tomolive.state.reconnects >= 1"), 20)
        wait_for("the page to give its token again", lambda: browser.eval("tomolive.state.operator"), 10)
        assert not browser.eval("document.getElementById('token-dialog').open"), "asked again"
        log("page reconnected, an operator again")
        before = frames(browser)["preview-row"]["count"]
        daemon.push("--rows", "32", "--cols", "128", "--projections", "180", "--series", "2")
        wait_for("the next scan's slices", lambda: (lambda f: f["preview-row"]["count"] > before and
                 f["preview-row"]["w"] == 128 and f["preview-row"]["proj"] == 180)(frames(browser)), 60)
        log("second scan shown:", frames(browser)["preview-row"])
        assert daemon.stop() == 0
        csp = browser.eval("JSON.stringify(window.cspViolations)")
        assert csp == "[]", "Content-Security-Policy violations: " + csp
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
    log("PASS: token dialog, page, phantom, layout, planes, value, profile, zoom, exports, markers, "
        "crosshair drag, reconnect, no CSP violation")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AssertionError as e:
        log("FAIL:", e)
        sys.exit(1)
