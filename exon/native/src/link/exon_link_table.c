/*
 * exon_link_table.c: the native DATA fast path of exon's sockets; see exon_link_table.h.
 */
#include <stdlib.h>
#include <string.h>

#include "concurrent/exon_doorbell.h"
#include "concurrent/exon_spin_policy.h"
#include "link/exon_link_table.h"

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

static uint32_t lt_hash(int32_t key, uint32_t source_tag, uint32_t destination_tag)
{
    uint32_t h = (uint32_t)key * 0x9E3779B1u;
    h ^= source_tag * 0x85EBCA77u;
    h = (h << 13) | (h >> 19);
    h ^= destination_tag * 0xC2B2AE3Du;
    h ^= h >> 16;
    h *= 0x7FEB352Du;
    h ^= h >> 15;
    return h;
}

static inline bool lt_matches(const exon_lt_link_t *l, int32_t key, uint32_t source_tag,
                              uint32_t destination_tag)
{
    return l->pub != NULL && l->peer_key == key && l->source_tag == source_tag &&
        l->destination_tag == destination_tag;
}

int exon_lt_init(exon_link_table_t *t, int32_t capacity, int32_t socket_capacity)
{
    if (capacity < 1 || socket_capacity < 1 || capacity > (1 << 28))
    {
        return exon_set_error(EXON_E_ARGUMENT, "link table: capacities must be >= 1");
    }
    memset(t, 0, sizeof(*t));
    uint32_t slots = 2;
    while (slots < 2u * (uint32_t)capacity)
    {
        slots <<= 1;
    }
    t->links = calloc((size_t)capacity, sizeof(exon_lt_link_t));
    t->cursors = malloc(sizeof(int32_t) * (size_t)socket_capacity);
    t->socket_first = malloc(sizeof(int32_t) * (size_t)socket_capacity);
    t->ring_next = malloc(sizeof(int32_t) * (size_t)capacity);
    t->ring_prev = malloc(sizeof(int32_t) * (size_t)capacity);
    t->index = malloc(sizeof(int32_t) * (size_t)slots);
    t->flow_deadline = calloc((size_t)capacity, sizeof(int64_t));
    t->flow_queue = malloc(sizeof(int32_t) * (size_t)capacity);
    if (t->links == NULL || t->cursors == NULL || t->socket_first == NULL ||
        t->ring_next == NULL || t->ring_prev == NULL || t->index == NULL ||
        t->flow_deadline == NULL || t->flow_queue == NULL)
    {
        exon_lt_close(t);
        return -ENOMEM;
    }
    for (int32_t s = 0; s < socket_capacity; s++)
    {
        t->cursors[s] = -1;
        t->socket_first[s] = -1;
    }
    for (int32_t i = 0; i < capacity; i++)
    {
        t->ring_next[i] = -1;
        t->ring_prev[i] = -1;
    }
    for (uint32_t k = 0; k < slots; k++)
    {
        t->index[k] = -1;
    }
    t->index_mask = slots - 1;
    t->capacity = capacity;
    t->socket_capacity = socket_capacity;
    return 0;
}

void exon_lt_close(exon_link_table_t *t)
{
    free(t->links);
    free(t->cursors);
    free(t->socket_first);
    free(t->ring_next);
    free(t->ring_prev);
    free(t->index);
    free(t->flow_deadline);
    free(t->flow_queue);
    free(t->seal_buf);
    t->seal_buf = NULL;
    t->seal_cap = 0;
    t->flow_deadline = NULL;
    t->flow_queue = NULL;
    t->flow_count = 0;
    t->links = NULL;
    t->cursors = NULL;
    t->socket_first = NULL;
    t->ring_next = NULL;
    t->ring_prev = NULL;
    t->index = NULL;
    t->capacity = 0;
    t->high = 0;
    t->socket_capacity = 0; /* a send after the close finds no socket (EXON_LT_NO_LINK) */
}

int32_t exon_lt_reserve(exon_link_table_t *t)
{
    for (int32_t k = 0; k < t->capacity; k++)
    {
        int32_t i = t->free_hint + k;
        if (i >= t->capacity)
        {
            i -= t->capacity;
        }
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
            t->free_hint = i + 1 < t->capacity ? i + 1 : 0;
            return i;
        }
    }
    return exon_set_error(EXON_E_NO_SPACE, "link table: all %d fast links are in use", t->capacity);
}

