/*
 * libzs._ext: the compiled half of the Python package.  It owns every call
 * made once per object (a Pool's store/read/read_into/write/free with the
 * Pool's table of object lengths, a Compressor's
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
#include <sys/mman.h>

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

/* ------------------------------------------------------------------ Pool objects */

/*
 * libzs.Pool's per-object state, what the C pool does not keep and Python
 * needs: each live object's length (read() returns exactly what was stored)
 * and its handle's generation (a freed or stale handle is refused by name,
 * and handles() lists every object C holds).  It lived in Python as a size
 * table plus a journal of C calls, so that an exception raised by a signal
 * handler between the C call and the table update could not lose the record;
 * here the C call and the update are one C function, which no signal handler
 * interrupts (CPython runs them between bytecodes), so the journal is gone and
 * a store costs one C call.  Every method runs with the GIL held, which is
 * what orders them between threads; a store of ZSX_NOGIL_MIN bytes or more
 * releases it around zs_malloc_write only, and records the new handle after
 * taking it back (no other thread can name that handle before then: the
 * table does not hold it yet, so it is refused).  close() waits for such
 * calls in flight (the gate) before the Pool destroys the C pool.
 *
 * The table: one 64 KiB array per 64 KiB chunk of C handle slots, indexed like
 * the chunk's 8-byte slots, so 8 bytes per object.  A live slot's entry is its
 * handle's generation bits with the object's length in the address bits, a
 * free one 0, and entry 0 (slot 0 of a chunk is never a handle) counts the
 * chunk's live objects; an array goes with its chunk's last object.  Arrays
 * are anonymous mappings, so a dropped one goes back to the OS at once (a
 * 64 KiB heap block would stay resident in the middle of the heap).  The
 * chunk number -> array map is open addressing with linear probing.
 */
#define H_ADDR 0x0000FFFFFFFFFFF8ull /* the handle's layout: __init__.py _H_ADDR, _H_GEN */
#define H_GEN 0x0FFF000000000006ull
#define H_CHUNK_SHIFT 16
#define H_CHUNK_BYTES ((size_t)1 << H_CHUNK_SHIFT)

struct chunk_slot {
	uint64_t key1; /* chunk number + 1; 0: an empty slot */
	uint64_t *ents;
};

typedef struct {
	PyObject_HEAD
	struct zs_pool *p;
	size_t max_size;
	struct chunk_slot *map;
	size_t cap; /* a power of two, or 0 */
	size_t chunks;
	uint64_t mult;      /* the hash's multiplier (0, a test's: every chunk probes from 0) */
	Py_ssize_t n;       /* live objects */
	uint64_t nbytes;    /* their lengths, summed */
	struct gate g;
} ObjectsObject;

static size_t chunk_home(const ObjectsObject *t, uint64_t key)
{
	return (size_t)((key * t->mult) >> 32) & (t->cap - 1);
}

static uint64_t *chunk_find(const ObjectsObject *t, uint64_t key)
{
	if (!t->cap)
		return NULL;
	for (size_t i = chunk_home(t, key);; i = (i + 1) & (t->cap - 1)) {
		if (t->map[i].key1 == key + 1)
			return t->map[i].ents;
		if (!t->map[i].key1)
			return NULL;
	}
}

static void chunk_put(ObjectsObject *t, uint64_t key, uint64_t *ents)
{
	size_t i = chunk_home(t, key);
	while (t->map[i].key1)
		i = (i + 1) & (t->cap - 1);
	t->map[i].key1 = key + 1;
	t->map[i].ents = ents;
}

