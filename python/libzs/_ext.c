/*
 * libzs._ext: the compiled half of the Python package.  It owns every call
 * made once per object (a Pool's store/read/read_into/free, a Compressor's
 * compress/decompress, and the key-value cache behind libzs.CompressedDict),
 * where ctypes cost several microseconds a call (argument conversion, a
 * Py_buffer by hand, a bytes object copied twice).  Everything configured
 * once (pools, zram stores, regions) stays in ctypes (__init__.py).
 *
 * Built against the stable ABI of Python 3.11 (Py_LIMITED_API, an abi3
 * module) when setup.py asks for it: python/README.md has the measurement
 * that chose it.  Only the public libzs headers are used; the module links the
 * package's own libzs.so, which _lib.py has loaded before this module is
 * imported (its soname then matches the one already in the process).
 *
 * The GIL is released around compression (Compressor, a CompressedDict
 * insert) and around a Pool store of ZSX_NOGIL_MIN bytes or more; a Pool read
 * and a CompressedDict lookup keep it (see cache_lookup, python/README.md).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "zs/blob.h"
#include "zs/cache.h"
#include "zs/compress.h"
#include "zs/zsmalloc.h"

#ifndef ZSX_NOGIL_MIN
#define ZSX_NOGIL_MIN 4096
#endif

/* libzs.ZsError and libzs.ZsArgumentError, handed over by _init() at package import. */
static PyObject *zs_error, *zs_arg_error;

static PyObject *raise_v(int arg, int err, const char *fmt, va_list ap)
{
	char msg[512];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (err < 0)
		err = -err;
	PyObject *cls = arg || err == EINVAL ? zs_arg_error : zs_error;
	if (!cls)
		cls = PyExc_OSError;
	PyObject *e = PyObject_CallFunction(cls, "is", err, msg);
	if (e) {
		PyErr_SetObject(cls, e);
		Py_DECREF(e);
	}
	return NULL;
}

/* ZsError(err, msg) (ZsArgumentError for EINVAL), as __init__.py's _check raises. */
static PyObject *raise_err(int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	raise_v(0, err, fmt, ap);
	va_end(ap);
	return NULL;
}

/* ZsArgumentError(err, msg) whatever err is (ENOSPC for a size past a limit). */
static PyObject *raise_arg(int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	raise_v(1, err, fmt, ap);
	va_end(ap);
	return NULL;
}

/*
 * After a dictionary is trained: zstd's trainer and the samples took tens of MB
 * of malloc'd memory, freed now but kept by glibc's heap (its first large free
 * also raises the mmap threshold, so the next large blocks come from the heap
 * too); give the free pages back at once, as the store does its own.
 */
static void release_heap(void)
{
#ifdef __GLIBC__
	malloc_trim(0);
#endif
}

/* TypeError "<what>, not <type name>" (tp_name is out of the limited API's reach). */
static PyObject *type_error(const char *what, PyObject *o)
{
	PyObject *name = PyType_GetName(Py_TYPE(o));
	if (name) {
		PyErr_Format(PyExc_TypeError, "%s, not %U", what, name);
		Py_DECREF(name);
	}
	return NULL;
}

/* A read-only buffer argument; str is refused by name (it has no buffer anyway). */
static int get_ro(PyObject *o, Py_buffer *v, const char *what)
{
	if (PyUnicode_Check(o)) {
		PyErr_Format(PyExc_TypeError, "%s must be bytes-like, not str (encode it first)",
			     what);
		return -1;
	}
	if (PyObject_GetBuffer(o, v, PyBUF_SIMPLE) == 0)
		return 0;
	/* Not C-contiguous (a strided numpy slice: numpy says ValueError, memoryview
	 * BufferError): take it with its strides and copy it once into a bytes object, which
	 * then lends its buffer. */
	PyObject *et, *ev, *tb;
	PyErr_Fetch(&et, &ev, &tb);
	Py_buffer full;
	if (PyObject_GetBuffer(o, &full, PyBUF_FULL_RO) < 0) {
		PyErr_Clear();
		PyErr_Restore(et, ev, tb);
		if (PyErr_ExceptionMatches(PyExc_TypeError)) {
			PyErr_Clear();
			char m[160];
			snprintf(m, sizeof(m), "%s must be bytes-like (bytes, bytearray, "
				 "memoryview, array, numpy array)", what);
			type_error(m, o);
		}
		return -1;
	}
	Py_XDECREF(et);
	Py_XDECREF(ev);
	Py_XDECREF(tb);
	PyObject *b = PyBytes_FromStringAndSize(NULL, full.len);
	if (!b) {
		PyBuffer_Release(&full);
		return -1;
	}
	int rc = PyBuffer_ToContiguous(PyBytes_AsString(b), &full, full.len, 'C');
	PyBuffer_Release(&full);
	if (rc == 0)
		rc = PyObject_GetBuffer(b, v, PyBUF_SIMPLE);
	Py_DECREF(b);
	return rc;
}

/* ------------------------------------------------------------------ Pool paths */

/*
 * The Pool's per-object calls.  Pool (__init__.py) keeps each object's size
 * and generation in its size table (_SizeTable: a dict of chunk number ->
 * memoryview of 8-byte entries) and a journal of C calls not yet in it; the
 * Pool's lock is held around every call here.  A read looks the handle up in
 * that table itself and returns None for anything not plainly valid (wrong
 * type, unknown, stale, bad length), for the Python path to raise the precise
 * error; a store returns the journal record, made in the same C-level call
 * as the allocation (Pool._settle).
 */
#define H_ADDR 0x0000FFFFFFFFFFF8ull /* the handle's layout: __init__.py _H_ADDR, _H_GEN */
#define H_GEN 0x0FFF000000000006ull
#define H_CHUNK_SHIFT 16

static struct zs_pool *pool_arg(PyObject *o)
{
	void *p = o == Py_None ? NULL : PyLong_AsVoidPtr(o);
	if (!p && !PyErr_Occurred())
		raise_err(EINVAL, "pool is closed");
	return p;
}

