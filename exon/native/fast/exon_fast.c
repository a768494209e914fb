/*
 * exon_fast.c: the GIL-holding door for exon's non-blocking hot calls (exon.native._fast).
 *
 * cffi releases and re-takes the GIL around every call, and converts every argument
 * generically: about 150-250 ns per call on the reference machine, several times the cost
 * of the offer itself (~30 ns for a 64 B message). A publication offer never blocks, so
 * holding the GIL through it is cheaper for everyone than handing it off.
 *
 * This module compiles no exon logic of its own: the cffi module hands it the addresses
 * of its C functions (exon.native.fast binds them once), and an Offer object calls
 * exon_publication_offer through that pointer with the publication's address, via
 * vectorcall. Anything slow or blocking stays on the cffi side, where the GIL is released.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <time.h>
#include <stddef.h>
#include <stdint.h>

#include "../src/exon_link_table.h" /* layouts and constants only: no exon code is linked */

typedef int64_t (*exon_offer_fn)(void *pub, const char *buf, int32_t length, int64_t reserved);

static exon_offer_fn offer_fn = NULL;

/* Aeron's outcome codes are -1..-5; anything below is an error for the Python side. */
#define EXON_LOWEST_OUTCOME (-5)

typedef struct
{
    PyObject_HEAD
    void *pub;
    PyObject *on_error; /* callable(rc) that raises the typed exception */
    PyObject *owner;    /* keeps the memory behind `pub` alive as long as this object */
    vectorcallfunc vectorcall;
}
OfferObject;

/* The bytes of `data` (exact bytes, or any object with the buffer protocol), the length
 * clamped to `max` (a longer message is then refused as too large by the callee).
 * Returns 1 when `view` is held (the caller releases it), 0 for bytes, -1 with an exception. */
static inline int data_bytes(PyObject *data, Py_ssize_t max, Py_buffer *view, const char **buf, int32_t *length)
{
    if (PyBytes_CheckExact(data))
    {
        Py_ssize_t len = PyBytes_GET_SIZE(data);
        *buf = PyBytes_AS_STRING(data);
        *length = (int32_t)(len > max ? max : len);
        return 0;
    }
    if (PyObject_GetBuffer(data, view, PyBUF_SIMPLE) < 0)
    {
        return -1;
    }
    *buf = (const char *)view->buf;
    *length = (int32_t)(view->len > max ? max : view->len);
    return 1;
}

static PyObject *offer_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    OfferObject *self = (OfferObject *)self_obj;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (nargs < 1 || nargs + nkw > 2 ||
        (nkw == 1 && !PyUnicode_Check(PyTuple_GET_ITEM(kwnames, 0))) ||
        (nkw == 1 && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "reserved_value") != 0))
    {
        PyErr_SetString(PyExc_TypeError, "offer(data, reserved_value=0)");
        return NULL;
    }
    int64_t reserved = 0;
    if (nargs + nkw == 2)
    {
        reserved = PyLong_AsLongLong(args[1]); /* keyword values follow the positionals */
        if (reserved == -1 && PyErr_Occurred())
        {
            return NULL;
        }
    }
    Py_buffer view;
    const char *buf;
    int32_t length;
    int held = data_bytes(args[0], INT32_MAX, &view, &buf, &length);
    if (held < 0)
    {
        return NULL;
    }
    int64_t rc = offer_fn(self->pub, buf, length, reserved);
    if (held)
    {
        PyBuffer_Release(&view);
    }
    if (rc < EXON_LOWEST_OUTCOME)
    {
        PyObject *code = PyLong_FromLongLong(rc);
        if (code == NULL)
        {
            return NULL;
        }
        PyObject *result = PyObject_CallOneArg(self->on_error, code);
        Py_DECREF(code);
        return result; /* on_error raises; if it returns, its value is the result */
    }
    return PyLong_FromLongLong(rc);
}

static PyObject *offer_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    unsigned long long address;
    PyObject *on_error;
    PyObject *owner;
    if (!PyArg_ParseTuple(args, "KOO:Offer", &address, &on_error, &owner))
    {
        return NULL;
    }
    if (offer_fn == NULL)
    {
        PyErr_SetString(PyExc_RuntimeError, "exon.native._fast is not bound (call bind first)");
        return NULL;
    }
    if (address == 0 || !PyCallable_Check(on_error))
    {
        PyErr_SetString(PyExc_ValueError, "Offer(publication address != 0, callable on_error)");
        return NULL;
    }
    OfferObject *self = (OfferObject *)type->tp_alloc(type, 0);
    if (self == NULL)
    {
        return NULL;
    }
    self->pub = (void *)(uintptr_t)address;
    Py_INCREF(on_error);
    self->on_error = on_error;
    Py_INCREF(owner);
    self->owner = owner;
    self->vectorcall = offer_vectorcall;
    return (PyObject *)self;
}

static void offer_dealloc(OfferObject *self)
{
    Py_XDECREF(self->on_error);
    Py_XDECREF(self->owner);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject OfferType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "exon.native._fast.Offer",
    .tp_doc = "Offer(publication_address, on_error, owner)(data, reserved_value=0) -> position or code",
    .tp_basicsize = sizeof(OfferObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = offer_new,
    .tp_dealloc = (destructor)offer_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(OfferObject, vectorcall),
};


/* ---- the sockets' link table (exon_link_table.h): send and deliver ------------------- */

typedef int64_t (*exon_lt_send_fn)(void *table, int32_t slot, int32_t link, const char *buf, int32_t length);
typedef int64_t (*exon_lt_deliver_fn)(void *table, int32_t link);
typedef int64_t (*exon_lt_deliver_many_fn)(void *table, int32_t link, int64_t count);

static exon_lt_send_fn lt_send_fn = NULL;
static exon_lt_deliver_fn lt_deliver_fn = NULL;
static exon_lt_deliver_many_fn lt_deliver_many_fn = NULL;

typedef struct
{
    PyObject_HEAD
    void *table;
    PyObject *owner;    /* keeps the table's memory alive */
    vectorcallfunc vectorcall;
}
TableCallObject;

static int table_int_arg(PyObject *arg, int32_t *out)
{
    long v = PyLong_AsLong(arg);
    if (v == -1 && PyErr_Occurred())
    {
        return -1;
    }
    if (v < INT32_MIN || v > INT32_MAX)
    {
        PyErr_SetString(PyExc_OverflowError, "int32 argument out of range");
        return -1;
    }
    *out = (int32_t)v;
    return 0;
}

/* LinkSend(table, owner)(slot, link, data) -> link index used, or a negative code */
static PyObject *lt_send_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    TableCallObject *self = (TableCallObject *)self_obj;
    if (PyVectorcall_NARGS(nargsf) != 3 || kwnames != NULL)
    {
        PyErr_SetString(PyExc_TypeError, "send(slot, link, data)");
        return NULL;
    }
    int32_t slot;
    int32_t link;
    if (table_int_arg(args[0], &slot) < 0 || table_int_arg(args[1], &link) < 0)
    {
        return NULL;
    }
    Py_buffer view;
    const char *buf;
    int32_t length;
    int held = data_bytes(args[2], INT32_MAX - 64, &view, &buf, &length);
    if (held < 0)
    {
        return NULL;
    }
    int64_t rc = lt_send_fn(self->table, slot, link, buf, length);
    if (held)
    {
        PyBuffer_Release(&view);
    }
    return PyLong_FromLongLong(rc);
}

/* LinkDeliver(table, owner)(link, count=1) -> EXON_LT_DELIVER_* or a negative code
 * (exon_lt_deliver, or exon_lt_deliver_many with a count) */
static PyObject *lt_deliver_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    TableCallObject *self = (TableCallObject *)self_obj;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 1 || nargs > 2 || kwnames != NULL)
    {
        PyErr_SetString(PyExc_TypeError, "deliver(link, count=1)");
        return NULL;
    }
    int32_t link;
    if (table_int_arg(args[0], &link) < 0)
    {
        return NULL;
    }
    if (nargs == 1)
    {
        return PyLong_FromLongLong(lt_deliver_fn(self->table, link));
    }
    int32_t count;
    if (table_int_arg(args[1], &count) < 0)
    {
        return NULL;
    }
    if (lt_deliver_many_fn == NULL)
    {
        PyErr_SetString(PyExc_RuntimeError, "exon.native._fast: exon_lt_deliver_many is not bound");
        return NULL;
    }
    return PyLong_FromLongLong(lt_deliver_many_fn(self->table, link, count));
}