/* The chunk's array, made (zeroed) if it has none; NULL with MemoryError set. */
static uint64_t *chunk_make(ObjectsObject *t, uint64_t key)
{
	uint64_t *e = chunk_find(t, key);
	if (e)
		return e;
	if ((t->chunks + 1) * 2 > t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		struct chunk_slot *old = t->map, *m = calloc(cap, sizeof(*m));
		if (!m) {
			PyErr_NoMemory();
			return NULL;
		}
		size_t ocap = t->cap;
		t->map = m;
		t->cap = cap;
		for (size_t i = 0; i < ocap; i++)
			if (old[i].key1)
				chunk_put(t, old[i].key1 - 1, old[i].ents);
		free(old);
	}
	e = mmap(NULL, H_CHUNK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (e == MAP_FAILED) {
		PyErr_NoMemory();
		return NULL;
	}
	chunk_put(t, key, e);
	t->chunks++;
	return e;
}

/* Drop a chunk's array: remove it, then move back the entries its slot had pushed on. */
static void chunk_drop(ObjectsObject *t, uint64_t key)
{
	size_t i = chunk_home(t, key);
	while (t->map[i].key1 != key + 1)
		i = (i + 1) & (t->cap - 1);
	munmap(t->map[i].ents, H_CHUNK_BYTES);
	t->map[i].key1 = 0;
	t->chunks--;
	for (size_t j = (i + 1) & (t->cap - 1); t->map[j].key1; j = (j + 1) & (t->cap - 1)) {
		struct chunk_slot s = t->map[j];
		t->map[j].key1 = 0;
		chunk_put(t, s.key1 - 1, s.ents);
	}
}

static void objects_drop_all(ObjectsObject *t)
{
	for (size_t i = 0; i < t->cap; i++)
		if (t->map[i].key1)
			munmap(t->map[i].ents, H_CHUNK_BYTES);
	free(t->map);
	t->map = NULL;
	t->cap = t->chunks = 0;
	t->n = 0;
	t->nbytes = 0;
}

static uint64_t entry_of(const ObjectsObject *t, uint64_t h)
{
	const uint64_t *e = chunk_find(t, (h & H_ADDR) >> H_CHUNK_SHIFT);
	return e ? e[(h & (H_CHUNK_BYTES - 1)) >> 3] : 0;
}

/* Record a new object; -1 with MemoryError set when no array could be made. */
static int record_add(ObjectsObject *t, uint64_t h, size_t len)
{
	uint64_t *e = chunk_make(t, (h & H_ADDR) >> H_CHUNK_SHIFT);
	if (!e)
		return -1;
	e[(h & (H_CHUNK_BYTES - 1)) >> 3] = (h & ~H_ADDR) | ((uint64_t)len << 3);
	e[0]++;
	t->n++;
	t->nbytes += len;
	return 0;
}

static void record_free(ObjectsObject *t, uint64_t h, size_t len)
{
	uint64_t key = (h & H_ADDR) >> H_CHUNK_SHIFT;
	uint64_t *e = chunk_find(t, key);
	e[(h & (H_CHUNK_BYTES - 1)) >> 3] = 0;
	t->n--;
	t->nbytes -= len;
	if (!--e[0])
		chunk_drop(t, key);
}

/* ZsArgumentError(EINVAL, "handle <hex> <rest>"), the handle as Python's {h:#x} writes it. */
static PyObject *handle_error(PyObject *hobj, const char *rest)
{
	PyObject *hex = PyNumber_ToBase(hobj, 16);
	if (!hex)
		return NULL;
	PyObject *msg = PyUnicode_FromFormat("handle %U %s", hex, rest);
	Py_DECREF(hex);
	if (!msg)
		return NULL;
	PyObject *cls = zs_arg_error ? zs_arg_error : PyExc_ValueError;
	PyObject *e = PyObject_CallFunction(cls, "iO", EINVAL, msg);
	Py_DECREF(msg);
	if (e) {
		PyErr_SetObject(cls, e);
		Py_DECREF(e);
	}
	return NULL;
}

static const char stale_msg[] = "is stale: it was freed and its slot now holds another "
				"object (generation differs)";

static int objects_open(ObjectsObject *t)
{
	if (t->g.closed || !t->p) {
		raise_err(EINVAL, "pool is closed");
		return -1;
	}
	return 0;
}

/*
 * A handle of a live object of this pool: its value and length, or -1 with
 * the reason raised (TypeError, not a handle, not live, stale, pool closed).
 */
static int handle_arg(ObjectsObject *t, PyObject *o, uint64_t *h, size_t *len)
{
	if (!PyLong_Check(o) || PyBool_Check(o)) {
		type_error("handle must be an int", o);
		return -1;
	}
	if (objects_open(t) < 0)
		return -1;
	uint64_t hv = PyLong_AsUnsignedLongLong(o);
	if (hv == (uint64_t)-1 && PyErr_Occurred()) {
		PyErr_Clear();
		hv = 0; /* negative or past 64 bits */
	}
	if (!hv || (hv & ~(H_ADDR | H_GEN))) {
		handle_error(o, "is not a handle");
		return -1;
	}
	uint64_t e = entry_of(t, hv);
	if (!e) {
		handle_error(o, "is not live in this pool (freed, or never one of its handles)");
		return -1;
	}
	if ((e ^ hv) & ~H_ADDR) {
		handle_error(o, stale_msg);
		return -1;
	}
	*h = hv;
	*len = (size_t)((e & H_ADDR) >> 3);
	return 0;
}

/* C's checked mode refused a handle the table holds live (it should not happen). */
static PyObject *refused(PyObject *hobj, const char *what)
{
	char rest[160];
	snprintf(rest, sizeof(rest), "refused by checked mode in %s (not a live handle of this "
		 "pool)", what);
	return handle_error(hobj, rest);
}

/* A keyword-or-positional argument of a METH_FASTCALL|METH_KEYWORDS method. */
static int fast_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
		     const char *fn, const char *const *names, int required, int most,
		     PyObject **out)
{
	for (int i = 0; i < most; i++)
		out[i] = NULL;
	if (nargs > most)
		return PyErr_Format(PyExc_TypeError, "%s takes at most %d arguments (%zd given)",
				    fn, most, nargs), -1;
	for (Py_ssize_t i = 0; i < nargs; i++)
		out[i] = args[i];
	Py_ssize_t nk = kwnames ? PyTuple_Size(kwnames) : 0;
	for (Py_ssize_t k = 0; k < nk; k++) {
		PyObject *name = PyTuple_GetItem(kwnames, k);
		int i = 0;
		while (i < most && PyUnicode_CompareWithASCIIString(name, names[i]) != 0)
			i++;
		if (i == most || out[i])
			return PyErr_Format(PyExc_TypeError, "%s got an unexpected or repeated "
					    "keyword argument %R", fn, name), -1;
		out[i] = args[nargs + k];
	}
	for (int i = 0; i < required; i++)
		if (!out[i])
			return PyErr_Format(PyExc_TypeError, "%s missing argument '%s'", fn,
					    names[i]), -1;
	return 0;
}

