// app.js — tomolive's live preview page (served by tomolived, daemon/serve/http.c).
//
// One WebSocket to /ws (subprotocol "tomolive-preview") brings the preview slices as binary
// images (8- or 16-bit, downsampled by the daemon; layout in daemon/serve/preview.h) and the
// daemon's state as JSON; the page sends JSON requests back (move a slice, set the centre
// of rotation, choose the depth, reset the views). The daemon defines and pins the four
// preview slices while a page is connected: a row and three ortho-slices through one point.
// The page reconnects by itself when the daemon restarts.
//
// Access: the daemon's first message says whether the views need the operator token and
// whether actions take one ("access"). The page asks for the token once (a dialog, when an
// action needs it or the views do), keeps it in sessionStorage (this tab only, gone when it
// closes) and sends it on each connection ({cmd: 'auth'}); a refusal is shown and the token
// asked for again.
//
// Sections, top to bottom:
//   state        what the daemon said (scan, slice positions), the last image of each view,
//                the page's settings (ui), the line profile and the value under the cursor
//   colour maps  palettes of 256 RGBA colours
//   images       parseFrame (the TLPV message), valueOf (a pixel in the slice's units),
//                plane (which plane an image shows: its normal axis and position)
//   panels       one per view in a CSS grid (one main view, three beside it); each keeps its
//                zoom and pan (panels[id].view) and places its image canvas with fit/place;
//                render colour-maps an image; markers shows "stale" (the image is of another
//                plane than the one asked for: a move is under way) and "final"
//   overlay      crosshairs (where the other slices cut this one) and the profile's line
//   pointer      one gesture at a time: drag a crosshair (moves that slice), click (moves the
//                point), drag elsewhere (pan), shift-drag (line profile), wheel (zoom),
//                double-click (unzoom); hovering shows pixel and value in the footer
//   profile      values along the line, plotted under the side views, redrawn per image
//   export       the shown slice as a float32 TIFF (the values the preview carries: quantised
//                to its depth and downsampled) and a PNG snapshot of the view as shown
//   moves        one request in flight per slice, the newest position winning
//   connection   the WebSocket, requests and their replies, reconnection
//   access       the operator token: the dialog, auth on each connection, actions behind it
//   bars         connection, scan, rate, contrast window, messages
//   wiring       the controls' handlers; window.tomolive for tests and the console
//
// For tests and the console: window.tomolive = {state, move(id, position), setCenter(c),
// authorize(token),
// canvas(id), plane(id), isStale(id), imageRect(id), resetView(id), tiff(id), snapshot(id),
// setMain(id)}; state.frames[id] describes the last image of each view.
(function () {
  'use strict';

  // ---- state ---------------------------------------------------------------------------------
  const VIEWS = ['preview-row', 'preview-x', 'preview-y', 'preview-z'];
  const HDR = 96;
  const AXES = ['x', 'y', 'z'];
  const COLOURS = {'preview-x': '#ff5a5a', 'preview-y': '#55dd55', 'preview-z': '#5a9bff', 'preview-row': '#ffd23c'};
  // which slices a volume axis (0 x, 1 y, 2 z) moves, for the crosshairs of the others
  const TARGETS = [['preview-x'], ['preview-y'], ['preview-z', 'preview-row']];
  const MAPS = {
    gray: [[0, 0, 0], [255, 255, 255]],
    viridis: [[68, 1, 84], [72, 40, 120], [62, 74, 137], [49, 104, 142], [38, 130, 142],
              [31, 158, 137], [53, 183, 121], [109, 205, 89], [180, 222, 44], [253, 231, 37]],
    inferno: [[0, 0, 4], [31, 12, 72], [85, 15, 109], [136, 34, 106], [186, 54, 85],
              [227, 89, 51], [249, 140, 10], [249, 201, 50], [252, 255, 164]],
    hot: [[0, 0, 0], [230, 0, 0], [255, 210, 0], [255, 255, 255]],
  };
  const CLICK_MS = 300;  // a click waits this long for a second one (a double-click unzooms)
  const MAX_ZOOM = 32;

  const state = {
    connected: false, reconnects: 0, scan: null, server: null,
    positions: {},    // id -> position the daemon has (row: z; ortho: coordinate along its axis)
    local: {},        // id -> position being dragged, until the daemon has it
    frames: {},       // id -> the last image's header, rate and latency
    received: 0, lastError: null,
    access: null,         // what the daemon said this page may do: {views, actions}
    operator: false,      // this connection gave the operator token
    main: 'preview-row',  // the view in the large cell
    series: null,         // the scan whose default planes the page has looked at
    cursor: null,         // {id, i, j, value}: the pixel under the pointer
    profile: null,        // {id, from: [fx, fy], to: [fx, fy]} in fractions of the image
  };
  const $ = (id) => document.getElementById(id);
  const ui = {auto: true, cmap: 'gray', bits: 8, min: 0, max: 1, profileMode: false};
  const panels = {};
  let ws = null, backoff = 500, nextReq = 1;
  const waiting = new Map();  // req -> {resolve, reject}
  const clamp = (v, lo, hi) => Math.min(hi, Math.max(lo, v));
  const fmt = (v) => (Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(4) : v.toPrecision(5));

  // ---- colour maps ---------------------------------------------------------------------------
  let palette = null;
  function makePalette(name) {
    const pts = MAPS[name] || MAPS.gray, out = new Uint32Array(256);
    for (let i = 0; i < 256; i++) {
      const x = i / 255 * (pts.length - 1), k = Math.min(Math.floor(x), pts.length - 2), t = x - k;
      const c = [0, 1, 2].map((j) => Math.round(pts[k][j] + t * (pts[k + 1][j] - pts[k][j])));
      out[i] = (255 << 24 | c[2] << 16 | c[1] << 8 | c[0]) >>> 0;  // RGBA bytes, little-endian
    }
    return out;
  }

  // ---- images --------------------------------------------------------------------------------
  function parseFrame(buf) {
    const dv = new DataView(buf);
    if (buf.byteLength < HDR || dv.getUint32(0, false) !== 0x544c5056) return null;  // "TLPV"
    const f = {
      bits: dv.getUint8(5), view: dv.getUint8(6), final: (dv.getUint8(7) & 1) === 1,
      width: dv.getUint16(8, true), height: dv.getUint16(10, true),
      srcWidth: dv.getUint32(12, true), srcHeight: dv.getUint32(16, true),
      projections: dv.getUint32(20, true), missing: dv.getUint32(24, true),
      lo: dv.getFloat32(28, true), hi: dv.getFloat32(32, true), orientation: [],
      seq: Number(dv.getBigUint64(72, true)), tAcq: Number(dv.getBigUint64(80, true)),
      tPub: Number(dv.getBigUint64(88, true)),
    };
    for (let i = 0; i < 9; i++) f.orientation.push(dv.getFloat32(36 + 4 * i, true));
    const n = f.width * f.height;
    if (buf.byteLength !== HDR + n * f.bits / 8) return null;
    f.pixels = f.bits === 8 ? new Uint8Array(buf, HDR, n) : new Uint16Array(buf, HDR, n);
    return f;
  }

  // The value of pixel (i, j) (row, column) in the slice's units: lo + q (hi - lo) / qmax.
  function step(f) {
    return (f.hi - f.lo) / (f.bits === 8 ? 255 : 65535);
  }
  function valueOf(f, i, j) {
    return f.lo + f.pixels[i * f.width + j] * step(f);
  }
  // The volume coordinates of pixel (i, j)'s centre (PROTOCOL.md §10).
  function voxel(f, i, j) {
    const o = f.orientation, s = (j + 0.5) / f.width, t = 1 - (i + 0.5) / f.height;
    return [0, 1, 2].map((k) => o[6 + k] + s * o[k] + t * o[3 + k]);
  }
  // A slice image is the plane base + s xaxis + t yaxis (s across, t up: PROTOCOL.md §10); the
  // volume axis that xaxis (yaxis) runs along is the one its largest component names.
  function axes(o) {
    const big = (a, b, c) => (Math.abs(a) >= Math.abs(b) && Math.abs(a) >= Math.abs(c) ? 0 : Math.abs(b) >= Math.abs(c) ? 1 : 2);
    return [big(o[0], o[1], o[2]), big(o[3], o[4], o[5])];
  }
  // The plane an image shows: its normal axis and its position along it.
  function plane(f) {
    const [ax, ay] = axes(f.orientation), normal = 3 - ax - ay;
    return {axis: AXES[normal], position: f.orientation[6 + normal]};
  }

  function onFrame(buf) {
    const f = parseFrame(buf), id = f && VIEWS[f.view];
    if (!id) return;
    const old = state.frames[id], now = performance.now();
    f.arrivals = (old ? old.arrivals : []).filter((t) => now - t < 2000);
    f.arrivals.push(now);
    f.fps = f.arrivals.length > 1 ? (f.arrivals.length - 1) / ((now - f.arrivals[0]) / 1000) : 0;
    f.count = (old ? old.count : 0) + 1;
    f.latencyMs = f.tAcq ? (f.tPub - f.tAcq) / 1e6 : null;
    f.receivedAt = Date.now();
    state.frames[id] = f;
    state.received++;
    render(id);
  }

  // ---- panels --------------------------------------------------------------------------------
  function makePanel(id) {
    const el = document.createElement('section');
    el.className = 'panel';
    el.id = 'panel-' + id;
    el.innerHTML = '<div class="bar"><span class="name"></span><span class="meta"></span>' +
      '<span class="tools"><button data-act="main" title="show this view large">main</button>' +
      '<button data-act="fit" title="unzoom (or double-click the view)">fit</button>' +
      '<button data-act="tiff" title="the shown slice as a float32 TIFF">TIFF</button>' +
      '<button data-act="png" title="a snapshot of the view as shown">PNG</button></span></div>' +
      '<div class="stage"><canvas class="image" width="1" height="1"></canvas>' +
      '<canvas class="overlay"></canvas><canvas class="hist" width="256" height="32"></canvas>' +
      '<div class="badge stale"></div><div class="badge final">final</div></div>';
    $('views').insertBefore(el, $('profile'));
    const q = (s) => el.querySelector(s);
    const p = {
      el, name: q('.name'), meta: q('.meta'), stage: q('.stage'), image: q('canvas.image'),
      overlay: q('canvas.overlay'), hist: q('canvas.hist'), staleBadge: q('.badge.stale'),
      counts: new Uint32Array(256), imageData: null,
      view: {zoom: 1, cx: 0, cy: 0, w: 0, h: 0},  // zoom, and the image point at the stage's centre
    };
    p.image.id = 'canvas-' + id;
    const o = p.overlay;
    o.addEventListener('pointerdown', (e) => pointerDown(id, e));
    o.addEventListener('pointermove', (e) => pointerMove(id, e));
    o.addEventListener('pointerup', (e) => pointerUp(id, e));
    o.addEventListener('pointercancel', () => { gesture = null; });
    o.addEventListener('pointerleave', () => showCursor(id, null));
    o.addEventListener('dblclick', () => { clearTimeout(pendingClick); resetView(id); });
    o.addEventListener('wheel', (e) => wheel(id, e), {passive: false});
    for (const b of el.querySelectorAll('[data-act]')) b.onclick = () => act(id, b.dataset.act);
    new ResizeObserver(() => place(id)).observe(p.stage);
    panels[id] = p;
    title(id);
  }

  function act(id, what) {
    if (what === 'main') setMain(id);
    else if (what === 'fit') resetView(id);
    else if (what === 'tiff') saveTiff(id);
    else if (what === 'png') saveSnapshot(id);
  }

  // The main view takes the large cell; the others fill the side cells in the usual order.
  function setMain(id) {
    state.main = id;
    let k = 0;
    for (const v of VIEWS) {
      panels[v].el.style.gridArea = v === id ? 'main' : 's' + ++k;
      panels[v].el.classList.toggle('main', v === id);
    }
  }

  function pos(id) {
    return id in state.local ? state.local[id] : state.positions[id];
  }
  function label(id) {
    return id === 'preview-row' ? 'row z' : 'ortho ' + id.slice(-1);
  }
  function title(id) {
    const v = pos(id);
    panels[id].name.textContent = label(id) + (v === undefined ? '' : ' = ' + (+v).toFixed(2));
  }

  // Where the image sits in its stage (CSS pixels): fitted whole at zoom 1, the view's centre
  // point (cx, cy, in image pixels) in the middle of the stage.
  function fit(id) {
    const p = panels[id], f = state.frames[id], W = p.stage.clientWidth, H = p.stage.clientHeight;
    if (!f || !W || !H) return null;
    const v = p.view, s = Math.min(W / f.width, H / f.height) * v.zoom;
    return {s, left: W / 2 - v.cx * s, top: H / 2 - v.cy * s, width: f.width * s, height: f.height * s, W, H};
  }
  function place(id) {
    const p = panels[id], g = fit(id);
    if (!g) return;
    const st = p.image.style;
    st.left = g.left + 'px'; st.top = g.top + 'px';
    st.width = g.width + 'px'; st.height = g.height + 'px';
    p.stage.classList.toggle('zoomed', p.view.zoom > 1);
    drawOverlay(id);
  }
  function resetView(id) {
    const p = panels[id], f = state.frames[id];
    p.view = {zoom: 1, cx: f ? f.width / 2 : 0, cy: f ? f.height / 2 : 0, w: f ? f.width : 0, h: f ? f.height : 0};
    place(id);
  }

  // counts of the quantised values in 256 bins, and the 0.5 % / 99.5 % window from them
  function histogram(p, f) {
    const c = p.counts, shift = f.bits - 8, px = f.pixels;
    c.fill(0);
    for (let i = 0; i < px.length; i++) c[px[i] >> shift]++;
    const n = px.length, lowAt = 0.005 * n, highAt = 0.995 * n;
    let seen = 0, a = 0, b = 255;
    for (let i = 0; i < 256; i++) { seen += c[i]; if (seen <= lowAt) a = i + 1; }
    seen = 0;
    for (let i = 0; i < 256; i++) { seen += c[i]; if (seen >= highAt) { b = i; break; } }
    if (b <= a) { a = 0; b = 255; }
    const qmax = f.bits === 8 ? 255 : 65535;
    const q = (bin) => f.lo + Math.min(qmax, bin << shift) / qmax * (f.hi - f.lo);
    return [q(a), q(b + 1)];
  }

  function render(id) {
    const f = state.frames[id], p = panels[id];
    if (!f) return;
    const auto = histogram(p, f);
    const [wlo, whi] = ui.auto ? auto : [ui.min, ui.max];
    if (id === 'preview-row' && ui.auto) { ui.min = wlo; ui.max = whi; showWindow(); }
    paint(p, f, wlo, whi);
    drawHist(p, f, wlo, whi);
    if (p.view.w !== f.width || p.view.h !== f.height) resetView(id);  // a new geometry
    else place(id);
    showMeta(id);
    if (state.profile && state.profile.id === id) drawProfile();
    showRate();
  }

  // value of code q: lo + q (hi - lo) / qmax; colour index: (value - wlo) / (whi - wlo)
  function paint(p, f, wlo, whi) {
    const qmax = f.bits === 8 ? 255 : 65535, lut = new Uint32Array(qmax + 1);
    const k = step(f), span = whi > wlo ? whi - wlo : 1;
    for (let q = 0; q <= qmax; q++) {
      const t = (f.lo + q * k - wlo) / span;
      lut[q] = palette[t <= 0 ? 0 : t >= 1 ? 255 : Math.round(t * 255)];
    }
    const c = p.image;
    if (c.width !== f.width || c.height !== f.height || !p.imageData) {
      c.width = f.width; c.height = f.height;
      p.imageData = c.getContext('2d').createImageData(f.width, f.height);
    }
    const out = new Uint32Array(p.imageData.data.buffer), px = f.pixels;
    for (let i = 0; i < px.length; i++) out[i] = lut[px[i]];
    c.getContext('2d').putImageData(p.imageData, 0, 0);
  }

  function drawHist(p, f, wlo, whi) {
    const c = p.hist, g = c.getContext('2d'), W = c.width, H = c.height;
    g.clearRect(0, 0, W, H);
    g.fillStyle = 'rgba(0, 0, 0, 0.6)'; g.fillRect(0, 0, W, H);
    let max = 1;
    for (let i = 0; i < 256; i++) max = Math.max(max, p.counts[i]);
    g.fillStyle = '#999';
    for (let i = 0; i < 256; i++) {
      const h = Math.log1p(p.counts[i]) / Math.log1p(max) * (H - 2);
      g.fillRect(i * W / 256, H - h, Math.max(1, W / 256), h);
    }
    const x = (v) => (v - f.lo) / (f.hi - f.lo) * W;
    g.fillStyle = '#fd4';
    g.fillRect(x(wlo), 0, 1, H); g.fillRect(x(whi) - 1, 0, 1, H);
  }

  function showMeta(id) {
    const f = state.frames[id];
    const lat = f.latencyMs === null ? '' : ` · ${f.latencyMs.toFixed(0)} ms`;
    panels[id].meta.textContent = `#${f.seq} · ${f.width}×${f.height}` +
      (f.width !== f.srcWidth ? ` of ${f.srcWidth}×${f.srcHeight}` : '') +
      ` · ${f.projections} proj` + (f.missing ? ` (${f.missing} missing)` : '') +
      `${lat} · ${f.fps.toFixed(1)} fps`;
  }

  // Stale: the image shows another plane than the one asked for (a move the daemon has not
  // answered with an image yet). Final: the image is the scan's final slice of that plane.
  function isStale(id) {
    const f = state.frames[id], want = pos(id);
    return !!f && want !== undefined && Math.abs(plane(f).position - want) > 0.005;
  }
  function markers(id) {
    const p = panels[id], f = state.frames[id], stale = isStale(id);
    p.el.classList.toggle('stale', stale);
    p.el.classList.toggle('final', !!f && f.final && !stale);
    if (stale) {
      const pl = plane(f);
      p.staleBadge.textContent = `showing ${pl.axis} = ${pl.position.toFixed(2)} · waiting for ${(+pos(id)).toFixed(2)}`;
    }
  }

  // ---- overlay -------------------------------------------------------------------------------
  // lines: {target, dir 'v' (at a fraction of the width) or 'h' (of the height, from the top)}
  function lines(id) {
    const f = state.frames[id], out = [];
    if (!f) return out;
    const o = f.orientation, [ax, ay] = axes(o);
    for (const t of TARGETS[ax]) if (t !== id && pos(t) !== undefined)
      out.push({target: t, dir: 'v', frac: (pos(t) - o[6 + ax]) / o[ax]});
    for (const t of TARGETS[ay]) if (t !== id && pos(t) !== undefined)
      out.push({target: t, dir: 'h', frac: 1 - (pos(t) - o[6 + ay]) / o[3 + ay]});
    return out;
  }
  function valueAt(id, dir, frac) {
    const o = state.frames[id].orientation, [ax, ay] = axes(o);
    return dir === 'v' ? o[6 + ax] + frac * o[ax] : o[6 + ay] + (1 - frac) * o[3 + ay];
  }

  function drawOverlay(id) {
    const p = panels[id], c = p.overlay, dpr = window.devicePixelRatio || 1;
    const W = c.clientWidth, H = c.clientHeight;
    if (c.width !== Math.round(W * dpr) || c.height !== Math.round(H * dpr)) {
      c.width = Math.round(W * dpr); c.height = Math.round(H * dpr);
    }
    const g = c.getContext('2d'), r = fit(id);
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, W, H);
    if (r) {
      for (const l of lines(id)) drawLine(g, r, l);
      if (state.profile && state.profile.id === id) drawProfileLine(g, r, state.profile);
    }
    title(id);
    markers(id);
  }
  function drawLine(g, r, l) {
    g.strokeStyle = COLOURS[l.target];
    g.lineWidth = 1.5;
    g.setLineDash(l.target === 'preview-row' ? [6, 4] : []);
    g.beginPath();
    if (l.dir === 'v') {
      const x = r.left + l.frac * r.width;
      g.moveTo(x, Math.max(0, r.top)); g.lineTo(x, Math.min(r.H, r.top + r.height));
    } else {
      const y = r.top + l.frac * r.height;
      g.moveTo(Math.max(0, r.left), y); g.lineTo(Math.min(r.W, r.left + r.width), y);
    }
    g.stroke();
  }
  function drawProfileLine(g, r, pr) {
    const at = (f) => [r.left + f[0] * r.width, r.top + f[1] * r.height];
    const [a, b] = [at(pr.from), at(pr.to)];
    g.setLineDash([]);
    g.lineWidth = 3; g.strokeStyle = 'rgba(0, 0, 0, 0.7)';
    g.beginPath(); g.moveTo(a[0], a[1]); g.lineTo(b[0], b[1]); g.stroke();
    g.lineWidth = 1.5; g.strokeStyle = '#f0f';
    g.beginPath(); g.moveTo(a[0], a[1]); g.lineTo(b[0], b[1]); g.stroke();
    g.fillStyle = '#f0f';
    g.fillRect(a[0] - 3, a[1] - 3, 6, 6);
  }

  // ---- pointer -------------------------------------------------------------------------------
  let gesture = null, pendingClick = null;

  // The pointer in the stage (x, y, CSS pixels) and as fractions of the image (fx across, fy down).
  function toImage(id, e) {
    const r = panels[id].stage.getBoundingClientRect(), g = fit(id);
    const x = e.clientX - r.left, y = e.clientY - r.top;
    return {x, y, fx: (x - g.left) / g.width, fy: (y - g.top) / g.height, g};
  }
  function nearestLine(id, pt) {
    let best = null, bestD = 8;  // CSS pixels
    for (const l of lines(id)) {
      const d = l.dir === 'v' ? Math.abs(l.frac - pt.fx) * pt.g.width : Math.abs(l.frac - pt.fy) * pt.g.height;
      if (d < bestD) { best = l; bestD = d; }
    }
    return best;
  }

  function pointerDown(id, e) {
    if (!state.frames[id] || e.button !== 0) return;
    const pt = toImage(id, e);
    panels[id].overlay.setPointerCapture(e.pointerId);
    const line = e.shiftKey || ui.profileMode ? null : nearestLine(id, pt);
    gesture = e.shiftKey || ui.profileMode ? {id, kind: 'profile', from: [pt.fx, pt.fy]}
      : line ? {id, kind: 'line', line} : {id, kind: 'pan', x: e.clientX, y: e.clientY, moved: false};
    pointerMove(id, e);
  }
  function pointerMove(id, e) {
    showCursor(id, e);
    if (!gesture || gesture.id !== id) return;
    const pt = toImage(id, e);
    if (gesture.kind === 'line') {
      const l = gesture.line, f = clamp(l.dir === 'v' ? pt.fx : pt.fy, 0, 1);
      request_move(l.target, valueAt(id, l.dir, f)).catch(() => {});
    } else if (gesture.kind === 'profile') {
      setProfile(id, gesture.from, [clamp(pt.fx, 0, 1), clamp(pt.fy, 0, 1)]);
    } else {
      pan(id, gesture, e);
    }
  }
  function pointerUp(id, e) {
    if (!gesture || gesture.id !== id) return;
    pointerMove(id, e);
    const g = gesture;
    gesture = null;
    if (g.kind === 'pan' && !g.moved) clickLater(id, toImage(id, e));
    if (g.kind === 'profile') finishProfile();
  }

  function pan(id, g, e) {
    const dx = e.clientX - g.x, dy = e.clientY - g.y;
    if (!g.moved && Math.hypot(dx, dy) < 4) return;  // a click yet
    g.moved = true; g.x = e.clientX; g.y = e.clientY;
    const v = panels[id].view, s = fit(id).s;
    v.cx = clamp(v.cx - dx / s, 0, v.w);
    v.cy = clamp(v.cy - dy / s, 0, v.h);
    place(id);
  }

  // Zoom about the pointer: the image point under it stays under it.
  function wheel(id, e) {
    if (!state.frames[id]) return;
    e.preventDefault();
    const pt = toImage(id, e), v = panels[id].view, g = pt.g;
    const u = (pt.x - g.left) / g.s, w = (pt.y - g.top) / g.s, fitted = g.s / v.zoom;
    v.zoom = clamp(v.zoom * Math.exp(-e.deltaY * 0.002), 1, MAX_ZOOM);
    const s = fitted * v.zoom;
    v.cx = clamp(u - (pt.x - g.W / 2) / s, 0, v.w);
    v.cy = clamp(w - (pt.y - g.H / 2) / s, 0, v.h);
    place(id);
  }

  // A click moves the point (the two slices along this image's axes) there, unless it is
  // the first of a double-click.
  function clickLater(id, pt) {
    clearTimeout(pendingClick);
    if (pt.fx < 0 || pt.fx > 1 || pt.fy < 0 || pt.fy > 1) return;
    pendingClick = setTimeout(() => {
      const [ax, ay] = axes(state.frames[id].orientation);
      request_move(TARGETS[ax][0], valueAt(id, 'v', pt.fx)).catch(() => {});
      request_move(TARGETS[ay][0], valueAt(id, 'h', pt.fy)).catch(() => {});
    }, CLICK_MS);
  }

  // The footer's value under the cursor (its height is fixed: nothing moves when it changes).
  function showCursor(id, e) {
    const f = state.frames[id];
    if (!e || !f) {
      state.cursor = null;
      $('cursor').textContent = 'point at a view for the value under the cursor';
      return;
    }
    const pt = toImage(id, e), j = Math.floor(pt.fx * f.width), i = Math.floor(pt.fy * f.height);
    if (i < 0 || j < 0 || i >= f.height || j >= f.width) {
      state.cursor = null;
      $('cursor').textContent = `${label(id)} · outside the image`;
      return;
    }
    const value = valueOf(f, i, j), p = voxel(f, i, j);
    state.cursor = {id, i, j, value};
    $('cursor').textContent = `${label(id)} · pixel (${j}, ${i}) of ${f.width}×${f.height}` +
      ` · volume x ${p[0].toFixed(1)} y ${p[1].toFixed(1)} z ${p[2].toFixed(1)} · value ${fmt(value)}` +
      (f.bits === 8 ? ` (±${fmt(step(f) / 2)}, 8-bit preview)` : '');
  }

  // ---- profile -------------------------------------------------------------------------------
  function setProfile(id, from, to) {
    const old = state.profile;
    state.profile = {id, from, to};
    if (old && old.id !== id) drawOverlay(old.id);
    drawOverlay(id);
    drawProfile();  // when the plot is shown already
  }
  // The plot appears when the line is drawn (not during the drag: the side views would shrink
  // under the pointer); a line of less than 2 image pixels removes it.
  function finishProfile() {
    const pr = state.profile, f = pr && state.frames[pr.id];
    if (!f || Math.hypot((pr.to[0] - pr.from[0]) * f.width, (pr.to[1] - pr.from[1]) * f.height) < 2) {
      clearProfile();
      return;
    }
    $('profile').hidden = false;
    drawProfile();
  }
  function clearProfile() {
    const pr = state.profile;
    state.profile = null;
    $('profile').hidden = true;
    if (pr) drawOverlay(pr.id);
  }
  // Values along the line, one sample per image pixel of its length (nearest pixel).
  function profileValues(pr) {
    const f = state.frames[pr.id];
    if (!f) return {values: [], length: 0};
    const x0 = pr.from[0] * f.width, y0 = pr.from[1] * f.height;
    const x1 = pr.to[0] * f.width, y1 = pr.to[1] * f.height, length = Math.hypot(x1 - x0, y1 - y0);
    const n = Math.max(2, Math.ceil(length) + 1), values = [];
    for (let k = 0; k < n; k++) {
      const t = k / (n - 1);
      const j = clamp(Math.floor(x0 + t * (x1 - x0)), 0, f.width - 1);
      const i = clamp(Math.floor(y0 + t * (y1 - y0)), 0, f.height - 1);
      values.push(valueOf(f, i, j));
    }
    return {values, length};
  }
  function drawProfile() {
    const pr = state.profile, c = $('profile-plot');
    if (!pr || $('profile').hidden) return;
    const {values, length} = profileValues(pr);
    pr.values = values;
    const dpr = window.devicePixelRatio || 1, W = c.clientWidth, H = c.clientHeight;
    c.width = Math.round(W * dpr); c.height = Math.round(H * dpr);
    const g = c.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, W, H);
    if (values.length < 2) return;
    const lo = Math.min(...values), hi = Math.max(...values), span = hi > lo ? hi - lo : 1, m = 14;
    g.strokeStyle = '#f0f'; g.lineWidth = 1.5;
    g.beginPath();
    values.forEach((v, k) => {
      const x = m + k / (values.length - 1) * (W - 2 * m), y = H - m - (v - lo) / span * (H - 2 * m);
      k ? g.lineTo(x, y) : g.moveTo(x, y);
    });
    g.stroke();
    g.fillStyle = '#aaa'; g.font = '11px system-ui, sans-serif';
    g.fillText(fmt(hi), 2, 11); g.fillText(fmt(lo), 2, H - 2);
    $('profile-meta').textContent = `${label(pr.id)} · ${length.toFixed(1)} px · ${values.length} samples`;
  }

  // ---- export --------------------------------------------------------------------------------
  // A little-endian baseline TIFF of one float32 image (SampleFormat 3), one strip, with a
  // description: what ImageJ, Fiji, tifffile and most viewers read.
  function tiffBlob(data, width, height, text) {
    const desc = new TextEncoder().encode(text.replace(/[^\x20-\x7e]/g, '?') + '\0');
    const DESC = -1, DATA = -2;
    const tags = [[256, 4, 1, width], [257, 4, 1, height], [258, 3, 1, 32], [259, 3, 1, 1],
                  [262, 3, 1, 1], [270, 2, desc.length, DESC], [273, 4, 1, DATA], [277, 3, 1, 1],
                  [278, 4, 1, height], [279, 4, 1, 4 * data.length], [284, 3, 1, 1], [339, 3, 1, 3]];
    const ifdAt = 8, descAt = ifdAt + 2 + 12 * tags.length + 4, dataAt = (descAt + desc.length + 3) & ~3;
    const buf = new ArrayBuffer(dataAt + 4 * data.length), dv = new DataView(buf);
    dv.setUint16(0, 0x4949, true);  // "II": little-endian
    dv.setUint16(2, 42, true);
    dv.setUint32(4, ifdAt, true);
    dv.setUint16(ifdAt, tags.length, true);
    tags.forEach(([tag, type, count, value], k) => {
      const at = ifdAt + 2 + 12 * k, v = value === DESC ? descAt : value === DATA ? dataAt : value;
      dv.setUint16(at, tag, true); dv.setUint16(at + 2, type, true); dv.setUint32(at + 4, count, true);
      if (type === 3) dv.setUint16(at + 8, v, true); else dv.setUint32(at + 8, v, true);
    });
    dv.setUint32(descAt - 4, 0, true);  // no next IFD
    new Uint8Array(buf, descAt, desc.length).set(desc);
    for (let i = 0; i < data.length; i++) dv.setFloat32(dataAt + 4 * i, data[i], true);
    return new Blob([buf], {type: 'image/tiff'});
  }
  // The shown slice as float32: the values the preview carries, which are quantised to its
  // depth (8 or 16 bits between the slice's minimum and maximum) and downsampled.
  function tiff(id) {
    const f = state.frames[id];
    if (!f) return null;
    const data = new Float32Array(f.width * f.height);
    for (let i = 0; i < data.length; i++) data[i] = f.lo + f.pixels[i] * step(f);
    const pl = plane(f);
    return tiffBlob(data, f.width, f.height, `tomolive preview ${id} ${pl.axis}=${pl.position}` +
      ` seq=${f.seq} series=${state.scan ? state.scan.series : '?'} final=${f.final}` +
      ` size=${f.width}x${f.height} source=${f.srcWidth}x${f.srcHeight} bits=${f.bits}` +
      ` lo=${f.lo} hi=${f.hi} step=${step(f)} orientation=${f.orientation.join(',')}`);
  }
  // The view as shown: the image with its zoom, pan and colours, the crosshairs, the profile.
  function snapshot(id) {
    const p = panels[id], r = fit(id), dpr = window.devicePixelRatio || 1;
    if (!r) return Promise.resolve(null);
    const c = document.createElement('canvas'), g = c.getContext('2d');
    c.width = Math.round(r.W * dpr); c.height = Math.round(r.H * dpr);
    g.fillStyle = '#000'; g.fillRect(0, 0, c.width, c.height);
    g.imageSmoothingEnabled = p.view.zoom <= 1;
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.drawImage(p.image, r.left, r.top, r.width, r.height);
    g.setTransform(1, 0, 0, 1, 0, 0);
    g.drawImage(p.overlay, 0, 0);
    return new Promise((resolve) => c.toBlob(resolve, 'image/png'));
  }
  function fileName(id, ext) {
    const f = state.frames[id], pl = plane(f), s = state.scan ? state.scan.series : 0;
    return `tomolive-s${s}-${id}-${pl.axis}${pl.position.toFixed(2)}-seq${f.seq}.${ext}`;
  }
  function save(blob, name) {
    const a = document.createElement('a');
    a.href = URL.createObjectURL(blob);
    a.download = name;
    a.click();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  }
  function saveTiff(id) {
    const f = state.frames[id];
    if (!f) return;
    save(tiff(id), fileName(id, 'tif'));
    message(`${fileName(id, 'tif')}: ${f.width}×${f.height} float32 from the ${f.bits}-bit preview` +
      (f.width !== f.srcWidth ? ` (downsampled from ${f.srcWidth}×${f.srcHeight})` : '') +
      `, values in steps of ${fmt(step(f))}` + (f.bits === 8 ? '; depth 16 bit gives finer steps' : ''));
  }
  function saveSnapshot(id) {
    if (!state.frames[id]) return;
    snapshot(id).then((b) => { if (b) { save(b, fileName(id, 'png')); message(fileName(id, 'png')); } });
  }

  // ---- moves ---------------------------------------------------------------------------------
  // Moves are sent one at a time per slice, the newest position winning: a drag sends as
  // fast as the daemon answers, never a backlog.
  const inflight = {}, promises = {};
  function request_move(id, value) {
    state.local[id] = Math.round(value * 100) / 100;
    for (const v of VIEWS) drawOverlay(v);
    if (id === 'preview-row') $('rowz').value = state.local[id];
    if (!inflight[id]) sendMove(id);
    return new Promise((resolve, reject) => { (promises[id] = promises[id] || []).push({resolve, reject}); });
  }
  function sendMove(id) {
    const value = state.local[id];
    inflight[id] = true;
    act({cmd: 'move', view: id, position: value}).then((r) => {
      state.positions[id] = value;
      finishMove(id, value, r, null);
    }, (err) => finishMove(id, value, null, err));
  }
  function finishMove(id, value, result, err) {
    inflight[id] = false;
    if (err) message(`${id}: ${err}`);
    if (state.local[id] !== value && !err) { sendMove(id); return; }  // moved on meanwhile
    delete state.local[id];
    const waiters = promises[id] || [];
    promises[id] = [];
    for (const w of waiters) err ? w.reject(new Error(err)) : w.resolve(result);
    for (const v of VIEWS) drawOverlay(v);
  }

  // The daemon's default puts the row and the z ortho-slice in the same plane (the middle
  // row): the page moves the z ortho-slice to a quarter of the height, so four views show four
  // planes. Once per scan, and only while they coincide (a choice of the operator's stays).
  function defaultZ(rows) {
    return Math.floor(rows / 4);
  }
  function separateDefaults() {
    const s = state.scan;
    if (!s || state.series === s.series || !state.operator) return;  // never a dialog unasked
    state.series = s.series;
    const row = state.positions['preview-row'], z = state.positions['preview-z'];
    if (row !== undefined && z !== undefined && Math.abs(row - z) < 0.5)
      request_move('preview-z', defaultZ(s.rows)).catch(() => {});
  }
  function resetViews() {
    act({cmd: 'reset_views'}).then(() => {
      if (state.scan) request_move('preview-z', defaultZ(state.scan.rows)).catch(() => {});
    }, (e) => message(String(e)));
    for (const id of VIEWS) resetView(id);
  }

  // ---- the connection --------------------------------------------------------------------------
  function send(obj) {
    return new Promise((resolve, reject) => {
      if (!ws || ws.readyState !== WebSocket.OPEN) { reject('not connected'); return; }
      obj.req = nextReq++;
      waiting.set(obj.req, {resolve, reject});
      ws.send(JSON.stringify(obj));
    });
  }

  function onText(m) {
    if (m.type === 'reply') {
      const w = waiting.get(m.req);
      waiting.delete(m.req);
      if (!m.ok && m.code === 'unauthorized' && state.operator) {  // the token changed
        state.operator = false;
        sessionStorage.removeItem(TOKEN_KEY);
        showAccess();
      }
      if (w) m.ok ? w.resolve(m.result) : w.reject(m.error);
    } else if (m.type === 'access') {
      state.access = m;
      state.operator = false;
      showAccess();
      const t = sessionStorage.getItem(TOKEN_KEY);
      if (t) authorize(t).catch((e) => { if (m.views === 'token') askToken(String(e)).catch(() => {}); });
      else if (m.views === 'token') askToken('The views of this daemon need its operator token.').catch(() => {});
    } else if (m.type === 'state') {
      state.server = m;
      state.scan = m.scan;
      for (const v of m.views) state.positions[v.id] = v.kind === 'row' ? v.z : v.position;
      showScan();
      separateDefaults();
      for (const v of VIEWS) drawOverlay(v);
    }
  }

  function connect() {
    const url = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/ws';
    ws = new WebSocket(url, 'tomolive-preview');
    ws.binaryType = 'arraybuffer';
    ws.onopen = () => {
      state.connected = true;
      state.series = null;  // a restarted daemon may number its scans from 1 again
      backoff = 500;
      showConn();
      if (ui.bits !== 8) send({cmd: 'bits', value: ui.bits}).catch(() => {});
    };
    ws.onmessage = (e) => (typeof e.data === 'string' ? onText(JSON.parse(e.data)) : onFrame(e.data));
    ws.onclose = () => {
      const was = state.connected;
      state.connected = false;
      for (const w of waiting.values()) w.reject('connection lost');
      waiting.clear();
      for (const id of VIEWS) inflight[id] = false;
      state.operator = false;  // the next connection gives the token again
      showConn();
      if (was) state.reconnects++;
      setTimeout(connect, backoff);  // the daemon restarts: keep trying
      backoff = Math.min(2 * backoff, 5000);
    };
  }

  // ---- access --------------------------------------------------------------------------------
  const TOKEN_KEY = 'tomolive-operator-token';
  let asking = null;  // {promise, resolve, reject} while the dialog is open

  // Gives the token on this connection; kept for the next ones when the daemon takes it.
  function authorize(token) {
    return send({cmd: 'auth', token}).then(() => {
      state.operator = true;
      sessionStorage.setItem(TOKEN_KEY, token);
      if (String(state.lastError).startsWith('operator token')) message('');
      showAccess();
    }, (e) => {
      sessionStorage.removeItem(TOKEN_KEY);
      state.operator = false;
      showAccess();
      message('operator token: ' + e);
      throw e;
    });
  }
  // Opens the dialog (once); resolves when a token was taken, rejects when cancelled.
  function askToken(why) {
    $('token-why').textContent = why;
    if (asking) return asking.promise;
    asking = {};
    asking.promise = new Promise((resolve, reject) => { asking.resolve = resolve; asking.reject = reject; });
    $('token-error').textContent = '';
    $('token-input').value = '';
    $('token-dialog').showModal();
    $('token-input').focus();
    return asking.promise;
  }
  function submitToken() {
    const t = $('token-input').value.trim();
    if (!t) return;
    authorize(t).then(() => {
      const a = asking;
      asking = null;
      $('token-dialog').close();
      if (a) a.resolve();
    }, (e) => { $('token-error').textContent = String(e); });
  }
  function cancelToken() {
    const a = asking;
    asking = null;
    if ($('token-dialog').open) $('token-dialog').close();
    if (a) a.reject('the operator token is needed for this');
  }
  // An action (it changes what the daemon reconstructs): with the token, asked for if need be.
  function act(obj) {
    if (state.access && state.access.actions === 'off')
      return Promise.reject('this daemon takes no actions from the page (it has no http.token_file)');
    if (state.operator) return send(obj);
    return askToken('Moving slices and the centre of rotation need the operator token.').then(() => send(obj));
  }
  function showAccess() {
    const a = state.access, b = $('access');
    const locked = a && a.views === 'token' && !state.operator;
    b.className = state.operator ? 'operator' : locked ? 'locked' : '';
    b.textContent = !a ? '…' : state.operator ? 'operator' : locked ? 'token needed' :
      a.actions === 'off' ? 'read-only' : 'viewer';
    b.disabled = !a || state.operator || a.actions === 'off';
  }

  // ---- the bars ------------------------------------------------------------------------------
  function message(t) {
    state.lastError = t;
    $('message').textContent = t;
  }
  function showConn() {
    const c = $('conn');
    c.className = 'conn ' + (state.connected ? 'on' : 'off');
    c.textContent = state.connected ? 'live' : 'reconnecting…';
  }
  function showScan() {
    const s = state.scan;
    if (!s) { $('scan').textContent = 'no scan'; return; }
    $('scan').textContent = `series ${s.series} · ${s.rows}×${s.cols} · window ${s.held}/${s.window}` +
      ` (${(100 * s.fill).toFixed(0)} %)` + (s.finished ? ' · ended' : '') + ` · ${s.device}`;
    if (document.activeElement !== $('center')) $('center').value = (+s.center).toFixed(2);
    const e = s.center_estimate;
    $('autocenter').disabled = !e;
    $('autocenter').checked = !!(e && e.auto);
    $('cor').textContent = e && e.valid ? `est ${(+e.center).toFixed(2)} (${(+e.confidence).toFixed(2)})` : '';
    $('rowz').max = Math.max(0, s.rows - 1);
    if (!('preview-row' in state.local) && state.positions['preview-row'] !== undefined)
      $('rowz').value = state.positions['preview-row'];
  }
  function showRate() {
    let fps = 0, lat = [];
    for (const id of VIEWS) {
      const f = state.frames[id];
      if (f && Date.now() - f.receivedAt < 2000) fps += f.fps;
      if (f && f.latencyMs !== null) lat.push(f.latencyMs);
    }
    const dropped = state.server ? state.server.dropped : 0;
    $('rate').textContent = `${fps.toFixed(1)} slices/s` +
      (lat.length ? ` · latency ${Math.max(...lat).toFixed(0)} ms` : '') + ` · dropped ${dropped}`;
  }
  function showWindow() {
    $('wmin').value = (+ui.min).toPrecision(4);
    $('wmax').value = (+ui.max).toPrecision(4);
  }
  function renderAll() {
    for (const id of VIEWS) render(id);
  }

  function setCenter(c) {
    return act({cmd: 'center', value: +c}).catch((e) => { message('centre: ' + e); throw e; });
  }

  // ---- wiring --------------------------------------------------------------------------------
  function wire() {
    $('cmap').onchange = (e) => { ui.cmap = e.target.value; palette = makePalette(ui.cmap); renderAll(); };
    $('auto').onchange = (e) => {
      ui.auto = e.target.checked;
      $('wmin').disabled = $('wmax').disabled = ui.auto;
      renderAll();
    };
    $('wmin').onchange = (e) => { ui.min = +e.target.value; renderAll(); };
    $('wmax').onchange = (e) => { ui.max = +e.target.value; renderAll(); };
    $('bits').onchange = (e) => { ui.bits = +e.target.value; send({cmd: 'bits', value: ui.bits}).catch(() => {}); };
    $('center').onchange = (e) => setCenter(e.target.value).catch(() => {});
    $('autocenter').onchange = (e) => send({cmd: 'auto_center', value: e.target.checked})
      .catch((x) => message('auto centre: ' + x));
    for (const b of document.querySelectorAll('[data-dc]'))
      b.onclick = () => {
        const c = (+$('center').value || 0) + +b.dataset.dc;
        $('center').value = c.toFixed(2);
        setCenter(c).catch(() => {});
      };
    $('rowz').oninput = (e) => request_move('preview-row', +e.target.value).catch(() => {});
    $('reset').onclick = resetViews;
    $('profile-mode').onclick = (e) => { ui.profileMode = !ui.profileMode; e.target.classList.toggle('on', ui.profileMode); };
    $('profile-close').onclick = clearProfile;
    $('access').onclick = () => askToken('The operator token lets this page move slices and the centre.').catch(() => {});
    $('token-ok').onclick = submitToken;
    $('token-cancel').onclick = cancelToken;
    $('token-input').onkeydown = (e) => { if (e.key === 'Enter') submitToken(); };
    $('token-dialog').addEventListener('cancel', (e) => { e.preventDefault(); cancelToken(); });  // Escape
    new ResizeObserver(drawProfile).observe($('profile-plot'));
  }

  palette = makePalette(ui.cmap);
  for (const id of VIEWS) makePanel(id);
  setMain(state.main);
  wire();
  connect();
  window.tomolive = {
    state,
    move: (id, position) => request_move(id, position),
    setCenter,
    authorize,
    canvas: (id) => panels[id].image,
    plane: (id) => (state.frames[id] ? plane(state.frames[id]) : null),
    isStale,
    imageRect: (id) => panels[id].image.getBoundingClientRect(),
    resetView,
    setMain,
    tiff,
    snapshot,
  };
})();