/* 1 and the handle's size when tables hold it live with this generation, else 0. */
static int table_size(PyObject *tables, PyObject *hobj, unsigned long *h, size_t *size)
{
	if (!PyLong_CheckExact(hobj))
		return 0;
	unsigned long long hv = PyLong_AsUnsignedLongLong(hobj);
	if (PyErr_Occurred()) {
		PyErr_Clear();
		return 0;
	}
	if (!hv || (hv & ~(H_ADDR | H_GEN)))
		return 0;
	PyObject *key = PyLong_FromUnsignedLongLong((hv & H_ADDR) >> H_CHUNK_SHIFT);
	if (!key) {
		PyErr_Clear();
		return 0;
	}
	PyObject *t = PyDict_GetItemWithError(tables, key);
	Py_DECREF(key);
	if (!t) {
		PyErr_Clear();
		return 0;
	}
	Py_buffer v;
	if (PyObject_GetBuffer(t, &v, PyBUF_SIMPLE) < 0) {
		PyErr_Clear();
		return 0;
	}
	size_t i = (size_t)(hv & ((1u << H_CHUNK_SHIFT) - 1)) >> 3;
	uint64_t e = (size_t)v.len >= (i + 1) * 8 ? ((const uint64_t *)v.buf)[i] : 0;
	PyBuffer_Release(&v);
	if (!e || ((e ^ hv) & ~H_ADDR))
		return 0;
	*h = (unsigned long)hv;
	*size = (size_t)((e & H_ADDR) >> 3);
	return 1;
}

/* The requested length: None -> size; else an int in 0..size; -1 when not. */
static Py_ssize_t length_arg(PyObject *o, size_t size)
{
	if (o == Py_None)
		return (Py_ssize_t)size;
	if (!PyLong_CheckExact(o))
		return -1;
	Py_ssize_t n = PyLong_AsSsize_t(o);
	if (n == -1 && PyErr_Occurred()) {
		PyErr_Clear();
		return -1;
	}
	return n >= 0 && (size_t)n <= size ? n : -1;
}

/* pool_store(pool, data, max_size, tag) -> (tag, handle or C's error value, length). */
static PyObject *x_pool_store(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
	(void)self;
	if (n != 4)
		return PyErr_Format(PyExc_TypeError, "pool_store takes 4 arguments");
	struct zs_pool *p = pool_arg(args[0]);
	if (!p)
		return NULL;
	size_t max = PyLong_AsSize_t(args[2]);
	if (max == (size_t)-1 && PyErr_Occurred())
		return NULL;
	Py_buffer v;
	if (get_ro(args[1], &v, "data") < 0)
		return NULL;
	if (v.len < 1 || (size_t)v.len > max) {
		raise_arg(v.len > 0 ? ENOSPC : EINVAL, "zs_malloc size %zd is outside 1..%zu "
			  "(max_object_size)", v.len, max);
		PyBuffer_Release(&v);
		return NULL;
	}
	unsigned long h;
	if (v.len >= ZSX_NOGIL_MIN) {
		Py_BEGIN_ALLOW_THREADS
		h = zs_malloc_write(p, v.buf, (size_t)v.len);
		Py_END_ALLOW_THREADS
	} else {
		h = zs_malloc_write(p, v.buf, (size_t)v.len);
	}
	Py_ssize_t len = v.len;
	PyBuffer_Release(&v);
	return Py_BuildValue("(Okn)", args[3], h, len);
}

/*
 * The object's first len (> 0) bytes into dst: an object split over pages is
 * assembled there by read_begin, a whole one copied.  0, or -1 when the pool
 * refuses the handle.
 */
static int read_object(struct zs_pool *p, unsigned long h, size_t len, char *dst)
{
	void *src = zs_obj_read_begin(p, h, len, dst);
	if (!src)
		return -1;
	if (src != dst)
		memcpy(dst, src, len);
	zs_obj_read_end(p, h, len, src);
	return 0;
}

/* pool_read(pool, tables, handle, length) -> bytes, or None (the caller raises). */
static PyObject *x_pool_read(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
	(void)self;
	if (n != 4)
		return PyErr_Format(PyExc_TypeError, "pool_read takes 4 arguments");
	if (args[0] == Py_None)
		Py_RETURN_NONE;
	struct zs_pool *p = pool_arg(args[0]);
	if (!p)
		return NULL;
	unsigned long h;
	size_t size;
	if (!table_size(args[1], args[2], &h, &size))
		Py_RETURN_NONE;
	Py_ssize_t len = length_arg(args[3], size);
	if (len < 0)
		Py_RETURN_NONE;
	PyObject *b = PyBytes_FromStringAndSize(NULL, len);
	if (!b || !len)
		return b;
	if (read_object(p, h, (size_t)len, PyBytes_AsString(b))) {
		Py_DECREF(b);
		Py_RETURN_NONE;
	}
	return b;
}

/* pool_read_into(pool, tables, handle, buffer, length) -> bytes copied, or None. */
static PyObject *x_pool_read_into(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
	(void)self;
	if (n != 5)
		return PyErr_Format(PyExc_TypeError, "pool_read_into takes 5 arguments");
	if (args[0] == Py_None)
		Py_RETURN_NONE;
	struct zs_pool *p = pool_arg(args[0]);
	if (!p)
		return NULL;
	unsigned long h;
	size_t size;
	if (!table_size(args[1], args[2], &h, &size))
		Py_RETURN_NONE;
	Py_ssize_t len = length_arg(args[4], size);
	if (len < 0)
		Py_RETURN_NONE;
	Py_buffer v;
	if (PyObject_GetBuffer(args[3], &v, PyBUF_WRITABLE) < 0) {
		PyErr_Clear();
		Py_RETURN_NONE;
	}
	int ok = v.len >= len && (!len || !read_object(p, h, (size_t)len, v.buf));
	PyBuffer_Release(&v);
	if (!ok)
		Py_RETURN_NONE;
	return PyLong_FromSsize_t(len);
}

/* pool_free(pool, handle, deferred) -> zs_free's (or zs_free_deferred's) return value. */
static PyObject *x_pool_free(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
	(void)self;
	if (n != 3)
		return PyErr_Format(PyExc_TypeError, "pool_free takes 3 arguments");
	struct zs_pool *p = pool_arg(args[0]);
	if (!p)
		return NULL;
	unsigned long h = PyLong_AsUnsignedLong(args[1]);
	if (PyErr_Occurred())
		return NULL;
	int rc = PyObject_IsTrue(args[2]) ? zs_free_deferred(p, h) : zs_free(p, h);
	return PyLong_FromLong(rc);
}