/* The active link with these keys, or -1: one probe sequence of the hash. */
static int32_t lt_find(exon_link_table_t *t, int32_t key, uint32_t source_tag, uint32_t destination_tag)
{
    uint32_t k = lt_hash(key, source_tag, destination_tag) & t->index_mask;
    for (;;)
    {
        int32_t i = t->index[k];
        if (i < 0)
        {
            return -1;
        }
        if (lt_matches(&t->links[i], key, source_tag, destination_tag))
        {
            return i;
        }
        k = (k + 1) & t->index_mask;
    }
}

int exon_lt_activate(exon_link_table_t *t, int32_t link, exon_publication_t *pub)
{
    if (link < 0 || link >= t->capacity || pub == NULL)
    {
        return exon_set_error(EXON_E_ARGUMENT, "link table: cannot activate link %d", link);
    }
    exon_lt_link_t *l = &t->links[link];
    int32_t slot = l->socket_slot;
    if (slot < 0 || slot >= t->socket_capacity || l->peer_key < 0)
    {
        return exon_set_error(EXON_E_ARGUMENT, "link table: link %d has no socket or peer", link);
    }
    if (l->pub != NULL || lt_find(t, l->peer_key, l->source_tag, l->destination_tag) >= 0)
    {
        return exon_set_error(EXON_E_STATE, "link table: link %d is live or a duplicate", link);
    }
    uint32_t k = lt_hash(l->peer_key, l->source_tag, l->destination_tag) & t->index_mask;
    while (t->index[k] >= 0)
    {
        k = (k + 1) & t->index_mask;
    }
    t->index[k] = link;
    int32_t first = t->socket_first[slot];
    if (first < 0)
    {
        t->ring_next[link] = link;
        t->ring_prev[link] = link;
        t->socket_first[slot] = link;
    }
    else
    {
        int32_t last = t->ring_prev[first]; /* insert before first: the ring's tail */
        t->ring_next[last] = link;
        t->ring_prev[link] = last;
        t->ring_next[link] = first;
        t->ring_prev[first] = link;
    }
    l->pub = pub; /* last: the entry is live from here on */
    return 0;
}

/* Take an active link out of the hash (backward-shift deletion keeps every probe sequence
 * unbroken) and out of its socket's ring. */
static void lt_unindex(exon_link_table_t *t, int32_t link)
{
    exon_lt_link_t *l = &t->links[link];
    uint32_t mask = t->index_mask;
    uint32_t hole = lt_hash(l->peer_key, l->source_tag, l->destination_tag) & mask;
    while (t->index[hole] != link)
    {
        if (t->index[hole] < 0)
        {
            return; /* not indexed: never activated */
        }
        hole = (hole + 1) & mask;
    }
    t->index[hole] = -1;
    for (uint32_t j = (hole + 1) & mask; t->index[j] >= 0; j = (j + 1) & mask)
    {
        const exon_lt_link_t *m = &t->links[t->index[j]];
        uint32_t home = lt_hash(m->peer_key, m->source_tag, m->destination_tag) & mask;
        /* the entry at j may move into the hole unless its home lies cyclically in (hole, j] */
        bool stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!stays)
        {
            t->index[hole] = t->index[j];
            t->index[j] = -1;
            hole = j;
        }
    }
    int32_t slot = l->socket_slot;
    int32_t next = t->ring_next[link];
    int32_t prev = t->ring_prev[link];
    if (next == link)
    {
        t->socket_first[slot] = -1;
    }
    else
    {
        t->ring_next[prev] = next;
        t->ring_prev[next] = prev;
        if (t->socket_first[slot] == link)
        {
            t->socket_first[slot] = next;
        }
    }
    if (t->cursors[slot] == link)
    {
        t->cursors[slot] = next == link ? -1 : next;
    }
    t->ring_next[link] = -1;
    t->ring_prev[link] = -1;
}

/* Take `link` out of the FLOW queue (detach: rare), keeping the others in order. */
static void lt_unqueue_flow(exon_link_table_t *t, int32_t link)
{
    int32_t kept = 0;
    for (int32_t k = 0; k < t->flow_count; k++)
    {
        int32_t i = t->flow_queue[(t->flow_head + k) % t->capacity];
        if (i != link)
        {
            t->flow_queue[(t->flow_head + kept) % t->capacity] = i;
            kept++;
        }
    }
    t->flow_count = kept;
    t->flow_deadline[link] = 0;
}

