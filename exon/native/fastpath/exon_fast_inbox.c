/*
 * exon_fast_inbox.c: a socket's inbox, its one receive queue (a translation unit of
 * exon.native._fast, sharing exon_fast_internal.h; it calls the link table through the
 * pointers exon_fast.c binds).
 *
 * Every message a socket received and has not handed out waits here, whichever way it
 * came: the DATA of an attached link, queued by poll_batch (the fast path), and the
 * messages the core delivered (MessageReceived), queued by q.push. Per peer a lane: a
 * FIFO of items (payload bytes and how their delivery is counted) and the peer object the
 * items are handed out with. A ready ring of the lanes that have something queued gives
 * round-robin (fair) queuing over the peers; an attached link maps to its peer's lane
 * (attach, detach), so each peer's order holds whichever way its messages came.
 *
 * Delivery is counted when an item is popped, here and only here, by its account:
 *  - RQ_FAST: queued by the fast path while its link is attached: exon_lt_deliver on the
 *    lane's link; on_due(link) when the core must see it (a FLOW due, or a FLOW timer);
 *  - an incarnation (>= 0): the core's messages, and fast ones whose link detached since
 *    (detach turns them into these): on_core(key, incarnation, count), for the core to
 *    count (SocketCore.deliver_many).
 * q() pops one Message, take(n) a batch, both counted; hold_buffer(n) pops a batch without
 * counting it and says what count(...) must count later (PullSocket.confirm). Lanes are
 * opened by the socket (open_lane) and closed by it once idle (close_lane). Every call
 * under the Node's lock (the Python side serialises them).
 */

#include "exon_fast_internal.h"

#define RQ_FIRST_LANES 16

/* one line of a batch's bookkeeping: `count` items of `lane` with one account */
typedef struct
{
    int32_t lane;
    int32_t link;        /* RQ_FAST items: the link they count on; else -1 */
    int64_t account;
    int64_t count;
    int64_t incarnation; /* the link incarnation they are of (RQ_FAST: the link's) */
    PyObject *key;       /* the lane's key (a reference: the lane may close before it is used) */
}
rq_count_t;


/* Room for one more lane: the lane, free-stack and ready arrays doubled (the ready ring
 * laid out again from its head). 0, or -1 with an exception. */
static int rq_grow_lanes(RecvQueueObject *q)
{
    int32_t cap = q->lane_cap * 2;
    rq_lane_t *lanes = PyMem_Calloc((size_t)cap, sizeof(rq_lane_t));
    int32_t *ready = PyMem_Calloc((size_t)cap, sizeof(int32_t));
    int32_t *free_lanes = PyMem_Calloc((size_t)cap, sizeof(int32_t));
    if (lanes == NULL || ready == NULL || free_lanes == NULL)
    {
        PyMem_Free(lanes);
        PyMem_Free(ready);
        PyMem_Free(free_lanes);
        PyErr_NoMemory();
        return -1;
    }
    memcpy(lanes, q->lanes, sizeof(rq_lane_t) * (size_t)q->lane_cap);
    memcpy(free_lanes, q->free_lanes, sizeof(int32_t) * (size_t)q->free_count);
    for (int32_t k = 0; k < q->ready_count; k++)
    {
        ready[k] = q->ready[(q->ready_head + k) % q->lane_cap];
    }
    PyMem_Free(q->lanes);
    PyMem_Free(q->ready);
    PyMem_Free(q->free_lanes);
    q->lanes = lanes;
    q->ready = ready;
    q->free_lanes = free_lanes;
    q->ready_head = 0;
    q->lane_cap = cap;
    return 0;
}

/* Append an item to `lane` (its payload reference taken on success). 0, or -1 with an
 * exception (nothing changed). */
int rq_push(RecvQueueObject *q, int32_t lane, PyObject *payload, int64_t account)
{
    rq_lane_t *l = &q->lanes[lane];
    if (l->count == l->cap)
    {
        uint32_t cap = l->cap == 0 ? 64 : 2 * l->cap;
        rq_item_t *items = PyMem_Malloc(sizeof(rq_item_t) * cap);
        if (items == NULL)
        {
            PyErr_NoMemory();
            return -1;
        }
        for (uint32_t k = 0; k < l->count; k++)
        {
            items[k] = l->items[(l->head + k) % l->cap];
        }
        PyMem_Free(l->items);
        l->items = items;
        l->head = 0;
        l->cap = cap;
    }
    rq_item_t *item = &l->items[(l->head + l->count) % l->cap];
    item->payload = payload;
    item->account = account;
    if (l->count++ == 0)
    {
        q->ready[(q->ready_head + q->ready_count) % q->lane_cap] = lane;
        q->ready_count++;
    }
    q->total++;
    return 0;
}

/* ---- raw payloads: a PULL whose held batches go out as one buffer (hold_buffer) ---------
 *
 * With `raw` set, the fast path's payloads are copied into their lane's raw storage ([u32
 * length][bytes], in arrival order) and the lane's item holds NULL: no bytes object per
 * message. hold_buffer copies the payloads of a batch straight into one bytes object.
 * Every other way out of the queue (q(), take, the receive doors) turns the raw payloads
 * into bytes first (RQ_UNRAW), or leaves the call to one that does. */

/* A lane's raw storage above this is freed when it empties (below it stays, so a stream
 * does not regrow it for every batch). */
