"""exon's exceptions: one small hierarchy under :class:`ExonError`.

Each class says who broke what. Where a caller would reasonably catch a built-in
(``TimeoutError``, ``ValueError``, ``OSError``) the exon class subclasses it too.
"""

from __future__ import annotations

from typing import Any


class ExonError(Exception):
    """Base class of every error exon raises."""


# ---- the caller's side -------------------------------------------------------------


class ConfigurationError(ExonError, ValueError):
    """A setting, argument or channel URI is invalid."""


class ArgumentTypeError(ExonError, TypeError):
    """An argument of the wrong type: a payload that is not bytes-like (``bytes``,
    ``bytearray``, ``memoryview`` or another buffer; a ``str`` must be encoded first), a
    timeout that is not a number."""


class ChannelUriError(ConfigurationError):
    """A channel URI is malformed; the message names the bad part."""


class MessageTooLarge(ExonError, ValueError):
    """A message is longer than the transport or the link allows."""


class StateError(ExonError):
    """The call is not valid in the object's current state (e.g. REQ receive before send)."""


class ClosedError(ExonError):
    """You closed it (socket, node, publication, client)."""


class Timeout(ExonError, TimeoutError):
    """A blocking call did not complete within its timeout."""


class BackPressured(ExonError):
    """A non-blocking call found no credit or no room in the window."""


# ---- the peer's or the network's side --------------------------------------------


class ProtocolError(ExonError):
    """A peer sent something invalid."""


class FrameDecodeError(ProtocolError):
    """Bytes that do not decode as a frame: short, oversized, wrong version or unknown type."""


class LinkRefused(ExonError):
    """The peer socket (or ours) refused the link.

    ``reason`` is the refusal code name (e.g. ``"INCOMPATIBLE"``), ``permanent`` says
    whether retrying can ever help.
    """

    def __init__(self, message: str, *, reason: str = "UNKNOWN", permanent: bool = True) -> None:
        super().__init__(message)
        self.reason = reason
        self.permanent = permanent


class BrokenLink(ExonError):
    """The peer or the network broke the link (peer node gone, link closed by error)."""


BrokenLinkError = BrokenLink


class SocketNotFound(ExonError):
    """The destination node has no socket with that tag."""


class SocketNotLinked(ExonError):
    """The destination socket is not linked with the sender."""


# ---- the transport ----------------------------------------------------------------


class TransportError(ExonError):
    """Something failed in the Aeron transport (driver, CnC, log buffers)."""


class DriverError(TransportError):
    """The media driver refused a command; the message carries the driver's reason."""


class DriverTimeout(TransportError):
    """The media driver stopped answering (its heartbeat is stale or its process is gone)."""


class DriverUnavailable(TransportError):
    """No live media driver where one was asked for (``Node(driver="shared")`` with no host
    driver running, or a stale directory); the message says where and how to start one."""


class CncError(TransportError):
    """The command-and-control file is missing, truncated, corrupt or from another version."""


class LogBufferError(TransportError):
    """A log buffer file is truncated or inconsistent."""


class ResourceExhausted(TransportError):
    """A fixed-size table (counters, doorbells, links) is full."""


class NativeOSError(TransportError, OSError):
    """A system call in the native core failed; ``errno`` is set."""

    def __init__(self, errno_value: int, message: str, *args: Any) -> None:
        OSError.__init__(self, errno_value, message, *args)


class EncryptionUnavailable(ExonError):
    """Encryption was asked for where it cannot work: the cryptographic library exon loads
    at run time (OpenSSL 3's ``libcrypto.so.3``) is missing or lacks a primitive. The
    message names what is missing."""


class KeyFileError(ExonError, ValueError):
    """A key file that cannot be used: wrong size or format, or readable by other users."""