/* ------------------------------------------------------------------ gate */

/*
 * Objects whose calls run without the GIL count them in `busy` (changed with
 * the GIL held); close() marks the object closed, then waits for busy to
 * reach 0 with the GIL released before it destroys the C object.
 */
struct gate {
	int closed;
	int busy;
	/* a retrain in progress: only its thread enters, others wait (CompressedDict) */
	int exclusive;
	unsigned long owner;
};

static int gate_enter(struct gate *g, const char *what)
{
	while (g->exclusive && g->owner != PyThread_get_thread_ident()) {
		Py_BEGIN_ALLOW_THREADS
		sched_yield();
		Py_END_ALLOW_THREADS
	}
	if (g->closed) {
		raise_err(EINVAL, "%s is closed", what);
		return -1;
	}
	g->busy++;
	return 0;
}

static void gate_leave(struct gate *g)
{
	g->busy--;
}

static void gate_close_wait(struct gate *g)
{
	g->closed = 1;
	while (g->busy || g->exclusive) {
		Py_BEGIN_ALLOW_THREADS
		sched_yield();
		Py_END_ALLOW_THREADS
	}
}

/* ------------------------------------------------------------------ Comp */

typedef struct {
	PyObject_HEAD
	struct zs_comp *c;
	PyThread_type_lock lock; /* one context and scratch buffer: one call at a time */
	char *dst;
	size_t dst_cap, max_src;
	struct gate g;
} CompObject;

static void comp_destroy(CompObject *self)
{
	if (self->c)
		zs_comp_destroy(self->c);
	self->c = NULL;
	free(self->dst);
	self->dst = NULL;
}

static int comp_init(PyObject *o, PyObject *args, PyObject *kw)
{
	CompObject *self = (CompObject *)o;
	static char *kws[] = {"name", "max_src", "level", "dict", NULL};
	const char *name;
	Py_ssize_t max_src = 65536;
	int level = 0;
	PyObject *dict = Py_None;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "s|niO", kws, &name, &max_src, &level, &dict))
		return -1;
	if (self->c) {
		PyErr_SetString(PyExc_RuntimeError, "already initialised");
		return -1;
	}
	if (max_src < 1 || (size_t)max_src > ZS_COMP_MAX_SRC) {
		raise_err(EINVAL, "max_src %zd is outside 1..%zu", max_src, (size_t)ZS_COMP_MAX_SRC);
		return -1;
	}
	struct zs_comp_params prm = {.level = level};
	Py_buffer d = {0};
	int have_dict = dict != Py_None;
	if (have_dict) {
		if (get_ro(dict, &d, "dict") < 0)
			return -1;
		if (d.len < 1 || (size_t)d.len > ZS_COMP_MAX_DICT) {
			PyBuffer_Release(&d);
			raise_err(EINVAL, "dict of %zd bytes is outside 1..%zu", d.len,
				  (size_t)ZS_COMP_MAX_DICT);
			return -1;
		}
		prm.dict = d.buf;
		prm.dict_len = (size_t)d.len;
	}
	char why[256];
	int rc = zs_comp_create(&(struct zs_comp_config){ .name = name, .max_src = (size_t)max_src,
							  .level = prm.level, .dict = prm.dict,
							  .dict_len = prm.dict_len },
				&self->c, why, sizeof(why));
	if (have_dict)
		PyBuffer_Release(&d);
	if (rc < 0) {
		self->c = NULL;
		raise_err(rc, "%s: %s", "zs_comp_create", why);
		return -1;
	}
	self->max_src = (size_t)max_src;
	self->dst_cap = zs_comp_bound(self->c, (size_t)max_src);
	self->dst = malloc(self->dst_cap);
	self->lock = PyThread_allocate_lock();
	if (!self->dst || !self->lock) {
		comp_destroy(self);
		PyErr_NoMemory();
		return -1;
	}
	return 0;
}

static void comp_dealloc(PyObject *o)
{
	CompObject *self = (CompObject *)o;
	PyTypeObject *tp = Py_TYPE(o);
	comp_destroy(self);
	if (self->lock)
		PyThread_free_lock(self->lock);
	freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
	f(o);
	Py_DECREF(tp);
}

static void comp_lock(CompObject *self)
{
	if (!PyThread_acquire_lock(self->lock, NOWAIT_LOCK)) {
		Py_BEGIN_ALLOW_THREADS
		PyThread_acquire_lock(self->lock, WAIT_LOCK);
		Py_END_ALLOW_THREADS
	}
}

static PyObject *comp_close(PyObject *o, PyObject *unused)
{
	(void)unused;
	CompObject *self = (CompObject *)o;
	if (!self->g.closed) {
		gate_close_wait(&self->g);
		comp_destroy(self);
	}
	Py_RETURN_NONE;
}

/* compress(data) -> bytes made at their final size from the context's scratch buffer. */
static PyObject *comp_compress(PyObject *o, PyObject *data)
{
	CompObject *self = (CompObject *)o;
	if (gate_enter(&self->g, "compressor") < 0)
		return NULL;
	PyObject *out = NULL;
	Py_buffer v;
	if (get_ro(data, &v, "data") < 0)
		goto leave;
	if ((size_t)v.len > self->max_src) {
		raise_err(EINVAL, "data of %zd bytes exceeds max_src %zu", v.len, self->max_src);
		goto rel;
	}
	comp_lock(self);
	int n;
	Py_BEGIN_ALLOW_THREADS
	n = zs_compress(self->c, v.buf, (size_t)v.len, self->dst, self->dst_cap);
	Py_END_ALLOW_THREADS
	if (n < 0)
		raise_err(n, "zs_compress(%zd bytes)", v.len);
	else
		out = PyBytes_FromStringAndSize(self->dst, n);
	PyThread_release_lock(self->lock);
rel:
	PyBuffer_Release(&v);
leave:
	gate_leave(&self->g);
	return out;
}

