"""tomolive — Python client of tomolived, the streaming tomographic reconstruction daemon.

Three classes, one per socket of the daemon (protocol/PROTOCOL.md):

- :class:`Pusher` sends a scan (``scan``, ``frame`` from NumPy arrays, ``end``) to the
  ingest socket;
- :class:`Subscriber` receives published slices as :class:`Slice` objects whose
  ``image`` is a NumPy array viewing the received message (zero-copy), or, with
  ``shm=True`` on the daemon's host, copied out of its shared memory;
- :class:`Control` sends control requests (``status``, ``set_slice``, ...) and raises
  the exception class of an error reply's code (``NotFound``, ``StateError``, ...).

Each object owns one ZeroMQ socket: use it from one thread at a time (or one object per
thread); all three are context managers that close their socket.

Dependencies: pyzmq, msgpack and NumPy (Debian: python3-zmq, python3-msgpack,
python3-numpy).
"""
from .control import Control
from .errors import *  # noqa: F401,F403  the exception classes and ErrorCode
from .errors import __all__ as _errors_all
from .pusher import Pusher
from .shm import ShmError
from .subscriber import Slice, Subscriber
from . import protocol

__version__ = "0.1.0"
__all__ = ["Control", "Pusher", "ShmError", "Slice", "Subscriber", "protocol"] + \
    list(_errors_all)