#define RQ_KEEP_RAW (1u << 20)
#define RQ_RAW_MIN (64u << 10)

static void rq_raw_free(rq_lane_t *l)
{
    PyMem_Free(l->raw);
    l->raw = NULL;
    l->raw_head = l->raw_tail = l->raw_cap = 0;
}

/* After payloads were taken out of a lane's raw storage: rewind it when empty, and give a
 * large one back. */
static void rq_raw_settle(rq_lane_t *l)
{
    if (l->raw_head == l->raw_tail)
    {
        l->raw_head = l->raw_tail = 0;
        if (l->raw_cap > RQ_KEEP_RAW)
        {
            rq_raw_free(l);
        }
    }
}

/* Queue `length` bytes at `data` raw in `lane`, counted on its link (RQ_FAST): 0, or -1
 * with an exception (nothing queued). */
int rq_push_raw(RecvQueueObject *q, int32_t lane, const char *data, int32_t length)
{
    rq_lane_t *l = &q->lanes[lane];
    size_t need = 4 + (size_t)length;
    if (l->raw_tail + need > l->raw_cap)
    {
        size_t live = l->raw_tail - l->raw_head;
        if (live + need <= l->raw_cap - l->raw_cap / 4)
        {
            memmove(l->raw, l->raw + l->raw_head, live); /* room enough once compacted */
        }
        else
        {
            size_t cap = l->raw_cap < RQ_RAW_MIN ? RQ_RAW_MIN : 2 * l->raw_cap;
            while (cap < live + need)
            {
                cap *= 2;
            }
            uint8_t *raw = PyMem_Malloc(cap);
            if (raw == NULL)
            {
                PyErr_NoMemory();
                return -1;
            }
            if (live)
            {
                memcpy(raw, l->raw + l->raw_head, live);
            }
            PyMem_Free(l->raw);
            l->raw = raw;
            l->raw_cap = cap;
        }
        l->raw_head = 0;
        l->raw_tail = live;
    }
    if (rq_push(q, lane, NULL, RQ_FAST) < 0)
    {
        return -1;
    }
    l = &q->lanes[lane];
    uint32_t n = (uint32_t)length;
    memcpy(l->raw + l->raw_tail, &n, 4);
    memcpy(l->raw + l->raw_tail + 4, data, (size_t)length);
    l->raw_tail += need;
    q->raw_count++;
    return 0;
}

/* The next raw payload of `l` (its item's payload was NULL): its bytes and length, taken
 * out. */
static inline const uint8_t *rq_raw_pop(rq_lane_t *l, uint32_t *length)
{
    memcpy(length, l->raw + l->raw_head, 4);
    const uint8_t *data = l->raw + l->raw_head + 4;
    l->raw_head += 4 + (size_t)*length;
    return data;
}

/* Turn every raw payload of the queue into a bytes object in its item, in order: 0, or -1
 * with an exception (those done stay done; the queue is whole either way). */
static int rq_unraw(RecvQueueObject *q)
{
    for (int32_t i = 0; i < q->ready_count && q->raw_count > 0; i++)
    {
        rq_lane_t *l = &q->lanes[q->ready[(q->ready_head + i) % q->lane_cap]];
        for (uint32_t k = 0; k < l->count && l->raw_head < l->raw_tail; k++)
        {
            rq_item_t *item = &l->items[(l->head + k) % l->cap];
            if (item->payload != NULL)
            {
                continue;
            }
            uint32_t length;
            memcpy(&length, l->raw + l->raw_head, 4);
            PyObject *payload = PyBytes_FromStringAndSize((const char *)l->raw + l->raw_head + 4, length);
            if (payload == NULL)
            {
                return -1;
            }
            item->payload = payload;
            l->raw_head += 4 + (size_t)length;
            q->raw_count--;
        }
        rq_raw_settle(l);
    }
    return 0;
}

#define RQ_UNRAW(q) ((q)->raw_count > 0 ? rq_unraw(q) : 0)

/* The callback a delivery needs, if any: on_due(link) after exon_lt_deliver said the core
 * must see it, on_core(key, account, count) for an item the core counts. 0, or -1 with an
 * exception. The lane is looked up again: a callback may have pushed (grown the lanes). */