static PyObject *table_call_new(PyTypeObject *type, PyObject *args, vectorcallfunc call, void *fn)
{
    unsigned long long address;
    PyObject *owner;
    if (!PyArg_ParseTuple(args, "KO", &address, &owner))
    {
        return NULL;
    }
    if (fn == NULL)
    {
        PyErr_SetString(PyExc_RuntimeError, "exon.native._fast is not bound (call bind first)");
        return NULL;
    }
    if (address == 0)
    {
        PyErr_SetString(PyExc_ValueError, "table address != 0");
        return NULL;
    }
    TableCallObject *self = (TableCallObject *)type->tp_alloc(type, 0);
    if (self == NULL)
    {
        return NULL;
    }
    self->table = (void *)(uintptr_t)address;
    Py_INCREF(owner);
    self->owner = owner;
    self->vectorcall = call;
    return (PyObject *)self;
}

static PyObject *lt_send_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    return table_call_new(type, args, lt_send_vectorcall, (void *)lt_send_fn);
}

static PyObject *lt_deliver_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    return table_call_new(type, args, lt_deliver_vectorcall, (void *)lt_deliver_fn);
}

static void table_call_dealloc(TableCallObject *self)
{
    Py_XDECREF(self->owner);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject LinkSendType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "exon.native._fast.LinkSend",
    .tp_doc = "LinkSend(table_address, owner)(slot, link, data) -> link index or code",
    .tp_basicsize = sizeof(TableCallObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = lt_send_new,
    .tp_dealloc = (destructor)table_call_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(TableCallObject, vectorcall),
};

static PyTypeObject LinkDeliverType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "exon.native._fast.LinkDeliver",
    .tp_doc = "LinkDeliver(table_address, owner)(link, count=1) -> EXON_LT_DELIVER_* or code",
    .tp_basicsize = sizeof(TableCallObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = lt_deliver_new,
    .tp_dealloc = (destructor)table_call_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(TableCallObject, vectorcall),
};

/* ---- the receive queue of a plain socket (PULL): filled by dispatch, popped by receive --
 *
 * Per link (index into the link table) a FIFO of payload bytes and the sender's Peer; a
 * ready ring of the links that have something queued gives round-robin (fair) queuing over
 * the links. Popping counts the delivery through exon_lt_deliver and calls on_due(link) when
 * the core must see it (a FLOW due, or a FLOW timer to arm). take(n) pops a batch and counts
 * it per link (exon_lt_deliver_many); hold(n) pops a batch without counting it and says how
 * many of each link it took (the socket counts them later, PullSocket.confirm). Every call
 * under the Node's lock (the Python side serialises them). */

#define LT_HANDLED EXON_LT_FLOW_DONE /* a descriptor dispatch queued: nothing left to do */

typedef struct
{
    PyObject *peer;     /* NULL: the link is not attached to this queue */
    PyObject *public_peer; /* the exon.Peer of `peer` when the queue's items carry the core's
                            * PeerId (a SUB's door hands out Messages with it); else NULL */
    PyObject **items;
    uint32_t head;
    uint32_t count;
    uint32_t cap;
    uint32_t popped;    /* popped by the current take/hold batch */
    /* raw payloads (the queue's `raw` mode, see rq_push_raw): [u32 length][bytes] records in
     * arrival order in raw[raw_head, raw_tail); an items slot of NULL stands for the next */
    uint8_t *raw;
    size_t raw_head;
    size_t raw_tail;
    size_t raw_cap;
}
rq_link_t;

typedef struct
{
    PyObject_HEAD
    void *table;
    PyObject *owner;      /* keeps the table's memory alive */
    PyObject *on_due;     /* callable(link) */
    PyTypeObject *message_type;
    rq_link_t *links;
    int32_t capacity;
    int32_t *ready;       /* ring of link indexes, each at most once */
    int32_t ready_head;
    int32_t ready_count;
    int32_t *touched;     /* links popped by the current take/hold batch */
    Py_ssize_t total;
    int marked;           /* touched by the current dispatch */
    int direct;           /* set by the socket: nothing waits on the Python side, so the
                           * receive door may pop from here (see SocketReceive) */
    int pass_all;         /* set by a SUB while it takes every published message: its door
                           * may hand them out without its filter (exon_fast_pubsub.c) */
    int raw;              /* set by a PULL that takes held batches as one buffer: dispatch
                           * copies payloads into the links' raw storage, no bytes object */
    Py_ssize_t raw_count; /* messages queued raw (items slots that are NULL) */
    vectorcallfunc vectorcall;
}
RecvQueueObject;

static PyTypeObject RecvQueueType;

static int rq_push(RecvQueueObject *q, int32_t link, PyObject *payload)
{
    rq_link_t *l = &q->links[link];
    if (l->count == l->cap)
    {
        uint32_t cap = l->cap == 0 ? 64 : 2 * l->cap;
        PyObject **items = PyMem_Malloc(sizeof(PyObject *) * cap);
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
    l->items[(l->head + l->count) % l->cap] = payload;
    if (l->count++ == 0)
    {
        q->ready[(q->ready_head + q->ready_count) % q->capacity] = link;
        q->ready_count++;
    }
    q->total++;
    return 0;
}

/* A link's ring above this many slots (the default credits) is freed when it empties: a
 * burst beyond them gives its storage back after the drain (the next one grows it again
 * from 64); up to them the ring stays, so a stream does not regrow it on every burst. */
#define RQ_KEEP_CAP 1024

/* Pop the next payload of `link` (count > 0); the caller owns the reference. */
static PyObject *rq_pop_link(RecvQueueObject *q, rq_link_t *l)
{
    PyObject *payload = l->items[l->head];
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
    return payload;
}

/* Pop the next payload in round-robin order (ready_count > 0): the link at the head of the
 * ready ring, which goes back to the tail if it has more queued. The caller owns the reference. */
static inline PyObject *rq_pop_next(RecvQueueObject *q, int32_t *link_out)
{
    int32_t link = q->ready[q->ready_head];
    q->ready_head = (q->ready_head + 1) % q->capacity;
    q->ready_count--;
    rq_link_t *l = &q->links[link];
    PyObject *payload = rq_pop_link(q, l);
    if (l->count > 0)
    {
        q->ready[(q->ready_head + q->ready_count) % q->capacity] = link;
        q->ready_count++;
    }
    *link_out = link;
    return payload;
}

/* ---- raw payloads: a PULL whose held batches go out as one buffer (hold_buffer) ---------
 *
 * With `raw` set, dispatch copies a payload into its link's raw storage ([u32 length]
 * [bytes], in arrival order) and queues NULL in the link's items ring: no bytes object per
 * message. hold_buffer copies the payloads of a batch straight into one bytes object. Every
 * other way out of the queue (take, hold, hold_runs, take_all, the receive door) turns the
 * raw payloads into bytes first (RQ_UNRAW), so they see the queue as before. */

/* A link's raw storage above this is freed when it empties (below it stays, so a stream
 * does not regrow it for every batch). */
#define RQ_KEEP_RAW (1u << 20)
#define RQ_RAW_MIN (64u << 10)

static void rq_raw_free(rq_link_t *l)
{
    PyMem_Free(l->raw);
    l->raw = NULL;
    l->raw_head = l->raw_tail = l->raw_cap = 0;
}

/* After payloads were taken out of a link's raw storage: rewind it when empty, and give a
 * large one back. */
static void rq_raw_settle(rq_link_t *l)
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

/* Queue `length` bytes at `data` raw for `link`: 0, or -1 with an exception (nothing queued). */
static int rq_push_raw(RecvQueueObject *q, int32_t link, const char *data, int32_t length)
{
    rq_link_t *l = &q->links[link];
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
    if (rq_push(q, link, NULL) < 0)
    {
        return -1;
    }
    uint32_t n = (uint32_t)length;
    memcpy(l->raw + l->raw_tail, &n, 4);
    memcpy(l->raw + l->raw_tail + 4, data, (size_t)length);
    l->raw_tail += need;
    q->raw_count++;
    return 0;
}

/* The next raw payload of `l` (its items slot was NULL): its bytes and length, taken out. */
static inline const uint8_t *rq_raw_pop(rq_link_t *l, uint32_t *length)
{
    memcpy(length, l->raw + l->raw_head, 4);
    const uint8_t *data = l->raw + l->raw_head + 4;
    l->raw_head += 4 + (size_t)*length;
    return data;
}

/* Turn every raw payload of the queue into a bytes object in its items slot, in order:
 * 0, or -1 with an exception (those done stay done; the queue is whole either way). */
static int rq_unraw(RecvQueueObject *q)
{
    for (int32_t i = 0; i < q->ready_count && q->raw_count > 0; i++)
    {
        rq_link_t *l = &q->links[q->ready[(q->ready_head + i) % q->capacity]];
        for (uint32_t k = 0; k < l->count && l->raw_head < l->raw_tail; k++)
        {
            PyObject **slot = &l->items[(l->head + k) % l->cap];
            if (*slot != NULL)
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
            *slot = payload;
            l->raw_head += 4 + (size_t)length;
            q->raw_count--;
        }
        rq_raw_settle(l);
    }
    return 0;
}

#define RQ_UNRAW(q) ((q)->raw_count > 0 ? rq_unraw(q) : 0)

/* Fill `msg` (a new 2-tuple of a receive queue's message type) with `payload` (its
 * reference taken) and `peer`, and count the delivery of `link` (telling the core through
 * on_due when it must see it): every receive door hands a Message out through here. The
 * Message is not tracked by the cycle collector: (bytes, peer) is in no cycle (see
 * rq_pop_many). Returns msg; NULL with an exception (msg released). */
static PyObject *rq_deliver_message(RecvQueueObject *q, PyObject *msg, PyObject *payload, PyObject *peer,
                                    int32_t link)
{
    PyTuple_SET_ITEM(msg, 0, payload);
    Py_INCREF(peer);
    PyTuple_SET_ITEM(msg, 1, peer);
    if (PyObject_IS_GC(msg))
    {
        PyObject_GC_UnTrack(msg);
    }
    int64_t rc = lt_deliver_fn(q->table, link);
    if (rc != EXON_LT_DELIVER_NONE)
    {
        PyObject *index = PyLong_FromLong(link);
        PyObject *r = index == NULL ? NULL : PyObject_CallOneArg(q->on_due, index);
        Py_XDECREF(index);
        if (r == NULL)
        {
            Py_DECREF(msg);
            return NULL;
        }
        Py_DECREF(r);
    }
    return msg;
}

/* The next Message of a non-empty queue (ready_count > 0), its delivery counted (and the
 * core told through on_due when it must see it); NULL with an exception. */
static PyObject *rq_take(RecvQueueObject *q)
{
    int32_t link;
    PyObject *payload = rq_pop_next(q, &link);
    PyObject *msg = q->message_type->tp_alloc(q->message_type, 2);
    if (msg == NULL)
    {
        Py_DECREF(payload);
        return NULL;
    }
    return rq_deliver_message(q, msg, payload, q->links[link].peer, link);
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

/* Pop up to `max` (>= 1) Messages in round-robin order into a new list, without counting
 * their delivery: links[i].popped says how many of link i, q->touched[0, *touched_out) which
 * links. Every Message is allocated before anything is popped, so a failure (NULL, an
 * exception) leaves the queue as it was.
 *
 * The Messages are not tracked by the cycle collector: a (payload bytes, Peer) tuple can be
 * in no cycle (neither item refers to anything that could refer back to it). A batch keeps
 * hundreds of them alive at once; tracked, each batch of more than ~700 would set off a
 * collection that walks them and promotes them to older generations (a 1024-message batch
 * took 3x as long). */
/* Append (link, popped) for each link a pop touched to `counts` (unless `failed`), and
 * reset the links' popped counts whatever happens; the new failed flag. */
static int rq_take_counts(RecvQueueObject *q, int32_t touched, PyObject *counts, int failed)
{
    for (int32_t i = 0; i < touched; i++)
    {
        rq_link_t *l = &q->links[q->touched[i]];
        if (!failed)
        {
            PyObject *pair = Py_BuildValue("(iI)", q->touched[i], l->popped);
            if (pair == NULL || PyList_Append(counts, pair) < 0)
            {
                failed = 1;
            }
            Py_XDECREF(pair);
        }
        l->popped = 0;
    }
    return failed;
}

static PyObject *rq_pop_many(RecvQueueObject *q, Py_ssize_t max, int32_t *touched_out)
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
    int32_t touched = 0;
    for (Py_ssize_t k = 0; k < n; k++)
    {
        int32_t link;
        PyObject *payload = rq_pop_next(q, &link);
        rq_link_t *l = &q->links[link];
        if (l->popped++ == 0)
        {
            q->touched[touched++] = link;
        }
        PyObject *msg = PyList_GET_ITEM(out, k);
        PyTuple_SET_ITEM(msg, 0, payload);
        Py_INCREF(l->peer);
        PyTuple_SET_ITEM(msg, 1, l->peer);
    }
    *touched_out = touched;
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

/* q.take(max_messages) -> [Message, ...] (up to max_messages, possibly none), each delivery
 * counted: one exon_lt_deliver_many per link, on_due(link) when the core must see it. */
static PyObject *rq_take_many(PyObject *self, PyObject *arg)
{
    RecvQueueObject *q = (RecvQueueObject *)self;
    Py_ssize_t max;
    if (rq_max_arg(arg, &max) < 0)
    {
        return NULL;
    }
    if (lt_deliver_many_fn == NULL)
    {
        PyErr_SetString(PyExc_RuntimeError, "exon.native._fast: exon_lt_deliver_many is not bound");
        return NULL;
    }
    if (RQ_UNRAW(q) < 0)
    {
        return NULL;
    }
    int32_t touched;
    PyObject *out = rq_pop_many(q, max, &touched);
    if (out == NULL)
    {
        return NULL;
    }
    int failed = 0;
    for (int32_t i = 0; i < touched; i++)
    {
        int32_t link = q->touched[i];
        rq_link_t *l = &q->links[link];
        int64_t rc = lt_deliver_many_fn(q->table, link, (int64_t)l->popped);
        l->popped = 0;
        if (rc != EXON_LT_DELIVER_NONE && !failed)
        {
            /* every count is made before an on_due error surfaces (as in rq_take, the
             * batch is then lost to the caller, but counted) */
            PyObject *index = PyLong_FromLong(link);
            PyObject *r = index == NULL ? NULL : PyObject_CallOneArg(q->on_due, index);
            Py_XDECREF(index);
            if (r == NULL)
            {
                failed = 1;
            }
            Py_XDECREF(r);
        }
    }
    if (failed)
    {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

/* q.hold(max_messages) -> ([Message, ...], [(link, count), ...]): up to max_messages popped
 * in the same order as take, their delivery NOT counted; the second list says how many of
 * each link (in the order the links first came up). */
static PyObject *rq_hold(PyObject *self, PyObject *arg)
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
    PyObject *counts = PyList_New(0);
    if (counts == NULL)
    {
        return NULL;
    }
    int32_t touched;
    PyObject *out = rq_pop_many(q, max, &touched);
    if (out == NULL)
    {
        Py_DECREF(counts);
        return NULL;
    }
    int failed = rq_take_counts(q, touched, counts, 0);
    if (failed)
    {
        Py_DECREF(out);
        Py_DECREF(counts);
        return NULL;
    }
    return Py_BuildValue("(NN)", out, counts);
}

/* q.hold_runs(max_messages) -> (payloads, runs, counts): hold's batch without a Message
 * per message (a recorder that frames the payloads itself needs none): `payloads` the
 * payload bytes in hold's order, `runs` [(peer, count), ...] cutting them into consecutive
 * messages of one link (peer: the Peer a Message would carry), `counts` as hold's. The
 * lists are allocated before anything is popped (a failure there leaves the queue as it
 * was), as rq_pop_many does. */
static PyObject *rq_hold_runs(PyObject *self, PyObject *arg)
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
    Py_ssize_t n = q->total < max ? q->total : max;
    PyObject *payloads = PyList_New(n);
    PyObject *counts = PyList_New(0);
    int32_t *run_link = n > 0 ? PyMem_Malloc(sizeof(int32_t) * (size_t)n) : NULL;
    uint32_t *run_count = n > 0 ? PyMem_Malloc(sizeof(uint32_t) * (size_t)n) : NULL;
    if (payloads == NULL || counts == NULL || (n > 0 && (run_link == NULL || run_count == NULL)))
    {
        Py_XDECREF(payloads);
        Py_XDECREF(counts);
        PyMem_Free(run_link);
        PyMem_Free(run_count);
        return PyErr_Occurred() ? NULL : PyErr_NoMemory();
    }
    Py_ssize_t runs_n = 0;
    int32_t touched = 0;
    for (Py_ssize_t k = 0; k < n; k++)
    {
        int32_t link;
        PyObject *payload = rq_pop_next(q, &link);
        rq_link_t *l = &q->links[link];
        if (l->popped++ == 0)
        {
            q->touched[touched++] = link;
        }
        PyList_SET_ITEM(payloads, k, payload); /* the queue's reference moves to the list */
        if (runs_n > 0 && run_link[runs_n - 1] == link)
        {
            run_count[runs_n - 1]++;
        }
        else
        {
            run_link[runs_n] = link;
            run_count[runs_n] = 1;
            runs_n++;
        }
    }
    PyObject *runs = PyList_New(runs_n);
    int failed = runs == NULL;
    for (Py_ssize_t r = 0; r < runs_n && !failed; r++)
    {
        PyObject *pair = Py_BuildValue("(OI)", q->links[run_link[r]].peer, run_count[r]);
        if (pair == NULL)
        {
            failed = 1;
            break;
        }
        PyList_SET_ITEM(runs, r, pair);
    }
    failed = rq_take_counts(q, touched, counts, failed);
    PyMem_Free(run_link);
    PyMem_Free(run_count);
    if (failed)
    {
        Py_DECREF(payloads);
        Py_XDECREF(runs);
        Py_DECREF(counts);
        return NULL;
    }
    return Py_BuildValue("(NNN)", payloads, runs, counts);
}

/* The payload bytes of the next `n` (<= total) messages in the order rq_pop_next hands them
 * out, without popping: the ready ring's links in turn, one message each per round, a link
 * leaving the round once empty. -1 with an exception (no memory). */
static Py_ssize_t rq_peek_bytes(RecvQueueObject *q, Py_ssize_t n)
{
    int32_t live = q->ready_count;
    int32_t *links = PyMem_Malloc(sizeof(int32_t) * (size_t)(live > 0 ? live : 1));
    size_t *cursor = PyMem_Malloc(sizeof(size_t) * (size_t)(live > 0 ? live : 1));
    if (links == NULL || cursor == NULL)
    {
        PyMem_Free(links);
        PyMem_Free(cursor);
        PyErr_NoMemory();
        return -1;
    }
    for (int32_t i = 0; i < live; i++)
    {
        links[i] = q->ready[(q->ready_head + i) % q->capacity];
        cursor[i] = q->links[links[i]].raw_head;
    }
    Py_ssize_t total = 0;
    Py_ssize_t taken = 0;
    for (uint32_t round = 0; taken < n && live > 0; round++)
    {
        int32_t kept = 0;
        for (int32_t i = 0; i < live && taken < n; i++)
        {
            rq_link_t *l = &q->links[links[i]];
            PyObject *item = l->items[(l->head + round) % l->cap];
            if (item != NULL)
            {
                total += PyBytes_GET_SIZE(item);
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
                links[kept] = links[i];
                cursor[kept] = cursor[i];
                kept++;
            }
        }
        live = kept;
    }
    PyMem_Free(links);
    PyMem_Free(cursor);
    return total;
}

/* q.hold_buffer(max_messages) -> (buffer, offsets, runs, counts): hold_runs's batch with its
 * payloads copied into one bytes object, `buffer`, in hold's order; `offsets` a bytes of
 * n + 1 native u64 (payload i is buffer[offsets[i]:offsets[i + 1]]); `runs` and `counts` as
 * hold_runs's. Raw payloads are copied from the links' raw storage (no object made for them),
 * others from their bytes. The buffer, the offsets and the run arrays are allocated before
 * anything is popped (a failure there leaves the queue as it was). */
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
    PyObject *counts = PyList_New(0);
    int32_t *run_link = PyMem_Malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    uint32_t *run_count = PyMem_Malloc(sizeof(uint32_t) * (size_t)(n > 0 ? n : 1));
    if (buffer == NULL || offsets == NULL || counts == NULL || run_link == NULL || run_count == NULL)
    {
        Py_XDECREF(buffer);
        Py_XDECREF(offsets);
        Py_XDECREF(counts);
        PyMem_Free(run_link);
        PyMem_Free(run_count);
        return PyErr_Occurred() ? NULL : PyErr_NoMemory();
    }
    char *out = PyBytes_AS_STRING(buffer);
    char *ends = PyBytes_AS_STRING(offsets);
    uint64_t at = 0;
    memcpy(ends, &at, sizeof at);
    Py_ssize_t runs_n = 0;
    int32_t touched = 0;
    for (Py_ssize_t k = 0; k < n; k++)
    {
        int32_t link;
        PyObject *payload = rq_pop_next(q, &link);
        rq_link_t *l = &q->links[link];
        if (l->popped++ == 0)
        {
            q->touched[touched++] = link;
        }
        if (payload != NULL)
        {
            Py_ssize_t length = PyBytes_GET_SIZE(payload);
            memcpy(out + at, PyBytes_AS_STRING(payload), (size_t)length);
            at += (uint64_t)length;
            Py_DECREF(payload);
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
        if (runs_n > 0 && run_link[runs_n - 1] == link)
        {
            run_count[runs_n - 1]++;
        }
        else
        {
            run_link[runs_n] = link;
            run_count[runs_n] = 1;
            runs_n++;
        }
    }
    for (int32_t i = 0; i < touched; i++)
    {
        rq_raw_settle(&q->links[q->touched[i]]);
    }
    PyObject *runs = PyList_New(runs_n);
    int failed = runs == NULL;
    for (Py_ssize_t r = 0; r < runs_n && !failed; r++)
    {
        PyObject *pair = Py_BuildValue("(OI)", q->links[run_link[r]].peer, run_count[r]);
        if (pair == NULL)
        {
            failed = 1;
            break;
        }
        PyList_SET_ITEM(runs, r, pair);
    }
    failed = rq_take_counts(q, touched, counts, failed);
    PyMem_Free(run_link);
    PyMem_Free(run_count);
    if (failed)
    {
        Py_DECREF(buffer);
        Py_DECREF(offsets);
        Py_XDECREF(runs);
        Py_DECREF(counts);
        return NULL;
    }
    return Py_BuildValue("(NNNN)", buffer, offsets, runs, counts);
}

static PyObject *rq_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    unsigned long long address;
    PyObject *owner;
    PyObject *on_due;
    PyObject *message_type;
    int capacity;
    if (!PyArg_ParseTuple(args, "KOOOi:RecvQueue", &address, &owner, &on_due, &message_type, &capacity))
    {
        return NULL;
    }
    if (lt_deliver_fn == NULL)
    {
        PyErr_SetString(PyExc_RuntimeError, "exon.native._fast is not bound (call bind_links first)");
        return NULL;
    }
    if (address == 0 || capacity < 1 || !PyCallable_Check(on_due) || !PyType_Check(message_type) ||
        !PyType_IsSubtype((PyTypeObject *)message_type, &PyTuple_Type))
    {
        PyErr_SetString(PyExc_ValueError, "RecvQueue(table address, owner, on_due, tuple subclass, capacity >= 1)");
        return NULL;
    }
    RecvQueueObject *q = (RecvQueueObject *)type->tp_alloc(type, 0);
    if (q == NULL)
    {
        return NULL;
    }
    q->links = PyMem_Calloc((size_t)capacity, sizeof(rq_link_t));
    q->ready = PyMem_Calloc((size_t)capacity, sizeof(int32_t));
    q->touched = PyMem_Calloc((size_t)capacity, sizeof(int32_t));
    if (q->links == NULL || q->ready == NULL || q->touched == NULL)
    {
        Py_DECREF(q);
        return PyErr_NoMemory();
    }
    q->capacity = capacity;
    q->table = (void *)(uintptr_t)address;
    Py_INCREF(owner);
    q->owner = owner;
    Py_INCREF(on_due);
    q->on_due = on_due;
    Py_INCREF(message_type);
    q->message_type = (PyTypeObject *)message_type;
    q->vectorcall = rq_vectorcall;
    return (PyObject *)q;
}

/* A link index argument in [0, capacity): 0, or -1 with an exception. */
static int link_index_arg(PyObject *arg, int32_t capacity, int32_t *link)
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

static int rq_link_arg(RecvQueueObject *q, PyObject *arg, int32_t *link)
{
    return link_index_arg(arg, q->capacity, link);
}

/* q.attach(link, peer, public=None): messages of `link` may be queued here, as coming from
 * `peer` (`public`: its exon.Peer, when `peer` is the core's PeerId) */
static PyObject *rq_attach(PyObject *self, PyObject *args)
{
    RecvQueueObject *q = (RecvQueueObject *)self;
    PyObject *index;
    PyObject *peer;
    PyObject *public_peer = Py_None;
    int32_t link;
    if (!PyArg_ParseTuple(args, "OO|O:attach", &index, &peer, &public_peer) || rq_link_arg(q, index, &link) < 0)
    {
        return NULL;
    }
    rq_link_t *l = &q->links[link];
    if (l->count > 0)
    {
        PyErr_SetString(PyExc_RuntimeError, "attach: the link still has queued messages");
        return NULL;
    }
    Py_INCREF(peer);
    Py_XSETREF(l->peer, peer);
    Py_XSETREF(l->public_peer, public_peer == Py_None ? NULL : Py_NewRef(public_peer));
    Py_RETURN_NONE;
}

/* q.take_all() -> [(link, payload), ...] in the order the queue would hand them out; the
 * queue is empty afterwards (links stay attached). */
static PyObject *rq_take_all(PyObject *self, PyObject *unused)
{
    RecvQueueObject *q = (RecvQueueObject *)self;
    if (RQ_UNRAW(q) < 0)
    {
        return NULL;
    }
    PyObject *out = PyList_New(0);
    if (out == NULL)
    {
        return NULL;
    }
    while (q->ready_count > 0)
    {
        int32_t link;
        PyObject *payload = rq_pop_next(q, &link);
        PyObject *pair = Py_BuildValue("(iN)", link, payload);
        if (pair == NULL || PyList_Append(out, pair) < 0)
        {
            Py_XDECREF(pair);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(pair);
    }
    return out;
}

/* q.detach(link): forget the link (its queued messages must have been taken first) and
 * give its ring back: the link table hands its indexes out in turn, so a ring kept here
 * would stay until the index came round again (issue #13: every REQ that linked to a REP
 * once left 512 B to 8 KiB here, up to the table's 1,024 indexes) */
static PyObject *rq_detach(PyObject *self, PyObject *arg)
{
    RecvQueueObject *q = (RecvQueueObject *)self;
    int32_t link;
    if (rq_link_arg(q, arg, &link) < 0)
    {
        return NULL;
    }
    rq_link_t *l = &q->links[link];
    if (l->count > 0)
    {
        PyErr_SetString(PyExc_RuntimeError, "detach: the link still has queued messages");
        return NULL;
    }
    Py_CLEAR(l->peer);
    Py_CLEAR(l->public_peer);
    PyMem_Free(l->items);
    l->items = NULL;
    l->cap = 0;
    l->head = 0;
    rq_raw_free(l);
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
    for (int32_t i = 0; i < q->capacity && q->total > 0; i++)
    {
        rq_link_t *l = &q->links[i];
        for (uint32_t k = 0; k < l->count; k++)
        {
            PyObject *item = l->items[(l->head + k) % l->cap];
            bytes += item == NULL ? -4 : (long long)PyBytes_GET_SIZE(item); /* raw: its prefix */
        }
        bytes += (long long)(l->raw_tail - l->raw_head);
    }
    return PyLong_FromLongLong(bytes);
}

static void rq_clear_links(RecvQueueObject *q)
{
    if (q->links == NULL)
    {
        return;
    }
    for (int32_t i = 0; i < q->capacity; i++)
    {
        rq_link_t *l = &q->links[i];
        while (l->count > 0)
        {
            Py_XDECREF(rq_pop_link(q, l)); /* NULL: a raw payload */
        }
        rq_raw_free(l);
        q->raw_count = 0;
        PyMem_Free(l->items);
        l->items = NULL;
        l->cap = 0;
        Py_CLEAR(l->peer);
        Py_CLEAR(l->public_peer);
    }
    q->ready_count = 0;
}

static void rq_dealloc(RecvQueueObject *q)
{
    rq_clear_links(q);
    PyMem_Free(q->links);
    PyMem_Free(q->ready);
    PyMem_Free(q->touched);
    Py_XDECREF(q->owner);
    Py_XDECREF(q->on_due);
    Py_XDECREF((PyObject *)q->message_type);
    Py_TYPE(q)->tp_free((PyObject *)q);
}

static PyMethodDef rq_methods[] = {
    {"attach", rq_attach, METH_VARARGS, "attach(link, peer, public=None)"},
    {"detach", rq_detach, METH_O, "detach(link)"},
    {"take_all", rq_take_all, METH_NOARGS, "take_all() -> [(link, payload), ...]"},
    {"queued_bytes", rq_queued_bytes, METH_NOARGS, "queued_bytes() -> payload bytes queued"},
    {"take", rq_take_many, METH_O, "take(max_messages) -> [Message, ...], deliveries counted"},
    {"hold", rq_hold, METH_O,
     "hold(max_messages) -> ([Message, ...], [(link, count), ...]), deliveries NOT counted"},
    {"hold_runs", rq_hold_runs, METH_O,
     "hold_runs(max_messages) -> ([payload, ...], [(peer, count), ...], [(link, count), ...]),"
     " deliveries NOT counted"},
    {"hold_buffer", rq_hold_buffer, METH_O,
     "hold_buffer(max_messages) -> (buffer, offsets, [(peer, count), ...], [(link, count), ...]),"
     " deliveries NOT counted"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef rq_members[] = {
    {"direct", T_INT, offsetof(RecvQueueObject, direct), 0,
     "1: the socket has nothing queued on its Python side; its receive door may pop here"},
    {"pass_all", T_INT, offsetof(RecvQueueObject, pass_all), 0,
     "1: a SUB that takes every published message; its door may skip the filter"},
    {"raw", T_INT, offsetof(RecvQueueObject, raw), 0,
     "1: payloads are queued as raw bytes, no object each (a PULL taking hold_buffer batches)"},
    {"raw_count", T_PYSSIZET, offsetof(RecvQueueObject, raw_count), READONLY,
     "messages queued raw"},
    {NULL, 0, 0, 0, NULL},
};

static PySequenceMethods rq_as_sequence = {
    .sq_length = rq_length,
};

static PyTypeObject RecvQueueType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "exon.native._fast.RecvQueue",
    .tp_doc = "RecvQueue(table_address, owner, on_due, message_type, capacity)() -> Message or None",
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

/* Queue the fast DATA of descs[0, count) into the RecvQueues of `queues` (a list indexed
 * by socket slot): every fast DATA descriptor whose slot has a RecvQueue with the link
 * attached is queued there (payload bytes made here) and marked handled; FLOWs applied by
 * classify are marked handled too. Returns the list of slots touched (new reference) and
 * sets *left_out to the descriptors the caller must still look at; NULL on error. */
static PyObject *dispatch_descs(exon_lt_desc_t *descs, int count, const char *copy, Py_ssize_t copy_length,
                                PyObject *queues, int *left_out)
{
    Py_ssize_t nq = PyList_GET_SIZE(queues);
    PyObject *touched = PyList_New(0);
    if (touched == NULL)
    {
        return NULL;
    }
    int left = 0;
    for (int k = 0; k < count; k++)
    {
        exon_lt_desc_t *d = &descs[k];
        if (d->link == EXON_LT_FLOW_DONE)
        {
            d->link = LT_HANDLED;
            continue;
        }
        if (d->link < 0 || d->slot < 0 || d->slot >= nq)
        {
            left++;
            continue;
        }
        PyObject *obj = PyList_GET_ITEM(queues, d->slot);
        if (Py_TYPE(obj) != &RecvQueueType)
        {
            left++;
            continue;
        }
        RecvQueueObject *q = (RecvQueueObject *)obj;
        if (d->link >= q->capacity || q->links[d->link].peer == NULL ||
            d->offset < 0 || d->length < EXON_LT_HEADER_LENGTH || (Py_ssize_t)d->offset + d->length > copy_length)
        {
            left++;
            continue;
        }
        if (q->raw)
        {
            if (rq_push_raw(q, d->link, copy + d->offset + EXON_LT_HEADER_LENGTH,
                            d->length - EXON_LT_HEADER_LENGTH) < 0)
            {
                Py_DECREF(touched);
                return NULL;
            }
        }
        else
        {
            PyObject *payload = PyBytes_FromStringAndSize(copy + d->offset + EXON_LT_HEADER_LENGTH,
                                                          d->length - EXON_LT_HEADER_LENGTH);
            if (payload == NULL || rq_push(q, d->link, payload) < 0)
            {
                Py_XDECREF(payload);
                Py_DECREF(touched);
                return NULL;
            }
        }
        d->link = LT_HANDLED;
        if (!q->marked)
        {
            q->marked = 1;
            PyObject *slot = PyLong_FromLong(d->slot);
            if (slot == NULL || PyList_Append(touched, slot) < 0)
            {
                Py_XDECREF(slot);
                Py_DECREF(touched);
                return NULL;
            }
            Py_DECREF(slot);
        }
    }
    /* clear the marks */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(touched); i++)
    {
        long slot = PyLong_AsLong(PyList_GET_ITEM(touched, i));
        PyObject *obj = PyList_GET_ITEM(queues, slot);
        ((RecvQueueObject *)obj)->marked = 0;
    }
    *left_out = left;
    return touched;
}

typedef int (*exon_lt_poll_fn)(void *t, void **images, int32_t count, int32_t max_messages, uint8_t *copy_buf,
                               int32_t copy_cap, int32_t *copy_used, exon_lt_desc_t *out, void *scratch);
typedef int (*exon_lt_classify_fn)(void *t, const int32_t *image_keys, const uint8_t *copy_buf,
                                   exon_lt_desc_t *descs, int32_t count);

static exon_lt_poll_fn lt_poll_fn = NULL;
static exon_lt_classify_fn lt_classify_fn = NULL;

/* poll_batch(table, images, count, limit, copy, copy_cap, used, descs, scratch, keys, queues)
 *   -> (n, left, touched): exon_lt_poll, exon_lt_classify and dispatch in one call, the GIL
 * held throughout (none of them blocks: a batch costs a few microseconds), under the
 * Node's lock. n < 0: exon_lt_poll's code (EXON_E_FULL: *used is the size needed). */
static PyObject *fast_poll_batch(PyObject *module, PyObject *args)
{
    unsigned long long table, images, copy, used, descs, scratch, keys;
    int count, limit, copy_cap;
    PyObject *queues;
    if (!PyArg_ParseTuple(args, "KKiiKiKKKKO!:poll_batch", &table, &images, &count, &limit, &copy, &copy_cap,
                          &used, &descs, &scratch, &keys, &PyList_Type, &queues))
    {
        return NULL;
    }
    if (lt_poll_fn == NULL || lt_classify_fn == NULL)
    {
        PyErr_SetString(PyExc_RuntimeError, "exon.native._fast is not bound (call bind_poll first)");
        return NULL;
    }
    if (count <= 0)
    {
        return Py_BuildValue("(iiN)", 0, 0, PyList_New(0));
    }
    exon_lt_desc_t *d = (exon_lt_desc_t *)(uintptr_t)descs;
    int32_t *used_p = (int32_t *)(uintptr_t)used;
    int n = lt_poll_fn((void *)(uintptr_t)table, (void **)(uintptr_t)images, count, limit,
                       (uint8_t *)(uintptr_t)copy, copy_cap, used_p, d, (void *)(uintptr_t)scratch);
    if (n <= 0)
    {
        return Py_BuildValue("(iiN)", n, 0, PyList_New(0));
    }
    lt_classify_fn((void *)(uintptr_t)table, (const int32_t *)(uintptr_t)keys, (const uint8_t *)(uintptr_t)copy,
                   d, n);
    int left = 0;
    PyObject *touched = dispatch_descs(d, n, (const char *)(uintptr_t)copy, *used_p, queues, &left);
    if (touched == NULL)
    {
        return NULL;
    }
    return Py_BuildValue("(iiN)", n, left, touched);
}

static PyObject *fast_bind_poll(PyObject *module, PyObject *args)
{
    unsigned long long poll_address;
    unsigned long long classify_address;
    if (!PyArg_ParseTuple(args, "KK:bind_poll", &poll_address, &classify_address))
    {
        return NULL;
    }
    if (poll_address == 0 || classify_address == 0)
    {
        PyErr_SetString(PyExc_ValueError, "bind_poll(addresses != 0)");
        return NULL;
    }
    lt_poll_fn = (exon_lt_poll_fn)(uintptr_t)poll_address;
    lt_classify_fn = (exon_lt_classify_fn)(uintptr_t)classify_address;
    Py_RETURN_NONE;
}

/* ---- the Node's lock and the sockets' doors ---------------------------------------------
 *
 * NodeLock is the lock of one exon Node (exon.middleware.node): a plain mutex with
 * threading.Lock's Python interface (acquire(blocking, timeout), release, locked, with), so
 * threading.Condition works over it, and a C interface the doors take directly, without
 * the interpreter's `with` machinery (~200 ns on the reference machine).
 *
 * SocketSend and SocketReceive are the hot calls of one socket as single native calls:
 * lock, the link table's send (credit, framing, offer) or the receive queue's pop
 * (delivery, credit back), unlock. Whatever they cannot finish at once (a cookie, no
 * credit, an empty queue, a closed node, ...) goes to the socket's Python method, the
 * `fallback`, with the caller's arguments unchanged: the doors add no behaviour of their
 * own. Doors stop touching the table once the Node closed them (close_doors), and a
 * socket's doors once the socket disabled them (both under the lock). */

typedef struct
{
    PyObject_HEAD
    PyThread_type_lock mutex;
    int locked;
    int doors_open;
    unsigned long long activity; /* calls the doors completed (the dispatcher watches it) */
}
NodeLockObject;

static PyTypeObject NodeLockType;

static int64_t monotonic_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Take the lock: 1 taken, 0 not within timeout_us (-1: no limit), -1 with an exception (a
 * signal handler raised while waiting). The GIL is released only while blocked. */
static int node_lock_take(NodeLockObject *l, int64_t timeout_us)
{
    if (PyThread_acquire_lock(l->mutex, NOWAIT_LOCK))
    {
        l->locked = 1;
        return 1;
    }
    if (timeout_us == 0)
    {
        return 0;
    }
    int64_t deadline = timeout_us > 0 ? monotonic_us() + timeout_us : 0;
    for (;;)
    {
        int64_t wait = -1;
        if (timeout_us > 0)
        {
            wait = deadline - monotonic_us();
            if (wait <= 0)
            {
                return 0;
            }
        }
        PyLockStatus r;
        Py_BEGIN_ALLOW_THREADS
        r = PyThread_acquire_lock_timed(l->mutex, (PY_TIMEOUT_T)wait, 1);
        Py_END_ALLOW_THREADS
        if (r == PY_LOCK_ACQUIRED)
        {
            l->locked = 1;
            return 1;
        }
        if (r == PY_LOCK_FAILURE)
        {
            return 0;
        }
        if (Py_MakePendingCalls() < 0) /* PY_LOCK_INTR: run the signal handlers */
        {
            return -1;
        }
    }
}

static inline void node_lock_give(NodeLockObject *l)
{
    l->locked = 0;
    PyThread_release_lock(l->mutex);
}

static PyObject *node_lock_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if (!PyArg_ParseTuple(args, ":NodeLock"))
    {
        return NULL;
    }
    NodeLockObject *l = (NodeLockObject *)type->tp_alloc(type, 0);
    if (l == NULL)
    {
        return NULL;
    }
    l->mutex = PyThread_allocate_lock();
    if (l->mutex == NULL)
    {
        Py_DECREF(l);
        return PyErr_NoMemory();
    }
    l->doors_open = 1;
    return (PyObject *)l;
}

static void node_lock_dealloc(NodeLockObject *l)
{
    if (l->mutex != NULL)
    {
        if (l->locked)
        {
            PyThread_release_lock(l->mutex);
        }
        PyThread_free_lock(l->mutex);
    }
    Py_TYPE(l)->tp_free((PyObject *)l);
}

static PyObject *node_lock_acquire(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"blocking", "timeout", NULL};
    int blocking = 1;
    double timeout = -1.0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|pd:acquire", names, &blocking, &timeout))
    {
        return NULL;
    }
    if (!blocking && timeout != -1.0)
    {
        PyErr_SetString(PyExc_ValueError, "can't specify a timeout for a non-blocking call");
        return NULL;
    }
    if (timeout < 0 && timeout != -1.0)
    {
        PyErr_SetString(PyExc_ValueError, "timeout value must be a non-negative number");
        return NULL;
    }
    int64_t us = !blocking ? 0 : timeout < 0 ? -1 : (int64_t)(timeout * 1e6);
    if (blocking && timeout > 0 && us == 0)
    {
        us = 1;
    }
    int r = node_lock_take((NodeLockObject *)self, us);
    if (r < 0)
    {
        return NULL;
    }
    return PyBool_FromLong(r);
}

static PyObject *node_lock_enter(PyObject *self, PyObject *unused)
{
    if (node_lock_take((NodeLockObject *)self, -1) < 0)
    {
        return NULL;
    }
    Py_RETURN_TRUE;
}

static PyObject *node_lock_release(PyObject *self, PyObject *unused)
{
    NodeLockObject *l = (NodeLockObject *)self;
    if (!l->locked)
    {
        PyErr_SetString(PyExc_RuntimeError, "release unlocked lock");
        return NULL;
    }
    node_lock_give(l);
    Py_RETURN_NONE;
}

static PyObject *node_lock_exit(PyObject *self, PyObject *args)
{
    return node_lock_release(self, NULL);
}

static PyObject *node_lock_locked(PyObject *self, PyObject *unused)
{
    return PyBool_FromLong(((NodeLockObject *)self)->locked);
}

static PyObject *node_lock_close_doors(PyObject *self, PyObject *unused)
{
    ((NodeLockObject *)self)->doors_open = 0;
    Py_RETURN_NONE;
}

static PyMethodDef node_lock_methods[] = {
    {"acquire", (PyCFunction)(void (*)(void))node_lock_acquire, METH_VARARGS | METH_KEYWORDS,
     "acquire(blocking=True, timeout=-1) -> bool"},
    {"release", node_lock_release, METH_NOARGS, "release()"},
    {"locked", node_lock_locked, METH_NOARGS, "locked() -> bool"},
    {"__enter__", node_lock_enter, METH_NOARGS, "acquire()"},
    {"__exit__", node_lock_exit, METH_VARARGS, "release()"},
    {"close_doors", node_lock_close_doors, METH_NOARGS,
     "close_doors(): from now on every door of this lock hands its calls to its fallback"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef node_lock_members[] = {
    {"activity", T_ULONGLONG, offsetof(NodeLockObject, activity), READONLY,
     "calls the doors completed"},
    {"doors_open", T_INT, offsetof(NodeLockObject, doors_open), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject NodeLockType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "exon.native._fast.NodeLock",
    .tp_doc = "NodeLock(): a Node's lock (threading.Lock's interface) shared with its sockets' doors",
    .tp_basicsize = sizeof(NodeLockObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = node_lock_new,
    .tp_dealloc = (destructor)node_lock_dealloc,
    .tp_methods = node_lock_methods,
    .tp_members = node_lock_members,
};

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

static PyObject *door_fallback(DoorHead *d, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return PyObject_Vectorcall(d->fallback, args, nargsf, kwnames);
}

static int door_traverse(DoorHead *d, visitproc visit, void *arg)
{
    Py_VISIT(d->fallback);
    Py_VISIT(d->keep);
    Py_VISIT((PyObject *)d->lock);
    Py_VISIT(d->backlog);
    Py_VISIT(d->rest);
    Py_VISIT(d->routes);
    Py_VISIT(d->message_type);
    return 0;
}

static int door_clear(DoorHead *d)
{
    Py_CLEAR(d->fallback);
    Py_CLEAR(d->keep);
    Py_CLEAR(d->lock);
    Py_CLEAR(d->backlog);
    Py_CLEAR(d->rest);
    Py_CLEAR(d->routes);
    Py_CLEAR(d->message_type);
    return 0;
}

static void door_dealloc(DoorHead *d)
{
    PyObject_GC_UnTrack(d);
    door_clear(d);
    Py_TYPE(d)->tp_free((PyObject *)d);
}

static PyObject *door_disable(PyObject *self, PyObject *unused)
{
    ((DoorHead *)self)->disabled = 1;
    Py_RETURN_NONE;
}

static PyMethodDef door_methods[] = {
    {"disable", door_disable, METH_NOARGS, "disable(): every later call goes to the fallback"},
    {NULL, NULL, 0, NULL},
};

static int door_init_head(DoorHead *d, PyObject *lock, PyObject *fallback, PyObject *keep)
{
    if (Py_TYPE(lock) != &NodeLockType || !PyCallable_Check(fallback))
    {
        PyErr_SetString(PyExc_TypeError, "a door needs a NodeLock and a callable fallback");
        return -1;
    }
    Py_INCREF(lock);
    d->lock = (NodeLockObject *)lock;
    Py_INCREF(fallback);
    d->fallback = fallback;
    Py_INCREF(keep);
    d->keep = keep;
    return 0;
}

/* The keyword arguments of a call the door can finish: `cookie` None (if `allow_cookie`),
 * `timeout` None or a number >= 0, and `peer` if `peer` is not NULL (stored there: NULL if
 * absent or None). 0: anything else, the fallback's to judge (and to raise about). */
static int door_keywords(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, int allow_cookie,
                         PyObject **peer)
{
    if (peer != NULL)
    {
        *peer = NULL;
    }
    if (kwnames == NULL)
    {
        return 1;
    }
    Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nkw; k++)
    {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        PyObject *value = args[nargs + k];
        if (peer != NULL && PyUnicode_CompareWithASCIIString(name, "peer") == 0)
        {
            *peer = value == Py_None ? NULL : value;
        }
        else if (allow_cookie && PyUnicode_CompareWithASCIIString(name, "cookie") == 0)
        {
            if (value != Py_None)
            {
                return 0;
            }
        }
        else if (PyUnicode_CompareWithASCIIString(name, "timeout") == 0)
        {
            if (value != Py_None && !((PyFloat_CheckExact(value) && PyFloat_AS_DOUBLE(value) >= 0.0) ||
                                      (PyLong_CheckExact(value) && Py_SIZE(value) >= 0)))
            {
                return 0;
            }
        }
        else
        {
            return 0;
        }
    }
    return 1;
}

typedef struct
{
    DoorHead head;
    void *table;
    int32_t slot;
}
SocketSendObject;

/* send(data, *, cookie=None, timeout=None) -> None: one offer on a link with credit. */
static PyObject *socket_send_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    SocketSendObject *s = (SocketSendObject *)self_obj;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 1 || !PyBytes_CheckExact(args[0]) || s->head.disabled ||
        !door_keywords(args, nargs, kwnames, 1, NULL))
    {
        return door_fallback(&s->head, args, nargsf, kwnames);
    }
    NodeLockObject *lock = s->head.lock;
    if (node_lock_take(lock, -1) < 0)
    {
        return NULL;
    }
    int64_t rc = -1;
    if (lock->doors_open && !s->head.disabled && PyDict_GET_SIZE(s->head.backlog) == 0)
    {
        Py_ssize_t len = PyBytes_GET_SIZE(args[0]);
        if (len <= INT32_MAX - 64)
        {
            rc = lt_send_fn(s->table, s->slot, -1, PyBytes_AS_STRING(args[0]), (int32_t)len);
        }
    }
    if (rc >= 0)
    {
        lock->activity++;
        node_lock_give(lock);
        Py_RETURN_NONE;
    }
    node_lock_give(lock);
    return door_fallback(&s->head, args, nargsf, kwnames);
}

static PyObject *socket_send_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *lock;
    unsigned long long address;
    PyObject *owner;
    int slot;
    PyObject *backlog;
    PyObject *fallback;
    if (!PyArg_ParseTuple(args, "OKOiO!O:SocketSend", &lock, &address, &owner, &slot, &PyDict_Type, &backlog,
                          &fallback))
    {
        return NULL;
    }
    if (lt_send_fn == NULL || address == 0 || slot < 0)
    {
        PyErr_SetString(PyExc_ValueError, "SocketSend(lock, table address != 0, owner, slot >= 0, backlog, fallback)");
        return NULL;
    }
    SocketSendObject *s = (SocketSendObject *)type->tp_alloc(type, 0);
    if (s == NULL)
    {
        return NULL;
    }
    if (door_init_head(&s->head, lock, fallback, owner) < 0)
    {
        Py_DECREF(s);
        return NULL;
    }
    s->table = (void *)(uintptr_t)address;
    s->slot = slot;
    s->head.backlog = Py_NewRef(backlog);
    s->head.vectorcall = socket_send_vectorcall;
    return (PyObject *)s;
}

static PyTypeObject SocketSendType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "exon.native._fast.SocketSend",
    .tp_doc = "SocketSend(lock, table_address, owner, slot, backlog, fallback)(data, *, cookie=None, timeout=None)",
    .tp_basicsize = sizeof(SocketSendObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_new = socket_send_new,
    .tp_dealloc = (destructor)door_dealloc,
    .tp_traverse = (traverseproc)door_traverse,
    .tp_clear = (inquiry)door_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(DoorHead, vectorcall),
    .tp_methods = door_methods,
};

/* receive(timeout=None) -> Message: the next message of the socket's native queue. */
static PyObject *socket_receive_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    DoorHead *d = (DoorHead *)self_obj;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    RecvQueueObject *q = (RecvQueueObject *)d->keep;
    if (nargs > 1 || d->disabled || !q->direct || q->ready_count == 0 || q->raw_count > 0 ||
        !door_keywords(args, nargs, kwnames, 0, NULL))
    {
        return door_fallback(d, args, nargsf, kwnames);
    }
    NodeLockObject *lock = d->lock;
    if (node_lock_take(lock, -1) < 0)
    {
        return NULL;
    }
    if (!lock->doors_open || d->disabled || !q->direct || q->ready_count == 0 || q->raw_count > 0)
    {
        node_lock_give(lock);
        return door_fallback(d, args, nargsf, kwnames);
    }
    PyObject *msg = rq_take(q);
    if (msg != NULL)
    {
        lock->activity++;
    }
    node_lock_give(lock);
    return msg;
}

static PyObject *socket_receive_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *lock;
    PyObject *queue;
    PyObject *fallback;
    if (!PyArg_ParseTuple(args, "OO!O:SocketReceive", &lock, &RecvQueueType, &queue, &fallback))
    {
        return NULL;
    }
    DoorHead *d = (DoorHead *)type->tp_alloc(type, 0);
    if (d == NULL)
    {
        return NULL;
    }
    if (door_init_head(d, lock, fallback, queue) < 0)
    {
        Py_DECREF(d);
        return NULL;
    }
    d->vectorcall = socket_receive_vectorcall;
    return (PyObject *)d;
}

