"""Counters in the CnC file, read from Python.

The twin of ``exon/native/src/concurrent/exon_counters.h``.

A counter is a 512-byte metadata record (state, type id, free-for-reuse deadline, 112-byte
key, label) and a 128-byte value record (int64 value, registration id, owner id) in
``cnc.dat``. The driver conductor allocates and frees them (C); anyone may read them.
:class:`CountersReader` gives immutable snapshots for ``exon stat`` and tests.

System counters always occupy ids ``0 .. len(SystemCounter) - 1`` in the order of
:class:`SystemCounter` (Aeron's order for the first 25, then exon's own).
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from exon import errors
from exon.native import check, ffi, lib

METADATA_LENGTH: Final = 512
VALUE_LENGTH: Final = 128
MAX_KEY_LENGTH: Final = 112
MAX_LABEL_LENGTH: Final = 380

STATE_UNUSED: Final = 0
STATE_ALLOCATED: Final = 1
STATE_RECLAIMED: Final = -1


class CounterType(enum.IntEnum):
    """Counter type ids (Aeron's numbers; DOORBELL is exon's)."""

    SYSTEM = 0
    PUBLISHER_LIMIT = 1  # pub-lmt
    SENDER_POSITION = 2  # snd-pos
    RECEIVER_HWM = 3  # rcv-hwm
    SUBSCRIBER_POSITION = 4  # sub-pos
    RECEIVER_POSITION = 5  # rcv-pos
    SEND_CHANNEL_STATUS = 6
    RECEIVE_CHANNEL_STATUS = 7
    SENDER_LIMIT = 9  # snd-lmt
    CLIENT_HEARTBEAT = 11
    PUBLISHER_POSITION = 12  # pub-pos
    SENDER_BPE = 13  # snd-bpe
    DOORBELL = 100
    RECEIVER_RTT = 101  # rcv-rtt: the last round trip an image measured with RTTM (ns)
    RECEIVER_HEARD = 102  # rcv-heard: when an image last heard its source (epoch ms)

    @property
    def short_name(self) -> str:
        """The short name ``exon stat`` shows (``pub-pos``, ``rcv-hwm``...)."""
        return _SHORT_NAMES[self]


_SHORT_NAMES: Final = {
    CounterType.SYSTEM: "system",
    CounterType.PUBLISHER_LIMIT: "pub-lmt",
    CounterType.SENDER_POSITION: "snd-pos",
    CounterType.RECEIVER_HWM: "rcv-hwm",
    CounterType.SUBSCRIBER_POSITION: "sub-pos",
    CounterType.RECEIVER_POSITION: "rcv-pos",
    CounterType.SEND_CHANNEL_STATUS: "snd-channel",
    CounterType.RECEIVE_CHANNEL_STATUS: "rcv-channel",
    CounterType.SENDER_LIMIT: "snd-lmt",
    CounterType.CLIENT_HEARTBEAT: "client-heartbeat",
    CounterType.PUBLISHER_POSITION: "pub-pos",
    CounterType.SENDER_BPE: "snd-bpe",
    CounterType.DOORBELL: "doorbell",
    CounterType.RECEIVER_RTT: "rcv-rtt",
    CounterType.RECEIVER_HEARD: "rcv-heard",
}

PUB_POS: Final = CounterType.PUBLISHER_POSITION
PUB_LMT: Final = CounterType.PUBLISHER_LIMIT
SUB_POS: Final = CounterType.SUBSCRIBER_POSITION
SND_POS: Final = CounterType.SENDER_POSITION
SND_LMT: Final = CounterType.SENDER_LIMIT
RCV_HWM: Final = CounterType.RECEIVER_HWM
RCV_POS: Final = CounterType.RECEIVER_POSITION


class SystemCounter(enum.IntEnum):
    """The driver's system counters; the value is the counter id (fixed)."""

    BYTES_SENT = 0
    BYTES_RECEIVED = 1
    RECEIVER_PROXY_FAILS = 2
    SENDER_PROXY_FAILS = 3
    CONDUCTOR_PROXY_FAILS = 4
    NAK_MESSAGES_SENT = 5
    NAK_MESSAGES_RECEIVED = 6
    STATUS_MESSAGES_SENT = 7
    STATUS_MESSAGES_RECEIVED = 8
    HEARTBEATS_SENT = 9
    HEARTBEATS_RECEIVED = 10
    RETRANSMITS_SENT = 11
    FLOW_CONTROL_UNDER_RUNS = 12
    FLOW_CONTROL_OVER_RUNS = 13
    INVALID_PACKETS = 14
    ERRORS = 15
    SHORT_SENDS = 16
    FREE_FAILS = 17
    SENDER_FLOW_CONTROL_LIMITS = 18
    UNBLOCKED_PUBLICATIONS = 19
    UNBLOCKED_COMMANDS = 20
    POSSIBLE_TTL_ASYMMETRY = 21
    CONTROLLABLE_IDLE_STRATEGY = 22
    LOSS_GAP_FILLS = 23
    CLIENT_TIMEOUTS = 24
    BACK_PRESSURE_EVENTS = 25
    DOORBELL_WAKES = 26
    SETUPS_DROPPED = 27
    IMAGES_EVICTED = 28
    NAKS_SUPPRESSED = 29
    UDP_GSO_FALLBACKS = 30

    @property
    def label(self) -> str:
        """The counter's label, from the C table."""
        text: bytes = ffi.string(lib.exon_system_counter_label(int(self)))
        return text.decode()


