/*
 * exon_fast_pubsub.c: the native doors of PUB and SUB (a translation unit of
 * exon.native._fast: NodeLock, DoorHead and RecvQueue come from exon_fast_internal.h).
 *
 * PubSend stands in for PubSocket.send: one call checks every subscriber the message is
 * for (a prefix of its filter matches) and, when each of them has credit, offers the
 * published payload (kind byte MESSAGE, then the message; docs/protocol.md 2.19) on each
 * link. Anything else (a subscriber without credit, pending drop notices, a link that
 * changed since the socket gave the door its targets, a cookie, a large message) goes to
 * the socket's Python send, untouched: the door is a shortcut, never a second rule.
 *
 * SubReceive stands in for SubSocket.receive while the SUB takes every published message
 * (its queue's pass_all): it hands out the next queued payload whose kind byte is MESSAGE
 * as a Message(message, Peer); anything else (a DROPPED notice, a filtered SUB) goes to
 * the socket's Python receive, which pops and judges it.
 */

#include "exon_fast_internal.h"

#define PUB_KIND_MESSAGE 0x00
#define PUB_DOOR_MAX_LENGTH 8192 /* larger messages go through Python (their copy dominates) */

/* ---- SUB ------------------------------------------------------------------------------ */

typedef struct
{
    DoorHead head; /* message_type: of the Messages handed out */
}
SubReceiveObject;

/* The next queued payload if the door may hand it out: a MESSAGE of a link attached with
 * its public peer; NULL otherwise (nothing popped). */
static PyObject *sub_peek(RecvQueueObject *q)
{
    if (q->ready_count == 0 || !q->pass_all || !q->direct || q->raw_count > 0)
    {
        return NULL;
    }
    rq_lane_t *l = rq_next_lane(q);
    PyObject *payload = l->items[l->head].payload;
    if (l->public_peer == NULL || PyBytes_GET_SIZE(payload) < 1 ||
        (unsigned char)PyBytes_AS_STRING(payload)[0] != PUB_KIND_MESSAGE)
    {
        return NULL;
    }
    return payload;
}

/* receive(timeout=None) -> Message: the next published message of a SUB taking all. */
static PyObject *sub_receive_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    SubReceiveObject *s = (SubReceiveObject *)self_obj;
    DoorHead *d = &s->head;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    RecvQueueObject *q = (RecvQueueObject *)d->keep;
    if (nargs > 1 || d->disabled || sub_peek(q) == NULL || !door_keywords(args, nargs, kwnames, NULL, NULL))
    {
        return door_fallback(d, args, nargsf, kwnames);
    }
    NodeLockObject *lock = d->lock;
    if (node_lock_take(lock, -1) < 0)
    {
        return NULL;
    }
    PyObject *payload = lock->doors_open && !d->disabled ? sub_peek(q) : NULL;
    if (payload == NULL)
    {
        node_lock_give(lock);
        return door_fallback(d, args, nargsf, kwnames);
    }
    PyObject *data = PyBytes_FromStringAndSize(PyBytes_AS_STRING(payload) + 1, PyBytes_GET_SIZE(payload) - 1);
    PyObject *msg = data == NULL ? NULL : ((PyTypeObject *)s->head.message_type)->tp_alloc((PyTypeObject *)s->head.message_type, 2);
    if (msg == NULL)
    {
        Py_XDECREF(data);
        node_lock_give(lock);
        return NULL;
    }
    int32_t lane;
    rq_item_t item = rq_pop_next(q, &lane);
    Py_DECREF(item.payload); /* the queue's reference; `payload` is gone now */
    rq_lane_t *popped = &q->lanes[lane];
    msg = rq_deliver_message(q, msg, data, popped->public_peer, lane, popped->link, item.account);
    if (msg == NULL)
    {
        node_lock_give(lock);
        return NULL;
    }
    lock->activity++;
    node_lock_give(lock);
    return msg;
}

