/*
 * exon_fast.c: the GIL-holding door for exon's non-blocking hot calls (exon.native._fast).
 *
 * cffi releases and re-takes the GIL around every call, and converts every argument
 * generically: about 150-250 ns per call on the reference machine, several times the cost
 * of the offer itself (~30 ns for a 64 B message). A publication offer never blocks, so
 * holding the GIL through it is cheaper for everyone than handing it off.
 *
 * It calls the cffi module's C functions through pointers it is handed at import
 * (exon/native/__init__.py binds them once: exon_publication_offer, and the link table's
 * send, deliver, poll and classify), so the core is compiled once, in _exon; an Offer
 * object calls exon_publication_offer through that pointer with the publication's address,
 * via vectorcall. Its own C is the CPython side of the sockets' hot calls, in four
 * translation units sharing exon_fast_internal.h: this file (Offer, the link table's calls,
 * poll_batch, the Node's lock, the doors' common parts, SocketSend, SocketReceive),
 * exon_fast_inbox.c (RecvQueue, a socket's receive queue and its round-robin over peers),
 * exon_fast_pubsub.c (PUB and SUB, with the PUB's prefix matching) and exon_fast_peers.c
 * (ROUTER and DEALER). Anything slow or blocking stays on the cffi side, where the GIL is
 * released.
 *
 * The one rule it takes from a header is the fast-path guard, exon_lt_hold_reason
 * (exon_link_table.h, static inline): every send door asks it, with the state it holds.
 */
#include "exon_fast_internal.h"

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

exon_lt_send_fn lt_send_fn = NULL;
exon_lt_deliver_fn lt_deliver_fn = NULL;
exon_lt_deliver_many_fn lt_deliver_many_fn = NULL;

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

/* LinkSend(table, owner)(slot, link, data, hold=0) -> link index used, or the reason it
 * was not sent (exon_link_table.h: exon_lt_hold_reason(hold), then exon_lt_send's) */
static PyObject *lt_send_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    TableCallObject *self = (TableCallObject *)self_obj;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 3 || nargs > 4 || kwnames != NULL)
    {
        PyErr_SetString(PyExc_TypeError, "send(slot, link, data, hold=0)");
        return NULL;
    }
    int32_t slot;
    int32_t link;
    int32_t hold = 0;
    if (table_int_arg(args[0], &slot) < 0 || table_int_arg(args[1], &link) < 0 ||
        (nargs == 4 && table_int_arg(args[3], &hold) < 0))
    {
        return NULL;
    }
    int64_t reason = exon_lt_hold_reason((uint32_t)hold);
    if (reason != 0)
    {
        return PyLong_FromLongLong(reason);
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

/* LinkSendMany(table, owner)(slot, link, payloads, start, hold=0) -> the index of the first
 * payload not sent (start when exon_lt_hold_reason(hold) holds them): payloads[start:] (a list or tuple) offered one after another as exon_lt_send
 * offers one, in one call. The walk stops at the first payload it cannot send at once (not
 * exact bytes, too long for an int32, or any code from exon_lt_send: no credit, too large,
 * back-pressured, no link); the caller sends that one its own way (it waits, retries or
 * raises as a single send would) and calls again from the next. The caller holds the
 * Node's lock, which guards the table (a payload of SEND_WITHOUT_GIL bytes or more is
 * copied without the GIL, as a door's send is). */
static PyObject *lt_send_many_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf,
                                         PyObject *kwnames)
{
    TableCallObject *self = (TableCallObject *)self_obj;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 4 || nargs > 5 || kwnames != NULL)
    {
        PyErr_SetString(PyExc_TypeError, "send_many(slot, link, payloads, start, hold=0)");
        return NULL;
    }
    int32_t slot;
    int32_t link;
    int32_t hold = 0;
    if (table_int_arg(args[0], &slot) < 0 || table_int_arg(args[1], &link) < 0 ||
        (nargs == 5 && table_int_arg(args[4], &hold) < 0))
    {
        return NULL;
    }
    PyObject *payloads = args[2];
    if (!PyList_CheckExact(payloads) && !PyTuple_CheckExact(payloads))
    {
        PyErr_SetString(PyExc_TypeError, "send_many: payloads is a list or a tuple");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[3]);
    if (start == -1 && PyErr_Occurred())
    {
        return NULL;
    }
    if (start < 0)
    {
        PyErr_SetString(PyExc_ValueError, "send_many: start >= 0");
        return NULL;
    }
    Py_ssize_t i = start;
    if (exon_lt_hold_reason((uint32_t)hold) != 0)
    {
        i = PySequence_Fast_GET_SIZE(payloads); /* held: none sent (returns start) */
        return PyLong_FromSsize_t(start < i ? start : i);
    }
    for (; i < PySequence_Fast_GET_SIZE(payloads); i++)
    {
        PyObject *data = PySequence_Fast_GET_ITEM(payloads, i);
        if (!PyBytes_CheckExact(data) || PyBytes_GET_SIZE(data) > INT32_MAX - 64)
        {
            break;
        }
        /* as a door's send: a big one without the GIL (another thread may change a list
         * meanwhile: the payload is held, and the list is read again on each turn) */
        Py_INCREF(data);
        int64_t rc = door_send(self->table, slot, link, PyBytes_AS_STRING(data), (int32_t)PyBytes_GET_SIZE(data));
        Py_DECREF(data);
        if (rc < 0)
        {
            break;
        }
    }
    Py_ssize_t count = PySequence_Fast_GET_SIZE(payloads);
    return PyLong_FromSsize_t(i < count ? i : count);
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

