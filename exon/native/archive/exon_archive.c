/* exon.native._archive: the archive's record codec in batches (one call per batch).
 *
 * The record layout is specified in exon/archive/format.py (and docs/protocol.md 3.2);
 * format.py holds the pure-Python reference twin and a parity test runs both. The
 * checksum is computed by the crc32c package's function, handed in as `checksum`
 * (called on a memoryview of each record's bytes [4, frame_length)): exon does not
 * carry its own CRC implementation.
 *
 *   decode(buf, offset, end, base, limit, checksum or None, producers dict, Record type)
 *       -> (records list, next offset, problem str or None)
 *   encode(out, offset, position, payloads, producers, timestamp, keys or None, first,
 *          room, checksum) -> (records encoded, next offset)
 *   encode_buffer(out, offset, position, buffer, offsets, runs, producer_of, timestamp,
 *          first, room, checksum) -> the same, for a PULL's held batch: the payloads as one
 *          buffer and u64 offsets, their senders as runs [(peer, count), ...]; the producer
 *          bytes of a peer come from producer_of(peer), asked once per run or less
 *   scan(buf, offset, end, base, checksum or None) -> (end of the valid records, records)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define HEADER_LENGTH 32
#define ALIGNMENT 32
#define TYPE_DATA 1
#define TYPE_PAD 2
#define RECORD_VERSION 1

#pragma pack(push, 1)
typedef struct
{
    uint32_t checksum;
    uint32_t frame_length;
    int64_t position;
    int64_t timestamp;
    uint16_t meta_length;
    uint8_t type;
    uint8_t version;
    uint16_t key_length;
    uint16_t reserved;
}
record_header_t;
#pragma pack(pop)

_Static_assert(sizeof(record_header_t) == HEADER_LENGTH, "record header is 32 bytes");

static inline int64_t align_up(int64_t n)
{
    return (n + ALIGNMENT - 1) & ~(int64_t)(ALIGNMENT - 1);
}

/* The crc32c package's own C routine, when exon.archive.codec found and checked it
 * (bind_checksum): then `checksum` objects that are the bound function are computed by a
 * direct call instead of a Python call per record. Signature as the package defines it:
 * crc(initial ^ ~0, data, length) ^ ~0 is the CRC-32C of data. */
typedef uint32_t (*crc_routine_t)(uint32_t crc, const unsigned char *data, unsigned long length);
static crc_routine_t crc_routine = NULL;
static PyObject *crc_bound = NULL; /* the Python function crc_routine stands for */

/* checksum(memoryview of [from, from + length)) as a u32; -1 with an exception */
static int64_t call_checksum(PyObject *checksum, const uint8_t *from, Py_ssize_t length)
{
    if (checksum == crc_bound && crc_routine != NULL)
    {
        return (int64_t)(crc_routine(0xFFFFFFFFu, from, (unsigned long)length) ^ 0xFFFFFFFFu);
    }
    PyObject *view = PyMemoryView_FromMemory((char *)from, length, PyBUF_READ);
    if (view == NULL)
    {
        return -1;
    }
    PyObject *r = PyObject_CallOneArg(checksum, view);
    Py_DECREF(view);
    if (r == NULL)
    {
        return -1;
    }
    unsigned long v = PyLong_AsUnsignedLong(r);
    Py_DECREF(r);
    if (v == (unsigned long)-1 && PyErr_Occurred())
    {
        return -1;
    }
    return (int64_t)(v & 0xFFFFFFFFu);
}

static PyObject *problem(PyObject *out, Py_ssize_t offset, const char *text)
{
    return Py_BuildValue("(Nns)", out, offset, text);
}