static int rq_call_due(RecvQueueObject *q, int32_t link)
{
    PyObject *index = PyLong_FromLong(link);
    PyObject *r = index == NULL ? NULL : PyObject_CallOneArg(q->on_due, index);
    Py_XDECREF(index);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

static int rq_call_core(RecvQueueObject *q, PyObject *key, int64_t account, int64_t count)
{
    Py_INCREF(key);
    PyObject *r = PyObject_CallFunction(q->on_core, "OLL", key, (long long)account, (long long)count);
    Py_DECREF(key);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* Count the delivery of one popped item of `lane`: 0, or -1 with an exception. */
static int rq_count_one(RecvQueueObject *q, int32_t lane, int32_t link, int64_t account)
{
    if (account == RQ_FAST)
    {
        return lt_deliver_fn(q->table, link) == EXON_LT_DELIVER_NONE ? 0 : rq_call_due(q, link);
    }
    return rq_call_core(q, q->lanes[lane].key, account, 1);
}

/* Fill `msg` (a new 2-tuple of a receive queue's message type) with `payload` (its
 * reference taken) and `peer`, and count the delivery of the item (RQ_FAST: on `link`):
 * every receive door hands a Message out through here. The Message is not tracked by the
 * cycle collector: (bytes, peer) is in no cycle (see rq_pop_many). Returns msg; NULL with
 * an exception (msg released). */
PyObject *rq_deliver_message(RecvQueueObject *q, PyObject *msg, PyObject *payload, PyObject *peer,
                                    int32_t lane, int32_t link, int64_t account)
{
    PyTuple_SET_ITEM(msg, 0, payload);
    Py_INCREF(peer);
    PyTuple_SET_ITEM(msg, 1, peer);
    if (PyObject_IS_GC(msg))
    {
        PyObject_GC_UnTrack(msg);
    }
    if (rq_count_one(q, lane, link, account) < 0)
    {
        Py_DECREF(msg);
        return NULL;
    }
    return msg;
}

/* The next Message of a non-empty queue (ready_count > 0), its delivery counted; NULL with
 * an exception. */
PyObject *rq_take(RecvQueueObject *q)
{
    PyObject *msg = q->message_type->tp_alloc(q->message_type, 2);
    if (msg == NULL)
    {
        return NULL;
    }
    int32_t lane;
    rq_item_t item = rq_pop_next(q, &lane);
    rq_lane_t *l = &q->lanes[lane];
    return rq_deliver_message(q, msg, item.payload, l->peer, lane, l->link, item.account);
}

/* RecvQueue()() -> the next Message (delivery counted), or None when empty */
static PyObject *rq_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    RecvQueueObject *q = (RecvQueueObject *)self_obj;
    if (q->ready_count == 0)
    {
        Py_RETURN_NONE;
    }
    if (RQ_UNRAW(q) < 0)
    {
        return NULL;
    }
    return rq_take(q);
}

/* Note one popped item of `lane` in a batch's bookkeeping `counts` (*n entries so far):
 * consecutive items of a lane with the same account share an entry. */
static void rq_note(RecvQueueObject *q, rq_count_t *counts, Py_ssize_t *n, int32_t lane, int64_t account)
{
    rq_lane_t *l = &q->lanes[lane];
    if (l->entry > 0 && counts[l->entry - 1].account == account)
    {
        counts[l->entry - 1].count++;
        return;
    }
    rq_count_t *c = &counts[*n];
    c->lane = lane;
    c->link = account == RQ_FAST ? l->link : -1;
    c->account = account;
    c->count = 1;
    c->incarnation = account == RQ_FAST ? (int64_t)((exon_link_table_t *)q->table)->links[l->link].incarnation
                                        : account;
    c->key = Py_NewRef(l->key);
    l->entry = (int32_t)++*n;
}

/* Release the keys a batch's bookkeeping holds. */
static void rq_release_counts(rq_count_t *counts, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
    {
        Py_CLEAR(counts[i].key);
    }
}

/* Reset the lanes' batch scratch after a batch noted `n` entries. */
static void rq_unnote(RecvQueueObject *q, rq_count_t *counts, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
    {
        q->lanes[counts[i].lane].entry = 0;
    }
}

/* Count the deliveries of a batch's `counts`: first every RQ_FAST entry on its link (no
 * Python runs meanwhile, so no link can detach in between), then the callbacks in order.
 * Every count is made before an error surfaces. 0, or -1 with an exception. */
static int rq_count_batch(RecvQueueObject *q, rq_count_t *counts, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
    {
        rq_count_t *c = &counts[i];
        if (c->account == RQ_FAST)
        {
            int64_t rc = lt_deliver_many_fn(q->table, c->link, c->count);
            c->count = rc == EXON_LT_DELIVER_NONE ? 0 : 1; /* now: 1 = on_due is needed */
        }
    }
    PyObject *type = NULL;
    PyObject *value = NULL;
    PyObject *traceback = NULL;
    for (Py_ssize_t i = 0; i < n; i++)
    {
        rq_count_t *c = &counts[i];
        if (c->count == 0)
        {
            continue;
        }
        int rc = c->account == RQ_FAST ? rq_call_due(q, c->link) : rq_call_core(q, c->key, c->account, c->count);
        if (rc < 0 && type == NULL)
        {
            PyErr_Fetch(&type, &value, &traceback); /* the first error surfaces at the end */
        }
        else if (rc < 0)
        {
            PyErr_WriteUnraisable(q->on_core);
        }
    }
    if (type != NULL)
    {
        PyErr_Restore(type, value, traceback);
        return -1;
    }
    return 0;
}

/* Pop up to `max` (>= 1) Messages in round-robin order into a new list, without counting
 * their delivery: `counts` (room for `max` entries) gets the bookkeeping, *n_counts its
 * length. Every Message is allocated before anything is popped, so a failure (NULL, an
 * exception) leaves the queue as it was.
 *
 * The Messages are not tracked by the cycle collector: a (payload bytes, Peer) tuple can be
 * in no cycle (neither item refers to anything that could refer back to it). A batch keeps
 * hundreds of them alive at once; tracked, each batch of more than ~700 would set off a
 * collection that walks them and promotes them to older generations (a 1024-message batch
 * took 3x as long). */
static PyObject *rq_pop_many(RecvQueueObject *q, Py_ssize_t max, rq_count_t *counts, Py_ssize_t *n_counts)
{
    Py_ssize_t n = q->total < max ? q->total : max;
    PyObject *out = PyList_New(n);
    if (out == NULL)
    {
        return NULL;
    }
    for (Py_ssize_t k = 0; k < n; k++)
    {
        PyObject *msg = q->message_type->tp_alloc(q->message_type, 2); /* items NULL until filled */
        if (msg == NULL)
        {
            Py_DECREF(out);
            return NULL;
        }
        if (PyObject_IS_GC(msg))
        {
            PyObject_GC_UnTrack(msg);
        }
        PyList_SET_ITEM(out, k, msg);
    }
    Py_ssize_t noted = 0;
    for (Py_ssize_t k = 0; k < n; k++)
    {
        int32_t lane;
        rq_item_t item = rq_pop_next(q, &lane);
        rq_lane_t *l = &q->lanes[lane];
        rq_note(q, counts, &noted, lane, item.account);
        PyObject *msg = PyList_GET_ITEM(out, k);
        PyTuple_SET_ITEM(msg, 0, item.payload);
        Py_INCREF(l->peer);
        PyTuple_SET_ITEM(msg, 1, l->peer);
    }
    rq_unnote(q, counts, noted);
    *n_counts = noted;
    return out;
}

static int rq_max_arg(PyObject *arg, Py_ssize_t *max)
{
    Py_ssize_t v = PyLong_AsSsize_t(arg);
    if (v == -1 && PyErr_Occurred())
    {
        return -1;
    }
    if (v < 1)
    {
        PyErr_SetString(PyExc_ValueError, "max_messages must be >= 1");
        return -1;
    }
    *max = v;
    return 0;
}

/* Room for the bookkeeping of a batch of up to `max` items (NULL with an exception). */
static rq_count_t *rq_counts_for(RecvQueueObject *q, Py_ssize_t max)
{
    Py_ssize_t n = q->total < max ? q->total : max;
    rq_count_t *counts = PyMem_Malloc(sizeof(rq_count_t) * (size_t)(n > 0 ? n : 1));
    if (counts == NULL)
    {
        PyErr_NoMemory();
    }
    return counts;
}

/* q.take(max_messages) -> [Message, ...] (up to max_messages, possibly none), each delivery
 * counted: one exon_lt_deliver_many per link, one on_core per lane and incarnation. As in
 * rq_take, an error of a callback loses the batch to the caller, but every count is made. */
static PyObject *rq_take_many(PyObject *self, PyObject *arg)
{
    RecvQueueObject *q = (RecvQueueObject *)self;
    Py_ssize_t max;
    if (rq_max_arg(arg, &max) < 0)
    {
        return NULL;
    }
    if (RQ_UNRAW(q) < 0)
    {
        return NULL;
    }
    rq_count_t *counts = rq_counts_for(q, max);
    if (counts == NULL)
    {
        return NULL;
    }
    Py_ssize_t n = 0;
    PyObject *out = rq_pop_many(q, max, counts, &n);
    if (out != NULL && rq_count_batch(q, counts, n) < 0)
    {
        Py_CLEAR(out);
    }
    rq_release_counts(counts, n);
    PyMem_Free(counts);
    return out;
}

/* The payload bytes of the next `n` (<= total) items in the order rq_pop_next hands them
 * out, without popping: the ready ring's lanes in turn, one item each per round, a lane
 * leaving the round once empty. -1 with an exception (no memory). */
static Py_ssize_t rq_peek_bytes(RecvQueueObject *q, Py_ssize_t n)
{
    int32_t live = q->ready_count;
    int32_t *lanes = PyMem_Malloc(sizeof(int32_t) * (size_t)(live > 0 ? live : 1));
    size_t *cursor = PyMem_Malloc(sizeof(size_t) * (size_t)(live > 0 ? live : 1));
    if (lanes == NULL || cursor == NULL)
    {
        PyMem_Free(lanes);
        PyMem_Free(cursor);
        PyErr_NoMemory();
        return -1;
    }
    for (int32_t i = 0; i < live; i++)
    {
        lanes[i] = q->ready[(q->ready_head + i) % q->lane_cap];
        cursor[i] = q->lanes[lanes[i]].raw_head;
    }
    Py_ssize_t total = 0;
    Py_ssize_t taken = 0;
    for (uint32_t round = 0; taken < n && live > 0; round++)
    {
        int32_t kept = 0;
        for (int32_t i = 0; i < live && taken < n; i++)
        {
            rq_lane_t *l = &q->lanes[lanes[i]];
            PyObject *payload = l->items[(l->head + round) % l->cap].payload;
            if (payload != NULL)
            {
                total += PyBytes_GET_SIZE(payload);
            }
            else
            {
                uint32_t length;
                memcpy(&length, l->raw + cursor[i], 4);
                cursor[i] += 4 + (size_t)length;
                total += length;
            }
            taken++;
            if (round + 1 < l->count) /* it has more: stays in the next round */
            {
                lanes[kept] = lanes[i];
                cursor[kept] = cursor[i];
                kept++;
            }
        }
        live = kept;
    }
    PyMem_Free(lanes);
    PyMem_Free(cursor);
    return total;
}

/* q.hold_buffer(max_messages) -> (buffer, offsets, runs, counts): up to max_messages popped
 * in the order take pops them, their delivery NOT counted, and without a Python object per
 * message (a recorder that frames the payloads itself needs none): `buffer` their payloads
 * one after the other in one bytes, `offsets` a bytes of n + 1 native u64 (payload i is
 * buffer[offsets[i]:offsets[i + 1]]), `runs` [(peer, count), ...] cutting them into
 * consecutive messages of one lane (peer: the peer a Message would carry), `counts`
 * [(key, link, incarnation, count), ...] what q.count must count later: `count` messages of
 * link incarnation `incarnation` with the peer `key`, queued by the fast path on `link` (-1:
 * the core's). Raw payloads are copied from the lanes' raw storage (no object made for
 * them), others from their bytes. Everything is allocated before anything is popped (a
 * failure there leaves the queue as it was). */
static PyObject *rq_hold_buffer(PyObject *self, PyObject *arg)
{
    RecvQueueObject *q = (RecvQueueObject *)self;
    Py_ssize_t max;
    if (rq_max_arg(arg, &max) < 0)
    {
        return NULL;
    }
    Py_ssize_t n = q->total < max ? q->total : max;
    Py_ssize_t size = rq_peek_bytes(q, n);
    if (size < 0)
    {
        return NULL;
    }
    PyObject *buffer = PyBytes_FromStringAndSize(NULL, size);
    PyObject *offsets = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(uint64_t) * (n + 1));
    int32_t *run_lane = PyMem_Malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    uint32_t *run_count = PyMem_Malloc(sizeof(uint32_t) * (size_t)(n > 0 ? n : 1));
    rq_count_t *counts = rq_counts_for(q, max);
    if (buffer == NULL || offsets == NULL || run_lane == NULL || run_count == NULL || counts == NULL)
    {
        Py_XDECREF(buffer);
        Py_XDECREF(offsets);
        PyMem_Free(run_lane);
        PyMem_Free(run_count);
        PyMem_Free(counts);
        return PyErr_Occurred() ? NULL : PyErr_NoMemory();
    }
    char *out = PyBytes_AS_STRING(buffer);
    char *ends = PyBytes_AS_STRING(offsets);
    uint64_t at = 0;
    memcpy(ends, &at, sizeof at);
    Py_ssize_t runs_n = 0;
    Py_ssize_t noted = 0;
    for (Py_ssize_t k = 0; k < n; k++)
    {
        int32_t lane;
        rq_item_t item = rq_pop_next(q, &lane);
        rq_lane_t *l = &q->lanes[lane];
        rq_note(q, counts, &noted, lane, item.account);
        if (item.payload != NULL)
        {
            Py_ssize_t length = PyBytes_GET_SIZE(item.payload);
            memcpy(out + at, PyBytes_AS_STRING(item.payload), (size_t)length);
            at += (uint64_t)length;
            Py_DECREF(item.payload);
        }
        else
        {
            uint32_t length;
            const uint8_t *data = rq_raw_pop(l, &length);
            memcpy(out + at, data, length);
            at += length;
            q->raw_count--;
        }
        memcpy(ends + sizeof(uint64_t) * (size_t)(k + 1), &at, sizeof at);
        if (runs_n > 0 && run_lane[runs_n - 1] == lane)
        {
            run_count[runs_n - 1]++;
        }
        else
        {
            run_lane[runs_n] = lane;
            run_count[runs_n] = 1;
            runs_n++;
        }
    }
    for (Py_ssize_t i = 0; i < noted; i++)
    {
        rq_raw_settle(&q->lanes[counts[i].lane]);
    }
    rq_unnote(q, counts, noted);
    PyObject *runs = PyList_New(runs_n);
    PyObject *count_list = PyList_New(noted);
    int failed = runs == NULL || count_list == NULL;
    for (Py_ssize_t r = 0; r < runs_n && !failed; r++)
    {
        PyObject *pair = Py_BuildValue("(OI)", q->lanes[run_lane[r]].peer, run_count[r]);
        if (pair == NULL)
        {
            failed = 1;
            break;
        }
        PyList_SET_ITEM(runs, r, pair);
    }
    for (Py_ssize_t i = 0; i < noted && !failed; i++)
    {
        rq_count_t *c = &counts[i];
        PyObject *entry = Py_BuildValue("(OiLL)", c->key, c->link, (long long)c->incarnation, (long long)c->count);
        if (entry == NULL)
        {
            failed = 1;
            break;
        }
        PyList_SET_ITEM(count_list, i, entry);
    }
    PyMem_Free(run_lane);
    PyMem_Free(run_count);
    rq_release_counts(counts, noted);
    PyMem_Free(counts);
    if (failed)
    {
        Py_DECREF(buffer);
        Py_DECREF(offsets);
        Py_XDECREF(runs);
        Py_XDECREF(count_list);
        return NULL;
    }
    return Py_BuildValue("(NNNN)", buffer, offsets, runs, count_list);
}

