"""Aeron byte layouts for Python, declared once; twin of ``exon/native/src/common/exon_layout.h``.

``tests/native/test_layout.py`` checks every size and offset here against the C
compiler's view of the packed structs, so the two declarations cannot drift.
All fields are little-endian.
"""

from __future__ import annotations

import struct
from typing import Final

# ---- frame types, flags, sizes ------------------------------------------------------

FRAME_VERSION: Final = 0
FRAME_ALIGNMENT: Final = 32

HDR_TYPE_PAD: Final = 0x00
HDR_TYPE_DATA: Final = 0x01
HDR_TYPE_NAK: Final = 0x02
HDR_TYPE_SM: Final = 0x03
HDR_TYPE_ERR: Final = 0x04
HDR_TYPE_SETUP: Final = 0x05
HDR_TYPE_RTTM: Final = 0x06
HDR_TYPE_RES: Final = 0x07
HDR_TYPE_EXT: Final = 0xFFFF

DATA_FLAG_BEGIN: Final = 0x80
DATA_FLAG_END: Final = 0x40
DATA_FLAG_EOS: Final = 0x20
DATA_FLAG_UNFRAGMENTED: Final = DATA_FLAG_BEGIN | DATA_FLAG_END

SM_FLAG_SEND_SETUP: Final = 0x80
SM_FLAG_EOS: Final = 0x40
SETUP_FLAG_SEND_RESPONSE: Final = 0x80
RTTM_FLAG_REPLY: Final = 0x80
ERR_FLAG_HAS_GROUP_TAG: Final = 0x08

DATA_HEADER_LENGTH: Final = 32
SETUP_LENGTH: Final = 40
SM_LENGTH: Final = 36
SM_WITH_GROUP_TAG_LENGTH: Final = 44
NAK_LENGTH: Final = 28
RTTM_LENGTH: Final = 40
ERR_HEADER_LENGTH: Final = 40
ERR_MAX_TEXT_LENGTH: Final = 1023

MAX_UDP_PAYLOAD_LENGTH: Final = 65504
MAX_MESSAGE_LENGTH_CAP: Final = 16 * 1024 * 1024

# ---- frame structs (field order = wire order) ----------------------------------------

# Every frame starts with the 8-byte common header: frame_length, version, flags, type.
FRAME_HEADER = struct.Struct("<ibBh")
# DATA/PAD: + term_offset, session_id, stream_id, term_id, reserved_value
DATA_HEADER = struct.Struct("<ibBhiiiiq")
# SETUP: + term_offset, session_id, stream_id, initial_term_id, active_term_id, term_length,
#          mtu, ttl
SETUP_HEADER = struct.Struct("<ibBhiiiiiiii")
# SM: + session_id, stream_id, consumption_term_id, consumption_term_offset, receiver_window,
#       receiver_id
SM_HEADER = struct.Struct("<ibBhiiiiiq")
SM_GROUP_TAG = struct.Struct("<q")
# one int32 field read on its own (a frame_length, a term_id...)
INT32_FIELD = struct.Struct("<i")
# NAK: + session_id, stream_id, term_id, term_offset, length
NAK_HEADER = struct.Struct("<ibBhiiiii")
# RTTM: + session_id, stream_id, echo_timestamp, reception_delta, receiver_id
RTTM_HEADER = struct.Struct("<ibBhiiqqq")
# ERR: + session_id, stream_id, receiver_id, group_tag, error_code, error_length
ERR_HEADER = struct.Struct("<ibBhiiqqii")

FRAME_LENGTH_OFFSET: Final = 0
VERSION_OFFSET: Final = 4
FLAGS_OFFSET: Final = 5
TYPE_OFFSET: Final = 6

DATA_TERM_OFFSET_OFFSET: Final = 8
DATA_SESSION_ID_OFFSET: Final = 12
DATA_STREAM_ID_OFFSET: Final = 16
DATA_TERM_ID_OFFSET: Final = 20
DATA_RESERVED_VALUE_OFFSET: Final = 24