static PyObject *comp_decompress(PyObject *o, PyObject *const *args, Py_ssize_t n)
{
	CompObject *self = (CompObject *)o;
	if (n != 2)
		return PyErr_Format(PyExc_TypeError, "decompress(data, orig_len) takes 2 arguments");
	if (!PyLong_Check(args[1]) || PyBool_Check(args[1]))
		return type_error("orig_len must be an int", args[1]);
	Py_ssize_t len = PyLong_AsSsize_t(args[1]);
	if (len == -1 && PyErr_Occurred())
		PyErr_Clear();
	if (len < 1 || (size_t)len > self->max_src)
		return raise_err(EINVAL, "orig_len must be in 1..%zu (max_src), not %zd",
				 self->max_src, len);
	if (gate_enter(&self->g, "compressor") < 0)
		return NULL;
	PyObject *out = NULL;
	Py_buffer v;
	if (get_ro(args[0], &v, "data") < 0)
		goto leave;
	out = PyBytes_FromStringAndSize(NULL, len);
	if (out) {
		char *dst = PyBytes_AsString(out);
		int rc;
		comp_lock(self);
		Py_BEGIN_ALLOW_THREADS
		rc = zs_decompress(self->c, v.buf, (size_t)v.len, dst, (size_t)len);
		Py_END_ALLOW_THREADS
		PyThread_release_lock(self->lock);
		if (rc < 0) {
			Py_CLEAR(out);
			raise_err(rc, "zs_decompress (corrupt input, a different dictionary, or "
				  "orig_len %zd not the original length)", len);
		}
	}
	PyBuffer_Release(&v);
leave:
	gate_leave(&self->g);
	return out;
}

static PyObject *comp_name(PyObject *o, void *unused)
{
	(void)unused;
	CompObject *self = (CompObject *)o;
	if (!self->c)
		return raise_err(EINVAL, "compressor is closed");
	return PyUnicode_FromString(zs_comp_name(self->c));
}

static PyObject *comp_has_dict(PyObject *o, void *unused)
{
	(void)unused;
	CompObject *self = (CompObject *)o;
	if (!self->c)
		return raise_err(EINVAL, "compressor is closed");
	return PyBool_FromLong(zs_comp_has_dict(self->c));
}

static PyObject *comp_closed(PyObject *o, void *unused)
{
	(void)unused;
	return PyBool_FromLong(((CompObject *)o)->g.closed);
}

static PyMethodDef comp_methods[] = {
	{"compress", comp_compress, METH_O, "compress(data) -> bytes"},
	{"decompress", (PyCFunction)(void (*)(void))comp_decompress, METH_FASTCALL,
	 "decompress(data, orig_len) -> bytes"},
	{"close", comp_close, METH_NOARGS, "destroy the context (waits for calls in flight)"},
	{NULL, NULL, 0, NULL},
};

static PyGetSetDef comp_getset[] = {
	{"name", comp_name, NULL, "canonical name", NULL},
	{"has_dict", comp_has_dict, NULL, "compresses with a dictionary", NULL},
	{"closed", comp_closed, NULL, "close() was called", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot comp_slots[] = {
	{Py_tp_init, comp_init},
	{Py_tp_dealloc, comp_dealloc},
	{Py_tp_methods, comp_methods},
	{Py_tp_getset, comp_getset},
	{Py_tp_new, PyType_GenericNew},
	{0, NULL},
};

static PyType_Spec comp_spec = {
	"libzs._ext.Comp", sizeof(CompObject), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	comp_slots,
};

/* ------------------------------------------------------------------ Cache */

/*
 * The cache under CompressedDict.  A key is stored with a leading tag byte,
 * 's' for a str (then its UTF-8) and 'b' for bytes, so "k" and b"k" are two
 * keys as in a dict, and iteration gives each back as its type.
 */
typedef struct {
	PyObject_HEAD
	struct zs_cache *c;
	struct gate g;
	size_t max_key;
	Py_ssize_t max_value;
	PyObject *samples;  /* values kept for training a dictionary (a list), or NULL */
	Py_ssize_t train_at; /* train once samples holds this many */
} CacheObject;

#define KEYBUF (ZS_CACHE_MAX_KEY + 1)

/* The tagged key into buf; returns its length or -1 with an exception set. */
static Py_ssize_t key_arg(CacheObject *self, PyObject *k, char *buf)
{
	const char *src;
	Py_ssize_t n;
	char tag;
	if (PyUnicode_Check(k)) {
		src = PyUnicode_AsUTF8AndSize(k, &n);
		if (!src)
			return -1;
		tag = 's';
	} else if (PyBytes_Check(k)) {
		char *s;
		if (PyBytes_AsStringAndSize(k, &s, &n) < 0)
			return -1;
		src = s;
		tag = 'b';
	} else {
		type_error("keys must be str or bytes", k);
		return -1;
	}
	if ((size_t)n + 1 > self->max_key) {
		PyErr_Format(PyExc_ValueError, "key of %zd bytes is longer than max_key (%zu "
			     "bytes)", n, self->max_key - 1);
		return -1;
	}
	buf[0] = tag;
	memcpy(buf + 1, src, (size_t)n);
	return n + 1;
}

static PyObject *key_obj(const char *buf, size_t n)
{
	if (n >= 1 && buf[0] == 's')
		return PyUnicode_DecodeUTF8(buf + 1, (Py_ssize_t)n - 1, "strict");
	return PyBytes_FromStringAndSize(buf + 1, n ? (Py_ssize_t)n - 1 : 0);
}

static int cache_init(PyObject *o, PyObject *args, PyObject *kw)
{
	CacheObject *self = (CacheObject *)o;
	static char *kws[] = {"codec", "level", "dict", "mem_limit", "min_compress",
			      "max_key", "shards", "compact_idle_ms", NULL};
	int codec = ZS_BLOB_LZ4, level = 0, idle = 0;
	PyObject *dict = Py_None;
	Py_ssize_t mem_limit = 0, min_compress = 0, max_key = 0;
	unsigned int shards = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|iiOnnnIi", kws, &codec, &level, &dict,
					 &mem_limit, &min_compress, &max_key, &shards, &idle))
		return -1;
	if (self->c) {
		PyErr_SetString(PyExc_RuntimeError, "already initialised");
		return -1;
	}
	if (mem_limit < 0 || min_compress < 0 || max_key < 0) {
		raise_err(EINVAL, "mem_limit, min_compress and max_key must be >= 0");
		return -1;
	}
	struct zs_cache_config cfg;
	zs_cache_config_init(&cfg);
	cfg.blob.codec = (enum zs_blob_codec)codec;
	cfg.blob.level = level;
	cfg.blob.mem_limit = (size_t)mem_limit;
	cfg.blob.min_compress = (size_t)min_compress;
	cfg.blob.compact_idle_ms = idle;
	cfg.shards = shards;
	cfg.max_key = (size_t)max_key;
	Py_buffer d = {0};
	int have_dict = dict != Py_None;
	if (have_dict) {
		if (get_ro(dict, &d, "dict") < 0)
			return -1;
		cfg.blob.dict = d.buf;
		cfg.blob.dict_len = (size_t)d.len;
	}
	char why[256];
	int rc = zs_cache_create(&cfg, &self->c, why, sizeof(why));
	if (have_dict)
		PyBuffer_Release(&d);
	if (rc < 0) {
		self->c = NULL;
		raise_err(rc, "%s: %s", "zs_cache_create", why);
		return -1;
	}
	self->max_key = max_key ? (size_t)max_key : 1024;
	self->max_value = (Py_ssize_t)zs_blob_max_len(zs_cache_blob(self->c));
	return 0;
}

