"""A multicast lab: network namespaces on one Linux bridge, each with a multicast route.

Topology (names unique per lab: ``exm<pid>x<hex>``)::

    <lab>-hub   br0 (multicast snooping off: every group is flooded to every port)
      |-- veth -- <lab>-n0  eth0 10.78.0.1/24, route 224.0.0.0/4 dev eth0
      |-- veth -- <lab>-n1  eth0 10.78.0.2/24, ...
      ...

Peers are :mod:`tests.transport.aeron.multicast_peer` processes (or the Java Aeron peer)
started with ``ip netns exec``; loss is an nftables rule on a namespace's input
(``meta l4proto udp numgen random mod 100 < P drop``), as in the chaos lab, whose process
and command helpers this reuses (:mod:`tests.chaos.netns`). :meth:`MulticastLab.close`
ends the peers by pid and deletes the namespaces (which deletes the veths).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.netns import LabError, Process, _pid_alive, _run, missing_requirements

__all__ = ["LabError", "MulticastLab", "Peer", "built_lab", "missing_requirements", "sweep_stale"]

SUBNET = "10.78.0"
_STALE = re.compile(r"^exm(\d+)x[0-9a-f]+-(hub|n\d+)$")


def sweep_stale() -> None:
    """Delete namespaces of multicast labs whose test process is gone."""
    for line in _run("ip", "netns", "list", check=False).splitlines():
        name = line.split(" ", 1)[0]
        match = _STALE.match(name)
        if match and not _pid_alive(int(match.group(1))):
            _run("ip", "netns", "delete", name, check=False)


class Peer(Process):
    """One multicast_peer process; ``ok`` raises LabError on an error answer."""

    def __init__(self, ns: str, mode: str, channel: str, stream: int, log: Path,
                 driver: dict[str, Any] | None = None) -> None:
        args = ["-m", "tests.transport.aeron.multicast_peer", mode, "--channel", channel,
                "--stream", str(stream)]
        for key, value in (driver or {}).items():
            args += ["--driver", f"{key}={value}"]
        super().__init__(ns, args, log)
        self.ready = self.first_line(timeout=30)
        if not self.ready.get("ready"):
            raise LabError(f"peer in {ns} did not start: {self.ready}")

    def ok(self, op: str, wait: float, **args: Any) -> dict[str, Any]:
        answer = self.call(op, wait=wait + 10, timeout=wait, **args)
        if "error" in answer:
            raise LabError(f"{op}: {answer['error']}")
        return answer


class MulticastLab:
    def __init__(self, logdir: Path, hosts: int) -> None:
        self.logdir = logdir
        self.name = f"exm{os.getpid()}x{secrets.token_hex(3)}"
        self.hub = f"{self.name}-hub"
        self.ns = [f"{self.name}-n{i}" for i in range(hosts)]
        self.address = [f"{SUBNET}.{i + 1}" for i in range(hosts)]
        self.peers: list[Process] = []
        self.popens: list[subprocess.Popen[str]] = []
        self._created: list[str] = []

    def build(self) -> MulticastLab:
        for ns in (self.hub, *self.ns):
            _run("ip", "netns", "add", ns)
            self._created.append(ns)
            _run("ip", "-n", ns, "link", "set", "lo", "up")
        _run("ip", "-n", self.hub, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
        _run("ip", "-n", self.hub, "link", "set", "br0", "up")
        for i, ns in enumerate(self.ns):
            outer, inner = f"{self.name[-6:]}h{i}", f"{self.name[-6:]}e{i}"
            _run("ip", "link", "add", outer, "netns", self.hub, "type", "veth", "peer", "name",
                 inner, "netns", ns)
            _run("ip", "-n", self.hub, "link", "set", outer, "master", "br0", "up")
            _run("ip", "-n", ns, "link", "set", inner, "name", "eth0")
            _run("ip", "-n", ns, "addr", "add", f"{self.address[i]}/24", "dev", "eth0")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")
            _run("ip", "-n", ns, "route", "add", "224.0.0.0/4", "dev", "eth0")
        return self

    def loss(self, host: int, percent: int) -> None:
        """Drop ``percent`` % of the UDP datagrams arriving in host ``host`` (counted)."""
        script = "\n".join([
            "table ip mcloss {",
            "  chain input { type filter hook input priority 0; policy accept;",
            f"    meta l4proto udp numgen random mod 100 < {int(percent)} counter drop",
            "  }", "}", ""])
        _run("ip", "netns", "exec", self.ns[host], "nft", "-f", "-", input=script)

    def loss_from(self, host: int, percent: int) -> None:
        """Drop ``percent`` % of the UDP frames host ``host`` sends, in the bridge before it
        floods them, so every other host misses the same ones (a drop on the sender's own
        output would fail its send call, which the sender retries: no loss)."""
        port = f"{self.name[-6:]}h{host}"
        script = "\n".join([
            "table bridge mcloss {",
            "  chain forward { type filter hook forward priority 0; policy accept;",
            f'    iifname "{port}" meta l4proto udp numgen random mod 100 < {int(percent)} '
            "counter drop",
            "  }", "}", ""])
        _run("ip", "netns", "exec", self.hub, "nft", "-f", "-", input=script)

    def dropped(self, host: int | None) -> int:
        """Datagrams the loss rule of host ``host`` dropped (None: the bridge's)."""
        where, family = (self.hub, "bridge") if host is None else (self.ns[host], "ip")
        out = _run("ip", "netns", "exec", where, "nft", "-j", "list", "table", family,
                   "mcloss")
        total = 0
        for item in json.loads(out)["nftables"]:
            for expr in item.get("rule", {}).get("expr", []):
                if "counter" in expr:
                    total += int(expr["counter"]["packets"])
        return total

    def peer(self, host: int, mode: str, channel: str, stream: int = 1001,
             driver: dict[str, Any] | None = None) -> Peer:
        log = self.logdir / f"peer-{mode}-{host}-{time.time_ns()}.log"
        peer = Peer(self.ns[host], mode, channel, stream, log, driver)
        self.peers.append(peer)
        return peer

    def popen(self, host: int, cmd: list[str], **kwargs: Any) -> subprocess.Popen[str]:
        """Any command in host ``host`` (the Java peer); ended by pid in :meth:`close`."""
        proc: subprocess.Popen[str] = subprocess.Popen(
            ["ip", "netns", "exec", self.ns[host], *cmd], text=True, **kwargs)
        self.popens.append(proc)
        return proc

    def close(self) -> None:
        for peer in self.peers:
            with contextlib.suppress(Exception):
                peer.close()
        for proc in self.popens:
            if proc.poll() is None:
                proc.kill()
            with contextlib.suppress(Exception):
                proc.wait(timeout=10)
        for ns in reversed(self._created):
            _run("ip", "netns", "delete", ns, check=False)


@contextlib.contextmanager
def built_lab(directory: Path, hosts: int) -> Iterator[MulticastLab]:
    """A built lab of ``hosts`` namespaces, closed after (a fixture's body); skips, saying
    why, where namespaces or nftables cannot be had (no root, no iproute2 or nft)."""
    reason = missing_requirements(nft=True)
    if reason:
        print(f"SKIP: {reason}")
        pytest.skip(reason)
    sweep_stale()
    lab = MulticastLab(directory, hosts=hosts)
    try:
        lab.build()
        yield lab
    finally:
        lab.close()
