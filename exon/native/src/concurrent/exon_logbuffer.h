/*
 * exon_logbuffer.h: Aeron log buffer files (3 term partitions + 4 KiB metadata) in shared
 * memory: create, open (validated), close, clean, and the position arithmetic.
 *
 * Layout: exon_layout.h (exon_log_metadata_t). A log file is
 *   [term 0][term 1][term 2] ... [metadata, last 4 KiB of the file]
 * with file length = align(3 * term_length + 4096, page_size).
 *
 * Thread safety: exon_log_create/open/close act on the caller's exon_log_t and are not
 * thread-safe for the same exon_log_t. Many processes may map the same file. The inline
 * arithmetic helpers are pure. exon_log_clean_to is called by ONE cleaner (the driver,
 * or a test emulating it) per log.
 */
#ifndef EXON_LOGBUFFER_H
#define EXON_LOGBUFFER_H

#include <stdint.h>
#include <stddef.h>

#include "common/exon_common.h"
#include "common/exon_layout.h"

#define EXON_LOG_PATH_MAX 4096
/* A driver directory path is shorter than this (bytes): its longest file name,
 * "/publications/<int64>.logbuffer", still fits in EXON_LOG_PATH_MAX with room to spare. */
#define EXON_DRIVER_DIR_MAX_LENGTH 4000

/* A mapped log buffer. Owned by whoever called create/open; close unmaps. */
typedef struct exon_log_stct
{
    uint8_t *addr;                     /* start of the mapping (term 0) */
    int64_t length;                    /* mapping / file length in bytes */
    uint8_t *terms[EXON_LOG_PARTITION_COUNT];
    exon_log_metadata_t *meta;         /* addr + length - 4096 */
    int32_t term_length;
    int32_t position_bits_to_shift;    /* log2(term_length) */
    int32_t initial_term_id;
    int32_t mtu;
    int32_t page_size;
    int32_t session_id;                /* from the default header */
    int32_t stream_id;                 /* from the default header */
    int32_t max_message_length;        /* min(term_length / 8, 16 MiB) */
    int64_t correlation_id;
    char path[EXON_LOG_PATH_MAX];
}
exon_log_t;

/* Parameters of a new log file. Zero fields take the defaults noted. */
typedef struct exon_log_params_stct
{
    int32_t term_length;               /* required: power of two, 64 KiB .. 1 GiB */
    int32_t mtu;                       /* required: multiple of 32, 64 .. 65504 (<= term_length) */
    int32_t page_size;                 /* 0 -> 4096; power of two 4 KiB .. 1 GiB */
    int32_t initial_term_id;
    int32_t session_id;
    int32_t stream_id;
    int64_t correlation_id;
    int32_t publication_window_length; /* 0 -> term_length / 2 */
    int32_t receiver_window_length;    /* 0 -> 128 KiB capped at term_length / 2 */
    int32_t type;                      /* EXON_LOG_TYPE_* */
    int32_t is_connected;              /* initial value of meta->is_connected */
    int32_t sparse;                    /* 1: do not pre-touch pages */
    int32_t file_mode;                 /* 0 -> 0600 (private to the driver's user) */
}
exon_log_params_t;

/*
 * Create `path` (O_EXCL; fails with -EEXIST if it exists), size it, map it shared and
 * initialise the metadata like Aeron: tail of partition 0 = initial_term_id << 32, tail of
 * partition i (1, 2) = (initial_term_id + i - 3) << 32, active_term_count 0,
 * end_of_stream_position INT64_MAX, default header (flags 0xC0, DATA, session, stream,
 * initial term id). exon_magic is stored LAST with release semantics so a reader that sees
 * the magic sees a fully initialised log. On error nothing is left behind.
 */
int exon_log_create(exon_log_t *log, const char *path, const exon_log_params_t *params);

/*
 * Map an existing log file and validate it: file length vs term length and page size,
 * magic, layout version, term length power of two in [64 KiB, 1 GiB], page size, MTU.
 * Refuses with EXON_E_LOG_CORRUPT and a message naming the file and the bad field.
 */
