/* cdef: errors and layouts (declarations only; parsed by cffi). */
#define EXON_E_BASE ...
#define EXON_E_GENERIC ...
#define EXON_E_DRIVER_TIMEOUT ...
#define EXON_E_CLIENT_CLOSED ...
#define EXON_E_CNC_VERSION ...
#define EXON_E_CNC_CORRUPT ...
#define EXON_E_LOG_CORRUPT ...
#define EXON_E_MESSAGE_TOO_LARGE ...
#define EXON_E_URI ...
#define EXON_E_DRIVER_ERROR ...
#define EXON_E_TIMEOUT ...
#define EXON_E_ARGUMENT ...
#define EXON_E_STATE ...
#define EXON_E_FULL ...
#define EXON_E_NO_SPACE ...

const char *exon_last_error(void);
int exon_last_error_code(void);
int64_t exon_nano_clock_ns(void);

typedef struct exon_frame_header_stct { int32_t frame_length; int8_t version; uint8_t flags; int16_t type; ...; } exon_frame_header_t;
typedef struct exon_data_header_stct { exon_frame_header_t frame_header; int32_t term_offset; int32_t session_id; int32_t stream_id; int32_t term_id; int64_t reserved_value; ...; } exon_data_header_t;
typedef struct exon_setup_header_stct { exon_frame_header_t frame_header; int32_t term_offset; int32_t session_id; int32_t stream_id; int32_t initial_term_id; int32_t active_term_id; int32_t term_length; int32_t mtu; int32_t ttl; ...; } exon_setup_header_t;
typedef struct exon_sm_header_stct { exon_frame_header_t frame_header; int32_t session_id; int32_t stream_id; int32_t consumption_term_id; int32_t consumption_term_offset; int32_t receiver_window; int64_t receiver_id; ...; } exon_sm_header_t;
typedef struct exon_nak_header_stct { exon_frame_header_t frame_header; int32_t session_id; int32_t stream_id; int32_t term_id; int32_t term_offset; int32_t length; ...; } exon_nak_header_t;
typedef struct exon_rttm_header_stct { exon_frame_header_t frame_header; int32_t session_id; int32_t stream_id; int64_t echo_timestamp; int64_t reception_delta; int64_t receiver_id; ...; } exon_rttm_header_t;
typedef struct exon_err_header_stct { exon_frame_header_t frame_header; int32_t session_id; int32_t stream_id; int64_t receiver_id; int64_t group_tag; int32_t error_code; int32_t error_length; ...; } exon_err_header_t;

typedef struct exon_log_metadata_stct {
    int64_t term_tail_counters[3];
    int32_t active_term_count;
    int32_t exon_waiters;
    int64_t end_of_stream_position;
    int32_t is_connected;
    int32_t active_transport_count;
    int32_t exon_magic;
    int32_t exon_layout_version;
    int32_t exon_doorbell_count;
    int32_t exon_doorbell_ids[16];
    int64_t correlation_id;
    int32_t initial_term_id;
    int32_t default_frame_header_length;
    int32_t mtu_length;
    int32_t term_length;
    int32_t page_size;
    int32_t publication_window_length;
    int32_t receiver_window_length;
    int32_t socket_sndbuf_length;
    int32_t os_default_socket_sndbuf_length;
    int32_t os_max_socket_sndbuf_length;
    int32_t socket_rcvbuf_length;
    int32_t os_default_socket_rcvbuf_length;
    int32_t os_max_socket_rcvbuf_length;
    int32_t max_resend;
    uint8_t default_header[128];
    int64_t entity_tag;
    int64_t response_correlation_id;
    int64_t linger_timeout_ns;
    int64_t untethered_window_limit_timeout_ns;
    int64_t untethered_resting_timeout_ns;
    uint8_t group;
    uint8_t is_response;
    uint8_t rejoin;
    uint8_t reliable;
    uint8_t sparse;
    uint8_t signal_eos;
    uint8_t spies_simulate_connection;
    uint8_t tether;
    uint8_t is_publication_revoked;
    uint8_t type;
    int64_t untethered_linger_timeout_ns;
    ...;
} exon_log_metadata_t;

#define EXON_PROTOCOL_VERSION ...
#define EXON_PROTO_SOCKETS ...
#define EXON_PROTO_NODES ...
#define EXON_MSG_ERROR ...
#define EXON_MSG_DATA ...
#define EXON_MSG_LINK ...
#define EXON_MSG_LINKACK ...
#define EXON_MSG_UNLINK ...
#define EXON_MSG_FLOW ...
#define EXON_FIXED_HEADER_LENGTH ...
#define EXON_SOCKET_HEADER_LENGTH ...
typedef struct exon_socket_frame_header_stct { uint16_t version; uint8_t protocol; uint8_t type; uint32_t remaining_length; uint32_t source_tag; uint32_t destination_tag; uint32_t incarnation; ...; } exon_socket_frame_header_t;
