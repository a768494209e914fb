"""The ``exon`` command line: ``exon driver``, ``exon stat``, ``exon bench ...``.

Every command imports what it needs lazily, so ``exon --help`` stays fast and a missing
optional peer (pyzmq, java) only matters to the command that uses it.
"""

from __future__ import annotations

import sys
from typing import Any

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="exon")
def main() -> None:
    """exon: messaging sockets over an Aeron-compatible transport."""


_HEALTH = click.option(
    "--health", default=None, metavar="HOST:PORT",
    help="answer /healthz (alive, its driver answers) and /readyz (ready for work) on "
         "HOST:PORT; under systemd it also sends READY=1 and watchdog keep-alives")


def _lifecycle(health: str | None, waiting: str) -> Any:
    """The --health endpoint and systemd notifications of a service command
    (exon.ops.lifecycle); a bad address or a port in use is a usage error, at once."""
    from exon.errors import ConfigurationError
    from exon.ops.lifecycle import ServiceLifecycle

    try:
        return ServiceLifecycle(health, waiting=waiting)
    except ConfigurationError as exc:
        raise click.BadParameter(str(exc), param_hint="--health") from None


@main.command()
@click.option("--dir", "driver_dir", default=None,
              help="driver directory (CnC and log files); default: the host driver's, "
                   "$EXON_DIR or /dev/shm/exon-USER, where exon.Node() looks for one")
@click.option(
    "--threading-mode",
    type=click.Choice(["DEDICATED", "SHARED_NETWORK", "SHARED"], case_sensitive=False),
    default=None,
    help="how the conductor, sender and receiver agents share threads",
)
@click.option("--delete-dir/--keep-dir", default=True, help="remove the directory on shutdown")
@_HEALTH
def driver(driver_dir: str | None, threading_mode: str | None, delete_dir: bool,
           health: str | None) -> None:
    """Run an external media driver until SIGINT/SIGTERM."""
    from exon.errors import ExonError
    from exon.ops.probes import DriverProbe
    from exon.transport.aeron.driver_main import run_driver

    overrides: dict[str, object] = {"dir_delete_on_shutdown": delete_dir}
    if threading_mode:
        overrides["threading_mode"] = threading_mode.upper()
    try:
        with _lifecycle(health, "the driver is starting") as life:

            def ready(directory: str) -> None:
                life.set_alive(DriverProbe(directory))
                life.ready(f"driver {directory}")

            status = run_driver(driver_dir, overrides, on_ready=ready)
    except ExonError as exc:  # e.g. another driver is active there: one line, exit 1
        raise click.ClickException(f"{type(exc).__name__}: {exc}") from None
    sys.exit(status)


@main.command()
@click.option("--dir", "driver_dirs", multiple=True,
              help="driver directory (default: EXON_DIR); with --serve, repeat it for "
                   "several")
@click.option("--watch", "watch", type=click.FloatRange(min=0.01), default=None,
              metavar="SECONDS", help="refresh every SECONDS  [default: 1]")
@click.option("--count", type=click.IntRange(min=1), default=None,
              help="stop after this many samples (default: until Ctrl-C)")
@click.option("--once", is_flag=True, help="print one sample and exit (--count 1)")
@click.option("--json", "as_json", is_flag=True,
              help="one JSON object per sample instead of the table")
@click.option("--interval", type=click.FloatRange(min=0.01), default=None, hidden=True,
              help="older name of --watch")
@click.option("--serve", "serve", default=None, metavar="HOST:PORT",
              help="instead: serve every counter in Prometheus's text format at "
                   "http://HOST:PORT/metrics until SIGINT/SIGTERM: of the --dir driver(s) "
                   "(repeat --dir for several), or without --dir of every driver of the "
                   "host (its nodes, sockets and archives)")
def stat(driver_dirs: tuple[str, ...], watch: float | None, count: int | None, once: bool,
         as_json: bool, interval: float | None, serve: str | None) -> None:
    """Show the driver's counters, live, like AeronStat: totals and rates per second,
    grouped (traffic, loss, flow control, drops, health, links). Exit status 1 when no
    driver is there or it goes away. With --serve, serve them to Prometheus instead."""
    from exon.transport.aeron.settings import DriverSettings
    from exon.transport.aeron.stat import run_stat

    if serve is not None:
        _serve_metrics(serve, list(driver_dirs))
        return
    if len(driver_dirs) > 1:
        raise click.UsageError("one --dir, but with --serve")
    driver_dir = driver_dirs[0] if driver_dirs else None

    directory = driver_dir or DriverSettings.from_env().dir
    period = watch if watch is not None else (interval if interval is not None else 1.0)
    sys.exit(run_stat(directory, once=once, as_json=as_json, interval=period, count=count))


