/*
 * exon_link_table.h: the native DATA fast path of exon's sockets (exon/middleware).
 *
 * A table of established links. Per link: the peer node's exclusive publication, the tags
 * and incarnations, and both halves of the AMQP-style credit ledger (sender: limit/sent;
 * receiver: advertised/received/delivered/flowed). The Python core (exon.core) stays the
 * authority for everything else; for an attached link its CreditLedger reads and writes
 * these counters in place (exon.middleware.fastpath), so there is one copy of each count.
 *
 *  - exon_lt_send: pick a link of a socket (round-robin over links with credit, or a given
 *    link), write the 20-byte exon DATA header + payload in one offer, spend one credit.
 *  - exon_lt_poll: poll a set of images into one copy buffer (no lock needed);
 *    exon_lt_classify (under the lock): DATA of an attached link with credit and within
 *    size -> a fast descriptor (link index; `received` counted here); anything else -> a
 *    slow descriptor for the core; a FLOW of an attached link without pending cookies
 *    (hold_flow == 0) is applied here (limit and confirmed are maxima, as in the core) and
 *    marked EXON_LT_FLOW_*. After the first slow message of an image in one batch,
 *    every later message of that image is slow too (the core may change the link).
 *  - exon_lt_deliver: count one message handed to the application (exon_lt_deliver_many:
 *    several at once); tells when a FLOW is due (or when a FLOW timer must be armed).
 *  - Encrypted links (`seal` set): every DATA and FLOW sent here is sealed (exon_seal.h,
 *    docs/protocol.md 2.20), and a sealed DATA or FLOW of an attached link that passes the
 *    checks above is opened in classify: the copy buffer then holds its plaintext frame
 *    (the descriptor moves 8 bytes on and shrinks by the seal's 24), as a plaintext link's
 *    would. Both run in place, one pass over the bytes: a DATA or FLOW that fits one frame
 *    is sealed straight into a claim of the term (exon_publication_try_claim), and a
 *    sealed frame is opened where it lies in the copy buffer. A sealed frame that fails a
 *    check is left sealed, as it came, for the core, which opens it with the same seal
 *    (one counter) or drops and counts it; one that passes the checks but does not open
 *    (its ciphertext may be overwritten by then) is dropped here, EXON_LT_DROPPED, and
 *    counted in unopened_dropped.
 *
 * Thread safety: none. The caller serialises every call on a table (the Node's lock), and
 * exon_lt_poll needs the poll role of the Node as well (one reader per image).
 */
#ifndef EXON_LINK_TABLE_H
#define EXON_LINK_TABLE_H

#include <stdint.h>

#include "common/exon_common.h"
#include "client/exon_image.h"
#include "common/exon_layout.h"
#include "client/exon_publication.h"
#include "link/exon_seal.h"

#define EXON_LT_HEADER_LENGTH EXON_SOCKET_HEADER_LENGTH

/* ---- why a message did not take the fast path: the one rule ---------------------------
 * Every native send (exon_lt_send, the doors of exon/native/fastpath, the sockets' Python
 * send through exon.middleware.fastpath) decides here, and the Python side acts only on
 * the code it gets back: >= 0 sent (the link used); EXON_LT_BACK_PRESSURED or
 * EXON_LT_ADMIN_ACTION: offer again (up to EXON_LT_OFFER_SPINS times, yielding the CPU
 * after EXON_LT_OFFER_YIELD_AFTER); anything else: the core's path, which then waits,
 * records the cookie or raises, by the same counters. Aeron's offer outcomes keep their
 * values (-1..-5; nothing was spent); exon's own reasons are -100 and below. */
#define EXON_LT_NOT_CONNECTED EXON_PUBLICATION_NOT_CONNECTED /* no subscriber yet */
#define EXON_LT_BACK_PRESSURED EXON_PUBLICATION_BACK_PRESSURED /* offer again */
#define EXON_LT_ADMIN_ACTION EXON_PUBLICATION_ADMIN_ACTION /* offer again */
#define EXON_LT_PUB_CLOSED EXON_PUBLICATION_CLOSED
#define EXON_LT_MAX_POSITION EXON_PUBLICATION_MAX_POSITION_EXCEEDED
#define EXON_LT_NO_CREDIT (-100)   /* no attached link of the socket has credit */
#define EXON_LT_TOO_LARGE (-101)   /* payload above the peer's max message size */
#define EXON_LT_NO_LINK (-102)     /* the given link is not attached to the socket */
#define EXON_LT_COOKIE (-103)      /* the send carries a cookie: the core records it */
#define EXON_LT_BACKLOG (-104)     /* frames wait in the Node's backlog: they go first */
#define EXON_LT_CLOSED (-105)      /* the socket or its doors closed */

