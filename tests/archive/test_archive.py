"""An archive directory without the service: append, replay, recover, truncate, verify."""

from __future__ import annotations

import itertools
import os
import pathlib
import subprocess
import sys
import time
from typing import Any

import pytest

from exon.archive import (
    Archive,
    ArchiveCorrupt,
    ArchiveError,
    ArchiveFull,
    ArchiveLocked,
    RecordingNotFound,
    ReplayRangeError,
)
from exon.archive.segments import segment_bases, segment_path
from tests.archive.conftest import PRODUCER, SEGMENT, fill, random_payloads


def test_round_trip_across_segments(owned: Archive) -> None:
    payloads = random_payloads(600)
    fill(owned, "orders", payloads)
    assert len(segment_bases(owned.directory, 1)) > 10
    got = list(owned.replay("orders"))
    assert [r.payload for r in got] == payloads
    assert all(r.producer == PRODUCER.decode() for r in got)
    # a read-only Archive (no service) sees the same, from any record boundary
    with Archive(owned.directory) as ro:
        assert ro.stop_position("orders") == owned.stop_position("orders")
        mid = got[300].position
        assert [r.payload for r in ro.replay("orders", start=mid)] == payloads[300:]
        assert [r.payload for r in ro.replay("orders", got[10].position, got[20].position)] \
            == payloads[10:20]


def test_boundaries_and_advance(owned: Archive) -> None:
    payloads = random_payloads(333, seed=2, max_size=3000)
    fill(owned, "orders", payloads)
    cuts = owned.boundaries("orders", 0, None, 40)
    assert cuts[0] == 0
    assert cuts[-1] == owned.stop_position("orders")
    sizes = [len(list(owned.replay("orders", a, b))) for a, b in itertools.pairwise(cuts)]
    assert all(0 < s <= 40 for s in sizes)
    assert sum(sizes) == 333
    records = list(owned.replay("orders"))
    assert owned.advance("orders", 0, 7) in (records[7].position, )
    assert owned.advance("orders", records[330].position, 100) == owned.stop_position("orders")


def test_restart_recovers_and_resumes(owned: Archive, tmp_path) -> None:
    fill(owned, "orders", random_payloads(100, seed=3))
    stop = owned.stop_position("orders")
    owned.close()
    with Archive(owned.directory, owner=True) as again:
        assert again.stop_position("orders") == stop
        fill(again, "orders", [b"after"])
        assert list(again.replay("orders"))[-1].payload == b"after"


@pytest.mark.parametrize("damage", ["torn", "garbage", "half-header"])
def test_a_torn_tail_is_cut_on_recovery(owned: Archive, damage: str) -> None:
    payloads = random_payloads(40, seed=4, max_size=1000)
    fill(owned, "orders", payloads)
    stop = owned.stop_position("orders")
    owned.close()
    base = stop - stop % SEGMENT
    path = segment_path(owned.directory, 1, base)
    with open(path, "ab") as f:
        if damage == "torn":  # a whole record written halfway
            from exon.archive.format import encode_batch

            rec = encode_batch(stop, [b"z" * 500], [PRODUCER], 1)
            f.write(rec[:300])
        elif damage == "garbage":
            f.write(os.urandom(200))
        else:
            f.write(b"\x01\x02\x03\x04\x40\x00")
    with Archive(owned.directory, owner=True) as again:
        assert again.stop_position("orders") == stop
        assert os.path.getsize(path) == stop - base
        assert [r.payload for r in again.replay("orders")] == payloads


def test_verify_finds_a_flipped_byte(owned: Archive) -> None:
    payloads = random_payloads(200, seed=5, max_size=2000)
    fill(owned, "orders", payloads)
    records = list(owned.replay("orders"))
    victim = records[150]
    owned.close()
    base = victim.position - victim.position % SEGMENT
    path = segment_path(owned.directory, 1, base)
    with open(path, "r+b") as f:
        f.seek(victim.position - base + 40)
        b = f.read(1)
        f.seek(victim.position - base + 40)
        f.write(bytes([b[0] ^ 0x10]))
    with Archive(owned.directory) as ro:
        [report] = ro.verify()
        assert not report["ok"]
        assert report["records"] == 150
        assert report["bad"]["path"] == path
        assert report["bad"]["offset"] == victim.position - base
        got: list[object] = []
        with pytest.raises(ArchiveCorrupt) as info:
            got.extend(ro.replay("orders"))
        assert info.value.path == path
        assert info.value.offset == victim.position - base
        assert got == records[:150]  # the good records of the bad one's batch too
    cli = subprocess.run([sys.executable, "-m", "exon.cli", "archive", "verify", "--dir",
                          owned.directory], capture_output=True, text=True, timeout=60)
    assert cli.returncode == 1
    assert "BAD after 150 good records" in cli.stdout
    assert path in cli.stdout


