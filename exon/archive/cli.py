"""``exon archive ...``: serve, list, replay, verify, truncate."""

from __future__ import annotations

import json
import signal
import sys
import threading
from typing import Any

import click

from exon.archive.archive import DEFAULT_SEGMENT_LENGTH


def _ingest(values: tuple[str, ...]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        name, sep, tag = v.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{v!r}: want NAME=TAG", param_hint="--ingest")
        if name in out:
            raise click.BadParameter(f"{name!r} given twice", param_hint="--ingest")
        try:
            out[name] = int(tag)
        except ValueError:
            raise click.BadParameter(f"{v!r}: TAG must be an integer",
                                     param_hint="--ingest") from None
    return out


def _fail(exc: Exception) -> None:
    click.echo(f"error: {exc}", err=True)
    sys.exit(1)


@click.group("archive")
def archive_group() -> None:
    """Record exon streams durably and replay them by position."""


@archive_group.command("serve")
@click.option("--dir", "directory", required=True, help="archive directory")
@click.option("--endpoint", default="127.0.0.1:0", show_default=True, help="HOST:PORT")
@click.option("--ingest", multiple=True, help="NAME=TAG: a PULL on TAG recording into NAME")
@click.option("--fsync", type=click.Choice(["none", "data", "full"]), default="none",
              show_default=True, help="when a message counts as durable (its cookie returns)")
@click.option("--segment-length", type=int, default=DEFAULT_SEGMENT_LENGTH, show_default=True,
              help="bytes per segment file of new recordings (a power of two)")
@click.option("--keyed-tag", type=int, default=2, show_default=True,
              help="tag of the exactly-once (keyed) ingest PULL")
@click.option("--max-message-size", type=int, default=None,
              help="largest message an --ingest PULL takes (default 256 KiB, at most 1 MiB "
                   "and what a segment holds); larger ones get smaller windows")
@click.option("--health", default=None, metavar="HOST:PORT",
              help="answer /healthz (alive, its driver answers) and /readyz (its recordings "
                   "are recovered, its endpoint bound) on HOST:PORT; under systemd it also "
                   "sends READY=1 and watchdog keep-alives")
@click.option("--replica-of", default=None, metavar="PRIMARY_HOST:PORT",
              help="follow this primary archive service: copy its recordings live, take "
                   "no writes until promoted")
@click.option("--min-insync", type=click.IntRange(1, 16), default=1, show_default=True,
              help="members (this one counted) a message must be durable on before its "
                   "cookie returns")
@click.option("--max-lag", type=click.IntRange(0), default=64 * 1024 * 1024,
              show_default=True, help="bytes a replica may lag and stay in sync")
@click.option("--replica-timeout", type=click.FloatRange(0.1, 3600), default=5.0,
              show_default=True, help="seconds without word before a replica leaves the "
                                      "in-sync set")
def serve(directory: str, endpoint: str, ingest: tuple[str, ...], fsync: str,
          segment_length: int, keyed_tag: int, max_message_size: int | None,
          health: str | None, replica_of: str | None, min_insync: int, max_lag: int,
          replica_timeout: float) -> None:
    """Run the archive service until SIGINT/SIGTERM; prints its address first."""
    from exon import ExonError
    from exon.sockets.messages import split_address

    if replica_of is not None:
        try:
            split_address(replica_of, what="--replica-of")
        except ExonError as exc:
            _fail(exc)
            return
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    sys.exit(run_service(directory, endpoint=endpoint, ingest=_ingest(ingest), fsync=fsync,
                         segment_length=segment_length, keyed_tag=keyed_tag,
                         max_message_size=max_message_size, health=health, stop=stop,
                         replication={"replica_of": replica_of, "min_insync": min_insync,
                                      "max_lag": max_lag,
                                      "replica_timeout": replica_timeout}))


def run_service(directory: str, *, endpoint: str, ingest: dict[str, int], fsync: str,
                segment_length: int = DEFAULT_SEGMENT_LENGTH, keyed_tag: int = 2,
                max_message_size: int | None = None, health: str | None = None,
                stop: threading.Event, replication: dict[str, Any] | None = None) -> int:
    """``exon archive serve``: the service until ``stop``; the exit status. With
    ``health``, ``/readyz`` answers 503 until the recordings are recovered and the
    service runs (exon.ops.lifecycle). ``replication``: ArchiveService's ``replica_of``,
    ``min_insync``, ``max_lag`` and ``replica_timeout`` (docs/protocol.md 3.7)."""
    from exon import ConfigurationError, ExonError
    from exon.archive.service import ArchiveService
    from exon.ops.lifecycle import ServiceLifecycle
    from exon.ops.probes import DriverProbe

    try:
        life = ServiceLifecycle(health, waiting="recovering the recordings")
    except ConfigurationError as exc:
        _fail(exc)
        return 1
    with life:
        try:
            service = ArchiveService(directory, endpoint=endpoint, ingest=ingest,
                                     fsync=fsync,  # type: ignore[arg-type]
                                     segment_length=segment_length, keyed_tag=keyed_tag,
                                     max_message_size=max_message_size, **(replication or {}))
        except (ExonError, ValueError, OSError) as exc:
            _fail(exc)
            return 1
        with service:
            print(service.address, flush=True)
            probe = DriverProbe(service.node.driver_dir)
            node = service.node
            life.set_alive(lambda: "the node is closed" if node.closed else probe())
            life.ready(f"archive {service.address}")
            while not stop.wait(0.5):
                pass
    return 0


def _archive(directory: str) -> Any:
    from exon.archive import Archive, ArchiveError

    try:
        return Archive(directory)
    except ArchiveError as exc:
        _fail(exc)


@archive_group.command("promote")
@click.option("--endpoint", required=True, help="HOST:PORT of the replica to promote")
@click.option("--timeout", type=float, default=15.0, show_default=True)
def promote_command(endpoint: str, timeout: float) -> None:
    """Make a replica the primary of a new epoch (its old primary, if reachable, is
    fenced: it refuses writes and follows). Prints the new epoch."""
    from exon import ExonError
    from exon.archive.client import ArchiveClient

    try:
        with ArchiveClient(endpoint, timeout=timeout) as ac:
            click.echo(ac.promote())
    except ExonError as exc:
        _fail(exc)


def _list_members(addresses: str, as_json: bool) -> None:
    """Each member's role, epoch and lag, then the recordings of the first that answers."""
    from dataclasses import asdict

    from exon import ExonError
    from exon.archive.client import ArchiveClient

    recs = None
    for address in addresses.split(","):
        try:
            with ArchiveClient(address.strip(), timeout=3.0) as ac:
                info = ac.info()
                if recs is None:
                    recs = ac.recordings()
        except ExonError as exc:
            info = {"role": "down", "error": str(exc)}
        if as_json:
            click.echo(json.dumps({"member": address.strip(), **{
                k: info.get(k) for k in ("role", "epoch", "primary", "lag", "state",
                                         "members", "min_insync", "error")}}))
            continue
        lag = info.get("lag")
        click.echo(f"member {address.strip()}: {info.get('role')}, epoch {info.get('epoch')}"
                   + (f", following {info['primary']} ({info.get('state')}, lag {lag} B)"
                      if info.get("primary") else "")
                   + (f", min-insync {info['min_insync']}" if info.get("role") == "primary"
                      else "")
                   + (f": {info['error']}" if "error" in info else ""))
        for m in info.get("members") or []:
            click.echo(f"  replica {m['member']}: {'in sync' if m['in_sync'] else 'OUT of sync'}"
                       f", lag {m['lag']} B")
    for r in recs or []:
        click.echo(json.dumps(asdict(r)) if as_json else
                   f"{r.id:>4} {r.name:<20} {r.start_position:>14} {r.stop_position:>14}  "
                   f"{r.state}")


@archive_group.command("list")
@click.option("--dir", "directory", default=None, help="archive directory")
@click.option("--archive", "addresses", default=None,
              help="HOST:PORT[,HOST:PORT...] of running services: each member's role, "
                   "epoch and lag")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per recording")
def list_command(directory: str | None, addresses: str | None, as_json: bool) -> None:
    """The recordings of an archive directory (or of running services)."""
    from dataclasses import asdict

    from exon.archive import ArchiveError

    if (directory is None) == (addresses is None):
        raise click.UsageError("give exactly one of --dir and --archive")
    if addresses is not None:
        _list_members(addresses, as_json)
        return
    assert directory is not None
    try:
        with _archive(directory) as ar:
            recs = ar.recordings()
    except ArchiveError as exc:
        _fail(exc)
        return
    if as_json:
        for r in recs:
            click.echo(json.dumps(asdict(r)))
        return
    click.echo(f"{'id':>4} {'name':<20} {'start':>14} {'stop':>14} {'ingest':>7}  state")
    for r in recs:
        tag = "" if r.ingest_tag is None else str(r.ingest_tag)
        click.echo(f"{r.id:>4} {r.name:<20} {r.start_position:>14} {r.stop_position:>14} "
                   f"{tag:>7}  {r.state}")


@archive_group.command("replay")
@click.option("--dir", "directory", required=True, help="archive directory")
@click.argument("name")
@click.option("--from", "start", type=int, default=None, help="start position (default: the start)")
@click.option("--to", "end", type=int, default=None, help="end position (default: the stop)")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per record")
def replay_command(directory: str, name: str, start: int | None, end: int | None,
                   as_json: bool) -> None:
    """Print the records of recording NAME in [--from, --to)."""
    from exon.archive import ArchiveError

    try:
        with _archive(directory) as ar:
            first = ar.recording(name).start_position if start is None else start
            for rec in ar.replay(name, first, end):
                if as_json:
                    click.echo(json.dumps({"position": rec.position, "producer": rec.producer,
                                           "timestamp": rec.timestamp,
                                           "payload": rec.payload.decode("utf-8", "replace")}))
                else:
                    click.echo(f"{rec.position}\t{rec.timestamp}\t{rec.producer}\t"
                               f"{rec.payload!r}")
    except ArchiveError as exc:
        _fail(exc)


@archive_group.command("verify")
@click.option("--dir", "directory", required=True, help="archive directory")
@click.option("--recording", default=None, help="only this recording")
def verify_command(directory: str, recording: str | None) -> None:
    """Check every record's checksum; report the first bad record. Exit 1 if any."""
    from exon.archive import ArchiveError

    try:
        with _archive(directory) as ar:
            reports = ar.verify(recording)
    except ArchiveError as exc:
        _fail(exc)
        return
    bad = 0
    for r in reports:
        if r["ok"]:
            click.echo(f"{r['recording']}: ok, {r['records']} records, positions "
                       f"[{r['start_position']}, {r['stop_position']})")
        else:
            bad += 1
            b = r["bad"]
            click.echo(f"{r['recording']}: BAD after {r['records']} good records: "
                       f"{b['problem']}")
    sys.exit(1 if bad else 0)


@archive_group.command("truncate")
@click.option("--dir", "directory", default=None, help="archive directory (no service running)")
@click.option("--archive", "address", default=None, help="HOST:PORT of a running service")
@click.argument("name")
@click.option("--before", type=int, required=True, help="drop whole segments below this")
def truncate_command(directory: str | None, address: str | None, name: str,
                     before: int) -> None:
    """Drop the whole segments of NAME below --before; prints the new start position."""
    from exon import ExonError

    if (directory is None) == (address is None):
        raise click.UsageError("give exactly one of --dir and --archive")
    try:
        if address is not None:
            from exon.archive.client import ArchiveClient

            with ArchiveClient(address) as ac:
                click.echo(ac.truncate(name, before))
        else:
            from exon.archive import Archive

            assert directory is not None
            # an existing archive only: a mistyped --dir is an error, not a new archive
            with Archive(directory, owner=True, create=False) as ar:
                click.echo(ar.truncate(name, before))
    except ExonError as exc:
        _fail(exc)


def _timestamp_ns(text: str) -> int:
    """``--at``: ns since the Unix epoch, or an ISO-8601 time (no zone: UTC)."""
    import datetime

    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(f"{text!r}: want ns since the epoch or an ISO-8601 time "
                                 "(2026-11-28T21:30:00Z)", param_hint="--at") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    delta = when - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    ns = (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
    if ns < 0:
        raise click.BadParameter(f"{text!r} is before 1970", param_hint="--at")
    return ns


@archive_group.command("position-at")
@click.option("--dir", "directory", default=None, help="archive directory")
@click.option("--archive", "address", default=None, help="HOST:PORT of a running service")
@click.argument("name")
@click.option("--at", "when", required=True,
              help="a time: ns since the Unix epoch, or ISO-8601 (no zone: UTC)")
def position_at_command(directory: str | None, address: str | None, name: str,
                        when: str) -> None:
    """Print the position of NAME's first record received at or after --at: the start
    position when every record is, the stop position when none is (a reader starting there
    reads what is recorded next)."""
    from exon import ExonError

    if (directory is None) == (address is None):
        raise click.UsageError("give exactly one of --dir and --archive")
    timestamp = _timestamp_ns(when)
    try:
        if address is not None:
            from exon.archive.client import ArchiveClient

            with ArchiveClient(address) as ac:
                click.echo(ac.position_at(name, timestamp))
        else:
            assert directory is not None
            with _archive(directory) as ar:
                click.echo(ar.position_at(name, timestamp))
    except ExonError as exc:
        _fail(exc)
