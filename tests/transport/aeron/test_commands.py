"""ADD_COUNTER / REMOVE_COUNTER (docs/protocol.md 4.3): the codec (Python and C, the same
bytes), the layouts shared through cdef, and the driver's answers to good, malformed and
truncated commands written straight into its to-driver ring."""

from __future__ import annotations

import signal
import struct
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exon import errors
from exon.native import ffi, lib
from exon.transport.aeron import Aeron, MediaDriver
from exon.transport.aeron import commands as cmd
from exon.transport.aeron.cnc import CncFile
from exon.transport.aeron.counters import STATE_ALLOCATED, STATE_RECLAIMED

from .driver_fixtures import SMALL, kill, python_process, read_line, unique_dir, wait_until

# ---- layouts --------------------------------------------------------------------------


def test_fixed_parts_agree_with_the_c_structs() -> None:
    assert ffi.sizeof("exon_counter_command_t") == cmd.COUNTER_COMMAND.size == 24
    assert ffi.offsetof("exon_counter_command_t", "type_id") == 16
    assert ffi.offsetof("exon_counter_command_t", "key_length") == 20
    assert lib.EXON_COUNTER_COMMAND_KEY_OFFSET == cmd.COUNTER_COMMAND_KEY_OFFSET
    assert lib.EXON_COUNTER_COMMAND_MAX_LENGTH == cmd.MAX_COUNTER_COMMAND_LENGTH
    assert ffi.sizeof("exon_remove_command_t") == cmd.REMOVE_COMMAND.size
    assert ffi.sizeof("exon_counter_update_t") == cmd.COUNTER_UPDATE.size == 12
    assert ffi.sizeof("exon_error_response_t") == cmd.ERROR_RESPONSE.size
    assert (lib.EXON_CMD_ADD_COUNTER, lib.EXON_CMD_REMOVE_COUNTER) == (0x09, 0x0A)
    assert (lib.EXON_RSP_ON_COUNTER_READY, lib.EXON_RSP_ON_UNAVAILABLE_COUNTER) == (
        cmd.ON_COUNTER_READY, cmd.ON_UNAVAILABLE_COUNTER) == (0x0F08, 0x0F09)


def test_add_counter_is_aerons_counter_message() -> None:
    # Aeron's CounterMessageFlyweight: key after key_length, label_length at the key
    # rounded up to 4 bytes, the label right after it
    data = cmd.encode_add_counter(cmd.AddCounter(client_id=7, correlation_id=9, type_id=2001,
                                                 key=b"abcde", label=b"exon links"))
    assert data == (struct.pack("<qqii", 7, 9, 2001, 5) + b"abcde\0\0\0"
                    + struct.pack("<i", 10) + b"exon links")
    assert len(data) == cmd.counter_command_length(5, 10) == 24 + 8 + 4 + 10


# ---- codec: Python and C -------------------------------------------------------------


def c_encode(c: cmd.AddCounter) -> bytes:
    buf = ffi.new("uint8_t[]", lib.EXON_COUNTER_COMMAND_MAX_LENGTH)
    n = lib.exon_counter_command_encode(buf, len(buf), c.client_id, c.correlation_id,
                                        c.type_id, c.key, len(c.key), c.label, len(c.label))
    assert n > 0
    return bytes(ffi.buffer(buf, n))


def c_parse(data: bytes) -> cmd.AddCounter | None:
    out = ffi.new("exon_counter_command_fields_t *")
    if lib.exon_counter_command_parse(data, len(data), out) < 0:
        return None
    return cmd.AddCounter(
        client_id=out.client_id, correlation_id=out.correlation_id, type_id=out.type_id,
        key=data[out.key_offset:out.key_offset + out.key_length],
        label=data[out.label_offset:out.label_offset + out.label_length])


def py_parse(data: bytes) -> cmd.AddCounter | None:
    try:
        return cmd.decode_add_counter(data)
    except errors.FrameDecodeError:
        return None


commands = st.builds(
    cmd.AddCounter,
    client_id=st.integers(-(2**63), 2**63 - 1), correlation_id=st.integers(-(2**63), 2**63 - 1),
    type_id=st.integers(-(2**31), 2**31 - 1), key=st.binary(max_size=112),
    label=st.binary(max_size=380))


@given(commands)
@settings(max_examples=300, deadline=None)
def test_round_trip_python_and_c_agree(c: cmd.AddCounter) -> None:
    data = cmd.encode_add_counter(c)
    assert c_encode(c) == data
    assert cmd.decode_add_counter(data) == c
    assert c_parse(data) == c


