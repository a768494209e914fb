/* cdef: what the benchmark loops take from the C core: opaque handles (the Python side
   casts the core module's pointers, see exon/native/bench_loops.py) and the error text. */
typedef struct exon_publication_stct exon_publication_t;
typedef struct exon_image_stct exon_image_t;
const char *exon_last_error(void);
int exon_last_error_code(void);