def test_truncate_drops_whole_segments(owned: Archive) -> None:
    payloads = random_payloads(400, seed=6)
    fill(owned, "orders", payloads)
    records = list(owned.replay("orders"))
    cut = records[200].position
    start = owned.truncate("orders", before=cut)
    assert start == cut - cut % SEGMENT
    assert min(segment_bases(owned.directory, 1)) == start
    kept = list(owned.replay("orders", start=start))
    assert (kept[-1] == records[-1] and kept[0].position == start) or kept[0].position > start
    assert records.index(kept[0]) <= 200
    with pytest.raises(ReplayRangeError):
        list(owned.replay("orders", start=0))
    with pytest.raises(ReplayRangeError):
        owned.truncate("orders", before=owned.stop_position("orders") + 32)
    owned.close()
    with Archive(owned.directory, owner=True) as again:  # survives a restart
        assert again.recording("orders").start_position == start
        assert list(again.replay("orders", start=start)) == kept


def test_bad_ranges_and_names(owned: Archive) -> None:
    fill(owned, "orders", random_payloads(10, seed=7, max_size=200))
    stop = owned.stop_position("orders")
    with pytest.raises(RecordingNotFound) as info:
        owned.replay("nope").__next__()
    assert info.value.recording == "nope"
    assert "nope" in str(info.value)
    for start, end in ((0, stop + 32), (stop + 32, None), (8, None), (32, None)):
        with pytest.raises(ReplayRangeError):
            next(owned.replay("orders", start, end), None)
    with pytest.raises(ReplayRangeError):
        next(owned.replay("orders", 0, stop, follow=True))
    assert list(owned.replay("orders", stop)) == []


def test_a_second_owner_is_refused(owned: Archive) -> None:
    with pytest.raises(ArchiveLocked, match="held by another archive service"):
        Archive(owned.directory, owner=True)
    owned.close()
    Archive(owned.directory, owner=True).close()  # free again


def test_follow_sees_new_records(owned: Archive) -> None:
    import threading

    fill(owned, "orders", [b"a", b"b"])
    got: list[bytes] = []

    def reader() -> None:
        for rec in owned.replay("orders", follow=True, idle_timeout=5.0):
            got.append(rec.payload)
            if len(got) == 4:
                return

    t = threading.Thread(target=reader)
    t.start()
    time.sleep(0.1)
    fill(owned, "orders", [b"c", b"d"])
    t.join(10)
    assert got == [b"a", b"b", b"c", b"d"]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_full_disk_stops_the_recording_and_keeps_what_is_durable(tmp_path) -> None:
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], check=True)
    try:
        ar = Archive(str(mnt / "arch"), owner=True)
        ar.create_recording("orders", segment_length=SEGMENT)
        written: list[bytes] = []

        def fill() -> None:
            for i in range(1000):
                batch = [bytes([i % 256]) * 900] * 10
                ar.writer("orders").append(batch, [PRODUCER] * 10, 1)
                written.extend(batch)

        with pytest.raises(ArchiveFull, match="stopped at position"):
            fill()
        assert ar.recording("orders").state.startswith("failed")
        with pytest.raises(ArchiveFull):
            ar.writer("orders").append([b"x"], [PRODUCER], 1)
        assert [r.payload for r in ar.replay("orders")] == written
        ar.close()
        with Archive(str(mnt / "arch")) as ro:
            assert [r.payload for r in ro.replay("orders")] == written
            assert ro.verify()[0]["ok"]
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_a_corrupt_catalog_is_named(tmp_path) -> None:
    d = tmp_path / "arch"
    d.mkdir()
    (d / "catalog.json").write_text("{not json")
    with pytest.raises(ArchiveCorrupt, match=r"catalog\.json"):
        Archive(str(d))
    with pytest.raises(ArchiveError, match="no such archive directory"):
        Archive(str(tmp_path / "missing"))


