/* cdef: channel URI parser (exon_uri.h). */
#define EXON_URI_MAX_LENGTH ...
#define EXON_URI_PART_MAX ...
#define EXON_URI_HOST_MAX ...
#define EXON_URI_MEDIA_UDP ...
#define EXON_URI_MEDIA_IPC ...
#define EXON_URI_FC_MIN ...
#define EXON_URI_FC_MAX ...

typedef struct exon_uri_endpoint_stct
{
    bool present;
    bool is_ipv6;
    char host[256];
    int32_t port;
    ...;
} exon_uri_endpoint_t;

typedef struct exon_uri_stct
{
    int32_t media;
    bool spy;
    exon_uri_endpoint_t endpoint;
    exon_uri_endpoint_t control;
    bool has_interface;
    char interface_name[264];
    int32_t mtu;
    int32_t term_length;
    bool has_session_id;
    int32_t session_id;
    int64_t linger_ns;
    int64_t nak_delay_ns;
    bool has_init_term_id;
    int32_t init_term_id;
    bool has_term_id;
    int32_t term_id;
    int32_t term_offset;
    int32_t ttl;
    int64_t so_sndbuf;
    int64_t so_rcvbuf;
    int64_t rcv_wnd;
    int64_t pub_wnd;
    int32_t max_resend;
    bool has_stream_id;
    int32_t stream_id;
    int8_t reliable, sparse, eos, tether, rejoin, group;
    int32_t fc;
    int64_t fc_timeout_ns;
    char error_part[121];
    ...;
} exon_uri_t;

int exon_uri_parse(const char *uri, size_t length, exon_uri_t *out);
