"""The options of ``format("exon")``, parsed and checked once, at the edge.

Pure: no pyspark, no sockets. Every error names the option it is about
(:class:`ExonOptionError`), so a bad ``.option(...)`` fails at ``load()`` / query start with
a message that says what to fix. Spark hands options over as a case-insensitive mapping of
strings; the lookups here are case-insensitive too, whatever mapping they get.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from exon.errors import ConfigurationError
from exon.sockets.messages import Peer, split_address

__all__ = [
    "DEFAULT_MAX_RECORDS_PER_PARTITION",
    "DEFAULT_MAX_TRIGGER_DELAY",
    "READ_OPTIONS",
    "READ_OPTION_NAMES",
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
#: seconds ``minRecordsPerTrigger`` waits at most for its records (Kafka's default: 15m)
DEFAULT_MAX_TRIGGER_DELAY = 15 * 60.0
#: a Kafka timestamp is in ms since the epoch; an archive record's is in ns
NS_PER_MS = 1_000_000

#: every option of a read
READ_OPTION_NAMES = (
    "archive", "recording", "format", "schema", "startingPosition", "endingPosition",
    "startingTimestamp", "endingTimestamp", "startingPositionByTimestamp",
    "endingPositionByTimestamp", "failOnDataLoss", "maxRecordsPerTrigger",
    "minRecordsPerTrigger", "maxTriggerDelay", "maxRecordsPerPartition", "minPartitions",
    "consumer", "truncate", "replayTimeout", "timeout")
#: lower case: Spark's option names are case-insensitive (it hands them over lowered)
READ_OPTIONS = {name.lower(): name for name in READ_OPTION_NAMES}
#: the Kafka source's names for what exon's options do (a hint for an unknown option)
_KAFKA_NAMES = {
    "startingoffsets": "startingPosition", "endingoffsets": "endingPosition",
    "startingoffsetsbytimestamp": "startingPositionByTimestamp",
    "endingoffsetsbytimestamp": "endingPositionByTimestamp",
    "maxoffsetspertrigger": "maxRecordsPerTrigger",
    "minoffsetspertrigger": "minRecordsPerTrigger", "subscribe": "recording",
    "kafka.bootstrap.servers": "archive", "minpartitions": "minPartitions"}


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
    #: where a new query starts by time: ``{recording: ns since the epoch}`` (overrides
    #: ``starting``: the first record received at or after it)
    starting_at: dict[str, int] | None = None
    #: batch reads only: where the range ends by time (exclusive), as ``starting_at``
    ending_at: dict[str, int] | None = None
    #: a range truncated before the query read it fails the query (else: skipped, counted)
    fail_on_data_loss: bool = True
    #: admission control: at most this many records per micro-batch (all recordings together)
    max_records_per_trigger: int | None = None
    #: a micro-batch waits for at least this many records (all recordings together) ...
    min_records_per_trigger: int | None = None
    #: ... or until this many seconds passed since the last micro-batch
    max_trigger_delay: float = DEFAULT_MAX_TRIGGER_DELAY
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


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|m|min|h|d)?\s*$", re.IGNORECASE)
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0,
                   "d": 86400.0}


def _duration(options: Mapping[str, str], name: str, default: float) -> float:
    """A Spark duration (Kafka's ``maxTriggerDelay``): ``15m``, ``30s``, ``500ms``, ``1h``;
    a bare number is in ms (as Spark's ``timeStringAsMs``). In seconds."""
    value = _get(options, name)
    if value is None:
        return default
    match = _DURATION.match(value)
    if match is None:
        raise ExonOptionError(name, f"{value!r} is not a duration (500ms, 30s, 15m, 1h)")
    seconds = float(match.group(1)) * _DURATION_UNITS[(match.group(2) or "ms").lower()]
    if seconds <= 0:
        raise ExonOptionError(name, f"{value!r} is not a positive duration")
    return seconds


def _millis(value: object) -> int | None:
    """A Kafka timestamp (ms since the epoch, a non-negative integer) in ns, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        if not text.isdigit():
            return None
        value = int(text)
    if not isinstance(value, int) or value < 0 or value * NS_PER_MS >= 2**63:
        return None
    return value * NS_PER_MS


def _times(options: Mapping[str, str], name: str, by_recording: str,
           recordings: tuple[str, ...]) -> dict[str, int] | None:
    """``startingTimestamp`` (one time for every recording) or
    ``startingPositionByTimestamp`` (a JSON object of times), in ns per recording."""
    one, each = _get(options, name), _get(options, by_recording)
    if one is not None and each is not None:
        raise ExonOptionError(name, f"give {name} or {by_recording}, not both")
    if one is not None:
        ns = _millis(one)
        if ns is None:
            raise ExonOptionError(name, f"{one!r} is not a timestamp (ms since the epoch, "
                                  "a non-negative integer)")
        return {r: ns for r in recordings}
    if each is None:
        return None
    try:
        parsed = json.loads(each)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise ExonOptionError(by_recording, f"{each!r} is not a JSON object "
                              '{"recording": timestamp in ms, ...}')
    times: dict[str, int] = {}
    for key, value in parsed.items():
        if key not in recordings:
            raise ExonOptionError(by_recording, f"recording {key!r} is not among the "
                                  f"recordings read ({', '.join(recordings)})")
        ns = _millis(value)
        if ns is None:
            raise ExonOptionError(by_recording, f"timestamp {value!r} of {key!r} is not ms "
                                  "since the epoch (a non-negative integer)")
        times[key] = ns
    _require_every(by_recording, "timestamp", recordings, times)
    return times


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
    _require_every(name, "position", recordings, positions)
    return positions


def _require_every(option: str, what: str, recordings: tuple[str, ...],
                   given: Mapping[str, int]) -> None:
    """ExonOptionError naming ``option`` unless ``given`` has every recording read."""
    missing = [r for r in recordings if r not in given]
    if missing:
        raise ExonOptionError(option, f"no {what} for {', '.join(missing)}")


def parse_read_options(options: Mapping[str, str]) -> ReadOptions:
    """Check the options of ``spark.read[Stream].format("exon")``: an unknown option, or
    a value of the wrong type, is an :class:`ExonOptionError` naming it."""
    for key in options:
        lowered = str(key).lower()
        if lowered not in READ_OPTIONS:
            near = _KAFKA_NAMES.get(lowered) or next(iter(difflib.get_close_matches(
                lowered, list(READ_OPTIONS), n=1)), None)
            hint = f"; did you mean {READ_OPTIONS.get(near, near)!r}?" if near else ""
            raise ExonOptionError(str(key), "is not an option of format('exon') for reading "
                                  f"(docs/spark.md lists them){hint}")
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
    starting_at = _times(options, "startingTimestamp", "startingPositionByTimestamp",
                         recordings)
    ending_at = _times(options, "endingTimestamp", "endingPositionByTimestamp", recordings)
    for by_time, by_position in ((starting_at, "startingPosition"),
                                 (ending_at, "endingPosition")):
        if by_time is not None and _get(options, by_position) is not None:
            raise ExonOptionError(by_position, "give a position or a timestamp, not both")
    max_per_trigger = _positive_int(options, "maxRecordsPerTrigger", None)
    min_per_trigger = _positive_int(options, "minRecordsPerTrigger", None)
    if min_per_trigger is None and _get(options, "maxTriggerDelay") is not None:
        raise ExonOptionError("maxTriggerDelay", "only applies with minRecordsPerTrigger")
    if min_per_trigger is not None and max_per_trigger is not None \
            and min_per_trigger > max_per_trigger:
        raise ExonOptionError("minRecordsPerTrigger", f"{min_per_trigger} is above "
                              f"maxRecordsPerTrigger {max_per_trigger}")
    return ReadOptions(
        archive=archive,
        recordings=recordings,
        format=fmt,  # type: ignore[arg-type]
        schema=schema,
        starting=_position(options, "startingPosition", recordings, "earliest",
                           ("earliest", "latest")),
        ending=_position(options, "endingPosition", recordings, "latest", ("latest",)),
        starting_at=starting_at,
        ending_at=ending_at,
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        max_records_per_trigger=max_per_trigger,
        min_records_per_trigger=min_per_trigger,
        max_trigger_delay=_duration(options, "maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY),
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
