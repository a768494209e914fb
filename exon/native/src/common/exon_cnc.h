/*
 * exon_cnc.h: the command-and-control file (cnc.dat) and the driver <-> client commands.
 *
 * cnc.dat = header (1 KiB) | to-driver ring | to-clients broadcast | counters metadata |
 *           counters values | error log, each section starting on a 128-byte boundary.
 * The layout follows Aeron's CnC in spirit (same sections, same ring/broadcast/counters
 * formats) but has exon's own magic and version: it is not meant to be opened by Aeron
 * tools, and a file from another version is refused with a message naming the file.
 *
 * Commands travel in the to-driver ring (many clients -> one driver); responses and
 * notifications in the to-clients broadcast (one driver -> all clients). Every command
 * starts with a correlated header; the driver answers with the same correlation id.
 * Python twin: exon/transport/aeron/cnc.py.
 */
#ifndef EXON_CNC_H
#define EXON_CNC_H

#include <stdint.h>

#define EXON_CNC_FILE "cnc.dat"
#define EXON_CNC_MAGIC 0x004C5254434E4F58LL /* "XONCTRL\0" little-endian */
#define EXON_CNC_VERSION 1
#define EXON_CNC_HEADER_LENGTH 1024
#define EXON_CNC_SECTION_ALIGNMENT 128

#define EXON_AGENT_CONDUCTOR 0
#define EXON_AGENT_SENDER 1
#define EXON_AGENT_RECEIVER 2
#define EXON_AGENT_COUNT 3

#define EXON_THREADING_DEDICATED 0
#define EXON_THREADING_SHARED_NETWORK 1
#define EXON_THREADING_SHARED 2

typedef struct exon_cnc_header_stct
{
    int64_t magic;                          /* 0 */
    int32_t cnc_version;                    /* 8: stored last (release) once the file is ready */
    int32_t to_driver_buffer_length;        /* 12: ring capacity + trailer */
    int32_t to_clients_buffer_length;       /* 16: broadcast capacity + trailer */
    int32_t counters_metadata_buffer_length;/* 20 */
    int32_t counters_values_buffer_length;  /* 24 */
    int32_t error_log_buffer_length;        /* 28 */
    int64_t client_liveness_timeout_ns;     /* 32 */
    int64_t start_timestamp_ms;             /* 40 */
    int64_t pid;                            /* 48: the driver's process id */
    int64_t driver_instance_id;             /* 56: random; names the agent doorbells */
    int32_t file_page_size;                 /* 64 */
    int32_t threading_mode;                 /* 68 */
    int32_t agent_thread_index[EXON_AGENT_COUNT]; /* 72: which doorbell wakes each agent */
    int32_t pad0;                           /* 84 */
    int64_t driver_timeout_ms;              /* 88: clients give up after this silence */
    uint8_t pad1[128 - 96];
    /* 128, 192, 256: one "asleep" flag per agent thread, each on its own 64-byte line. */
    struct { int32_t sleeping; uint8_t pad[60]; } agent_state[EXON_AGENT_COUNT];
    /* 320: futex word bumped after every to-clients broadcast while client_waiters > 0. */
    int32_t to_clients_doorbell;            /* 320 */
    int32_t to_clients_waiters;             /* 324 */
    uint8_t pad2[EXON_CNC_HEADER_LENGTH - 328];
}
exon_cnc_header_t;

/* ---- command and response type ids (Aeron's numbers where they exist) ---- */
#define EXON_CMD_ADD_PUBLICATION 0x01
#define EXON_CMD_REMOVE_PUBLICATION 0x02
#define EXON_CMD_ADD_EXCLUSIVE_PUBLICATION 0x03
#define EXON_CMD_ADD_SUBSCRIPTION 0x04
#define EXON_CMD_REMOVE_SUBSCRIPTION 0x05
#define EXON_CMD_CLIENT_KEEPALIVE 0x06
#define EXON_CMD_ADD_COUNTER 0x09
#define EXON_CMD_REMOVE_COUNTER 0x0A
#define EXON_CMD_CLIENT_CLOSE 0x0B
#define EXON_CMD_TERMINATE_DRIVER 0x0E
#define EXON_CMD_CLIENT_CONNECT 0x40 /* exon: announces pid and name */

#define EXON_RSP_ON_ERROR 0x0F01
#define EXON_RSP_ON_AVAILABLE_IMAGE 0x0F02
#define EXON_RSP_ON_PUBLICATION_READY 0x0F03
#define EXON_RSP_ON_OPERATION_SUCCESS 0x0F04
#define EXON_RSP_ON_UNAVAILABLE_IMAGE 0x0F05
#define EXON_RSP_ON_EXCLUSIVE_PUBLICATION_READY 0x0F06
#define EXON_RSP_ON_SUBSCRIPTION_READY 0x0F07
#define EXON_RSP_ON_COUNTER_READY 0x0F08
#define EXON_RSP_ON_UNAVAILABLE_COUNTER 0x0F09
#define EXON_RSP_ON_CLIENT_TIMEOUT 0x0F0A

