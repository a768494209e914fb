/*
 * exon_fast_peers.c: the native doors of ROUTER and DEALER (a translation unit of
 * exon.native._fast: NodeLock, DoorHead and RecvQueue come from exon_fast_internal.h).
 */

#include "exon_fast_internal.h"

/* ---- the doors of the sockets that name their peers (ROUTER, DEALER) -------------------
 *
 * PeerRoutes is one such socket's view of its attached links for the doors: per link index
 * the public Peer the socket hands out in its Messages (set by the socket once it knows
 * the link needs no envelope: a DEALER's ROUTER peers, a ROUTER's DEALER peers), and the
 * reverse map, Peer object -> link index, as an open-addressing table keyed by the
 * object's address (a received Message's .peer is that very object, so a reply costs no
 * hashing of a Python object; an equal Peer built elsewhere misses and takes the method).
 * The node drops a link's entry the moment the link detaches (FastLinks.detach), before
 * its index can be reused. `round_robin`: a send without a peer may go round-robin
 * natively (a DEALER with no REP linked).
 *
 * PeerSend: send(data, *, peer=None, cookie=None, timeout=None): with a routed peer, one
 * offer on that link; without a peer, round-robin when `round_robin` is set (`peer` is a
 * keyword of the ROUTER's door only: `takes_peer`). PeerReceive:
 * receive(timeout=None): the next Message of a non-plain socket's native queue when its
 * link (the head of the fair-queuing ring) is routed. Anything else goes to the fallback,
 * as for SocketSend/SocketReceive. */

typedef struct
{
    PyObject_HEAD
    int32_t capacity;      /* link indexes 0..capacity-1 */
    PyObject **peer_of;    /* per link: the routed Peer (strong reference) or NULL */
    PyObject **keys;       /* address table: Peer objects (borrowed from peer_of) */
    int32_t *values;       /* their link indexes */
    uint32_t mask;         /* table size - 1 (a power of two) */
    uint32_t used;
    int round_robin;
}
PeerRoutesObject;

static PyTypeObject PeerRoutesType;

static inline uint32_t pr_hash(PyObject *key, uint32_t mask)
{
    uintptr_t v = (uintptr_t)key >> 4;
    return (uint32_t)((v * 0x9E3779B97F4A7C15ull) >> 32) & mask;
}

static inline int32_t pr_find(PeerRoutesObject *r, PyObject *key)
{
    uint32_t i = pr_hash(key, r->mask);
    while (r->keys[i] != NULL)
    {
        if (r->keys[i] == key)
        {
            return r->values[i];
        }
        i = (i + 1) & r->mask;
    }
    return -1;
}

static void pr_table_put(PyObject **keys, int32_t *values, uint32_t mask, PyObject *key, int32_t value)
{
    uint32_t i = pr_hash(key, mask);
    while (keys[i] != NULL && keys[i] != key)
    {
        i = (i + 1) & mask;
    }
    keys[i] = key;
    values[i] = value;
}

/* Remove `key` (present or not): linear probing's backward-shift deletion. */
static void pr_table_remove(PeerRoutesObject *r, PyObject *key)
{
    uint32_t i = pr_hash(key, r->mask);
    while (r->keys[i] != key)
    {
        if (r->keys[i] == NULL)
        {
            return;
        }
        i = (i + 1) & r->mask;
    }
    r->used--;
    uint32_t hole = i;
    for (;;)
    {
        i = (i + 1) & r->mask;
        if (r->keys[i] == NULL)
        {
            break;
        }
        uint32_t home = pr_hash(r->keys[i], r->mask);
        /* the entry at i may fill the hole unless its home lies cyclically in (hole, i] */
        int stays = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
        if (!stays)
        {
            r->keys[hole] = r->keys[i];
            r->values[hole] = r->values[i];
            hole = i;
        }
    }
    r->keys[hole] = NULL;
}

static int pr_grow(PeerRoutesObject *r)
{
    uint32_t size = 2 * (r->mask + 1);
    PyObject **keys = PyMem_Calloc(size, sizeof(PyObject *));
    int32_t *values = PyMem_Calloc(size, sizeof(int32_t));
    if (keys == NULL || values == NULL)
    {
        PyMem_Free(keys);
        PyMem_Free(values);
        PyErr_NoMemory();
        return -1;
    }
    for (uint32_t i = 0; i <= r->mask; i++)
    {
        if (r->keys[i] != NULL)
        {
            pr_table_put(keys, values, size - 1, r->keys[i], r->values[i]);
        }
    }
    PyMem_Free(r->keys);
    PyMem_Free(r->values);
    r->keys = keys;
    r->values = values;
    r->mask = size - 1;
    return 0;
}

