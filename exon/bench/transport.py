"""``exon bench transport``: exon's Aeron transport beside real Aeron and pyzmq.

Cases (one JSON line each, see :mod:`exon.bench.report`):

- ``native-ipc-throughput``: a C publisher thread and a C subscriber thread over one IPC
  publication of an embedded exon driver, against the real Aeron Java driver's
  ``EmbeddedIpcThroughput`` for the same message size, run just before in the same process
  tree.
- ``python-ipc-throughput``: a publisher process doing one ``offer`` per message from Python
  and this process polling with a handler, against pyzmq PUSH/PULL over ``ipc://`` between
  two processes, one message per Python call.
- ``native-udp-throughput`` (``--channel aeron:udp?endpoint=HOST:PORT``): a C publisher
  thread and a C subscriber thread over a UDP publication looped back into the same
  embedded exon driver (SHARED threading, like the peer), against Aeron's
  ``EmbeddedThroughput`` on the same kind of channel; NAKs and retransmits per million
  messages are reported.
- ``pingpong-udp`` / ``pingpong-ipc``: round-trip latency percentiles (p50/p99/p99.9, us)
  of a C ping thread and a C pong thread through the driver, against the same loop in Java
  (``exon/bench/java/ExonPingPong.java``, compiled with javac against the peer's jar, with
  an embedded SHARED driver; Aeron's own EmbeddedPingPong hard-codes a DEDICATED driver
  that starves a 2-core machine).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

from exon.bench import peers as peer_runs
from exon.bench.report import emit
from exon.native.bench_loops import ffi, handle, lib

#: settings of exon's embedded drivers in these cases (``exon bench transport --set``):
#: SHARED threading unless told otherwise (the Java peers run SHARED drivers too)
DRIVER_DEFAULTS: dict[str, Any] = {"threading_mode": "SHARED"}
_driver_options: dict[str, Any] = dict(DRIVER_DEFAULTS)


@contextlib.contextmanager
def _embedded_aeron() -> Iterator[Any]:
    """A client of a fresh embedded driver (SHARED threading unless ``--set`` says
    otherwise; the other settings from ``EXON_*``) in a temporary directory."""
    from exon.transport.aeron import Aeron, MediaDriver
    from exon.transport.aeron.settings import driver_dir_base

    with (
        tempfile.TemporaryDirectory(prefix="exon-bench-", dir=driver_dir_base()) as tmp,
        MediaDriver.launch(dir=f"{tmp}/driver", **_driver_options) as driver,
        Aeron.connect(dir=driver.dir) as aeron,
    ):
        yield aeron


def _ipc_pair(aeron: Any, channel: str, stream_id: int, timeout: float = 5.0,
              existing_sub: Any = None) -> tuple[Any, Any]:
    sub = existing_sub if existing_sub is not None else aeron.add_subscription(channel, stream_id)
    pub = aeron.add_exclusive_publication(channel, stream_id)
    deadline = time.monotonic() + timeout
    while not sub.images or not pub.is_connected:
        if time.monotonic() > deadline:
            raise RuntimeError("the benchmark publication never connected")
        sub.wait(0.01)
        sub.poll(lambda data, header: None, 1)
    return pub, sub


def native_ipc_throughput(size: int, seconds: float) -> float:
    """Messages/s of exon's C publisher/subscriber loop over an embedded driver's IPC log."""
    with _embedded_aeron() as aeron:
        pub, sub = _ipc_pair(aeron, "aeron:ipc", 1001)
        image = sub.images[0]
        result = ffi.new("exon_bench_result_t *")
        rc = lib.exon_bench_ipc_throughput(
            handle(pub.cdata, "exon_publication_t *"), handle(image.cdata, "exon_image_t *"),
            size, int(seconds * 1e9), lib.EXON_BENCH_DRIVER_MANAGED, result
        )
        if rc < 0:
            raise RuntimeError(f"native benchmark failed: {rc}")
        return float(result.messages_per_second)


def python_ipc_throughput(size: int, messages: int) -> float:
    """Messages/s from a Python publisher process to this process's Python poll loop."""
    with _embedded_aeron() as aeron:
        sub = aeron.add_subscription("aeron:ipc", 1002)
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "exon.bench.exon_worker",
                "offer",
                aeron.dir,
                "aeron:ipc",
                "1002",
                str(messages),
                str(size),
            ],
            stdin=subprocess.PIPE,
        )
        try:
            count = 0
            start = 0.0

            def handler(data: Any, header: Any) -> None:
                nonlocal count
                count += 1

            poll = sub.poll
            deadline = time.monotonic() + 300
            while count == 0:
                if time.monotonic() > deadline or worker.poll() is not None:
                    raise RuntimeError("the publisher process sent nothing")
                sub.wait(0.01)
                poll(handler, 1)
            start = time.perf_counter()
            first = count
            while count < messages:
                if poll(handler, 256) == 0:
                    if time.monotonic() > deadline or worker.poll() is not None:
                        raise RuntimeError(f"stream stopped after {count} messages")
                    sub.wait(0.001)
            elapsed = time.perf_counter() - start
            return (count - first) / elapsed
        finally:
            if worker.stdin:
                worker.stdin.close()
            try:
                worker.wait(timeout=10)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()


