/* exon_counters.c: counters manager and reader. Layout and contract in exon_counters.h. */
#include <string.h>

#include "concurrent/exon_counters.h"

static const char *const system_counter_labels[EXON_SYSTEM_COUNTER_COUNT] = {
    [EXON_SYSTEM_COUNTER_BYTES_SENT] = "Bytes sent",
    [EXON_SYSTEM_COUNTER_BYTES_RECEIVED] = "Bytes received",
    [EXON_SYSTEM_COUNTER_RECEIVER_PROXY_FAILS] = "Failed offers to ReceiverProxy",
    [EXON_SYSTEM_COUNTER_SENDER_PROXY_FAILS] = "Failed offers to SenderProxy",
    [EXON_SYSTEM_COUNTER_CONDUCTOR_PROXY_FAILS] = "Failed offers to DriverConductorProxy",
    [EXON_SYSTEM_COUNTER_NAK_MESSAGES_SENT] = "NAKs sent",
    [EXON_SYSTEM_COUNTER_NAK_MESSAGES_RECEIVED] = "NAKs received",
    [EXON_SYSTEM_COUNTER_STATUS_MESSAGES_SENT] = "Status Messages sent",
    [EXON_SYSTEM_COUNTER_STATUS_MESSAGES_RECEIVED] = "Status Messages received",
    [EXON_SYSTEM_COUNTER_HEARTBEATS_SENT] = "Heartbeats sent",
    [EXON_SYSTEM_COUNTER_HEARTBEATS_RECEIVED] = "Heartbeats received",
    [EXON_SYSTEM_COUNTER_RETRANSMITS_SENT] = "Retransmits sent",
    [EXON_SYSTEM_COUNTER_FLOW_CONTROL_UNDER_RUNS] = "Flow control under runs",
    [EXON_SYSTEM_COUNTER_FLOW_CONTROL_OVER_RUNS] = "Flow control over runs",
    [EXON_SYSTEM_COUNTER_INVALID_PACKETS] = "Invalid packets",
    [EXON_SYSTEM_COUNTER_ERRORS] = "Errors",
    [EXON_SYSTEM_COUNTER_SHORT_SENDS] = "Short sends",
    [EXON_SYSTEM_COUNTER_FREE_FAILS] = "Failed attempts to free log buffers",
    [EXON_SYSTEM_COUNTER_SENDER_FLOW_CONTROL_LIMITS] = "Sender flow control limits (back-pressure events)",
    [EXON_SYSTEM_COUNTER_UNBLOCKED_PUBLICATIONS] = "Unblocked Publications",
    [EXON_SYSTEM_COUNTER_UNBLOCKED_COMMANDS] = "Unblocked Control Commands",
    [EXON_SYSTEM_COUNTER_POSSIBLE_TTL_ASYMMETRY] = "Possible TTL Asymmetry",
    [EXON_SYSTEM_COUNTER_CONTROLLABLE_IDLE_STRATEGY] = "ControllableIdleStrategy status",
    [EXON_SYSTEM_COUNTER_LOSS_GAP_FILLS] = "Loss gap fills",
    [EXON_SYSTEM_COUNTER_CLIENT_TIMEOUTS] = "Client liveness timeouts",
    [EXON_SYSTEM_COUNTER_BACK_PRESSURE_EVENTS] = "Back-pressure events",
    [EXON_SYSTEM_COUNTER_DOORBELL_WAKES] = "Doorbell wake-ups",
    [EXON_SYSTEM_COUNTER_SETUPS_DROPPED] = "SETUPs dropped (endpoint image capacity full)",
    [EXON_SYSTEM_COUNTER_IMAGES_EVICTED] = "Images evicted (unverified or idle, endpoint full)",
    [EXON_SYSTEM_COUNTER_NAKS_SUPPRESSED] = "NAKs suppressed (unverified source or rate cap)",
    [EXON_SYSTEM_COUNTER_UDP_GSO_FALLBACKS] = "UDP GSO fallbacks (kernel refused, sending plainly)",
};

static inline uint8_t *meta_at(const exon_counters_t *c, int32_t id)
{
    return c->metadata + (int64_t)id * EXON_COUNTER_METADATA_LENGTH;
}

static inline uint8_t *value_record_at(const exon_counters_t *c, int32_t id)
{
    return c->values + (int64_t)id * EXON_COUNTER_VALUE_LENGTH;
}