static void cache_destroy(CacheObject *self)
{
	if (self->c)
		zs_cache_destroy(self->c);
	self->c = NULL;
}

static int cache_gc_clear(PyObject *o);

static void cache_dealloc(PyObject *o)
{
	PyTypeObject *tp = Py_TYPE(o);
	PyObject_GC_UnTrack(o);
	cache_gc_clear(o);
	cache_destroy((CacheObject *)o);
	freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
	f(o);
	Py_DECREF(tp);
}

static int cache_traverse(PyObject *o, visitproc visit, void *arg)
{
	Py_VISIT(Py_TYPE(o));
	Py_VISIT(((CacheObject *)o)->samples);
	return 0;
}

static int cache_gc_clear(PyObject *o)
{
	CacheObject *self = (CacheObject *)o;
	PyObject *s = self->samples;
	self->samples = NULL;
	Py_XDECREF(s);
	return 0;
}

static int cache_enter(CacheObject *self)
{
	if (!self->c && !self->g.closed) {
		PyErr_SetString(PyExc_ValueError, "CompressedDict is not initialised");
		return -1;
	}
	return gate_enter(&self->g, "CompressedDict");
}

static PyObject *cache_close(PyObject *o, PyObject *unused)
{
	(void)unused;
	CacheObject *self = (CacheObject *)o;
	if (!self->g.closed) {
		gate_close_wait(&self->g);
		cache_destroy(self);
	}
	Py_RETURN_NONE;
}

static int cache_setitem(PyObject *o, PyObject *k, PyObject *v)
{
	CacheObject *self = (CacheObject *)o;
	char key[KEYBUF];
	if (cache_enter(self) < 0)
		return -1;
	int rc = -1;
	Py_ssize_t kn = key_arg(self, k, key);
	if (kn < 0)
		goto leave;
	if (!v) {
		int e = zs_cache_erase(self->c, key, (size_t)kn);
		if (e == -ENOENT)
			PyErr_SetObject(PyExc_KeyError, k);
		else if (e < 0)
			raise_err(e, "zs_cache_erase");
		else
			rc = 0;
		goto leave;
	}
	if (!PyBytes_Check(v) && !PyByteArray_Check(v) && !PyMemoryView_Check(v) &&
	    !PyObject_CheckBuffer(v)) {
		type_error("values must be bytes-like (bytes, bytearray, memoryview)", v);
		goto leave;
	}
	Py_buffer b;
	if (get_ro(v, &b, "value") < 0)
		goto leave;
	int e;
	struct zs_cache *c = self->c;
	/* the call compresses: other threads run meanwhile (the GIL is not needed by C) */
	Py_BEGIN_ALLOW_THREADS
	e = zs_cache_insert(c, key, (size_t)kn, b.buf, (size_t)b.len);
	Py_END_ALLOW_THREADS
	if (e == -ENOSPC)
		raise_err(e, "value of %zd bytes is too long: at most %zd bytes less the key's "
			  "length and 2", b.len, self->max_value);
	else if (e == -ENOMEM)
		PyErr_Format(PyExc_MemoryError, "CompressedDict: no memory for a %zd-byte value "
			     "(with maxsize set: the entry alone does not fit in it)", b.len);
	else if (e < 0)
		raise_err(e, "zs_cache_insert");
	else
		rc = 0;
	if (rc == 0 && self->samples) {
		PyObject *copy = PyBytes_FromStringAndSize(b.buf, b.len);
		if (!copy || PyList_Append(self->samples, copy) < 0)
			rc = -1;
		Py_XDECREF(copy);
		if (rc == 0 && PyList_Size(self->samples) >= self->train_at) {
			PyObject *list = self->samples;
			self->samples = NULL;
			/* the Python side trains, rebuilds the store (_swap) and moves the entries;
			 * this call is counted in busy, which _exclusive is told */
			PyObject *r = PyObject_CallMethod(o, "_train", "Oi", list, 1);
			Py_DECREF(list);
			release_heap();
			if (!r)
				rc = -1;
			Py_XDECREF(r);
		}
	}
	PyBuffer_Release(&b);
leave:
	gate_leave(&self->g);
	return rc;
}

/* zs_cache_lookup_cb's callback: the value into a new bytes object of its final size. */
static int to_bytes_cb(const void *data, size_t len, void *arg)
{
	PyObject *b = PyBytes_FromStringAndSize(data, (Py_ssize_t)len);
	*(PyObject **)arg = b;
	return b ? 0 : -ENOMEM;
}

/*
 * The value as bytes; NULL with *miss set when the key is absent, or NULL and
 * an exception.  One index lookup: the callback runs under the shard's read
 * lock with the GIL held, which cannot deadlock: a thread holding that shard's
 * lock for writing (an insert) never waits for the GIL.  The decompression
 * runs with the GIL held: releasing it would mean sizing the value first (a
 * second index lookup) to decompress into the result; on the 2-core machine,
 * loaded, the two measured within noise of each other single-threaded
 * (1.47-1.61 against 1.48-1.53 us per 1.9 KB lz4 record, python/README.md),
 * and threads reading at once are the case this gives up.
 */
