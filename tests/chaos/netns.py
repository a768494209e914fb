"""The chaos lab: two exon nodes in network namespaces, a faulty link between them.

Topology (names unique per lab, so concurrent runs do not collide)::

    <lab>-a  eth0 10.77.0.1/24 --veth-- ra  <lab>-r  rb --veth-- eth0 10.77.0.2/24  <lab>-b
                                            relay.py

``a`` and ``b`` share one link layer through the userspace bridge of ``r``
(:mod:`tests.chaos.relay`), which delays and reorders UDP. Loss and duplication are
nftables rules in ``a`` and ``b`` (table ``ip chaos``): the input chain drops a share of
the UDP datagrams that arrive, the output chain duplicates a share of those that leave
(``dup to`` the peer's address), so both directions are impaired alike, data one way and
status messages, NAKs and exon FLOWs the other. A partition is a second table
(``ip chaos_partition``) that drops every UDP datagram on input on both sides.

GSO is turned off on the end veths (``gso_max_segs 1``): a UDP GSO super-packet would
reach the bridge as one frame larger than the MTU.

Each node is an agent process (:mod:`tests.chaos.agent`) started with ``ip netns exec``,
which execs, so the Popen pid is the agent's own. :meth:`Lab.close` ends the agents by
pid (SIGTERM, then SIGKILL), stops the relay, deletes the namespaces and removes the
driver directories of agents that could not remove theirs (a SIGKILLed one).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SUBNET = "10.77.0"
ADDRESS = {"a": f"{SUBNET}.1", "b": f"{SUBNET}.2"}
PEER = {"a": "b", "b": "a"}


class LabError(RuntimeError):
    """The lab itself failed (a command, an agent that did not answer): not exon's fault."""


def missing_requirements(*, nft: bool = False) -> str | None:
    """Why the chaos lab cannot run here (None: it can)."""
    if os.geteuid() != 0:
        return "the chaos suite needs root (network namespaces)"
    if shutil.which("ip") is None:
        return "the chaos suite needs iproute2's 'ip' (apt-get install iproute2)"
    if nft and shutil.which("nft") is None:
        return "the chaos suite needs nftables' 'nft' (apt-get install nftables)"
    return None


