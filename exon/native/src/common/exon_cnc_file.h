/*
 * exon_cnc_file.h: create, open and validate cnc.dat (layout in exon_cnc.h).
 *
 * File: header (1024 bytes) then to-driver ring, to-clients broadcast, counters metadata,
 * counters values and error log, each section starting on a 128-byte boundary at
 * exon_cnc_section_offset(). The driver creates the file, fills the header, stamps the
 * driver heartbeat and stores cnc_version LAST with a release store: a client that sees
 * a non-zero version sees a complete file.
 *
 * The driver heartbeat is the to-driver ring's consumer heartbeat (epoch ms), as in Aeron:
 * the conductor stamps it from its duty cycle; clients treat an old stamp as a dead driver.
 *
 * exon_cnc_t is a process-local handle (pointers into this process's mapping).
 * create/open/close are not thread-safe on the same handle; accessors are.
 */
#ifndef EXON_CNC_FILE_H
#define EXON_CNC_FILE_H

#include <stdint.h>
#include <stdbool.h>

#include "common/exon_common.h"
#include "common/exon_cnc.h"
#include "concurrent/exon_ring.h"
#include "concurrent/exon_broadcast.h"
#include "concurrent/exon_counters.h"
#include "concurrent/exon_error_log.h"

#define EXON_CNC_SECTION_TO_DRIVER 0
#define EXON_CNC_SECTION_TO_CLIENTS 1
#define EXON_CNC_SECTION_COUNTERS_METADATA 2
#define EXON_CNC_SECTION_COUNTERS_VALUES 3
#define EXON_CNC_SECTION_ERROR_LOG 4
#define EXON_CNC_SECTION_COUNT 5

typedef struct exon_cnc_config_stct
{
    int32_t to_driver_capacity;       /* ring capacity, power of two (trailer added) */
    int32_t to_clients_capacity;      /* broadcast capacity, power of two (trailer added) */
    int32_t counters_values_length;   /* multiple of 128; metadata is 4x this */
    int32_t error_log_length;         /* multiple of 64 */
    int64_t client_liveness_timeout_ns;
    int64_t driver_timeout_ms;
    int64_t driver_instance_id;
    int32_t threading_mode;
    int32_t file_page_size;
    int32_t agent_thread_index[EXON_AGENT_COUNT];
    int32_t dir_mode;                 /* 0 -> 0700; cnc.dat gets it without x bits */
}
exon_cnc_config_t;

typedef struct exon_cnc_stct
{
    uint8_t *base;
    int64_t length;
    exon_cnc_header_t *header;
    uint8_t *to_driver_buffer;          /* header->to_driver_buffer_length bytes */
    uint8_t *to_clients_buffer;
    uint8_t *counters_metadata_buffer;
    uint8_t *counters_values_buffer;
    uint8_t *error_log_buffer;
    char path[EXON_MAX_PATH_LENGTH + 16];
}
exon_cnc_t;

/* Fill `config` with Aeron's defaults scaled for exon (1 MiB ring/broadcast, ...). */
void exon_cnc_config_defaults(exon_cnc_config_t *config);

/*
 * Create `dir` (and parents) if needed and a fresh `dir`/cnc.dat (an existing one is
 * unlinked first, so stale mappings of dead processes keep the old inode). Fills the
 * header (pid, start timestamp = now), stamps the driver heartbeat and stores cnc_version
 * last. Returns 0, EXON_E_ARGUMENT (bad sizes) or -errno, with the path in the message.
 */
int exon_cnc_create(exon_cnc_t *cnc, const char *dir, const exon_cnc_config_t *config);

/*
 * Map and validate an existing `dir`/cnc.dat. Returns 0 or:
 *   -ENOENT             no cnc.dat in dir
 *   -EAGAIN             cnc_version still 0 (driver creating the file): retry
 *   EXON_E_CNC_VERSION  made by another version
 *   EXON_E_CNC_CORRUPT  truncated, wrong magic, or section lengths inconsistent
 *   -errno              other system errors
 * Each error's message names the file and what is wrong.
 */
int exon_cnc_open(exon_cnc_t *cnc, const char *dir);
void exon_cnc_close(exon_cnc_t *cnc);

/* Offset of section `section` (EXON_CNC_SECTION_*) given a header; -1 for a bad index. */
int64_t exon_cnc_section_offset(const exon_cnc_header_t *header, int32_t section);
int64_t exon_cnc_section_length(const exon_cnc_header_t *header, int32_t section);
/* Total file length for a header's section lengths. */
int64_t exon_cnc_file_length(const exon_cnc_header_t *header);

/* Attach process-local handles to the file's sections (0 or EXON_E_ARGUMENT). */
int exon_cnc_to_driver_ring(exon_cnc_t *cnc, exon_ring_t *ring);
int exon_cnc_to_clients_transmitter(exon_cnc_t *cnc, exon_broadcast_transmitter_t *tx);
int exon_cnc_to_clients_receiver(exon_cnc_t *cnc, exon_broadcast_receiver_t *rx);
int exon_cnc_counters(exon_cnc_t *cnc, exon_counters_t *counters, int64_t free_to_reuse_timeout_ms);
int exon_cnc_error_log(exon_cnc_t *cnc, exon_error_log_t *log);

/* Driver heartbeat: the to-driver ring's consumer heartbeat (epoch ms). */
int64_t exon_cnc_driver_heartbeat_ms(const exon_cnc_t *cnc);
void exon_cnc_set_driver_heartbeat_ms(exon_cnc_t *cnc, int64_t now_ms);
/* 1 if the heartbeat is within timeout_ms of now_ms, else 0. */
int exon_cnc_driver_is_alive(const exon_cnc_t *cnc, int64_t now_ms, int64_t timeout_ms);

/*
 * 1 if `dir` holds a valid cnc.dat whose heartbeat is within timeout_ms of now_ms (an
 * active driver), 0 if not (no file, stale, or invalid). For the driver's start-up check.
 */
int exon_cnc_is_active(const char *dir, int64_t now_ms, int64_t timeout_ms);

#endif /* EXON_CNC_FILE_H */