#: exon's node counters use type ids in this range (docs/protocol.md 4.4); Aeron's own
#: types stay below 1000 and exon's driver types (DOORBELL, RECEIVER_RTT) at 100..199
NODE_COUNTER_TYPE_FIRST: Final = 2000
NODE_COUNTER_TYPE_LAST: Final = 2099


class NodeCounter(enum.IntEnum):
    """exon's node counters: one counter per statistic of a :class:`~exon.Node`, allocated
    by the node through its driver (ADD_COUNTER) and labelled ``exon <what>: node <node id>
    <address>``; the key is the node id's 16 bytes. The member names are the statistics'
    names (``Node.statistics()`` fields, plus the node's own ``frames_dropped``,
    ``connects_failed`` and ``fragments_dropped``); ``LINKS`` is the links established
    now. Type ids are fixed: new statistics are appended, never renumbered."""

    LINKS = 2000
    FRAMES_RECEIVED = 2001
    FRAMES_SENT = 2002
    MALFORMED_DROPPED = 2003
    STALE_DROPPED = 2004
    IGNORED = 2005
    NOT_FOUND_SENT = 2006
    NOT_LINKED_SENT = 2007
    CREDIT_VIOLATIONS = 2008
    OVERSIZE_DROPPED = 2009
    REFUSALS_SENT = 2010
    REFUSALS_RECEIVED = 2011
    RETRIES = 2012
    LINKS_ESTABLISHED = 2013
    LINKS_CLOSED = 2014
    COOKIES_RETURNED = 2015
    COOKIES_LOST = 2016
    RELINKS_REFUSED = 2017
    FRAMES_DROPPED = 2018
    CONNECTS_FAILED = 2019
    LINKS_RESENT = 2020
    FRAGMENTS_DROPPED = 2021
    UNOPENED_DROPPED = 2022
    TOKENS_REJECTED = 2023
    UNVALIDATED_DROPPED = 2024
    AMPLIFICATION_HELD = 2025
    AMPLIFICATION_HELD_BYTES = 2026

    @property
    def what(self) -> str:
        """What the counter counts, as its label says it (``drops malformed``)."""
        return _NODE_WHAT[self]

    @property
    def short_name(self) -> str:
        """The short name ``exon stat`` shows (``exon-drops-malformed``)."""
        return "exon-" + _NODE_WHAT[self].replace(" ", "-")

    def label(self, node_id: str, address: str) -> str:
        """The counter's label for a node."""
        return f"exon {self.what}: node {node_id} {address}"


