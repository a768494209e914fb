/*
 * exon_driver_context.h: the media driver's settings (exon_driver_context_t).
 *
 * Filled by exon_driver_context_defaults() and the caller, copied by exon_driver_launch()
 * into the driver and, as a whole, into its conductor (which reads the IPC/UDP settings
 * from its copy). Its own header so that exon_driver.h and exon_driver_conductor.h can both
 * use it without including each other.
 *
 * Thread-safety: a plain value; each copy is read-only once the driver is launched.
 */
#ifndef EXON_DRIVER_CONTEXT_H
#define EXON_DRIVER_CONTEXT_H

#include <stdint.h>

#include "common/exon_common.h"
#include "common/exon_cnc.h"          /* EXON_MAX_PATH_LENGTH */

typedef struct exon_driver_context_stct
{
    char dir[EXON_MAX_PATH_LENGTH];
    int32_t dir_delete_on_start;      /* also remove a stale dir's files (always done) */
    int32_t dir_delete_on_shutdown;
    int32_t threading_mode;           /* EXON_THREADING_* */
    int32_t idle_strategy;            /* EXON_IDLE_* */
    int64_t idle_max_spins;
    int64_t idle_max_yields;
    int64_t idle_min_park_ns;
    int64_t idle_max_park_ns;
    int32_t ipc_term_buffer_length;
    int32_t ipc_mtu_length;
    int32_t term_buffer_length;       /* UDP (issue 3) */
    int32_t mtu_length;               /* UDP (issue 3) */
    int32_t file_page_size;
    int32_t ipc_publication_term_window_length; /* 0 = term length / 2 */
    int32_t to_driver_buffer_length;  /* ring capacity (power of two) */
    int32_t to_clients_buffer_length; /* broadcast capacity (power of two) */
    int32_t counters_values_buffer_length;
    int32_t error_buffer_length;
    int64_t client_liveness_timeout_ns;
    int64_t publication_linger_timeout_ns;
    int64_t publication_unblock_timeout_ns;
    int64_t timer_interval_ns;        /* liveness checks: min(this, liveness / 4, 100 ms) */
    int64_t driver_timeout_ms;        /* written to the CnC: clients' heartbeat staleness limit */
    int64_t publication_connection_timeout_ns; /* UDP: not connected after this without SMs */
    int64_t image_liveness_timeout_ns;        /* UDP: image removed after this without packets */
    int64_t status_message_timeout_ns;        /* UDP: SM at least this often */
    int32_t publication_term_window_length;   /* UDP: 0 = term length / 2 */
    int32_t initial_window_length;            /* UDP: receiver window cap (128 KiB) */
    int32_t socket_rcvbuf_length;             /* 0 = OS default */
    int32_t socket_sndbuf_length;
    double receive_loss_rate;                 /* debug loss on receive (data only) */
    int64_t receive_loss_seed;
    double send_loss_rate;                    /* debug loss on send (data only) */
    int64_t send_loss_seed;
    int64_t nak_delay_ns;                     /* UDP: first NAK after a gap appears */
    int64_t nak_retry_delay_ns;               /* UDP: NAK again while the gap persists */
    int64_t retransmit_delay_ns;              /* UDP: 0 = resend at once */
    int64_t retransmit_linger_ns;             /* UDP: ignore NAKs for a resent range */
    int32_t max_resend;
    int32_t max_image_term_length;            /* UDP: SETUPs with longer terms are refused */
    int64_t heartbeat_interval_ns;
    int64_t setup_interval_ns;
    int32_t max_images_per_endpoint;          /* UDP: images + queued SETUPs per endpoint */
    int32_t max_unverified_images_per_source; /* UDP: per source address */
    int64_t image_idle_eviction_timeout_ns;   /* UDP: a verified image quiet this long may be evicted */
    int64_t nak_retry_max_delay_ns;           /* UDP: a repeated NAK backs off up to this */
    int64_t nak_rate_window_ns;               /* UDP: NAK cap window per image (0 = no cap) */
    int32_t nak_rate_max_per_window;
    int32_t invoker;                          /* 1: INVOKER (see exon_invoker.h), SHARED threading */
    int32_t udp_gso;                          /* 1: publications send equal-length runs as one GSO
                                               * message when the kernel takes UDP_SEGMENT */
    int32_t udp_gro;                          /* 1: receive endpoints ask for UDP_GRO */
    int32_t term_buffer_sparse_file;          /* 1: logs are sparse files, their pages made on
                                               * first touch; 0 (Aeron's default): reserved
                                               * and mapped with their pages at creation */
    int32_t dir_mode;                         /* mode of the driver directory and its
                                               * subdirectories (0: 0700, private); files get
                                               * it without the x bits (0700 -> 0600) */
}
exon_driver_context_t;

#endif /* EXON_DRIVER_CONTEXT_H */