def _serve_metrics(address: str, directories: list[str]) -> None:
    """``exon stat --serve``: /metrics until SIGINT/SIGTERM (exon.ops.metrics)."""
    import signal
    import threading

    from exon.errors import ConfigurationError

    try:
        from exon.ops.metrics import serve_metrics
    except ImportError as exc:  # prometheus_client missing from a partial install
        raise click.ClickException(f"exon stat --serve needs prometheus_client: {exc}") from None
    try:
        server = serve_metrics(address, directories or None)
    except ConfigurationError as exc:
        raise click.BadParameter(str(exc), param_hint="--serve") from None
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with server:
        what = ", ".join(directories) if directories else "every driver of the host"
        click.echo(f"serving {server.url} ({what})")
        sys.stdout.flush()
        while not stop.wait(0.5):
            pass


@main.group()
def bench() -> None:
    """Benchmarks: one JSON line per case, exon beside its peer in the same run."""


@bench.command("transport")
@click.option("--channel", default="aeron:ipc", show_default=True)
@click.option("--size", "sizes", multiple=True, type=int, help="message sizes (default 32, 1024)")
@click.option(
    "--vs",
    "peers",
    multiple=True,
    type=click.Choice(["aeron", "zmq", "none"]),
    help="peers to run beside exon (default: aeron and zmq; none: exon alone)",
)
@click.option("--seconds", default=5.0, show_default=True, help="duration of each native run")
@click.option("--messages", default=2_000_000, show_default=True, help="messages per Python run")
@click.option("--set", "settings", multiple=True, metavar="FIELD=VALUE",
              help="a DriverSettings field for exon's drivers, e.g. threading_mode=DEDICATED "
                   "(default SHARED; other fields also come from EXON_*)")
def bench_transport(
    channel: str, sizes: tuple[int, ...], peers: tuple[str, ...], seconds: float, messages: int,
    settings: tuple[str, ...],
) -> None:
    """exon's transport against real Aeron (native loop) and pyzmq (Python loop)."""
    from exon.bench.transport import run_transport_bench
    from exon.errors import ConfigurationError

    try:
        run_transport_bench(
            channel=channel,
            sizes=sizes or (32, 1024),
            peers=peers or ("aeron", "zmq"),
            seconds=seconds,
            messages=messages,
            driver_options=_field_values(settings),
        )
    except ConfigurationError as exc:
        raise click.ClickException(str(exc)) from None


def _field_values(items: tuple[str, ...]) -> dict[str, str]:
    """``("a=1", "b=x")`` -> ``{"a": "1", "b": "x"}``; a malformed item is a usage error."""
    values: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not FIELD=VALUE", param_hint="--set")
        values[key.strip()] = value.strip()
    return values


# ---- the middleware: nodes and one-shot clients ------------------------------------------

_DRIVER_DIR = click.option("--driver-dir", default=None,
                           help="use the media driver of this directory")
_STEP_TIMEOUT = click.option("--timeout", default=5.0, show_default=True,
                             help="seconds for each step")


@main.command("node")
@click.option("--endpoint", default="127.0.0.1:0", show_default=True, help="HOST:PORT")
@click.option("--echo", "echo", multiple=True, type=int, help="host an echo REP on this tag")
@click.option("--sink", "sink", multiple=True, type=int, help="host a counting PULL on this tag")
@_DRIVER_DIR
@_HEALTH
def node_command(endpoint: str, echo: tuple[int, ...], sink: tuple[int, ...],
                 driver_dir: str | None, health: str | None) -> None:
    """Run an exon node until SIGINT/SIGTERM; prints its address first."""
    from exon.middleware.tools import run_node
    from exon.ops.probes import DriverProbe

    with _lifecycle(health, "the node is starting") as life:

        def ready(node: Any) -> None:
            probe = DriverProbe(node.driver_dir)
            life.set_alive(lambda: "the node is closed" if node.closed else probe())
            life.ready(f"node {node.address}")

        status = run_node(endpoint, echo, sink, driver_dir, on_ready=ready)
    sys.exit(status)