static PyTypeObject SocketReceiveType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "exon.native._fast.SocketReceive",
    .tp_doc = "SocketReceive(lock, queue, fallback)(timeout=None) -> Message",
    .tp_basicsize = sizeof(DoorHead),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_new = socket_receive_new,
    .tp_dealloc = (destructor)door_dealloc,
    .tp_traverse = (traverseproc)door_traverse,
    .tp_clear = (inquiry)door_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(DoorHead, vectorcall),
    .tp_methods = door_methods,
};

#include "exon_fast_pubsub.c" /* PubSend, SubReceive */
#include "exon_fast_peers.c"  /* PeerRoutes, PeerSend, PeerReceive */

static PyObject *fast_bind_links(PyObject *module, PyObject *args)
{
    unsigned long long send_address;
    unsigned long long deliver_address;
    unsigned long long deliver_many_address;
    if (!PyArg_ParseTuple(args, "KKK:bind_links", &send_address, &deliver_address, &deliver_many_address))
    {
        return NULL;
    }
    if (send_address == 0 || deliver_address == 0 || deliver_many_address == 0)
    {
        PyErr_SetString(PyExc_ValueError, "bind_links(addresses != 0)");
        return NULL;
    }
    lt_send_fn = (exon_lt_send_fn)(uintptr_t)send_address;
    lt_deliver_fn = (exon_lt_deliver_fn)(uintptr_t)deliver_address;
    lt_deliver_many_fn = (exon_lt_deliver_many_fn)(uintptr_t)deliver_many_address;
    Py_RETURN_NONE;
}