/* The requested length: None (or left out) -> len; an int in 0..len; else -1, raised. */
static Py_ssize_t length_arg(PyObject *o, size_t len)
{
	if (!o || o == Py_None)
		return (Py_ssize_t)len;
	Py_ssize_t n = -1;
	if (PyLong_Check(o) && !PyBool_Check(o)) {
		n = PyLong_AsSsize_t(o);
		if (n == -1 && PyErr_Occurred())
			PyErr_Clear();
	}
	if (n >= 0 && (size_t)n <= len)
		return n;
	PyErr_Format(PyExc_ValueError, "length must be in 0..%zu, not %R", len, o);
	return -1;
}

/* ZsError for the error value C returned in place of a handle. */
static PyObject *handle_failed(unsigned long h, const char *what, size_t len)
{
	return raise_err(ZS_ERR(h), "%s(%zu)", what, len);
}

static PyObject *objects_store(PyObject *o, PyObject *data)
{
	ObjectsObject *t = (ObjectsObject *)o;
	Py_buffer v;
	/* the buffer first: an exporter written in Python could close the pool */
	if (get_ro(data, &v, "data") < 0)
		return NULL;
	if (objects_open(t) < 0) {
		PyBuffer_Release(&v);
		return NULL;
	}
	size_t len = (size_t)v.len;
	if (!len || len > t->max_size) {
		raise_arg(len ? ENOSPC : EINVAL, "zs_malloc size %zu is outside 1..%zu "
			  "(max_object_size)", len, t->max_size);
		PyBuffer_Release(&v);
		return NULL;
	}
	unsigned long h;
	if (len >= ZSX_NOGIL_MIN) {
		/* copying a page or more: let other threads run; close() waits for this call */
		t->g.busy++;
		Py_BEGIN_ALLOW_THREADS
		h = zs_malloc_write(t->p, v.buf, len);
		Py_END_ALLOW_THREADS
		t->g.busy--;
	} else {
		h = zs_malloc_write(t->p, v.buf, len);
	}
	PyBuffer_Release(&v);
	if (ZS_IS_ERR(h))
		return handle_failed(h, "zs_malloc_write", len);
	if (record_add(t, h, len) < 0) {
		zs_free(t->p, h); /* not recorded: not kept */
		return NULL;
	}
	return PyLong_FromUnsignedLong(h);
}

