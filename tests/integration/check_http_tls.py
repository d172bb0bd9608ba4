#!/usr/bin/python3
"""check_http_tls.py — tomolived's HTTP server over TLS (http.tls_cert, http.tls_key).

Makes a self-signed certificate for 127.0.0.1 with the openssl command, starts tomolived
(CPU backend, private ipc:// endpoints, HTTPS on a free loopback port, an operator token) and
checks, as a client that verifies the certificate:
  - GET / over HTTPS: the page, with the security headers and Strict-Transport-Security;
  - /api/status needs the token (401 without it) and says tls: true;
  - a WebSocket over WSS: "access" first, auth with the token, then the state; a foreign
    Origin is refused there as over plain HTTP;
  - plain HTTP on the TLS port gets no answer, and the daemon goes on;
  - an unreadable certificate or key, and a key that is not PEM, fail start-up loudly.

Exit 0 pass, 1 fail, 77 skip (no openssl command, or no python3-websocket).
"""
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

try:
    import websocket  # Debian python3-websocket (websocket-client)
except ImportError:
    if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    print("SKIP: python3-websocket is not installed")
    sys.exit(77)

OPENSSL = shutil.which("openssl")
if not OPENSSL:
    print("SKIP: the openssl command is not installed (it makes the test's certificate)")
    sys.exit(77)

BUILD = os.path.abspath(os.environ.get("top_builddir", "."))
SRC = os.path.abspath(os.environ.get("top_srcdir", os.path.join(os.path.dirname(__file__), "..", "..")))
TOKEN = "tls-test-operator-token-0123456789"