static inline int32_t *state_ptr(const exon_counters_t *c, int32_t id)
{
    return (int32_t *)meta_at(c, id);
}

static inline int64_t *deadline_ptr(const exon_counters_t *c, int32_t id)
{
    return (int64_t *)(meta_at(c, id) + EXON_COUNTER_FREE_FOR_REUSE_DEADLINE_OFFSET);
}

static inline bool valid_id(const exon_counters_t *c, int32_t id)
{
    return id >= 0 && id < c->max_counters;
}

int exon_counters_init(
    exon_counters_t *c,
    void *metadata,
    int64_t metadata_length,
    void *values,
    int64_t values_length,
    int64_t free_to_reuse_timeout_ms)
{
    if (NULL == c || NULL == metadata || NULL == values ||
        ((uintptr_t)metadata & 7) != 0 || ((uintptr_t)values & 7) != 0)
    {
        return exon_set_error(EXON_E_ARGUMENT, "counters: NULL or unaligned buffers");
    }
    if (metadata_length < 0 || values_length < 0 || free_to_reuse_timeout_ms < 0)
    {
        return exon_set_error(EXON_E_ARGUMENT, "counters: negative length or timeout");
    }
    int64_t by_values = values_length / EXON_COUNTER_VALUE_LENGTH;
    int64_t by_metadata = metadata_length / EXON_COUNTER_METADATA_LENGTH;
    int64_t max = by_values < by_metadata ? by_values : by_metadata;
    if (max > INT32_MAX)
    {
        max = INT32_MAX;
    }
    c->metadata = (uint8_t *)metadata;
    c->values = (uint8_t *)values;
    c->metadata_length = metadata_length;
    c->values_length = values_length;
    c->max_counters = (int32_t)max;
    c->free_to_reuse_timeout_ms = free_to_reuse_timeout_ms;
    c->id_high_water_mark = 0;
    for (int32_t id = c->max_counters - 1; id >= 0; id--)
    {
        if (EXON_COUNTER_STATE_UNUSED != EXON_LOAD_ACQ(state_ptr(c, id)))
        {
            c->id_high_water_mark = id + 1;
            break;
        }
    }
    return 0;
}

static int32_t find_free_id(exon_counters_t *c, int64_t now_ms)
{
    for (int32_t id = 0; id < c->id_high_water_mark; id++)
    {
        int32_t state = EXON_LOAD_ACQ(state_ptr(c, id));
        if ((EXON_COUNTER_STATE_RECLAIMED == state && EXON_LOAD_ACQ(deadline_ptr(c, id)) <= now_ms) ||
            EXON_COUNTER_STATE_UNUSED == state)
        {
            return id;
        }
    }
    if (c->id_high_water_mark >= c->max_counters)
    {
        return exon_set_error(
            EXON_E_NO_SPACE, "counters: all %d counters are allocated or waiting for reuse", c->max_counters);
    }
    return c->id_high_water_mark++;
}

int32_t exon_counters_allocate(
    exon_counters_t *c,
    int32_t type_id,
    const uint8_t *key,
    int32_t key_length,
    const char *label,
    int32_t label_length,
    int64_t registration_id,
    int64_t owner_id,
    int64_t now_ms)
{
    if (key_length < 0 || key_length > EXON_COUNTER_MAX_KEY_LENGTH || (key_length > 0 && NULL == key) ||
        label_length < 0 || (label_length > 0 && NULL == label))
    {
        return exon_set_error(
            EXON_E_ARGUMENT, "counters: invalid key length %d (max %d) or label length %d",
            key_length, EXON_COUNTER_MAX_KEY_LENGTH, label_length);
    }
    int32_t id = find_free_id(c, now_ms);
    if (id < 0)
    {
        return id;
    }
    if (label_length > EXON_COUNTER_MAX_LABEL_LENGTH)
    {
        label_length = EXON_COUNTER_MAX_LABEL_LENGTH;
    }
    uint8_t *meta = meta_at(c, id);
    *(int32_t *)(meta + EXON_COUNTER_TYPE_ID_OFFSET) = type_id;
    memset(meta + EXON_COUNTER_KEY_OFFSET, 0, EXON_COUNTER_MAX_KEY_LENGTH);
    if (key_length > 0)
    {
        memcpy(meta + EXON_COUNTER_KEY_OFFSET, key, (size_t)key_length);
    }
    memset(meta + EXON_COUNTER_LABEL_OFFSET, 0, EXON_COUNTER_MAX_LABEL_LENGTH);
    if (label_length > 0)
    {
        memcpy(meta + EXON_COUNTER_LABEL_OFFSET, label, (size_t)label_length);
    }
    *(int32_t *)(meta + EXON_COUNTER_LABEL_LENGTH_OFFSET) = label_length;
    EXON_STORE_REL(deadline_ptr(c, id), EXON_COUNTER_NOT_FREE_TO_REUSE);

    uint8_t *value = value_record_at(c, id);
    EXON_STORE_REL((int64_t *)value, (int64_t)0);
    EXON_STORE_REL((int64_t *)(value + EXON_COUNTER_REGISTRATION_ID_OFFSET), registration_id);
    EXON_STORE_REL((int64_t *)(value + EXON_COUNTER_OWNER_ID_OFFSET), owner_id);
    EXON_STORE_REL((int64_t *)(value + EXON_COUNTER_REFERENCE_ID_OFFSET), (int64_t)0);

    EXON_STORE_REL(state_ptr(c, id), EXON_COUNTER_STATE_ALLOCATED);
    return id;
}