static PyObject *objects_malloc(PyObject *o, PyObject *arg)
{
	ObjectsObject *t = (ObjectsObject *)o;
	if (!PyLong_Check(arg) || PyBool_Check(arg))
		return type_error("zs_malloc size must be an int", arg);
	if (objects_open(t) < 0)
		return NULL;
	int over;
	long long v = PyLong_AsLongLongAndOverflow(arg, &over);
	if (v == -1 && PyErr_Occurred())
		return NULL;
	if (over || v < 1 || (unsigned long long)v > t->max_size) {
		int big = over > 0 || (!over && v > 0);
		if (over)
			return raise_arg(big ? ENOSPC : EINVAL, "zs_malloc size %s64 bits is "
					 "outside 1..%zu", big ? "past " : "below -", t->max_size);
		return raise_arg(big ? ENOSPC : EINVAL, "zs_malloc size %lld is outside 1..%zu",
				 v, t->max_size);
	}
	unsigned long h = zs_malloc(t->p, (size_t)v);
	if (ZS_IS_ERR(h))
		return handle_failed(h, "zs_malloc", (size_t)v);
	if (record_add(t, h, (size_t)v) < 0) {
		zs_free(t->p, h);
		return NULL;
	}
	return PyLong_FromUnsignedLong(h);
}

