/* cdef: native transport benchmark loops over a driver (exon_bench_net.h). */
int exon_bench_net_throughput(exon_publication_t *pub, exon_image_t *img, int32_t msg_len, int64_t duration_ns, exon_bench_result_t *result);
int64_t exon_bench_net_pingpong(exon_publication_t *ping_pub, exon_image_t *ping_img, exon_publication_t *pong_pub, exon_image_t *pong_img, int32_t msg_len, int64_t count, int64_t timeout_ns, int64_t *rtt_ns);
int64_t exon_bench_udp_floor(int32_t msg_len, int64_t count, int64_t timeout_ns, int64_t *rtt_ns);
