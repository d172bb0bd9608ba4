"""The Python client with CURVE keys (issue #27): `tomolive keygen`'s files load in pyzmq's
zmq.auth.load_certificate, and Control, Subscriber and Pusher connect with key= and
server_key= (or TOMOLIVE_KEY, TOMOLIVE_SERVER_KEY) to a daemon with [security] curve,
each role doing what it may (Denied above it); no keys, no connection."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import unittest

import zmq
import zmq.auth

import tlfixture as F
import tomolive


def keygen(d: str, name: str, role: str = "") -> None:
    argv = [F.tool("tomolive"), "keygen", name, "--dir", d] + (["--role", role] if role else [])
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)


class Keys(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.keys = tempfile.mkdtemp(prefix="tlpy-keys-")
        cls.clients = os.path.join(cls.keys, "clients")
        os.mkdir(cls.clients)
        keygen(cls.keys, "server")
        for name, role in (("viewer", "viewer"), ("op", "operator"), ("det", "ingest")):
            keygen(cls.keys, name, role)
            shutil.copy(os.path.join(cls.keys, name + ".key"), cls.clients)
        cls.server_key = cls.path("server")
        cls.d = F.Daemon("security", [
            "--set", "security.curve=true",
            "--set", "security.server_key=" + cls.path("server", True),
            "--set", "security.clients=" + cls.clients], key=cls.path("op", True),
            server_key=cls.server_key)

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        shutil.rmtree(cls.keys, ignore_errors=True)

    @classmethod
    def path(cls, name: str, secret: bool = False) -> str:
        return os.path.join(cls.keys, name + (".key_secret" if secret else ".key"))

    def control(self, name: str, **kw) -> tomolive.Control:
        ctl = tomolive.Control(self.d.control, key=self.path(name, True),
                               server_key=self.server_key, **kw)
        self.addCleanup(ctl.close)
        return ctl

    def test_keygen_loads_in_pyzmq(self):
        public, secret = zmq.auth.load_certificate(self.path("viewer", True))
        self.assertEqual(len(public), 40)
        self.assertEqual(len(secret), 40)
        self.assertEqual(zmq.curve_public(secret), public)
        public2, none = zmq.auth.load_certificate(self.path("viewer"))
        self.assertEqual(public2, public)
        self.assertIsNone(none)
        with open(self.path("viewer")) as f:
            self.assertIn('role = "viewer"', f.read())
        self.assertEqual(os.stat(self.path("viewer", True)).st_mode & 0o777, 0o600)

    def test_roles(self):
        viewer = self.control("viewer")
        self.assertTrue(viewer.status()["security"]["curve"])
        with self.assertRaises(tomolive.Denied) as e:
            viewer.set_slice("a", kind="row", z=1)
        self.assertEqual(e.exception.code, 39)
        op = self.control("op")
        op.set_slice("a", kind="row", z=1)
        with self.assertRaises(tomolive.Denied):
            op.reset()
        op.remove_slice("a")

    def test_no_keys_no_connection(self):
        ctl = tomolive.Control(self.d.control, timeout=0.3)
        self.addCleanup(ctl.close)
        with self.assertRaises(TimeoutError):
            ctl.status()
        with self.assertRaises(ValueError):
            tomolive.Control(self.d.control, key=self.path("op", True))

    def test_environment(self):
        old = {k: os.environ.get(k) for k in ("TOMOLIVE_KEY", "TOMOLIVE_SERVER_KEY")}
        os.environ["TOMOLIVE_KEY"] = self.path("viewer", True)
        os.environ["TOMOLIVE_SERVER_KEY"] = self.server_key
        try:
            ctl = tomolive.Control(self.d.control)
            self.addCleanup(ctl.close)
            self.assertIn("version", ctl.status())
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def wait_status(self, ctl, path, want):
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            v = ctl.status()
            for k in path.split("."):
                v = v[k]
            if v >= want:
                return
        self.fail("%s never reached %s" % (path, want))

    def test_pusher_and_subscriber(self):
        op = self.control("op")
        before = op.status()["frames"]["messages"]
        push = tomolive.Pusher(self.d.ingest, key=self.path("det", True),
                               server_key=self.server_key, linger=0)
        self.addCleanup(push.close)
        push._sock.send(b"x")  # a malformed header: counted as a message all the same
        self.wait_status(op, "frames.messages", before + 1)
        sub = tomolive.Subscriber(self.d.slices, all=True, key=self.path("viewer", True),
                                  server_key=self.server_key)
        self.addCleanup(sub.close)
        self.wait_status(op, "security.accepted.slices", 1)


if __name__ == "__main__":
    unittest.main()
