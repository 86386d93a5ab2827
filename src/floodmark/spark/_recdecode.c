/* Kafka v2 records -> the buffers of Arrow columns, one pass over the records (issue 27).
 *
 * The compiled half of floodmark/spark/decode.py: ``decode`` walks the records of the data
 * batches of one Fetch answer (already CRC-checked, decompressed and filtered by the caller) and
 * writes, for the records at offsets [start, end), the buffers of Spark's Kafka source columns:
 * offset (int64), timestamp (int64 microseconds), timestampType (int32), key and value (Arrow
 * binary: validity bitmap, int32 offsets, data) and, when asked, headers (list offsets, the
 * header keys' offsets and bytes, the header values' validity, offsets and bytes). Python wraps
 * them into Arrow arrays without a copy (decode.py, ``_decode_compiled``).
 *
 * It applies the very rules of the numpy decoder beside it (decode.py, ``_decode_numpy``), so the
 * two give the same columns or both refuse the input (tests/spark/test_decode.py compares them):
 * record lengths, offset deltas, key and value lengths and header counts are zigzag varints of at
 * most 5 bytes, the timestamp delta of at most 10; every field lies inside its record; a batch's
 * records end exactly where its bytes end; headers are read (and must end where their record
 * ends) only for the records kept; a header key length is never negative, a negative header
 * value length is a null value. Any violation raises ValueError with one line (the caller turns
 * it into CorruptBatchError). The GIL is released while the records are walked.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define ABI_VERSION 1

typedef struct {
    Py_buffer view;
    int64_t count;
    int64_t base_offset;
    int64_t base_ts; /* CreateTime: the batch's base timestamp; LogAppendTime: its max */
    int32_t ts_type;
} Batch;

typedef struct {
    PyObject *obj; /* a bytes object of ``cap`` bytes; resized to the bytes used at the end */
    char *p;
    Py_ssize_t cap;
} Out;

static int out_new(Out *o, Py_ssize_t cap, int zero) {
    o->obj = PyBytes_FromStringAndSize(NULL, cap > 0 ? cap : 1);
    if (o->obj == NULL) return -1;
    o->p = PyBytes_AS_STRING(o->obj);
    o->cap = cap;
    if (zero) memset(o->p, 0, (size_t)(cap > 0 ? cap : 1));
    return 0;
}

static PyObject *out_finish(Out *o, Py_ssize_t used) {
    if (_PyBytes_Resize(&o->obj, used) < 0) return NULL;
    PyObject *r = o->obj;
    o->obj = NULL;
    return r;
}

/* An unsigned varint in [*pp, end) of at most max_bytes bytes; 0, or -1 when it runs past end
 * or is longer. */
static inline int uvarint(const uint8_t **pp, const uint8_t *end, int max_bytes, uint64_t *out) {
    const uint8_t *p = *pp;
    if (p < end && *p < 0x80) {
        *out = *p;
        *pp = p + 1;
        return 0;
    }
    uint64_t v = 0;
    for (int k = 0; k < max_bytes; k++) {
        if (p >= end) return -1;
        uint8_t b = *p++;
        v |= (uint64_t)(b & 0x7F) << (7 * k);
        if (b < 0x80) {
            *out = v;
            *pp = p;
            return 0;
        }
    }
    return -1;
}