static PyObject *sub_receive_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *lock;
    PyObject *queue;
    PyObject *message_type;
    PyObject *fallback;
    if (!PyArg_ParseTuple(args, "OO!OO:SubReceive", &lock, &RecvQueueType, &queue, &message_type, &fallback))
    {
        return NULL;
    }
    if (!PyType_Check(message_type) || !PyType_IsSubtype((PyTypeObject *)message_type, &PyTuple_Type))
    {
        PyErr_SetString(PyExc_TypeError, "SubReceive: message_type must be a tuple subclass");
        return NULL;
    }
    SubReceiveObject *s = (SubReceiveObject *)type->tp_alloc(type, 0);
    if (s == NULL)
    {
        return NULL;
    }
    if (door_init_head(&s->head, lock, fallback, queue) < 0)
    {
        Py_DECREF(s);
        return NULL;
    }
    s->head.message_type = Py_NewRef(message_type);
    s->head.vectorcall = sub_receive_vectorcall;
    return (PyObject *)s;
}

PyTypeObject SubReceiveType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "exon.native._fast.SubReceive",
    .tp_doc = "SubReceive(lock, queue, message_type, fallback)(timeout=None) -> Message",
    .tp_basicsize = sizeof(SubReceiveObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_new = sub_receive_new,
    .tp_dealloc = (destructor)door_dealloc,
    .tp_traverse = (traverseproc)door_traverse,
    .tp_clear = (inquiry)door_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(DoorHead, vectorcall),
    .tp_methods = door_methods,
};

/* ---- PUB ------------------------------------------------------------------------------ */

/* One subscriber as the socket last described it: its link and that link's identity (the
 * door checks it is still the same link), and its prefixes (NULL: everything). */
typedef struct
{
    int32_t link;
    int32_t peer_key;
    uint32_t destination_tag;
    uint32_t peer_incarnation;
    PyObject *prefixes; /* tuple of bytes, or NULL */
    int hit;            /* scratch: the message being published is for it */
}
pub_target_t;

typedef struct
{
    DoorHead head;
    exon_link_table_t *table;
    int32_t slot;
    pub_target_t *targets; /* head.rest(payload, k) sends to targets[k:] (lock held) after an
                            * offer failed midway */
    int32_t count;
    int valid;          /* the targets describe every subscriber: the door may publish */
    unsigned long long published;
    unsigned long long sent;
}
PubSendObject;

static void pub_clear_targets(PubSendObject *p)
{
    for (int32_t i = 0; i < p->count; i++)
    {
        Py_CLEAR(p->targets[i].prefixes);
    }
    PyMem_Free(p->targets);
    p->targets = NULL;
    p->count = 0;
    p->valid = 0;
}

