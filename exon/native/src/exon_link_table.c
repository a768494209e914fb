/*
 * exon_link_table.c: the native DATA fast path of exon's sockets; see exon_link_table.h.
 */
#include <stdlib.h>
#include <string.h>

#include "exon_doorbell.h"
#include "exon_link_table.h"

#define EXON_LT_FLOW_LENGTH (EXON_LT_HEADER_LENGTH + 16)

static inline void lt_put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void lt_put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static inline uint64_t lt_get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--)
    {
        v = (v << 8) | p[k];
    }
    return v;
}

static inline uint32_t lt_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

int exon_lt_init(exon_link_table_t *t, int32_t capacity, int32_t socket_capacity)
{
    if (capacity < 1 || socket_capacity < 1)
    {
        return exon_set_error(EXON_E_ARGUMENT, "link table: capacities must be >= 1");
    }
    memset(t, 0, sizeof(*t));
    t->links = calloc((size_t)capacity, sizeof(exon_lt_link_t));
    t->cursors = calloc((size_t)socket_capacity, sizeof(int32_t));
    if (t->links == NULL || t->cursors == NULL)
    {
        free(t->links);
        free(t->cursors);
        t->links = NULL;
        t->cursors = NULL;
        return -ENOMEM;
    }
    t->capacity = capacity;
    t->socket_capacity = socket_capacity;
    return 0;
}

void exon_lt_close(exon_link_table_t *t)
{
    free(t->links);
    free(t->cursors);
    t->links = NULL;
    t->cursors = NULL;
    t->capacity = 0;
    t->high = 0;
}

int32_t exon_lt_reserve(exon_link_table_t *t)
{
    for (int32_t i = 0; i < t->capacity; i++)
    {
        exon_lt_link_t *l = &t->links[i];
        if (l->pub == NULL && l->peer_key == -1)
        {
            continue; /* reserved, not yet attached */
        }
        if (l->pub == NULL)
        {
            memset(l, 0, sizeof(*l));
            l->peer_key = -1;
            if (i + 1 > t->high)
            {
                t->high = i + 1;
            }
            return i;
        }
    }
    return exon_set_error(EXON_E_NO_SPACE, "link table: all %d fast links are in use", t->capacity);
}

void exon_lt_detach(exon_link_table_t *t, int32_t link)
{
    if (link < 0 || link >= t->capacity)
    {
        return;
    }
    exon_lt_link_t *l = &t->links[link];
    memset(l, 0, sizeof(*l));
    while (t->high > 0 && t->links[t->high - 1].pub == NULL && t->links[t->high - 1].peer_key != -1)
    {
        t->high--;
    }
}

static int64_t lt_offer_frame(exon_lt_link_t *l, uint8_t type, const char *payload, int32_t length)
{
    uint8_t header[EXON_LT_HEADER_LENGTH];
    lt_put_u16(header, EXON_PROTOCOL_VERSION);
    header[2] = EXON_PROTO_SOCKETS;
    header[3] = type;
    lt_put_u32(header + 4, (uint32_t)(12 + length));
    lt_put_u32(header + 8, l->source_tag);
    lt_put_u32(header + 12, l->destination_tag);
    lt_put_u32(header + 16, l->incarnation);
    return exon_publication_offer2(
        l->pub, (const char *)header, EXON_LT_HEADER_LENGTH, payload, length, 0);
}

static int64_t lt_offer(exon_lt_link_t *l, const char *payload, int32_t length)
{
    int64_t rc = lt_offer_frame(l, EXON_MSG_DATA, payload, length);
    if (rc >= 0)
    {
        l->sent++;
    }
    return rc;
}

int64_t exon_lt_send(exon_link_table_t *t, int32_t socket_slot, int32_t link,
                     const char *payload, int32_t length)
{
    if (link >= 0)
    {
        if (link >= t->high)
        {
            return EXON_LT_NO_LINK;
        }
        exon_lt_link_t *l = &t->links[link];
        if (l->pub == NULL || l->socket_slot != socket_slot)
        {
            return EXON_LT_NO_LINK;
        }
        if (l->sent >= l->limit)
        {
            return EXON_LT_NO_CREDIT;
        }
        if (length > l->max_out)
        {
            return EXON_LT_TOO_LARGE;
        }
        int64_t rc = lt_offer(l, payload, length);
        return rc >= 0 ? link : rc;
    }
    if (socket_slot < 0 || socket_slot >= t->socket_capacity)
    {
        return EXON_LT_NO_LINK;
    }
    int32_t high = t->high;
    if (high == 0)
    {
        return EXON_LT_NO_CREDIT;
    }
    int32_t start = t->cursors[socket_slot];
    if (start >= high)
    {
        start = 0;
    }
    for (int32_t k = 0; k < high; k++)
    {
        int32_t i = start + k;
        if (i >= high)
        {
            i -= high;
        }
        exon_lt_link_t *l = &t->links[i];
        if (l->pub == NULL || l->socket_slot != socket_slot || l->sent >= l->limit)
        {
            continue;
        }
        if (length > l->max_out)
        {
            return EXON_LT_TOO_LARGE;
        }
        int64_t rc = lt_offer(l, payload, length);
        if (rc < 0)
        {
            return rc;
        }
        t->cursors[socket_slot] = i + 1;
        return i;
    }
    return EXON_LT_NO_CREDIT;
}