static PyObject *cache_lookup(CacheObject *self, const char *key, Py_ssize_t kn, int *miss)
{
	*miss = 0;
	PyObject *b = NULL;
	int rc = zs_cache_lookup_cb(self->c, key, (size_t)kn, to_bytes_cb, &b);
	if (rc == 0)
		return b;
	Py_XDECREF(b);
	if (rc == -ENOENT) {
		*miss = 1;
		return NULL;
	}
	if (rc == -ENOMEM && PyErr_Occurred())
		return NULL;
	return raise_err(rc, "zs_cache_lookup_cb");
}

static PyObject *cache_getitem(PyObject *o, PyObject *k)
{
	CacheObject *self = (CacheObject *)o;
	char key[KEYBUF];
	if (cache_enter(self) < 0)
		return NULL;
	PyObject *r = NULL;
	Py_ssize_t kn = key_arg(self, k, key);
	if (kn >= 0) {
		int miss;
		r = cache_lookup(self, key, kn, &miss);
		if (miss)
			PyErr_SetObject(PyExc_KeyError, k);
	}
	gate_leave(&self->g);
	return r;
}

static PyObject *cache_get(PyObject *o, PyObject *const *args, Py_ssize_t n)
{
	CacheObject *self = (CacheObject *)o;
	if (n < 1 || n > 2)
		return PyErr_Format(PyExc_TypeError, "get(key, default=None) takes 1 or 2 arguments");
	char key[KEYBUF];
	if (cache_enter(self) < 0)
		return NULL;
	PyObject *r = NULL;
	Py_ssize_t kn = key_arg(self, args[0], key);
	if (kn >= 0) {
		int miss;
		r = cache_lookup(self, key, kn, &miss);
		if (miss) {
			r = n == 2 ? args[1] : Py_None;
			Py_INCREF(r);
		}
	}
	gate_leave(&self->g);
	return r;
}

static int cache_contains(PyObject *o, PyObject *k)
{
	CacheObject *self = (CacheObject *)o;
	char key[KEYBUF];
	if (cache_enter(self) < 0)
		return -1;
	int r = -1;
	Py_ssize_t kn = PyUnicode_Check(k) || PyBytes_Check(k) ? key_arg(self, k, key) : 0;
	if (!PyUnicode_Check(k) && !PyBytes_Check(k)) {
		r = 0; /* as a dict: any other object is simply not a key */
	} else if (kn >= 0) {
		long n = zs_cache_value_size(self->c, key, (size_t)kn);
		if (n >= 0)
			r = 1;
		else if (n == -ENOENT)
			r = 0;
		else
			raise_err((int)n, "zs_cache_value_size");
	}
	gate_leave(&self->g);
	return r;
}

static Py_ssize_t cache_len(PyObject *o)
{
	CacheObject *self = (CacheObject *)o;
	if (cache_enter(self) < 0)
		return -1;
	struct zs_cache_stats st;
	zs_cache_stats(self->c, &st, sizeof(st));
	gate_leave(&self->g);
	return (Py_ssize_t)st.entries;
}

/* _next(cursor) -> (key, next cursor), or None at the end. */
static PyObject *cache_next(PyObject *o, PyObject *arg)
{
	CacheObject *self = (CacheObject *)o;
	uint64_t cur = PyLong_AsUnsignedLongLong(arg);
	if (PyErr_Occurred())
		return NULL;
	if (cache_enter(self) < 0)
		return NULL;
	char key[KEYBUF];
	size_t kn;
	PyObject *r = NULL;
	int rc = zs_cache_next(self->c, &cur, key, sizeof(key), &kn);
	if (rc == -ENOENT) {
		r = Py_None;
		Py_INCREF(r);
	} else if (rc < 0) {
		raise_err(rc, "zs_cache_next");
	} else {
		PyObject *k = key_obj(key, kn);
		if (k) {
			r = Py_BuildValue("(NK)", k, (unsigned long long)cur);
		}
	}
	gate_leave(&self->g);
	return r;
}

static PyObject *cache_clear(PyObject *o, PyObject *unused)
{
	(void)unused;
	CacheObject *self = (CacheObject *)o;
	if (cache_enter(self) < 0)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	zs_cache_clear(self->c);
	Py_END_ALLOW_THREADS
	gate_leave(&self->g);
	Py_RETURN_NONE;
}

static PyObject *cache_compact(PyObject *o, PyObject *unused)
{
	(void)unused;
	CacheObject *self = (CacheObject *)o;
	if (cache_enter(self) < 0)
		return NULL;
	unsigned long pages;
	Py_BEGIN_ALLOW_THREADS
	pages = zs_blob_compact(zs_cache_blob(self->c));
	Py_END_ALLOW_THREADS
	gate_leave(&self->g);
	return PyLong_FromUnsignedLong(pages);
}

static PyObject *cache_memory(PyObject *o, PyObject *unused)
{
	(void)unused;
	CacheObject *self = (CacheObject *)o;
	if (cache_enter(self) < 0)
		return NULL;
	struct zs_cache_stats st;
	zs_cache_stats(self->c, &st, sizeof(st));
	gate_leave(&self->g);
	return PyLong_FromUnsignedLongLong(st.mem_bytes);
}

#define STAT(d, name, v)                                                                     \
	do {                                                                                 \
		PyObject *x_ = PyLong_FromUnsignedLongLong(v);                               \
		if (!x_ || PyDict_SetItemString(d, name, x_) < 0) {                          \
			Py_XDECREF(x_);                                                      \
			Py_DECREF(d);                                                        \
			return NULL;                                                         \
		}                                                                            \
		Py_DECREF(x_);                                                               \
	} while (0)