def _free_udp_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _udp_host(channel: str) -> str:
    from exon.transport.aeron.channel import parse

    uri = parse(channel)
    endpoint = getattr(uri, "endpoint", None)
    host = getattr(endpoint, "host", None) if endpoint is not None else None
    return str(host or "127.0.0.1")


def native_udp_throughput(size: int, seconds: float, host: str) -> dict[str, float]:
    """Messages/s of exon's C loop over a UDP publication looped back into one driver."""
    from exon.transport.aeron.counters import SystemCounter

    with _embedded_aeron() as aeron:
        sub = aeron.add_subscription(f"aeron:udp?endpoint={host}:0", 1001)
        pub, sub = _ipc_pair(aeron, sub.resolved_channel, 1001, existing_sub=sub)
        naks0 = aeron.counter_value(SystemCounter.NAK_MESSAGES_SENT)
        retx0 = aeron.counter_value(SystemCounter.RETRANSMITS_SENT)
        result = ffi.new("exon_bench_result_t *")
        rc = lib.exon_bench_net_throughput(
            handle(pub.cdata, "exon_publication_t *"),
            handle(sub.images[0].cdata, "exon_image_t *"), size, int(seconds * 1e9), result
        )
        if rc < 0:
            raise RuntimeError(f"native UDP benchmark failed: {rc}")
        millions = max(result.messages, 1) / 1e6
        return {
            "rate": float(result.messages_per_second),
            "naks_per_million": (aeron.counter_value(SystemCounter.NAK_MESSAGES_SENT) - naks0)
            / millions,
            "retransmits_per_million": (
                aeron.counter_value(SystemCounter.RETRANSMITS_SENT) - retx0
            ) / millions,
        }