static int32_t lt_find(exon_link_table_t *t, int32_t key, uint32_t dst, uint32_t src)
{
    for (int32_t i = 0; i < t->high; i++)
    {
        exon_lt_link_t *l = &t->links[i];
        if (l->pub != NULL && l->peer_key == key && l->source_tag == dst && l->destination_tag == src)
        {
            return i;
        }
    }
    return -1;
}

/* A FLOW of an attached link without pending cookies, applied like the core's
 * CreditLedger.apply_flow: EXON_LT_FLOW_DONE / EXON_LT_FLOW_CREDIT - index, or -1 (the core
 * decides: unknown link, stale incarnation, cookies pending, malformed). */
static int32_t lt_flow(exon_link_table_t *t, int32_t key, const uint8_t *frame, int32_t length)
{
    if (length != EXON_LT_FLOW_LENGTH)
    {
        return -1;
    }
    int32_t i = lt_find(t, key, lt_get_u32(frame + 12), lt_get_u32(frame + 8));
    if (i < 0)
    {
        return -1;
    }
    exon_lt_link_t *l = &t->links[i];
    uint64_t delivered = lt_get_u64(frame + EXON_LT_HEADER_LENGTH);
    uint64_t limit = lt_get_u64(frame + EXON_LT_HEADER_LENGTH + 8);
    if (lt_get_u32(frame + 16) != l->peer_incarnation || l->hold_flow != 0 || delivered > limit)
    {
        return -1;
    }
    bool had_credit = l->sent < l->limit;
    if (limit > l->limit)
    {
        l->limit = limit;
    }
    uint64_t top = delivered < l->sent ? delivered : l->sent;
    if (top > l->confirmed)
    {
        l->confirmed = top;
    }
    return (!had_credit && l->sent < l->limit) ? EXON_LT_FLOW_CREDIT - i : EXON_LT_FLOW_DONE;
}

/* The link index for a fast DATA frame, EXON_LT_FLOW_* for a FLOW applied here, or -1 (the
 * core decides). */
static int32_t lt_classify(exon_link_table_t *t, int32_t key, const uint8_t *frame, int32_t length)
{
    if (key < 0 || length < EXON_LT_HEADER_LENGTH)
    {
        return -1;
    }
    if (frame[0] != EXON_PROTOCOL_VERSION || frame[1] != 0 || frame[2] != EXON_PROTO_SOCKETS ||
        lt_get_u32(frame + 4) != (uint32_t)(length - 8))
    {
        return -1;
    }
    if (frame[3] == EXON_MSG_FLOW)
    {
        return lt_flow(t, key, frame, length);
    }
    if (frame[3] != EXON_MSG_DATA)
    {
        return -1;
    }
    int32_t i = lt_find(t, key, lt_get_u32(frame + 12), lt_get_u32(frame + 8));
    if (i < 0)
    {
        return -1;
    }
    exon_lt_link_t *l = &t->links[i];
    if (lt_get_u32(frame + 16) != l->peer_incarnation || l->received >= l->advertised ||
        length - EXON_LT_HEADER_LENGTH > l->max_in)
    {
        return -1;
    }
    l->received++;
    return i;
}

int exon_lt_poll(exon_link_table_t *t, exon_image_t **images, int32_t count, int32_t max_messages, uint8_t *copy_buf, int32_t copy_cap,
                 int32_t *copy_used, exon_lt_desc_t *out, exon_fragment_t *scratch)
{
    int32_t n = 0;
    int32_t used = 0;
    *copy_used = 0;
    for (int32_t img = 0; img < count && n < max_messages; img++)
    {
        if (images[img] == NULL || images[img]->closed)
        {
            continue;
        }
        int32_t got_used = 0;
        int rc = exon_image_poll(images[img], scratch, max_messages - n, max_messages - n,
                                 copy_buf + used, copy_cap - used, &got_used);
        if (rc < 0)
        {
            if (rc == EXON_E_FULL && n == 0)
            {
                *copy_used = got_used;
                return rc;
            }
            if (rc == EXON_E_FULL)
            {
                break; /* the rest next time */
            }
            return rc;
        }
        for (int32_t k = 0; k < rc; k++)
        {
            exon_lt_desc_t *d = &out[n++];
            d->image = img;
            d->offset = used + scratch[k].offset;
            d->length = scratch[k].length;
            d->link = -1;
            d->slot = -1;
        }
        used += got_used;
    }
    *copy_used = used;
    return n;
}