static PyObject *archive_decode(PyObject *module, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t offset, end, limit;
    long long base;
    PyObject *checksum, *producers;
    PyTypeObject *record_type;
    if (!PyArg_ParseTuple(args, "y*nnLnOO!O!:decode", &view, &offset, &end, &base, &limit,
                          &checksum, &PyDict_Type, &producers, &PyType_Type, &record_type))
    {
        return NULL;
    }
    if (!PyType_IsSubtype(record_type, &PyTuple_Type) ||
        record_type->tp_basicsize != PyTuple_Type.tp_basicsize || record_type->tp_dictoffset != 0)
    {
        /* records are filled as 4-tuples and left untracked: a plain tuple subclass only */
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "decode: the record type is a tuple subclass with __slots__ = ()");
        return NULL;
    }
    if (offset < 0)
    {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "decode: offset is negative");
        return NULL;
    }
    PyObject *out = PyList_New(0);
    if (out == NULL)
    {
        PyBuffer_Release(&view);
        return NULL;
    }
    if (end > view.len)
    {
        end = view.len;
    }
    const uint8_t *buf = (const uint8_t *)view.buf;
    PyObject *result = NULL;
    char text[128];
    Py_ssize_t count = 0;
    PyObject *last_key = NULL, *last_producer = NULL; /* borrowed from the dict */
    Py_ssize_t last_len = -1;
    const uint8_t *last_ptr = NULL;
    PyObject *last_timestamp = NULL; /* a new reference */
    long long last_timestamp_value = 0;
    while (offset < end && count < limit)
    {
        if (end - offset < HEADER_LENGTH)
        {
            uint32_t len = 0;
            if (end - offset >= 8)
            {
                memcpy(&len, buf + offset + 4, 4);
            }
            if (len != 0)
            {
                result = problem(out, offset, "record header runs past the end of the data");
                goto done;
            }
            break;
        }
        record_header_t h;
        memcpy(&h, buf + offset, HEADER_LENGTH);
        if (h.frame_length == 0)
        {
            break;
        }
        int64_t aligned = align_up(h.frame_length);
        if (h.frame_length < HEADER_LENGTH || offset + aligned > end)
        {
            snprintf(text, sizeof text, "bad frame length %u", h.frame_length);
            result = problem(out, offset, text);
            goto done;
        }
        if (h.position != base + offset)
        {
            snprintf(text, sizeof text, "position %lld where %lld belongs", (long long)h.position, (long long)(base + offset));
            result = problem(out, offset, text);
            goto done;
        }
        if (h.version != RECORD_VERSION || (h.type != TYPE_DATA && h.type != TYPE_PAD))
        {
            snprintf(text, sizeof text, "unknown record type %u / version %u", h.type, h.version);
            result = problem(out, offset, text);
            goto done;
        }
        if (h.key_length > h.meta_length || HEADER_LENGTH + (int64_t)h.meta_length > h.frame_length)
        {
            result = problem(out, offset, "metadata longer than the record");
            goto done;
        }
        if (checksum != Py_None)
        {
            int64_t crc = call_checksum(checksum, buf + offset + 4, h.frame_length - 4);
            if (crc < 0)
            {
                Py_DECREF(out);
                goto done;
            }
            if ((uint32_t)crc != h.checksum)
            {
                result = problem(out, offset, "checksum mismatch");
                goto done;
            }
        }
        if (h.type == TYPE_DATA)
        {
            const uint8_t *meta = buf + offset + HEADER_LENGTH;
            const uint8_t *pp = meta + h.key_length;
            Py_ssize_t plen = h.meta_length - h.key_length;
            PyObject *producer;
            if (last_producer != NULL && plen == last_len && memcmp(pp, last_ptr, plen) == 0)
            {
                producer = last_producer;
            }
            else
            {
                PyObject *key = PyBytes_FromStringAndSize((const char *)pp, plen);
                if (key == NULL)
                {
                    Py_DECREF(out);
                    goto done;
                }
                producer = PyDict_GetItemWithError(producers, key);
                if (producer == NULL)
                {
                    if (PyErr_Occurred() ||
                        (producer = PyUnicode_DecodeUTF8((const char *)pp, plen, "replace")) == NULL)
                    {
                        Py_DECREF(key);
                        Py_DECREF(out);
                        goto done;
                    }
                    int rc = PyDict_SetItem(producers, key, producer);
                    Py_DECREF(producer); /* the dict holds it */
                    if (rc < 0)
                    {
                        Py_DECREF(key);
                        Py_DECREF(out);
                        goto done;
                    }
                }
                Py_DECREF(key);
                last_producer = producer;
                last_key = producer;
                last_len = plen;
                last_ptr = pp;
            }
            Py_ssize_t payload_at = offset + HEADER_LENGTH + h.meta_length;
            PyObject *payload = PyBytes_FromStringAndSize((const char *)buf + payload_at,
                                                          h.frame_length - HEADER_LENGTH - h.meta_length);
            PyObject *position = PyLong_FromLongLong(h.position);
            /* a batch of records shares one receive time: one int object for a run of them */
            if (last_timestamp == NULL || h.timestamp != last_timestamp_value)
            {
                Py_XDECREF(last_timestamp);
                last_timestamp = PyLong_FromLongLong(h.timestamp);
                last_timestamp_value = h.timestamp;
            }
            PyObject *rec = record_type->tp_alloc(record_type, 4);
            if (payload == NULL || position == NULL || last_timestamp == NULL || rec == NULL)
            {
                Py_XDECREF(payload);
                Py_XDECREF(position);
                Py_XDECREF(rec);
                Py_DECREF(out);
                goto done;
            }
            /* Not tracked by the cycle collector: a record holds an int, bytes, a str and an
             * int, so it can be in no cycle. A replay makes millions of them, thousands alive
             * at once in a batch list; tracked, they set off collections that walk them all
             * (a third of the decoding time). As exon_fast.c does for its Messages. */
            if (PyObject_IS_GC(rec))
            {
                PyObject_GC_UnTrack(rec);
            }
            Py_INCREF(producer);
            Py_INCREF(last_timestamp);
            PyObject *timestamp = last_timestamp;
            PyTuple_SET_ITEM(rec, 0, position);
            PyTuple_SET_ITEM(rec, 1, payload);
            PyTuple_SET_ITEM(rec, 2, producer);
            PyTuple_SET_ITEM(rec, 3, timestamp);
            int rc = PyList_Append(out, rec);
            Py_DECREF(rec);
            if (rc < 0)
            {
                Py_DECREF(out);
                goto done;
            }
            count++;
        }
        offset += aligned;
    }
    (void)last_key;
    result = Py_BuildValue("(NnO)", out, offset, Py_None);
