"""CURVE keys for a daemon with ``[security] curve = true`` (README, "Security").

A client connects with its own secret certificate (``NAME.key_secret`` of ``tomolive
keygen``) and the daemon's public one (``server.key``), both in czmq's zcert format, which
:func:`zmq.auth.load_certificate` reads. Control, Subscriber and Pusher take them as
``key=`` and ``server_key=``, or from the environment variables ``TOMOLIVE_KEY`` and
``TOMOLIVE_SERVER_KEY``, as the ``tomolive`` command line tool does:

    ctl = tomolive.Control("tcp://beamline:5601", key="alice.key_secret",
                           server_key="server.key")

Neither given: the socket stays plain. Only one: ValueError (a half-configured client
would only fail later, with an obscure handshake error).
"""
from __future__ import annotations

import os
from typing import Optional

import zmq
import zmq.auth

__all__ = ["apply_curve"]


def apply_curve(sock: zmq.Socket, key: Optional[str] = None,
                server_key: Optional[str] = None) -> bool:
    """Makes ``sock`` a CURVE client (before connect); returns whether it did."""
    key = key or os.environ.get("TOMOLIVE_KEY") or None
    server_key = server_key or os.environ.get("TOMOLIVE_SERVER_KEY") or None
    if not key and not server_key:
        return False
    if not key or not server_key:
        raise ValueError("CURVE needs both a client key (key=, TOMOLIVE_KEY) and the server's "
                         "public key (server_key=, TOMOLIVE_SERVER_KEY); %s is missing"
                         % ("the server key" if key else "the client key"))
    public, secret = zmq.auth.load_certificate(key)
    if secret is None:
        raise ValueError("%s has no secret-key (give NAME.key_secret, not NAME.key)" % key)
    server_public, _ = zmq.auth.load_certificate(server_key)
    sock.curve_publickey = public
    sock.curve_secretkey = secret
    sock.curve_serverkey = server_public
    return True