def log(*a):
    print(*a, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(what, fn, timeout=15.0, every=0.05):
    t0 = time.time()
    while time.time() - t0 < timeout:
        v = fn()
        if v:
            return v
        time.sleep(every)
    raise AssertionError("timed out waiting for " + what)


def make_cert(tmp):
    cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
    subprocess.run([OPENSSL, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", key, "-out", cert], check=True, capture_output=True, timeout=60)
    return cert, key


class Daemon:
    def __init__(self, tmp, tag, cert, key, port=None):
        self.port = port or free_port()
        self.log_path = os.path.join(tmp, tag + ".log")
        token_file = os.path.join(tmp, "token")
        with open(token_file, "w") as f:
            f.write(TOKEN + "\n")
        os.chmod(token_file, 0o600)
        cmd = [os.path.join(BUILD, "daemon", "tomolived"), "--backend", "cpu"]
        for k in ("ingest", "control", "slices"):
            cmd += ["--set", "%s.endpoint=ipc://%s/%s-%s" % (k, tmp, tag, k)]
        cmd += ["--set", "http.listen=127.0.0.1:%d" % self.port,
                "--set", "http.root=" + os.path.join(SRC, "daemon", "www"),
                "--set", "http.token_file=" + token_file,
                "--set", "http.tls_cert=" + cert, "--set", "http.tls_key=" + key,
                "--set", "engine.tune=off"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(self.log_path, "w"))

    def log(self):
        return open(self.log_path).read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def get(ctx, port, path, headers=None):
    req = urllib.request.Request("https://127.0.0.1:%d%s" % (port, path), headers=headers or {})
    try:
        r = urllib.request.urlopen(req, context=ctx, timeout=5)
        return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def main():
    tmp = tempfile.mkdtemp(prefix="tomolive-tls-")
    daemon = None
    ok = False
    try:
        cert, key = make_cert(tmp)
        ctx = ssl.create_default_context(cafile=cert)  # verifies the chain and 127.0.0.1
        daemon = Daemon(tmp, "tls", cert, key)

        def up():
            if daemon.proc.poll() is not None:
                raise AssertionError("tomolived exited:\n" + daemon.log())
            try:
                return get(ctx, daemon.port, "/")
            except OSError:
                return None
        status, headers, body = wait_for("the daemon's HTTPS server", up)
        assert status == 200 and b'<script src="app.js">' in body, (status, body[:200])
        assert headers["Strict-Transport-Security"].startswith("max-age="), headers
        assert "connect-src 'self'" in headers["Content-Security-Policy"], headers
        assert headers["X-Content-Type-Options"] == "nosniff"
        log("GET / over HTTPS: 200, HSTS", headers["Strict-Transport-Security"])

        status, headers, _ = get(ctx, daemon.port, "/api/status")
        assert status == 401 and headers["Strict-Transport-Security"], status
        status, _, body = get(ctx, daemon.port, "/api/status", {"Authorization": "Bearer " + TOKEN})
        assert status == 200, status
        http = json.loads(body)["http"]
        assert http["tls"] is True and http["views"] == "token", http
        log("/api/status over HTTPS: 401 without the token, 200 with it:", http)

        # WSS, from the page's own origin (now https://)
        url = "wss://127.0.0.1:%d/ws" % daemon.port
        sslopt = {"ca_certs": cert, "cert_reqs": ssl.CERT_REQUIRED}
        ws = websocket.create_connection(url, subprotocols=["tomolive-preview"], sslopt=sslopt,
                                         origin="https://127.0.0.1:%d" % daemon.port, timeout=10)
        access = json.loads(ws.recv())
        assert access == {"type": "access", "views": "token", "actions": "token"}, access
        ws.send(json.dumps({"req": 1, "cmd": "auth", "token": TOKEN}))
        seen = []
        while "state" not in seen:
            m = json.loads(ws.recv())
            seen.append(m["type"])
            if m["type"] == "reply":
                assert m["req"] == 1 and m["ok"], m
        assert seen[0] == "reply", seen
        ws.close()
        log("WSS: access, auth, state:", seen)
        # the http:// origin of the same host is another origin: refused over TLS
        try:
            websocket.create_connection(url, subprotocols=["tomolive-preview"], sslopt=sslopt,
                                        origin="http://127.0.0.1:%d" % daemon.port, timeout=10).close()
            raise AssertionError("a WebSocket from http://127.0.0.1 was let in over TLS")
        except websocket.WebSocketException as e:
            log("WSS from http:// refused:", type(e).__name__)

        # plain HTTP on the TLS port: no page, and the daemon goes on
        try:
            r = urllib.request.urlopen("http://127.0.0.1:%d/" % daemon.port, timeout=5).read()
            raise AssertionError("plain HTTP was answered over the TLS port: %r" % r[:100])
        except (OSError, ValueError) as e:
            log("plain HTTP on the TLS port:", type(e).__name__)
        assert get(ctx, daemon.port, "/")[0] == 200
        assert daemon.stop() == 0, daemon.log()
        assert TOKEN not in daemon.log()

        # start-up fails loudly on a certificate or key it cannot use
        bad_key = os.path.join(tmp, "bad-key.pem")
        with open(bad_key, "w") as f:
            f.write("not a key\n")
        for tag, c, k, says in (("nocert", os.path.join(tmp, "missing.pem"), key, "http.tls_cert"),
                                ("nokey", cert, os.path.join(tmp, "missing.pem"), "http.tls_key"),
                                ("badkey", cert, bad_key, "TLS cannot start")):
            d = Daemon(tmp, tag, c, k)
            rc = d.proc.wait(15)
            assert rc != 0 and says in d.log(), (tag, rc, d.log())
            log("%s: exit %d:" % (tag, rc), [l for l in d.log().splitlines() if says in l][0][:200])
        ok = True
    finally:
        if daemon:
            daemon.stop()
        if not ok:
            for name in sorted(os.listdir(tmp)):
                if name.endswith(".log"):
                    log("===== %s" % name)
                    log(open(os.path.join(tmp, name), errors="replace").read()[-3000:])
        shutil.rmtree(tmp, ignore_errors=True)
    log("PASS: HTTPS page and headers, token, WSS auth and state, origin over TLS, plain HTTP "
        "refused, bad certificate and key fail start-up")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AssertionError as e:
        log("FAIL:", e)
        sys.exit(1)