def test_two_threads_appending_to_one_recording_lose_nothing(owned: Archive) -> None:
    """An ingest recording can get keyed ingest too: the recorder thread and the keyed
    thread then append to one writer at once. Each append is whole and in its place."""
    import threading

    writer = owned.writer("orders")
    errors: list[BaseException] = []

    def append(tag: bytes) -> None:
        try:
            for i in range(300):
                writer.append([tag + b"%04d" % i + b"x" * 700] * 3, [PRODUCER] * 3, 1)
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=append, args=(t,)) for t in (b"A", b"B")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    got = [r.payload[:5] for r in owned.replay("orders")]
    # 2 x 300 batches of 3 over 64 KiB segments: many rolls, each batch whole
    assert sorted(got) == sorted(t + b"%04d" % i for t in (b"A", b"B") for i in range(300)
                                 for _ in range(3))
    for tag in (b"A", b"B"):
        assert [p for p in got if p[:1] == tag] == [tag + b"%04d" % i for i in range(300)
                                                    for _ in range(3)]
    assert owned.verify()[0]["ok"]


@pytest.mark.parametrize("policy", ["data", "full"])
def test_a_batch_over_a_segment_end_syncs_both_segments(tmp_path, monkeypatch,
                                                        policy: str) -> None:
    """The cookie of a batch that rolls to a new segment means both files are durable:
    the segment it leaves is synced before its file is closed, not only the last one."""
    ar = Archive(str(tmp_path / "arch"), owner=True, fsync=policy)  # type: ignore[arg-type]
    ar.create_recording("orders", segment_length=SEGMENT)
    synced: list[str] = []
    call = "fdatasync" if policy == "data" else "fsync"
    real = getattr(os, call)

    def spy(fd: int) -> None:
        synced.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        real(fd)

    writer = ar.writer("orders")
    writer.append([b"x" * 1000] * 60, [PRODUCER] * 60, 1)  # most of segment 0
    monkeypatch.setattr(os, call, spy)
    writer.append([b"y" * 1000] * 20, [PRODUCER] * 20, 1)  # rolls to segment 1
    monkeypatch.undo()
    files = sorted(segment_path(ar.directory, ar.recording("orders").id, b)
                   for b in segment_bases(ar.directory, ar.recording("orders").id))
    assert len(files) == 2
    assert sorted(set(synced) & {os.path.basename(f) for f in files}) == \
        sorted(os.path.basename(f) for f in files)
    ar.close()


def test_keyed_dedup_outlives_the_truncation_of_its_records(tmp_path) -> None:
    """The dedup marks of keyed records that truncation deleted are kept in the catalog:
    after a restart a re-sent batch is still dropped, not recorded twice."""
    from exon.archive.format import encode_key

    d = str(tmp_path / "arch")
    ar = Archive(d, owner=True)
    ar.create_recording("sink", segment_length=SEGMENT)
    ar.mark_keyed("sink")
    w = ar.writer("sink")
    for batch in range(2):  # about 3 segments of batch 0 and 1 of query "q"
        keys = [encode_key("q", 0, batch, seq) for seq in range(100)]
        w.append([b"x" * 1000] * 100, [PRODUCER] * 100, 1, keys)
    # then more than a segment of query "q2": the last segment holds only those
    w.append([b"other"] * 80, [PRODUCER] * 80, 1,
             [encode_key("q2", 3, 0, seq) for seq in range(80)])
    w.append([b"o" * 1000] * 80, [PRODUCER] * 80, 1,
             [encode_key("q2", 3, 1, seq) for seq in range(80)])
    ar.truncate("sink", ar.stop_position("sink") - 1)  # all but the last segment
    kept = [r.payload for r in ar.replay("sink", ar.recording("sink").start_position)]
    assert kept
    assert not [p for p in kept if p in (b"x" * 1000, b"other")]  # q's records are gone
    ar.close()
    ar = Archive(d, owner=True)
    w = ar.writer("sink")
    w.append([b"retry"] * 10, [PRODUCER] * 10, 1,
             [encode_key("q", 0, 1, seq) for seq in range(10)])  # batch 1 again
    assert w.duplicates_dropped == 10
    w.append([b"new"], [PRODUCER], 1, [encode_key("q", 0, 2, 0)])
    w.append([b"old"], [PRODUCER], 1, [encode_key("q2", 3, 1, 0)])  # on disk: dropped too
    assert w.duplicates_dropped == 11
    assert [r.payload for r in ar.replay("sink", ar.recording("sink").start_position)] == \
        [*kept, b"new"]
    ar.close()


