/* cdef: native IPC benchmark loop (exon_bench_ipc.h). */
typedef struct exon_bench_result_stct {
    int64_t messages;
    int64_t bytes;
    int64_t elapsed_ns;
    int64_t back_pressured;
    double messages_per_second;
    ...;
} exon_bench_result_t;
#define EXON_BENCH_DRIVER_MANAGED ...
int exon_bench_ipc_throughput(exon_publication_t *pub, exon_image_t *img, int32_t msg_len, int64_t duration_ns, int32_t window, exon_bench_result_t *result);