_NODE_WHAT: Final = {
    NodeCounter.LINKS: "links",
    NodeCounter.FRAMES_RECEIVED: "frames received",
    NodeCounter.FRAMES_SENT: "frames sent",
    NodeCounter.MALFORMED_DROPPED: "drops malformed",
    NodeCounter.STALE_DROPPED: "drops stale",
    NodeCounter.IGNORED: "frames ignored",
    NodeCounter.NOT_FOUND_SENT: "socket-not-found sent",
    NodeCounter.NOT_LINKED_SENT: "socket-not-linked sent",
    NodeCounter.CREDIT_VIOLATIONS: "drops credit violation",
    NodeCounter.OVERSIZE_DROPPED: "drops oversize",
    NodeCounter.REFUSALS_SENT: "refusals sent",
    NodeCounter.REFUSALS_RECEIVED: "refusals received",
    NodeCounter.RETRIES: "link retries",
    NodeCounter.LINKS_ESTABLISHED: "links established",
    NodeCounter.LINKS_CLOSED: "links closed",
    NodeCounter.COOKIES_RETURNED: "cookies returned",
    NodeCounter.COOKIES_LOST: "cookies lost",
    NodeCounter.RELINKS_REFUSED: "drops relink refused",
    NodeCounter.FRAMES_DROPPED: "drops unreachable peer",
    NodeCounter.CONNECTS_FAILED: "connects failed",
    NodeCounter.LINKS_RESENT: "links resent",
    NodeCounter.FRAGMENTS_DROPPED: "drops fragment",
    NodeCounter.UNOPENED_DROPPED: "drops unopened",
    NodeCounter.TOKENS_REJECTED: "drops token rejected",
    NodeCounter.UNVALIDATED_DROPPED: "drops unvalidated",
    NodeCounter.AMPLIFICATION_HELD: "held amplification",
    NodeCounter.AMPLIFICATION_HELD_BYTES: "held amplification bytes",
}


#: a metric a node publishes for what it hosts (a socket, an archive recording, ...), one
#: counter per labelled series: a gauge (its value now) or a counter (a total that only
#: grows); label :func:`metric_label`, key the node id's 16 bytes (docs/protocol.md 4.4).
#: Outside the node counters' range: a reader of those finds only NodeCounter types there
METRIC_GAUGE_TYPE: Final = 2100
METRIC_COUNTER_TYPE: Final = 2101
METRIC_TYPES: Final = (METRIC_GAUGE_TYPE, METRIC_COUNTER_TYPE)

_METRIC_PREFIX: Final = "exon metric "


def metric_label(name: str, node_id: str, address: str, labels: dict[str, str]) -> str:
    """``exon metric NAME: node NODE_ID ADDRESS k=v k=v`` (labels sorted by name). Names
    and label names are Prometheus names; a label value holds no space and no ``=``
    (ConfigurationError)."""
    parts = [f"{_METRIC_PREFIX}{name}: node {node_id} {address}"]
    for key in sorted(labels):
        value = str(labels[key])
        if not value or " " in value or "=" in value or " " in key or "=" in key:
            raise errors.ConfigurationError(
                f"metric {name}: label {key}={value!r} (a label value is not empty and "
                f"holds no space and no '=')")
        parts.append(f"{key}={value}")
    return " ".join(parts)


def parse_metric_label(label: str) -> tuple[str, str, str, dict[str, str]] | None:
    """A :func:`metric_label` back: (name, node id, address, labels); None if it is not
    one."""
    if not label.startswith(_METRIC_PREFIX):
        return None
    name, sep, rest = label[len(_METRIC_PREFIX):].partition(": node ")
    words = rest.split(" ")
    if not sep or not name or len(words) < 2:
        return None
    labels: dict[str, str] = {}
    for word in words[2:]:
        key, eq, value = word.partition("=")
        if not eq or not key:
            return None
        labels[key] = value
    return name, words[0], words[1], labels


@functools.lru_cache(maxsize=1024)  # exon stat --serve names every counter at each scrape
def type_name(type_id: int) -> str:
    """Short name of a counter type id (``pub-pos``, ``exon-links``...), or ``type-<n>``
    if unknown."""
    try:
        return CounterType(type_id).short_name
    except ValueError:
        pass
    if type_id == METRIC_GAUGE_TYPE:
        return "exon-gauge"
    if type_id == METRIC_COUNTER_TYPE:
        return "exon-counter"
    try:
        return NodeCounter(type_id).short_name
    except ValueError:
        return f"type-{type_id}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Counter:
    """A snapshot of one allocated counter."""

    id: int
    """The counter id (index in the metadata and values buffers)."""
    type_id: int
    """Type id: a :class:`CounterType` value, or a user type."""
    label: str
    """Human-readable label (up to 380 bytes of UTF-8)."""
    value: int
    """The int64 value when the snapshot was taken."""
    registration_id: int
    """Registration id of the object the counter belongs to (0 for system counters)."""
    owner_id: int
    """Client id of the owner (-1: the driver)."""

    @property
    def type_name(self) -> str:
        """The short name of the counter's type (see :func:`type_name`)."""
        return type_name(self.type_id)