def test_closing_a_writer_waits_for_the_append_in_progress(owned: Archive) -> None:
    """close() during an append (a slow disk) lets it finish whole, then refuses more;
    it closed the file under the write before, which then failed (or hit another file
    given the same number)."""
    import threading

    writer = owned.writer("orders")
    real_write = writer._write
    entered = threading.Event()

    def slow_write(position: int, data: Any) -> None:
        entered.set()
        time.sleep(0.3)
        real_write(position, data)

    writer._write = slow_write  # type: ignore[method-assign]
    outcome: list[Any] = []

    def append() -> None:
        try:
            outcome.append(writer.append([b"slow"] * 3, [PRODUCER] * 3, 1))
        except Exception as exc:  # reported by the assertions below
            outcome.append(exc)

    t = threading.Thread(target=append)
    t.start()
    assert entered.wait(5)
    writer.close()
    t.join(10)
    assert len(outcome) == 1
    assert isinstance(outcome[0], int), outcome
    with pytest.raises(ArchiveFull, match="closed"):
        writer.append([b"late"], [PRODUCER], 1)
    with Archive(owned.directory) as ro:
        assert [r.payload for r in ro.replay("orders")] == [b"slow"] * 3
def test_a_start_inside_a_record_is_not_a_boundary(owned: Archive) -> None:
    """A payload holding a well-formed record at an aligned position is not a record."""
    from exon.archive.format import encode_record

    fake = bytearray(64)
    encode_record(fake, 0, 64, b"FORGED", b"evil", 0)  # a record at position 64
    payload = (bytes(64 - 32 - len(PRODUCER)) + bytes(fake))[:128 - 32 - len(PRODUCER)]
    owned.writer("orders").append([payload, b"second"], [PRODUCER] * 2, 1)
    assert [r.position for r in owned.replay("orders")] == [0, 128]
    for ar in (owned, Archive(owned.directory)):
        with pytest.raises(ReplayRangeError, match="not a record boundary"):
            list(ar.replay("orders", 64))
        with pytest.raises(ReplayRangeError):
            ar.advance("orders", 64, 1)
        assert [r.payload for r in ar.replay("orders", 128)] == [b"second"]


def test_a_zeroed_header_does_not_end_a_local_replay_early(owned: Archive) -> None:
    fill(owned, "orders", [b"%04d" % i + b"x" * 1000 for i in range(300)], batch=30)
    records = list(owned.replay("orders"))
    stop = owned.stop_position("orders")
    owned.close()
    path = segment_path(owned.directory, 1, SEGMENT)
    with open(path, "r+b") as f:  # the 5th record of segment 1
        f.seek(4 * 1056)
        f.write(bytes(32))
    with Archive(owned.directory) as ro:
        assert ro.stop_position("orders") == stop
        got = []
        with pytest.raises(ArchiveCorrupt) as info:
            got.extend(ro.replay("orders"))
        assert (info.value.path, info.value.offset) == (path, 4 * 1056)
        assert got == [r for r in records if r.position < SEGMENT + 4 * 1056]


def _flip(path: str, at: int) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0x10]))


def _files(directory: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(pathlib.Path(directory).glob("*.rec"))}