/* error codes carried by ON_ERROR (Aeron's numbering) */
#define EXON_DRIVER_ERR_GENERIC 0
#define EXON_DRIVER_ERR_INVALID_CHANNEL 1
#define EXON_DRIVER_ERR_UNKNOWN_SUBSCRIPTION 2
#define EXON_DRIVER_ERR_UNKNOWN_PUBLICATION 3
#define EXON_DRIVER_ERR_CHANNEL_ENDPOINT 4
#define EXON_DRIVER_ERR_UNKNOWN_COUNTER 5
#define EXON_DRIVER_ERR_UNKNOWN_COMMAND 6
#define EXON_DRIVER_ERR_MALFORMED_COMMAND 7
#define EXON_DRIVER_ERR_NOT_SUPPORTED 8
#define EXON_DRIVER_ERR_STORAGE_SPACE 11

#define EXON_MAX_CHANNEL_LENGTH 4095
#define EXON_MAX_PATH_LENGTH 4096

#pragma pack(push, 4)

typedef struct exon_correlated_command_stct
{
    int64_t client_id;
    int64_t correlation_id;
}
exon_correlated_command_t;

/* ADD_PUBLICATION / ADD_EXCLUSIVE_PUBLICATION */
typedef struct exon_publication_command_stct
{
    exon_correlated_command_t correlated;
    int32_t stream_id;
    int32_t channel_length;
    /* char channel[channel_length] follows */
}
exon_publication_command_t;

/* REMOVE_PUBLICATION / REMOVE_SUBSCRIPTION / REMOVE_COUNTER */
typedef struct exon_remove_command_stct
{
    exon_correlated_command_t correlated;
    int64_t registration_id;
}
exon_remove_command_t;

/* ADD_SUBSCRIPTION */
typedef struct exon_subscription_command_stct
{
    exon_correlated_command_t correlated;
    int32_t stream_id;
    int32_t doorbell_counter_id; /* -1: the driver allocates one for this subscription */
    int32_t channel_length;
    /* char channel[channel_length] follows */
}
exon_subscription_command_t;

/*
 * ADD_COUNTER, wire-exact with Aeron's CounterMessageFlyweight: this fixed part (24 bytes),
 * then uint8 key[key_length], zero padding to a multiple of 4, int32 label_length and
 * char label[label_length]. Parsed and encoded by exon_counter_command.h.
 */
typedef struct exon_counter_command_stct
{
    exon_correlated_command_t correlated;
    int32_t type_id;
    int32_t key_length;     /* <= EXON_COUNTER_MAX_KEY_LENGTH (112) */
    /* uint8 key[key_length], pad to 4, int32 label_length, char label[label_length] follow */
}
exon_counter_command_t;

/* CLIENT_CONNECT */
typedef struct exon_client_connect_command_stct
{
    exon_correlated_command_t correlated;
    int64_t pid;
    int32_t name_length;
    /* char name[name_length] follows */
}
exon_client_connect_command_t;

/* ---- responses ---- */

typedef struct exon_error_response_stct
{
    int64_t offending_command_correlation_id;
    int32_t error_code;
    int32_t error_message_length;
    /* char message[] follows */
}
exon_error_response_t;

typedef struct exon_operation_succeeded_stct
{
    int64_t correlation_id;
}
exon_operation_succeeded_t;

/* ON_PUBLICATION_READY / ON_EXCLUSIVE_PUBLICATION_READY */
typedef struct exon_publication_ready_stct
{
    int64_t correlation_id;
    int64_t registration_id;
    int32_t session_id;
    int32_t stream_id;
    int32_t position_limit_counter_id;
    int32_t channel_status_counter_id;
    int32_t log_file_length;
    /* char log_file[log_file_length] follows */
}
exon_publication_ready_t;

/* ON_SUBSCRIPTION_READY */
typedef struct exon_subscription_ready_stct
{
    int64_t correlation_id;
    int32_t channel_status_counter_id;
    int32_t doorbell_counter_id;
    int32_t bound_endpoint_length;
    /* char bound_endpoint[] follows: "host:port" actually bound (UDP), "" for IPC */
}
exon_subscription_ready_t;

/* ON_AVAILABLE_IMAGE */
typedef struct exon_image_ready_stct
{
    int64_t correlation_id;               /* the image's registration id */
    int64_t subscription_registration_id;
    int32_t session_id;
    int32_t stream_id;
    int32_t subscriber_position_counter_id;
    int32_t log_file_length;
    /* char log_file[log_file_length], int32 source_identity_length, char source_identity[] */
}
exon_image_ready_t;

/* ON_UNAVAILABLE_IMAGE */
typedef struct exon_image_message_stct
{
    int64_t correlation_id;
    int64_t subscription_registration_id;
    int32_t stream_id;
    int32_t channel_length;
    /* char channel[] follows */
}
exon_image_message_t;

/* ON_COUNTER_READY (correlation id = the ADD_COUNTER's) and ON_UNAVAILABLE_COUNTER
 * (correlation id = the counter's registration id, i.e. its ADD_COUNTER's correlation id) */
typedef struct exon_counter_update_stct
{
    int64_t correlation_id;
    int32_t counter_id;
}
exon_counter_update_t;

/* ON_CLIENT_TIMEOUT */
typedef struct exon_client_timeout_stct
{
    int64_t client_id;
}
exon_client_timeout_t;

#pragma pack(pop)

#endif /* EXON_CNC_H */