done:
    Py_XDECREF(last_timestamp);
    PyBuffer_Release(&view);
    return result;
}

/* Frame one record (payload p[0, plen), producer r[0, rlen), key k[0, klen)) at
 * out[*offset] if it fits in `room` (counting `*used`): 1 done, 0 does not fit, -1 with an
 * exception. */
static int encode_one_raw(Py_buffer *out, Py_ssize_t *offset, Py_ssize_t *used, Py_ssize_t room,
                          long long position, long long timestamp, const char *p, Py_ssize_t plen,
                          const char *r, Py_ssize_t rlen, const char *k, Py_ssize_t klen,
                          PyObject *checksum)
{
    if (klen + rlen > 0xFFFF)
    {
        PyErr_SetString(PyExc_ValueError, "record metadata over 65535 bytes");
        return -1;
    }
    int64_t frame_length = HEADER_LENGTH + klen + rlen + plen;
    int64_t aligned = align_up(frame_length);
    if (*used + aligned > room)
    {
        return 0; /* the rest goes to the next segment */
    }
    if (*offset + aligned > out->len)
    {
        PyErr_SetString(PyExc_ValueError, "encode: output buffer too small");
        return -1;
    }
    uint8_t *rec = (uint8_t *)out->buf + *offset;
    record_header_t h = {0, (uint32_t)frame_length, position + *used, timestamp,
                         (uint16_t)(klen + rlen), TYPE_DATA, RECORD_VERSION, (uint16_t)klen, 0};
    memcpy(rec, &h, HEADER_LENGTH);
    uint8_t *at = rec + HEADER_LENGTH;
    if (klen)
    {
        memcpy(at, k, klen);
        at += klen;
    }
    memcpy(at, r, rlen);
    at += rlen;
    memcpy(at, p, plen);
    memset(rec + frame_length, 0, aligned - frame_length);
    int64_t crc = call_checksum(checksum, rec + 4, frame_length - 4);
    if (crc < 0)
    {
        return -1;
    }
    uint32_t c = (uint32_t)crc;
    memcpy(rec, &c, 4);
    *offset += aligned;
    *used += aligned;
    return 1;
}

/* encode_one_raw for a payload, producer and key (or NULL) given as bytes objects */
static int encode_one(Py_buffer *out, Py_ssize_t *offset, Py_ssize_t *used, Py_ssize_t room,
                      long long position, long long timestamp, PyObject *p, PyObject *r,
                      PyObject *k, PyObject *checksum)
{
    if (!PyBytes_Check(p) || !PyBytes_Check(r) || (k != NULL && !PyBytes_Check(k)))
    {
        PyErr_SetString(PyExc_TypeError, "payloads, producers and keys are bytes");
        return -1;
    }
    return encode_one_raw(out, offset, used, room, position, timestamp, PyBytes_AS_STRING(p),
                          PyBytes_GET_SIZE(p), PyBytes_AS_STRING(r), PyBytes_GET_SIZE(r),
                          k == NULL ? NULL : PyBytes_AS_STRING(k), k == NULL ? 0 : PyBytes_GET_SIZE(k),
                          checksum);
}