@pytest.mark.parametrize("keyed", [False, True])
def test_recovery_refuses_damage_that_valid_records_follow(owned: Archive, keyed: bool) -> None:
    """One flipped byte is not a torn tail: the restart cuts and deletes nothing, the
    recording refuses writes naming the file and offset, and its records before the
    damage still replay (then the replay names the damage)."""
    from exon.archive.format import encode_key

    if keyed:
        owned.mark_keyed("orders")
    w = owned.writer("orders")
    for b in range(40):
        keys = [encode_key("q", 0, b, i) for i in range(10)] if keyed else None
        w.append([b"%05d" % (b * 10 + i) + b"z" * 900 for i in range(10)], [PRODUCER] * 10,
                 1, keys)
    records = list(owned.replay("orders"))
    stop = owned.stop_position("orders")
    owned.close()
    bases = segment_bases(owned.directory, 1)
    assert len(bases) > 3
    # keyed: every segment is scanned for dedup keys, so damage in the first one counts
    base = bases[0] if keyed else bases[-1]
    victims = [r for r in records if r.position >= base]
    victim = victims[2]
    path = segment_path(owned.directory, 1, base)
    _flip(path, victim.position - base + 500)
    before = _files(owned.directory)
    with Archive(owned.directory, owner=True) as again:  # the service restarting: no error
        assert _files(owned.directory) == before  # nothing cut, nothing deleted
        with pytest.raises(ArchiveCorrupt) as info:
            again.writer("orders")
        assert info.value.path == path
        assert info.value.offset == victim.position - base
        assert "orders" in str(info.value)
        assert again.recording("orders").state.startswith("failed: recovery refused")
        assert again.stop_position("orders") == stop
        got = []
        with pytest.raises(ArchiveCorrupt) as info:
            got.extend(again.replay("orders"))
        assert (info.value.path, info.value.offset) == (path, victim.position - base)
        assert got == records[:records.index(victim)]
    with Archive(owned.directory) as ro:
        assert ro.verify()[0]["bad"]["offset"] == victim.position - base


@pytest.mark.parametrize("damage", ["zeroed-header", "short-segment", "missing-segment"])
def test_recovery_refuses_a_hole_before_later_data(owned: Archive, damage: str) -> None:
    fill(owned, "orders", [b"%04d" % i + b"x" * 1000 for i in range(300)], batch=30)
    owned.close()
    bases = segment_bases(owned.directory, 1)
    assert len(bases) >= 4
    path = segment_path(owned.directory, 1, bases[1])
    if damage == "zeroed-header":  # the 5th record of the last segment; the rest is valid
        path = segment_path(owned.directory, 1, bases[-1])
        with open(path, "r+b") as f:
            f.seek(4 * 1056)
            f.write(bytes(32))
        where = (path, 4 * 1056)
    elif damage == "short-segment":  # segment 1 ends early, segments 2.. hold data
        os.truncate(path, 10 * 1056)
        where = (path, 10 * 1056)
    else:  # segment 1 is gone, segments 2.. hold data
        os.unlink(path)
        where = (path, 0)
    before = _files(owned.directory)
    with Archive(owned.directory, owner=True) as again:
        assert _files(owned.directory) == before
        with pytest.raises(ArchiveCorrupt) as info:
            again.writer("orders")
        assert (info.value.path, info.value.offset) == where


@pytest.mark.parametrize("damage", ["zero-page", "short-zero-page"])
def test_a_zeroed_tail_is_cut_on_recovery(owned: Archive, damage: str) -> None:
    """A power cut can leave unsynced pages zero at the end: nothing valid after them."""
    payloads = random_payloads(40, seed=4, max_size=1000)
    fill(owned, "orders", payloads)
    stop = owned.stop_position("orders")
    owned.close()
    path = segment_path(owned.directory, 1, stop - stop % SEGMENT)
    with open(path, "ab") as f:
        f.write(bytes(4096 if damage == "zero-page" else 20))
    with Archive(owned.directory, owner=True) as again:
        assert again.stop_position("orders") == stop
        assert os.path.getsize(path) == stop % SEGMENT
        assert [r.payload for r in again.replay("orders")] == payloads


