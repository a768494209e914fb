"""Every decoder that reads bytes from outside the process, as a fuzz target.

One registry for both fuzzers: the hypothesis tests beside this file (short in CI, long
under ``EXON_FUZZ_PROFILE=deep``) and ``tools/fuzz_campaign.py`` (about a million mutated
inputs per target against an ASan/UBSan build of the C core). A target is

- ``seeds()``: valid encodings to mutate (the interesting inputs are near-valid ones);
- ``run(data)``: feed the bytes to the decoder and return normally, or raise one of the
  target's ``expected`` typed errors. Anything else (another exception, a crash, a
  sanitizer report) is a bug. Where a C decoder has a Python twin, ``run`` also checks they
  agree, so a C decoder that accepts too much is caught even without a sanitizer.

The invariant from issue 13: decode, or raise the typed protocol error; never crash, and
never allocate from an attacker's length field (``python_allocates`` says whether the
tests bound the Python allocations of ``run``).
"""

from __future__ import annotations

import atexit
import os
import shutil
import struct
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial
from typing import Any

import msgpack

from exon.archive import codec
from exon.archive import format as AF
from exon.archive.errors import ArchiveCorrupt
from exon.core import frames as XF
from exon.errors import CncError, FrameDecodeError, ProtocolError
from exon.native import ffi, lib
from exon.transport.aeron import frames as F

__all__ = ["TARGETS", "Target", "mutate"]


@dataclass(frozen=True)
class Target:
    name: str
    seeds: Callable[[], list[bytes]]
    run: Callable[[bytes], None]
    expected: tuple[type[BaseException], ...]
    python_allocates: bool = True  #: run() allocates Python objects sized by the input
    #: an authenticated (AEAD) input: every mutation is refused by design, so the mutator
    #: is not expected to reach an accepted input
    authenticated: bool = False


# ---- Aeron frames (exon/transport/aeron/frames.py) and the C datagram check ------------------


def _aeron_seeds() -> list[bytes]:
    return [
        F.encode_data(flags=0xC0, term_offset=64, session_id=7, stream_id=11, term_id=3,
                      payload=b"hello world" * 3),
        F.encode_datagram([
            F.DataFrame(frame_length=32 + 5, flags=0x80, term_offset=0, session_id=1,
                        stream_id=2, term_id=3, reserved_value=0, payload=b"abcde"),
            F.DataFrame(frame_length=32 + 40, flags=0x40, term_offset=64, session_id=1,
                        stream_id=2, term_id=3, reserved_value=0, payload=b"x" * 40)]),
        F.encode_heartbeat(term_offset=128, session_id=1, stream_id=2, term_id=3),
        F.encode_pad(frame_length=512, term_offset=4096, session_id=1, stream_id=2, term_id=3),
        F.encode_setup(term_offset=0, session_id=1, stream_id=2, initial_term_id=3,
                       active_term_id=3, term_length=65536, mtu=1408),
        F.encode_sm(session_id=1, stream_id=2, consumption_term_id=3, consumption_term_offset=64,
                    receiver_window=65536, receiver_id=99, flags=0),
        F.encode_nak(session_id=1, stream_id=2, term_id=3, term_offset=64, length=128),
        F.encode_rttm(session_id=1, stream_id=2, echo_timestamp=123, reception_delta=4,
                      receiver_id=99, flags=0x80),
        F.encode_err(session_id=1, stream_id=2, receiver_id=9, group_tag=0, error_code=1,
                     message=b"no"),
    ]


def _run_aeron_py(data: bytes) -> None:
    F.split_datagram(data)


_INFO: Any = None


def _run_frame_check(data: bytes) -> None:
    """The receiver's C check (exon_frame_check.c) must agree with the Python codec."""
    global _INFO
    if _INFO is None:
        _INFO = ffi.new("exon_datagram_info_t *")
    rc = lib.exon_datagram_check(data, len(data), _INFO)
    try:
        frames: list[F.Frame] | None = F.split_datagram(data)
    except FrameDecodeError:
        frames = None
    if frames is None:
        if rc != lib.EXON_E_ARGUMENT:
            raise AssertionError(f"C accepted what Python refused (rc {rc}): {data.hex()}")
        raise FrameDecodeError("refused by both")
    if rc != 0 or _INFO.frame_count != len(frames):
        raise AssertionError(f"C refused or miscounted (rc {rc}) what Python decoded: {data.hex()}")


# ---- exon frames and link metadata (exon/core/frames.py) --------------------------------------