/* The last RUN_CACHE peers of a call to encode_buffer are remembered with their producer
 * bytes (by identity: the runs of a batch interleave a few peers). */
#define RUN_CACHE 8

/* The producer bytes of `peer` for encode_buffer: from the call's cache of the
 * last RUN_CACHE peers (by identity), else producer_of(peer) (a new reference kept in the
 * cache). Borrowed; NULL with an exception. */
static PyObject *run_producer(PyObject *peer, PyObject *producer_of, PyObject **cache_peer,
                              PyObject **cache_producer, int *cache_next)
{
    for (int c = 0; c < RUN_CACHE; c++)
    {
        if (cache_peer[c] == peer)
        {
            return cache_producer[c];
        }
    }
    PyObject *producer = PyObject_CallOneArg(producer_of, peer);
    if (producer == NULL)
    {
        return NULL;
    }
    if (!PyBytes_Check(producer))
    {
        Py_DECREF(producer);
        PyErr_SetString(PyExc_TypeError, "producer_of(peer) returns bytes");
        return NULL;
    }
    Py_XDECREF(cache_producer[*cache_next]);
    cache_producer[*cache_next] = producer;
    cache_peer[*cache_next] = peer;
    *cache_next = (*cache_next + 1) % RUN_CACHE;
    return producer;
}

/* encode_buffer(out, offset, position, buffer, offsets, runs, producer_of, timestamp, first,
 * room, checksum) -> (n, offset): as encode, for payloads given as one buffer (a PULL's
 * held batch as hold_buffer hands it out): `offsets` a buffer of len(batch) + 1 unsigned
 * 64-bit ints, payload i = buffer[offsets[i]:offsets[i + 1]]. */
static PyObject *archive_encode_buffer(PyObject *module, PyObject *args)
{
    Py_buffer out, data, ends;
    Py_ssize_t offset, first, room;
    long long position, timestamp;
    PyObject *runs, *producer_of, *checksum;
    if (!PyArg_ParseTuple(args, "w*nLy*y*O!OLnnO:encode_buffer", &out, &offset, &position, &data,
                          &ends, &PyList_Type, &runs, &producer_of, &timestamp, &first, &room,
                          &checksum))
    {
        return NULL;
    }
    PyObject *cache_peer[RUN_CACHE] = {NULL};     /* borrowed from `runs` */
    PyObject *cache_producer[RUN_CACHE] = {NULL}; /* new references */
    int cache_next = 0;
    PyObject *result = NULL;
    const uint8_t *at = (const uint8_t *)ends.buf;
    Py_ssize_t n = ends.len / (Py_ssize_t)sizeof(uint64_t) - 1;
    Py_ssize_t nruns = PyList_GET_SIZE(runs);
    Py_ssize_t used = 0;
    Py_ssize_t i = 0; /* index of the first payload of run r */
    Py_ssize_t done = first;
    if (ends.len % (Py_ssize_t)sizeof(uint64_t) != 0 || n < 0)
    {
        PyErr_SetString(PyExc_ValueError, "encode_buffer: offsets hold len(batch) + 1 u64");
        goto done;
    }
    if (first < 0 || first > n)
    {
        PyErr_SetString(PyExc_ValueError, "encode_buffer: first is outside the payloads");
        goto done;
    }
    if (offset < 0)
    {
        PyErr_SetString(PyExc_ValueError, "encode_buffer: offset is negative");
        goto done;
    }
    for (Py_ssize_t r = 0; r < nruns && done < n; r++)
    {
        PyObject *run = PyList_GET_ITEM(runs, r);
        if (!PyTuple_Check(run) || PyTuple_GET_SIZE(run) != 2)
        {
            PyErr_SetString(PyExc_TypeError, "runs are (peer, count) tuples");
            goto done;
        }
        Py_ssize_t count = PyLong_AsSsize_t(PyTuple_GET_ITEM(run, 1));
        if (count == -1 && PyErr_Occurred())
        {
            goto done;
        }
        if (count < 0 || count > n - i)
        {
            PyErr_SetString(PyExc_ValueError, "encode_buffer: the run counts exceed the payloads");
            goto done;
        }
        Py_ssize_t run_end = i + count;
        if (run_end <= done)
        {
            i = run_end; /* wholly before `first` */
            continue;
        }
        PyObject *producer = run_producer(PyTuple_GET_ITEM(run, 0), producer_of, cache_peer,
                                          cache_producer, &cache_next);
        if (producer == NULL)
        {
            goto done;
        }
        for (; done < run_end; done++)
        {
            uint64_t start, end;
            memcpy(&start, at + sizeof(uint64_t) * (size_t)done, sizeof start);
            memcpy(&end, at + sizeof(uint64_t) * (size_t)(done + 1), sizeof end);
            if (start > end || end > (uint64_t)data.len)
            {
                PyErr_SetString(PyExc_ValueError, "encode_buffer: offsets out of order or past the buffer");
                goto done;
            }
            int rc = encode_one_raw(&out, &offset, &used, room, position, timestamp,
                                    (const char *)data.buf + start, (Py_ssize_t)(end - start),
                                    PyBytes_AS_STRING(producer), PyBytes_GET_SIZE(producer),
                                    NULL, 0, checksum);
            if (rc < 0)
            {
                goto done;
            }
            if (rc == 0)
            {
                result = Py_BuildValue("(nn)", done - first, offset);
                goto done;
            }
        }
        i = run_end;
    }
    if (done < n)
    {
        PyErr_SetString(PyExc_ValueError, "encode_buffer: the run counts fall short of the payloads");
        goto done;
    }
    result = Py_BuildValue("(nn)", done - first, offset);
done:
    for (int c = 0; c < RUN_CACHE; c++)
    {
        Py_XDECREF(cache_producer[c]);
    }
    PyBuffer_Release(&out);
    PyBuffer_Release(&data);
    PyBuffer_Release(&ends);
    return result;
}

