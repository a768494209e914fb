/*
 * exon_counters.h: counters in shared memory (Aeron's CountersManager / CountersReader).
 *
 * Two buffers in cnc.dat:
 *   metadata: one 512-byte record per counter id
 *     +0   int32 state (UNUSED 0, ALLOCATED 1, RECLAIMED -1; release-stored last)
 *     +4   int32 type id
 *     +8   int64 free-for-reuse deadline (epoch ms; INT64_MAX while allocated)
 *     +16  key, 112 bytes
 *     +128 int32 label length
 *     +132 label, 380 bytes (not NUL-terminated)
 *   values: one 128-byte record per counter id
 *     +0   int64 value (a DOORBELL counter uses the low 32 bits at +0 as its futex word)
 *     +8   int64 registration id
 *     +16  int64 owner id (client id of the owner; EXON_COUNTER_OWNER_DRIVER for the driver)
 *     +24  int64 reference id
 * Counter capacity = min(values_length / 128, metadata_length / 512).
 *
 * System counters occupy ids 0..EXON_SYSTEM_COUNTER_COUNT-1 in the order below
 * (exon_counters_allocate_system). Python twin: exon/transport/aeron/counters.py.
 *
 * Thread safety: allocate/free/free_by_owner/allocate_system are for ONE thread (the
 * driver conductor). get/set/add/propose_max and the reader functions are safe from any
 * thread or process at any time. exon_counters_t is a process-local handle.
 */
#ifndef EXON_COUNTERS_H
#define EXON_COUNTERS_H

#include <stdint.h>
#include <stdbool.h>

#include "common/exon_common.h"

#define EXON_COUNTER_METADATA_LENGTH 512
#define EXON_COUNTER_VALUE_LENGTH 128
#define EXON_COUNTER_MAX_KEY_LENGTH 112
#define EXON_COUNTER_MAX_LABEL_LENGTH 380
#define EXON_COUNTER_TYPE_ID_OFFSET 4
#define EXON_COUNTER_FREE_FOR_REUSE_DEADLINE_OFFSET 8
#define EXON_COUNTER_KEY_OFFSET 16
#define EXON_COUNTER_LABEL_LENGTH_OFFSET 128
#define EXON_COUNTER_LABEL_OFFSET 132
#define EXON_COUNTER_REGISTRATION_ID_OFFSET 8
#define EXON_COUNTER_OWNER_ID_OFFSET 16
#define EXON_COUNTER_REFERENCE_ID_OFFSET 24

#define EXON_COUNTER_STATE_UNUSED 0
#define EXON_COUNTER_STATE_ALLOCATED 1
#define EXON_COUNTER_STATE_RECLAIMED (-1)
#define EXON_COUNTER_NOT_FREE_TO_REUSE INT64_MAX
#define EXON_COUNTER_OWNER_DRIVER (-1) /* as Aeron: never a client id (the first client gets 0) */
#define EXON_COUNTER_DEFAULT_REGISTRATION_ID 0

/* ---- type ids (Aeron's numbers; DOORBELL is exon's) ---- */
#define EXON_COUNTER_TYPE_SYSTEM 0
#define EXON_COUNTER_TYPE_PUBLISHER_LIMIT 1        /* pub-lmt */
#define EXON_COUNTER_TYPE_SENDER_POSITION 2        /* snd-pos */
#define EXON_COUNTER_TYPE_RECEIVER_HWM 3           /* rcv-hwm */
#define EXON_COUNTER_TYPE_SUBSCRIBER_POSITION 4    /* sub-pos */
#define EXON_COUNTER_TYPE_RECEIVER_POSITION 5      /* rcv-pos */
#define EXON_COUNTER_TYPE_SEND_CHANNEL_STATUS 6
#define EXON_COUNTER_TYPE_RECEIVE_CHANNEL_STATUS 7
#define EXON_COUNTER_TYPE_SENDER_LIMIT 9           /* snd-lmt */
#define EXON_COUNTER_TYPE_CLIENT_HEARTBEAT 11      /* value: client's last keepalive, epoch ms */
#define EXON_COUNTER_TYPE_PUBLISHER_POSITION 12    /* pub-pos */
#define EXON_COUNTER_TYPE_SENDER_BPE 13            /* snd-bpe: back-pressure events */
#define EXON_COUNTER_TYPE_DOORBELL 100             /* exon: futex word of a reader doorbell */
#define EXON_COUNTER_TYPE_RECEIVER_RTT 101         /* exon: rcv-rtt, the last RTT an image measured (ns) */
#define EXON_COUNTER_TYPE_RECEIVER_HEARD 102       /* exon: rcv-heard, when an image last heard its
                                                    * source (epoch ms, 10 ms steps) */