_META = XF.LinkMetadata(socket_type="req", credits=1024, max_message_size=1 << 20,
                        node_id="n-1", reply_address="127.0.0.1:4000", nonce=b"\x01" * 16,
                        custom={"secret-proof": b"\x02" * 32})


def _exon_seeds() -> list[bytes]:
    frames = [
        XF.Frame(type=XF.FrameType.DATA, source_tag=1, destination_tag=2, incarnation=3,
                 payload=b"payload"),
        XF.Frame(type=XF.FrameType.LINK, source_tag=1, destination_tag=2, incarnation=3,
                 metadata=_META),
        XF.Frame(type=XF.FrameType.LINKACK, source_tag=1, destination_tag=2, incarnation=3,
                 decision=XF.Decision.ACCEPTED, metadata=_META, reason="", answers=5),
        XF.Frame(type=XF.FrameType.UNLINK, source_tag=1, destination_tag=2, incarnation=3,
                 count=9),
        XF.Frame(type=XF.FrameType.FLOW, source_tag=1, destination_tag=2, incarnation=3,
                 delivered=4, limit=8),
        XF.Frame(type=XF.FrameType.ERROR, source_tag=1, destination_tag=2, incarnation=3,
                 error=next(iter(XF.ErrorCode)), reason="why"),
    ]
    return [XF.encode_frame(f) for f in frames]


def _run_exon(data: bytes) -> None:
    XF.decode_frame(data)


def _metadata_seeds() -> list[bytes]:
    plain = _META.to_wire()
    return [msgpack.packb(plain), msgpack.packb({**plain, "custom": {}}),
            msgpack.packb({k: v for k, v in plain.items() if k != "nonce"})]


def _run_metadata(data: bytes) -> None:
    XF.LinkMetadata.from_wire(XF._unpack_map(data))


# ---- CnC records: the file header, the error log, the counters' metadata ----------------------

_CNC_SIZES = {"to_driver_capacity": 64 * 1024, "to_clients_capacity": 64 * 1024,
              "counters_values_length": 64 * 1024, "error_log_length": 64 * 1024}


@cache
def _cnc_template() -> tuple[str, bytes, int]:
    """A real CnC file (with an error record and counters) in a private directory: its
    header and length, and the directory that run() rewrites."""
    from exon.transport.aeron.cnc import CncFile

    directory = tempfile.mkdtemp(prefix="exon-fuzz-cnc-", dir="/dev/shm"
                                 if os.path.isdir("/dev/shm") else None)
    atexit.register(shutil.rmtree, directory, True)  # no file left behind in /dev/shm
    cnc = CncFile.create(directory, **_CNC_SIZES)
    log = ffi.new("exon_error_log_t *")
    lib.exon_cnc_error_log(cnc.handle, log)
    text = b"an error the driver logged"
    lib.exon_error_log_record(log, 1, text, len(text))
    counters = ffi.new("exon_counters_t *")
    lib.exon_cnc_counters(cnc.handle, counters, 0)
    lib.exon_counters_allocate_system(counters, 1)
    cnc.close()
    path = os.path.join(directory, "cnc.dat")
    with open(path, "rb") as f:
        header = f.read(256)
    return directory, header, os.path.getsize(path)


def _cnc_seeds() -> list[bytes]:
    return [_cnc_template()[1]]


_CNC: dict[str, Any] = {}


def _walk_cnc(cnc: Any) -> None:
    """What a client reads after opening: error records and counters."""
    h = cnc.header
    count, first, last = ffi.new("int32_t *"), ffi.new("int64_t *"), ffi.new("int64_t *")
    text_offset, text_length = ffi.new("int32_t *"), ffi.new("int32_t *")
    offset = 0
    for _ in range(10_000):
        offset = lib.exon_error_log_read(cnc.error_log_buffer, h.error_log_buffer_length, offset,
                                         count, first, last, text_offset, text_length)
        if offset <= 0:
            break
        bytes(ffi.buffer(cnc.error_log_buffer + text_offset[0], text_length[0]))
    counters = ffi.new("exon_counters_t *")
    if lib.exon_cnc_counters(cnc, counters, 0) < 0:
        return
    label = ffi.new("char[]", 512)
    key = ffi.new("uint8_t[]", 512)
    counter_id = lib.exon_counters_next_allocated(counters, 0)
    while counter_id >= 0:
        lib.exon_counters_label(counters, counter_id, label, 512)
        lib.exon_counters_key(counters, counter_id, key, 512)
        lib.exon_counters_type_id(counters, counter_id)
        lib.exon_counter_get(counters, counter_id)
        counter_id = lib.exon_counters_next_allocated(counters, counter_id + 1)