static void pr_drop_link(PeerRoutesObject *r, int32_t link)
{
    PyObject *peer = r->peer_of[link];
    if (peer != NULL)
    {
        if (pr_find(r, peer) == link)
        {
            pr_table_remove(r, peer);
        }
        r->peer_of[link] = NULL;
        Py_DECREF(peer);
    }
}

static int pr_link_arg(PeerRoutesObject *r, PyObject *arg, int32_t *link)
{
    return link_index_arg(arg, r->capacity, link);
}

/* routes.set(link, peer): sends to `peer` (this very object) go on `link`, and the receive
 * door hands out the link's messages as coming from it. A peer routed on another link
 * before moves here. */
static PyObject *pr_set(PyObject *self, PyObject *args)
{
    PeerRoutesObject *r = (PeerRoutesObject *)self;
    PyObject *index;
    PyObject *peer;
    int32_t link;
    if (!PyArg_ParseTuple(args, "OO:set", &index, &peer) || pr_link_arg(r, index, &link) < 0)
    {
        return NULL;
    }
    if (peer == Py_None)
    {
        PyErr_SetString(PyExc_TypeError, "set(link, peer): peer is not None");
        return NULL;
    }
    if (2 * (r->used + 1) > r->mask + 1 && pr_grow(r) < 0)
    {
        return NULL;
    }
    pr_drop_link(r, link);
    int32_t other = pr_find(r, peer);
    if (other >= 0)
    {
        pr_drop_link(r, other);
    }
    Py_INCREF(peer);
    r->peer_of[link] = peer;
    pr_table_put(r->keys, r->values, r->mask, peer, link);
    r->used++;
    Py_RETURN_NONE;
}

/* routes.drop(link): the link is gone (or needs the methods): no route, no door pops */
static PyObject *pr_drop(PyObject *self, PyObject *arg)
{
    PeerRoutesObject *r = (PeerRoutesObject *)self;
    int32_t link;
    if (pr_link_arg(r, arg, &link) < 0)
    {
        return NULL;
    }
    pr_drop_link(r, link);
    Py_RETURN_NONE;
}

/* routes.link_of(peer) -> the link index a send to this object goes on, or -1 */
static PyObject *pr_link_of(PyObject *self, PyObject *peer)
{
    return PyLong_FromLong(pr_find((PeerRoutesObject *)self, peer));
}

static PyObject *pr_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    int capacity;
    if (!PyArg_ParseTuple(args, "i:PeerRoutes", &capacity))
    {
        return NULL;
    }
    if (capacity < 1)
    {
        PyErr_SetString(PyExc_ValueError, "PeerRoutes(capacity >= 1)");
        return NULL;
    }
    PeerRoutesObject *r = (PeerRoutesObject *)type->tp_alloc(type, 0);
    if (r == NULL)
    {
        return NULL;
    }
    r->capacity = capacity;
    r->mask = 7;
    r->peer_of = PyMem_Calloc((size_t)capacity, sizeof(PyObject *));
    r->keys = PyMem_Calloc(r->mask + 1, sizeof(PyObject *));
    r->values = PyMem_Calloc(r->mask + 1, sizeof(int32_t));
    if (r->peer_of == NULL || r->keys == NULL || r->values == NULL)
    {
        Py_DECREF(r);
        return PyErr_NoMemory();
    }
    return (PyObject *)r;
}

static void pr_clear_all(PeerRoutesObject *r)
{
    if (r->peer_of != NULL)
    {
        for (int32_t i = 0; i < r->capacity; i++)
        {
            Py_CLEAR(r->peer_of[i]);
        }
    }
    if (r->keys != NULL)
    {
        memset(r->keys, 0, sizeof(PyObject *) * (r->mask + 1));
    }
    r->used = 0;
}