static PyObject *cache_stats(PyObject *o, PyObject *unused)
{
	(void)unused;
	CacheObject *self = (CacheObject *)o;
	if (cache_enter(self) < 0)
		return NULL;
	struct zs_cache_stats st;
	zs_cache_stats(self->c, &st, sizeof(st));
	gate_leave(&self->g);
	PyObject *d = PyDict_New();
	if (!d)
		return NULL;
	STAT(d, "entries", st.entries);
	STAT(d, "hits", st.hits);
	STAT(d, "misses", st.misses);
	STAT(d, "inserts", st.inserts);
	STAT(d, "replaced", st.replaced);
	STAT(d, "erases", st.erases);
	STAT(d, "evictions", st.evictions);
	STAT(d, "index_bytes", st.index_bytes);
	STAT(d, "key_bytes", st.key_bytes);
	STAT(d, "mem_bytes", st.mem_bytes);
	STAT(d, "value_bytes", st.blob.value_bytes);
	STAT(d, "stored_bytes", st.blob.stored_bytes);
	STAT(d, "raw_objects", st.blob.raw_objects);
	STAT(d, "pool_pages", st.blob.pool_pages);
	STAT(d, "freed_bytes", st.blob.freed_bytes);
	STAT(d, "compact_steps", st.blob.compact_steps);
	STAT(d, "compact_passes", st.blob.compact_passes);
	STAT(d, "pages_compacted", st.blob.pages_compacted);
	STAT(d, "limit_refusals", st.blob.limit_refusals);
	STAT(d, "cached_bytes", st.blob.cached_bytes);
	return d;
}

/* _sample(list or None, n): keep each inserted value in list; call self._train at n. */
static PyObject *cache_sample(PyObject *o, PyObject *args)
{
	CacheObject *self = (CacheObject *)o;
	PyObject *list;
	Py_ssize_t n;
	if (!PyArg_ParseTuple(args, "On", &list, &n))
		return NULL;
	if (list != Py_None && !PyList_Check(list))
		return type_error("_sample takes a list or None", list);
	PyObject *old = self->samples;
	self->samples = list == Py_None ? NULL : list;
	Py_XINCREF(self->samples);
	Py_XDECREF(old);
	self->train_at = n;
	Py_RETURN_NONE;
}

/*
 * _exclusive(own_calls): from now on only this thread enters (others wait in
 * gate_enter), once the calls in flight, less own_calls of this thread's that
 * wait on this one, have left.  _release() ends it.  A retrain holds it.
 */
static PyObject *cache_exclusive(PyObject *o, PyObject *arg)
{
	CacheObject *self = (CacheObject *)o;
	long own = PyLong_AsLong(arg);
	if (own == -1 && PyErr_Occurred())
		return NULL;
	if (self->g.closed)
		return raise_err(EINVAL, "CompressedDict is closed");
	while (self->g.exclusive && self->g.owner != PyThread_get_thread_ident()) {
		Py_BEGIN_ALLOW_THREADS
		sched_yield();
		Py_END_ALLOW_THREADS
	}
	self->g.exclusive++;
	self->g.owner = PyThread_get_thread_ident();
	while (self->g.busy > own) {
		Py_BEGIN_ALLOW_THREADS
		sched_yield();
		Py_END_ALLOW_THREADS
	}
	Py_RETURN_NONE;
}

static PyObject *cache_release(PyObject *o, PyObject *unused)
{
	(void)unused;
	CacheObject *self = (CacheObject *)o;
	if (self->g.exclusive && self->g.owner == PyThread_get_thread_ident())
		self->g.exclusive--;
	Py_RETURN_NONE;
}

/* _swap(other): exchange the two objects' stores (a retrain's rebuilt one comes in). */
static PyObject *cache_swap(PyObject *o, PyObject *arg)
{
	CacheObject *self = (CacheObject *)o;
	if (!PyObject_TypeCheck(arg, Py_TYPE(o)) && !PyObject_TypeCheck(o, Py_TYPE(arg)))
		return type_error("_swap takes a Cache", arg);
	CacheObject *other = (CacheObject *)arg;
	if (!self->c || !other->c || other->g.busy)
		return raise_err(EINVAL, "_swap: a store is closed or in use");
	struct zs_cache *c = self->c;
	self->c = other->c;
	other->c = c;
	Py_ssize_t mv = self->max_value;
	self->max_value = other->max_value;
	other->max_value = mv;
	Py_RETURN_NONE;
}

static PyObject *cache_closed(PyObject *o, void *unused)
{
	(void)unused;
	return PyBool_FromLong(((CacheObject *)o)->g.closed);
}

static PyObject *cache_max_value(PyObject *o, void *unused)
{
	(void)unused;
	return PyLong_FromSsize_t(((CacheObject *)o)->max_value);
}

static PyMethodDef cache_methods[] = {
	{"get", (PyCFunction)(void (*)(void))cache_get, METH_FASTCALL,
	 "get(key, default=None): the value, or default when key is absent"},
	{"_next", cache_next, METH_O, "_next(cursor) -> (key, cursor) or None (iteration)"},
	{"clear", cache_clear, METH_NOARGS, "remove every entry"},
	{"compact", cache_compact, METH_NOARGS, "compact the store now; returns pages freed"},
	{"memory", cache_memory, METH_NOARGS, "real bytes held (store, pages, index)"},
	{"stats", cache_stats, METH_NOARGS, "counters (dict)"},
	{"close", cache_close, METH_NOARGS, "free everything (waits for calls in flight)"},
	{"_sample", cache_sample, METH_VARARGS, NULL},
	{"_exclusive", cache_exclusive, METH_O, NULL},
	{"_release", cache_release, METH_NOARGS, NULL},
	{"_swap", cache_swap, METH_O, NULL},
	{NULL, NULL, 0, NULL},
};

