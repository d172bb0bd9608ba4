"""Reading slices out of tomolived's shared memory (PROTOCOL.md section 10.1).

A subscriber on the daemon's host can take slices on ``shm/<id>/``: the message is the
header alone, and its ``shm_name`` / ``shm_offset`` say where the pixels are, in a POSIX
shared-memory object (``/dev/shm/<name without the leading />``).  The daemon fills the
object's slots in turn; the little-endian u64 64 bytes before a slot's pixels is its
sequence word, 0 while the daemon writes the slot, then the seq of the slice in it.  A
reader copies the pixels and checks that the word equals the header's seq before and
after the copy; otherwise the slot was reused (the reader fell behind) and the copy is
discarded: the slice is *stale*.

(The two loads of the word and the copy between them are ordered as the seqlock needs on
x86-64, where loads are never reordered with loads; the interpreter gives no fences.)

    r = ShmReader()
    image = r.read(header)      # a new array, or None when stale
    r.close()
"""
from __future__ import annotations

import mmap
import os
import struct
from typing import Any, Mapping, Optional

import numpy as np

from . import protocol

__all__ = ["ShmReader", "ShmError"]

WORD_BACK = 64  # the sequence word lies this many bytes before the pixels
_WORD = struct.Struct("<Q")


class ShmError(OSError):
    """A slice's shared memory cannot be read: no such object (not on the daemon's host?),
    or the pixels lie outside it."""


class ShmReader:
    """Maps the object a slice names, keeps it mapped while the name stays the same, and
    copies slices out of it.  The object is looked up again when the name changes, and
    also when an object of the same name was created anew (a restarted daemon, a slice
    removed and defined again): its inode tells them apart, so a mapping of the old one
    can never pass off old pixels for a new slice of the same seq."""

    def __init__(self, root: str = "/dev/shm"):
        self.root = root
        self.name: Optional[str] = None
        self._mm: Optional[mmap.mmap] = None
        self._ino: Optional[tuple] = None

    def _path(self, name: str) -> str:
        return os.path.join(self.root, name[1:])

    def _map(self, name: str) -> mmap.mmap:
        """The mapping of ``name``, (re)made when it is not the object mapped now."""
        try:
            st = os.stat(self._path(name))
        except OSError as e:
            self.close()
            raise ShmError("shared memory %s: %s (is the subscriber on the daemon's host?)"
                           % (name, e.strerror)) from None
        if self._mm is not None and name == self.name and self._ino == (st.st_dev, st.st_ino):
            return self._mm
        self.close()
        try:
            fd = os.open(self._path(name), os.O_RDONLY)
            try:
                self._mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
                st = os.fstat(fd)
            finally:
                os.close(fd)  # the mapping keeps the object
        except (OSError, ValueError) as e:  # ValueError: an empty object
            raise ShmError("shared memory %s: %s" % (name, e)) from None
        self.name = name
        self._ino = (st.st_dev, st.st_ino)
        return self._mm

    def read(self, h: Mapping[str, Any]) -> Optional[np.ndarray]:
        """The pixels of slice header ``h`` (checked by protocol.decode_slice, with
        ``shm_name``) as a new ``h x w`` array, or None when its slot no longer holds it
        (stale).  Raises ShmError when the object is not there or too small."""
        mm = self._map(h["shm_name"])
        off = h["shm_offset"]
        dt = protocol.numpy_dtype(h["dtype"])
        rows, cols = h["shape"]
        size = protocol.frame_bytes(h["shape"], h["dtype"])
        if off < WORD_BACK or off + size > len(mm):
            raise ShmError("slice %s: %d bytes at offset %d lie outside %s (%d bytes)"
                           % (h["id"], size, off, self.name, len(mm)))
        seq = h["seq"]
        if _WORD.unpack_from(mm, off - WORD_BACK)[0] != seq:
            return None
        image = np.frombuffer(mm, dtype=dt, count=rows * cols, offset=off).reshape(rows, cols)
        image = image.copy()
        if _WORD.unpack_from(mm, off - WORD_BACK)[0] != seq:
            return None  # rewritten while we copied: the copy may be torn
        return image

    def close(self) -> None:
        """Unmaps the object (idempotent)."""
        if self._mm is not None:
            self._mm.close()
        self._mm = None
        self.name = None
        self._ino = None