static int pub_matches(PyObject *prefixes, const char *data, Py_ssize_t length)
{
    if (prefixes == NULL)
    {
        return 1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(prefixes);
    for (Py_ssize_t i = 0; i < n; i++)
    {
        PyObject *prefix = PyTuple_GET_ITEM(prefixes, i);
        Py_ssize_t size = PyBytes_GET_SIZE(prefix);
        if (size <= length && memcmp(PyBytes_AS_STRING(prefix), data, (size_t)size) == 0)
        {
            return 1;
        }
    }
    return 0;
}

/* prefix_matches(prefixes, data) -> bool: pub_matches as the PUB door applies it (prefixes:
 * a tuple of bytes, or None for everything), for the parity test with the core's
 * PrefixFilter.matches (tests/middleware/test_rule_parity.py). */
PyObject *fast_prefix_matches(PyObject *module, PyObject *args)
{
    PyObject *prefixes;
    const char *data;
    Py_ssize_t length;
    if (!PyArg_ParseTuple(args, "Oy#:prefix_matches", &prefixes, &data, &length))
    {
        return NULL;
    }
    int ok = prefixes == Py_None || PyTuple_CheckExact(prefixes);
    for (Py_ssize_t k = 0; ok && prefixes != Py_None && k < PyTuple_GET_SIZE(prefixes); k++)
    {
        ok = PyBytes_CheckExact(PyTuple_GET_ITEM(prefixes, k));
    }
    if (!ok)
    {
        PyErr_SetString(PyExc_TypeError, "prefix_matches: a tuple of bytes prefixes or None");
        return NULL;
    }
    return PyBool_FromLong(pub_matches(prefixes == Py_None ? NULL : prefixes, data, length));
}

/* Every target the message is for still is the link described, with credit and room for
 * the payload: 1 (hits marked); 0 when the Python side must decide. */
static int pub_ready(PubSendObject *p, const char *data, Py_ssize_t length)
{
    exon_link_table_t *t = p->table;
    for (int32_t i = 0; i < p->count; i++)
    {
        pub_target_t *g = &p->targets[i];
        if (g->link >= t->high)
        {
            return 0;
        }
        exon_lt_link_t *l = &t->links[g->link];
        if (l->pub == NULL || l->socket_slot != p->slot || l->peer_key != g->peer_key ||
            l->destination_tag != g->destination_tag || l->peer_incarnation != g->peer_incarnation)
        {
            p->valid = 0; /* the socket describes its subscribers again (PubSocket._door_targets) */
            return 0;
        }
        g->hit = pub_matches(g->prefixes, data, length);
        if (g->hit && (l->sent >= l->limit || length + 1 > l->max_out))
        {
            return 0;
        }
    }
    return 1;
}

/* send(data, *, cookie=None, timeout=None) -> None: publish to every subscriber it is for. */
static PyObject *pub_send_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PubSendObject *p = (PubSendObject *)self_obj;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    int cookie;
    if (nargs != 1 || !PyBytes_CheckExact(args[0]) || !p->valid ||
        PyBytes_GET_SIZE(args[0]) > PUB_DOOR_MAX_LENGTH || !door_keywords(args, nargs, kwnames, &cookie, NULL))
    {
        return door_fallback(&p->head, args, nargsf, kwnames);
    }
    NodeLockObject *lock = p->head.lock;
    if (node_lock_take(lock, -1) < 0)
    {
        return NULL;
    }
    const char *data = PyBytes_AS_STRING(args[0]);
    Py_ssize_t length = PyBytes_GET_SIZE(args[0]);
    if (exon_lt_hold_reason(door_hold(&p->head, cookie)) != 0 || !p->valid || !pub_ready(p, data, length))
    {
        node_lock_give(lock);
        return door_fallback(&p->head, args, nargsf, kwnames);
    }
    char buf[PUB_DOOR_MAX_LENGTH + 1];
    buf[0] = PUB_KIND_MESSAGE;
    memcpy(buf + 1, data, (size_t)length);
    for (int32_t i = 0; i < p->count; i++)
    {
        pub_target_t *g = &p->targets[i];
        if (!g->hit)
        {
            continue;
        }
        if (lt_send_fn(p->table, p->slot, g->link, buf, (int32_t)length + 1) < 0)
        {
            /* the publication refused it (back pressure, rotation...): the socket sends the
             * rest its own way, which queues what cannot go now */
            PyObject *r = PyObject_CallFunction(p->head.rest, "y#i", buf, length + 1, i);
            p->published++;
            lock->activity++;
            node_lock_give(lock);
            if (r == NULL)
            {
                return NULL;
            }
            Py_DECREF(r);
            Py_RETURN_NONE;
        }
        p->sent++;
    }
    p->published++;
    lock->activity++;
    node_lock_give(lock);
    Py_RETURN_NONE;
}

/* door.set_targets([(link, peer_key, destination_tag, peer_incarnation, prefixes|None), ...])
 * describes every subscriber (the door publishes); set_targets(None): the door steps aside
 * until described again. Lock held by the caller. */