static inline int64_t unzigzag(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

static inline int varint(const uint8_t **pp, const uint8_t *end, int max_bytes, int64_t *out) {
    uint64_t u;
    if (uvarint(pp, end, max_bytes, &u) < 0) return -1;
    *out = unzigzag(u);
    return 0;
}

static inline void set_bit(char *bitmap, int64_t i) { bitmap[i >> 3] |= (char)(1u << (i & 7)); }

/* Everything the walk writes; the buffers are preallocated to their upper bounds. */
typedef struct {
    int64_t *offsets;
    int64_t *ts_us;
    int32_t *ts_types;
    char *kvalid, *vvalid;
    int32_t *koffs, *voffs;
    char *kdata, *vdata;
    int64_t kused, vused, knulls, vnulls;
    /* headers */
    int32_t *hlist;
    int32_t *hkoffs, *hvoffs;
    char *hkdata, *hvdata, *hvvalid;
    int64_t hkused, hvused, hcount, hvnulls, hcap;
    int64_t rows;
    const char *error;
    int64_t error_at;
} Walk;

#define FAIL(msg)          \
    do {                   \
        w->error = (msg);  \
        w->error_at = off; \
        return -1;         \
    } while (0)

static int walk_batch(Walk *w, const Batch *b, int64_t start, int64_t end, int headers) {
    const uint8_t *pos = (const uint8_t *)b->view.buf;
    const uint8_t *limit = pos + b->view.len;
    int64_t off = b->base_offset;
    for (int64_t r = 0; r < b->count; r++) {
        int64_t len;
        if (pos >= limit) FAIL("a record batch ends before its records count");
        if (varint(&pos, limit, 5, &len) < 0) FAIL("a record length varint is cut or longer than 5 bytes");
        if (len < 0) FAIL("a record has a negative length");
        if (len > limit - pos) FAIL("a record runs past the end of its batch");
        const uint8_t *q = pos + 1; /* attributes: unused in v2 records */
        const uint8_t *rec_end = pos + len;
        int64_t ts_delta, off_delta, klen, vlen;
        if (q > rec_end) FAIL("a record ends inside its attributes");
        if (varint(&q, rec_end, 10, &ts_delta) < 0) FAIL("a record's timestamp delta runs past the record's end");
        if (varint(&q, rec_end, 5, &off_delta) < 0) FAIL("a record's offset delta runs past the record's end");
        if (varint(&q, rec_end, 5, &klen) < 0) FAIL("a record's key length runs past the record's end");
        if (klen < -1 || (klen > 0 && klen > rec_end - q)) FAIL("a record's key runs past the record's end");
        const uint8_t *key = q;
        if (klen > 0) q += klen;
        if (varint(&q, rec_end, 5, &vlen) < 0) FAIL("a record's value length runs past the record's end");
        if (vlen < -1 || (vlen > 0 && vlen > rec_end - q)) FAIL("a record's value runs past the record's end");
        const uint8_t *val = q;
        if (vlen > 0) q += vlen;
        off = (int64_t)((uint64_t)b->base_offset + (uint64_t)off_delta);
        if (off >= start && off < end) {
            int64_t i = w->rows++;
            w->offsets[i] = off;
            uint64_t ts_ms = b->ts_type == 1 ? (uint64_t)b->base_ts
                                             : (uint64_t)b->base_ts + (uint64_t)ts_delta;
            w->ts_us[i] = (int64_t)(ts_ms * 1000u);
            w->ts_types[i] = b->ts_type;
            if (klen >= 0) {
                memcpy(w->kdata + w->kused, key, (size_t)klen);
                w->kused += klen;
                set_bit(w->kvalid, i);
            } else {
                w->knulls++;
            }
            w->koffs[i + 1] = (int32_t)w->kused;
            if (vlen >= 0) {
                memcpy(w->vdata + w->vused, val, (size_t)vlen);
                w->vused += vlen;
                set_bit(w->vvalid, i);
            } else {
                w->vnulls++;
            }
            w->voffs[i + 1] = (int32_t)w->vused;
            if (headers) {
                int64_t n;
                if (varint(&q, rec_end, 5, &n) < 0) FAIL("a record's headers count runs past the record's end");
                if (n < 0) FAIL("a record has a negative headers count");
                if (n > w->hcap - w->hcount) FAIL("a record's headers count is more than its bytes hold");
                for (int64_t h = 0; h < n; h++) {
                    int64_t hk, hv;
                    if (varint(&q, rec_end, 10, &hk) < 0) FAIL("a record header's key runs past the record's end");
                    if (hk < 0 || hk > rec_end - q) FAIL("a record header's key runs past the record's end");
                    memcpy(w->hkdata + w->hkused, q, (size_t)hk);
                    w->hkused += hk;
                    q += hk;
                    if (varint(&q, rec_end, 10, &hv) < 0) FAIL("a record header's value runs past the record's end");
                    if (hv > rec_end - q) FAIL("a record header's value runs past the record's end");
                    int64_t j = w->hcount++;
                    if (hv >= 0) {
                        memcpy(w->hvdata + w->hvused, q, (size_t)hv);
                        w->hvused += hv;
                        q += hv;
                        set_bit(w->hvvalid, j);
                    } else {
                        w->hvnulls++;
                    }
                    w->hkoffs[j + 1] = (int32_t)w->hkused;
                    w->hvoffs[j + 1] = (int32_t)w->hvused;
                }
                if (q != rec_end) FAIL("a record's headers do not end where the record does");
                w->hlist[i + 1] = (int32_t)w->hcount;
            }
        }
        pos = rec_end;
    }
    if (pos != limit) FAIL("a batch's records count does not match its bytes");
    return 0;
}

static void release(Batch *batches, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) PyBuffer_Release(&batches[i].view);
    PyMem_Free(batches);
}