SETUP_TERM_OFFSET_OFFSET: Final = 8
SETUP_SESSION_ID_OFFSET: Final = 12
SETUP_STREAM_ID_OFFSET: Final = 16
SETUP_INITIAL_TERM_ID_OFFSET: Final = 20
SETUP_ACTIVE_TERM_ID_OFFSET: Final = 24
SETUP_TERM_LENGTH_OFFSET: Final = 28
SETUP_MTU_OFFSET: Final = 32
SETUP_TTL_OFFSET: Final = 36

SM_SESSION_ID_OFFSET: Final = 8
SM_STREAM_ID_OFFSET: Final = 12
SM_CONSUMPTION_TERM_ID_OFFSET: Final = 16
SM_CONSUMPTION_TERM_OFFSET_OFFSET: Final = 20
SM_RECEIVER_WINDOW_OFFSET: Final = 24
SM_RECEIVER_ID_OFFSET: Final = 28
SM_GROUP_TAG_OFFSET: Final = 36

NAK_SESSION_ID_OFFSET: Final = 8
NAK_STREAM_ID_OFFSET: Final = 12
NAK_TERM_ID_OFFSET: Final = 16
NAK_TERM_OFFSET_OFFSET: Final = 20
NAK_LENGTH_OFFSET: Final = 24

RTTM_SESSION_ID_OFFSET: Final = 8
RTTM_STREAM_ID_OFFSET: Final = 12
RTTM_ECHO_TIMESTAMP_OFFSET: Final = 16
RTTM_RECEPTION_DELTA_OFFSET: Final = 24
RTTM_RECEIVER_ID_OFFSET: Final = 32

ERR_SESSION_ID_OFFSET: Final = 8
ERR_STREAM_ID_OFFSET: Final = 12
ERR_RECEIVER_ID_OFFSET: Final = 16
ERR_GROUP_TAG_OFFSET: Final = 24
ERR_ERROR_CODE_OFFSET: Final = 32
ERR_ERROR_LENGTH_OFFSET: Final = 36

# ---- log buffer -----------------------------------------------------------------------

LOG_PARTITION_COUNT: Final = 3
LOG_META_DATA_LENGTH: Final = 4096
TERM_MIN_LENGTH: Final = 64 * 1024
TERM_MAX_LENGTH: Final = 1024 * 1024 * 1024
PAGE_MIN_SIZE: Final = 4 * 1024
PAGE_MAX_SIZE: Final = 1024 * 1024 * 1024
#: a driver directory path is shorter than this (bytes of UTF-8), so that its longest file
#: path, ``<dir>/publications/<int64>.logbuffer``, fits in the C side's 4096
DRIVER_DIR_MAX_LENGTH: Final = 4000

LOG_MAGIC: Final = 0x474C5845  # "EXLG"
LOG_LAYOUT_VERSION: Final = 1
LOG_DOORBELL_CAPACITY: Final = 16
DOORBELL_SENDER: Final = -2

LOG_TYPE_CONCURRENT_PUBLICATION: Final = 0
LOG_TYPE_EXCLUSIVE_PUBLICATION: Final = 1
LOG_TYPE_IMAGE: Final = 2

LOG_METADATA_STRUCT_LENGTH: Final = 508