static PyObject *fast_bind(PyObject *module, PyObject *args)
{
    unsigned long long offer_address;
    if (!PyArg_ParseTuple(args, "K:bind", &offer_address))
    {
        return NULL;
    }
    if (offer_address == 0)
    {
        PyErr_SetString(PyExc_ValueError, "bind(offer address != 0)");
        return NULL;
    }
    offer_fn = (exon_offer_fn)(uintptr_t)offer_address;
    Py_RETURN_NONE;
}

static PyMethodDef fast_methods[] = {
    {"bind", fast_bind, METH_VARARGS, "bind(exon_publication_offer address)"},
    {"bind_links", fast_bind_links, METH_VARARGS,
     "bind_links(exon_lt_send, exon_lt_deliver, exon_lt_deliver_many addresses)"},
    {"bind_poll", fast_bind_poll, METH_VARARGS, "bind_poll(exon_lt_poll, exon_lt_classify addresses)"},
    {"poll_batch", fast_poll_batch, METH_VARARGS,
     "poll_batch(table, images, count, limit, copy, copy_cap, used, descs, scratch, keys, queues) -> (n, left, touched)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef fast_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "exon.native._fast",
    .m_doc = "GIL-holding door for exon's non-blocking hot calls; see exon/native/fast.py.",
    .m_size = -1,
    .m_methods = fast_methods,
};

PyMODINIT_FUNC PyInit__fast(void)
{
    if (PyType_Ready(&OfferType) < 0 || PyType_Ready(&LinkSendType) < 0 ||
        PyType_Ready(&LinkDeliverType) < 0 || PyType_Ready(&RecvQueueType) < 0 ||
        PyType_Ready(&NodeLockType) < 0 || PyType_Ready(&SocketSendType) < 0 ||
        PyType_Ready(&SocketReceiveType) < 0 || PyType_Ready(&PubSendType) < 0 ||
        PyType_Ready(&SubReceiveType) < 0)
    {
        return NULL;
    }
    PyObject *module = PyModule_Create(&fast_module);
    if (module == NULL)
    {
        return NULL;
    }
    Py_INCREF(&OfferType);
    if (PyModule_AddObject(module, "Offer", (PyObject *)&OfferType) < 0)
    {
        Py_DECREF(&OfferType);
        Py_DECREF(module);
        return NULL;
    }
    Py_INCREF(&LinkSendType);
    Py_INCREF(&LinkDeliverType);
    Py_INCREF(&RecvQueueType);
    if (PyModule_AddObject(module, "LinkSend", (PyObject *)&LinkSendType) < 0 ||
        PyModule_AddObject(module, "LinkDeliver", (PyObject *)&LinkDeliverType) < 0 ||
        PyModule_AddObject(module, "RecvQueue", (PyObject *)&RecvQueueType) < 0)
    {
        Py_DECREF(module);
        return NULL;
    }
    Py_INCREF(&NodeLockType);
    Py_INCREF(&SocketSendType);
    Py_INCREF(&SocketReceiveType);
    if (PyModule_AddObject(module, "NodeLock", (PyObject *)&NodeLockType) < 0 ||
        PyModule_AddObject(module, "SocketSend", (PyObject *)&SocketSendType) < 0 ||
        PyModule_AddObject(module, "SocketReceive", (PyObject *)&SocketReceiveType) < 0)
    {
        Py_DECREF(module);
        return NULL;
    }
    Py_INCREF(&PubSendType);
    Py_INCREF(&SubReceiveType);
    if (PyModule_AddObject(module, "PubSend", (PyObject *)&PubSendType) < 0 ||
        PyModule_AddObject(module, "SubReceive", (PyObject *)&SubReceiveType) < 0)
    {
        Py_DECREF(module);
        return NULL;
    }
    if (peer_doors_add_types(module) < 0)
    {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
