"""The options of ``format("exon")``, parsed and checked once, at the edge.

Pure: no pyspark, no sockets. Every error names the option it is about
(:class:`ExonOptionError`), so a bad ``.option(...)`` fails at ``load()`` / query start with
a message that says what to fix. Spark hands options over as a case-insensitive mapping of
strings; the lookups here are case-insensitive too, whatever mapping they get.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from exon.errors import ConfigurationError
from exon.sockets.messages import Peer, split_address

__all__ = [
    "DEFAULT_MAX_RECORDS_PER_PARTITION",
    "ExonOptionError",
    "PositionSpec",
    "ReadOptions",
    "WriteOptions",
    "parse_read_options",
    "parse_write_options",
]

PayloadFormat = Literal["raw", "json", "msgpack"]

#: records per input partition when ``maxRecordsPerPartition`` is not given
DEFAULT_MAX_RECORDS_PER_PARTITION = 100_000
DEFAULT_TIMEOUT = 10.0
DEFAULT_REPLAY_TIMEOUT = 60.0
DEFAULT_WRITE_TIMEOUT = 60.0
DEFAULT_CONSUMER = "spark"


class ExonOptionError(ConfigurationError):
    """An option of ``format("exon")`` is missing or invalid: ``.option`` names it."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"exon: option {option!r}: {message}")
        self.option = option