/* exon: counters a node allocates with ADD_COUNTER, one per statistic (the driver gives
 * them no meaning; the ids are listed in exon/transport/aeron/counters.py NodeCounter) */
#define EXON_COUNTER_TYPE_NODE_FIRST 2000
#define EXON_COUNTER_TYPE_NODE_LAST 2099

/* ---- system counters: fixed ids, in this order ---- */
#define EXON_SYSTEM_COUNTER_BYTES_SENT 0
#define EXON_SYSTEM_COUNTER_BYTES_RECEIVED 1
#define EXON_SYSTEM_COUNTER_RECEIVER_PROXY_FAILS 2
#define EXON_SYSTEM_COUNTER_SENDER_PROXY_FAILS 3
#define EXON_SYSTEM_COUNTER_CONDUCTOR_PROXY_FAILS 4
#define EXON_SYSTEM_COUNTER_NAK_MESSAGES_SENT 5
#define EXON_SYSTEM_COUNTER_NAK_MESSAGES_RECEIVED 6
#define EXON_SYSTEM_COUNTER_STATUS_MESSAGES_SENT 7
#define EXON_SYSTEM_COUNTER_STATUS_MESSAGES_RECEIVED 8
#define EXON_SYSTEM_COUNTER_HEARTBEATS_SENT 9
#define EXON_SYSTEM_COUNTER_HEARTBEATS_RECEIVED 10
#define EXON_SYSTEM_COUNTER_RETRANSMITS_SENT 11
#define EXON_SYSTEM_COUNTER_FLOW_CONTROL_UNDER_RUNS 12
#define EXON_SYSTEM_COUNTER_FLOW_CONTROL_OVER_RUNS 13
#define EXON_SYSTEM_COUNTER_INVALID_PACKETS 14
#define EXON_SYSTEM_COUNTER_ERRORS 15
#define EXON_SYSTEM_COUNTER_SHORT_SENDS 16
#define EXON_SYSTEM_COUNTER_FREE_FAILS 17
#define EXON_SYSTEM_COUNTER_SENDER_FLOW_CONTROL_LIMITS 18
#define EXON_SYSTEM_COUNTER_UNBLOCKED_PUBLICATIONS 19
#define EXON_SYSTEM_COUNTER_UNBLOCKED_COMMANDS 20
#define EXON_SYSTEM_COUNTER_POSSIBLE_TTL_ASYMMETRY 21
#define EXON_SYSTEM_COUNTER_CONTROLLABLE_IDLE_STRATEGY 22
#define EXON_SYSTEM_COUNTER_LOSS_GAP_FILLS 23
#define EXON_SYSTEM_COUNTER_CLIENT_TIMEOUTS 24
#define EXON_SYSTEM_COUNTER_BACK_PRESSURE_EVENTS 25 /* exon: offers that returned BACK_PRESSURED */
#define EXON_SYSTEM_COUNTER_DOORBELL_WAKES 26       /* exon: futex/agent doorbell wake-ups sent */
#define EXON_SYSTEM_COUNTER_SETUPS_DROPPED 27       /* exon: SETUPs refused: an endpoint's image /
                                                     * pending-SETUP capacity was full */
#define EXON_SYSTEM_COUNTER_IMAGES_EVICTED 28        /* exon: images evicted to make room for a SETUP
                                                     * (unverified, or verified but quiet) */
#define EXON_SYSTEM_COUNTER_NAKS_SUPPRESSED 29       /* exon: NAKs withheld (source not verified
                                                     * yet, or over the per-image rate cap) */
#define EXON_SYSTEM_COUNTER_UDP_GSO_FALLBACKS 30   /* exon: publications whose GSO send the kernel
                                                     * refused (they send plainly from then on) */