@given(commands, st.data())
@settings(max_examples=300, deadline=None)
def test_any_damage_decodes_the_same_or_is_refused_by_both(c: cmd.AddCounter,
                                                           data: st.DataObject) -> None:
    raw = bytearray(cmd.encode_add_counter(c))
    how = data.draw(st.sampled_from(["truncate", "extend", "key_length", "label_length"]))
    if how == "truncate":
        raw = raw[:data.draw(st.integers(0, len(raw) - 1))]
    elif how == "extend":
        raw += data.draw(st.binary(min_size=1, max_size=8))
    elif how == "key_length":
        struct.pack_into("<i", raw, 20, data.draw(st.integers(-(2**31), 2**31 - 1)))
    else:
        at = 24 + ((len(c.key) + 3) & ~3)
        struct.pack_into("<i", raw, at, data.draw(st.integers(-(2**31), 2**31 - 1)))
    assert py_parse(bytes(raw)) == c_parse(bytes(raw))


@pytest.mark.parametrize(("raw", "why"), [
    (b"", "shorter than its fixed part"),
    (struct.pack("<qqi", 1, 2, 3), "shorter than its fixed part"),
    (struct.pack("<qqii", 1, 2, 3, 113) + b"\0" * 200, "key_length 113"),
    (struct.pack("<qqii", 1, 2, 3, -1) + b"\0" * 8, "key_length -1"),
    (struct.pack("<qqii", 1, 2, 3, 8) + b"\0" * 8, "ends inside its key"),
    (struct.pack("<qqiii", 1, 2, 3, 0, 381) + b"x" * 381, "label_length 381"),
    (struct.pack("<qqiii", 1, 2, 3, 0, 5) + b"abc", "its key and label make 33"),
    (struct.pack("<qqiii", 1, 2, 3, 0, 1) + b"ab", "its key and label make 29"),
])
def test_malformed_commands_are_refused_naming_the_field(raw: bytes, why: str) -> None:
    with pytest.raises(errors.FrameDecodeError, match=why):
        cmd.decode_add_counter(raw)
    assert c_parse(raw) is None


def test_encoder_refuses_a_key_or_label_too_long() -> None:
    with pytest.raises(errors.ConfigurationError, match="key of 113 bytes"):
        cmd.encode_add_counter(cmd.AddCounter(client_id=0, correlation_id=0, type_id=0,
                                              key=b"k" * 113, label=b""))
    with pytest.raises(errors.ConfigurationError, match="label of 381 bytes"):
        cmd.encode_add_counter(cmd.AddCounter(client_id=0, correlation_id=0, type_id=0,
                                              key=b"", label=b"l" * 381))


# ---- the driver, spoken to through raw ring records -----------------------------------


class RawClient:
    """Writes records into a driver's to-driver ring and reads its to-clients broadcast."""

    def __init__(self, directory: str) -> None:
        self.cnc = CncFile.open(directory)
        self.ring = ffi.new("exon_ring_t *")
        self.rx = ffi.new("exon_broadcast_receiver_t *")
        assert lib.exon_cnc_to_driver_ring(self.cnc.handle, self.ring) == 0
        assert lib.exon_cnc_to_clients_receiver(self.cnc.handle, self.rx) == 0
        self.buf = ffi.new("uint8_t[]", self.rx.max_message_length)
        self.client_id = lib.exon_ring_next_correlation_id(self.ring)

    def next_id(self) -> int:
        return int(lib.exon_ring_next_correlation_id(self.ring))

    def send(self, type_id: int, data: bytes) -> None:
        assert lib.exon_ring_write(self.ring, type_id, data, len(data)) == 0

    def answer(self, correlation_id: int, timeout: float = 5.0) -> tuple[int, bytes]:
        """The first broadcast record whose leading int64 is ``correlation_id``."""
        t, n = ffi.new("int32_t *"), ffi.new("int32_t *")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if lib.exon_broadcast_receive(self.rx, t, self.buf, len(self.buf), n) == 1:
                data = bytes(ffi.buffer(self.buf, n[0]))
                if len(data) >= 8 and struct.unpack_from("<q", data)[0] == correlation_id:
                    return int(t[0]), data
            else:
                time.sleep(0.001)
        raise AssertionError(f"no answer to {correlation_id} within {timeout}s")

    def close(self) -> None:
        self.cnc.close()


@pytest.fixture
def raw(driver: MediaDriver) -> Any:
    client = RawClient(driver.dir)
    yield client
    client.close()