/* The caller's state that holds a message off the fast path, as bits (`hold`). */
#define EXON_LT_HOLD_COOKIE 1u
#define EXON_LT_HOLD_BACKLOG 2u
#define EXON_LT_HOLD_CLOSED 4u

/* exon_lt_send's `link`: round-robin over the socket's links with credit, or no link
 * (the caller found none: EXON_LT_NO_LINK, as a link of another socket would get). */
#define EXON_LT_ROUND_ROBIN (-1)
#define EXON_LT_LINK_NONE (-2)

/* Offers refused by back pressure or an admin action are made again, at most this many
 * times, yielding the CPU after the first EXON_LT_OFFER_YIELD_AFTER (exon.middleware). */
#define EXON_LT_OFFER_SPINS 200
#define EXON_LT_OFFER_YIELD_AFTER 20

/* The fast-path guard: 0 when `hold` lets the message try the link table, else the reason
 * (closed before backlog before cookie). Used by exon_lt_send_held and every door. */
static inline int64_t exon_lt_hold_reason(uint32_t hold)
{
    if (hold == 0)
    {
        return 0;
    }
    if (hold & EXON_LT_HOLD_CLOSED)
    {
        return EXON_LT_CLOSED;
    }
    return (hold & EXON_LT_HOLD_BACKLOG) ? EXON_LT_BACKLOG : EXON_LT_COOKIE;
}

/* exon_lt_desc_t.link of a FLOW applied natively: EXON_LT_FLOW_DONE, or
 * EXON_LT_FLOW_CREDIT - index when it gave credit to a link that had none (wake senders).
 * EXON_LT_DROPPED (the same value as FLOW_DONE: nothing is left to do for either): a
 * sealed frame that did not open, dropped and counted (t->unopened_dropped). */
#define EXON_LT_FLOW_DONE (-2)
#define EXON_LT_FLOW_CREDIT (-3)
#define EXON_LT_DROPPED EXON_LT_FLOW_DONE

#define EXON_LT_DELIVER_NONE 0
#define EXON_LT_DELIVER_FIRST 1    /* first delivery since the last FLOW: arm a FLOW timer */
#define EXON_LT_DELIVER_DUE 2      /* a batch of deliveries: send a FLOW now */

typedef struct exon_lt_link_stct
{
    exon_publication_t *pub;       /* towards the peer node; NULL: not attached */
    uint64_t limit;                /* sender half: may send sequence numbers < limit */
    uint64_t sent;
    uint64_t advertised;           /* receiver half: last limit told to the peer */
    uint64_t received;
    uint64_t delivered;
    uint64_t flowed_delivered;     /* delivered count of our last FLOW */
    uint64_t batch;                /* deliveries per FLOW */
    uint64_t confirmed;            /* sender half: the peer's application got this many */
    uint64_t hold_flow;            /* != 0 (cookies pending): FLOWs go to the core */
    uint64_t flow_timer;           /* != 0: the core's FLOW timer is armed (set by the core) */
    uint64_t capacity;             /* receiver half: the window a FLOW grants (limit =
                                    * max(advertised, delivered + capacity)); 0: the core
                                    * sends every FLOW. Set by the core (memory budget). */
    uint32_t source_tag;           /* ours */
    uint32_t destination_tag;      /* the peer's */
    uint32_t incarnation;          /* ours, written in every DATA header */
    uint32_t peer_incarnation;     /* the peer's, expected in every DATA received */
    int32_t peer_key;              /* the peer node (an image's key), >= 0 */
    int32_t socket_slot;           /* the local socket */
    int32_t max_out;               /* largest payload the peer accepts */
    int32_t max_in;                /* largest payload we accept */
    exon_seal_t *seal;             /* encrypted link: its keys (owned by the core's record) */
}
exon_lt_link_t;

typedef struct exon_lt_desc_stct
{
    int32_t link;                  /* >= 0: fast DATA of that link; -1: for the core */
    int32_t image;                 /* index into the polled images */
    int32_t offset;                /* of the whole exon frame in the copy buffer */
    int32_t length;                /* of the whole exon frame */
    int32_t slot;                  /* fast DATA / FLOW: the link's socket slot; else -1 */
}
exon_lt_desc_t;