int exon_log_open(exon_log_t *log, const char *path);

/* Unmap (idempotent; the file stays). */
int exon_log_close(exon_log_t *log);

/* Remove a log file by path: 0, or -errno (ENOENT included). */
int exon_log_unlink(const char *path);

/*
 * The path of a log file in a driver directory, "<dir>/<folder>/<id>.logbuffer", into
 * path[length]: its length, or EXON_E_ARGUMENT (error text set) when it would not fit
 * (never a path cut short).
 */
int exon_log_path_format(char *path, size_t length, const char *dir, const char *folder, int64_t id);

/*
 * Zero the log from *clean_position (but never from further back than position -
 * term_length) up to `position` (exclusive), term by term, and advance *clean_position. The first 8 bytes of each cleaned chunk are zeroed last with release
 * semantics. The driver calls this with position = min subscriber position - term_length
 * (Aeron's rule) before raising a publication limit; a publication must never reach a
 * term region that was not cleaned. Returns the number of bytes cleaned.
 */
int64_t exon_log_clean_to(exon_log_t *log, int64_t *clean_position, int64_t position);

/* Publisher position implied by the active partition's tail (clamped to the term). */
int64_t exon_log_producer_position(const exon_log_t *log);

/* Set end_of_stream_position (release); readers at or past it are at end of stream. */
void exon_log_set_end_of_stream(exon_log_t *log, int64_t position);

/* ---- position arithmetic (Aeron's), pure ---- */

static inline int64_t exon_log_pack_tail(int32_t term_id, int32_t term_offset)
{
    return (int64_t)(((uint64_t)(uint32_t)term_id << 32) | (uint64_t)(uint32_t)term_offset);
}

static inline int32_t exon_log_tail_term_id(int64_t raw_tail)
{
    return (int32_t)(raw_tail >> 32);
}

/* Offset part of a raw tail, clamped to term_length (a claim may overshoot the end). */
static inline int32_t exon_log_tail_term_offset(int64_t raw_tail, int32_t term_length)
{
    int64_t offset = raw_tail & 0xFFFFFFFFLL;
    return offset < term_length ? (int32_t)offset : term_length;
}

static inline int32_t exon_log_bits_to_shift(int32_t term_length)
{
    return __builtin_ctz((uint32_t)term_length);
}

static inline int64_t exon_log_compute_position(
    int32_t term_id, int32_t term_offset, int32_t bits_to_shift, int32_t initial_term_id)
{
    int64_t term_count = (int32_t)((uint32_t)term_id - (uint32_t)initial_term_id);
    return (term_count << bits_to_shift) + term_offset;
}

static inline int32_t exon_log_term_id_by_position(
    int64_t position, int32_t bits_to_shift, int32_t initial_term_id)
{
    return (int32_t)((uint32_t)(position >> bits_to_shift) + (uint32_t)initial_term_id);
}

static inline int32_t exon_log_term_offset_by_position(int64_t position, int32_t term_length)
{
    return (int32_t)(position & (term_length - 1));
}

static inline int32_t exon_log_index_by_position(int64_t position, int32_t bits_to_shift)
{
    return (int32_t)((position >> bits_to_shift) % EXON_LOG_PARTITION_COUNT);
}

static inline int32_t exon_log_index_by_term_count(int64_t term_count)
{
    return (int32_t)(term_count % EXON_LOG_PARTITION_COUNT);
}

static inline int64_t exon_log_max_possible_position(int32_t term_length)
{
    return (int64_t)term_length << 31;
}

static inline int32_t exon_log_compute_max_message_length(int32_t term_length)
{
    int32_t by_term = term_length / 8;
    return by_term < EXON_MAX_MESSAGE_LENGTH_CAP ? by_term : EXON_MAX_MESSAGE_LENGTH_CAP;
}

#endif /* EXON_LOGBUFFER_H */
