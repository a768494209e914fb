"""The Aeron client: connect to a media driver through its ``cnc.dat``.

``Aeron.connect(dir)`` validates the CnC, checks the driver heartbeat and starts one
native client-conductor thread (keepalives, the to-clients broadcast, image events, driver
liveness). Commands wait in C with the GIL released and a timeout. A client whose driver
died gets :class:`~exon.errors.DriverTimeout` from every call instead of hanging.

Publications are :class:`~exon.transport.aeron.publication.Publication` /
:class:`~exon.transport.aeron.publication.ExclusivePublication` over the driver's log and
its pub-lmt counter. A :class:`Subscription` polls all of its images (round-robin start)
and can ``wait()`` on its doorbell without spinning.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from exon import errors
from exon.native import check, error_for, ffi, lib
from exon.transport.aeron.image import FragmentHeader, Image
from exon.transport.aeron.logbuffer import LogBuffer
from exon.transport.aeron.publication import ExclusivePublication, Publication
from exon.transport.aeron.settings import default_driver_dir

__all__ = ["Aeron", "ClientCounter", "Subscription"]

DEFAULT_TIMEOUT = 5.0
#: seconds close() waits for other threads' calls on the handle (each bounded by its own
#: timeout) before it gives up and leaves the native client unfreed rather than free it
#: under them
_CLOSE_DRAIN = 30.0

log = logging.getLogger("exon.aeron")
_DOORBELL_RECORD_LENGTH = 128


def _ns(seconds: float | None) -> int:
    return -1 if seconds is None else max(0, int(seconds * 1e9))


class Aeron:
    """A connected client (``exon_client_t``). Thread-safe; close it last."""

    def __init__(self, handle: Any, dir: str) -> None:
        self._handle = handle
        self.dir = dir
        self._lock = threading.Lock()
        self._use = threading.Condition(threading.Lock())  # guards _handle and _users
        self._users = 0  # calls on the handle in progress (close waits for them)
        self._publications: list[Publication | ExclusivePublication] = []
        self._subscriptions: list[Subscription] = []
        self._counters: list[ClientCounter] = []
        self._counters_values = lib.exon_client_counters_values(handle)

    @classmethod
    def connect(
        cls,
        dir: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        *,
        driver_timeout: float | None = None,
        keepalive_interval: float | None = None,
    ) -> Aeron:
        """Connect to the driver of ``dir`` (default: the default driver dir).

        ``driver_timeout`` (seconds) overrides the CnC's: how stale the driver heartbeat
        may get before calls raise DriverTimeout. ``keepalive_interval`` defaults to 0.5 s.
        """
        dir = dir or default_driver_dir()
        out = ffi.new("exon_client_t **")
        driver_timeout_ms = 0 if driver_timeout is None else max(1, int(driver_timeout * 1000))
        keepalive_ns = 0 if keepalive_interval is None else _ns(keepalive_interval)
        check(
            lib.exon_client_connect(out, dir.encode(), _ns(timeout), driver_timeout_ms,
                                    keepalive_ns),
            f"connect to {dir}",
        )
        return cls(out[0], dir)

    # ---- state ---------------------------------------------------------------------

    @contextlib.contextmanager
    def _using(self) -> Iterator[Any]:
        """The live native handle, for a block that calls into it (the GIL released): a
        close() in another thread frees the handle only once every such block has left.
        Raises ClosedError once the client is closed."""
        with self._use:
            handle = self._handle
            if handle is None:
                raise errors.ClosedError("Aeron client is closed")
            self._users += 1
        try:
            yield handle
        finally:
            with self._use:
                self._users -= 1
                if not self._users:
                    self._use.notify_all()

    @property
    def client_id(self) -> int:
        """This client's id, as the driver knows it."""
        with self._using() as handle:
            return int(lib.exon_client_id(handle))

    @property
    def is_closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._handle is None

    @property
    def counters_values(self) -> Any:
        """``uint8_t *`` base of the CnC's counters values (128 bytes per counter)."""
        return self._counters_values

    def counter_addr(self, counter_id: int) -> Any:
        """``int64_t *`` of a counter's value in the mapped CnC."""
        with self._using() as handle:
            addr = lib.exon_client_counter_addr(handle, counter_id)
        if addr == ffi.NULL:
            raise errors.CncError(f"counter id {counter_id} is out of range in {self.dir}")
        return addr

    def counter_value(self, counter_id: int) -> int:
        """The current value of a counter of the driver's CnC."""
        return int(self.counter_addr(counter_id)[0])

    def counter_state(self, counter_id: int) -> int:
        """1 allocated, 0 unused, -1 reclaimed (freed)."""
        with self._using() as handle:
            rc = int(lib.exon_counters_state(lib.exon_client_counters(handle), counter_id))
        if rc < -1:
            raise error_for(rc, f"counter {counter_id}")
        return rc

    def counter_label(self, counter_id: int) -> str:
        """The label of a counter of the driver's CnC."""
        buf = ffi.new("char[]", 400)
        with self._using() as handle:
            n = check(lib.exon_counters_label(lib.exon_client_counters(handle), counter_id,
                                              buf, 400))
        text: bytes = ffi.buffer(buf, n)[:]
        return text.decode("utf-8", "replace")

    def allocated_counters(self) -> dict[int, str]:
        """{counter id: label} of every allocated counter."""
        result: dict[int, str] = {}
        with self._using() as handle:
            counters = lib.exon_client_counters(handle)
            counter_id = lib.exon_counters_next_allocated(counters, 0)
            while counter_id >= 0:
                result[int(counter_id)] = self.counter_label(counter_id)
                counter_id = lib.exon_counters_next_allocated(counters, counter_id + 1)
        return result

    def check(self) -> None:
        """Raise the client's failure (DriverTimeout, ClosedError...) if it has one."""
        with self._using() as handle:
            check(lib.exon_client_status(handle))

    @property
    def driver_heartbeat_age_ms(self) -> int:
        """Milliseconds since the driver last heart-beat in its CnC."""
        with self._using() as handle:
            return int(lib.exon_client_driver_heartbeat_age_ms(handle))

    @property
    def keepalives_sent(self) -> int:
        """Keep-alives this client has sent to the driver so far."""
        with self._using() as handle:
            return int(lib.exon_client_keepalives_sent(handle))

    # ---- publications ----------------------------------------------------------------

    def _add_publication(self, channel: str, stream_id: int, exclusive: bool,
                         timeout: float) -> Any:
        info = ffi.new("exon_client_publication_t *")
        with self._using() as handle:
            check(lib.exon_client_add_publication(handle, channel.encode(), stream_id,
                                                  int(exclusive), _ns(timeout), info))
        path = ffi.string(info.log_file).decode()
        log = LogBuffer.open(path)
        cls = ExclusivePublication if exclusive else Publication
        pub = cls(
            log,
            self.counter_addr(info.position_limit_counter_id),
            self._counters_values,
            registration_id=int(info.registration_id),
            on_close=self._on_publication_close,
            owns_log=True,
        )
        with self._using() as handle:
            lib.exon_client_attach_publication(handle, pub.cdata)  # commits wake the sender
        pub.channel = channel
        pub.original_registration_id = int(info.original_registration_id)
        with self._lock:
            self._publications.append(pub)
        return pub

    def add_publication(self, channel: str, stream_id: int,
                        timeout: float = DEFAULT_TIMEOUT) -> Publication:
        """A concurrent publication (shared by every client on the same IPC stream)."""
        pub: Publication = self._add_publication(channel, stream_id, False, timeout)
        return pub

    def add_exclusive_publication(self, channel: str, stream_id: int,
                                  timeout: float = DEFAULT_TIMEOUT) -> ExclusivePublication:
        """A single-writer publication with its own session."""
        pub: ExclusivePublication = self._add_publication(channel, stream_id, True, timeout)
        return pub

    def _on_publication_close(self, pub: Any) -> None:
        self._forget(self._publications, pub, lib.exon_client_remove_publication,
                     "remove publication")

    def _forget(self, owned: list[Any], item: Any, remove: Callable[[Any, int, int], int],
                what: str) -> None:
        """Drop a closed ``item`` from ``owned`` and, while the client is healthy, have the
        driver remove its registration (``remove(handle, registration_id, timeout_ns)``)."""
        with self._lock:
            if item in owned:
                owned.remove(item)
        try:
            with self._using() as handle:
                if lib.exon_client_status(handle) != 0:
                    return
                rc = remove(handle, item.registration_id, _ns(DEFAULT_TIMEOUT))
        except errors.ClosedError:
            return
        if rc < 0 and rc != lib.EXON_E_CLIENT_CLOSED:
            raise error_for(rc, what)

    # ---- subscriptions ---------------------------------------------------------------

    def add_subscription(self, channel: str, stream_id: int,
                         timeout: float = DEFAULT_TIMEOUT, *,
                         doorbell_counter_id: int = -1) -> Subscription:
        """``doorbell_counter_id``: share the reader doorbell of another subscription of
        this client (one futex word wakes a reader of both); -1: the driver allocates one."""
        info = ffi.new("exon_client_subscription_t *")
        with self._using() as handle:
            check(lib.exon_client_add_subscription(handle, channel.encode(), stream_id,
                                                   doorbell_counter_id, _ns(timeout), info))
        sub = Subscription(self, channel, stream_id, info)
        with self._lock:
            self._subscriptions.append(sub)
        return sub

    def _on_subscription_close(self, sub: Subscription) -> None:
        self._forget(self._subscriptions, sub, lib.exon_client_remove_subscription,
                     "remove subscription")

    # ---- counters ----------------------------------------------------------------------

    def add_counter(self, type_id: int, label: str, key: bytes = b"",
                    timeout: float = DEFAULT_TIMEOUT) -> ClientCounter:
        """A counter of this client in the driver's CnC (Aeron's ``addCounter``): the
        driver allocates it (ADD_COUNTER, docs/protocol.md 4.3) and frees it on
        :meth:`ClientCounter.close`, or with this client (close, or the driver timing it
        out). ``key``: 0..112 bytes; ``label``: up to 380 bytes of UTF-8. Raises
        ConfigurationError for a key or label too long, DriverError when the driver has
        no counter left."""
        if not isinstance(type_id, int) or isinstance(type_id, bool):
            raise errors.ArgumentTypeError(
                f"type_id must be an int, not {type(type_id).__name__}")
        if not -(1 << 31) <= type_id < (1 << 31):
            raise errors.ConfigurationError(f"type_id {type_id} does not fit in an int32")
        label_bytes = label.encode()
        key_bytes = bytes(key)
        info = ffi.new("exon_client_counter_t *")
        with self._using() as handle:
            check(lib.exon_client_add_counter(handle, type_id, key_bytes, len(key_bytes),
                                              label_bytes, len(label_bytes), _ns(timeout),
                                              info),
                  f"add counter {label!r}")
        counter = ClientCounter(self, int(info.registration_id), int(info.counter_id))
        with self._lock:
            self._counters.append(counter)
        return counter

    def _on_counter_close(self, counter: ClientCounter) -> None:
        self._forget(self._counters, counter, lib.exon_client_remove_counter, "remove counter")

    # ---- driver control --------------------------------------------------------------

    def terminate_driver(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Ask the driver to shut down (it acknowledges, its owner then closes it)."""
        with self._using() as handle:
            check(lib.exon_client_terminate_driver(handle, _ns(timeout)))

    # ---- life cycle ------------------------------------------------------------------

    def close(self) -> None:
        """Close every publication and subscription, send CLIENT_CLOSE. Idempotent."""
        if self._handle is None:
            return
        with self._lock:
            pubs = list(self._publications)
            subs = list(self._subscriptions)
            counters, self._counters = self._counters, []
        for counter in counters:  # the driver frees them with the client (CLIENT_CLOSE)
            counter._detach()
        for pub in pubs:
            try:
                pub.close()
            except errors.ExonError:
                pass
        for sub in subs:
            try:
                sub.close()
            except errors.ExonError:
                pass
        with self._use:
            handle, self._handle = self._handle, None
            drained = self._use.wait_for(lambda: not self._users, timeout=_CLOSE_DRAIN)
        if handle is None:
            return
        if not drained:  # freeing it under a call in progress would crash that call
            log.error("Aeron client in %s: calls still in progress after %.0f s; its native "
                      "client is left unfreed", self.dir, _CLOSE_DRAIN)
            return
        lib.exon_client_close(handle)

    def __enter__(self) -> Aeron:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._handle is None else f"client_id={self.client_id}"
        return f"<Aeron dir={self.dir!r} {state}>"


class ClientCounter:
    """A counter this process owns in the driver's CnC (:meth:`Aeron.add_counter`).

    :meth:`set` is a plain store into the mapped values buffer: no call into the driver,
    cheap enough for a poll loop. Readers (``exon stat``, other processes) see the value
    at once. Not thread-safe for writers: one thread (or one lock) sets a counter."""

    __slots__ = ("_addr", "_client", "_lock", "counter_id", "registration_id")

    def __init__(self, client: Aeron, registration_id: int, counter_id: int) -> None:
        self._client: Aeron | None = client
        self.registration_id = registration_id
        self.counter_id = counter_id
        self._addr: Any = client.counter_addr(counter_id)
        #: held around every access through ``_addr`` and by the detach that the client's
        #: close does before it unmaps the CnC: a store or load in another thread ends
        #: first, or finds the counter detached (as the client's ``_using`` rule, at the
        #: cost of one uncontended lock)
        self._lock = threading.Lock()

    @property
    def is_closed(self) -> bool:
        """True once closed (or its client closed): :meth:`set` then does nothing."""
        return self._addr is None

    @property
    def value(self) -> int:
        """The current value (ClosedError once closed)."""
        with self._lock:
            addr = self._addr
            if addr is not None:
                return int(addr[0])
        raise errors.ClosedError(f"counter {self.counter_id} is closed")

    def set(self, value: int) -> None:
        """Store ``value`` (an int64); nothing once closed."""
        with self._lock:
            addr = self._addr
            if addr is not None:
                addr[0] = value

    def _detach(self) -> None:
        with self._lock:
            self._addr = None
            self._client = None

    def close(self) -> None:
        """Have the driver free the counter (REMOVE_COUNTER). Idempotent."""
        client = self._client
        if client is None:
            return
        self._detach()
        client._on_counter_close(self)

    def __repr__(self) -> str:
        return f"<ClientCounter id={self.counter_id} registration_id={self.registration_id}>"


class Subscription:
    """A subscription to (channel, stream): one :class:`Image` per connected publication.

    ``poll``, ``wait`` and ``close`` are for one thread at a time (like Aeron's).
    """

    def __init__(self, client: Aeron, channel: str, stream_id: int, info: Any) -> None:
        self._client = client
        self.channel = channel
        self.stream_id = stream_id
        self.registration_id = int(info.registration_id)
        self.doorbell_counter_id = int(info.doorbell_counter_id)
        #: UDP: the "host:port" the driver bound (a port 0 endpoint resolved); "" for IPC
        self.bound_endpoint: str = ffi.string(info.bound_endpoint).decode()
        self._event_count = info.event_count
        #: held around every read of ``_event_count`` and by close() while it swaps the
        #: cell (it lives in the native client, freed once the client closes, after its
        #: subscriptions): a read in another thread ends first or reads the new cell
        self._count_lock = threading.Lock()
        self._events_seen = 0
        self._images: list[Image] = []
        self._next = 0
        self._closed = False
        #: held by wait() around its native wait on the images, and by close(): a close
        #: from another thread wakes the waiter (rings its doorbell) and waits for it
        #: instead of unmapping the images under it
        self._busy = threading.RLock()
        self._event = ffi.new("exon_image_event_t *")
        self._doorbell = ffi.cast(
            "int32_t *", client.counters_values + self.doorbell_counter_id * _DOORBELL_RECORD_LENGTH
        )
        self._refresh()

    # ---- images ----------------------------------------------------------------------

    def _events_count(self) -> int:
        """How many image events the native client queued for this subscription so far."""
        with self._count_lock:
            return int(self._event_count[0])

    def _refresh(self) -> bool:
        """Apply queued image events; True if the image set changed."""
        count = self._events_count()
        if count == self._events_seen or self._closed:
            return False
        self._events_seen = count
        changed = False
        event = self._event
        # under _busy, as close() unmaps the images under it; and with the client's handle
        # held, so a close of the client in another thread does not free it under the call
        with self._busy:
            if self._closed:
                return False
            try:
                with self._client._using() as handle:
                    while lib.exon_client_poll_image_event(handle, self.registration_id,
                                                           event) == 1:
                        changed = True
                        if event.type == lib.EXON_IMAGE_EVENT_AVAILABLE:
                            self._add_image(event)
                        else:
                            self._remove_image(int(event.correlation_id))
            except errors.ClosedError:
                return changed
        return changed

    def _add_image(self, event: Any) -> None:
        path = ffi.string(event.log_file).decode()
        try:
            log = LogBuffer.open(path)
        except errors.ExonError:
            return  # the publication went away before we could map it
        image = Image(
            log,
            self._client.counter_addr(event.subscriber_position_counter_id),
            self._client.counters_values,
            correlation_id=int(event.correlation_id),
            owns_log=True,
        )
        image.source_identity = ffi.string(event.source_identity).decode()  # type: ignore[attr-defined]
        self._images.append(image)

    def _remove_image(self, correlation_id: int) -> None:
        for image in list(self._images):
            if image.correlation_id == correlation_id:
                self._images.remove(image)
                image.close()

    @property
    def resolved_channel(self) -> str:
        """The channel with ``endpoint`` replaced by the bound endpoint (UDP port 0 resolved)."""
        if not self.bound_endpoint or "endpoint=" not in self.channel:
            return self.channel
        head, _, rest = self.channel.partition("endpoint=")
        _, bar, tail = rest.partition("|")
        return f"{head}endpoint={self.bound_endpoint}{bar}{tail}"

    @property
    def images(self) -> list[Image]:
        """The subscription's images (one per publication session it receives), now."""
        self._refresh()
        return list(self._images)

    @property
    def image_count(self) -> int:
        """How many images the subscription has now."""
        self._refresh()
        return len(self._images)

    @property
    def is_connected(self) -> bool:
        """Whether at least one image is connected."""
        return self.image_count > 0

    @property
    def is_closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._closed

    @property
    def has_image_events(self) -> bool:
        """True when image events wait to be applied (the next :attr:`images` differs, or
        the subscription closed): cheap enough to ask on every poll."""
        if self._closed:
            return True
        with self._count_lock:  # (inline: a node asks this on every poll)
            return bool(self._event_count[0] != self._events_seen)

    # ---- reading ---------------------------------------------------------------------

    def poll(self, handler: Callable[[bytes, FragmentHeader], object],
             fragment_limit: int = 10) -> int:
        """Deliver up to ``fragment_limit`` fragments' worth of whole messages from the
        images, starting at a rotating image; returns the number of messages."""
        with self._count_lock:  # (inline: the hot path)
            pending = self._event_count[0] != self._events_seen
        if pending:
            self._refresh()
        images = self._images
        n = len(images)
        if n == 0 or self._closed:
            return 0
        start = self._next % n
        self._next = start + 1
        total = 0
        for i in range(n):
            if total >= fragment_limit:
                break
            total += images[(start + i) % n].poll(handler, fragment_limit - total)
        return total

    def wait(self, timeout: float | None) -> bool:
        """Sleep (GIL released, no spinning) until an image has data or the image set
        changes, at most ``timeout`` seconds. True when there is something to poll."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._closed:
            if self._refresh() or any(image.available for image in self._images):
                return True
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            # a bounded slice so driver death / image events are noticed
            slice_s = 0.1 if remaining is None else min(remaining, 0.1)
            self._client.check()
            with self._busy:  # the doorbell lives in the client's mapping of the CnC
                if self._closed:
                    break
                seen = lib.exon_doorbell_read(self._doorbell)
                if self._events_count() != self._events_seen:
                    continue
                if self._images:
                    arr = ffi.new("exon_image_t *[]", [img.cdata for img in self._images])
                    rc = lib.exon_image_wait(arr, len(self._images), self._doorbell,
                                             _ns(slice_s))
                else:
                    rc = lib.exon_doorbell_wait(self._doorbell, seen, _ns(slice_s))
            if rc < 0 and rc != lib.EXON_E_TIMEOUT:
                check(rc, "wait")
        return False

    # ---- life cycle ------------------------------------------------------------------

    def close(self) -> None:
        """Remove the subscription from the driver and unmap its images. Idempotent."""
        if self._closed:
            return
        self._closed = True
        busy = self._busy
        while not busy.acquire(timeout=0.05):  # a wait() in another thread: wake it
            lib.exon_doorbell_ring(self._doorbell)
        try:
            for image in self._images:
                image.close()
            self._images.clear()
            # the event count lives in the native client, freed when it closes: a poll or
            # has_image_events after that reads this cell of its own instead
            cell = ffi.new("int64_t[1]", [self._events_seen])
            with self._count_lock:
                self._event_count = cell
        finally:
            busy.release()
        self._client._on_subscription_close(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"<Subscription {self.channel!r} stream={self.stream_id} "
                f"images={len(self._images)}>")
