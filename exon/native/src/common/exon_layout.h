/*
 * exon_layout.h: every byte layout exon shares with other processes or with the wire,
 * declared once for C. The Python twin is exon/transport/aeron/layout.py; the test
 * tests/native/test_layout.py asserts that sizes and offsets agree.
 *
 * All fields are little-endian (the machines exon runs on are little-endian; Aeron's
 * wire format is little-endian too). Aeron packs its headers with 4-byte packing, so
 * 64-bit fields can sit at offsets that are multiples of 4 (e.g. SM receiver_id at 28).
 */
#ifndef EXON_LAYOUT_H
#define EXON_LAYOUT_H

#include <stdint.h>
#include <stddef.h>

/* ---------------------------------------------------------------------------------
 * Aeron UDP protocol frames (wire-compatible with Aeron 1.15.1 and later).
 * ------------------------------------------------------------------------------- */

#define EXON_FRAME_VERSION 0
#define EXON_FRAME_ALIGNMENT 32

#define EXON_HDR_TYPE_PAD 0x00
#define EXON_HDR_TYPE_DATA 0x01
#define EXON_HDR_TYPE_NAK 0x02
#define EXON_HDR_TYPE_SM 0x03
#define EXON_HDR_TYPE_ERR 0x04
#define EXON_HDR_TYPE_SETUP 0x05
#define EXON_HDR_TYPE_RTTM 0x06
#define EXON_HDR_TYPE_RES 0x07
#define EXON_HDR_TYPE_EXT 0xFFFF

#define EXON_DATA_FLAG_BEGIN 0x80
#define EXON_DATA_FLAG_END 0x40
#define EXON_DATA_FLAG_EOS 0x20
#define EXON_DATA_FLAG_UNFRAGMENTED (EXON_DATA_FLAG_BEGIN | EXON_DATA_FLAG_END)

#define EXON_SM_FLAG_SEND_SETUP 0x80
#define EXON_SM_FLAG_EOS 0x40
#define EXON_SETUP_FLAG_SEND_RESPONSE 0x80
#define EXON_RTTM_FLAG_REPLY 0x80
#define EXON_ERR_FLAG_HAS_GROUP_TAG 0x08

#define EXON_DATA_HEADER_LENGTH 32
#define EXON_SETUP_LENGTH 40
#define EXON_SM_LENGTH 36
#define EXON_SM_WITH_GROUP_TAG_LENGTH 44
#define EXON_NAK_LENGTH 28
#define EXON_RTTM_LENGTH 40
#define EXON_ERR_HEADER_LENGTH 40
#define EXON_ERR_MAX_TEXT_LENGTH 1023

#define EXON_MAX_UDP_PAYLOAD_LENGTH 65504
#define EXON_MAX_MESSAGE_LENGTH_CAP (16 * 1024 * 1024)

#pragma pack(push, 4)

typedef struct exon_frame_header_stct
{
    int32_t frame_length;
    int8_t version;
    uint8_t flags;
    int16_t type;
}
exon_frame_header_t;

typedef struct exon_data_header_stct
{
    exon_frame_header_t frame_header;
    int32_t term_offset;
    int32_t session_id;
    int32_t stream_id;
    int32_t term_id;
    int64_t reserved_value;
}
exon_data_header_t;

typedef struct exon_setup_header_stct
{
    exon_frame_header_t frame_header;
    int32_t term_offset;
    int32_t session_id;
    int32_t stream_id;
    int32_t initial_term_id;
    int32_t active_term_id;
    int32_t term_length;
    int32_t mtu;
    int32_t ttl;
}
exon_setup_header_t;

typedef struct exon_sm_header_stct
{
    exon_frame_header_t frame_header;
    int32_t session_id;
    int32_t stream_id;
    int32_t consumption_term_id;
    int32_t consumption_term_offset;
    int32_t receiver_window;
    int64_t receiver_id;
}
exon_sm_header_t;

typedef struct exon_nak_header_stct
{
    exon_frame_header_t frame_header;
    int32_t session_id;
    int32_t stream_id;
    int32_t term_id;
    int32_t term_offset;
    int32_t length;
}
exon_nak_header_t;

typedef struct exon_rttm_header_stct
{
    exon_frame_header_t frame_header;
    int32_t session_id;
    int32_t stream_id;
    int64_t echo_timestamp;
    int64_t reception_delta;
    int64_t receiver_id;
}
exon_rttm_header_t;

typedef struct exon_err_header_stct
{
    exon_frame_header_t frame_header;
    int32_t session_id;
    int32_t stream_id;
    int64_t receiver_id;
    int64_t group_tag;
    int32_t error_code;
    int32_t error_length;
}
exon_err_header_t;

#pragma pack(pop)

/* ---------------------------------------------------------------------------------
 * Log buffer: 3 term partitions followed by a 4 KiB metadata block (Aeron's layout).
 * log_length = align(3 * term_length + 4096, page_size); metadata at log_length - 4096.
 * ------------------------------------------------------------------------------- */

#define EXON_LOG_PARTITION_COUNT 3
#define EXON_LOG_META_DATA_LENGTH 4096
#define EXON_TERM_MIN_LENGTH (64 * 1024)
#define EXON_TERM_MAX_LENGTH (1024 * 1024 * 1024)
#define EXON_PAGE_MIN_SIZE (4 * 1024)
#define EXON_PAGE_MAX_SIZE (1024 * 1024 * 1024)