def test_a_write_torn_at_any_byte_is_cut_to_the_last_whole_record(owned: Archive) -> None:
    """kill -9 stops a write part way: whatever byte the file ends at, recovery keeps the
    whole records before it and cuts the rest, with no error."""
    fill(owned, "orders", [b"a" * 100, b"b" * 300])
    first = owned.stop_position("orders")
    fill(owned, "orders", [b"c" * 200, b"d" * 50, b"e" * 700])
    records = list(owned.replay("orders"))
    owned.close()
    path = segment_path(owned.directory, 1, 0)
    whole = pathlib.Path(path).read_bytes()
    ends = [r.position for r in records[2:]] + [len(whole)]
    for cut in range(first, len(whole) + 1, 7):
        with open(path, "wb") as f:
            f.write(whole[:cut])
        with Archive(owned.directory, owner=True) as again:
            expect = max(e for e in [first, *ends] if e <= cut)
            assert again.stop_position("orders") == expect
            assert os.path.getsize(path) == expect
            assert list(again.replay("orders")) == [r for r in records if r.position < expect]


def test_raw_chunks_keep_to_their_budget(owned: Archive) -> None:
    fill(owned, "orders", [b"p" * 560] * 40 + [b"big" * 1000])  # 608-byte records
    stop = owned.stop_position("orders")
    files = owned.files("orders")
    try:
        for budget in (608, 1000, 1216, 5000):
            position, chunks = 0, []
            while position < stop:
                data, first, position = files.raw(position, stop, budget)
                assert first + len(data) == position
                assert len(data) <= budget or len(data) == 3072  # the big record alone
                chunks.append(data)
            assert b"".join(chunks) == pathlib.Path(
                segment_path(owned.directory, 1, 0)).read_bytes()[:stop]
    finally:
        files.close()


def test_raw_names_the_file_and_offset_of_a_bad_record(owned: Archive) -> None:
    """What the service ships to a remote replay is checked: the good records first, then
    ArchiveCorrupt with the segment's path and the bad record's offset."""
    fill(owned, "orders", [b"p" * 560] * 40)
    records = list(owned.replay("orders"))
    stop = owned.stop_position("orders")
    files = owned.files("orders")
    try:
        path = segment_path(owned.directory, 1, 0)
        _flip(path, records[5].position + 100)
        _, first, position = files.raw(0, stop, 1 << 20)  # the good records before it
        assert (first, position) == (0, records[5].position)
        with pytest.raises(ArchiveCorrupt) as info:
            files.raw(position, stop, 1 << 20)
        assert (info.value.path, info.value.offset) == (path, records[5].position)
        assert "checksum" in str(info.value)
    finally:
        files.close()