static PyObject *pub_set_targets(PyObject *self, PyObject *arg)
{
    PubSendObject *p = (PubSendObject *)self;
    pub_clear_targets(p);
    if (arg == Py_None)
    {
        Py_RETURN_NONE;
    }
    if (!PyList_Check(arg))
    {
        PyErr_SetString(PyExc_TypeError, "set_targets: a list of targets, or None");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(arg);
    pub_target_t *targets = PyMem_Calloc(n > 0 ? (size_t)n : 1, sizeof(pub_target_t));
    if (targets == NULL)
    {
        return PyErr_NoMemory();
    }
    p->targets = targets;
    for (Py_ssize_t i = 0; i < n; i++)
    {
        pub_target_t *g = &targets[i];
        PyObject *prefixes;
        unsigned int tag;
        unsigned int incarnation;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(arg, i), "iiIIO:target", &g->link, &g->peer_key, &tag,
                              &incarnation, &prefixes))
        {
            p->count = (int32_t)i;
            pub_clear_targets(p);
            return NULL;
        }
        g->destination_tag = tag;
        g->peer_incarnation = incarnation;
        if (prefixes != Py_None)
        {
            int ok = PyTuple_CheckExact(prefixes);
            for (Py_ssize_t k = 0; ok && k < PyTuple_GET_SIZE(prefixes); k++)
            {
                ok = PyBytes_CheckExact(PyTuple_GET_ITEM(prefixes, k));
            }
            if (!ok || g->link < 0 || g->link >= p->table->capacity)
            {
                p->count = (int32_t)i;
                pub_clear_targets(p);
                PyErr_SetString(PyExc_ValueError, "set_targets: a link index and a tuple of bytes prefixes or None");
                return NULL;
            }
            g->prefixes = Py_NewRef(prefixes);
        }
        else if (g->link < 0 || g->link >= p->table->capacity)
        {
            p->count = (int32_t)i;
            pub_clear_targets(p);
            PyErr_SetString(PyExc_ValueError, "set_targets: link index out of range");
            return NULL;
        }
    }
    p->count = (int32_t)n;
    p->valid = 1;
    Py_RETURN_NONE;
}

static PyObject *pub_send_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *lock;
    unsigned long long address;
    PyObject *owner;
    int slot;
    PyObject *backlog;
    PyObject *fallback;
    PyObject *rest;
    if (!PyArg_ParseTuple(args, "OKOiO!OO:PubSend", &lock, &address, &owner, &slot, &PyDict_Type, &backlog,
                          &fallback, &rest))
    {
        return NULL;
    }
    if (lt_send_fn == NULL || address == 0 || slot < 0 || !PyCallable_Check(rest))
    {
        PyErr_SetString(PyExc_ValueError,
                        "PubSend(lock, table address != 0, owner, slot >= 0, backlog, fallback, rest)");
        return NULL;
    }
    PubSendObject *p = (PubSendObject *)type->tp_alloc(type, 0);
    if (p == NULL)
    {
        return NULL;
    }
    if (door_init_head(&p->head, lock, fallback, owner) < 0)
    {
        Py_DECREF(p);
        return NULL;
    }
    p->table = (exon_link_table_t *)(uintptr_t)address;
    p->slot = slot;
    p->head.backlog = Py_NewRef(backlog);
    p->head.rest = Py_NewRef(rest);
    p->head.vectorcall = pub_send_vectorcall;
    return (PyObject *)p;
}

static void pub_send_dealloc(PubSendObject *p)
{
    PyObject_GC_UnTrack(p);
    pub_clear_targets(p);
    door_clear(&p->head);
    Py_TYPE(p)->tp_free((PyObject *)p);
}

static PyObject *pub_disable(PyObject *self, PyObject *unused)
{
    PubSendObject *p = (PubSendObject *)self;
    p->head.disabled = 1;
    pub_clear_targets(p);
    Py_RETURN_NONE;
}

static PyMethodDef pub_send_methods[] = {
    {"disable", pub_disable, METH_NOARGS, "disable(): every later call goes to the fallback"},
    {"set_targets", pub_set_targets, METH_O,
     "set_targets([(link, peer_key, destination_tag, peer_incarnation, prefixes or None), ...] or None)"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef pub_send_members[] = {
    {"published", T_ULONGLONG, offsetof(PubSendObject, published), READONLY, "messages the door published"},
    {"sent", T_ULONGLONG, offsetof(PubSendObject, sent), READONLY, "copies the door offered to subscribers"},
    {"valid", T_INT, offsetof(PubSendObject, valid), READONLY, "1: the door publishes (targets described)"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject PubSendType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "exon.native._fast.PubSend",
    .tp_doc = "PubSend(lock, table_address, owner, slot, backlog, fallback, rest)(data, *, cookie=None, timeout=None)",
    .tp_basicsize = sizeof(PubSendObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_new = pub_send_new,
    .tp_dealloc = (destructor)pub_send_dealloc,
    .tp_traverse = (traverseproc)door_traverse,
    .tp_clear = (inquiry)door_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(DoorHead, vectorcall),
    .tp_methods = pub_send_methods,
    .tp_members = pub_send_members,
};
