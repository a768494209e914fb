/* cdef: UDP channel (exon_udp_channel.h). */
#define EXON_UDP_BATCH_MAX ...
#define EXON_UDP_ADDR_TEXT_MAX ...
#define EXON_UDP_GSO_MAX_SEGMENTS ...
#define EXON_UDP_GSO_MAX_BYTES ...
typedef struct exon_udp_addr_stct { uint8_t storage[128]; uint32_t length; ...; } exon_udp_addr_t;
typedef struct exon_udp_channel_stct
{
    int fd;
    int32_t family;
    exon_udp_addr_t local;
    int32_t so_rcvbuf;
    int32_t so_sndbuf;
    bool gso;
    bool gro;
    int64_t gso_fallbacks;
    ...;
} exon_udp_channel_t;
typedef struct exon_udp_msg_stct
{
    uint8_t *buffer;
    int32_t capacity;
    int32_t length;
    bool truncated;
    int32_t segment_size;
    exon_udp_addr_t addr;
    ...;
} exon_udp_msg_t;
typedef struct exon_udp_segments_stct
{
    int32_t count;
    int32_t segment_size;
    int32_t last_length;
    int32_t dropped;
} exon_udp_segments_t;
int exon_udp_addr_resolve(exon_udp_addr_t *addr, const char *host, int32_t port);
int exon_udp_addr_format(const exon_udp_addr_t *addr, char *buf, size_t buf_length);
int32_t exon_udp_addr_port(const exon_udp_addr_t *addr);
bool exon_udp_addr_equal(const exon_udp_addr_t *a, const exon_udp_addr_t *b);
int exon_udp_channel_open(exon_udp_channel_t *channel, const exon_udp_addr_t *bind_addr, int32_t so_rcvbuf, int32_t so_sndbuf);
int32_t exon_udp_channel_local_port(const exon_udp_channel_t *channel);
void exon_udp_channel_close(exon_udp_channel_t *channel);
int exon_udp_channel_enable_gso(exon_udp_channel_t *channel);
int exon_udp_channel_enable_gro(exon_udp_channel_t *channel);
void exon_udp_msg_split(const exon_udp_msg_t *msg, exon_udp_segments_t *out);
int exon_udp_channel_send(exon_udp_channel_t *channel, const uint8_t *data, int32_t length, const exon_udp_addr_t *to);
int exon_udp_channel_recv_batch(exon_udp_channel_t *channel, exon_udp_msg_t *msgs, int32_t count);
int exon_udp_channel_send_batch(exon_udp_channel_t *channel, exon_udp_msg_t *msgs, int32_t count);
/* exon_udp_multicast.h */
bool exon_udp_addr_is_multicast(const exon_udp_addr_t *addr);
int exon_udp_multicast_control_addr(const exon_udp_addr_t *data, exon_udp_addr_t *control);
int exon_udp_interface_resolve(const char *text, exon_udp_addr_t *out, char *name, size_t name_length);
int exon_udp_channel_open_multicast(exon_udp_channel_t *channel, const exon_udp_addr_t *group,
    const exon_udp_addr_t *iface, int32_t ttl, int32_t so_rcvbuf, int32_t so_sndbuf);