void exon_lt_detach(exon_link_table_t *t, int32_t link)
{
    if (link < 0 || link >= t->capacity)
    {
        return;
    }
    exon_lt_link_t *l = &t->links[link];
    if (l->pub != NULL)
    {
        lt_unindex(t, link);
    }
    if (t->flow_deadline[link] != 0)
    {
        lt_unqueue_flow(t, link);
    }
    memset(l, 0, sizeof(*l));
    while (t->high > 0 && t->links[t->high - 1].pub == NULL && t->links[t->high - 1].peer_key != -1)
    {
        t->high--;
    }
}

/* The scratch buffer, at least `need` bytes (NULL: out of memory). */
static uint8_t *lt_scratch(exon_link_table_t *t, int64_t need)
{
    if (need > INT32_MAX)
    {
        return NULL;
    }
    if (need > t->seal_cap)
    {
        int64_t cap = t->seal_cap > 0 ? t->seal_cap : 4096;
        while (cap < need)
        {
            cap *= 2;
        }
        cap = cap > INT32_MAX ? INT32_MAX : cap;
        uint8_t *grown = realloc(t->seal_buf, (size_t)cap);
        if (grown == NULL)
        {
            return NULL;
        }
        t->seal_buf = grown;
        t->seal_cap = (int32_t)cap;
    }
    return t->seal_buf;
}

static int64_t lt_offer_frame(exon_link_table_t *t, exon_lt_link_t *l, uint8_t type,
                              const char *payload, int32_t length)
{
    uint8_t header[EXON_LT_HEADER_LENGTH];
    lt_put_u16(header, EXON_PROTOCOL_VERSION);
    header[2] = l->seal != NULL ? EXON_PROTO_SEALED : EXON_PROTO_SOCKETS;
    header[3] = type;
    lt_put_u32(header + 8, l->source_tag);
    lt_put_u32(header + 12, l->destination_tag);
    lt_put_u32(header + 16, l->incarnation);
    if (l->seal == NULL)
    {
        lt_put_u32(header + 4, (uint32_t)(12 + length));
        return exon_publication_offer2(
            l->pub, (const char *)header, EXON_LT_HEADER_LENGTH, payload, length, 0);
    }
    /* sealed: the header (with its final length) is the associated data */
    lt_put_u32(header + 4, (uint32_t)(12 + EXON_SEAL_OVERHEAD + length));
    int64_t whole = (int64_t)EXON_LT_HEADER_LENGTH + EXON_SEAL_OVERHEAD + length;
    if (whole <= l->pub->max_payload_length)
    {
        /* one pass over the bytes: sealed from the caller's payload straight into the
         * claimed frame. try_claim refuses as offer2 would (the same entry checks and
         * reservation for a frame that fits), so the outcomes are offer2's; the counter
         * moves only for a frame that goes out. A claim is always committed or aborted. */
        exon_claim_t claim;
        int64_t position = exon_publication_try_claim(l->pub, (int32_t)whole, &claim);
        if (position < 0)
        {
            return position;
        }
        memcpy(claim.data, header, EXON_LT_HEADER_LENGTH);
        int64_t rc = exon_seal_seal(l->seal, header, (const uint8_t *)payload, length,
                                    claim.data + EXON_LT_HEADER_LENGTH);
        if (rc < 0)
        {
            exon_claim_abort(&claim); /* padding: readers skip it */
            return rc;
        }
        exon_claim_commit(&claim);
        return position;
    }
    /* fragmented (above one frame): sealed into the scratch buffer, then offered */
    uint8_t *sealed = lt_scratch(t, (int64_t)length + EXON_SEAL_OVERHEAD);
    if (sealed == NULL)
    {
        return -ENOMEM;
    }
    int64_t rc = exon_seal_seal(l->seal, header, (const uint8_t *)payload, length, sealed);
    if (rc < 0)
    {
        return rc;
    }
    return exon_publication_offer2(l->pub, (const char *)header, EXON_LT_HEADER_LENGTH,
                                   (const char *)sealed, length + EXON_SEAL_OVERHEAD, 0);
}