def test_driver_allocates_a_counter_for_add_counter_and_frees_it_on_remove(raw: RawClient) -> None:
    corr = raw.next_id()
    raw.send(cmd.ADD_COUNTER, cmd.encode_add_counter(cmd.AddCounter(
        client_id=raw.client_id, correlation_id=corr, type_id=2000, key=b"\x01\x02",
        label=b"exon links: node abc")))
    kind, data = raw.answer(corr)
    assert kind == cmd.ON_COUNTER_READY
    _, counter_id = cmd.decode_counter_update(data)
    reader = raw.cnc.counters()
    counter = reader.counter(counter_id)
    assert reader.state(counter_id) == STATE_ALLOCATED
    assert (counter.type_id, counter.label, counter.registration_id, counter.owner_id) == (
        2000, "exon links: node abc", corr, raw.client_id)
    assert reader.key(counter_id)[:2] == b"\x01\x02"

    remove = raw.next_id()
    raw.send(cmd.REMOVE_COUNTER, cmd.encode_remove_counter(raw.client_id, remove, corr))
    kind, _ = raw.answer(remove)
    assert kind == cmd.ON_OPERATION_SUCCESS
    kind, data = raw.answer(corr)  # then every client hears that it is gone
    assert (kind, cmd.decode_counter_update(data)) == (cmd.ON_UNAVAILABLE_COUNTER,
                                                       (corr, counter_id))
    assert reader.state(counter_id) == STATE_RECLAIMED
    # a second remove, or another client's, names the counter as unknown
    again = raw.next_id()
    raw.send(cmd.REMOVE_COUNTER, cmd.encode_remove_counter(raw.client_id, again, corr))
    kind, data = raw.answer(again)
    assert kind == cmd.ON_ERROR
    _, code, text = cmd.decode_error_response(data)
    assert (code, text) == (lib.EXON_DRIVER_ERR_UNKNOWN_COUNTER, f"unknown counter {corr}")


def _damaged(client_id: int, corr: int) -> list[bytes]:
    good = cmd.encode_add_counter(cmd.AddCounter(client_id=client_id, correlation_id=corr,
                                                 type_id=2000, key=b"key", label=b"label"))
    bad_key = bytearray(good)
    struct.pack_into("<i", bad_key, 20, 1 << 30)
    bad_label = bytearray(good)
    struct.pack_into("<i", bad_label, 28, -5)
    return [good[:16], good[:27], good[:-1], good + b"\0", bytes(bad_key), bytes(bad_label)]


@pytest.mark.parametrize("which", range(6))
def test_malformed_or_truncated_add_counter_is_an_error_answer(raw: RawClient, which: int) -> None:
    corr = raw.next_id()
    raw.send(cmd.ADD_COUNTER, _damaged(raw.client_id, corr)[which])
    kind, data = raw.answer(corr)
    assert kind == cmd.ON_ERROR
    _, code, text = cmd.decode_error_response(data)
    assert code == lib.EXON_DRIVER_ERR_MALFORMED_COMMAND
    assert "ADD_COUNTER" in text
    # the driver lives on and still serves a good command
    corr = raw.next_id()
    raw.send(cmd.ADD_COUNTER, cmd.encode_add_counter(cmd.AddCounter(
        client_id=raw.client_id, correlation_id=corr, type_id=2000, key=b"", label=b"ok")))
    assert raw.answer(corr)[0] == cmd.ON_COUNTER_READY


def test_truncated_remove_counter_is_logged_not_fatal(raw: RawClient) -> None:
    before = raw.cnc.counters().value(lib.EXON_SYSTEM_COUNTER_ERRORS)
    raw.send(cmd.REMOVE_COUNTER, struct.pack("<qq", raw.client_id, raw.next_id()))
    assert wait_until(
        lambda: raw.cnc.counters().value(lib.EXON_SYSTEM_COUNTER_ERRORS) > before, 5.0)
    assert any("REMOVE_COUNTER of 16 bytes is malformed" in e.text for e in raw.cnc.errors())


def test_no_counter_left_is_an_error_answer(aeron: Aeron) -> None:
    # SMALL: 64 KiB of values = 512 counters, some taken by the driver
    made = []

    def exhaust() -> None:
        for i in range(520):
            made.append(aeron.add_counter(2000, f"c{i}"))

    with pytest.raises(errors.DriverError, match="no counter left"):
        exhaust()
    assert 400 < len(made) < 512
    aeron.check()  # the client is still healthy


# ---- the client API -------------------------------------------------------------------