int exon_lt_classify(exon_link_table_t *t, const int32_t *image_keys, const uint8_t *copy_buf,
                     exon_lt_desc_t *descs, int32_t count)
{
    int32_t slow_image = -1;
    int fast = 0;
    for (int32_t k = 0; k < count; k++)
    {
        exon_lt_desc_t *d = &descs[k];
        d->slot = -1;
        if (d->image == slow_image)
        {
            d->link = -1;
            continue;
        }
        d->link = lt_classify(t, image_keys[d->image], copy_buf + d->offset, d->length);
        if (d->link == -1)
        {
            slow_image = d->image; /* messages of an image come in one run */
            continue;
        }
        int32_t i = d->link >= 0 ? d->link : (d->link == EXON_LT_FLOW_DONE ? -1 : EXON_LT_FLOW_CREDIT - d->link);
        if (i >= 0)
        {
            d->slot = t->links[i].socket_slot;
        }
        if (d->link >= 0)
        {
            fast++;
        }
    }
    return fast;
}

int64_t exon_lt_deliver(exon_link_table_t *t, int32_t link)
{
    return exon_lt_deliver_many(t, link, 1);
}

int64_t exon_lt_deliver_many(exon_link_table_t *t, int32_t link, int64_t count)
{
    if (link < 0 || link >= t->high)
    {
        return exon_set_error(EXON_E_ARGUMENT, "link table: no link %d", link);
    }
    exon_lt_link_t *l = &t->links[link];
    if (count < 0)
    {
        return exon_set_error(EXON_E_ARGUMENT, "link table: negative delivery count %lld", (long long)count);
    }
    if (l->pub == NULL || (uint64_t)count > l->received - l->delivered)
    {
        return exon_set_error(EXON_E_STATE, "link table: link %d delivered more than received", link);
    }
    if (count == 0)
    {
        return EXON_LT_DELIVER_NONE;
    }
    l->delivered += (uint64_t)count;
    uint64_t pending = l->delivered - l->flowed_delivered;
    if (pending >= l->batch)
    {
        if (l->capacity > 0)
        {
            uint64_t limit = l->delivered + l->capacity;
            uint8_t body[16];
            for (int k = 0; k < 8; k++)
            {
                body[k] = (uint8_t)(l->delivered >> (8 * k));
                body[8 + k] = (uint8_t)(limit >> (8 * k));
            }
            if (lt_offer_frame(l, EXON_MSG_FLOW, (const char *)body, 16) >= 0)
            {
                l->flowed_delivered = l->delivered;
                l->advertised = limit;
                return EXON_LT_DELIVER_NONE;
            }
        }
        return EXON_LT_DELIVER_DUE;
    }
    return l->flow_timer == 0 ? EXON_LT_DELIVER_FIRST : EXON_LT_DELIVER_NONE;
}

static bool lt_any_available(exon_image_t **images, int32_t count)
{
    for (int32_t i = 0; i < count; i++)
    {
        if (images[i] != NULL && !images[i]->closed && exon_image_available(images[i]) > 0)
        {
            return true;
        }
    }
    return false;
}

int exon_lt_wait(exon_image_t **images, int32_t count, int32_t *doorbell, int64_t spin_ns,
                 int64_t timeout_ns)
{
    int64_t start = exon_nano_clock();
    int32_t bell = exon_doorbell_read(doorbell);
    if (spin_ns > 0 && (timeout_ns < 0 || spin_ns < timeout_ns))
    {
        int64_t end = start + spin_ns;
        for (uint32_t k = 0;; k++)
        {
            if (lt_any_available(images, count))
            {
                return 1;
            }
            if (exon_doorbell_read(doorbell) != bell)
            {
                return 0;
            }
            for (int p = 0; p < 8; p++)
            {
                EXON_CPU_PAUSE();
            }
            if ((k & 7) == 7 && exon_nano_clock() >= end)
            {
                break;
            }
        }
    }
    int64_t left = timeout_ns;
    if (timeout_ns >= 0)
    {
        left = timeout_ns - (exon_nano_clock() - start);
        if (left <= 0)
        {
            return lt_any_available(images, count) ? 1 : EXON_E_TIMEOUT;
        }
    }
    if (count == 0)
    {
        int rc = exon_doorbell_wait(doorbell, bell, left);
        return rc == EXON_E_TIMEOUT ? rc : 0;
    }
    return exon_image_wait(images, count, doorbell, left);
}