/* exon's own tag for log files: "EXLG" + layout version, in Aeron's padding. */
#define EXON_LOG_MAGIC 0x474C5845
#define EXON_LOG_LAYOUT_VERSION 1
#define EXON_LOG_DOORBELL_CAPACITY 16
/* A doorbell id < 0 in the table names a driver agent rather than a counter. */
#define EXON_DOORBELL_SENDER (-2)

#define EXON_LOG_TYPE_CONCURRENT_PUBLICATION 0
#define EXON_LOG_TYPE_EXCLUSIVE_PUBLICATION 1
#define EXON_LOG_TYPE_IMAGE 2

typedef struct exon_log_metadata_stct
{
    int64_t term_tail_counters[EXON_LOG_PARTITION_COUNT]; /* 0: (term_id << 32) | term_offset */
    int32_t active_term_count;                            /* 24 */
    /* exon: number of readers asleep on this log's doorbells; a writer rings when > 0. */
    int32_t exon_waiters;                                 /* 28 */
    uint8_t pad1[128 - 32];
    int64_t end_of_stream_position;                       /* 128 */
    int32_t is_connected;                                 /* 136 */
    int32_t active_transport_count;                       /* 140 */
    /* exon: log identity and the doorbells of readers to wake after a write. */
    int32_t exon_magic;                                   /* 144 */
    int32_t exon_layout_version;                          /* 148 */
    int32_t exon_doorbell_count;                          /* 152 */
    int32_t exon_doorbell_ids[EXON_LOG_DOORBELL_CAPACITY];/* 156 .. 219 */
    uint8_t pad2[256 - 220];
    int64_t correlation_id;                               /* 256 */
    int32_t initial_term_id;                              /* 264 */
    int32_t default_frame_header_length;                  /* 268 */
    int32_t mtu_length;                                   /* 272 */
    int32_t term_length;                                  /* 276 */
    int32_t page_size;                                    /* 280 */
    int32_t publication_window_length;                    /* 284 */
    int32_t receiver_window_length;                       /* 288 */
    int32_t socket_sndbuf_length;                         /* 292 */
    int32_t os_default_socket_sndbuf_length;              /* 296 */
    int32_t os_max_socket_sndbuf_length;                  /* 300 */
    int32_t socket_rcvbuf_length;                         /* 304 */
    int32_t os_default_socket_rcvbuf_length;              /* 308 */
    int32_t os_max_socket_rcvbuf_length;                  /* 312 */
    int32_t max_resend;                                   /* 316 */
    uint8_t default_header[128];                          /* 320 */
    int64_t entity_tag;                                   /* 448 */
    int64_t response_correlation_id;                      /* 456 */
    int64_t linger_timeout_ns;                            /* 464 */
    int64_t untethered_window_limit_timeout_ns;           /* 472 */
    int64_t untethered_resting_timeout_ns;                /* 480 */
    uint8_t group;                                        /* 488 */
    uint8_t is_response;                                  /* 489 */
    uint8_t rejoin;                                       /* 490 */
    uint8_t reliable;                                     /* 491 */
    uint8_t sparse;                                       /* 492 */
    uint8_t signal_eos;                                   /* 493 */
    uint8_t spies_simulate_connection;                    /* 494 */
    uint8_t tether;                                       /* 495 */
    uint8_t is_publication_revoked;                       /* 496 */
    uint8_t type;                                         /* 497 */
    uint8_t pad3[2];                                      /* 498 */
    int64_t untethered_linger_timeout_ns;                 /* 500 (4-aligned, like Aeron) */
}
__attribute__((packed, aligned(4))) exon_log_metadata_t;

#define EXON_LOG_METADATA_STRUCT_LENGTH 508

/* ---------------------------------------------------------------------------------
 * exon middleware frame (carried as one Aeron message on the node-to-node stream).
 * See docs/protocol.md, "The exon layer".
 * ------------------------------------------------------------------------------- */

#define EXON_PROTOCOL_VERSION 1
#define EXON_PROTO_SOCKETS 0x01
#define EXON_PROTO_SEALED 0x03    /* a sockets frame of an encrypted link, sealed (exon_seal.h) */
#define EXON_PROTO_NODES 0x02

#define EXON_MSG_ERROR 0x01
#define EXON_MSG_DATA 0x02
#define EXON_MSG_LINK 0x03
#define EXON_MSG_LINKACK 0x04
#define EXON_MSG_UNLINK 0x05
#define EXON_MSG_FLOW 0x06

#define EXON_FIXED_HEADER_LENGTH 8
#define EXON_SOCKET_HEADER_LENGTH 20

typedef struct exon_socket_frame_header_stct
{
    uint16_t version;          /* 0 */
    uint8_t protocol;          /* 2 */
    uint8_t type;              /* 3 */
    uint32_t remaining_length; /* 4: bytes after this field */
    uint32_t source_tag;       /* 8 */
    uint32_t destination_tag;  /* 12 */
    uint32_t incarnation;      /* 16: the sender's incarnation of the link (ERROR echoes the answered frame's) */
}
__attribute__((packed)) exon_socket_frame_header_t;

#define EXON_ALIGN(value, alignment) (((value) + ((alignment) - 1)) & ~((alignment) - 1))

#endif /* EXON_LAYOUT_H */
