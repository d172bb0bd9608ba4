// app.js — tomolive's live preview page (served by tomolived, daemon/serve/http.c).
//
// One WebSocket to /ws (subprotocol "tomolive-preview") brings the preview slices as binary
// images (8- or 16-bit, downsampled by the daemon; layout in daemon/serve/preview.h) and the
// daemon's state as JSON; the page sends JSON requests back (move a slice, set the centre
// of rotation, choose the depth). The daemon defines and pins the four preview slices while
// a page is connected: a row and three ortho-slices through one point. The crosshairs show
// where the other slices cut each one; dragging one moves that slice (a click moves the
// point). The page reconnects by itself when the daemon restarts.
//
// For tests and the console: window.tomolive = {state, move(id, position), setCenter(c),
// canvas(id)}; state.frames[id] describes the last image of each view.
(function () {
  'use strict';

  const VIEWS = ['preview-row', 'preview-x', 'preview-y', 'preview-z'];
  const HDR = 96;
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

  const state = {
    connected: false, reconnects: 0, scan: null, server: null,
    positions: {},    // id -> position the daemon has (row: z; ortho: coordinate along its axis)
    local: {},        // id -> position being dragged, until the daemon has it
    frames: {},       // id -> the last image's header, rate and latency
    received: 0, lastError: null,
  };
  const $ = (id) => document.getElementById(id);
  const ui = {auto: true, cmap: 'gray', bits: 8, min: 0, max: 1};
  const panels = {};
  let ws = null, backoff = 500, nextReq = 1;
  const waiting = new Map();  // req -> {resolve, reject}

  // ---- colour maps -------------------------------------------------------------------------
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

  // ---- panels --------------------------------------------------------------------------------
  function makePanel(id) {
    const el = document.createElement('div');
    el.className = 'panel';
    el.innerHTML = '<h2></h2><div class="info"></div><div class="stack">' +
      '<canvas class="image" width="256" height="256"></canvas><canvas class="overlay"></canvas>' +
      '</div><canvas class="hist" width="256" height="40"></canvas>';
    $('views').appendChild(el);
    const p = {
      el, title: el.querySelector('h2'), info: el.querySelector('.info'),
      image: el.querySelector('canvas.image'), overlay: el.querySelector('canvas.overlay'),
      hist: el.querySelector('canvas.hist'), counts: new Uint32Array(256), imageData: null,
    };
    p.image.id = 'canvas-' + id;
    p.overlay.addEventListener('pointerdown', (e) => pointerDown(id, e));
    p.overlay.addEventListener('pointermove', (e) => pointerMove(id, e));
    p.overlay.addEventListener('pointerup', (e) => pointerUp(id, e));
    p.overlay.addEventListener('pointercancel', (e) => pointerUp(id, e));
    panels[id] = p;
    title(id);
  }

  function pos(id) {
    return id in state.local ? state.local[id] : state.positions[id];
  }

  function title(id) {
    const v = pos(id), s = v === undefined ? '' : ' = ' + (+v).toFixed(2);
    panels[id].title.textContent = id === 'preview-row' ? 'row z' + s
      : 'ortho ' + id.slice(-1) + s;
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
    // value of code q: lo + q (hi - lo) / qmax; colour index: (value - wlo) / (whi - wlo)
    const qmax = f.bits === 8 ? 255 : 65535, lut = new Uint32Array(qmax + 1);
    const k = (f.hi - f.lo) / qmax, span = whi > wlo ? whi - wlo : 1;
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
    drawHist(p, f, wlo, whi);
    drawOverlay(id);
    const lat = f.latencyMs === null ? '' : ` · latency ${f.latencyMs.toFixed(1)} ms`;
    p.info.textContent = `#${f.seq} · ${f.width}×${f.height}` +
      (f.width !== f.srcWidth ? ` of ${f.srcWidth}×${f.srcHeight}` : '') +
      ` · ${f.projections} proj` + (f.missing ? ` (${f.missing} missing)` : '') +
      `${lat} · ${f.fps.toFixed(1)} fps` + (f.final ? ' · final' : '');
    showRate();
  }

  function drawHist(p, f, wlo, whi) {
    const c = p.hist, g = c.getContext('2d'), W = c.width, H = c.height;
    g.fillStyle = '#0b0b0b'; g.fillRect(0, 0, W, H);
    let max = 1;
    for (let i = 0; i < 256; i++) max = Math.max(max, p.counts[i]);
    g.fillStyle = '#888';
    for (let i = 0; i < 256; i++) {
      const h = Math.log1p(p.counts[i]) / Math.log1p(max) * (H - 2);
      g.fillRect(i * W / 256, H - h, Math.max(1, W / 256), h);
    }
    const x = (v) => (v - f.lo) / (f.hi - f.lo) * W;
    g.fillStyle = '#fd4';
    g.fillRect(x(wlo), 0, 1, H); g.fillRect(x(whi) - 1, 0, 1, H);
  }

  // ---- crosshairs ----------------------------------------------------------------------------
  // A slice image is the plane base + s xaxis + t yaxis (s across, t up: PROTOCOL.md §10); the
  // volume axis that xaxis (yaxis) runs along is the one its largest component names.
  function axes(o) {
    const big = (a, b, c) => (Math.abs(a) >= Math.abs(b) && Math.abs(a) >= Math.abs(c) ? 0 : Math.abs(b) >= Math.abs(c) ? 1 : 2);
    return [big(o[0], o[1], o[2]), big(o[3], o[4], o[5])];
  }
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
    const g = c.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, W, H);
    for (const l of lines(id)) {
      g.strokeStyle = COLOURS[l.target];
      g.lineWidth = 1.5;
      g.setLineDash(l.target === 'preview-row' ? [6, 4] : []);
      g.beginPath();
      if (l.dir === 'v') { g.moveTo(l.frac * W, 0); g.lineTo(l.frac * W, H); }
      else { g.moveTo(0, l.frac * H); g.lineTo(W, l.frac * H); }
      g.stroke();
    }
    title(id);
  }

  let drag = null;
  function fracs(id, e) {
    const r = panels[id].overlay.getBoundingClientRect();
    return [(e.clientX - r.left) / r.width, (e.clientY - r.top) / r.height, r];
  }
  function pointerDown(id, e) {
    if (!state.frames[id]) return;
    const [fx, fy, r] = fracs(id, e);
    let best = null, bestD = 8;  // CSS pixels
    for (const l of lines(id)) {
      const d = l.dir === 'v' ? Math.abs(l.frac - fx) * r.width : Math.abs(l.frac - fy) * r.height;
      if (d < bestD) { best = l; bestD = d; }
    }
    panels[id].overlay.setPointerCapture(e.pointerId);
    if (best) {
      drag = {id, lines: [best]};
    } else {  // not on a line: the point moves here (both slices of this image's axes)
      const [ax, ay] = axes(state.frames[id].orientation);
      drag = {id, lines: [{target: TARGETS[ax][0], dir: 'v'}, {target: TARGETS[ay][0], dir: 'h'}]};
    }
    pointerMove(id, e);
  }
  function pointerMove(id, e) {
    if (!drag || drag.id !== id) return;
    const [fx, fy] = fracs(id, e);
    for (const l of drag.lines) {
      const f = Math.min(1, Math.max(0, l.dir === 'v' ? fx : fy));
      request_move(l.target, valueAt(id, l.dir, f));
    }
  }
  function pointerUp(id, e) {
    if (drag && drag.id === id) pointerMove(id, e);
    drag = null;
  }

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
    send({cmd: 'move', view: id, position: value}).then((r) => {
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
      if (w) m.ok ? w.resolve(m.result) : w.reject(m.error);
    } else if (m.type === 'state') {
      state.server = m;
      state.scan = m.scan;
      for (const v of m.views) state.positions[v.id] = v.kind === 'row' ? v.z : v.position;
      showScan();
      for (const v of VIEWS) drawOverlay(v);
    }
  }

  function connect() {
    const url = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/ws';
    ws = new WebSocket(url, 'tomolive-preview');
    ws.binaryType = 'arraybuffer';
    ws.onopen = () => {
      state.connected = true;
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
      showConn();
      if (was) state.reconnects++;
      setTimeout(connect, backoff);  // the daemon restarts: keep trying
      backoff = Math.min(2 * backoff, 5000);
    };
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
    return send({cmd: 'center', value: +c}).catch((e) => { message('centre: ' + e); throw e; });
  }

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
    for (const b of document.querySelectorAll('[data-dc]'))
      b.onclick = () => {
        const c = (+$('center').value || 0) + +b.dataset.dc;
        $('center').value = c.toFixed(2);
        setCenter(c).catch(() => {});
      };
    $('rowz').oninput = (e) => request_move('preview-row', +e.target.value).catch(() => {});
    $('reset').onclick = () => send({cmd: 'reset_views'}).catch((e) => message(String(e)));
    window.addEventListener('resize', () => { for (const id of VIEWS) drawOverlay(id); });
  }

  palette = makePalette(ui.cmap);
  for (const id of VIEWS) makePanel(id);
  wire();
  connect();
  window.tomolive = {
    state,
    move: (id, position) => request_move(id, position),
    setCenter,
    canvas: (id) => panels[id].image,
  };
})();