/* q.count(counts): count the deliveries hold_buffer reported in `counts` (a PULL confirms
 * a held batch): on the link while it is still attached as that incarnation, through the
 * core (on_core) otherwise -- as a pop counts them. Every count is made before an error of
 * a callback surfaces. */
static PyObject *rq_count(PyObject *self, PyObject *arg)
{
    RecvQueueObject *q = (RecvQueueObject *)self;
    PyObject *seq = PySequence_Fast(arg, "count(counts): counts is a list of (peer, link, incarnation, count)");
    if (seq == NULL)
    {
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    rq_count_t *counts = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(rq_count_t));
    if (counts == NULL)
    {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    exon_link_table_t *table = (exon_link_table_t *)q->table;
    Py_ssize_t m = 0;
    int bad = 0;
    for (Py_ssize_t i = 0; i < n && !bad; i++)
    {
        PyObject *key;
        int link;
        long long incarnation;
        long long count;
        PyObject *entry = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(entry) || !PyArg_ParseTuple(entry, "OiLL", &key, &link, &incarnation, &count) ||
            count < 0 || incarnation < 0)
        {
            if (!PyErr_Occurred())
            {
                PyErr_SetString(PyExc_ValueError, "count(counts): (peer, link, incarnation >= 0, count >= 0)");
            }
            bad = 1;
            break;
        }
        if (count == 0)
        {
            continue;
        }
        rq_count_t *c = &counts[m++];
        c->lane = -1;
        c->count = count;
        c->incarnation = incarnation;
        c->key = Py_NewRef(key);
        if (link >= 0 && link < table->high && link < q->link_cap && q->link_lane[link] >= 0 &&
            table->links[link].pub != NULL && (int64_t)table->links[link].incarnation == incarnation)
        {
            c->link = link;
            c->account = RQ_FAST;
        }
        else
        {
            c->link = -1;
            c->account = incarnation;
        }
    }
    Py_DECREF(seq);
    int rc = bad ? -1 : rq_count_batch(q, counts, m);
    rq_release_counts(counts, m);
    PyMem_Free(counts);
    if (rc < 0)
    {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *rq_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    unsigned long long address;
    PyObject *owner;
    PyObject *on_due;
    PyObject *on_core;
    PyObject *message_type;
    int capacity;
    if (!PyArg_ParseTuple(args, "KOOOOi:RecvQueue", &address, &owner, &on_due, &on_core, &message_type, &capacity))
    {
        return NULL;
    }
    if (lt_deliver_fn == NULL || lt_deliver_many_fn == NULL)
    {
        PyErr_SetString(PyExc_RuntimeError, "exon.native._fast is not bound (call bind_links first)");
        return NULL;
    }
    if (address == 0 || capacity < 1 || !PyCallable_Check(on_due) || !PyCallable_Check(on_core) ||
        !PyType_Check(message_type) || !PyType_IsSubtype((PyTypeObject *)message_type, &PyTuple_Type))
    {
        PyErr_SetString(PyExc_ValueError,
                        "RecvQueue(table address, owner, on_due, on_core, tuple subclass, link capacity >= 1)");
        return NULL;
    }
    RecvQueueObject *q = (RecvQueueObject *)type->tp_alloc(type, 0);
    if (q == NULL)
    {
        return NULL;
    }
    q->lanes = PyMem_Calloc(RQ_FIRST_LANES, sizeof(rq_lane_t));
    q->ready = PyMem_Calloc(RQ_FIRST_LANES, sizeof(int32_t));
    q->free_lanes = PyMem_Calloc(RQ_FIRST_LANES, sizeof(int32_t));
    q->link_lane = PyMem_Malloc(sizeof(int32_t) * (size_t)capacity);
    if (q->lanes == NULL || q->ready == NULL || q->free_lanes == NULL || q->link_lane == NULL)
    {
        Py_DECREF(q);
        return PyErr_NoMemory();
    }
    q->lane_cap = RQ_FIRST_LANES;
    for (int32_t i = 0; i < capacity; i++)
    {
        q->link_lane[i] = -1;
    }
    q->link_cap = capacity;
    q->table = (void *)(uintptr_t)address;
    q->owner = Py_NewRef(owner);
    q->on_due = Py_NewRef(on_due);
    q->on_core = Py_NewRef(on_core);
    q->message_type = (PyTypeObject *)Py_NewRef(message_type);
    q->vectorcall = rq_vectorcall;
    return (PyObject *)q;
}

/* A link index argument in [0, capacity): 0, or -1 with an exception. */
int link_index_arg(PyObject *arg, int32_t capacity, int32_t *link)
{
    long v = PyLong_AsLong(arg);
    if (v == -1 && PyErr_Occurred())
    {
        return -1;
    }
    if (v < 0 || v >= capacity)
    {
        PyErr_SetString(PyExc_IndexError, "link index out of range");
        return -1;
    }
    *link = (int32_t)v;
    return 0;
}

/* An open lane's index argument: 0, or -1 with an exception. */
static int rq_lane_arg(RecvQueueObject *q, PyObject *arg, int32_t *lane)
{
    if (link_index_arg(arg, q->lane_top, lane) < 0 || !q->lanes[*lane].open)
    {
        if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_IndexError))
        {
            PyErr_Clear();
            PyErr_SetString(PyExc_IndexError, "no such open lane");
        }
        return -1;
    }
    return 0;
}