static PyGetSetDef cache_getset[] = {
	{"closed", cache_closed, NULL, "close() was called", NULL},
	{"max_value_len", cache_max_value, NULL, "longest value (less the key and 2 bytes)", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot cache_slots[] = {
	{Py_tp_init, cache_init},
	{Py_tp_dealloc, cache_dealloc},
	{Py_tp_traverse, cache_traverse},
	{Py_tp_clear, cache_gc_clear},
	{Py_tp_methods, cache_methods},
	{Py_tp_getset, cache_getset},
	{Py_tp_new, PyType_GenericNew},
	{Py_mp_subscript, cache_getitem},
	{Py_mp_ass_subscript, cache_setitem},
	{Py_mp_length, cache_len},
	{Py_sq_contains, cache_contains},
	{0, NULL},
};

static PyType_Spec cache_spec = {
	"libzs._ext.Cache", sizeof(CacheObject), 0,
	Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, cache_slots,
};

/* ------------------------------------------------------------------ module */

/* train_dict(samples: list of bytes-like, cap) -> bytes (zs_blob_dict_train). */
static PyObject *x_train_dict(PyObject *self, PyObject *args)
{
	(void)self;
	PyObject *seq;
	Py_ssize_t cap;
	if (!PyArg_ParseTuple(args, "On", &seq, &cap))
		return NULL;
	if (cap < 256 || (size_t)cap > ZS_COMP_MAX_DICT)
		return raise_err(EINVAL, "dict_size %zd is outside 256..%zu", cap,
				 (size_t)ZS_COMP_MAX_DICT);
	if (PyUnicode_Check(seq) || PyObject_CheckBuffer(seq))
		return type_error("samples must be a list of bytes-like values", seq);
	PyObject *fast = PySequence_List(seq);
	if (!fast)
		return NULL;
	Py_ssize_t n = PyList_Size(fast);
	if (n < 1) {
		Py_DECREF(fast);
		return raise_err(EINVAL, "no samples to train a dictionary on");
	}
	size_t total = 0;
	size_t *sizes = PyMem_Malloc(sizeof(size_t) * (size_t)n);
	Py_buffer *vs = PyMem_Calloc((size_t)n, sizeof(Py_buffer));
	PyObject *r = NULL;
	char *all = NULL, *dict = NULL;
	Py_ssize_t got = 0;
	if (!sizes || !vs) {
		PyErr_NoMemory();
		goto out;
	}
	for (; got < n; got++) {
		if (get_ro(PyList_GetItem(fast, got), &vs[got], "a sample") < 0)
			goto out;
		sizes[got] = (size_t)vs[got].len;
		total += sizes[got];
	}
	all = PyMem_Malloc(total ? total : 1);
	dict = PyMem_Malloc((size_t)cap);
	if (!all || !dict) {
		PyErr_NoMemory();
		goto out;
	}
	for (Py_ssize_t i = 0, off = 0; i < n; off += vs[i].len, i++)
		memcpy(all + off, vs[i].buf, (size_t)vs[i].len);
	long len;
	Py_BEGIN_ALLOW_THREADS
	len = zs_blob_dict_train(all, sizes, (size_t)n, dict, (size_t)cap);
	Py_END_ALLOW_THREADS
	if (len < 0)
		raise_err((int)len, "zs_blob_dict_train: %zd samples of %zu bytes in all were too "
			  "few or too uniform to train a dictionary", n, total);
	else
		r = PyBytes_FromStringAndSize(dict, len);
out:
	for (Py_ssize_t i = 0; i < got; i++)
		PyBuffer_Release(&vs[i]);
	PyMem_Free(vs);
	PyMem_Free(sizes);
	PyMem_Free(all);
	PyMem_Free(dict);
	Py_DECREF(fast);
	release_heap();
	return r;
}

static PyObject *x_init(PyObject *self, PyObject *args)
{
	(void)self;
	PyObject *e, *a;
	if (!PyArg_ParseTuple(args, "OO", &e, &a))
		return NULL;
	Py_INCREF(e);
	Py_INCREF(a);
	Py_XDECREF(zs_error);
	Py_XDECREF(zs_arg_error);
	zs_error = e;
	zs_arg_error = a;
	Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
	{"_init", x_init, METH_VARARGS, "_init(ZsError, ZsArgumentError)"},
	{"pool_store", (PyCFunction)(void (*)(void))x_pool_store, METH_FASTCALL, NULL},
	{"pool_read", (PyCFunction)(void (*)(void))x_pool_read, METH_FASTCALL, NULL},
	{"pool_read_into", (PyCFunction)(void (*)(void))x_pool_read_into, METH_FASTCALL, NULL},
	{"pool_free", (PyCFunction)(void (*)(void))x_pool_free, METH_FASTCALL, NULL},
	{"train_dict", x_train_dict, METH_VARARGS,
	 "train_dict(samples, dict_size) -> a zstd dictionary (bytes)"},
	{NULL, NULL, 0, NULL},
};

static int module_exec(PyObject *m)
{
	PyObject *t = PyType_FromSpec(&comp_spec);
	if (!t || PyModule_AddObject(m, "Comp", t) < 0) {
		Py_XDECREF(t);
		return -1;
	}
	t = PyType_FromSpec(&cache_spec);
	if (!t || PyModule_AddObject(m, "Cache", t) < 0) {
		Py_XDECREF(t);
		return -1;
	}
	if (PyModule_AddIntConstant(m, "CODEC_NONE", ZS_BLOB_NONE) < 0 ||
	    PyModule_AddIntConstant(m, "CODEC_LZ4", ZS_BLOB_LZ4) < 0 ||
	    PyModule_AddIntConstant(m, "CODEC_ZSTD", ZS_BLOB_ZSTD) < 0 ||
	    PyModule_AddIntConstant(m, "CODEC_LZ4HC", ZS_BLOB_LZ4HC) < 0 ||
	    PyModule_AddIntConstant(m, "MAX_KEY", ZS_CACHE_MAX_KEY) < 0 ||
	    PyModule_AddIntConstant(m, "MAX_DICT", (long)ZS_COMP_MAX_DICT) < 0 ||
#ifdef Py_LIMITED_API
	    PyModule_AddIntConstant(m, "LIMITED_API", Py_LIMITED_API) < 0 ||
#else
	    PyModule_AddIntConstant(m, "LIMITED_API", 0) < 0 ||
#endif
	    PyModule_AddIntConstant(m, "NOGIL_MIN", ZSX_NOGIL_MIN) < 0)
		return -1;
	return 0;
}

static PyModuleDef_Slot module_slots[] = {
	{Py_mod_exec, module_exec},
	{0, NULL},
};

static struct PyModuleDef module_def = {
	PyModuleDef_HEAD_INIT, "libzs._ext", "libzs's compiled per-object calls", 0,
	module_methods, module_slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__ext(void)
{
	return PyModuleDef_Init(&module_def);
}