int exon_counters_free(exon_counters_t *c, int32_t id, int64_t now_ms)
{
    if (!valid_id(c, id) || EXON_COUNTER_STATE_ALLOCATED != EXON_LOAD_ACQ(state_ptr(c, id)))
    {
        return exon_set_error(EXON_E_ARGUMENT, "counters: counter %d is not allocated", id);
    }
    EXON_STORE_REL(deadline_ptr(c, id), now_ms + c->free_to_reuse_timeout_ms);
    EXON_STORE_REL(state_ptr(c, id), EXON_COUNTER_STATE_RECLAIMED);
    return 0;
}

int32_t exon_counters_free_by_owner(exon_counters_t *c, int64_t owner_id, int64_t now_ms)
{
    int32_t freed = 0;
    for (int32_t id = 0; id < c->id_high_water_mark; id++)
    {
        if (EXON_COUNTER_STATE_ALLOCATED == EXON_LOAD_ACQ(state_ptr(c, id)) &&
            exon_counters_owner_id(c, id) == owner_id)
        {
            exon_counters_free(c, id, now_ms);
            freed++;
        }
    }
    return freed;
}

int32_t exon_counters_allocate_system(exon_counters_t *c, int64_t now_ms)
{
    if (c->max_counters < EXON_SYSTEM_COUNTER_COUNT)
    {
        return exon_set_error(EXON_E_NO_SPACE, "counters: room for %d counters, system needs %d",
            c->max_counters, EXON_SYSTEM_COUNTER_COUNT);
    }
    for (int32_t id = 0; id < EXON_SYSTEM_COUNTER_COUNT; id++)
    {
        if (EXON_COUNTER_STATE_UNUSED != EXON_LOAD_ACQ(state_ptr(c, id)))
        {
            return exon_set_error(EXON_E_STATE, "counters: system counter id %d is already in use", id);
        }
    }
    for (int32_t id = 0; id < EXON_SYSTEM_COUNTER_COUNT; id++)
    {
        const char *label = system_counter_labels[id];
        int32_t got = exon_counters_allocate(
            c, EXON_COUNTER_TYPE_SYSTEM, (const uint8_t *)&id, (int32_t)sizeof(id), label,
            (int32_t)strlen(label), EXON_COUNTER_DEFAULT_REGISTRATION_ID, EXON_COUNTER_OWNER_DRIVER, now_ms);
        if (got != id)
        {
            return got < 0 ? got : exon_set_error(EXON_E_STATE, "counters: system counter %d got id %d", id, got);
        }
    }
    return EXON_SYSTEM_COUNTER_COUNT;
}

const char *exon_system_counter_label(int32_t id)
{
    return (id >= 0 && id < EXON_SYSTEM_COUNTER_COUNT) ? system_counter_labels[id] : NULL;
}

int64_t *exon_counter_addr(const exon_counters_t *c, int32_t id)
{
    return valid_id(c, id) ? (int64_t *)value_record_at(c, id) : NULL;
}

int64_t exon_counter_get(const exon_counters_t *c, int32_t id)
{
    return valid_id(c, id) ? EXON_LOAD_ACQ((int64_t *)value_record_at(c, id)) : 0;
}