def _run(*args: str, input: str | None = None, check: bool = True) -> str:
    proc = subprocess.run(args, input=input, capture_output=True, text=True, timeout=60,
                          env=_env(), cwd=REPO)
    if check and proc.returncode != 0:
        raise LabError(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def _env() -> dict[str, str]:
    env = dict(os.environ)
    path = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + path if path else "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


class Process:
    """A JSON-lines child (agent or relay) in a namespace; ``call`` sends one command and
    waits for the answer with the same id."""

    def __init__(self, ns: str, args: list[str], log: Path) -> None:
        self.log = log
        self._stderr = open(log, "ab")  # noqa: SIM115 - closed in close()
        self.popen = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            cwd=REPO, env=_env(), text=True, bufsize=1)
        self.pid = self.popen.pid
        self._answers: dict[Any, queue.Queue[dict[str, Any]]] = {}
        self._lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self._lock = threading.Lock()
        self._next = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            ident = obj.get("id")
            with self._lock:
                box = self._answers.get(ident)
            if box is not None:
                box.put(obj)
            else:
                self._lines.put(obj)

    def first_line(self, timeout: float) -> dict[str, Any]:
        try:
            return self._lines.get(timeout=timeout)
        except queue.Empty:
            raise LabError(f"no ready line in {timeout}s: {self.stderr_tail()}") from None

    def send_line(self, obj: dict[str, Any]) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.write(json.dumps(obj) + "\n")
        self.popen.stdin.flush()

    def call(self, op: str, wait: float = 30.0, **args: Any) -> dict[str, Any]:
        """Send ``op`` with ``args``; its answer, waited for up to ``wait`` seconds."""
        with self._lock:
            self._next += 1
            ident = self._next
            box: queue.Queue[dict[str, Any]] = queue.Queue()
            self._answers[ident] = box
        try:
            self.send_line({"id": ident, "op": op, **args})
            try:
                return box.get(timeout=wait)
            except queue.Empty:
                raise LabError(f"{op} got no answer in {wait}s: {self.stderr_tail()}") from None
        finally:
            with self._lock:
                self._answers.pop(ident, None)

    def stderr_tail(self, limit: int = 2000) -> str:
        try:
            return self.log.read_text(errors="replace")[-limit:]
        except OSError:
            return ""

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL by pid (no cleanup in the child) and reap it."""
        if self.alive:
            os.kill(self.pid, signal.SIGKILL)
        self.popen.wait(timeout=10)

    def close(self, grace: float = 5.0) -> None:
        if self.alive:
            with contextlib.suppress(OSError, ValueError):
                self.send_line({"op": "exit"})
            try:
                self.popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGTERM)
                try:
                    self.popen.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    self.kill()
        for stream in (self.popen.stdin, self.popen.stdout):
            with contextlib.suppress(OSError, ValueError):
                if stream is not None:
                    stream.close()
        self._stderr.close()


class Node(Process):
    """An agent: one exon node with its embedded driver, in namespace ``side``."""

    def __init__(self, lab: Lab, side: str, port: int, driver: dict[str, Any],
                 link: dict[str, Any]) -> None:
        self.side = side
        args = ["-m", "tests.chaos.agent", "--endpoint", f"{ADDRESS[side]}:{port}"]
        for key, value in driver.items():
            args += ["--driver", f"{key}={value}"]
        for key, value in link.items():
            args += ["--link", f"{key}={value}"]
        super().__init__(lab.ns[side], args, lab.logdir / f"node-{side}-{time.time_ns()}.log")
        ready = self.first_line(timeout=30)
        if not ready.get("ready"):
            raise LabError(f"agent {side} did not start: {ready}")
        self.address: str = ready["address"]
        self.driver_dir: str = ready["driver_dir"]
        self.incarnation: int = ready["incarnation"]
        if ready["pid"] != self.pid:
            raise LabError(f"agent pid {ready['pid']} is not the Popen pid {self.pid}")

    def ok(self, op: str, wait: float = 30.0, **args: Any) -> dict[str, Any]:
        """``call`` that raises LabError unless the agent answered ok."""
        answer = self.call(op, wait=wait, **args)
        if not answer.get("ok"):
            raise LabError(f"{self.side}: {op} {args} failed: {answer.get('error')}")
        return answer


_STALE = re.compile(r"^exc(\d+)x[0-9a-f]+-[arb]$")


def sweep_stale() -> list[str]:
    """Delete the namespaces of labs whose test process is gone (it was SIGKILLed before
    its teardown); a lab's name carries the pid of the process that built it."""
    deleted = []
    for line in _run("ip", "netns", "list", check=False).splitlines():
        name = line.split(" ", 1)[0]
        match = _STALE.match(name)
        if match and not _pid_alive(int(match.group(1))):
            _run("ip", "netns", "delete", name, check=False)
            deleted.append(name)
    return deleted


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Lab:
    def __init__(self, logdir: Path) -> None:
        self.logdir = logdir
        self.name = f"exc{os.getpid()}x{secrets.token_hex(3)}"
        self.ns = {side: f"{self.name}-{side}" for side in ("a", "r", "b")}
        self.nodes: list[Node] = []
        self.relay: Process | None = None
        self._created: list[str] = []
        self._driver_dirs: list[str] = []

    # ---- building ---------------------------------------------------------------------

    def build(self) -> Lab:
        for ns in self.ns.values():
            _run("ip", "netns", "add", ns)
            self._created.append(ns)
            _run("ip", "-n", ns, "link", "set", "lo", "up")
        r = self.ns["r"]
        _run("ip", "netns", "exec", r, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        for side in ("a", "b"):
            ns = self.ns[side]
            _run("ip", "-n", r, "link", "add", f"r{side}", "type", "veth",
                 "peer", "name", "eth0", "netns", ns)
            _run("ip", "-n", ns, "addr", "add", f"{ADDRESS[side]}/24", "dev", "eth0")
            _run("ip", "-n", ns, "link", "set", "eth0", "gso_max_segs", "1")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")
            _run("ip", "-n", r, "link", "set", f"r{side}", "up")
        self.relay = Process(r, ["-m", "tests.chaos.relay", "ra", "rb"],
                             self.logdir / "relay.log")
        ready = self.relay.first_line(timeout=30)
        if not ready.get("ready"):
            raise LabError(f"relay did not start: {ready}")
        return self

    # ---- nodes ------------------------------------------------------------------------

    def start_node(self, side: str, port: int = 7000, *, driver: dict[str, Any] | None = None,
                   link: dict[str, Any] | None = None) -> Node:
        node = Node(self, side, port, driver or {}, link or {})
        self.nodes.append(node)
        self._driver_dirs.append(node.driver_dir)
        return node

    # ---- faults -----------------------------------------------------------------------

    def relay_set(self, **settings: Any) -> dict[str, Any]:
        assert self.relay is not None
        self.relay.send_line({"op": "set", **settings})
        return self.relay.first_line(timeout=10)

    def relay_stats(self) -> dict[str, Any]:
        assert self.relay is not None
        self.relay.send_line({"op": "stats"})
        return self.relay.first_line(timeout=10)

    def impair(self, *, loss: int = 0, dup: int = 0, delay_ms: float = 0.0,
               reorder: float = 0.0, seed: int = 0) -> None:
        """Loss and duplication (percent, nftables) on both sides' UDP, delay and reorder
        (the relay); replaces whatever was set before. All zero: a clean link."""
        for side in ("a", "b"):
            rules = []
            if loss:
                rules.append(f"add rule ip chaos input meta l4proto udp "
                             f"numgen random mod 100 < {int(loss)} counter drop")
            if dup:
                # every UDP datagram through the output hook, the copies too (a copy passes
                # it again, and may be copied again): what the duplicated share is of
                rules.append('add rule ip chaos output meta l4proto udp counter '
                             'comment "udp_out"')
                rules.append(f"add rule ip chaos output meta l4proto udp "
                             f"numgen random mod 100 < {int(dup)} counter "
                             f"dup to {ADDRESS[PEER[side]]} device eth0")
            if not rules and shutil.which("nft") is None:
                continue  # nothing to set, and without nft no table can have been set
            script = "\n".join([
                "table ip chaos", "delete table ip chaos", "table ip chaos {",
                "  chain input { type filter hook input priority 0; policy accept; }",
                "  chain output { type filter hook output priority 0; policy accept; }",
                "}", *rules, ""])
            _run("ip", "netns", "exec", self.ns[side], "nft", "-f", "-", input=script)
        self.relay_set(delay_ms=delay_ms, reorder_pct=reorder, seed=seed)

    def partition(self) -> None:
        """Drop every UDP datagram on both sides until :meth:`heal`."""
        for side in ("a", "b"):
            _run("ip", "netns", "exec", self.ns[side], "nft", "-f", "-", input=(
                "table ip chaos_partition {\n"
                "  chain input { type filter hook input priority -10; policy accept;\n"
                "    meta l4proto udp counter drop\n  }\n}\n"))

    def heal(self) -> None:
        for side in ("a", "b"):
            _run("ip", "netns", "exec", self.ns[side], "nft", "delete", "table", "ip",
                 "chaos_partition", check=False)

    def nft_counters(self, side: str, table: str = "chaos") -> dict[str, int]:
        """Packets counted by the rules in ``table`` of ``side``: {chain: packets} for the
        fault rules, {comment: packets} for a rule with a comment (a plain count)."""
        out = _run("ip", "netns", "exec", self.ns[side], "nft", "-j", "list", "table", "ip",
                   table)
        counts: dict[str, int] = {}
        for item in json.loads(out)["nftables"]:
            rule = item.get("rule")
            if not rule:
                continue
            for expr in rule["expr"]:
                if "counter" in expr:
                    key = rule.get("comment") or rule["chain"]
                    counts[key] = counts.get(key, 0) + int(expr["counter"]["packets"])
        return counts

    # ---- raw UDP, for the fault tests -------------------------------------------------

    def probe(self, src: str, count: int = 5000, port: int = 9000,
              silence: float = 0.5) -> dict[str, Any]:
        """``count`` numbered datagrams from ``src`` to the other side
        (:mod:`tests.chaos.probe`); what arrived there by ``silence`` seconds after the
        sender finished."""
        dst = PEER[src]
        receiver = subprocess.Popen(
            ["ip", "netns", "exec", self.ns[dst], sys.executable, "-m", "tests.chaos.probe",
             "recv", str(port)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=_env(), cwd=REPO)
        try:
            assert receiver.stdout is not None
            if not json.loads(receiver.stdout.readline() or "{}").get("ready"):
                raise LabError(f"probe receiver in {dst} did not start")
            _run("ip", "netns", "exec", self.ns[src], sys.executable, "-m",
                 "tests.chaos.probe", "send", ADDRESS[dst], str(port), str(count))
            time.sleep(silence)  # the last ones may still be held by the relay
            out, err = receiver.communicate("done\n", timeout=30)
        finally:
            if receiver.poll() is None:
                receiver.kill()
                receiver.wait(timeout=10)
        if receiver.returncode != 0:
            raise LabError(f"probe receiver failed: {err}")
        result: dict[str, Any] = json.loads(out)
        result["sent"] = count
        return result

    # ---- teardown ---------------------------------------------------------------------

    def close(self) -> None:
        for node in self.nodes:
            with contextlib.suppress(Exception):
                node.close()
        if self.relay is not None:
            with contextlib.suppress(Exception):
                self.relay.close()
        for ns in reversed(self._created):
            _run("ip", "netns", "delete", ns, check=False)
        self._created.clear()
        for directory in self._driver_dirs:
            shutil.rmtree(directory, ignore_errors=True)