typedef struct exon_link_table_stct
{
    exon_lt_link_t *links;
    int32_t capacity;
    int32_t high;                  /* links[0, high) may be attached */
    int32_t *cursors;              /* per socket slot: the link to try first (checked) */
    int32_t socket_capacity;
    /* Per socket slot, a ring of its active links (round-robin sends walk only the
     * socket's own links), and a hash of the active links by (peer key, source tag,
     * destination tag) (a received frame finds its link without walking the table): the
     * cost of a message does not grow with the number of links. */
    int32_t *socket_first;         /* per socket slot: one of its active links, or -1 */
    int32_t *ring_next;            /* per link: the next active link of its socket */
    int32_t *ring_prev;
    int32_t *index;                /* open addressing (linear probing); -1: empty */
    uint32_t index_mask;
    int32_t free_hint;             /* reserve starts looking here */
    /* The FLOW timers of attached links, kept here rather than in the core when
     * flow_delay_ns > 0: a delivery that leaves a FLOW pending queues its link once, with
     * the deadline now + flow_delay_ns; exon_lt_flush_flows sends the FLOWs whose deadline
     * passed. The delay is constant, so the queue is in deadline order. */
    int64_t flow_delay_ns;         /* 0: the core arms every FLOW timer (DELIVER_FIRST) */
    int64_t *flow_deadline;        /* per link: its deadline while queued, else 0 */
    int32_t *flow_queue;           /* ring of queued links, each at most once */
    int32_t flow_head;
    int32_t flow_count;
    uint8_t *seal_buf;             /* sealing scratch of fragmented frames (grows) */
    int32_t seal_cap;
    /* Fairness of exon_lt_poll (docs/protocol.md 2.17): the image polled first rotates, and
     * messages that are no exon frame (exon_lt_frame_malformed) are dropped there. */
    int32_t poll_next;             /* the image the next poll starts with */
    int64_t malformed_dropped;     /* messages dropped by exon_lt_poll as malformed */
    int64_t unopened_dropped;      /* sealed frames exon_lt_classify dropped: did not open */
}
exon_link_table_t;

int exon_lt_init(exon_link_table_t *t, int32_t capacity, int32_t socket_capacity);
void exon_lt_close(exon_link_table_t *t);
/* A free link index (its record zeroed), or EXON_E_NO_SPACE. The caller fills it in and
 * then makes it live with exon_lt_activate; exon_lt_detach frees it. */
int32_t exon_lt_reserve(exon_link_table_t *t);
/* Make a reserved link live: index it (its socket's ring, the hash) and set `pub`, last.
 * EXON_E_STATE (nothing changed) when an active link already has the same peer key and
 * tags, or the link is not reserved; EXON_E_ARGUMENT for a bad index, slot or pub. */
int exon_lt_activate(exon_link_table_t *t, int32_t link, exon_publication_t *pub);
void exon_lt_detach(exon_link_table_t *t, int32_t link);

/* link >= 0: that link; EXON_LT_ROUND_ROBIN: round-robin over the socket's attached
 * links with credit; EXON_LT_LINK_NONE (or below): none. Returns the link index used
 * (>= 0) or a reason above (EXON_LT_NO_CREDIT / EXON_LT_TOO_LARGE / EXON_LT_NO_LINK / an
 * Aeron outcome, nothing spent) or an error. */
int64_t exon_lt_send(exon_link_table_t *t, int32_t socket_slot, int32_t link,
                     const char *payload, int32_t length);
/* exon_lt_send unless exon_lt_hold_reason(hold) says why the message may not try. */
int64_t exon_lt_send_held(exon_link_table_t *t, int32_t socket_slot, int32_t link,
                          uint32_t hold, const char *payload, int32_t length);

/* 1 when the message can be no frame of the exon layer (2.1, 2.14): shorter than 8 bytes,
 * another version, a remaining_length that disagrees, an unknown protocol, a sockets
 * frame shorter than 20 bytes or of an unknown type, a node frame other than HELLO or
 * FRAGMENT. The Python side would drop each of these too (never answered). */
int exon_lt_frame_malformed(const uint8_t *frame, int32_t length);

