"""Client -> driver commands of the CnC's to-driver ring, in Python; twin of
``exon/native/src/common/exon_cnc.h`` and ``exon_counter_command.h`` (docs/protocol.md 4).

Only the commands a Python caller needs to see as bytes live here: ADD_COUNTER (wire-exact
with Aeron's ``CounterMessageFlyweight``), REMOVE_COUNTER and the ON_COUNTER_READY /
ON_UNAVAILABLE_COUNTER answers. The codecs are pure functions; a decoder raises
:class:`~exon.errors.FrameDecodeError` on anything short, oversized or inconsistent.
``tests/transport/aeron/test_commands.py`` checks the sizes and offsets here against the
C compiler's and runs both parsers on the same bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from exon import errors

from .counters import MAX_KEY_LENGTH, MAX_LABEL_LENGTH

# ---- type ids (Aeron's ControlProtocolEvents numbers) ---------------------------------

ADD_COUNTER: Final = 0x09
REMOVE_COUNTER: Final = 0x0A
ON_ERROR: Final = 0x0F01
ON_OPERATION_SUCCESS: Final = 0x0F04
ON_COUNTER_READY: Final = 0x0F08
ON_UNAVAILABLE_COUNTER: Final = 0x0F09

# ---- layouts --------------------------------------------------------------------------

#: client_id, correlation_id (every command starts with it)
CORRELATED: Final = struct.Struct("<qq")
#: ADD_COUNTER's fixed part: client_id, correlation_id, type_id, key_length
COUNTER_COMMAND: Final = struct.Struct("<qqii")
COUNTER_COMMAND_KEY_OFFSET: Final = COUNTER_COMMAND.size  # 24
#: REMOVE_* : client_id, correlation_id, registration_id
REMOVE_COMMAND: Final = struct.Struct("<qqq")
#: ON_COUNTER_READY / ON_UNAVAILABLE_COUNTER: correlation_id, counter_id
COUNTER_UPDATE: Final = struct.Struct("<qi")
#: ON_ERROR: offending correlation_id, error_code, message length (message follows)
ERROR_RESPONSE: Final = struct.Struct("<qii")
_INT32: Final = struct.Struct("<i")
MAX_COUNTER_COMMAND_LENGTH: Final = (COUNTER_COMMAND_KEY_OFFSET + MAX_KEY_LENGTH + 4
                                     + MAX_LABEL_LENGTH)


def _align4(n: int) -> int:
    return (n + 3) & ~3


@dataclass(frozen=True, slots=True, kw_only=True)
class AddCounter:
    """An ADD_COUNTER command."""

    client_id: int
    """The client that will own the counter."""
    correlation_id: int
    """Answered with this id; also the counter's registration id."""
    type_id: int
    """The counter's type id."""
    key: bytes
    """0..112 bytes that identify the counter to its type's readers."""
    label: bytes
    """0..380 bytes of UTF-8 shown by ``exon stat``."""


def counter_command_length(key_length: int, label_length: int) -> int:
    """Length of an ADD_COUNTER with a key and a label of these lengths."""
    return COUNTER_COMMAND_KEY_OFFSET + _align4(key_length) + 4 + label_length


def encode_add_counter(command: AddCounter) -> bytes:
    """ADD_COUNTER as the ring carries it; ConfigurationError for a key or label too long."""
    key, label = bytes(command.key), bytes(command.label)
    if len(key) > MAX_KEY_LENGTH:
        raise errors.ConfigurationError(
            f"counter key of {len(key)} bytes (0..{MAX_KEY_LENGTH} allowed)")
    if len(label) > MAX_LABEL_LENGTH:
        raise errors.ConfigurationError(
            f"counter label of {len(label)} bytes (0..{MAX_LABEL_LENGTH} allowed)")
    padding = b"\0" * (_align4(len(key)) - len(key))
    return b"".join((
        COUNTER_COMMAND.pack(command.client_id, command.correlation_id, command.type_id,
                             len(key)),
        key, padding, _INT32.pack(len(label)), label))


def decode_add_counter(data: bytes | memoryview) -> AddCounter:
    """Parse one ADD_COUNTER (exactly ``len(data)`` bytes); FrameDecodeError naming the
    field when it is short, a length is out of range, or bytes follow the label."""
    view = memoryview(data)
    if len(view) < COUNTER_COMMAND_KEY_OFFSET + 4:
        raise errors.FrameDecodeError(
            f"ADD_COUNTER of {len(view)} bytes is shorter than its fixed part "
            f"({COUNTER_COMMAND_KEY_OFFSET + 4})")
    client_id, correlation_id, type_id, key_length = COUNTER_COMMAND.unpack_from(view)
    if not 0 <= key_length <= MAX_KEY_LENGTH:
        raise errors.FrameDecodeError(
            f"ADD_COUNTER key_length {key_length} is not in 0..{MAX_KEY_LENGTH}")
    at = COUNTER_COMMAND_KEY_OFFSET + _align4(key_length)
    if at + 4 > len(view):
        raise errors.FrameDecodeError(
            f"ADD_COUNTER of {len(view)} bytes ends inside its key (key_length {key_length})")
    (label_length,) = _INT32.unpack_from(view, at)
    if not 0 <= label_length <= MAX_LABEL_LENGTH:
        raise errors.FrameDecodeError(
            f"ADD_COUNTER label_length {label_length} is not in 0..{MAX_LABEL_LENGTH}")
    if at + 4 + label_length != len(view):
        raise errors.FrameDecodeError(
            f"ADD_COUNTER of {len(view)} bytes, but its key and label make "
            f"{at + 4 + label_length}")
    key = bytes(view[COUNTER_COMMAND_KEY_OFFSET:COUNTER_COMMAND_KEY_OFFSET + key_length])
    return AddCounter(client_id=client_id, correlation_id=correlation_id, type_id=type_id,
                      key=key, label=bytes(view[at + 4:]))


def encode_remove_counter(client_id: int, correlation_id: int, registration_id: int) -> bytes:
    """REMOVE_COUNTER of the counter registered as ``registration_id``."""
    return REMOVE_COMMAND.pack(client_id, correlation_id, registration_id)


def decode_counter_update(data: bytes | memoryview) -> tuple[int, int]:
    """ON_COUNTER_READY / ON_UNAVAILABLE_COUNTER -> (correlation id, counter id)."""
    if len(data) != COUNTER_UPDATE.size:
        raise errors.FrameDecodeError(
            f"counter update of {len(data)} bytes (want {COUNTER_UPDATE.size})")
    correlation_id, counter_id = COUNTER_UPDATE.unpack(data)
    return int(correlation_id), int(counter_id)


def decode_error_response(data: bytes | memoryview) -> tuple[int, int, str]:
    """ON_ERROR -> (offending correlation id, error code, message)."""
    view = memoryview(data)
    if len(view) < ERROR_RESPONSE.size:
        raise errors.FrameDecodeError(f"ON_ERROR of {len(view)} bytes is too short")
    correlation_id, code, n = ERROR_RESPONSE.unpack_from(view)
    if not 0 <= n <= len(view) - ERROR_RESPONSE.size:
        raise errors.FrameDecodeError(f"ON_ERROR message length {n} does not fit")
    text = bytes(view[ERROR_RESPONSE.size:ERROR_RESPONSE.size + n]).decode("utf-8", "replace")
    return int(correlation_id), int(code), text
