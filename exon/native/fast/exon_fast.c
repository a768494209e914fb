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
#include <stddef.h>
#include <stdint.h>

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
    PyObject *data = args[0];
    int64_t rc;
    if (PyBytes_CheckExact(data))
    {
        Py_ssize_t length = PyBytes_GET_SIZE(data);
        if (length > INT32_MAX)
        {
            length = INT32_MAX; /* refused as too large by the offer itself */
        }
        rc = offer_fn(self->pub, PyBytes_AS_STRING(data), (int32_t)length, reserved);
    }
    else
    {
        Py_buffer view;
        if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        {
            return NULL;
        }
        Py_ssize_t length = view.len > INT32_MAX ? INT32_MAX : view.len;
        rc = offer_fn(self->pub, (const char *)view.buf, (int32_t)length, reserved);
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

static exon_lt_send_fn lt_send_fn = NULL;
static exon_lt_deliver_fn lt_deliver_fn = NULL;

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
    PyObject *data = args[2];
    int64_t rc;
    if (PyBytes_CheckExact(data))
    {
        Py_ssize_t length = PyBytes_GET_SIZE(data);
        if (length > INT32_MAX - 64)
        {
            length = INT32_MAX - 64; /* refused as too large by the offer */
        }
        rc = lt_send_fn(self->table, slot, link, PyBytes_AS_STRING(data), (int32_t)length);
    }
    else
    {
        Py_buffer view;
        if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        {
            return NULL;
        }
        Py_ssize_t length = view.len > INT32_MAX - 64 ? INT32_MAX - 64 : view.len;
        rc = lt_send_fn(self->table, slot, link, (const char *)view.buf, (int32_t)length);
        PyBuffer_Release(&view);
    }
    return PyLong_FromLongLong(rc);
}

/* LinkDeliver(table, owner)(link) -> EXON_LT_DELIVER_* or a negative code */
static PyObject *lt_deliver_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    TableCallObject *self = (TableCallObject *)self_obj;
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL)
    {
        PyErr_SetString(PyExc_TypeError, "deliver(link)");
        return NULL;
    }
    int32_t link;
    if (table_int_arg(args[0], &link) < 0)
    {
        return NULL;
    }
    return PyLong_FromLongLong(lt_deliver_fn(self->table, link));
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
    .tp_doc = "LinkDeliver(table_address, owner)(link) -> EXON_LT_DELIVER_* or code",
    .tp_basicsize = sizeof(TableCallObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = lt_deliver_new,
    .tp_dealloc = (destructor)table_call_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(TableCallObject, vectorcall),
};

static PyObject *fast_bind_links(PyObject *module, PyObject *args)
{
    unsigned long long send_address;
    unsigned long long deliver_address;
    if (!PyArg_ParseTuple(args, "KK:bind_links", &send_address, &deliver_address))
    {
        return NULL;
    }
    if (send_address == 0 || deliver_address == 0)
    {
        PyErr_SetString(PyExc_ValueError, "bind_links(addresses != 0)");
        return NULL;
    }
    lt_send_fn = (exon_lt_send_fn)(uintptr_t)send_address;
    lt_deliver_fn = (exon_lt_deliver_fn)(uintptr_t)deliver_address;
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
    {"bind_links", fast_bind_links, METH_VARARGS, "bind_links(exon_lt_send, exon_lt_deliver addresses)"},
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
        PyType_Ready(&LinkDeliverType) < 0)
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
    if (PyModule_AddObject(module, "LinkSend", (PyObject *)&LinkSendType) < 0 ||
        PyModule_AddObject(module, "LinkDeliver", (PyObject *)&LinkDeliverType) < 0)
    {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