static PyObject *lt_send_many_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    return table_call_new(type, args, lt_send_many_vectorcall, (void *)lt_send_fn);
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

static PyTypeObject LinkSendManyType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "exon.native._fast.LinkSendMany",
    .tp_doc = "LinkSendMany(table_address, owner)(slot, link, payloads, start) -> first index not sent",
    .tp_basicsize = sizeof(TableCallObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = lt_send_many_new,
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

#define LT_HANDLED EXON_LT_FLOW_DONE /* a descriptor dispatch queued: nothing left to do */

/* Queue the fast DATA of descs[0, count) into the RecvQueues of `queues` (a list indexed
 * by socket slot): every fast DATA descriptor whose slot has a RecvQueue with the link
 * attached is queued there (payload bytes made here) and marked handled; FLOWs applied by
 * classify and sealed frames it dropped (EXON_LT_DROPPED) are marked handled too. Returns the list of slots touched (new reference) and
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
        int32_t lane = d->link < q->link_cap ? q->link_lane[d->link] : -1;
        if (lane < 0 || d->offset < 0 || d->length < EXON_LT_HEADER_LENGTH || (Py_ssize_t)d->offset + d->length > copy_length)
        {
            left++;
            continue;
        }
        if (q->raw)
        {
            if (rq_push_raw(q, lane, copy + d->offset + EXON_LT_HEADER_LENGTH,
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
            if (payload == NULL || rq_push(q, lane, payload, RQ_FAST) < 0)
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
typedef int (*exon_lt_classify_fn)(void *t, void **images, const int32_t *image_keys,
                                   uint8_t *copy_buf, exon_lt_desc_t *descs, int32_t count);

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
    /* Opening sealed frames (encrypted links) costs about a microsecond per KiB: a batch that
     * holds any is classified with the GIL released (nothing in classify touches Python;
     * the Node's lock, held, keeps the table, buffers and images; a thread waiting for that
     * lock waits without the GIL). A plaintext batch keeps it, as before. */
    const uint8_t *frames = (const uint8_t *)(uintptr_t)copy;
    int sealed = 0;
    for (int k = 0; k < n && !sealed; k++)
    {
        sealed = d[k].length > 2 && frames[d[k].offset + 2] == EXON_PROTO_SEALED;
    }
    if (sealed)
    {
        Py_BEGIN_ALLOW_THREADS
        lt_classify_fn((void *)(uintptr_t)table, (void **)(uintptr_t)images,
                       (const int32_t *)(uintptr_t)keys, (uint8_t *)(uintptr_t)copy, d, n);
        Py_END_ALLOW_THREADS
    }
    else
    {
        lt_classify_fn((void *)(uintptr_t)table, (void **)(uintptr_t)images,
                       (const int32_t *)(uintptr_t)keys, (uint8_t *)(uintptr_t)copy, d, n);
    }
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


static int64_t monotonic_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Take the lock: 1 taken, 0 not within timeout_us (-1: no limit), -1 with an exception (a
 * signal handler raised while waiting). The GIL is released only while blocked. */
int node_lock_take(NodeLockObject *l, int64_t timeout_us)
{
    if (exon_mutex_try(&l->state))
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
        int r;
        Py_BEGIN_ALLOW_THREADS
        r = exon_mutex_wait(&l->state, wait);
        Py_END_ALLOW_THREADS
        if (r == 1)
        {
            l->locked = 1;
            return 1;
        }
        if (r == -EINTR && Py_MakePendingCalls() < 0) /* run the signal handlers */
        {
            return -1;
        }
        /* timed out, woken or the value moved: look at the clock and the lock again */
    }
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
    l->doors_open = 1;
    return (PyObject *)l;
}