#define EXON_SYSTEM_COUNTER_COUNT 31

typedef struct exon_counters_stct
{
    uint8_t *metadata;
    uint8_t *values;
    int64_t metadata_length;
    int64_t values_length;
    int32_t max_counters;          /* ids are 0..max_counters-1 */
    int32_t id_high_water_mark;    /* manager: ids below it have been used at least once */
    int64_t free_to_reuse_timeout_ms;
}
exon_counters_t;

/*
 * Attach to the two buffers (8-byte aligned). Scans metadata to find the high-water mark,
 * so a manager can re-attach to an existing region. 0 or EXON_E_ARGUMENT.
 */
int exon_counters_init(
    exon_counters_t *c,
    void *metadata,
    int64_t metadata_length,
    void *values,
    int64_t values_length,
    int64_t free_to_reuse_timeout_ms);

/*
 * Allocate a counter (value 0). key may be NULL when key_length is 0; label is UTF-8 of
 * label_length bytes, truncated to 380. Reuses a RECLAIMED id whose deadline <= now_ms,
 * else takes a fresh id. Returns the id, EXON_E_NO_SPACE or EXON_E_ARGUMENT.
 */
int32_t exon_counters_allocate(
    exon_counters_t *c,
    int32_t type_id,
    const uint8_t *key,
    int32_t key_length,
    const char *label,
    int32_t label_length,
    int64_t registration_id,
    int64_t owner_id,
    int64_t now_ms);
/* Mark id RECLAIMED, reusable at now_ms + free_to_reuse_timeout_ms. 0 or EXON_E_ARGUMENT. */
int exon_counters_free(exon_counters_t *c, int32_t id, int64_t now_ms);
/* Free every ALLOCATED counter of owner_id. Returns the number freed. */
int32_t exon_counters_free_by_owner(exon_counters_t *c, int64_t owner_id, int64_t now_ms);
/*
 * Allocate the system counters at ids 0..EXON_SYSTEM_COUNTER_COUNT-1 (they must be
 * unused: call on a fresh region). Returns EXON_SYSTEM_COUNTER_COUNT or a negative code.
 */
int32_t exon_counters_allocate_system(exon_counters_t *c, int64_t now_ms);
/* Label of a system counter id (static string), or NULL. */
const char *exon_system_counter_label(int32_t id);

/* ---- values (any thread/process) ---- */
int64_t *exon_counter_addr(const exon_counters_t *c, int32_t id); /* NULL if id out of range */
int64_t exon_counter_get(const exon_counters_t *c, int32_t id);   /* acquire load; 0 if bad id */
void exon_counter_set(const exon_counters_t *c, int32_t id, int64_t value); /* release store */
int64_t exon_counter_add(const exon_counters_t *c, int32_t id, int64_t delta); /* returns old */
/* Store value if it is greater than the current one (single writer). Returns true if stored. */
bool exon_counter_propose_max(const exon_counters_t *c, int32_t id, int64_t value);

/* ---- readers (any thread/process) ---- */
/* First ALLOCATED id >= from_id, or -1. */
int32_t exon_counters_next_allocated(const exon_counters_t *c, int32_t from_id);
int32_t exon_counters_state(const exon_counters_t *c, int32_t id); /* EXON_E_ARGUMENT if bad id */
int32_t exon_counters_type_id(const exon_counters_t *c, int32_t id);
int64_t exon_counters_registration_id(const exon_counters_t *c, int32_t id);
int64_t exon_counters_owner_id(const exon_counters_t *c, int32_t id);
int64_t exon_counters_free_for_reuse_deadline(const exon_counters_t *c, int32_t id);
/* Copy the label (no NUL added) into dst; returns the label length or EXON_E_ARGUMENT. */
int32_t exon_counters_label(const exon_counters_t *c, int32_t id, char *dst, int32_t dst_capacity);
/* Copy min(112, dst_capacity) key bytes; returns the bytes copied or EXON_E_ARGUMENT. */
int32_t exon_counters_key(const exon_counters_t *c, int32_t id, uint8_t *dst, int32_t dst_capacity);

#endif /* EXON_COUNTERS_H */
