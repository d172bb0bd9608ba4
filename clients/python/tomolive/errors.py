"""Error codes of the tomolive wire protocol and the exceptions that carry them.

The numeric codes are those of protocol/PROTOCOL.md section 11: they travel in the
``error`` map of a failed control reply.  Every code has its own exception class, so a
caller can write ``except tomolive.NotFound:``; the same classes are raised when this
package refuses to build an invalid message locally (a frame of a wrong dtype raises
:class:`BadDtype` before anything is sent, as the daemon would have answered).

Hierarchy::

    TomoliveError                 every error from this package, .code and .message
      ProtocolError (ValueError)  codes 1-16: the message itself is invalid
        PartsError, HeaderTooBig, MalformedHeader, LimitExceeded, NotAMap,
        DuplicateKey, UnsupportedVersion, WrongType, MissingKey, KeyTypeError,
        NotFinite, OutOfRange, BadDtype, BadKind, PayloadOverflow, PayloadLength
      RequestError                codes 32-39: the daemon's answer to a valid request
        UnknownCommand, BadArgument, NotFound, StateError, Unsupported,
        ResourceError, InternalError, Denied

A code this package does not know (a newer daemon) becomes a plain
:class:`TomoliveError` with that code, as PROTOCOL.md section 9.2 asks.  Timeouts are
Python's built-in :class:`TimeoutError`, not a protocol error.
"""
from __future__ import annotations

import enum
from typing import Dict, Optional, Type, Union

__all__ = [
    "ErrorCode", "TomoliveError", "ProtocolError", "RequestError", "error_class",
    "error_from_reply",
    "PartsError", "HeaderTooBig", "MalformedHeader", "LimitExceeded", "NotAMap",
    "DuplicateKey", "UnsupportedVersion", "WrongType", "MissingKey", "KeyTypeError",
    "NotFinite", "OutOfRange", "BadDtype", "BadKind", "PayloadOverflow", "PayloadLength",
    "UnknownCommand", "BadArgument", "NotFound", "StateError", "Unsupported",
    "ResourceError", "InternalError", "Denied",
]


class ErrorCode(enum.IntEnum):
    """The error codes of PROTOCOL.md section 11, by their protocol names."""

    OK = 0
    E_PARTS = 1
    E_TOO_BIG = 2
    E_MALFORMED = 3
    E_LIMIT = 4
    E_NOT_MAP = 5
    E_DUP_KEY = 6
    E_VERSION = 7
    E_TYPE = 8
    E_MISSING = 9
    E_KEY_TYPE = 10
    E_NOT_FINITE = 11
    E_RANGE = 12
    E_DTYPE = 13
    E_KIND = 14
    E_OVERFLOW = 15
    E_PAYLOAD = 16
    E_UNKNOWN_CMD = 32
    E_BAD_ARG = 33
    E_NOT_FOUND = 34
    E_STATE = 35
    E_UNSUPPORTED = 36
    E_RESOURCE = 37
    E_INTERNAL = 38
    E_DENIED = 39


class TomoliveError(Exception):
    """Base of every error this package raises for the protocol or the daemon.

    Attributes: ``code`` (an :class:`ErrorCode`, or a plain int for a code this package
    does not know), ``name`` (``"E_..."`` or ``"E_<code>"``), ``message`` (for humans; its
    wording is not part of the protocol) and ``cmd`` (the command of a failed request, or
    None).
    """

    code: Union[ErrorCode, int] = ErrorCode.OK

    def __init__(self, message: str, code: Optional[int] = None, cmd: Optional[str] = None):
        super().__init__(message)
        if code is not None:
            try:
                self.code = ErrorCode(code)
            except ValueError:
                self.code = int(code)
        self.message = message
        self.cmd = cmd

    @property
    def name(self) -> str:
        """The protocol name of the code, e.g. ``"E_NOT_FOUND"``."""
        return self.code.name if isinstance(self.code, ErrorCode) else "E_%d" % self.code

    def __str__(self) -> str:
        where = "%s: " % self.cmd if self.cmd else ""
        return "%s%s (%d): %s" % (where, self.name, int(self.code), self.message)


class ProtocolError(TomoliveError, ValueError):
    """Codes 1-16: a message that breaks the wire format (sent by us or by the daemon)."""


class RequestError(TomoliveError):
    """Codes 32-39: the daemon understood the request and refused or failed it."""


def _define(name: str, base: type, code: ErrorCode, doc: str) -> type:
    cls = type(name, (base,), {"code": code, "__doc__": doc, "__module__": __name__})
    return cls


PartsError = _define("PartsError", ProtocolError, ErrorCode.E_PARTS,
                     "E_PARTS: wrong number of message parts, or a slice topic out of place.")
HeaderTooBig = _define("HeaderTooBig", ProtocolError, ErrorCode.E_TOO_BIG,
                       "E_TOO_BIG: a header over 64 KiB.")