def test_a_crash_while_cutting_back_leaves_a_recording_recovery_takes(owned: Archive,
                                                                       monkeypatch) -> None:
    """A failed batch is cut back later segments first, then the cut: a crash between the
    two leaves a torn tail, which recovery cuts; cutting first left a short segment that
    data followed, which recovery refuses as damage."""
    import errno

    writer = owned.writer("orders")
    writer.append([b"a" * 1000] * 40, [PRODUCER] * 40, 1)  # most of segment 0
    real_write = writer._write

    def fail_in_segment_1(position: int, data: Any) -> None:
        if position >= SEGMENT:  # half of the span reaches the disk, then it is full
            real_write(position, memoryview(data)[:len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(position, data)

    def crash(path: Any) -> None:
        raise RuntimeError("the process died here")

    writer._write = fail_in_segment_1  # type: ignore[method-assign]
    monkeypatch.setattr(os, "unlink", crash)
    with pytest.raises(RuntimeError, match="died"):
        writer.append([b"b" * 1000] * 60, [PRODUCER] * 60, 1)  # over into segment 1
    monkeypatch.undo()
    directory = owned.directory
    owned.close()
    with Archive(directory, owner=True) as again:
        again.writer("orders").append([b"c"], [PRODUCER], 1)  # recovery took it
        payloads = [r.payload for r in again.replay("orders")]
    assert payloads[:40] == [b"a" * 1000] * 40
    assert payloads[-1] == b"c"
    assert set(payloads[40:-1]) <= {b"b" * 1000}  # unconfirmed, but whole records


def test_keyed_rows_past_a_gap_wait_for_the_retry(tmp_path) -> None:
    """Rows of a (query, partition) are recorded only in sequence: rows that come past a
    gap (their predecessors' batch was rejected) are dropped, so that the writer's retry of
    the whole batch is recorded from the first missing row and nothing is lost."""
    from exon.archive.format import encode_key

    ar = Archive(str(tmp_path / "arch"), owner=True)
    ar.create_recording("sink", segment_length=SEGMENT)
    ar.mark_keyed("sink")
    w = ar.writer("sink")

    def rows(batch: int, seqs: range) -> None:
        w.append([b"%d-%d" % (batch, s) for s in seqs], [PRODUCER] * len(seqs), 1,
                 [encode_key("q", 0, batch, s) for s in seqs])

    rows(7, range(0, 3))       # recorded: 0..2
    # rows 3..5 were in a batch that could not be written; 6..9 of the same link come next
    rows(7, range(6, 10))
    assert w.gaps_dropped == 4
    rows(7, range(0, 10))      # the retry of the whole batch
    assert w.duplicates_dropped == 3
    rows(8, range(1, 2))       # a later batch must start at seq 0
    assert w.gaps_dropped == 5
    rows(8, range(0, 2))
    assert [r.payload for r in ar.replay("sink")] == \
        [b"7-%d" % s for s in range(10)] + [b"8-0", b"8-1"]
    ar.close()


def test_truncating_a_refused_keyed_recording_keeps_the_dropped_keys(tmp_path) -> None:
    """A keyed recording that recovery refused has no writer; truncating it (what an
    operator does about damage) still keeps the dedup marks of the segments it drops."""
    from exon.archive.format import encode_key

    d = str(tmp_path / "arch")
    with Archive(d, owner=True) as ar:
        rid = ar.create_recording("k", segment_length=SEGMENT).id
        ar.mark_keyed("k")
        w = ar.writer("k")
        for seq in range(40):  # 4 KB records over 3 segments
            w.append([b"x" * 4000], [PRODUCER], 1, [encode_key("q", 0, 1, seq)])
        in_segment_0 = [r for r in ar.replay("k") if r.position < SEGMENT]
        damaged = [r for r in ar.replay("k") if r.position >= SEGMENT][3].position
    with open(segment_path(d, rid, SEGMENT), "r+b") as f:  # damage in segment 1
        f.seek(damaged - SEGMENT + 100)
        byte = f.read(1)
        f.seek(damaged - SEGMENT + 100)
        f.write(bytes([byte[0] ^ 0xFF]))
    with Archive(d, owner=True) as ar:
        assert ar.recording("k").state.startswith("failed: recovery refused")
        assert ar.truncate("k", SEGMENT) == SEGMENT
        assert ar.entry("k").dedup == [["q", 0, 1, len(in_segment_0) - 1]]


def test_a_torn_write_whose_payload_holds_a_record_is_still_a_torn_tail(tmp_path) -> None:
    """A payload may hold anything, a well-formed record for its offset included: when
    kill -9 tears the record carrying it, the bytes after the torn record's start are its
    payload, not valid data that follows, and recovery cuts them (it refused the
    recording as damaged)."""
    from exon.archive.format import encode_pad

    d = str(tmp_path / "arch")
    with Archive(d, owner=True) as ar:
        rid = ar.create_recording("r", segment_length=1 << 20).id
        w = ar.writer("r")
        acked = w.append([b"acked-%d" % i for i in range(10)], [PRODUCER] * 10, 1)
        header_and_producer = 32 + len(PRODUCER)
        inner = acked + 96  # an aligned offset inside the next record's payload
        pad = bytearray(32)
        encode_pad(pad, 0, inner, 32)
        payload = b"\0" * (inner - acked - header_and_producer) + bytes(pad) + b"z" * 8000
        w.append([payload], [PRODUCER], 1)
    os.truncate(segment_path(d, rid, 0), inner + 32 + 1000)  # the write, torn
    with Archive(d) as ro:
        assert ro.stop_position("r") == acked  # the read-only view agrees
    with Archive(d, owner=True) as ar:
        assert ar.recording("r").state == "ok"
        assert ar.stop_position("r") == acked
        ar.writer("r").append([b"next"], [PRODUCER], 1)
        assert [r.payload for r in ar.replay("r")] == \
            [b"acked-%d" % i for i in range(10)] + [b"next"]