def native_pingpong(kind: str, size: int, round_trips: int, host: str) -> dict[str, float]:
    """Round-trip percentiles (us) of a C ping/pong pair through one embedded driver."""
    with _embedded_aeron() as aeron:
        if kind == "udp":
            ping_sub = aeron.add_subscription(f"aeron:udp?endpoint={host}:0", 1001)
            pong_sub = aeron.add_subscription(f"aeron:udp?endpoint={host}:0", 1002)
            ping_ch, pong_ch = ping_sub.resolved_channel, pong_sub.resolved_channel
        else:
            ping_sub = aeron.add_subscription("aeron:ipc", 1001)
            pong_sub = aeron.add_subscription("aeron:ipc", 1002)
            ping_ch = pong_ch = "aeron:ipc"
        ping_pub, ping_sub = _ipc_pair(aeron, ping_ch, 1001, existing_sub=ping_sub)
        pong_pub, pong_sub = _ipc_pair(aeron, pong_ch, 1002, existing_sub=pong_sub)
        rtt = ffi.new("int64_t[]", round_trips)
        done: int = lib.exon_bench_net_pingpong(
            handle(ping_pub.cdata, "exon_publication_t *"),
            handle(ping_sub.images[0].cdata, "exon_image_t *"),
            handle(pong_pub.cdata, "exon_publication_t *"),
            handle(pong_sub.images[0].cdata, "exon_image_t *"),
            size, round_trips, int(120e9), rtt,
        )
        if done < round_trips // 2:
            raise RuntimeError(f"ping-pong stopped after {done} round trips")
        values: list[int] = sorted(rtt[i] for i in range(done // 10, done))  # first 10%: warm-up

        def pct(p: float) -> float:
            return values[min(len(values) - 1, int(p * len(values)))] / 1000.0

        return {"p50": pct(0.5), "p99": pct(0.99), "p99.9": pct(0.999)}


def java_pingpong(kind: str, size: int, round_trips: int, host: str) -> dict[str, float]:
    """Round-trip percentiles (us) of ExonPingPong.java (real Aeron client + SHARED driver)."""
    import os
    import pathlib
    import shutil

    from exon.transport.aeron.settings import fresh_driver_dir

    script = peer_runs.aeron_peer_script()
    if script is None or shutil.which("javac") is None or shutil.which("java") is None:
        raise RuntimeError("java, javac or aeron-peer.sh missing")
    source = pathlib.Path(__file__).with_name("java") / "ExonPingPong.java"
    classpath = subprocess.run([str(script), "classpath"], capture_output=True, text=True,
                               check=True, timeout=600).stdout.strip().splitlines()[-1]
    with tempfile.TemporaryDirectory(prefix="exon-bench-java-") as build:
        subprocess.run(["javac", "-d", build, "-cp", classpath, str(source)], check=True,
                       timeout=120)
        if kind == "udp":
            ping = f"aeron:udp?endpoint={host}:{_free_udp_port(host)}"
            pong = f"aeron:udp?endpoint={host}:{_free_udp_port(host)}"
        else:
            ping = pong = "aeron:ipc"
        aeron_dir = fresh_driver_dir(f"exon-bench-pingpong-{os.getpid()}")
        try:
            out = subprocess.run(
                ["java", "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
                 "-Dagrona.disable.bounds.checks=true", "-cp", f"{classpath}:{build}",
                 "ExonPingPong", aeron_dir, ping, pong, str(round_trips), str(size)],
                capture_output=True, text=True, timeout=300, check=False,
            )
        finally:
            shutil.rmtree(aeron_dir, ignore_errors=True)
    for line in out.stdout.splitlines():
        if line.startswith("RTT_US "):
            p50, p99, p999 = (float(x) for x in line.split()[1:4])
            return {"p50": p50, "p99": p99, "p99.9": p999}
    raise RuntimeError(f"no RTT line from ExonPingPong: {out.stderr[-500:]}")


def _aeron_peer(
    peers: tuple[str, ...], run: Callable[[], float]
) -> tuple[float | None, str | None]:
    """(the Aeron peer's figure, None) when asked for and available; else (None, the reason
    it was not run)."""
    if "aeron" not in peers:
        return None, "not requested"
    reason = peer_runs.aeron_peer_unavailable_reason()
    if reason is not None:
        return None, reason
    return run(), None


def _emit_throughput(case: str, *, exon: float | None, peer: float | None, peer_name: str,
                     **extra: Any) -> None:
    emit(case, exon=exon, peer=peer, peer_name=peer_name, unit="msgs/s", higher_is_better=True,
         **extra)


def run_udp_bench(*, channel: str, sizes: tuple[int, ...], peers: tuple[str, ...],
                  seconds: float, messages: int) -> None:
    host = _udp_host(channel)
    for size in sizes:
        def java_udp(size: int = size) -> float:
            return peer_runs.java_udp_throughput(
                size, messages, f"aeron:udp?endpoint={host}:{_free_udp_port(host)}")

        peer, peer_note = _aeron_peer(peers, java_udp)
        figures = native_udp_throughput(size, seconds, host)
        _emit_throughput(
            f"native-udp-throughput-{size}B",
            exon=figures["rate"],
            peer=peer,
            peer_name="aeron-java EmbeddedThroughput (UDP loopback)",
            size=size,
            channel=channel,
            naks_per_million=round(figures["naks_per_million"], 3),
            retransmits_per_million=round(figures["retransmits_per_million"], 3),
            peer_note=peer_note,
        )
    for kind in ("udp", "ipc"):
        size = 32
        peer_lat: dict[str, float] | None = None
        note = None
        if "aeron" in peers:
            try:
                peer_lat = java_pingpong(kind, size, 50_000, host)
            except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
                note = f"peer not run: {exc}"
        lat = native_pingpong(kind, size, 50_000, host)
        for name in ("p50", "p99", "p99.9"):
            emit(
                f"pingpong-{kind}-{size}B-{name}",
                exon=lat[name],
                peer=None if peer_lat is None else peer_lat[name],
                peer_name="aeron-java ping-pong (ExonPingPong.java, SHARED driver)",
                unit="us",
                higher_is_better=False,
                size=size,
                peer_note=note,
            )


def run_transport_bench(
    *,
    channel: str,
    sizes: tuple[int, ...],
    peers: tuple[str, ...],
    seconds: float,
    messages: int,
    driver_options: dict[str, Any] | None = None,
) -> None:
    """Run the cases for ``channel``; ``driver_options``: :class:`DriverSettings` fields for
    exon's embedded drivers, over :data:`DRIVER_DEFAULTS` and the ``EXON_*`` environment."""
    from exon.transport.aeron.settings import DriverSettings

    options = {**DRIVER_DEFAULTS, **(driver_options or {})}
    DriverSettings.from_env(**options)  # a bad field fails here, before anything runs
    saved = dict(_driver_options)
    _driver_options.clear()
    _driver_options.update(options)
    try:
        _run_cases(channel=channel, sizes=sizes, peers=peers, seconds=seconds,
                   messages=messages)
    finally:
        _driver_options.clear()
        _driver_options.update(saved)


def _run_cases(*, channel: str, sizes: tuple[int, ...], peers: tuple[str, ...],
               seconds: float, messages: int) -> None:
    if channel.startswith("aeron:udp"):
        run_udp_bench(channel=channel, sizes=sizes, peers=peers, seconds=seconds,
                      messages=messages)
        return
    if channel != "aeron:ipc":
        raise SystemExit(f"exon bench transport: channel {channel!r} is not supported yet")
    for size in sizes:
        def java_ipc(size: int = size) -> float:
            return peer_runs.java_ipc_throughput(size, seconds=max(4, int(seconds) + 2))

        peer, peer_note = _aeron_peer(peers, java_ipc)
        exon = native_ipc_throughput(size, seconds)
        _emit_throughput(
            f"native-ipc-throughput-{size}B",
            exon=exon,
            peer=peer,
            peer_name="aeron-java EmbeddedIpcThroughput",
            size=size,
            channel=channel,
            peer_note=peer_note,
        )
    # The Python loop always runs; pyzmq beside it only when asked for ("--vs zmq").
    size = 64
    reason = peer_runs.zmq_unavailable_reason() if "zmq" in peers else "not requested"
    peer = None if reason else peer_runs.zmq_push_pull(size, messages).rate
    exon = python_ipc_throughput(size, messages)
    _emit_throughput(
        f"python-ipc-throughput-{size}B",
        exon=exon,
        peer=peer,
        peer_name="pyzmq PUSH/PULL ipc://",
        size=size,
        channel=channel,
        messages=messages,
        peer_note=reason,
    )