@main.command("keygen")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="replace an existing key file")
def keygen_command(path: str, force: bool) -> None:
    """Write a new keypair to PATH (mode 0600) and print its public key (give that to
    peers: trusted=[...] or peer_key=)."""
    import os

    from exon.crypto import Keypair
    from exon.errors import ExonError

    if os.path.exists(path) and not force:
        raise click.ClickException(f"{path} exists; --force replaces it")
    try:
        pair = Keypair.generate()
        pair.save(path)
    except (ExonError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(pair.public_text)


@main.command("request")
@click.argument("peer")
@click.argument("data")
@_STEP_TIMEOUT
@_DRIVER_DIR
def request_command(peer: str, data: str, timeout: float, driver_dir: str | None) -> None:
    """Send DATA to the REP at PEER (HOST:PORT/TAG) and print the reply."""
    from exon.middleware.tools import request_once

    sys.exit(request_once(peer, data.encode(), timeout=timeout, driver_dir=driver_dir))


@main.command("push")
@click.argument("peer")
@click.argument("data")
@click.option("--count", default=1, show_default=True, help="how many times to send DATA")
@_STEP_TIMEOUT
@_DRIVER_DIR
def push_command(peer: str, data: str, count: int, timeout: float,
                 driver_dir: str | None) -> None:
    """Send DATA to the PULL at PEER (HOST:PORT/TAG); returns once it was delivered."""
    from exon.middleware.tools import push_once

    sys.exit(push_once(peer, data.encode(), count=count, timeout=timeout,
                       driver_dir=driver_dir))


@bench.command("sockets")
@click.option("--size", "sizes", multiple=True, type=click.IntRange(min=1),
              help="message sizes (default 64, 1024, 65536, 1048576)")
@click.option("--messages", default=200_000, show_default=True,
              help="push/pull messages per run (a large size: fewer, at most 1 GiB a run)")
@click.option("--round-trips", default=10_000, show_default=True, help="req/rep round trips")
@click.option("--credits", type=int, default=None,
              help="credits of the receiving socket (default: the link default)")
@click.option("--no-zmq", is_flag=True, help="skip the pyzmq peer")
@click.option("--transport", type=click.Choice(["ipc", "udp"]), default="ipc", show_default=True,
              help="ipc: both nodes on one driver, pyzmq over ipc://; udp: a driver per node, "
                   "UDP over loopback, pyzmq over tcp:// (plus exon's round trip against a "
                   "bare C UDP ping-pong, the floor)")
@click.option("--processes", is_flag=True,
              help="run the shared driver (ipc) as its own 'exon driver' process, as a host "
                   "driver is deployed; nodes always run one per worker process")
@click.option("--links", "links", multiple=True, type=click.IntRange(1, 1000),
              help="instead: one PULL fed by K PUSH sockets (repeat for several K), each "
                   "beside the 1-link figure of the same run")
@click.option("--asyncio", "use_asyncio", is_flag=True,
              help="instead: a req/rep round trip from a coroutine beside zmq.asyncio")
@click.option("--runs", default=3, show_default=True, type=click.IntRange(min=1),
              help="--asyncio, --scrape: rounds (--asyncio: each exon then pyzmq); "
                   "reported: the medians and each round's figures")
@click.option("--patterns", "patterns", is_flag=True,
              help="instead: pub/sub fan-out to 4 subscribers and dealer/router with 64 "
                   "requests in flight, beside pyzmq (exon/bench/patterns.py)")
@click.option("--encrypted", is_flag=True,
              help="instead: encrypted links (EncryptedPolicy) beside plaintext ones and "
                   "beside pyzmq with CURVE, a driver per node over UDP "
                   "(exon/bench/encrypted.py)")
@click.option("--flood", is_flag=True,
              help="instead: a push/pull stream beside a session flooding the receiving "
                   "node with 100k garbage frames a second: its longest gap and its rate "
                   "against the same stream without the flood (exon/bench/flood.py)")
@click.option("--flood-seconds", default=3.0, show_default=True,
              type=click.FloatRange(min=0.1), help="--flood: seconds of each phase")
@click.option("--ipc-term-length", type=int, default=None,
              help="--patterns: the IPC term length of the bench's driver (default: the "
                   "driver's, 2 MiB; "
                   "the guide's tuning page shows its effect)")
@click.option("--scrape", "scrape", is_flag=True,
              help="instead: push/pull with an 'exon stat --serve' scraped 10 times a "
                   "second, beside the same run not scraped (--runs rounds, medians; "
                   "exon/bench/scrape.py)")
@click.option("--send-many", "send_many", type=click.IntRange(min=1), default=None,
              metavar="B",
              help="instead: push/pull with PUSH.send_many of B messages a call beside one "
                   "send per message, the same receive_held(B) PULL (--runs rounds, "
                   "medians; exon/bench/send_many.py)")
@click.option("--hog", is_flag=True,
              help="run a process spinning on the last CPU for the whole bench (its "
                   "lines say \"hog\": CPU): the figures beside a CPU hog")
def bench_sockets(hog: bool, **cases: Any) -> None:
    """exon push/pull throughput and req/rep latency beside pyzmq's."""
    if not hog:
        _bench_sockets(**cases)
        return
    from exon.bench.hog import cpu_hog

    with cpu_hog():
        _bench_sockets(**cases)


def _bench_sockets(sizes: tuple[int, ...], messages: int, round_trips: int, credits: int | None,
                   no_zmq: bool, transport: str, processes: bool, links: tuple[int, ...],
                   use_asyncio: bool, runs: int, patterns: bool, encrypted: bool,
                   flood: bool, flood_seconds: float, ipc_term_length: int | None,
                   scrape: bool, send_many: int | None) -> None:
    if send_many is not None:
        from exon.bench.send_many import run_send_many_bench

        run_send_many_bench(batch=send_many, sizes=sizes or (64, 1024), messages=messages,
                            credits=credits, runs=runs)
        return
    if scrape:
        from exon.bench.scrape import run_scrape_bench

        run_scrape_bench(sizes=sizes or (64,), messages=messages, credits=credits, runs=runs)
        return
    if encrypted:
        from exon.bench.encrypted import run_encrypted_bench

        run_encrypted_bench(sizes=sizes or (64, 1024), messages=messages,
                            round_trips=round_trips, credits=credits, with_zmq=not no_zmq)
        return
    if flood:
        from exon.bench.flood import run_flood_bench

        run_flood_bench(seconds=flood_seconds)
        return
    if patterns:
        from exon.bench.patterns import run_patterns_bench

        run_patterns_bench(messages=messages, round_trips=max(round_trips, 10 * 64),
                           size=(sizes or (64,))[0], with_zmq=not no_zmq,
                           ipc_term_length=ipc_term_length)
        return
    if ipc_term_length is not None:
        raise click.UsageError("--ipc-term-length applies to --patterns only")
    if use_asyncio:
        from exon.bench.aio import run_aio_bench

        run_aio_bench(round_trips=round_trips, size=(sizes or (64,))[0], with_zmq=not no_zmq,
                      runs=runs)
        return
    if links:
        from exon.bench.links import run_links_bench

        run_links_bench(links=links, messages=messages, size=(sizes or (64,))[0])
        return
    from exon.bench.sockets import DEFAULT_SIZES, run_sockets_bench

    run_sockets_bench(sizes=sizes or DEFAULT_SIZES, messages=messages, round_trips=round_trips,
                      credits=credits, with_zmq=not no_zmq, transport=transport,
                      processes=processes)


@bench.command("archive")
@click.option("--size", "sizes", multiple=True, type=int, help="message sizes (default 64, 1024)")
@click.option("--messages", default=None, type=click.IntRange(min=1),
              help="messages per record run (default 500000; 1000000 with --vs aeron)")
@click.option("--no-replay", is_flag=True, help="skip the replay cases")
@click.option("--transport", type=click.Choice(["ipc", "udp"]), default="ipc", show_default=True,
              help="ipc: every node on one driver; udp: a driver per node, UDP over loopback")
@click.option("--dir", "directory", default=None,
              type=click.Path(exists=True, file_okay=False, writable=True),
              help="an existing directory where the archive and files go (default: a "
              "temporary directory)")
@click.option("--runs", default=3, show_default=True, type=click.IntRange(min=1),
              help="rounds of the record cases (archive and peers interleaved); the lines "
              "give the medians and every round")
@click.option("--replicated", is_flag=True,
              help="replication instead: --min-insync 2 against 1 with a replica following "
                   "(UDP loopback), its lag, and a replica's catch-up against local replay")
@click.option("--vs", "versus", type=click.Choice(["aeron"]), default=None,
              help="aeron: beside the real Aeron Archive 1.15.1 (Java) recording and "
                   "replaying the same messages, rounds alternating (default --messages "
                   "1000000)")
@click.option("--fsync", type=click.Choice(["none", "data"]), default="none", show_default=True,
              help="with --vs aeron: exon's fsync policy; Aeron's file sync level 0 or 1")
def bench_archive(sizes: tuple[int, ...], messages: int | None, no_replay: bool, transport: str,
                  directory: str | None, runs: int, replicated: bool, versus: str | None,
                  fsync: str) -> None:
    """The archive's record and replay speed beside plain file I/O and exon push/pull,
    or beside Aeron Archive (--vs aeron)."""
    if versus == "aeron":
        from exon.bench.archive_aeron import run_archive_vs_aeron

        run_archive_vs_aeron(sizes=sizes or (64, 1024), messages=messages or 1_000_000,
                             runs=runs, replay=not no_replay, fsync=fsync,
                             directory=directory)
        return
    messages = messages or 500_000
    if replicated:
        from exon.bench.archive_replicated import run_replicated_bench

        run_replicated_bench(sizes=sizes or (64, 1024), messages=messages, runs=runs,
                             directory=directory)
        return
    from exon.bench.archive import run_archive_bench

    run_archive_bench(sizes=sizes or (64, 1024), messages=messages, replay=not no_replay,
                      transport=transport, directory=directory, runs=runs)


@bench.command("spark")
@click.option("--events", default=1_000_000, show_default=True,
              help="64 B JSON events for the source and sink cases")
@click.option("--per-trigger", default=200_000, show_default=True,
              help="maxRecordsPerTrigger of the exon source")
@click.option("--rate", default=5_000.0, show_default=True,
              help="events/s offered in the latency case (what Spark's socket source "
                   "sustains here; above it that peer only measures its backlog)")
@click.option("--seconds", default=20.0, show_default=True, help="length of the latency case")
@click.option("--rounds", default=3, show_default=True,
              help="source case: runs of exon and of the file source (the median is reported)")
@click.option("--case", "cases", multiple=True,
              type=click.Choice(["source", "latency", "sink"]),
              help="cases to run (default: all)")
@click.option("--workdir", default=None,
              help="work directory (default: a temporary one; on a cluster of other hosts, "
                   "one every worker sees at the same path)")
@click.option("--master", default=None,
              help="Spark master URL, e.g. spark://HOST:7077 (default: local[2])")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="this machine's address that the cluster's executors reach (the "
                   "archive, the sink case's PULL and the Spark driver bind it)")