MalformedHeader = _define("MalformedHeader", ProtocolError, ErrorCode.E_MALFORMED,
                          "E_MALFORMED: not one complete msgpack object.")
LimitExceeded = _define("LimitExceeded", ProtocolError, ErrorCode.E_LIMIT,
                        "E_LIMIT: nesting deeper than 8, or a container larger than its bytes.")
NotAMap = _define("NotAMap", ProtocolError, ErrorCode.E_NOT_MAP,
                  "E_NOT_MAP: the header (or args) is not a map with str keys.")
DuplicateKey = _define("DuplicateKey", ProtocolError, ErrorCode.E_DUP_KEY,
                       "E_DUP_KEY: a key appears twice in a map.")
UnsupportedVersion = _define("UnsupportedVersion", ProtocolError, ErrorCode.E_VERSION,
                             "E_VERSION: a major version this reader does not speak.")
WrongType = _define("WrongType", ProtocolError, ErrorCode.E_TYPE,
                    "E_TYPE: an unknown message type, or one not accepted on this socket.")
MissingKey = _define("MissingKey", ProtocolError, ErrorCode.E_MISSING,
                     "E_MISSING: a required key is missing.")
KeyTypeError = _define("KeyTypeError", ProtocolError, ErrorCode.E_KEY_TYPE,
                       "E_KEY_TYPE: a value of the wrong msgpack type.")
NotFinite = _define("NotFinite", ProtocolError, ErrorCode.E_NOT_FINITE,
                    "E_NOT_FINITE: NaN or infinity where a finite number is required.")
OutOfRange = _define("OutOfRange", ProtocolError, ErrorCode.E_RANGE,
                     "E_RANGE: a number, length or shape out of range.")
BadDtype = _define("BadDtype", ProtocolError, ErrorCode.E_DTYPE,
                   "E_DTYPE: a sample type other than u8, u16, u32, f32 (little-endian).")
BadKind = _define("BadKind", ProtocolError, ErrorCode.E_KIND,
                  "E_KIND: an unknown enumerated name (kind, geometry, ...).")
PayloadOverflow = _define("PayloadOverflow", ProtocolError, ErrorCode.E_OVERFLOW,
                          "E_OVERFLOW: rows x cols x sample size is 2 GiB or more.")
PayloadLength = _define("PayloadLength", ProtocolError, ErrorCode.E_PAYLOAD,
                        "E_PAYLOAD: a payload whose length differs from its shape and dtype.")
UnknownCommand = _define("UnknownCommand", RequestError, ErrorCode.E_UNKNOWN_CMD,
                         "E_UNKNOWN_CMD: no such control command.")
BadArgument = _define("BadArgument", RequestError, ErrorCode.E_BAD_ARG,
                      "E_BAD_ARG: an argument of the right type that the command cannot accept.")
NotFound = _define("NotFound", RequestError, ErrorCode.E_NOT_FOUND,
                   "E_NOT_FOUND: the named object (slice, series) does not exist.")
StateError = _define("StateError", RequestError, ErrorCode.E_STATE,
                     "E_STATE: not possible in the current state (e.g. no scan is open).")
Unsupported = _define("Unsupported", RequestError, ErrorCode.E_UNSUPPORTED,
                      "E_UNSUPPORTED: valid, but this build does not implement it.")
ResourceError = _define("ResourceError", RequestError, ErrorCode.E_RESOURCE,
                        "E_RESOURCE: a required resource (GPU, memory, slice slots) is not there.")
InternalError = _define("InternalError", RequestError, ErrorCode.E_INTERNAL,
                        "E_INTERNAL: a bug or unexpected failure inside the daemon.")
Denied = _define("Denied", RequestError, ErrorCode.E_DENIED,
                 "E_DENIED: the client's key has a role that may not run this command.")

_BY_CODE: Dict[int, Type[TomoliveError]] = {
    cls.code: cls for cls in (
        PartsError, HeaderTooBig, MalformedHeader, LimitExceeded, NotAMap, DuplicateKey,
        UnsupportedVersion, WrongType, MissingKey, KeyTypeError, NotFinite, OutOfRange,
        BadDtype, BadKind, PayloadOverflow, PayloadLength, UnknownCommand, BadArgument,
        NotFound, StateError, Unsupported, ResourceError, InternalError, Denied)
}


def error_class(code: int) -> Type[TomoliveError]:
    """The exception class for a code; :class:`TomoliveError` for an unknown one."""
    return _BY_CODE.get(int(code), TomoliveError)


def error_from_reply(code: int, message: str, cmd: Optional[str] = None) -> TomoliveError:
    """The exception for the ``error`` map of a failed reply (not raised here)."""
    return error_class(code)(message, code=code, cmd=cmd)