/* The FLOW (delivered, max(advertised, delivered + capacity)), as the core's
 * CreditLedger.make_flow (a window that shrank never moves the limit back): on success
 * flowed_delivered and advertised move. */
static int64_t lt_offer_flow(exon_link_table_t *t, exon_lt_link_t *l)
{
    uint64_t limit = l->delivered + l->capacity;
    if (limit < l->advertised)
    {
        limit = l->advertised;
    }
    uint8_t body[16];
    for (int k = 0; k < 8; k++)
    {
        body[k] = (uint8_t)(l->delivered >> (8 * k));
        body[8 + k] = (uint8_t)(limit >> (8 * k));
    }
    int64_t rc = lt_offer_frame(t, l, EXON_MSG_FLOW, (const char *)body, 16);
    if (rc >= 0)
    {
        l->flowed_delivered = l->delivered;
        l->advertised = limit;
    }
    return rc;
}

static int64_t lt_offer(exon_link_table_t *t, exon_lt_link_t *l, const char *payload,
                        int32_t length)
{
    int64_t rc = lt_offer_frame(t, l, EXON_MSG_DATA, payload, length);
    if (rc >= 0)
    {
        l->sent++;
    }
    return rc;
}

int64_t exon_lt_send(exon_link_table_t *t, int32_t socket_slot, int32_t link,
                     const char *payload, int32_t length)
{
    if (link < EXON_LT_ROUND_ROBIN)
    {
        return EXON_LT_NO_LINK;
    }
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
        int64_t rc = lt_offer(t, l, payload, length);
        return rc >= 0 ? link : rc;
    }
    if (socket_slot < 0 || socket_slot >= t->socket_capacity)
    {
        return EXON_LT_NO_LINK;
    }
    int32_t start = t->cursors[socket_slot];
    if (start < 0 || t->links[start].pub == NULL || t->links[start].socket_slot != socket_slot)
    {
        start = t->socket_first[socket_slot];
        if (start < 0)
        {
            return EXON_LT_NO_CREDIT;
        }
    }
    int32_t i = start;
    do /* round-robin over the socket's own ring */
    {
        exon_lt_link_t *l = &t->links[i];
        if (l->sent < l->limit)
        {
            if (length > l->max_out)
            {
                return EXON_LT_TOO_LARGE;
            }
            int64_t rc = lt_offer(t, l, payload, length);
            if (rc < 0)
            {
                return rc;
            }
            t->cursors[socket_slot] = t->ring_next[i];
            return i;
        }
        i = t->ring_next[i];
    }
    while (i != start);
    return EXON_LT_NO_CREDIT;
}