def _run_cnc(data: bytes) -> None:
    """``data`` replaces the header of a real CnC file (its last byte, if any beyond 256,
    picks a file length); then open it as a client would, and read what it says."""
    directory, header, size = _cnc_template()
    path = os.path.join(directory, "cnc.dat")
    head, tail = data[:256], data[256:]
    length = size
    if tail:
        length = [size, 0, 64, 255, 256, size // 2, size - 1, size + 4096][tail[0] % 8]
    with open(path, "r+b") as f:
        f.truncate(length)
        f.seek(0)
        f.write(head + header[len(head):] if length >= 256 else (head + header)[:length])
    try:
        handle = ffi.new("exon_cnc_t *")
        rc = lib.exon_cnc_open(handle, directory.encode())
        if rc < 0:
            raise CncError(f"refused: {rc}")
        try:
            _walk_cnc(handle)
        finally:
            lib.exon_cnc_close(handle)
    finally:
        with open(path, "r+b") as f:  # the next input starts from the real file
            f.truncate(size)
            f.seek(0)
            f.write(header)


def _run_error_log(data: bytes) -> None:
    """The error log reader over an arbitrary buffer (a torn or hostile CnC section)."""
    buf = ffi.new("uint8_t[]", max(len(data), 1))
    ffi.memmove(buf, data, len(data))
    count, first, last = ffi.new("int32_t *"), ffi.new("int64_t *"), ffi.new("int64_t *")
    text_offset, text_length = ffi.new("int32_t *"), ffi.new("int32_t *")
    offset = 0
    for _ in range(len(data) // 8 + 2):
        offset = lib.exon_error_log_read(buf, len(data), offset, count, first, last,
                                         text_offset, text_length)
        if offset <= 0:
            return
        if not 0 <= text_offset[0] <= text_offset[0] + text_length[0] <= len(data):
            raise AssertionError(f"error record text outside the buffer: {data.hex()}")
    raise AssertionError("the error log reader did not stop")


def _error_log_seeds() -> list[bytes]:
    buf = ffi.new("uint8_t[]", 4096)
    log = ffi.new("exon_error_log_t *")
    lib.exon_error_log_init(log, buf, 4096)
    for n, text in enumerate((b"first error", b"second, longer error text" * 3)):
        lib.exon_error_log_record(log, 10 + n, text, len(text))
    return [bytes(ffi.buffer(buf, 512))]


_COUNTERS = 8  # counters in a fuzzed metadata buffer


def _counters_seeds() -> list[bytes]:
    meta = ffi.new("uint8_t[]", _COUNTERS * lib.EXON_COUNTER_METADATA_LENGTH)
    values = ffi.new("uint8_t[]", _COUNTERS * lib.EXON_COUNTER_VALUE_LENGTH)
    counters = ffi.new("exon_counters_t *")
    lib.exon_counters_init(counters, meta, len(meta), values, len(values), 0)
    for n in range(3):
        label = b"rcv-pos: 42 11 aeron:udp?endpoint=127.0.0.1:4000 %d" % n
        key = b"k%d" % n
        lib.exon_counters_allocate(counters, 5, key, len(key), label, len(label), n, n, 1)
    return [bytes(ffi.buffer(meta))]


def _run_counters(data: bytes) -> None:
    """A counters metadata section (as a client maps it from a CnC file) of any content:
    ids, states, labels and keys are read within the records."""
    length = len(data) - len(data) % 8
    meta = ffi.new("uint8_t[]", max(length, 8))
    ffi.memmove(meta, data, length)
    values = ffi.new("uint8_t[]", _COUNTERS * lib.EXON_COUNTER_VALUE_LENGTH)
    counters = ffi.new("exon_counters_t *")
    if lib.exon_counters_init(counters, meta, length, values, len(values), 0) < 0:
        raise AssertionError(f"counters refused an 8-aligned buffer: {data.hex()}")
    label = ffi.new("char[]", 512)
    key = ffi.new("uint8_t[]", 512)
    seen = 0
    counter_id = lib.exon_counters_next_allocated(counters, 0)
    while counter_id >= 0:
        n = lib.exon_counters_label(counters, counter_id, label, 512)
        if not 0 <= n <= lib.EXON_COUNTER_MAX_LABEL_LENGTH:
            raise AssertionError(f"label of {n} bytes: {data.hex()}")
        lib.exon_counters_key(counters, counter_id, key, 512)
        lib.exon_counters_type_id(counters, counter_id)
        lib.exon_counters_registration_id(counters, counter_id)
        seen += 1
        if seen > _COUNTERS:
            raise AssertionError("more counters than records")
        counter_id = lib.exon_counters_next_allocated(counters, counter_id + 1)


# ---- archive records (exon/archive/format.py and exon.native._archive) ---------------------


def _archive_seeds() -> list[bytes]:
    keys = [AF.encode_key("q", 1, 2, 3), AF.encode_key("q", 1, 2, 4)]
    return [bytes(AF.encode_batch(0, [b"a" * 10, b"b" * 100], [b"h:1/1", b"h:2/1"], 7)),
            bytes(AF.encode_batch(0, [b"k1", b"k2"], [b"p", b"p"], 9, keys))]


def _run_archive_py(data: bytes) -> None:
    AF.scan_records(data, 0, len(data), 0)
    AF.decode_records(data, 0, len(data), 0)


def _outcome(fn: Callable[[], Any]) -> Any:
    try:
        return ("ok", fn())
    except ArchiveCorrupt as exc:
        return ("corrupt", exc.offset)


def _run_archive_native(data: bytes) -> None:
    """The native batch codec (decode and scan) must agree with the reference decoder."""
    if not codec.NATIVE:
        raise ArchiveCorrupt("the native codec is not built", path="-", offset=0)
    scan = codec.scan_native(data, 0, len(data), 0)
    if scan != codec.scan_py(data, 0, len(data), 0):
        raise AssertionError(f"native scan {scan} differs from the reference: {data.hex()}")
    for limit in (1, 1 << 62):
        walk = codec.walk_native(data, 0, len(data), limit)
        if walk != AF.walk_headers(data, 0, len(data), limit):
            raise AssertionError(f"native walk {walk} differs from the reference: {data.hex()}")
    native = _outcome(lambda: codec.decode_native(data, 0, len(data), 0, 1 << 62, True, "-", {}))
    ref = _outcome(lambda: codec.decode_py(data, 0, len(data), 0, 1 << 62, True, "-", {}))
    if native[0] != ref[0] or (native[0] == "ok" and native[1] != ref[1]):
        raise AssertionError(f"native decode {native[0]} vs reference {ref[0]}: {data.hex()}")
    if native[0] == "corrupt":
        raise ArchiveCorrupt("refused by both", path="-", offset=native[1])


# ---- encrypted links (issue 28): the handshake's messages and sealed frames -------------------

_STATIC = bytes(range(32))
_RESPONDER = bytes(range(32, 64))


def _prologue(cipher: str) -> bytes:
    """The prologue a link's handshake binds: exon's, then the offer byte (the one cipher)."""
    from exon.crypto.policy import CIPHER_BITS, PROLOGUE

    return PROLOGUE + bytes([CIPHER_BITS[cipher]])


def _handshake(initiator: bool, secret: bytes, cipher: str) -> Any:
    from exon.crypto.noise import HandshakeState

    return HandshakeState(initiator=initiator, static_secret=secret, prologue=_prologue(cipher),
                          cipher=cipher,
                          # fixed ephemerals: the same seeds, so the same mutations, each run
                          ephemeral_secret=bytes(range(64 if initiator else 96, 96 if initiator
                                                       else 128)))


def _noise1_seeds() -> list[bytes]:
    return [_handshake(True, _STATIC, "ChaChaPoly").write_message1(p)
            for p in (b"", b"x" * 32, b"y" * 200)]


def _run_noise1(data: bytes) -> None:
    """Message 1 as a responder reads it (from a LINK)."""
    _handshake(False, _RESPONDER, "ChaChaPoly").read_message1(data)


def _noise2_seeds(cipher: str) -> list[bytes]:
    out = []
    for payload in (b"", b"x" * 32, b"y" * 200):
        responder = _handshake(False, _RESPONDER, cipher)
        responder.read_message1(_handshake(True, _STATIC, cipher).write_message1(b""))
        out.append(responder.write_message2(payload))
    return out


def _run_noise2(cipher: str, data: bytes) -> None:
    """Message 2 as the initiator (its message 1 sent, same ephemeral) reads it (from a
    LINKACK), under the cipher the responder chose."""
    initiator = _handshake(True, _STATIC, cipher)
    initiator.write_message1(b"")
    initiator.read_message2(data)


def _seal_pair() -> tuple[Any, Any]:
    from exon.crypto.seal import TransportSeal

    k1, k2 = bytes(range(32)), bytes(range(1, 33))
    return TransportSeal(k1, k2, rekey_shift=2), TransportSeal(k2, k1, rekey_shift=2)


def _sealed_seeds() -> list[bytes]:
    from exon.core.sealing import seal_frame

    sender, _ = _seal_pair()
    return [seal_frame(sender, XF.encode_data(1, 2, 3, b"p" * n)) for n in (0, 1, 64, 300)] + [
        seal_frame(sender, XF.encode_flow(1, 2, 3, 5, 9)),
        seal_frame(sender, XF.encode_unlink(1, 2, 3, 4)),
    ]


def _run_sealed(data: bytes) -> None:
    """Open the bytes as a sealed frame with a fresh receiver; what opens must decode."""
    from exon.core.sealing import open_frame

    _, receiver = _seal_pair()
    plain = open_frame(receiver, data)
    if plain is None:
        raise FrameDecodeError("does not open")  # the core's counted drop
    XF.decode_frame(plain)


TARGETS: dict[str, Target] = {t.name: t for t in (
    Target("noise_message1", _noise1_seeds, _run_noise1, (ProtocolError,)),
    # every byte of message 2 is bound (the ephemeral through the DH, the rest by the AEAD):
    # a mutation of it never reads
    Target("noise_message2", partial(_noise2_seeds, "ChaChaPoly"),
           partial(_run_noise2, "ChaChaPoly"), (ProtocolError,), authenticated=True),
    Target("noise_message2_aesgcm", partial(_noise2_seeds, "AESGCM"),
           partial(_run_noise2, "AESGCM"), (ProtocolError,), authenticated=True),
    Target("sealed_frames", _sealed_seeds, _run_sealed, (FrameDecodeError,),
           authenticated=True),
    Target("aeron_frames", _aeron_seeds, _run_aeron_py, (FrameDecodeError,)),
    Target("aeron_frame_check_c", _aeron_seeds, _run_frame_check, (FrameDecodeError,)),
    Target("exon_frames", _exon_seeds, _run_exon, (FrameDecodeError,)),
    Target("link_metadata", _metadata_seeds, _run_metadata, (FrameDecodeError,)),
    Target("cnc_file", _cnc_seeds, _run_cnc, (CncError,), python_allocates=False),
    Target("cnc_error_log", _error_log_seeds, _run_error_log, (), python_allocates=False),
    Target("cnc_counters", _counters_seeds, _run_counters, (), python_allocates=False),
    Target("archive_records", _archive_seeds, _run_archive_py, (ArchiveCorrupt,)),
    Target("archive_native", _archive_seeds, _run_archive_native, (ArchiveCorrupt,)),
)}


# ---- a fast mutator for the campaign (hypothesis is too slow for 10^6 inputs) -----------------

_INTERESTING = (0, 1, -1, 7, 8, 31, 32, 33, 63, 64, 255, 256, 4096, 65535, 65536,
                (1 << 31) - 1, -(1 << 31), (1 << 30), -32, 1 << 20)


def mutate(rng: Any, seeds: list[bytes], max_length: int = 4096) -> bytes:
    """One input: a seed (or random bytes) with one to four mutations; lengths near and
    past the real ones, int32/int64 fields set to boundary values, splices, truncations."""
    if rng.random() < 0.05:
        return rng.randbytes(rng.randrange(0, 300))
    data = bytearray(rng.choice(seeds))
    for _ in range(rng.randrange(1, 5)):
        op = rng.randrange(9)
        if op == 0 and data:                       # flip a bit
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        elif op == 1 and data:                     # set a byte
            data[rng.randrange(len(data))] = rng.randrange(256)
        elif op == 2:                              # truncate
            del data[rng.randrange(len(data) + 1):]
        elif op == 3:                              # extend with random bytes
            data += rng.randbytes(rng.randrange(1, 64))
        elif op in (4, 5) and len(data) >= 4:      # an int32 field to a boundary value
            i = rng.randrange(0, len(data) - 3) & ~3 if op == 4 else rng.randrange(len(data) - 3)
            value = rng.choice((*_INTERESTING, len(data), len(data) - i, rng.randrange(-99, 99)))
            struct.pack_into("<i", data, i, value)
        elif op == 6 and len(data) >= 8:           # an int64 field
            i = rng.randrange(0, len(data) - 7) & ~7
            struct.pack_into("<q", data, i, rng.choice((0, -1, 1 << 62, -(1 << 63), 1 << 32)))
        elif op == 7:                              # splice another seed in
            other = rng.choice(seeds)
            i = rng.randrange(len(data) + 1)
            data[i:i] = other[rng.randrange(len(other) + 1):]
        elif data:                                 # repeat a chunk
            i = rng.randrange(len(data))
            data[i:i] = data[i:i + rng.randrange(1, 64)]
    return bytes(data[:max_length])