static void node_lock_dealloc(NodeLockObject *l)
{
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

PyTypeObject NodeLockType = {
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

PyObject *door_fallback(DoorHead *d, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return PyObject_Vectorcall(d->fallback, args, nargsf, kwnames);
}

int door_traverse(DoorHead *d, visitproc visit, void *arg)
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

int door_clear(DoorHead *d)
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

void door_dealloc(DoorHead *d)
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

PyMethodDef door_methods[] = {
    {"disable", door_disable, METH_NOARGS, "disable(): every later call goes to the fallback"},
    {NULL, NULL, 0, NULL},
};

int door_init_head(DoorHead *d, PyObject *lock, PyObject *fallback, PyObject *keep)
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

/* The keyword arguments of a call the door can take: `cookie` if `cookie` is not NULL
 * (set there: 1 when one is given, not None; the guard then sends the call on to the
 * fallback), `timeout` None or a number >= 0, and `peer` if `peer` is not NULL (stored
 * there: NULL if absent or None). 0: anything else, the fallback's to judge (and to raise
 * about). */
int door_keywords(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, int *cookie,
                         PyObject **peer)
{
    if (peer != NULL)
    {
        *peer = NULL;
    }
    if (cookie != NULL)
    {
        *cookie = 0;
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
        else if (cookie != NULL && PyUnicode_CompareWithASCIIString(name, "cookie") == 0)
        {
            *cookie = value != Py_None;
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
    int cookie;
    if (nargs != 1 || !PyBytes_CheckExact(args[0]) || PyBytes_GET_SIZE(args[0]) > INT32_MAX - 64 ||
        !door_keywords(args, nargs, kwnames, &cookie, NULL))
    {
        return door_fallback(&s->head, args, nargsf, kwnames);
    }
    NodeLockObject *lock = s->head.lock;
    if (node_lock_take(lock, -1) < 0)
    {
        return NULL;
    }
    int64_t rc = exon_lt_hold_reason(door_hold(&s->head, cookie));
    if (rc == 0)
    {
        rc = door_send(s->table, s->slot, EXON_LT_ROUND_ROBIN, PyBytes_AS_STRING(args[0]),
                       (int32_t)PyBytes_GET_SIZE(args[0]));
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
        !door_keywords(args, nargs, kwnames, NULL, NULL))
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
    {"prefix_matches", fast_prefix_matches, METH_VARARGS,
     "prefix_matches(prefixes or None, data): the PUB door's prefix rule"},
    {"poll_batch", fast_poll_batch, METH_VARARGS,
     "poll_batch(table, images, count, limit, copy, copy_cap, used, descs, scratch, keys, queues) -> (n, left, touched)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef fast_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "exon.native._fast",
    .m_doc = "GIL-holding door for exon's non-blocking hot calls; see exon/native/fastpath/exon_fast.c.",
    .m_size = -1,
    .m_methods = fast_methods,
};

PyMODINIT_FUNC PyInit__fast(void)
{
    if (PyType_Ready(&OfferType) < 0 || PyType_Ready(&LinkSendType) < 0 ||
        PyType_Ready(&LinkDeliverType) < 0 || PyType_Ready(&RecvQueueType) < 0 ||
        PyType_Ready(&NodeLockType) < 0 || PyType_Ready(&SocketSendType) < 0 ||
        PyType_Ready(&SocketReceiveType) < 0 || PyType_Ready(&PubSendType) < 0 ||
        PyType_Ready(&SubReceiveType) < 0 || PyType_Ready(&LinkSendManyType) < 0)
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
    Py_INCREF(&LinkSendManyType);
    if (PyModule_AddObject(module, "LinkSendMany", (PyObject *)&LinkSendManyType) < 0)
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