static PyObject *objects_free(PyObject *o, PyObject *const *args, Py_ssize_t nargs,
			      PyObject *kwnames)
{
	ObjectsObject *t = (ObjectsObject *)o;
	static const char *const names[] = {"handle", "deferred"};
	PyObject *a[2];
	if (fast_args(args, nargs, kwnames, "free", names, 1, 2, a) < 0)
		return NULL;
	int deferred = a[1] ? PyObject_IsTrue(a[1]) : 0;
	if (deferred < 0)
		return NULL;
	uint64_t h;
	size_t len;
	if (handle_arg(t, a[0], &h, &len) < 0)
		return NULL;
	int rc = deferred ? zs_free_deferred(t->p, h) : zs_free(t->p, h);
	if (rc < 0)
		return refused(a[0], deferred ? "zs_free_deferred" : "zs_free");
	record_free(t, h, len);
	Py_RETURN_NONE;
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

static PyObject *objects_read(PyObject *o, PyObject *const *args, Py_ssize_t nargs,
			      PyObject *kwnames)
{
	ObjectsObject *t = (ObjectsObject *)o;
	static const char *const names[] = {"handle", "length"};
	PyObject *a[2];
	uint64_t h;
	size_t size;
	if (fast_args(args, nargs, kwnames, "read", names, 1, 2, a) < 0 ||
	    handle_arg(t, a[0], &h, &size) < 0)
		return NULL;
	Py_ssize_t len = length_arg(a[1], size);
	if (len < 0)
		return NULL;
	PyObject *b = PyBytes_FromStringAndSize(NULL, len);
	if (!b || !len)
		return b;
	if (read_object(t->p, h, (size_t)len, PyBytes_AsString(b))) {
		Py_DECREF(b);
		return refused(a[0], "zs_obj_read_begin");
	}
	return b;
}

static PyObject *objects_read_into(PyObject *o, PyObject *const *args, Py_ssize_t nargs,
				   PyObject *kwnames)
{
	ObjectsObject *t = (ObjectsObject *)o;
	static const char *const names[] = {"handle", "buffer", "length"};
	PyObject *a[3];
	uint64_t h;
	size_t size;
	if (fast_args(args, nargs, kwnames, "read_into", names, 2, 3, a) < 0 ||
	    handle_arg(t, a[0], &h, &size) < 0)
		return NULL;
	Py_ssize_t len = length_arg(a[2], size);
	if (len < 0)
		return NULL;
	if (PyUnicode_Check(a[1]))
		return type_error("buffer must be a writable bytes-like object", a[1]);
	Py_buffer v;
	if (PyObject_GetBuffer(a[1], &v, PyBUF_WRITABLE) < 0)
		return NULL;
	PyObject *r = NULL;
	/* again: an exporter written in Python could have freed the handle or closed the pool */
	if (handle_arg(t, a[0], &h, &size) < 0) {
		/* raised */
	} else if (v.len < len)
		PyErr_Format(PyExc_ValueError, "buffer of %zd bytes is shorter than %zd", v.len,
			     len);
	else if (len && read_object(t->p, h, (size_t)len, v.buf))
		refused(a[0], "zs_obj_read_begin");
	else
		r = PyLong_FromSsize_t(len);
	PyBuffer_Release(&v);
	return r;
}

static PyObject *objects_write(PyObject *o, PyObject *const *args, Py_ssize_t nargs,
			       PyObject *kwnames)
{
	ObjectsObject *t = (ObjectsObject *)o;
	static const char *const names[] = {"handle", "data", "offset"};
	PyObject *a[3];
	uint64_t h;
	size_t size;
	if (fast_args(args, nargs, kwnames, "write", names, 2, 3, a) < 0 ||
	    handle_arg(t, a[0], &h, &size) < 0)
		return NULL;
	if (a[2]) {
		int zero = PyLong_Check(a[2]) && PyLong_AsLong(a[2]) == 0 && !PyErr_Occurred();
		PyErr_Clear();
		if (!zero)
			return PyErr_Format(PyExc_ValueError, "only offset 0 is supported "
					    "(zs_obj_write writes from the start)");
	}
	Py_buffer v;
	if (get_ro(a[1], &v, "data") < 0)
		return NULL;
	PyObject *r = NULL;
	/* again: an exporter written in Python could have freed the handle or closed the pool */
	if (handle_arg(t, a[0], &h, &size) < 0) {
		/* raised */
	} else if ((size_t)v.len > size)
		PyErr_Format(PyExc_ValueError, "%zd bytes do not fit in a %zu-byte object", v.len,
			     size);
	else if (zs_obj_write(t->p, h, v.buf, (size_t)v.len) < 0)
		refused(a[0], "zs_obj_write");
	else
		r = Py_NewRef(Py_None);
	PyBuffer_Release(&v);
	return r;
}

/* entry(handle) -> the table's entry: generation bits | length << 3, 0 when not live. */
static PyObject *objects_entry(PyObject *o, PyObject *arg)
{
	ObjectsObject *t = (ObjectsObject *)o;
	uint64_t hv = PyLong_AsUnsignedLongLong(arg);
	if (hv == (uint64_t)-1 && PyErr_Occurred()) {
		if (!PyErr_ExceptionMatches(PyExc_OverflowError))
			return NULL;
		PyErr_Clear();
		hv = 0;
	}
	return PyLong_FromUnsignedLongLong(hv ? entry_of(t, hv) : 0);
}

static PyObject *objects_handles(PyObject *o, PyObject *unused)
{
	(void)unused;
	ObjectsObject *t = (ObjectsObject *)o;
	PyObject *l = PyList_New(0);
	for (size_t c = 0; l && c < t->cap; c++) {
		if (!t->map[c].key1)
			continue;
		uint64_t base = (t->map[c].key1 - 1) << H_CHUNK_SHIFT;
		const uint64_t *e = t->map[c].ents;
		for (size_t i = 1; i < H_CHUNK_BYTES / 8; i++) {
			if (!e[i])
				continue;
			PyObject *h = PyLong_FromUnsignedLongLong(base | (i << 3) | (e[i] & ~H_ADDR));
			if (!h || PyList_Append(l, h) < 0)
				Py_CLEAR(l);
			Py_XDECREF(h);
			if (!l)
				break;
		}
	}
	return l;
}

/* close(): refuse new calls, wait for the stores in flight, drop the table. */
static PyObject *objects_close(PyObject *o, PyObject *unused)
{
	(void)unused;
	ObjectsObject *t = (ObjectsObject *)o;
	gate_close_wait(&t->g);
	objects_drop_all(t);
	t->p = NULL;
	Py_RETURN_NONE;
}

static int objects_init(PyObject *o, PyObject *args, PyObject *kw)
{
	ObjectsObject *t = (ObjectsObject *)o;
	static char *kws[] = {"pool", "max_size", "_hash_mult", NULL};
	PyObject *pool;
	Py_ssize_t max;
	unsigned long long mult = 0x9E3779B97F4A7C15ull; /* 2^64 / golden ratio */
	if (!PyArg_ParseTupleAndKeywords(args, kw, "On|K", kws, &pool, &max, &mult))
		return -1;
	if (t->p || t->g.closed) {
		PyErr_SetString(PyExc_RuntimeError, "already initialised");
		return -1;
	}
	void *p = PyLong_AsVoidPtr(pool);
	if (!p) {
		if (!PyErr_Occurred())
			raise_err(EINVAL, "pool is NULL");
		return -1;
	}
	if (max < 1) {
		raise_err(EINVAL, "max_size %zd must be >= 1", max);
		return -1;
	}
	t->p = p;
	t->max_size = (size_t)max;
	t->mult = mult;
	return 0;
}

static void objects_dealloc(PyObject *o)
{
	PyTypeObject *tp = Py_TYPE(o);
	objects_drop_all((ObjectsObject *)o);
	freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
	f(o);
	Py_DECREF(tp);
}

static PyObject *objects_n(PyObject *o, void *unused)
{
	(void)unused;
	return PyLong_FromSsize_t(((ObjectsObject *)o)->n);
}

static PyObject *objects_nbytes(PyObject *o, void *unused)
{
	(void)unused;
	return PyLong_FromUnsignedLongLong(((ObjectsObject *)o)->nbytes);
}

static PyObject *objects_closed(PyObject *o, void *unused)
{
	(void)unused;
	return PyBool_FromLong(((ObjectsObject *)o)->g.closed);
}

#define FASTKW(f) ((PyCFunction)(void (*)(void))(f))

static PyMethodDef objects_methods[] = {
	{"store", objects_store, METH_O, "store(data) -> handle (zs_malloc_write)"},
	{"malloc", objects_malloc, METH_O, "malloc(size) -> handle"},
	{"free", FASTKW(objects_free), METH_FASTCALL | METH_KEYWORDS,
	 "free(handle, deferred=False)"},
	{"read", FASTKW(objects_read), METH_FASTCALL | METH_KEYWORDS,
	 "read(handle, length=None) -> bytes"},
	{"read_into", FASTKW(objects_read_into), METH_FASTCALL | METH_KEYWORDS,
	 "read_into(handle, buffer, length=None) -> bytes copied"},
	{"write", FASTKW(objects_write), METH_FASTCALL | METH_KEYWORDS,
	 "write(handle, data, offset=0)"},
	{"entry", objects_entry, METH_O, "entry(handle) -> generation | length << 3, or 0"},
	{"handles", objects_handles, METH_NOARGS, "the live handles (a new list)"},
	{"close", objects_close, METH_NOARGS, "refuse new calls, wait for those in flight"},
	{NULL, NULL, 0, NULL},
};

static PyGetSetDef objects_getset[] = {
	{"n", objects_n, NULL, "live objects", NULL},
	{"nbytes", objects_nbytes, NULL, "their lengths, summed", NULL},
	{"closed", objects_closed, NULL, "close() was called", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot objects_slots[] = {
	{Py_tp_init, objects_init},
	{Py_tp_dealloc, objects_dealloc},
	{Py_tp_methods, objects_methods},
	{Py_tp_getset, objects_getset},
	{Py_tp_new, PyType_GenericNew},
	{0, NULL},
};

static PyType_Spec objects_spec = {
	"libzs._ext.Objects", sizeof(ObjectsObject), 0, Py_TPFLAGS_DEFAULT, objects_slots,
};

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
 * second walk from key to object) to decompress into the result, which
 * measured slower single-threaded, with or without the GIL (get/s against
 * lz4.block.decompress(d[k]): 0.694 released, 0.736 kept, 0.824 this way;
 * python/README.md), and threads reading at once are the case this gives up.
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
	t = PyType_FromSpec(&objects_spec);
	if (!t || PyModule_AddObject(m, "Objects", t) < 0) {
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
	    PyModule_AddIntConstant(m, "CODEC_ZSTD_HUF", ZS_BLOB_ZSTD_HUF) < 0 ||
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