class CountersReader:
    """Reads counters from a counters region (usually a :class:`~.cnc.CncFile`'s).

    ``metadata`` and ``values`` are ``uint8_t *`` cdata; ``keepalive`` is any object that
    keeps their memory mapped while the reader lives. Safe to use from any thread.
    """

    def __init__(
        self,
        metadata: Any,
        metadata_length: int,
        values: Any,
        values_length: int,
        *,
        keepalive: object = None,
    ) -> None:
        self._keepalive = keepalive
        self._counters = ffi.new("exon_counters_t *")
        check(
            lib.exon_counters_init(
                self._counters, metadata, metadata_length, values, values_length, 0
            ),
            "counters",
        )
        self._label_buf = ffi.new("char[]", MAX_LABEL_LENGTH)
        # (id, type id, registration id) -> label: a label never changes once its counter
        # is allocated, and a scrape reads every counter (exon stat --serve, 10/s)
        self._labels: dict[tuple[int, int, int], str] = {}

    @property
    def handle(self) -> Any:
        """The ``exon_counters_t *`` (for C calls)."""
        return self._counters

    @property
    def max_counters(self) -> int:
        """How many counters the region has room for."""
        return int(self._counters.max_counters)

    def ids(self) -> Iterator[int]:
        """Ids of the allocated counters, ascending."""
        counter_id = lib.exon_counters_next_allocated(self._counters, 0)
        while counter_id >= 0:
            yield int(counter_id)
            counter_id = lib.exon_counters_next_allocated(self._counters, counter_id + 1)

    def value(self, counter_id: int) -> int:
        """The current value of a counter; IndexError outside the region."""
        self._check_id(counter_id)
        return int(lib.exon_counter_get(self._counters, counter_id))

    def state(self, counter_id: int) -> int:
        """STATE_UNUSED, STATE_ALLOCATED or STATE_RECLAIMED."""
        self._check_id(counter_id)
        return int(lib.exon_counters_state(self._counters, counter_id))

    def label(self, counter_id: int) -> str:
        """The label of a counter."""
        n = check(
            lib.exon_counters_label(self._counters, counter_id, self._label_buf, MAX_LABEL_LENGTH),
            "counter label",
        )
        return bytes(ffi.buffer(self._label_buf, n)).decode("utf-8", "replace")

    def key(self, counter_id: int) -> bytes:
        """The key bytes of a counter (what identifies it, by type)."""
        buf = ffi.new("uint8_t[]", MAX_KEY_LENGTH)
        n = check(lib.exon_counters_key(self._counters, counter_id, buf, MAX_KEY_LENGTH), "key")
        return bytes(ffi.buffer(buf, n))

    def counter(self, counter_id: int) -> Counter:
        """Snapshot of one counter (allocated or not)."""
        self._check_id(counter_id)
        c = self._counters
        type_id = int(lib.exon_counters_type_id(c, counter_id))
        value = int(lib.exon_counter_get(c, counter_id))
        if type_id == CounterType.DOORBELL:
            value &= 0xFFFFFFFF  # the wake-ups (the high half is the reader's armed flag)
        registration_id = int(lib.exon_counters_registration_id(c, counter_id))
        identity = (counter_id, type_id, registration_id)
        label = self._labels.get(identity)
        if label is None:
            label = self._labels[identity] = self.label(counter_id)
        return Counter(
            id=counter_id,
            type_id=type_id,
            label=label,
            value=value,
            registration_id=registration_id,
            owner_id=int(lib.exon_counters_owner_id(c, counter_id)),
        )

    def snapshot(self) -> list[Counter]:
        """Every allocated counter, ascending by id."""
        found = [self.counter(counter_id) for counter_id in self.ids()]
        if len(self._labels) > 2 * len(found) + 64:  # forget the labels of freed counters
            live = {(k.id, k.type_id, k.registration_id) for k in found}
            self._labels = {k: v for k, v in self._labels.items() if k in live}
        return found

    def find(
        self, *, type_id: int | None = None, registration_id: int | None = None
    ) -> list[Counter]:
        """Allocated counters matching every given field."""
        return [
            c
            for c in self.snapshot()
            if (type_id is None or c.type_id == type_id)
            and (registration_id is None or c.registration_id == registration_id)
        ]

    def _check_id(self, counter_id: int) -> None:
        if not 0 <= counter_id < self.max_counters:
            raise IndexError(f"counter id {counter_id} out of range 0..{self.max_counters - 1}")