void exon_counter_set(const exon_counters_t *c, int32_t id, int64_t value)
{
    if (valid_id(c, id))
    {
        EXON_STORE_REL((int64_t *)value_record_at(c, id), value);
    }
}

int64_t exon_counter_add(const exon_counters_t *c, int32_t id, int64_t delta)
{
    return valid_id(c, id) ? EXON_FETCH_ADD((int64_t *)value_record_at(c, id), delta) : 0;
}

bool exon_counter_propose_max(const exon_counters_t *c, int32_t id, int64_t value)
{
    if (!valid_id(c, id))
    {
        return false;
    }
    int64_t *addr = (int64_t *)value_record_at(c, id);
    if (value > EXON_LOAD_RLX(addr))
    {
        EXON_STORE_REL(addr, value);
        return true;
    }
    return false;
}

int32_t exon_counters_next_allocated(const exon_counters_t *c, int32_t from_id)
{
    for (int32_t id = from_id < 0 ? 0 : from_id; id < c->max_counters; id++)
    {
        int32_t state = EXON_LOAD_ACQ(state_ptr(c, id));
        if (EXON_COUNTER_STATE_ALLOCATED == state)
        {
            return id;
        }
        if (EXON_COUNTER_STATE_UNUSED == state)
        {
            /* ids are handed out in order: the first never-used id ends the used range */
            return -1;
        }
    }
    return -1;
}

int32_t exon_counters_state(const exon_counters_t *c, int32_t id)
{
    if (!valid_id(c, id))
    {
        return exon_set_error(EXON_E_ARGUMENT, "counters: id %d out of range", id);
    }
    return EXON_LOAD_ACQ(state_ptr(c, id));
}

int32_t exon_counters_type_id(const exon_counters_t *c, int32_t id)
{
    if (!valid_id(c, id))
    {
        return exon_set_error(EXON_E_ARGUMENT, "counters: id %d out of range", id);
    }
    return *(int32_t *)(meta_at(c, id) + EXON_COUNTER_TYPE_ID_OFFSET);
}

int64_t exon_counters_registration_id(const exon_counters_t *c, int32_t id)
{
    if (!valid_id(c, id))
    {
        return 0;
    }
    return EXON_LOAD_ACQ((int64_t *)(value_record_at(c, id) + EXON_COUNTER_REGISTRATION_ID_OFFSET));
}

int64_t exon_counters_owner_id(const exon_counters_t *c, int32_t id)
{
    if (!valid_id(c, id))
    {
        return 0;
    }
    return EXON_LOAD_ACQ((int64_t *)(value_record_at(c, id) + EXON_COUNTER_OWNER_ID_OFFSET));
}

int64_t exon_counters_free_for_reuse_deadline(const exon_counters_t *c, int32_t id)
{
    return valid_id(c, id) ? EXON_LOAD_ACQ(deadline_ptr(c, id)) : 0;
}

int32_t exon_counters_label(const exon_counters_t *c, int32_t id, char *dst, int32_t dst_capacity)
{
    if (!valid_id(c, id) || dst_capacity < 0)
    {
        return exon_set_error(EXON_E_ARGUMENT, "counters: id %d out of range", id);
    }
    const uint8_t *meta = meta_at(c, id);
    int32_t length = *(const int32_t *)(meta + EXON_COUNTER_LABEL_LENGTH_OFFSET);
    if (length < 0 || length > EXON_COUNTER_MAX_LABEL_LENGTH)
    {
        length = 0;
    }
    int32_t n = length < dst_capacity ? length : dst_capacity;
    memcpy(dst, meta + EXON_COUNTER_LABEL_OFFSET, (size_t)n);
    return n;
}

int32_t exon_counters_key(const exon_counters_t *c, int32_t id, uint8_t *dst, int32_t dst_capacity)
{
    if (!valid_id(c, id) || dst_capacity < 0)
    {
        return exon_set_error(EXON_E_ARGUMENT, "counters: id %d out of range", id);
    }
    int32_t n = dst_capacity < EXON_COUNTER_MAX_KEY_LENGTH ? dst_capacity : EXON_COUNTER_MAX_KEY_LENGTH;
    memcpy(dst, meta_at(c, id) + EXON_COUNTER_KEY_OFFSET, (size_t)n);
    return n;
}
