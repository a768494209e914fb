/* cdef: what the benchmark loops take from the C core: opaque handles (the Python side
   casts the core module's pointers, see exon/native/bench_loops.py) and the core's
   functions, bound once by address (exon_bench_core.h). */
typedef struct exon_publication_stct exon_publication_t;
typedef struct exon_image_stct exon_image_t;
void exon_bench_bind(uintptr_t publication_offer, uintptr_t image_poll, uintptr_t image_poll_count,
    uintptr_t log_clean_to, uintptr_t set_error);