def bench_spark(events: int, per_trigger: int, rate: float, seconds: float, rounds: int,
                cases: tuple[str, ...], workdir: str | None, master: str | None,
                host: str) -> None:
    """format("exon") on Spark (local[2], or --master) beside Spark's socket and file
    sources, and the exon sink beside foreachBatch (needs exon[spark] and java)."""
    try:
        from exon.bench.spark import run_spark_bench
    except ImportError as exc:
        raise click.ClickException(f"exon bench spark needs the spark extra "
                                   f"(pip install 'exon[spark]'): {exc}") from None
    run_spark_bench(events=events, per_trigger=per_trigger, rate=rate, seconds=seconds,
                    rounds=rounds, cases=cases or ("source", "latency", "sink"), workdir=workdir,
                    master=master, host=host)


@bench.command("plot")
@click.argument("results", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, metavar="OUT.png|OUT.svg",
              help="the figure to write; its extension picks the format (.png, .svg, .pdf)")
@click.option("--title", default=None, help="the figure's title")
def bench_plot(results: str, output: str, title: str | None) -> None:
    """Draw exon beside its peer for every case of RESULTS (JSON lines saved from an
    'exon bench' command), one panel per unit (needs the plot extra: matplotlib)."""
    from exon.bench.plot import load_results, plot_results
    from exon.errors import ConfigurationError

    try:
        with open(results, encoding="utf-8") as stream:
            cases = load_results(stream, source=results)
        click.echo(plot_results(cases, output, title=title))
    except ConfigurationError as exc:
        raise click.ClickException(str(exc)) from None


def _archive_group() -> click.Group:
    from exon.archive.cli import archive_group

    return archive_group


def _pipeline_group() -> click.Group:
    from exon.spark.cli import pipeline_group

    return pipeline_group


main.add_command(_archive_group())
main.add_command(_pipeline_group())


if __name__ == "__main__":  # pragma: no cover
    main()
