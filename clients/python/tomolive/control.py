"""Control: requests to tomolived's control socket (PROTOCOL.md sections 9 and 12).

A DEALER socket: each request carries a fresh ``id`` and the reply with that id is its
answer (replies to requests that timed out earlier are skipped, so one slow reply never
shifts the ones after it).  A successful reply returns its ``result`` (None when it has
none); an error reply raises the exception class of its code (errors.py):

    ctl = Control("tcp://localhost:5601")
    ctl.set_slice("row0", kind="row", z=32)
    try:
        ctl.remove_slice("nope")
    except tomolive.NotFound as e:
        print(e.code, e.message)

No reply within ``timeout`` seconds raises TimeoutError; the socket stays usable.
"""
from __future__ import annotations

import itertools
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence

import zmq

from . import protocol
from .errors import error_from_reply
from .keys import apply_curve

__all__ = ["Control"]


class Control:
    """A DEALER socket connected to the daemon's control endpoint."""

    def __init__(self, endpoint: str = "tcp://localhost:5601", timeout: float = 5.0, *,
                 context: Optional[zmq.Context] = None, key: Optional[str] = None,
                 server_key: Optional[str] = None):
        self._ctx = context or zmq.Context.instance()
        self._sock = self._ctx.socket(zmq.DEALER)
        self._sock.setsockopt(zmq.LINGER, 0)
        try:
            apply_curve(self._sock, key, server_key)  # keys.py; with the environment's
        except Exception:
            self._sock.close()
            raise
        self._sock.connect(endpoint)
        self.endpoint = endpoint
        self.timeout = timeout
        self._ids = itertools.count(1)

    def request(self, cmd: str, args: Optional[Mapping[str, Any]] = None, /, *,
                timeout: Optional[float] = None, **kwargs: Any) -> Any:
        """Sends ``cmd`` with ``args`` (a mapping, and/or keyword arguments; none at all:
        no ``args`` key) and returns the reply's result.  Raises the error's exception,
        or TimeoutError after ``timeout`` seconds (default: the constructor's)."""
        if kwargs:
            args = {**(args or {}), **kwargs}
        rid = next(self._ids)
        self._sock.send(protocol.pack(protocol.req_header(rid, cmd, args)))
        wait = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + wait
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not self._sock.poll(int(left * 1000) + 1):
                raise TimeoutError("no reply to %r from %s within %g s"
                                   % (cmd, self.endpoint, wait))
            parts = self._sock.recv_multipart()
            rep = protocol.decode_rep(parts[-1])
            if rep["id"] != rid and (rep["id"] != 0 or rep["ok"]):
                continue  # the late answer to a request that timed out
            # (id 0: the daemon could not read our request's id; the error is ours)
            if rep["ok"]:
                return rep.get("result")
            e = rep["error"]
            raise error_from_reply(e["code"], e["message"], cmd)

    # -- the commands of section 12 ---------------------------------------------------

    def status(self) -> Dict[str, Any]:
        """The daemon's status map (version, scan, frames, queue, slices, latency_ms...)."""
        return self.request("status")

    def commands(self) -> List[str]:
        """The command names the daemon knows."""
        return self.request("commands")

    def set_slice(self, id: str, kind: str = "row", **spec: Any) -> Dict[str, Any]:
        """Defines or redefines slice ``id``: ``kind="row"`` with ``z``; ``"ortho"`` with
        ``axis`` and ``position``; ``"plane"`` with ``orientation`` (9 floats) and
        ``size`` [h, w]; ``"box"`` (a sub-volume, published as ``Slice.volume``) with
        optional ``size`` [planes, h, w] and ``center`` [x, y, z] (default: the whole
        volume); optional ``size``, ``scale``, ``update`` (a dict of ``every``,
        ``on_complete``, ``max_rate``), ``pin``, ``dtype``, ``compression``, and
        ``method`` (``"fbp"``, or iterative: ``"sirt"``, ``"sart"``, ``"os-sart"``,
        ``"osem"``; needs ``engine.iterative = true``) with ``iterative``, a dict of
        ``iterations`` (per read-out), ``max_iterations``, ``subsets``, ``relaxation``,
        ``nonneg``, ``tv``, ``tv_steps``, ``tolerance``, ``projector``, ``start``,
        and in cone beam ``planes`` and ``spacing`` (the slice as the middle of a stack
        solved as one problem) (PROTOCOL.md section 12).  Returns the slice as
        ``list_slices`` describes it."""
        return self.request("set_slice", {"id": id, "kind": kind, **spec})

    def remove_slice(self, id: str) -> bool:
        """Removes slice ``id``; NotFound if there is none."""
        return self.request("remove_slice", {"id": id})

    def list_slices(self) -> List[Dict[str, Any]]:
        """Every defined slice (id, topic, kind, shape, orientation, update, pinned,
        wanted, seq)."""
        return self.request("list_slices")

    def resend(self, id: Optional[str] = None) -> int:
        """Asks the daemon to publish again the newest message and the last final of
        slice ``id`` (of every slice when None), for a subscriber that fell behind or
        joined late; every subscriber of those topics gets them again, with the same
        seq. Returns how many messages were queued."""
        return self.request("resend", {"id": id} if id is not None else None)["messages"]

    def set_param(self, name: str, value: Any) -> Dict[str, Any]:
        """Changes ``center`` (float), ``filter`` (name) or ``auto_center`` (bool: apply
        the live centre estimate; scans opened with the auto_center key) of the open
        scan; StateError without one."""
        return self.request("set_param", {"name": name, "value": value})

    def reset(self) -> bool:
        """Empties the window and the dark/flat batches of the open scan."""
        return self.request("reset")

    def tune(self, size: Optional[Sequence[int]] = None, timeout: float = 120.0) -> Dict[str, Any]:
        """Times the back-projection kernels again for slice ``size`` [h, w] of the open
        scan (default: every size of its slices), stores and uses the choice.  The reply
        comes when the timing is done (engine.tune_budget seconds per size), hence the
        longer ``timeout``.  Returns ``{"sizes": [...]}`` with the kernels chosen and the
        ranking; StateError without a scan."""
        return self.request("tune", {"size": list(size)} if size else None, timeout=timeout)

    def wait_wanted(self, ids: Sequence[str], timeout: float = 10.0,
                    subscriptions: Optional[int] = None) -> None:
        """Waits until the daemon sees a subscriber (or pin) for every slice in ``ids``
        (and, if given, at least ``subscriptions`` distinct topic prefixes): ZeroMQ
        subscriptions travel asynchronously, so a scan pushed right after connecting a
        Subscriber could otherwise start before the daemon knows anyone is listening."""
        deadline = time.monotonic() + timeout
        while True:
            wanted = {s["id"] for s in self.list_slices() if s.get("wanted")}
            subs_ok = subscriptions is None or \
                self.status()["slices"]["subscriptions"] >= subscriptions
            if set(ids) <= wanted and subs_ok:
                return
            if time.monotonic() > deadline:
                raise TimeoutError("slices %s not wanted within %g s"
                                   % (sorted(set(ids) - wanted), timeout))
            time.sleep(0.02)

    # -- lifetime -----------------------------------------------------------------------

    def close(self) -> None:
        if not self._sock.closed:
            self._sock.close(linger=0)

    def __enter__(self) -> "Control":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