/* q.open_lane(peer, key, public=None) -> lane: a lane whose items are handed out as coming
 * from `peer`; `key` (the core's PeerId) is what on_core and hold_buffer's counts name it by;
 * `public`: its exon.Peer when `peer` is the PeerId */
static PyObject *rq_open_lane(PyObject *self, PyObject *args)
{
    RecvQueueObject *q = (RecvQueueObject *)self;
    PyObject *peer;
    PyObject *key;
    PyObject *public_peer = Py_None;
    if (!PyArg_ParseTuple(args, "OO|O:open_lane", &peer, &key, &public_peer))
    {
        return NULL;
    }
    int32_t lane;
    if (q->free_count > 0)
    {
        lane = q->free_lanes[--q->free_count];
    }
    else
    {
        if (q->lane_top == q->lane_cap && rq_grow_lanes(q) < 0)
        {
            return NULL;
        }
        lane = q->lane_top++;
    }
    rq_lane_t *l = &q->lanes[lane];
    memset(l, 0, sizeof(*l));
    l->open = 1;
    l->link = -1;
    l->peer = Py_NewRef(peer);
    l->key = Py_NewRef(key);
    l->public_peer = public_peer == Py_None ? NULL : Py_NewRef(public_peer);
    q->open_lanes++;
    return PyLong_FromLong(lane);
}