int64_t exon_lt_send_held(exon_link_table_t *t, int32_t socket_slot, int32_t link,
                          uint32_t hold, const char *payload, int32_t length)
{
    int64_t reason = exon_lt_hold_reason(hold);
    return reason != 0 ? reason : exon_lt_send(t, socket_slot, link, payload, length);
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

#define LT_OPEN_FOR_CORE 0  /* another kind of frame, or a check failed: left as it came */
#define LT_OPEN_OPENED 1    /* opened in place */
#define LT_OPEN_DROPPED 2   /* did not open: to be dropped and counted */

/* A sealed DATA or FLOW of an attached encrypted link that passes the fast path's checks,
 * opened in place: the plaintext lands where the ciphertext was (frame + 8 + 20), the
 * plaintext header is written in front of it and the descriptor moves 8 bytes on, so the
 * bytes are passed over once. LT_OPEN_FOR_CORE: another kind of frame or a check failed
 * (the frame left as it came: the core decides). LT_OPEN_DROPPED: it did not open
 * (altered, injected, replayed, sealed for another link); its ciphertext may be
 * overwritten now (libsodium's AES-256-GCM fills a failed open's output), so it is
 * dropped here, never handed on. The core, opening it with the same seal (one receive
 * counter), would have failed the same way. */
static int lt_open(exon_link_table_t *t, int32_t key, uint8_t *copy_buf, exon_lt_desc_t *d)
{
    uint8_t *frame = copy_buf + d->offset;
    int32_t length = d->length;
    if (key < 0 || length < EXON_LT_HEADER_LENGTH + EXON_SEAL_OVERHEAD ||
        frame[0] != EXON_PROTOCOL_VERSION || frame[1] != 0 ||
        lt_get_u32(frame + 4) != (uint32_t)(length - 8))
    {
        return LT_OPEN_FOR_CORE;
    }
    int32_t i = lt_find(t, key, lt_get_u32(frame + 12), lt_get_u32(frame + 8));
    if (i < 0)
    {
        return LT_OPEN_FOR_CORE;
    }
    exon_lt_link_t *l = &t->links[i];
    if (l->seal == NULL || lt_get_u32(frame + 16) != l->peer_incarnation)
    {
        return LT_OPEN_FOR_CORE;
    }
    int32_t n = length - EXON_LT_HEADER_LENGTH - EXON_SEAL_OVERHEAD;
    if (frame[3] == EXON_MSG_DATA)
    {
        if (l->received >= l->advertised || n > l->max_in)
        {
            return LT_OPEN_FOR_CORE;
        }
    }
    else if (frame[3] != EXON_MSG_FLOW || n != 16 || l->hold_flow != 0)
    {
        return LT_OPEN_FOR_CORE;
    }
    uint8_t *plain = frame + EXON_LT_HEADER_LENGTH + EXON_SEAL_COUNTER_LENGTH;
    if (exon_seal_open(l->seal, frame, frame + EXON_LT_HEADER_LENGTH,
                       length - EXON_LT_HEADER_LENGTH, plain) != n)
    {
        return LT_OPEN_DROPPED;
    }
    uint8_t header[EXON_LT_HEADER_LENGTH];
    memcpy(header, frame, EXON_LT_HEADER_LENGTH);
    header[2] = EXON_PROTO_SOCKETS;
    lt_put_u32(header + 4, (uint32_t)(12 + n));
    memcpy(frame + EXON_SEAL_COUNTER_LENGTH, header, EXON_LT_HEADER_LENGTH);
    d->offset += EXON_SEAL_COUNTER_LENGTH;
    d->length = EXON_LT_HEADER_LENGTH + n;
    return LT_OPEN_OPENED;
}

int exon_lt_frame_malformed(const uint8_t *frame, int32_t length)
{
    if (length < EXON_FIXED_HEADER_LENGTH || frame[0] != EXON_PROTOCOL_VERSION || frame[1] != 0 ||
        lt_get_u32(frame + 4) != (uint32_t)(length - EXON_FIXED_HEADER_LENGTH))
    {
        return 1;
    }
    if (frame[2] == EXON_PROTO_SOCKETS)
    {
        return length < EXON_LT_HEADER_LENGTH || frame[3] < EXON_MSG_ERROR || frame[3] > EXON_MSG_FLOW;
    }
    if (frame[2] == EXON_PROTO_SEALED) /* a sockets frame of an encrypted link (2.20) */
    {
        return length < EXON_LT_HEADER_LENGTH + EXON_SEAL_OVERHEAD || frame[3] < EXON_MSG_ERROR ||
               frame[3] > EXON_MSG_FLOW;
    }
    if (frame[2] == EXON_PROTO_NODES)
    {
        return frame[3] != 0x01 && frame[3] != 0x02; /* HELLO, FRAGMENT (2.14) */
    }
    return 1;
}

/* An image whose recent messages are mostly malformed (at least 64 seen). */
static inline bool lt_garbage_image(const exon_image_t *img)
{
    return img->lt_polled >= 64 && img->lt_malformed * 2 > img->lt_polled;
}

/* Poll up to `quota` messages of one image into out[*n...] (the malformed ones get no
 * descriptor): the messages consumed (>= 0), or EXON_E_FULL (*needed: the bytes the first
 * message needs) / another error code of exon_image_poll. */
static int lt_poll_image(exon_link_table_t *t, exon_image_t *img, int32_t index, int32_t quota,
                         uint8_t *copy_buf, int32_t copy_cap, int32_t *used, int32_t *n,
                         exon_lt_desc_t *out, exon_fragment_t *scratch, int32_t *needed)
{
    int32_t got_used = 0;
    int rc = exon_image_poll(img, scratch, quota, quota, copy_buf + *used, copy_cap - *used, &got_used);
    if (rc < 0)
    {
        *needed = got_used;
        return rc;
    }
    int32_t malformed = 0;
    for (int32_t k = 0; k < rc; k++)
    {
        const uint8_t *frame = copy_buf + *used + scratch[k].offset;
        if (exon_lt_frame_malformed(frame, scratch[k].length))
        {
            malformed++;
            continue;
        }
        exon_lt_desc_t *d = &out[(*n)++];
        d->image = index;
        d->offset = *used + scratch[k].offset;
        d->length = scratch[k].length;
        d->link = -1;
        d->slot = -1;
    }
    *used += got_used;
    if (rc > 0)
    {
        img->lt_polled += rc;
        img->lt_malformed += malformed;
        t->malformed_dropped += malformed;
        if (img->lt_polled > 4096) /* decay: the last few thousand messages count */
        {
            img->lt_polled /= 2;
            img->lt_malformed /= 2;
        }
    }
    return rc;
}

int exon_lt_poll(exon_link_table_t *t, exon_image_t **images, int32_t count, int32_t max_messages, uint8_t *copy_buf, int32_t copy_cap,
                 int32_t *copy_used, exon_lt_desc_t *out, exon_fragment_t *scratch)
{
    int32_t n = 0;     /* descriptors */
    int32_t taken = 0; /* messages consumed, malformed ones too: the batch's bound */
    int32_t used = 0;
    *copy_used = 0;
    int32_t open = 0;
    for (int32_t img = 0; img < count; img++)
    {
        open += images[img] != NULL && !images[img]->closed;
    }
    if (open == 0 || max_messages <= 0)
    {
        return 0;
    }
    int32_t share = max_messages / open;
    if (share < EXON_LT_MIN_SHARE)
    {
        share = EXON_LT_MIN_SHARE;
    }
    int32_t start = (t->poll_next >= 0 && t->poll_next < count) ? t->poll_next : 0;
    t->poll_next = start + 1 < count ? start + 1 : 0;
    bool any_more = false;
    for (int pass = 0; pass < 2 && taken < max_messages; pass++)
    {
        if (pass == 1 && !any_more)
        {
            break;
        }
        for (int32_t j = 0; j < count && taken < max_messages; j++)
        {
            int32_t index = (start + j) % count;
            exon_image_t *img = images[index];
            if (img == NULL || img->closed)
            {
                continue;
            }
            bool garbage = lt_garbage_image(img);
            int32_t quota = max_messages - taken;
            if (pass == 0)
            {
                int32_t cap = garbage ? EXON_LT_GARBAGE_SHARE : share;
                quota = quota < cap ? quota : cap;
            }
            else if (garbage)
            {
                continue; /* no second helping for a garbage image */
            }
            int32_t needed = 0;
            int rc = lt_poll_image(t, img, index, quota, copy_buf, copy_cap, &used, &n, out,
                                   scratch, &needed);
            if (rc == EXON_E_FULL)
            {
                if (taken == 0)
                {
                    *copy_used = needed;
                    return rc;
                }
                *copy_used = used;
                return n; /* the rest next time */
            }
            if (rc < 0)
            {
                return rc;
            }
            taken += rc;
            any_more |= rc == quota && !garbage; /* it may have more */
        }
    }
    *copy_used = used;
    return n;
}

int exon_lt_classify(exon_link_table_t *t, exon_image_t **images, const int32_t *image_keys,
                     uint8_t *copy_buf, exon_lt_desc_t *descs, int32_t count)
{
    /* After an image's first message for the core, every later one of that image goes to
     * the core too (order). An image's messages may come in two runs (exon_lt_poll), so the
     * mark is per image; images past the bitmap share one mark (conservative: more go to
     * the core, never fewer). */
    uint8_t slow[256 / 8];
    memset(slow, 0, sizeof(slow));
    bool slow_far = false;
    int fast = 0;
    for (int32_t k = 0; k < count; k++)
    {
        exon_lt_desc_t *d = &descs[k];
        int32_t img = d->image;
        bool near = img >= 0 && img < 256;
        d->slot = -1;
        if (near ? (slow[img >> 3] >> (img & 7)) & 1 : slow_far)
        {
            d->link = -1;
            continue;
        }
        /* a plaintext frame goes on as an opened one does */
        bool sealed = d->length > 2 && copy_buf[d->offset + 2] == EXON_PROTO_SEALED;
        int opened = sealed ? lt_open(t, image_keys[img], copy_buf, d) : LT_OPEN_OPENED;
        if (opened == LT_OPEN_DROPPED)
        {
            /* counted once, here (the core never sees it: nothing of the link changes, so
             * the image's later messages may stay fast); garbage for the image's share of
             * the next polls, as the core's drops are (note_garbage, 2.17) */
            d->link = EXON_LT_DROPPED;
            t->unopened_dropped++;
            if (images != NULL && images[img] != NULL)
            {
                images[img]->lt_malformed++;
            }
            continue;
        }
        if (opened == LT_OPEN_FOR_CORE)
        {
            d->link = -1; /* for the core, which opens it or drops and counts it */
            if (near)
            {
                slow[img >> 3] |= (uint8_t)(1u << (img & 7));
            }
            else
            {
                slow_far = true;
            }
            continue;
        }
        d->link = lt_classify(t, image_keys[img], copy_buf + d->offset, d->length);
        if (d->link == -1)
        {
            if (near)
            {
                slow[img >> 3] |= (uint8_t)(1u << (img & 7));
            }
            else
            {
                slow_far = true;
            }
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
            if (lt_offer_flow(t, l) >= 0)
            {
                return EXON_LT_DELIVER_NONE;
            }
        }
        return EXON_LT_DELIVER_DUE;
    }
    if (l->flow_timer != 0)
    {
        return EXON_LT_DELIVER_NONE; /* the core's FLOW timer is armed */
    }
    if (t->flow_delay_ns > 0 && l->capacity > 0)
    {
        if (t->flow_deadline[link] == 0)
        {
            int64_t deadline = exon_nano_clock_ns() + t->flow_delay_ns;
            t->flow_deadline[link] = deadline > 0 ? deadline : 1;
            t->flow_queue[(t->flow_head + t->flow_count) % t->capacity] = link;
            t->flow_count++;
        }
        return EXON_LT_DELIVER_NONE;
    }
    return EXON_LT_DELIVER_FIRST;
}

void exon_lt_set_flow_delay(exon_link_table_t *t, int64_t delay_ns)
{
    t->flow_delay_ns = delay_ns > 0 ? delay_ns : 0;
}

int64_t exon_lt_next_flow_ns(const exon_link_table_t *t)
{
    return t->flow_count > 0 ? t->flow_deadline[t->flow_queue[t->flow_head]] : -1;
}

int32_t exon_lt_flush_flows(exon_link_table_t *t, int64_t now_ns)
{
    int32_t sent = 0;
    int32_t budget = t->flow_count; /* a refused FLOW goes back to the tail: once per call */
    while (budget-- > 0 && t->flow_count > 0)
    {
        int32_t link = t->flow_queue[t->flow_head];
        if (t->flow_deadline[link] > now_ns)
        {
            break;
        }
        t->flow_head = (t->flow_head + 1) % t->capacity;
        t->flow_count--;
        t->flow_deadline[link] = 0;
        exon_lt_link_t *l = &t->links[link];
        if (l->pub == NULL || l->capacity == 0 || l->delivered == l->flowed_delivered)
        {
            continue; /* detached since, or a FLOW already went out */
        }
        if (lt_offer_flow(t, l) >= 0)
        {
            sent++;
        }
        else
        {
            int64_t deadline = now_ns + t->flow_delay_ns;
            t->flow_deadline[link] = deadline > 0 ? deadline : 1;
            t->flow_queue[(t->flow_head + t->flow_count) % t->capacity] = link;
            t->flow_count++;
        }
    }
    return sent;
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
    exon_spin_policy_t *policy = exon_spin_policy_of_thread();
    int64_t budget = (timeout_ns < 0 || spin_ns < timeout_ns) ? exon_spin_policy_budget(policy, spin_ns) : 0;
    if (budget > 0)
    {
        int64_t end = start + budget;
        for (uint32_t k = 0;; k++)
        {
            if (lt_any_available(images, count))
            {
                exon_spin_policy_outcome(policy, true);
                return 1;
            }
            if (exon_doorbell_read(doorbell) != bell)
            {
                exon_spin_policy_outcome(policy, true);
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
        exon_spin_policy_outcome(policy, false);
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