#: ``"earliest"``, ``"latest"``, or explicit positions per recording
PositionSpec = str | dict[str, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadOptions:
    """What a reader (streaming or batch) was asked to read."""

    #: ``HOST:PORT`` of the archive service
    archive: str
    #: the recordings read, in the order given (unique)
    recordings: tuple[str, ...]
    #: how the payload becomes columns: ``raw`` keeps it as ``payload binary``
    format: PayloadFormat = "raw"
    #: the DDL column list of the decoded payload (``json`` / ``msgpack`` only)
    schema: str | None = None
    #: where a new query starts (batch: where the range starts)
    starting: PositionSpec = "earliest"
    #: batch reads only: where the range ends (exclusive)
    ending: PositionSpec = "latest"
    #: admission control: at most this many records per micro-batch (all recordings together)
    max_records_per_trigger: int | None = None
    #: at most this many records per input partition (Spark task)
    max_records_per_partition: int = DEFAULT_MAX_RECORDS_PER_PARTITION
    #: a batch is cut into at least about this many partitions when it has the records
    min_partitions: int = 1
    #: the name under which ``commit`` reports this query's progress to the archive
    consumer: str = DEFAULT_CONSUMER
    #: ``commit`` also lets the archive drop segments every consumer is done with
    truncate: bool = False
    #: seconds ``read()`` keeps retrying a replay the archive cannot serve (restart, network)
    replay_timeout: float = DEFAULT_REPLAY_TIMEOUT
    #: seconds for each control request (stop position, boundaries, commit)
    timeout: float = DEFAULT_TIMEOUT

    @property
    def multiple(self) -> bool:
        """Several recordings: rows carry a ``recording`` column."""
        return len(self.recordings) > 1


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteOptions:
    """Where a streaming write goes: a PULL socket (``peer``) or a recording (``archive``)."""

    #: ``"HOST:PORT/TAG"`` of a PULL socket (at-least-once mode)
    peer: str | None = None
    #: ``HOST:PORT`` of the archive service (exactly-once mode, with ``recording``)
    archive: str | None = None
    recording: str | None = None
    #: overrides the streaming query id that keys rows in the archive (default: Spark's)
    query: str | None = None
    #: seconds a partition waits for its rows to be confirmed (cookies / durable)
    timeout: float = DEFAULT_WRITE_TIMEOUT

    @property
    def mode(self) -> Literal["peer", "archive"]:
        return "peer" if self.peer is not None else "archive"


def _get(options: Mapping[str, str], name: str) -> str | None:
    lowered = name.lower()
    for key, value in options.items():
        if key.lower() == lowered:
            return None if value is None else str(value)
    return None


def _archive_address(options: Mapping[str, str], *, required: bool) -> str | None:
    value = _get(options, "archive")
    if value is None or not value.strip():
        if required:
            raise ExonOptionError("archive", "is required: HOST:PORT of an exon archive service "
                                  "(`exon archive serve` prints it)")
        return None
    value = ",".join(v.strip() for v in value.split(","))
    try:
        for member in value.split(","):  # the members of a replicated archive
            split_address(member, what="archive")
    except ConfigurationError as exc:
        raise ExonOptionError("archive", f"{exc} (want HOST:PORT[,HOST:PORT...])") from None
    return value


def _positive_int(options: Mapping[str, str], name: str, default: int | None) -> int | None:
    value = _get(options, name)
    if value is None:
        return default
    try:
        number = int(value.strip(), 10)
    except ValueError:
        raise ExonOptionError(name, f"{value!r} is not an integer") from None
    if number <= 0:
        raise ExonOptionError(name, f"{number} is not a positive integer")
    return number


def _seconds(options: Mapping[str, str], name: str, default: float) -> float:
    value = _get(options, name)
    if value is None:
        return default
    try:
        seconds = float(value.strip())
    except ValueError:
        raise ExonOptionError(name, f"{value!r} is not a number of seconds") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise ExonOptionError(name, f"{value!r} is not a positive number of seconds")
    return seconds


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = _get(options, name)
    if value is None:
        return default
    text = value.strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ExonOptionError(name, f"{value!r} is not true or false")


def _position(options: Mapping[str, str], name: str, recordings: tuple[str, ...],
              default: str, allowed: tuple[str, ...]) -> PositionSpec:
    value = _get(options, name)
    if value is None:
        return default
    text = value.strip()
    if text.lower() in allowed:
        return text.lower()
    want = (f"{' or '.join(repr(a) for a in allowed)}, a position (one recording) or a JSON "
            'object {"recording": position, ...}')
    try:
        parsed = json.loads(text)
    except ValueError:
        raise ExonOptionError(name, f"{value!r} is not {want}") from None
    if isinstance(parsed, int) and not isinstance(parsed, bool):
        if len(recordings) != 1:
            raise ExonOptionError(name, f"a bare position needs exactly one recording; "
                                  f"give a JSON object for {list(recordings)}")
        parsed = {recordings[0]: parsed}
    if not isinstance(parsed, dict):
        raise ExonOptionError(name, f"{value!r} is not {want}")
    positions: dict[str, int] = {}
    for key, position in parsed.items():
        if key not in recordings:
            raise ExonOptionError(name, f"recording {key!r} is not among the recordings read "
                                  f"({', '.join(recordings)})")
        if isinstance(position, bool) or not isinstance(position, int) or position < 0:
            raise ExonOptionError(name, f"position {position!r} of {key!r} is not a "
                                  "non-negative integer")
        positions[key] = position
    missing = [r for r in recordings if r not in positions]
    if missing:
        raise ExonOptionError(name, f"no position for {', '.join(missing)}")
    return positions


def parse_read_options(options: Mapping[str, str]) -> ReadOptions:
    """Check the options of ``spark.read[Stream].format("exon")``."""
    archive = _archive_address(options, required=True)
    assert archive is not None
    text = _get(options, "recording")
    if text is None or not text.strip():
        raise ExonOptionError("recording", "is required: the name of a recording "
                              "(several: 'orders,clicks')")
    recordings = tuple(name.strip() for name in text.split(","))
    if any(not name for name in recordings):
        raise ExonOptionError("recording", f"{text!r} has an empty name")
    if len(set(recordings)) != len(recordings):
        raise ExonOptionError("recording", f"{text!r} names a recording twice")

    fmt = (_get(options, "format") or "raw").strip().lower()
    if fmt not in ("raw", "json", "msgpack"):
        raise ExonOptionError("format", f"{fmt!r} is not raw, json or msgpack")
    schema = _get(options, "schema")
    if schema is not None and not schema.strip():
        schema = None
    if fmt != "raw" and schema is None:
        raise ExonOptionError("schema", f"is required with format {fmt!r}: the DDL of the "
                              "payload's fields, e.g. 'key STRING, value DOUBLE'")
    if fmt == "raw" and schema is not None:
        raise ExonOptionError("schema", "only applies with option format 'json' or 'msgpack'")

    consumer = (_get(options, "consumer") or DEFAULT_CONSUMER).strip()
    if not consumer:
        raise ExonOptionError("consumer", "is empty")
    truncate = _bool(options, "truncate", False)
    if truncate and _get(options, "consumer") is None:
        raise ExonOptionError("consumer", "is required with truncate=true: the archive keeps "
                              "what any consumer has not committed, so name this query")

    max_per_partition = _positive_int(options, "maxRecordsPerPartition",
                                      DEFAULT_MAX_RECORDS_PER_PARTITION)
    assert max_per_partition is not None
    return ReadOptions(
        archive=archive,
        recordings=recordings,
        format=fmt,  # type: ignore[arg-type]
        schema=schema,
        starting=_position(options, "startingPosition", recordings, "earliest",
                           ("earliest", "latest")),
        ending=_position(options, "endingPosition", recordings, "latest", ("latest",)),
        max_records_per_trigger=_positive_int(options, "maxRecordsPerTrigger", None),
        max_records_per_partition=max_per_partition,
        min_partitions=_positive_int(options, "minPartitions", 1) or 1,
        consumer=consumer,
        truncate=truncate,
        replay_timeout=_seconds(options, "replayTimeout", DEFAULT_REPLAY_TIMEOUT),
        timeout=_seconds(options, "timeout", DEFAULT_TIMEOUT),
    )


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """Check the options of ``df.writeStream.format("exon")``."""
    peer = _get(options, "peer")
    archive = _archive_address(options, required=False)
    recording = _get(options, "recording")
    timeout = _seconds(options, "timeout", DEFAULT_WRITE_TIMEOUT)
    query = _get(options, "queryId")
    if peer is not None and peer.strip():
        if archive is not None or recording is not None:
            raise ExonOptionError("peer", "give either peer (PUSH to a PULL socket) or "
                                  "archive and recording (exactly-once into a recording), "
                                  "not both")
        try:
            Peer.parse(peer.strip())
        except ConfigurationError as exc:
            raise ExonOptionError("peer", str(exc)) from None
        return WriteOptions(peer=peer.strip(), timeout=timeout)
    if archive is None:
        raise ExonOptionError("peer", "the sink needs option peer (HOST:PORT/TAG of a PULL "
                              "socket) or options archive (HOST:PORT) and recording")
    if recording is None or not recording.strip():
        raise ExonOptionError("recording", "is required with option archive: the recording "
                              "the rows go to")
    if "," in recording:
        raise ExonOptionError("recording", f"{recording!r}: the sink writes one recording")
    return WriteOptions(archive=archive, recording=recording.strip(),
                        query=query.strip() if query and query.strip() else None,
                        timeout=timeout)