static void rq_release_lane(rq_lane_t *l)
{
    rq_raw_free(l);
    PyMem_Free(l->items);
    l->items = NULL;
    l->cap = 0;
    l->head = 0;
    Py_CLEAR(l->peer);
    Py_CLEAR(l->public_peer);
    Py_CLEAR(l->key);
    l->open = 0;
}

/* q.idle(lane) -> True when the lane holds nothing and no link lands in it (it may close) */
static PyObject *rq_idle(PyObject *self, PyObject *arg)
{
    RecvQueueObject *q = (RecvQueueObject *)self;
    int32_t lane;
    if (rq_lane_arg(q, arg, &lane) < 0)
    {
        return NULL;
    }
    rq_lane_t *l = &q->lanes[lane];
    return PyBool_FromLong(l->count == 0 && l->link < 0);
}

/* q.close_lane(lane): give an idle lane back (its index may be handed out again) */
static PyObject *rq_close_lane(PyObject *self, PyObject *arg)
{
    RecvQueueObject *q = (RecvQueueObject *)self;
    int32_t lane;
    if (rq_lane_arg(q, arg, &lane) < 0)
    {
        return NULL;
    }
    rq_lane_t *l = &q->lanes[lane];
    if (l->count > 0 || l->link >= 0)
    {
        PyErr_SetString(PyExc_RuntimeError, "close_lane: the lane is not idle");
        return NULL;
    }
    rq_release_lane(l);
    q->free_lanes[q->free_count++] = lane;
    q->open_lanes--;
    Py_RETURN_NONE;
}