static PyObject *decode(PyObject *self, PyObject *args) {
    PyObject *seq;
    long long start, end;
    int headers;
    if (!PyArg_ParseTuple(args, "OLLp", &seq, &start, &end, &headers)) return NULL;
    PyObject *fast = PySequence_Fast(seq, "batches must be a sequence");
    if (fast == NULL) return NULL;
    Py_ssize_t nb = PySequence_Fast_GET_SIZE(fast);
    Batch *batches = PyMem_Calloc(nb > 0 ? (size_t)nb : 1, sizeof(Batch));
    if (batches == NULL) {
        Py_DECREF(fast);
        return PyErr_NoMemory();
    }
    Py_ssize_t got = 0;
    int64_t rows_cap = 0, bytes_total = 0;
    for (; got < nb; got++) {
        PyObject *body;
        long long count, base_offset, base_ts;
        int ts_type;
        Batch *b = &batches[got];
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast, got), "OLLLi", &body, &count,
                              &base_offset, &base_ts, &ts_type))
            goto fail;
        if (PyObject_GetBuffer(body, &b->view, PyBUF_SIMPLE) < 0) goto fail;
        b->count = count;
        b->base_offset = base_offset;
        b->base_ts = base_ts;
        b->ts_type = ts_type;
        /* every record takes at least one byte: a larger count is refused before allocating */
        if (count < 0 || count > b->view.len) {
            got++;
            PyErr_Format(PyExc_ValueError,
                         "the record batch at offset %lld counts %lld records in %zd bytes",
                         base_offset, count, b->view.len);
            goto fail;
        }
        rows_cap += count;
        bytes_total += b->view.len;
    }
    Py_CLEAR(fast);

    Out o_off = {0}, o_ts = {0}, o_tt = {0}, o_kv = {0}, o_ko = {0}, o_kd = {0}, o_vv = {0},
        o_vo = {0}, o_vd = {0}, o_hl = {0}, o_hko = {0}, o_hkd = {0}, o_hvv = {0}, o_hvo = {0},
        o_hvd = {0};
    Out *outs[] = {&o_off, &o_ts, &o_tt, &o_kv, &o_ko, &o_kd, &o_vv, &o_vo, &o_vd,
                   &o_hl, &o_hko, &o_hkd, &o_hvv, &o_hvo, &o_hvd};
    const size_t nouts = sizeof(outs) / sizeof(outs[0]);
    int64_t hcap = headers ? bytes_total / 2 + 1 : 0; /* a header takes at least two bytes */
    Py_ssize_t bitmap = (Py_ssize_t)((rows_cap + 7) / 8);
    if (out_new(&o_off, rows_cap * 8, 0) < 0 || out_new(&o_ts, rows_cap * 8, 0) < 0 ||
        out_new(&o_tt, rows_cap * 4, 0) < 0 || out_new(&o_kv, bitmap, 1) < 0 ||
        out_new(&o_ko, (rows_cap + 1) * 4, 0) < 0 || out_new(&o_kd, bytes_total, 0) < 0 ||
        out_new(&o_vv, bitmap, 1) < 0 || out_new(&o_vo, (rows_cap + 1) * 4, 0) < 0 ||
        out_new(&o_vd, bytes_total, 0) < 0)
        goto fail_outs;
    if (headers &&
        (out_new(&o_hl, (rows_cap + 1) * 4, 0) < 0 || out_new(&o_hko, (hcap + 1) * 4, 0) < 0 ||
         out_new(&o_hkd, bytes_total, 0) < 0 || out_new(&o_hvv, (hcap + 7) / 8, 1) < 0 ||
         out_new(&o_hvo, (hcap + 1) * 4, 0) < 0 || out_new(&o_hvd, bytes_total, 0) < 0))
        goto fail_outs;

    Walk w = {0};
    w.offsets = (int64_t *)o_off.p;
    w.ts_us = (int64_t *)o_ts.p;
    w.ts_types = (int32_t *)o_tt.p;
    w.kvalid = o_kv.p;
    w.vvalid = o_vv.p;
    w.koffs = (int32_t *)o_ko.p;
    w.voffs = (int32_t *)o_vo.p;
    w.kdata = o_kd.p;
    w.vdata = o_vd.p;
    w.koffs[0] = 0;
    w.voffs[0] = 0;
    w.hcap = hcap;
    if (headers) {
        w.hlist = (int32_t *)o_hl.p;
        w.hkoffs = (int32_t *)o_hko.p;
        w.hvoffs = (int32_t *)o_hvo.p;
        w.hkdata = o_hkd.p;
        w.hvdata = o_hvd.p;
        w.hvvalid = o_hvv.p;
        w.hlist[0] = w.hkoffs[0] = w.hvoffs[0] = 0;
    }
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < nb && rc == 0; i++) rc = walk_batch(&w, &batches[i], start, end, headers);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyErr_Format(PyExc_ValueError, "%s (near offset %lld)", w.error, (long long)w.error_at);
        goto fail_outs;
    }
    release(batches, nb);
    batches = NULL;

    int64_t m = w.rows;
    PyObject *res = NULL, *hres = NULL;
    PyObject *off_b = out_finish(&o_off, m * 8), *ts_b = out_finish(&o_ts, m * 8),
             *tt_b = out_finish(&o_tt, m * 4), *kv_b = out_finish(&o_kv, (m + 7) / 8),
             *ko_b = out_finish(&o_ko, (m + 1) * 4), *kd_b = out_finish(&o_kd, w.kused),
             *vv_b = out_finish(&o_vv, (m + 7) / 8), *vo_b = out_finish(&o_vo, (m + 1) * 4),
             *vd_b = out_finish(&o_vd, w.vused);
    if (!off_b || !ts_b || !tt_b || !kv_b || !ko_b || !kd_b || !vv_b || !vo_b || !vd_b) goto done;
    if (headers) {
        PyObject *hl = out_finish(&o_hl, (m + 1) * 4), *hko = out_finish(&o_hko, (w.hcount + 1) * 4),
                 *hkd = out_finish(&o_hkd, w.hkused), *hvv = out_finish(&o_hvv, (w.hcount + 7) / 8),
                 *hvo = out_finish(&o_hvo, (w.hcount + 1) * 4), *hvd = out_finish(&o_hvd, w.hvused);
        if (hl && hko && hkd && hvv && hvo && hvd) {
            if (w.hvnulls == 0) {
                Py_DECREF(hvv);
                hvv = Py_NewRef(Py_None);
            }
            hres = Py_BuildValue("(LNNNNNN)", (long long)w.hcount, hl, hko, hkd, hvv, hvo, hvd);
        } else {
            Py_XDECREF(hl); Py_XDECREF(hko); Py_XDECREF(hkd); Py_XDECREF(hvv); Py_XDECREF(hvo);
            Py_XDECREF(hvd);
        }
        if (hres == NULL) goto done;
    } else {
        hres = Py_NewRef(Py_None);
    }
    if (w.knulls == 0) Py_SETREF(kv_b, Py_NewRef(Py_None));
    if (w.vnulls == 0) Py_SETREF(vv_b, Py_NewRef(Py_None));
    res = Py_BuildValue("(LNNNNNNNNNN)", (long long)m, off_b, ts_b, tt_b, kv_b, ko_b, kd_b, vv_b,
                        vo_b, vd_b, hres);
    return res; /* Py_BuildValue's N took every reference, also on failure */
done:
    Py_XDECREF(off_b); Py_XDECREF(ts_b); Py_XDECREF(tt_b); Py_XDECREF(kv_b); Py_XDECREF(ko_b);
    Py_XDECREF(kd_b); Py_XDECREF(vv_b); Py_XDECREF(vo_b); Py_XDECREF(vd_b);
    for (size_t i = 0; i < nouts; i++) Py_CLEAR(outs[i]->obj);
    return NULL;
fail_outs:
    for (size_t i = 0; i < nouts; i++) Py_CLEAR(outs[i]->obj);
    if (batches != NULL) release(batches, nb);
    return NULL;
fail:
    release(batches, got);
    Py_XDECREF(fast);
    return NULL;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS,
     "decode(batches, start, end, include_headers) -> the Arrow buffers of the rows at offsets "
     "[start, end); batches: (records, count, base_offset, timestamp, timestamp_type) each."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_recdecode",
                                    "Kafka v2 records -> Arrow column buffers (see decode.py).",
                                    -1, methods};

PyMODINIT_FUNC PyInit__recdecode(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "ABI_VERSION", ABI_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