static PyObject *archive_encode(PyObject *module, PyObject *args)
{
    Py_buffer out;
    Py_ssize_t offset, first, room;
    long long position, timestamp;
    PyObject *payloads, *producers, *keys, *checksum;
    if (!PyArg_ParseTuple(args, "w*nLO!O!LOnnO:encode", &out, &offset, &position,
                          &PyList_Type, &payloads, &PyList_Type, &producers, &timestamp,
                          &keys, &first, &room, &checksum))
    {
        return NULL;
    }
    if (keys != Py_None && !PyList_Check(keys))
    {
        PyBuffer_Release(&out);
        PyErr_SetString(PyExc_TypeError, "keys is a list or None");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(payloads);
    if (PyList_GET_SIZE(producers) != n || (keys != Py_None && PyList_GET_SIZE(keys) != n))
    {
        PyBuffer_Release(&out);
        PyErr_SetString(PyExc_ValueError, "payloads, producers and keys differ in length");
        return NULL;
    }
    if (offset < 0 || first < 0)
    {
        PyBuffer_Release(&out);
        PyErr_SetString(PyExc_ValueError, "encode: offset or first is negative");
        return NULL;
    }
    Py_ssize_t i = first;
    Py_ssize_t used = 0;
    for (; i < n; i++)
    {
        PyObject *p = PyList_GET_ITEM(payloads, i);
        PyObject *r = PyList_GET_ITEM(producers, i);
        PyObject *k = keys == Py_None ? NULL : PyList_GET_ITEM(keys, i);
        int rc = encode_one(&out, &offset, &used, room, position, timestamp, p, r, k, checksum);
        if (rc < 0)
        {
            PyBuffer_Release(&out);
            return NULL;
        }
        if (rc == 0)
        {
            break;
        }
    }
    PyBuffer_Release(&out);
    return Py_BuildValue("(nn)", i - first, offset);
}

/* scan(buf, offset, end, base, checksum or None) -> (offset, DATA records): walk the
 * valid records from `offset`, stopping without an error at the end of the data or at the
 * first record that fails a check (a torn tail); the twin of format.scan_records. */
static PyObject *archive_scan(PyObject *module, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t offset, end;
    long long base;
    PyObject *checksum;
    if (!PyArg_ParseTuple(args, "y*nnLO:scan", &view, &offset, &end, &base, &checksum))
    {
        return NULL;
    }
    if (offset < 0)
    {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "scan: offset is negative");
        return NULL;
    }
    if (end > view.len)
    {
        end = view.len;
    }
    const uint8_t *buf = (const uint8_t *)view.buf;
    Py_ssize_t count = 0;
    while (end - offset >= HEADER_LENGTH)
    {
        record_header_t h;
        memcpy(&h, buf + offset, HEADER_LENGTH);
        int64_t aligned = align_up(h.frame_length);
        if (h.frame_length < HEADER_LENGTH || offset + aligned > end ||
            h.position != base + offset || h.version != RECORD_VERSION ||
            (h.type != TYPE_DATA && h.type != TYPE_PAD) || h.key_length > h.meta_length ||
            HEADER_LENGTH + (int64_t)h.meta_length > h.frame_length)
        {
            break;
        }
        if (checksum != Py_None)
        {
            int64_t crc = call_checksum(checksum, buf + offset + 4, h.frame_length - 4);
            if (crc < 0)
            {
                PyBuffer_Release(&view);
                return NULL;
            }
            if ((uint32_t)crc != h.checksum)
            {
                break;
            }
        }
        if (h.type == TYPE_DATA)
        {
            count++;
        }
        offset += aligned;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(nn)", offset, count);
}

/* walk(buf, offset, end, limit) -> (offset, records): skip at most `limit` DATA records
 * (and any PAD) by their frame lengths alone, no checksum or field check: the C twin of
 * format.walk_headers (a zero frame length ends the walk; the last record may reach past
 * `end`). Partitioned replay walks every record of a range this way. */
static PyObject *archive_walk(PyObject *module, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t offset, end;
    long long limit;
    if (!PyArg_ParseTuple(args, "y*nnL:walk", &view, &offset, &end, &limit))
    {
        return NULL;
    }
    if (end > view.len)
    {
        end = view.len;
    }
    const uint8_t *buf = (const uint8_t *)view.buf;
    long long count = 0;
    while (offset >= 0 && end - offset >= HEADER_LENGTH)
    {
        uint32_t frame_length;
        memcpy(&frame_length, buf + offset + 4, sizeof frame_length);
        if (frame_length == 0)
        {
            break;
        }
        if (buf[offset + offsetof(record_header_t, type)] == TYPE_DATA)
        {
            if (count == limit)
            {
                break;
            }
            count++;
        }
        offset += (Py_ssize_t)align_up((int64_t)frame_length);
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(nL)", offset, count);
}

/* bind_checksum(function, routine address or 0): compute `function` through the C
 * routine at that address from now on (0 unbinds). */
static PyObject *archive_bind_checksum(PyObject *module, PyObject *args)
{
    PyObject *function;
    unsigned long long address;
    if (!PyArg_ParseTuple(args, "OK:bind_checksum", &function, &address))
    {
        return NULL;
    }
    Py_XDECREF(crc_bound);
    crc_bound = NULL;
    crc_routine = NULL;
    if (address != 0)
    {
        Py_INCREF(function);
        crc_bound = function;
        crc_routine = (crc_routine_t)(uintptr_t)address;
    }
    Py_RETURN_NONE;
}

/* checksum(function, data) -> the u32 call_checksum computes (to check a binding) */
static PyObject *archive_checksum(PyObject *module, PyObject *args)
{
    PyObject *function;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "Oy*:checksum", &function, &view))
    {
        return NULL;
    }
    int64_t crc = call_checksum(function, (const uint8_t *)view.buf, view.len);
    PyBuffer_Release(&view);
    return crc < 0 ? NULL : PyLong_FromLongLong(crc);
}