/* q.attach(link, lane): the DATA of `link` is queued in `lane` from now on (RQ_FAST) */
static PyObject *rq_attach(PyObject *self, PyObject *args)
{
    RecvQueueObject *q = (RecvQueueObject *)self;
    PyObject *index;
    PyObject *lane_arg;
    int32_t link;
    int32_t lane;
    if (!PyArg_ParseTuple(args, "OO:attach", &index, &lane_arg) || link_index_arg(index, q->link_cap, &link) < 0 ||
        rq_lane_arg(q, lane_arg, &lane) < 0)
    {
        return NULL;
    }
    rq_lane_t *l = &q->lanes[lane];
    if (q->link_lane[link] >= 0 || (l->link >= 0 && l->link != link))
    {
        PyErr_SetString(PyExc_RuntimeError, "attach: the link or the lane is attached already");
        return NULL;
    }
    q->link_lane[link] = lane;
    l->link = link;
    Py_RETURN_NONE;
}

/* q.detach(link, incarnation): no more DATA of `link` lands here; the items it queued stay
 * in their place, counted for the core from now on as messages of link incarnation
 * `incarnation` (the link table may hand the index to another link). A link not attached
 * here is ignored. */
static PyObject *rq_detach(PyObject *self, PyObject *args)
{
    RecvQueueObject *q = (RecvQueueObject *)self;
    PyObject *index;
    long long incarnation;
    int32_t link;
    if (!PyArg_ParseTuple(args, "OL:detach", &index, &incarnation) || link_index_arg(index, q->link_cap, &link) < 0)
    {
        return NULL;
    }
    if (incarnation < 0)
    {
        PyErr_SetString(PyExc_ValueError, "detach: incarnation >= 0");
        return NULL;
    }
    int32_t lane = q->link_lane[link];
    if (lane < 0)
    {
        Py_RETURN_NONE;
    }
    rq_lane_t *l = &q->lanes[lane];
    for (uint32_t k = 0; k < l->count; k++)
    {
        rq_item_t *item = &l->items[(l->head + k) % l->cap];
        if (item->account == RQ_FAST)
        {
            item->account = incarnation;
        }
    }
    l->link = -1;
    q->link_lane[link] = -1;
    Py_RETURN_NONE;
}

/* q.push(lane, payload, incarnation): queue a message of the core's (a MessageReceived of
 * link incarnation `incarnation`) behind everything of its lane; -1: a message the fast
 * path counted as received on the lane's attached link (counted there on delivery) */
