"""The Node's transport adapter: the core's opaque addresses on Aeron channels.

A node's address is ``"HOST:PORT"``. The node receives on:

* IPC, ``aeron:ipc`` with a stream id of its own, for nodes of the same media driver. It
  registers under ``<driver dir>/exon-nodes/<HOST>_<PORT>`` (a one-line file:
  ``"<ipc stream id> <pid>"``) so that those nodes find it;
* UDP, ``aeron:udp?endpoint=HOST:PORT`` on :data:`UDP_STREAM_ID`, for everyone else (when
  the driver supports UDP; a node runs IPC-only otherwise, see :attr:`udp_enabled`).

It sends to each peer node on one *exclusive* publication of its own, so every sender is a
distinct image (session) at the receiver. The first message on such a publication is a
node-protocol HELLO (protocol 0x02, type 0x01) carrying the sender's reply address; the
receiver maps the image to that address and hands every later frame of the image to the
core with it. When the image goes away (the peer node closed or died), the address is
reported by :meth:`NodeTransport.poll` as gone.

An exon frame longer than the publication's largest message (an eighth of its term, at
most 16 MiB) travels as node-protocol FRAGMENTs (type 0x02), each within that limit, in
order: :func:`encode_fragments` cuts them, :func:`decode_fragment` reads one, and
:class:`~exon.middleware.frame_assembly.FrameAssembler` joins them again
(docs/protocol.md 2.14).

Threading: :meth:`poll` and :meth:`wait` are for one thread at a time (the Node's poll
role); :meth:`offer` for one thread at a time (the Node's lock); :meth:`start_connect` may
run beside both (it only creates a publication: one driver round trip, no wait for the
peer); :meth:`finish_connect` never blocks; :meth:`wake` from any thread.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import socket as pysocket
import struct
import time
from collections.abc import Callable
from typing import Any

from exon import errors
from exon.core.address import join_address
from exon.core.frames import HEADER_LENGTH, PROTOCOL_SOCKETS, FrameType
from exon.core.sealing import PROTOCOL_SEALED, SEAL_OVERHEAD
from exon.middleware.fastpath import OFFER_SPINS, OFFER_YIELD_AFTER, RETRY
from exon.native import ffi, lib
from exon.transport.aeron import (
    Aeron,
    ExclusivePublication,
    Image,
    Subscription,
)
from exon.transport.aeron.cnc import CncFile
from exon.transport.aeron.counters import CounterType

__all__ = ["FRAGMENT", "FRAGMENT_HEADER_LENGTH", "HELLO", "UDP_STREAM_ID", "ConnectBackoff",
           "NodeTransport", "PendingFragments", "decode_fragment", "encode_fragments",
           "encode_hello", "fragment_header", "fragment_step", "is_fragment", "offer_retrying",
           "registry_path"]

UDP_STREAM_ID = 0x4558_4F4E  # "EXON"
NODE_PROTOCOL = 0x02
HELLO = 0x01
FRAGMENT = 0x02
_HELLO_HEADER = struct.Struct("<HBBI")  # version, protocol, type, remaining length
#: version, protocol, type, remaining length, total length of the exon frame, this chunk's
#: offset in it; the chunk follows (docs/protocol.md 2.14)
_FRAGMENT_HEADER = struct.Struct("<HBBIII")
FRAGMENT_HEADER_LENGTH = _FRAGMENT_HEADER.size  # 16
_VERSION = 1


def encode_hello(reply_address: str) -> bytes:
    body = reply_address.encode()
    return _HELLO_HEADER.pack(_VERSION, NODE_PROTOCOL, HELLO, len(body)) + body


def decode_hello(data: bytes | memoryview) -> str | None:
    if len(data) < _HELLO_HEADER.size:
        return None
    version, protocol, kind, length = _HELLO_HEADER.unpack_from(data)
    if (version != _VERSION or protocol != NODE_PROTOCOL or kind != HELLO
            or length != len(data) - _HELLO_HEADER.size):
        return None
    try:
        return bytes(data[_HELLO_HEADER.size :]).decode()
    except UnicodeDecodeError:
        return None


def fragment_step(total: int, limit: int) -> int:
    """The frame bytes each FRAGMENT of a ``total``-byte frame carries (the last one may
    carry fewer) when a message is at most ``limit`` bytes long (the publication's largest
    message), header included: the one rule for where a frame is cut."""
    step = limit - FRAGMENT_HEADER_LENGTH
    if step < 1:
        raise errors.ConfigurationError(f"a FRAGMENT limit of {limit} bytes holds no data")
    if total > 0xFFFF_FFFF:
        raise errors.MessageTooLarge(f"a frame of {total} bytes exceeds a FRAGMENT's u32 total")
    return step


def encode_fragments(frame: bytes, limit: int) -> list[bytes]:
    """``frame`` cut into FRAGMENTs of at most ``limit`` bytes each (header included), in
    the order they must be sent (offset 0 first), as whole messages; what
    :class:`PendingFragments` offers in two pieces each."""
    total = len(frame)
    step = fragment_step(total, limit)
    view = memoryview(frame)
    return [fragment_header(total, offset, min(step, total - offset)) +
            view[offset : offset + step]
            for offset in range(0, total, step)]


def offer_retrying(rc: int, offer: Callable[..., int], args: tuple[Any, ...],
                   spins: int) -> int:
    """After a first ``offer(*args)`` that returned ``rc``: while back pressure or an admin
    action refuses it, try again up to ``spins`` times (yielding the CPU after the first
    ``OFFER_YIELD_AFTER``: exon_link_table.h's rule, mirrored in exon.middleware.fastpath);
    the last Aeron outcome. Callers make the first offer
    themselves, so that one that goes through costs no call here."""
    tries = 0
    while rc in RETRY and tries < spins:
        tries += 1
        if tries > OFFER_YIELD_AFTER:
            time.sleep(0)
        rc = offer(*args)
    return rc


def fragment_header(total: int, offset: int, length: int) -> bytes:
    """The 16-byte header of the FRAGMENT that carries ``length`` bytes of a ``total``-byte
    frame from ``offset``: the piece in front of the chunk in a two-piece offer."""
    return _FRAGMENT_HEADER.pack(_VERSION, NODE_PROTOCOL, FRAGMENT, 8 + length, total, offset)


class PendingFragments:
    """A frame on its way out as FRAGMENTs: the offset of the first chunk not yet offered
    (a backlog entry that stands for the FRAGMENTs left, cut as they are offered)."""

    __slots__ = ("frame", "offset")

    def __init__(self, frame: bytes, offset: int = 0) -> None:
        self.frame = frame
        self.offset = offset

    def __len__(self) -> int:
        return len(self.frame) - self.offset

    def offer(self, pub: Any, limit: int, spins: int = 0) -> int:
        """Offer the FRAGMENTs left on ``pub`` (largest message ``limit``), each as a
        header and a view of the frame (``pub.offer2``: no chunk is built), in order,
        until one is refused: the last outcome (>= 0: all went; then :attr:`offset` is the
        frame's length). Back pressure is retried ``spins`` times per chunk (see
        :meth:`NodeTransport.offer`)."""
        frame = self.frame
        total = len(frame)
        step = fragment_step(total, limit)
        view = memoryview(frame)
        offer2 = pub.offer2
        offset = self.offset
        rc = 0
        while offset < total:
            length = min(step, total - offset)
            head = fragment_header(total, offset, length)
            body = view[offset : offset + length]
            rc = offer2(head, body)
            if rc < 0:
                rc = offer_retrying(rc, offer2, (head, body), spins)
            if rc < 0:
                break
            offset += length
        self.offset = offset
        return rc


def decode_fragment(data: bytes | memoryview) -> tuple[int, int, memoryview]:
    """(total length, offset, chunk) of a FRAGMENT; :class:`~exon.errors.FrameDecodeError`
    if ``data`` is not a well-formed one (short, another version, protocol or type, a
    ``remaining_length`` that disagrees with its length, an empty chunk, or a chunk that
    runs past ``total``)."""
    if len(data) < FRAGMENT_HEADER_LENGTH:
        raise errors.FrameDecodeError(
            f"FRAGMENT of {len(data)} bytes is shorter than its {FRAGMENT_HEADER_LENGTH}-byte "
            "header")
    version, protocol, kind, remaining, total, offset = _FRAGMENT_HEADER.unpack_from(data)
    if version != _VERSION or protocol != NODE_PROTOCOL or kind != FRAGMENT:
        raise errors.FrameDecodeError(
            f"not a FRAGMENT (version {version}, protocol 0x{protocol:02x}, type 0x{kind:02x})")
    length = len(data) - FRAGMENT_HEADER_LENGTH
    if remaining != len(data) - 8:
        raise errors.FrameDecodeError(
            f"FRAGMENT remaining length {remaining} does not match the {len(data) - 8} bytes "
            "present")
    if length == 0 or offset + length > total:
        raise errors.FrameDecodeError(
            f"FRAGMENT chunk of {length} bytes at {offset} does not fit a frame of {total}")
    return total, offset, memoryview(data)[FRAGMENT_HEADER_LENGTH:]


def is_fragment(data: bytes | memoryview) -> bool:
    """Whether ``data`` claims to be a FRAGMENT (protocol and type bytes only; the
    assembler checks the rest)."""
    return len(data) >= 4 and data[2] == NODE_PROTOCOL and data[3] == FRAGMENT


def is_malformed(data: bytes | memoryview) -> bool:
    """Whether ``data`` can be no exon frame at all: the Python twin of the native poll's
    ``exon_lt_frame_malformed``, which drops such messages before Python sees them
    (docs/protocol.md 2.17): shorter than 8 bytes, another version, a remaining length
    that disagrees, an unknown protocol, a sockets frame shorter than 20 bytes (a sealed
    one: 44) or of an unknown type, a node frame other than HELLO or FRAGMENT."""
    if len(data) < _HELLO_HEADER.size:
        return True
    version, protocol, kind, length = _HELLO_HEADER.unpack_from(data)
    if version != _VERSION or length != len(data) - _HELLO_HEADER.size:
        return True
    if protocol == PROTOCOL_SOCKETS:
        return len(data) < HEADER_LENGTH or not FrameType.ERROR <= kind <= FrameType.FLOW
    if protocol == PROTOCOL_SEALED:  # a sockets frame of an encrypted link (2.20)
        return (len(data) < HEADER_LENGTH + SEAL_OVERHEAD
                or not FrameType.ERROR <= kind <= FrameType.FLOW)
    if protocol == NODE_PROTOCOL:
        return kind not in (HELLO, FRAGMENT)
    return True


def registry_dir(driver_dir: str) -> str:
    return os.path.join(driver_dir, "exon-nodes")


def registry_path(driver_dir: str, address: str) -> str:
    name = address.replace("[", "").replace("]", "").replace("/", "_")
    host, _, port = name.rpartition(":")
    return os.path.join(registry_dir(driver_dir), f"{host}_{port}")


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (signal 0; another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


#: an embedded driver's directory: ``exon-node-<pid>-<random>`` under the driver dir base
NODE_DIR_PREFIX = "exon-node"


def sweep_stale_node_dirs(base: str) -> list[str]:
    """Remove the embedded-driver directories (``exon-node-<pid>-*`` in ``base``) whose
    process is gone, as Aeron cleans a dead driver's directory at the next start: a node
    killed with SIGKILL or SIGTERM leaves its directory (log buffers, CnC) in /dev/shm.
    Returns the names removed."""
    return sweep_stale_pid_dirs(base, NODE_DIR_PREFIX)


def sweep_stale_pid_dirs(base: str, prefix: str) -> list[str]:
    """Remove the directories ``<prefix>-<pid>-*`` in ``base`` whose process is gone. A
    directory whose pid is alive (or not ours to signal), or is this process's, is never
    touched. Returns the names removed."""
    removed: list[str] = []
    try:
        names = os.listdir(base)
    except OSError:
        return removed
    for name in names:
        if not name.startswith(prefix + "-"):
            continue
        pid_text = name[len(prefix) + 1:].split("-", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid() or pid_alive(int(pid_text)):
            continue
        shutil.rmtree(os.path.join(base, name), ignore_errors=True)
        if not os.path.exists(os.path.join(base, name)):
            removed.append(name)
    return removed


def free_port(host: str) -> int:
    """A UDP port that is free on ``host`` right now."""
    family = pysocket.AF_INET6 if ":" in host else pysocket.AF_INET
    with pysocket.socket(family, pysocket.SOCK_DGRAM) as s:
        try:
            s.bind((host, 0))
        except OSError as exc:
            raise errors.ConfigurationError(
                f"endpoint host {host!r} cannot take a UDP port on this machine (is it one of "
                f"its addresses?): {exc.strerror or exc}") from exc
        return int(s.getsockname()[1])


class ConnectBackoff:
    """When an address that did not answer may be tried again (time is a parameter).

    Each failure doubles the address's delay, from ``initial`` up to ``maximum``; a success
    forgets it. At most ``limit`` addresses are remembered (a flood of made-up addresses
    cannot grow it): past that, expired entries go first, then the oldest.
    """

    def __init__(self, *, initial: float = 0.25, maximum: float = 5.0,
                 limit: int = 4096) -> None:
        self.initial = initial
        self.maximum = maximum
        self.limit = limit
        self._entries: dict[str, tuple[float, float]] = {}  # address -> (retry at, delay)

    def blocked(self, address: str, now: float) -> bool:
        """True while ``address`` must not be tried."""
        entry = self._entries.get(address)
        return entry is not None and now < entry[0]

    def failed(self, address: str, now: float) -> float:
        """``address`` did not answer: the delay before it may be tried again."""
        entry = self._entries.pop(address, None)
        delay = self.initial if entry is None else min(self.maximum, entry[1] * 2)
        if len(self._entries) >= self.limit:
            horizon = now - self.maximum
            self._entries = {a: e for a, e in self._entries.items() if e[0] > horizon}
            while len(self._entries) >= self.limit:
                del self._entries[next(iter(self._entries))]
        self._entries[address] = (now + delay, delay)
        return delay

    def succeeded(self, address: str) -> None:
        self._entries.pop(address, None)

    def __len__(self) -> int:
        return len(self._entries)


class NodeTransport:
    """Subscriptions of one node and its exclusive publications towards peer nodes."""

    def __init__(self, aeron: Aeron, *, host: str, port: int, rng: random.Random | None = None,
                 udp: bool = True, invoker: Any = None) -> None:
        self.aeron = aeron
        #: the ``exon_driver_t *`` of an embedded INVOKER driver: the waits run its sender
        #: and receiver duty cycles (exon_invoker.h); NULL otherwise
        self._invoker = ffi.NULL if invoker is None else invoker
        self._bridged = False
        self._rng = rng or random.Random()
        self.host = host
        explicit = port != 0
        self.port = port if explicit else free_port(host)
        self.stream_id = self._rng.randrange(0x10000, 0x3FFF_FFFF)
        self._registry: str | None = None
        self._register(explicit)
        self.address = join_address(host, self.port)
        self.subscriptions: list[Subscription] = []
        try:
            self.subscriptions.append(aeron.add_subscription("aeron:ipc", self.stream_id))
            self.udp_enabled = False
            if udp:
                try:
                    # one doorbell for both: a wait on the IPC images and the UDP images
                    # is woken by whichever gets data
                    self.subscriptions.append(aeron.add_subscription(
                        f"aeron:udp?endpoint={self.address}", UDP_STREAM_ID,
                        doorbell_counter_id=self.subscriptions[0].doorbell_counter_id))
                    self.udp_enabled = True
                except errors.ExonError:
                    self.udp_enabled = False  # this driver has no UDP: IPC only
        except BaseException:
            self.close()
            raise
        self._doorbell = lib.exon_doorbell_word(aeron.counters_values,
                                                self.subscriptions[0].doorbell_counter_id)
        if self._invoker != ffi.NULL:
            # rings of this process (wake, image events, the agent's receiver) end an
            # invoker's park, which waits in ppoll rather than on the futex
            self._bridged = lib.exon_invoker_bridge(self._invoker, self._doorbell) == 0
        self._images: list[Image] = []
        self._image_array: Any = None
        self._image_address: dict[int, str] = {}  # id(image) -> reply address
        self.publications: dict[str, ExclusivePublication] = {}
        self._cnc: CncFile | None = None  # opened when a relink asks how quiet a stream is
        self.hello_dropped = 0
        #: channels (correlation ids) of the images gone since the Node last looked: it
        #: forgets their FRAGMENT assemblies and clears the list
        self.images_ended: list[int] = []
        #: (address, channel) of images gone while another image still has that address
        #: (the peer node restarted): the Node breaks the links of that channel only
        self.gone_channels: list[tuple[str, int]] = []

    # ---- registry ------------------------------------------------------------------

    def _register(self, explicit: bool) -> None:
        directory = registry_dir(self.aeron.dir)
        os.makedirs(directory, exist_ok=True)
        for _attempt in range(20):
            address = join_address(self.host, self.port)
            path = registry_path(self.aeron.dir, address)
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if not self._stale(path):
                    if explicit:
                        raise errors.ConfigurationError(
                            f"address {address} is taken by a live node of driver "
                            f"{self.aeron.dir}") from None
                    self.port = free_port(self.host)
                    continue
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                continue
            with os.fdopen(fd, "w") as f:
                f.write(f"{self.stream_id} {os.getpid()}\n")
            self._registry = path
            return
        raise errors.ConfigurationError(f"could not register a node address on {self.host}")

    @staticmethod
    def _stale(path: str) -> bool:
        try:
            with open(path) as f:
                _stream, pid = f.read().split()
            return not pid_alive(int(pid))
        except (OSError, ValueError):
            return False  # being written right now: treat as taken

    def _lookup_ipc(self, address: str) -> int | None:
        path = registry_path(self.aeron.dir, address)
        try:
            with open(path) as f:
                stream, pid = f.read().split()
        except (OSError, ValueError):
            return None
        if not pid_alive(int(pid)):
            return None
        return int(stream)

    def channel_for(self, address: str) -> tuple[str, int]:
        """IPC for nodes registered with our driver, UDP for the rest."""
        stream = self._lookup_ipc(address)
        if stream is not None:
            return "aeron:ipc", stream
        return f"aeron:udp?endpoint={address}", UDP_STREAM_ID

    # ---- sending -------------------------------------------------------------------

    def other_channels(self, address: str, index: int) -> list[int]:
        """Channels of the images other than ``index`` whose HELLO announced ``address``."""
        new = self._images[index]
        return [int(img.correlation_id) for img in self._images
                if img is not new and self._image_address.get(id(img)) == address]

    def channel_quiet(self, channel: int) -> float | None:
        """Seconds since the image ``channel`` last heard its sender (the driver's
        ``rcv-heard`` counter, 10 ms steps); None when the driver keeps no such counter
        (Aeron's own) or the image is gone."""
        if self._cnc is None:
            try:
                self._cnc = CncFile.open(self.aeron.dir)
            except errors.ExonError:
                return None
        found = self._cnc.counters().find(type_id=CounterType.RECEIVER_HEARD,
                                          registration_id=channel)
        if not found:
            return None
        return max(0.0, (time.time() * 1000 - found[0].value) / 1000)

    def sends_setups(self, address: str) -> bool:
        """Whether a publication towards ``address`` goes over UDP (it sends SETUPs and
        heartbeats there until the peer's driver answers), not IPC."""
        return self.channel_for(address)[0].startswith("aeron:udp")

    def start_connect(self, address: str) -> ExclusivePublication | None:
        """Create the publication towards ``address`` (one driver round trip, no wait for
        the peer); None if the driver refused it. :meth:`finish_connect` completes it."""
        try:
            channel, stream = self.channel_for(address)
            return self.aeron.add_exclusive_publication(channel, stream)
        except errors.ExonError:
            return None

    def finish_connect(self, pub: ExclusivePublication) -> bool:
        """Non-blocking: True once the peer's driver answered ``pub`` and our HELLO is in
        it (the publication is ready for frames); False: not yet, ask again later."""
        if not pub.is_connected:
            return False
        try:
            return pub.offer(encode_hello(self.address)) >= 0
        except errors.ExonError:
            return False

    @staticmethod
    def offer(pub: ExclusivePublication, data: bytes) -> int:
        """Offer with a short bounded retry on back pressure; the final Aeron outcome."""
        rc = pub.offer(data)
        if rc < 0:
            rc = offer_retrying(rc, pub.offer, (data,), OFFER_SPINS)
        return rc

    def drop_publication(self, address: str) -> None:
        pub = self.publications.pop(address, None)
        if pub is not None:
            with contextlib.suppress(errors.ExonError):
                pub.close()

    # ---- receiving -----------------------------------------------------------------

    def _refresh_images(self, gone: list[str]) -> None:
        images: list[Image] = []
        for sub in self.subscriptions:
            images.extend(sub.images)
        if images == self._images:
            return
        live = {id(img) for img in images}
        for img in self._images:
            if id(img) not in live:
                self.images_ended.append(int(img.correlation_id))
                address = self._image_address.pop(id(img), None)
                if address is None:
                    continue
                if address not in self._image_address.values():
                    gone.append(address)
                else:
                    self.gone_channels.append((address, img.correlation_id))
        self._images = images
        self._image_array = (ffi.new("exon_image_t *[]", [img.cdata for img in images])
                             if images else None)

    def refresh(self, poller: Any, key_of: Any) -> list[str]:
        """Refresh the image list for ``poller`` (a :class:`~exon.middleware.fastpath.Poller`);
        returns the addresses gone. ``key_of(address)`` gives an image's peer key."""
        if poller._count == len(self._images):
            # the common case: no image came or went (a plain loop: this runs on every
            # poll, and any() over a generator costs two calls more per subscription)
            for sub in self.subscriptions:
                if sub.has_image_events:
                    break
            else:
                return []
        gone: list[str] = []
        before = self._images
        self._refresh_images(gone)
        if self._images is not before or poller._count != len(self._images):
            addresses = self._image_address
            poller.set_images(self._images, [
                key_of(addresses[id(img)]) if id(img) in addresses else -1
                for img in self._images])
        return gone

    def image_address(self, index: int) -> str | None:
        return self._image_address.get(id(self._images[index]))

    def image_channel(self, index: int) -> int:
        """The stream identity of image ``index`` (unique per image of the driver): the
        core's ``channel`` of the frames that come on it."""
        return int(self._images[index].correlation_id)

    def hello(self, index: int, frame: bytes | memoryview) -> str | None:
        """The first frame of image ``index``: its reply address, or None (dropped)."""
        address = decode_hello(frame)
        if address is None:
            self.hello_dropped += 1
            return None
        self._image_address[id(self._images[index])] = address
        return address

    def wait(self, timeout: float, spin: float = 0.0) -> bool:
        """Sleep (GIL released) until data, an image change, :meth:`wake` or ``timeout``;
        spin (no syscall) for the first ``spin`` seconds of it (a client thread expecting
        an answer soon: no futex wake on either side when it comes within the spin)."""
        arr = self._image_array
        rc: int
        if self._bridged:
            rc = lib.exon_invoker_wait(self._invoker, ffi.NULL if arr is None else arr,
                                       len(self._images), self._doorbell, int(spin * 1e9),
                                       max(0, int(timeout * 1e9)))
        else:
            rc = lib.exon_lt_wait(ffi.NULL if arr is None else arr, len(self._images),
                                  self._doorbell, int(spin * 1e9), max(0, int(timeout * 1e9)))
        return rc >= 0

    def invoke(self) -> int:
        """INVOKER: one sender + receiver duty cycle of the embedded driver on this thread
        (what was offered leaves, what arrived is in the images); 0 otherwise. It runs
        after every :meth:`wait`, one that ended on data too: what the caller offered
        since that wait's own cycles (a FLOW granting credit) leaves only here."""
        return int(lib.exon_driver_invoke(self._invoker)) if self._bridged else 0

    def wake(self) -> None:
        """Interrupt a :meth:`wait` in another thread."""
        lib.exon_doorbell_ring(self._doorbell)

    # ---- life cycle ------------------------------------------------------------------

    def close(self) -> None:
        if getattr(self, "_bridged", False):
            lib.exon_invoker_unbridge(self._invoker, self._doorbell)
            self._bridged = False
        for address in list(getattr(self, "publications", ())):  # (a failed __init__ too)
            self.drop_publication(address)
        # the sharers of the first subscription's doorbell go first: the driver frees that
        # counter with its owner, and must not ring it for another image after that
        for sub in reversed(getattr(self, "subscriptions", [])):
            with contextlib.suppress(errors.ExonError):
                sub.close()
        cnc, self._cnc = getattr(self, "_cnc", None), None
        if cnc is not None:
            cnc.close()
        if self._registry is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._registry)
            self._registry = None