LOG_TERM_TAIL_COUNTERS_OFFSET: Final = 0
LOG_ACTIVE_TERM_COUNT_OFFSET: Final = 24
LOG_EXON_WAITERS_OFFSET: Final = 28
LOG_END_OF_STREAM_POSITION_OFFSET: Final = 128
LOG_IS_CONNECTED_OFFSET: Final = 136
LOG_ACTIVE_TRANSPORT_COUNT_OFFSET: Final = 140
LOG_EXON_MAGIC_OFFSET: Final = 144
LOG_EXON_LAYOUT_VERSION_OFFSET: Final = 148
LOG_EXON_DOORBELL_COUNT_OFFSET: Final = 152
LOG_EXON_DOORBELL_IDS_OFFSET: Final = 156
LOG_CORRELATION_ID_OFFSET: Final = 256
LOG_INITIAL_TERM_ID_OFFSET: Final = 264
LOG_DEFAULT_FRAME_HEADER_LENGTH_OFFSET: Final = 268
LOG_MTU_LENGTH_OFFSET: Final = 272
LOG_TERM_LENGTH_OFFSET: Final = 276
LOG_PAGE_SIZE_OFFSET: Final = 280
LOG_PUBLICATION_WINDOW_LENGTH_OFFSET: Final = 284
LOG_RECEIVER_WINDOW_LENGTH_OFFSET: Final = 288
LOG_SOCKET_SNDBUF_LENGTH_OFFSET: Final = 292
LOG_OS_DEFAULT_SOCKET_SNDBUF_LENGTH_OFFSET: Final = 296
LOG_OS_MAX_SOCKET_SNDBUF_LENGTH_OFFSET: Final = 300
LOG_SOCKET_RCVBUF_LENGTH_OFFSET: Final = 304
LOG_OS_DEFAULT_SOCKET_RCVBUF_LENGTH_OFFSET: Final = 308
LOG_OS_MAX_SOCKET_RCVBUF_LENGTH_OFFSET: Final = 312
LOG_MAX_RESEND_OFFSET: Final = 316
LOG_DEFAULT_HEADER_OFFSET: Final = 320
LOG_ENTITY_TAG_OFFSET: Final = 448
LOG_RESPONSE_CORRELATION_ID_OFFSET: Final = 456
LOG_LINGER_TIMEOUT_NS_OFFSET: Final = 464
LOG_UNTETHERED_WINDOW_LIMIT_TIMEOUT_NS_OFFSET: Final = 472
LOG_UNTETHERED_RESTING_TIMEOUT_NS_OFFSET: Final = 480
LOG_GROUP_OFFSET: Final = 488
LOG_IS_RESPONSE_OFFSET: Final = 489
LOG_REJOIN_OFFSET: Final = 490
LOG_RELIABLE_OFFSET: Final = 491
LOG_SPARSE_OFFSET: Final = 492
LOG_SIGNAL_EOS_OFFSET: Final = 493
LOG_SPIES_SIMULATE_CONNECTION_OFFSET: Final = 494
LOG_TETHER_OFFSET: Final = 495
LOG_IS_PUBLICATION_REVOKED_OFFSET: Final = 496
LOG_TYPE_OFFSET: Final = 497
LOG_UNTETHERED_LINGER_TIMEOUT_NS_OFFSET: Final = 500

def align(value: int, alignment: int) -> int:
    """Round ``value`` up to a multiple of ``alignment`` (a power of two)."""
    return (value + alignment - 1) & ~(alignment - 1)


def log_length(term_length: int, page_size: int = PAGE_MIN_SIZE) -> int:
    """Total length of a log file for ``term_length`` terms."""
    return align(LOG_PARTITION_COUNT * term_length + LOG_META_DATA_LENGTH, page_size)


def check_term_length(term_length: int) -> None:
    """Raise ``ValueError`` unless ``term_length`` is a power of two in [64 KiB, 1 GiB]."""
    if not TERM_MIN_LENGTH <= term_length <= TERM_MAX_LENGTH:
        raise ValueError(
            f"term length {term_length} outside [{TERM_MIN_LENGTH}, {TERM_MAX_LENGTH}]"
        )
    if term_length & (term_length - 1):
        raise ValueError(f"term length {term_length} is not a power of two")


def max_message_length(term_length: int) -> int:
    """Largest message a publication with ``term_length`` terms accepts."""
    return min(term_length // 8, MAX_MESSAGE_LENGTH_CAP)