static PyObject *rq_push_method(PyObject *self, PyObject *args)
{
    RecvQueueObject *q = (RecvQueueObject *)self;
    PyObject *lane_arg;
    PyObject *payload;
    long long incarnation;
    int32_t lane;
    if (!PyArg_ParseTuple(args, "OO!L:push", &lane_arg, &PyBytes_Type, &payload, &incarnation) ||
        rq_lane_arg(q, lane_arg, &lane) < 0)
    {
        return NULL;
    }
    if (incarnation < RQ_FAST || (incarnation == RQ_FAST && q->lanes[lane].link < 0))
    {
        PyErr_SetString(PyExc_ValueError, "push: incarnation >= 0, or -1 on a lane with a link attached");
        return NULL;
    }
    if (q->raw && incarnation == RQ_FAST) /* as the fast path queues it */
    {
        if (PyBytes_GET_SIZE(payload) > INT32_MAX - 4 ||
            rq_push_raw(q, lane, PyBytes_AS_STRING(payload), (int32_t)PyBytes_GET_SIZE(payload)) < 0)
        {
            return PyErr_Occurred() ? NULL : PyErr_NoMemory();
        }
        Py_RETURN_NONE;
    }
    Py_INCREF(payload);
    if (rq_push(q, lane, payload, incarnation) < 0)
    {
        Py_DECREF(payload);
        return NULL;
    }
    Py_RETURN_NONE;
}

static Py_ssize_t rq_length(PyObject *self)
{
    return ((RecvQueueObject *)self)->total;
}

/* q.queued_bytes() -> the payload bytes queued (walks the queue: for statistics) */
static PyObject *rq_queued_bytes(PyObject *self, PyObject *unused)
{
    RecvQueueObject *q = (RecvQueueObject *)self;
    long long bytes = 0;
    for (int32_t i = 0; i < q->lane_top && q->total > 0; i++)
    {
        rq_lane_t *l = &q->lanes[i];
        for (uint32_t k = 0; k < l->count; k++)
        {
            PyObject *payload = l->items[(l->head + k) % l->cap].payload;
            bytes += payload == NULL ? -4 : (long long)PyBytes_GET_SIZE(payload); /* raw: its prefix */
        }
        bytes += (long long)(l->raw_tail - l->raw_head);
    }
    return PyLong_FromLongLong(bytes);
}

static void rq_clear_lanes(RecvQueueObject *q)
{
    if (q->lanes == NULL)
    {
        return;
    }
    for (int32_t i = 0; i < q->lane_top; i++)
    {
        rq_lane_t *l = &q->lanes[i];
        while (l->count > 0)
        {
            Py_XDECREF(rq_pop_lane(q, l).payload); /* NULL: a raw payload */
        }
        rq_release_lane(l);
    }
    q->ready_count = 0;
    q->raw_count = 0;
}

static void rq_dealloc(RecvQueueObject *q)
{
    rq_clear_lanes(q);
    PyMem_Free(q->lanes);
    PyMem_Free(q->ready);
    PyMem_Free(q->free_lanes);
    PyMem_Free(q->link_lane);
    Py_XDECREF(q->owner);
    Py_XDECREF(q->on_due);
    Py_XDECREF(q->on_core);
    Py_XDECREF((PyObject *)q->message_type);
    Py_TYPE(q)->tp_free((PyObject *)q);
}

static PyMethodDef rq_methods[] = {
    {"open_lane", rq_open_lane, METH_VARARGS, "open_lane(peer, key, public=None) -> lane"},
    {"idle", rq_idle, METH_O, "idle(lane) -> True when nothing is queued in it and no link lands in it"},
    {"close_lane", rq_close_lane, METH_O, "close_lane(lane): give an idle lane back"},
    {"attach", rq_attach, METH_VARARGS, "attach(link, lane)"},
    {"detach", rq_detach, METH_VARARGS, "detach(link, incarnation)"},
    {"push", rq_push_method, METH_VARARGS, "push(lane, payload, incarnation)"},
    {"queued_bytes", rq_queued_bytes, METH_NOARGS, "queued_bytes() -> payload bytes queued"},
    {"take", rq_take_many, METH_O, "take(max_messages) -> [Message, ...], deliveries counted"},
    {"count", rq_count, METH_O, "count(counts): count the deliveries hold_buffer reported"},
    {"hold_buffer", rq_hold_buffer, METH_O,
     "hold_buffer(max_messages) -> (buffer, offsets, [(peer, count), ...], [(key, link, incarnation, count), ...]),"
     " deliveries NOT counted"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef rq_members[] = {
    {"direct", T_INT, offsetof(RecvQueueObject, direct), 0,
     "1: no cookie waits on the socket's Python side; its receive door may pop here"},
    {"pass_all", T_INT, offsetof(RecvQueueObject, pass_all), 0,
     "1: a SUB that takes every published message; its door may skip the filter"},
    {"raw", T_INT, offsetof(RecvQueueObject, raw), 0,
     "1: the fast path's payloads are queued as raw bytes, no object each (a PULL taking hold_buffer batches)"},
    {"raw_count", T_PYSSIZET, offsetof(RecvQueueObject, raw_count), READONLY, "items queued raw"},
    {"open_lanes", T_INT, offsetof(RecvQueueObject, open_lanes), READONLY,
     "lanes open: opened by open_lane and not closed since"},
    {NULL, 0, 0, 0, NULL},
};

static PySequenceMethods rq_as_sequence = {
    .sq_length = rq_length,
};

PyTypeObject RecvQueueType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "exon.native._fast.RecvQueue",
    .tp_doc = "RecvQueue(table_address, owner, on_due, on_core, message_type, link_capacity)()"
              " -> Message or None",
    .tp_basicsize = sizeof(RecvQueueObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = rq_new,
    .tp_dealloc = (destructor)rq_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(RecvQueueObject, vectorcall),
    .tp_methods = rq_methods,
    .tp_members = rq_members,
    .tp_as_sequence = &rq_as_sequence,
};
