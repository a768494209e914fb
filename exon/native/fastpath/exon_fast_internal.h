/*
 * exon_fast_internal.h: what the translation units of exon.native._fast share (not an API).
 *
 * The module is four sources, one per concern, and this header:
 *   exon_fast.c         the module: Offer, the link table's calls (LinkSend, LinkSendMany,
 *                       LinkDeliver), poll_batch, the Node's lock, the doors' common parts,
 *                       SocketSend and SocketReceive, the binds;
 *   exon_fast_inbox.c   RecvQueue, a socket's one receive queue;
 *   exon_fast_pubsub.c  PubSend and SubReceive (PUB, SUB);
 *   exon_fast_peers.c   PeerRoutes, PeerSend, PeerReceive (ROUTER, DEALER).
 * The small calls the hot paths make across files are static inline here (door_send,
 * node_lock_give, door_hold, the queue's pops); the rest are plain functions, hidden in the
 * module (built with -fvisibility=hidden: only PyInit__fast is exported).
 */
#ifndef EXON_FAST_INTERNAL_H
#define EXON_FAST_INTERNAL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <time.h>
#include <stddef.h>
#include <stdint.h>

#include "exon_fast_mutex.h"

#include "link/exon_link_table.h" /* layouts, constants, exon_lt_hold_reason: nothing linked */

/* ---- the link table's calls, bound once by exon/native/__init__.py (exon_fast.c) ---------- */

typedef int64_t (*exon_lt_send_fn)(void *table, int32_t slot, int32_t link, const char *buf, int32_t length);
typedef int64_t (*exon_lt_deliver_fn)(void *table, int32_t link);
typedef int64_t (*exon_lt_deliver_many_fn)(void *table, int32_t link, int64_t count);

extern exon_lt_send_fn lt_send_fn;
extern exon_lt_deliver_fn lt_deliver_fn;
extern exon_lt_deliver_many_fn lt_deliver_many_fn;

/* A door's send of at least SEND_WITHOUT_GIL bytes runs without the GIL: its copy into the
 * log and, on an encrypted link, its seal (about a microsecond per KiB) let the process's
 * other threads run meanwhile. A smaller one keeps the GIL: giving it up and taking it back
 * costs more than such a send. The door holds the Node's lock, which guards the table. */
#define SEND_WITHOUT_GIL 4096

static inline int64_t door_send(void *table, int32_t slot, int32_t link, const char *buf, int32_t length)
{
    if (length < SEND_WITHOUT_GIL)
    {
        return lt_send_fn(table, slot, link, buf, length);
    }
    int64_t rc;
    Py_BEGIN_ALLOW_THREADS
    rc = lt_send_fn(table, slot, link, buf, length);
    Py_END_ALLOW_THREADS
    return rc;
}

/* ---- the Node's lock (exon_fast.c) ------------------------------------------------------- */

typedef struct
{
    PyObject_HEAD
    int state;  /* exon_fast_mutex.h */
    int locked; /* for locked(): set by the holder */
    int doors_open;
    unsigned long long activity; /* calls the doors completed (the dispatcher watches it) */
}
NodeLockObject;

extern PyTypeObject NodeLockType;

int node_lock_take(NodeLockObject *l, int64_t timeout_us);

static inline void node_lock_give(NodeLockObject *l)
{
    l->locked = 0;
    exon_mutex_give(&l->state);
}

/* ---- what every door has (exon_fast.c) ---------------------------------------------------- */

/* The parts every door has. */
typedef struct
{
    PyObject_HEAD
    NodeLockObject *lock;
    PyObject *fallback;  /* the socket's Python method: called with the caller's arguments */
    PyObject *keep;      /* keeps the table's memory alive (send) / the queue (receive) */
    /* what a door type holds besides (NULL where unused): visited and cleared here, so
     * every door shares door_traverse, door_clear and door_dealloc */
    PyObject *backlog;      /* send doors: the Node's backlog dict (frames waiting for a
                             * publication go first) */
    PyObject *rest;         /* PubSend: callable(payload, k) after an offer failed midway */
    PyObject *routes;       /* ROUTER/DEALER doors: their PeerRoutes */
    PyObject *message_type; /* receive doors that build Messages of their own */
    int disabled;
    vectorcallfunc vectorcall;
}
DoorHead;

PyObject *door_fallback(DoorHead *d, PyObject *const *args, size_t nargsf, PyObject *kwnames);
int door_traverse(DoorHead *d, visitproc visit, void *arg);
int door_clear(DoorHead *d);
void door_dealloc(DoorHead *d);
int door_init_head(DoorHead *d, PyObject *lock, PyObject *fallback, PyObject *keep);
int door_keywords(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, int *cookie,
    PyObject **peer);

extern PyMethodDef door_methods[];

/* What holds a send door's call off the fast path (exon_lt_hold_reason judges): a
 * cookie, frames in the Node's backlog, the door or every door closed. Lock held. */
static inline uint32_t door_hold(DoorHead *d, int cookie)
{
    return (cookie ? EXON_LT_HOLD_COOKIE : 0u) |
           (PyDict_GET_SIZE(d->backlog) != 0 ? EXON_LT_HOLD_BACKLOG : 0u) |
           (!d->lock->doors_open || d->disabled ? EXON_LT_HOLD_CLOSED : 0u);
}

/* ---- a socket's receive queue (exon_fast_inbox.c) ------------------------------------------ */

#define RQ_FAST (-1) /* an item counted on its lane's link */

