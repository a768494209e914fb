"""A node's statistics as counters in its driver's CnC, so ``exon stat`` shows them.

:class:`NodeCounters` allocates one counter per statistic through the node's Aeron client
(ADD_COUNTER; type ids and labels in :class:`~exon.transport.aeron.counters.NodeCounter`,
key = the node id's 16 bytes) and :meth:`~NodeCounters.publish` copies the statistics into
them: plain int64 stores into the mapped values buffer, no call into the driver. The node
publishes from its poll loop at most every :data:`PUBLISH_INTERVAL` seconds (and on
demand), so the counters cost the hot path one clock read per poll.

The counters belong to the node's Aeron client: the driver frees them when the node closes
(CLIENT_CLOSE) and reclaims them when the node's process dies (client liveness timeout).
Observability never stops a node: when the driver has no counter left the node runs
without them and says so once in the log (logger ``exon.node``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Any

from exon import errors
from exon.transport.aeron import Aeron, ClientCounter
from exon.transport.aeron.counters import NodeCounter

__all__ = ["PUBLISH_INTERVAL", "NodeCounters"]

log = logging.getLogger("exon.node")

PUBLISH_INTERVAL = 0.25  #: seconds between two copies of the statistics into the counters


class NodeCounters:
    """The CnC counters of one node (see the module docstring). Not thread-safe: the node
    publishes under its lock."""

    def __init__(self, aeron: Aeron, *, node_id: str, address: str) -> None:
        self._counters: list[tuple[str, ClientCounter]] = []
        key = uuid.UUID(hex=node_id).bytes
        try:
            for kind in NodeCounter:
                counter = aeron.add_counter(int(kind), kind.label(node_id, address), key=key)
                self._counters.append((kind.name.lower(), counter))
        except errors.ExonError as exc:
            log.warning("node %s runs without its exon stat counters: %s", address, exc)
            self.release()
        self._last: dict[str, int] = {}

    def publish(self, statistics: Mapping[str, int]) -> None:
        """Store every statistic that changed into its counter (``links`` is derived:
        established minus closed)."""
        values = dict(statistics)
        values["links"] = values.get("links_established", 0) - values.get("links_closed", 0)
        last = self._last
        for name, counter in self._counters:
            value = values.get(name)
            if value is not None and last.get(name) != value:
                counter.set(value)
                last[name] = value

    def close(self) -> None:
        """Stop publishing. The driver frees the counters with the node's Aeron client; a
        node that keeps its client would call :meth:`release` instead."""
        counters, self._counters = self._counters, []
        for _name, counter in counters:
            counter._detach()

    def release(self) -> None:
        """Have the driver free every counter now (REMOVE_COUNTER each)."""
        counters, self._counters = self._counters, []
        for _name, counter in counters:
            try:
                counter.close()
            except errors.ExonError:
                pass

    def __len__(self) -> int:
        return len(self._counters)

    def __repr__(self) -> str:
        return f"<NodeCounters {len(self._counters)} counters>"


def statistics_of(core_statistics: Any, **node: int) -> dict[str, int]:
    """A node's statistics as {name: value}: the core's (a ``CoreStatistics``) and the
    node's own (``frames_dropped=..., connects_failed=...``)."""
    values = {name: getattr(core_statistics, name) for name in core_statistics.__slots__}
    values.update(node)
    return values
