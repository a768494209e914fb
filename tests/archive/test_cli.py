"""``exon archive ...`` as an operator runs it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

import exon
from exon.archive import Archive, ArchiveService
from tests.archive.conftest import SEGMENT, fill

EXON = [sys.executable, "-m", "exon.cli", "archive"]


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EXON, *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def directory(tmp_path) -> Iterator[str]:
    d = str(tmp_path / "arch")
    with Archive(d, owner=True) as ar:
        ar.create_recording("orders", segment_length=SEGMENT, ingest_tag=10)
        ar.create_recording("clicks", segment_length=SEGMENT, ingest_tag=11)
        fill(ar, "orders", [b"order-%d" % i for i in range(5000)])
    return d


def test_list(directory: str) -> None:
    out = run("list", "--dir", directory)
    assert out.returncode == 0, out.stderr
    assert "orders" in out.stdout
    assert "clicks" in out.stdout
    listed = run("list", "--dir", directory, "--json").stdout
    rows = [json.loads(line) for line in listed.split("\n") if line]
    by_name = {r["name"]: r for r in rows}
    with Archive(directory) as ar:
        assert by_name["orders"]["stop_position"] == ar.stop_position("orders")
    assert by_name["clicks"]["stop_position"] == 0
    assert by_name["clicks"]["ingest_tag"] == 11


def test_replay_prints_a_range(directory: str) -> None:
    with Archive(directory) as ar:
        records = list(ar.replay("orders"))
    out = run("replay", "--dir", directory, "orders", "--from", str(records[10].position),
              "--to", str(records[13].position), "--json")
    assert out.returncode == 0, out.stderr
    got = [json.loads(line) for line in out.stdout.split("\n") if line]
    assert [g["payload"] for g in got] == ["order-10", "order-11", "order-12"]
    assert [g["position"] for g in got] == [r.position for r in records[10:13]]


def test_replay_errors_are_clear(directory: str) -> None:
    out = run("replay", "--dir", directory, "nope", "--from", "0")
    assert out.returncode == 1
    assert "no recording 'nope'" in out.stderr
    out = run("replay", "--dir", directory, "orders", "--from", "8")
    assert out.returncode == 1
    assert "not a record boundary" in out.stderr
    out = run("list", "--dir", directory + "-missing")
    assert out.returncode == 1
    assert "no such archive directory" in out.stderr


def test_truncate(directory: str) -> None:
    with Archive(directory) as ar:
        records = list(ar.replay("orders"))
    cut = records[4000].position
    out = run("truncate", "--dir", directory, "orders", "--before", str(cut))
    assert out.returncode == 0, out.stderr
    start = int(out.stdout)
    assert start == cut - cut % SEGMENT
    with Archive(directory) as ar:
        assert ar.recording("orders").start_position == start
        assert list(ar.replay("orders", start))[-1] == records[-1]
    beyond = str(records[-1].position + 10**9)
    out = run("truncate", "--dir", directory, "orders", "--before", beyond)
    assert out.returncode == 1
    assert "outside" in out.stderr


def test_truncate_of_a_missing_directory_creates_nothing(tmp_path) -> None:
    typo = tmp_path / "arhcive"
    out = run("truncate", "--dir", str(typo), "orders", "--before", "0")
    assert out.returncode == 1
    assert "no such archive directory" in out.stderr
    assert "Traceback" not in out.stderr
    assert not typo.exists()


@pytest.mark.net
def test_truncate_through_a_service_with_a_position_beyond_64_bits(directory: str) -> None:
    with ArchiveService(directory, ingest={"orders": 10, "clicks": 11}) as svc:
        out = run("truncate", "--archive", svc.address, "orders", "--before", str(10**23))
    assert out.returncode == 1
    assert "before cannot be sent" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("catalog", ["[]", "null", '"text"', '{"version": 1, "next_id": 2, '
                                     '"recordings": [1]}'])
def test_a_catalog_of_the_wrong_shape_is_named_not_a_traceback(tmp_path, catalog: str) -> None:
    d = tmp_path / "arch"
    d.mkdir()
    (d / "catalog.json").write_text(catalog)
    for args in (["list", "--dir", str(d)], ["replay", "--dir", str(d), "orders", "--from", "0"]):
        out = run(*args)
        assert out.returncode == 1, out
        assert "catalog" in out.stderr, out.stderr
        assert "Traceback" not in out.stderr, out.stderr


@pytest.mark.net
def test_serve_prints_its_address_and_refuses_a_held_directory(directory: str) -> None:
    proc = subprocess.Popen([*EXON, "serve", "--dir", directory, "--ingest", "orders=10",
                             "--fsync", "data"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        address = proc.stdout.readline().strip()
        host, port = address.rsplit(":", 1)
        assert host == "127.0.0.1"
        assert int(port) > 0
        second = run("serve", "--dir", directory, "--ingest", "orders=10", timeout=30)
        assert second.returncode == 1
        assert "held by another archive service" in second.stderr
        assert str(proc.pid) in second.stderr
        with exon.Node() as node:  # it serves: a durable push
            push = node.socket("push")
            push.link(f"{address}/10", timeout=5)
            push.send(b"via cli", cookie=1, timeout=5)
            assert push.receive(timeout=5) == exon.Cookie(1)
        out = run("truncate", "--archive", address, "orders", "--before", "0")
        assert out.returncode == 0
        assert out.stdout.strip() == "0"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    with Archive(directory) as ar:
        assert list(ar.replay("orders"))[-1].payload == b"via cli"


def test_bad_ingest_option() -> None:
    out = run("serve", "--dir", "/tmp/x", "--ingest", "orders")
    assert out.returncode == 2
    assert "NAME=TAG" in out.stderr


def test_an_ingest_message_size_beyond_a_segment_is_refused(tmp_path) -> None:
    directory = str(tmp_path / "fresh")
    out = run("serve", "--dir", directory, "--ingest", "events=10",
              "--segment-length", "65536", "--max-message-size", "65536", timeout=30)
    assert out.returncode == 1
    assert "max_message_size 65536: recording 'events' takes 1 to" in out.stderr
    with Archive(directory) as ar:
        assert ar.recordings() == []  # refused before anything was created


def test_list_without_the_service_names_damage_an_owner_refuses(tmp_path) -> None:
    """A record that fails its checks with valid records after it: an owner's recovery
    refuses the recording, and `list` without the service says so (it said ok)."""
    from exon.archive.segments import segment_path

    d = str(tmp_path / "arch")
    with Archive(d, owner=True) as ar:
        rid = ar.create_recording("orders", segment_length=SEGMENT).id
        fill(ar, "orders", [b"x" * 900] * 30)
        bad = list(ar.replay("orders"))[10].position
    with open(segment_path(d, rid, 0), "r+b") as f:
        f.seek(bad + 100)
        byte = f.read(1)
        f.seek(bad + 100)
        f.write(bytes([byte[0] ^ 0xFF]))
    out = run("list", "--dir", d, "--json")
    assert out.returncode == 0, out.stderr
    (info,) = [json.loads(line) for line in out.stdout.splitlines()]
    assert info["state"].startswith(f"damaged: {segment_path(d, rid, 0)} at offset {bad}")
    with Archive(d, owner=True) as ar:  # what the note announces
        assert ar.recording("orders").state.startswith("failed: recovery refused")


def test_promote_and_list_members(tmp_path) -> None:
    with ArchiveService(str(tmp_path / "p"), ingest={"orders": 10}) as primary, \
            ArchiveService(str(tmp_path / "r"), replica_of=primary.address) as replica:
        out = run("list", "--archive", f"{primary.address},{replica.address}")
        assert out.returncode == 0, out.stderr
        assert f"member {primary.address}: primary, epoch 1" in out.stdout
        assert f"member {replica.address}: replica, epoch 1, following" in out.stdout
        promoted = run("promote", "--endpoint", replica.address)
        assert promoted.returncode == 0, promoted.stderr
        assert promoted.stdout.strip() == "2"
        again = run("promote", "--endpoint", replica.address)
        assert again.returncode == 1
        assert "primary already" in again.stderr


def test_serve_refuses_a_bad_replica_of(tmp_path) -> None:
    out = run("serve", "--dir", str(tmp_path / "a"), "--replica-of", "no-port")
    assert out.returncode == 1
    assert "replica-of" in out.stderr