static PyMethodDef archive_methods[] = {
    {"decode", archive_decode, METH_VARARGS,
     "decode(buf, offset, end, base, limit, checksum|None, producers, Record) -> (records, offset, problem|None)"},
    {"encode", archive_encode, METH_VARARGS,
     "encode(out, offset, position, payloads, producers, timestamp, keys|None, first, room, checksum) -> (n, offset)"},
    {"bind_checksum", archive_bind_checksum, METH_VARARGS,
     "bind_checksum(function, routine address or 0)"},
    {"checksum", archive_checksum, METH_VARARGS, "checksum(function, data) -> u32"},
    {"scan", archive_scan, METH_VARARGS,
     "scan(buf, offset, end, base, checksum|None) -> (offset, records)"},
    {"walk", archive_walk, METH_VARARGS,
     "walk(buf, offset, end, limit) -> (offset, records)"},
    {"encode_buffer", archive_encode_buffer, METH_VARARGS,
     "encode_buffer(out, offset, position, buffer, offsets, runs, producer_of, timestamp, first, room, checksum) -> (n, offset)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef archive_module = {
    PyModuleDef_HEAD_INIT, "exon.native._archive",
    "The archive's record codec in batches (see exon/archive/format.py).", -1, archive_methods,
};

PyMODINIT_FUNC PyInit__archive(void)
{
    return PyModule_Create(&archive_module);
}