typedef struct
{
    PyObject *payload; /* NULL: a raw payload, the next in its lane's raw storage */
    int64_t account;   /* RQ_FAST, or the core's link incarnation */
}
rq_item_t;

typedef struct
{
    int open;
    PyObject *peer;        /* handed out with the items (an exon.Peer, or the core's PeerId) */
    PyObject *public_peer; /* the exon.Peer when `peer` is the core's PeerId (the SUB door's
                            * Messages carry it); else NULL */
    PyObject *key;         /* the core's PeerId: on_core's first argument, hold_buffer's counts */
    rq_item_t *items;
    uint32_t head;
    uint32_t count;
    uint32_t cap;
    int32_t link;          /* the attached link whose DATA lands here, or -1 */
    int32_t entry;         /* batch scratch: 1 + index of the lane's last count entry, or 0 */
    /* raw payloads (the queue's `raw` mode, see rq_push_raw): [u32 length][bytes] records in
     * arrival order in raw[raw_head, raw_tail); an item whose payload is NULL stands for the
     * next */
    uint8_t *raw;
    size_t raw_head;
    size_t raw_tail;
    size_t raw_cap;
}
rq_lane_t;

typedef struct
{
    PyObject_HEAD
    void *table;
    PyObject *owner;      /* keeps the table's memory alive */
    PyObject *on_due;     /* callable(link) */
    PyObject *on_core;    /* callable(key, incarnation, count) */
    PyTypeObject *message_type;
    rq_lane_t *lanes;
    int32_t lane_cap;     /* lanes allocated */
    int32_t lane_top;     /* lanes [0, lane_top) have been handed out once */
    int32_t *free_lanes;  /* closed lanes below lane_top, a stack */
    int32_t free_count;
    int open_lanes;       /* lanes open (handed out by open_lane, not closed since) */
    int32_t *link_lane;   /* per link index: the lane its DATA lands in, or -1 */
    int32_t link_cap;
    int32_t *ready;       /* ring of lane indexes (lane_cap slots), each at most once */
    int32_t ready_head;
    int32_t ready_count;
    Py_ssize_t total;
    int marked;           /* touched by the current dispatch */
    int direct;           /* set by the socket: no cookie waits, so a receive door may pop
                           * Messages from here (see SocketReceive) */
    int pass_all;         /* set by a SUB while it takes every published message: its door
                           * may hand them out without its filter (exon_fast_pubsub.c) */
    int raw;              /* set by a PULL that takes held batches as one buffer: the fast
                           * path's payloads are copied into the lanes' raw storage, no
                           * bytes object each */
    Py_ssize_t raw_count; /* items queued raw */
    vectorcallfunc vectorcall;
}
RecvQueueObject;

extern PyTypeObject RecvQueueType;

int link_index_arg(PyObject *arg, int32_t capacity, int32_t *link);
int rq_push(RecvQueueObject *q, int32_t lane, PyObject *payload, int64_t account);
int rq_push_raw(RecvQueueObject *q, int32_t lane, const char *data, int32_t length);
PyObject *rq_deliver_message(RecvQueueObject *q, PyObject *msg, PyObject *payload, PyObject *peer,
                                    int32_t lane, int32_t link, int64_t account);
PyObject *rq_take(RecvQueueObject *q);

/* A lane's ring above this many slots (the default credits) is freed when it empties: a
 * burst beyond them gives its storage back after the drain (the next one grows it again
 * from 64); up to them the ring stays, so a stream does not regrow it on every burst. */
#define RQ_KEEP_CAP 1024

/* Pop the next item of `l` (count > 0); the caller owns the payload reference. */
static inline rq_item_t rq_pop_lane(RecvQueueObject *q, rq_lane_t *l)
{
    rq_item_t item = l->items[l->head];
    l->head = (l->head + 1) % l->cap;
    l->count--;
    q->total--;
    if (l->count == 0 && l->cap > RQ_KEEP_CAP)
    {
        PyMem_Free(l->items);
        l->items = NULL;
        l->cap = 0;
        l->head = 0;
    }
    return item;
}

/* The lane at the head of the ready ring (ready_count > 0): the next to pop. */
static inline rq_lane_t *rq_next_lane(RecvQueueObject *q)
{
    return &q->lanes[q->ready[q->ready_head]];
}

/* Pop the next item in round-robin order (ready_count > 0): the lane at the head of the
 * ready ring, which goes back to the tail if it has more queued. The caller owns the
 * payload reference. */
static inline rq_item_t rq_pop_next(RecvQueueObject *q, int32_t *lane_out)
{
    int32_t lane = q->ready[q->ready_head];
    q->ready_head = (q->ready_head + 1) % q->lane_cap;
    q->ready_count--;
    rq_lane_t *l = &q->lanes[lane];
    rq_item_t item = rq_pop_lane(q, l);
    if (l->count > 0)
    {
        q->ready[(q->ready_head + q->ready_count) % q->lane_cap] = lane;
        q->ready_count++;
    }
    *lane_out = lane;
    return item;
}

/* ---- PUB and SUB (exon_fast_pubsub.c), ROUTER and DEALER (exon_fast_peers.c) ----------- */

extern PyTypeObject PubSendType;
extern PyTypeObject SubReceiveType;

PyObject *fast_prefix_matches(PyObject *module, PyObject *args);

int peer_doors_add_types(PyObject *module);
#endif /* EXON_FAST_INTERNAL_H */