def test_client_counter_set_is_seen_by_readers_and_freed_on_close(aeron: Aeron) -> None:
    counter = aeron.add_counter(2005, "exon test: node 1", key=b"node-1")
    with CncFile.open(aeron.dir) as cnc:
        reader = cnc.counters()
        assert reader.counter(counter.counter_id).owner_id == aeron.client_id
        counter.set(12345)
        assert reader.value(counter.counter_id) == 12345 == counter.value
        counter.close()
        counter.close()  # idempotent
        assert wait_until(lambda: reader.state(counter.counter_id) == STATE_RECLAIMED, 5.0)
        counter.set(1)  # a closed counter ignores stores
        assert reader.value(counter.counter_id) == 12345
        with pytest.raises(errors.ClosedError):
            _ = counter.value


def test_client_close_frees_its_counters(driver: MediaDriver) -> None:
    with CncFile.open(driver.dir) as cnc:
        reader = cnc.counters()
        aeron = Aeron.connect(driver.dir)
        ids = [aeron.add_counter(2000 + i, f"c{i}").counter_id for i in range(3)]
        assert all(reader.state(i) == STATE_ALLOCATED for i in ids)
        aeron.close()
        assert wait_until(lambda: all(reader.state(i) == STATE_RECLAIMED for i in ids), 5.0)


def test_bad_arguments_are_typed_errors(aeron: Aeron) -> None:
    with pytest.raises(errors.ConfigurationError, match="label of 381 bytes"):
        aeron.add_counter(2000, "x" * 381)
    with pytest.raises(errors.ConfigurationError, match="key of 113 bytes"):
        aeron.add_counter(2000, "x", key=b"k" * 113)
    with pytest.raises(errors.ArgumentTypeError):
        aeron.add_counter("2000", "x")  # type: ignore[arg-type]
    with pytest.raises(errors.ConfigurationError):
        aeron.add_counter(1 << 31, "x")


COUNTING_CLIENT = """
import sys, time
from exon.transport.aeron import Aeron
aeron = Aeron.connect(sys.argv[1], timeout=10)
counter = aeron.add_counter(2001, "exon test: doomed")
counter.set(7)
print(counter.counter_id, flush=True)
time.sleep(60)
"""


def test_counters_of_a_sigkilled_client_are_reclaimed(driver_dir: str) -> None:
    settings_ = dict(SMALL, client_liveness_timeout_ns=500_000_000)
    with MediaDriver.launch(dir=driver_dir, **settings_), CncFile.open(driver_dir) as cnc:
        proc = python_process(COUNTING_CLIENT, driver_dir)
        try:
            counter_id = int(read_line(proc, 20))
            reader = cnc.counters()
            assert reader.state(counter_id) == STATE_ALLOCATED
            assert reader.value(counter_id) == 7
            kill(proc, signal.SIGKILL)
            assert wait_until(lambda: reader.state(counter_id) == STATE_RECLAIMED, 5.0)
        finally:
            kill(proc)


@given(st.binary(min_size=0, max_size=600), st.integers(-(2**31), 2**31 - 1))
@settings(max_examples=150, deadline=None)
def test_any_bytes_as_add_counter_get_an_answer_and_the_driver_lives(
        fuzz_raw: RawClient, tail: bytes, type_id: int) -> None:
    corr = fuzz_raw.next_id()
    data = struct.pack("<qqi", fuzz_raw.client_id, corr, type_id) + tail
    fuzz_raw.send(cmd.ADD_COUNTER, data)
    kind, answer = fuzz_raw.answer(corr)
    if kind == cmd.ON_COUNTER_READY:  # the bytes happened to be a valid command
        assert cmd.decode_add_counter(data).correlation_id == corr
        _, _counter_id = cmd.decode_counter_update(answer)
        remove = fuzz_raw.next_id()
        fuzz_raw.send(cmd.REMOVE_COUNTER, cmd.encode_remove_counter(fuzz_raw.client_id,
                                                                    remove, corr))
        assert fuzz_raw.answer(remove)[0] == cmd.ON_OPERATION_SUCCESS
    else:
        assert kind == cmd.ON_ERROR
        assert cmd.decode_error_response(answer)[1] == lib.EXON_DRIVER_ERR_MALFORMED_COMMAND
        with pytest.raises(errors.FrameDecodeError):
            cmd.decode_add_counter(data)


@pytest.fixture(scope="module")
def fuzz_raw() -> Any:
    """One driver for every example of the fuzz test (hypothesis reuses the fixture)."""
    directory = unique_dir("fz")
    with MediaDriver.launch(dir=directory, dir_delete_on_shutdown=True, **SMALL):
        client = RawClient(directory)
        yield client
        client.close()