#define EXON_LT_MIN_SHARE 16       /* messages an image may always take per poll */
#define EXON_LT_GARBAGE_SHARE 4    /* ... one whose messages are mostly malformed */

/* Poll images[0, count) (under the table's lock: it moves t->poll_next) into copy_buf:
 * fills out[0, n) (n returned) with descriptors (link = -1); *copy_used is the bytes used.
 * EXON_E_FULL with *copy_used = needed when the first message does not fit.
 * Fair: starting with the image after the last poll's first, each image takes at most
 * max(EXON_LT_MIN_SHARE, max_messages / open images) messages, and one whose recent
 * messages were mostly malformed EXON_LT_GARBAGE_SHARE; what is left of max_messages then
 * goes to the images (not the garbage ones) that had more, in the same order (an image's
 * messages then come in two runs). Malformed messages are counted (the image's
 * lt_malformed, t->malformed_dropped) and get no descriptor. */
int exon_lt_poll(exon_link_table_t *t, exon_image_t **images, int32_t count,
                 int32_t max_messages, uint8_t *copy_buf, int32_t copy_cap,
                 int32_t *copy_used, exon_lt_desc_t *out, exon_fragment_t *scratch);

/* Classify polled messages (under the table's lock): image i's peer key is image_keys[i]
 * (< 0: unknown peer); `images` are the ones polled (NULL: none to charge a dropped frame
 * to, for the poll's fairness). A sealed DATA or FLOW of an attached encrypted link that
 * does not open is dropped: EXON_LT_DROPPED, counted in unopened_dropped and in its
 * image's lt_malformed. DATA of an attached link (matching peer incarnation, within the
 * advertised limit and max_in) gets its link index and counts `received`; a well-formed
 * FLOW of an attached link (matching incarnation, hold_flow == 0) is applied and gets
 * EXON_LT_FLOW_DONE or EXON_LT_FLOW_CREDIT - index; the rest keeps -1, and so does every
 * later message of an image after its first slow one. Returns the number of fast DATA. */
int exon_lt_classify(exon_link_table_t *t, exon_image_t **images, const int32_t *image_keys,
                     uint8_t *copy_buf, exon_lt_desc_t *descs, int32_t count);

/* Wait for data on images[0, count) (NULL entries skipped) or a ring of `doorbell`: spin
 * (CPU pause, no syscall, no waiters registered, so writers do not ring) for up to spin_ns,
 * then park in exon_image_wait for the rest of timeout_ns (count 0: exon_doorbell_wait).
 * Returns 1 (data), 0 (rung / woken) or EXON_E_TIMEOUT. Thread-safe like exon_image_wait;
 * the caller releases the GIL (cffi does). */
int exon_lt_wait(exon_image_t **images, int32_t count, int32_t *doorbell, int64_t spin_ns,
                 int64_t timeout_ns);

/* One message of `link` handed to the application: EXON_LT_DELIVER_*. When a batch is due
 * and `capacity` > 0, the FLOW (delivered, max(advertised, delivered + capacity)) is offered here on the
 * link's publication (flowed_delivered and advertised move as in the core's make_flow) and
 * NONE is returned; DUE only when that offer failed (the core sends it). FIRST: deliveries
 * wait for a FLOW and no core FLOW timer is armed (flow_timer == 0): arm one. */
int64_t exon_lt_deliver(exon_link_table_t *t, int32_t link);
/* Native FLOW timers (see exon_link_table_t.flow_delay_ns): delay_ns > 0 turns them on. */
void exon_lt_set_flow_delay(exon_link_table_t *t, int64_t delay_ns);
/* Send the FLOW of every queued link whose deadline is <= now_ns and whose deliveries
 * still wait for one (a FLOW refused by back pressure is queued again). Returns the FLOWs
 * sent. */
int32_t exon_lt_flush_flows(exon_link_table_t *t, int64_t now_ns);
/* The earliest queued FLOW deadline (exon_nano_clock_ns), or -1 when none is queued. */
int64_t exon_lt_next_flow_ns(const exon_link_table_t *t);
/* `count` (>= 0) messages of `link` handed to the application at once (a batch receive, or
 * the confirmation of held messages): like exon_lt_deliver, with one due-check for the
 * whole count, so at most one FLOW, reporting the new `delivered`. 0 changes nothing. */
int64_t exon_lt_deliver_many(exon_link_table_t *t, int32_t link, int64_t count);

#endif /* EXON_LINK_TABLE_H */