static void pr_dealloc(PeerRoutesObject *r)
{
    pr_clear_all(r);
    PyMem_Free(r->peer_of);
    PyMem_Free(r->keys);
    PyMem_Free(r->values);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static Py_ssize_t pr_length(PyObject *self)
{
    return (Py_ssize_t)((PeerRoutesObject *)self)->used;
}

static PyMethodDef pr_methods[] = {
    {"set", pr_set, METH_VARARGS, "set(link, peer): route sends to `peer` (this object) on `link`"},
    {"drop", pr_drop, METH_O, "drop(link): forget the link's route"},
    {"link_of", pr_link_of, METH_O, "link_of(peer) -> link index or -1"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef pr_members[] = {
    {"round_robin", T_INT, offsetof(PeerRoutesObject, round_robin), 0,
     "1: a send without a peer may go round-robin natively (no link needs framing)"},
    {NULL, 0, 0, 0, NULL},
};

static PySequenceMethods pr_as_sequence = {
    .sq_length = pr_length,
};

static PyTypeObject PeerRoutesType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "exon.native._fast.PeerRoutes",
    .tp_doc = "PeerRoutes(capacity): Peer <-> link index of one socket's routed links",
    .tp_basicsize = sizeof(PeerRoutesObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = pr_new,
    .tp_dealloc = (destructor)pr_dealloc,
    .tp_methods = pr_methods,
    .tp_members = pr_members,
    .tp_as_sequence = &pr_as_sequence,
};

typedef struct
{
    DoorHead head;
    void *table;
    int32_t slot;        /* head.routes: the socket's PeerRoutes */
    int takes_peer;      /* 0: a `peer` keyword is the fallback's (a DEALER has none) */
}
PeerSendObject;

/* send(data, *, peer=None, cookie=None, timeout=None) -> None */
static PyObject *peer_send_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PeerSendObject *s = (PeerSendObject *)self_obj;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *peer = NULL;
    int cookie;
    if (nargs != 1 || !PyBytes_CheckExact(args[0]) || PyBytes_GET_SIZE(args[0]) > INT32_MAX - 64 ||
        !door_keywords(args, nargs, kwnames, &cookie, s->takes_peer ? &peer : NULL))
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
        /* a routed peer's link, round-robin (no peer given and allowed), else none */
        int32_t link = EXON_LT_LINK_NONE;
        if (peer != NULL)
        {
            link = pr_find((PeerRoutesObject *)s->head.routes, peer);
            link = link >= 0 ? link : EXON_LT_LINK_NONE;
        }
        else if (((PeerRoutesObject *)s->head.routes)->round_robin)
        {
            link = EXON_LT_ROUND_ROBIN;
        }
        rc = door_send(s->table, s->slot, link, PyBytes_AS_STRING(args[0]),
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

static PyObject *peer_send_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *lock;
    unsigned long long address;
    PyObject *owner;
    int slot;
    PyObject *backlog;
    PyObject *routes;
    int takes_peer;
    PyObject *fallback;
    if (!PyArg_ParseTuple(args, "OKOiO!O!pO:PeerSend", &lock, &address, &owner, &slot, &PyDict_Type, &backlog,
                          &PeerRoutesType, &routes, &takes_peer, &fallback))
    {
        return NULL;
    }
    if (lt_send_fn == NULL || address == 0 || slot < 0)
    {
        PyErr_SetString(PyExc_ValueError,
                        "PeerSend(lock, table address != 0, owner, slot >= 0, backlog, routes, takes_peer, "
                        "fallback)");
        return NULL;
    }
    PeerSendObject *s = (PeerSendObject *)type->tp_alloc(type, 0);
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
    s->head.routes = Py_NewRef(routes);
    s->takes_peer = takes_peer;
    s->head.vectorcall = peer_send_vectorcall;
    return (PyObject *)s;
}

static PyTypeObject PeerSendType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "exon.native._fast.PeerSend",
    .tp_doc = "PeerSend(lock, table_address, owner, slot, backlog, routes, takes_peer, fallback)"
              "(data, *, peer=None, cookie=None, timeout=None)",
    .tp_basicsize = sizeof(PeerSendObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_new = peer_send_new,
    .tp_dealloc = (destructor)door_dealloc,
    .tp_traverse = (traverseproc)door_traverse,
    .tp_clear = (inquiry)door_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(DoorHead, vectorcall),
    .tp_methods = door_methods,
};

typedef struct
{
    DoorHead head;       /* keep: the RecvQueue; routes: the socket's PeerRoutes */
}
PeerReceiveObject;

/* The next Message of `q` (ready_count > 0) when it is a fast one (RQ_FAST) of a routed
 * link (delivery counted, the core told through on_due when it must see it); NULL
 * without an exception when it is not (nothing popped). */
static PyObject *rq_take_routed(RecvQueueObject *q, PeerRoutesObject *r, PyTypeObject *message_type)
{
    if (q->raw_count > 0)
    {
        return NULL; /* raw payloads: the method's (it makes them bytes first) */
    }
    rq_lane_t *l = rq_next_lane(q);
    int32_t link = l->link;
    if (link < 0 || link >= r->capacity || l->items[l->head].account != RQ_FAST)
    {
        return NULL; /* the core's message, or one of a link detached since: the method's */
    }
    PyObject *peer = r->peer_of[link];
    if (peer == NULL)
    {
        return NULL;
    }
    PyObject *msg = message_type->tp_alloc(message_type, 2);
    if (msg == NULL)
    {
        return NULL;
    }
    int32_t lane;
    rq_item_t item = rq_pop_next(q, &lane);
    return rq_deliver_message(q, msg, item.payload, peer, lane, link, item.account);
}

/* receive(timeout=None) -> Message */
static PyObject *peer_receive_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PeerReceiveObject *d = (PeerReceiveObject *)self_obj;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    RecvQueueObject *q = (RecvQueueObject *)d->head.keep;
    if (nargs > 1 || d->head.disabled || !q->direct || q->ready_count == 0 ||
        !door_keywords(args, nargs, kwnames, NULL, NULL))
    {
        return door_fallback(&d->head, args, nargsf, kwnames);
    }
    NodeLockObject *lock = d->head.lock;
    if (node_lock_take(lock, -1) < 0)
    {
        return NULL;
    }
    PyObject *msg = NULL;
    if (lock->doors_open && !d->head.disabled && q->direct && q->ready_count > 0)
    {
        msg = rq_take_routed(q, (PeerRoutesObject *)d->head.routes, (PyTypeObject *)d->head.message_type);
        if (msg != NULL)
        {
            lock->activity++;
        }
        else if (PyErr_Occurred())
        {
            node_lock_give(lock);
            return NULL;
        }
    }
    node_lock_give(lock);
    return msg != NULL ? msg : door_fallback(&d->head, args, nargsf, kwnames);
}

static PyObject *peer_receive_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *lock;
    PyObject *queue;
    PyObject *routes;
    PyObject *message_type;
    PyObject *fallback;
    if (!PyArg_ParseTuple(args, "OO!O!OO:PeerReceive", &lock, &RecvQueueType, &queue, &PeerRoutesType, &routes,
                          &message_type, &fallback))
    {
        return NULL;
    }
    if (!PyType_Check(message_type) || !PyType_IsSubtype((PyTypeObject *)message_type, &PyTuple_Type))
    {
        PyErr_SetString(PyExc_TypeError, "PeerReceive: message_type is a tuple subclass");
        return NULL;
    }
    PeerReceiveObject *d = (PeerReceiveObject *)type->tp_alloc(type, 0);
    if (d == NULL)
    {
        return NULL;
    }
    if (door_init_head(&d->head, lock, fallback, queue) < 0)
    {
        Py_DECREF(d);
        return NULL;
    }
    d->head.routes = Py_NewRef(routes);
    d->head.message_type = Py_NewRef(message_type);
    d->head.vectorcall = peer_receive_vectorcall;
    return (PyObject *)d;
}

static PyTypeObject PeerReceiveType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "exon.native._fast.PeerReceive",
    .tp_doc = "PeerReceive(lock, queue, routes, message_type, fallback)(timeout=None) -> Message",
    .tp_basicsize = sizeof(PeerReceiveObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_new = peer_receive_new,
    .tp_dealloc = (destructor)door_dealloc,
    .tp_traverse = (traverseproc)door_traverse,
    .tp_clear = (inquiry)door_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(DoorHead, vectorcall),
    .tp_methods = door_methods,
};

/* Register the peer doors' types in `module` (0, or -1 with an exception). */
int peer_doors_add_types(PyObject *module)
{
    if (PyType_Ready(&PeerRoutesType) < 0 || PyType_Ready(&PeerSendType) < 0 ||
        PyType_Ready(&PeerReceiveType) < 0)
    {
        return -1;
    }
    Py_INCREF(&PeerRoutesType);
    Py_INCREF(&PeerSendType);
    Py_INCREF(&PeerReceiveType);
    if (PyModule_AddObject(module, "PeerRoutes", (PyObject *)&PeerRoutesType) < 0 ||
        PyModule_AddObject(module, "PeerSend", (PyObject *)&PeerSendType) < 0 ||
        PyModule_AddObject(module, "PeerReceive", (PyObject *)&PeerReceiveType) < 0)
    {
        return -1;
    }
    return 0;
}
