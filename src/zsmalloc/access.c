/*
 * Object access: resolving a handle and pinning its zspage against
 * compaction, then the reads and writes over an object's one or two
 * segments (zs_obj_read_begin/_end, the scatter-gather reads, zs_obj_write)
 * and the kernel's legacy zs_map_object/zs_unmap_object.  Apart from
 * zsmalloc.c (pools and allocation) because it is the other hot path, with
 * its own locking rule: the pool lock only for the lookup, the zspage lock
 * (read) across the access (see "Lock order" in zsmalloc.c).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "zsmalloc/internal.h"

/* ---- object access ---- */

/*
 * Resolve a handle and read-lock its zspage so it cannot move; the pool lock
 * is held only for the lookup.  Returns the zspage or NULL (checked mode).
 * With prefetch, start fetching the object's first (len) bytes' lines as soon as obj
 * is known (its class is encoded in it), so that miss overlaps the page
 * descriptor's and the zspage's instead of following them; only a hint, the
 * pin is what makes the address valid.  Inlined only where a constant
 * prefetch asks for it (read_begin_as); pin_object_as is the
 * out-of-line form every other caller shares.
 */
static inline __attribute__((always_inline)) struct zspage *
pin_object_at(struct zs_pool *pool, unsigned long handle, unsigned long *objp, int checked,
	      int prefetch, size_t len)
{
	unsigned long obj;
	if (checked && handle_precheck(pool, handle, &obj))
		return NULL;
	read_lock(&pool->lock);
	obj = handle_to_obj(handle);
	if (checked && validate_obj(pool, handle, obj)) {
		read_unlock(&pool->lock);
		return NULL;
	}
	if (prefetch) {
		unsigned enc = obj_to_class_idx(obj);
		if (likely(class_enc_valid(pool, enc))) {
			char *a = page_addr(pool, obj_to_pfn(obj)) +
				  obj_page_offset(pool, pool->classes[enc].size, obj_to_idx(obj));
			__builtin_prefetch(a);
			if (len > 64 - ((uintptr_t)a & 63))
				__builtin_prefetch(a + 64);
		}
	}
	struct zspage *zspage = obj_to_zspage(pool, obj);
	/* The one way in to a zspage read lock ("Lock order": why it needs no rank). */
	assert_internal(rw_held_by_me(&pool->lock));
	zspage_read_lock(&zspage->lock);
	read_unlock(&pool->lock);
	*objp = obj;
	return zspage;
}

static __attribute__((noinline)) struct zspage *pin_object_as(struct zs_pool *pool,
							      unsigned long handle,
							      unsigned long *objp, int checked)
{
	return pin_object_at(pool, handle, objp, checked, 0, 0);
}

/* A caller's handle: checked mode refuses what the pool did not hand out. */
static inline struct zspage *pin_object(struct zs_pool *pool, unsigned long handle,
					unsigned long *objp)
{
	return pin_object_as(pool, handle, objp, pool->cfg.checked);
}

/*
 * Checked mode, for the end/unmap calls: the zspage a begin/map of `handle`
 * read-locked, or NULL when `handle` is garbage, foreign or freed, or its
 * zspage holds no read lock (an end without a successful begin).  Without
 * this an end after a failed begin drops the lock of whatever zspage the
 * stale slot happens to name, and a later reader or compaction spins forever.
 * A queued (deferred) handle is still live, so it may be unpinned.
 */
static struct zspage *pinned_zspage_checked(struct zs_pool *pool, unsigned long handle,
					    unsigned long *objp)
{
	if (!handle_in_pool(pool, handle))
		return NULL;
	unsigned long v = atomic_load_explicit(handle_slot(handle), memory_order_relaxed);
	if (v & HANDLE_FREE_BIT)
		return NULL;
	struct zspage *zspage = NULL;
	read_lock(&pool->lock);
	unsigned long obj = handle_to_obj(handle);
	if (class_enc_valid(pool, obj_to_class_idx(obj)) && !validate_obj(pool, handle, obj)) {
		zspage = obj_to_zspage(pool, obj);
		if (atomic_load_explicit(&zspage->lock, memory_order_relaxed) <= 0)
			zspage = NULL;
	}
	read_unlock(&pool->lock);
	*objp = obj;
	return zspage;
}

/* Drop one reader unless there is none (checked mode: never wrap into the writer state). */
static void zspage_read_unlock_checked(atomic_int *cnt)
{
	int c = atomic_load_explicit(cnt, memory_order_relaxed);
	while (c > 0 && !atomic_compare_exchange_weak_explicit(cnt, &c, c - 1, memory_order_release,
							       memory_order_relaxed))
		;
}

/*
 * Where an object's payload lies: seg[0] from (pfn, off) along its zspage's
 * chain, and for a multi-page object with a packed tail seg[1], the tail.
 */
struct obj_segs {
	struct {
		pfn_t pfn;
		unsigned off;
		size_t cap;
	} seg[2];
	struct zspage *tail_zspage; /* read-locked with the head, or NULL */
	size_t cap;                 /* payload capacity: the segments' together */
};

/* Payload of obj (in zspage, which the caller pinned) as one segment. */
static inline void obj_segment(const struct zs_pool *pool, const struct zspage *zspage,
			       unsigned long obj, struct obj_segs *v, int i)
{
	unsigned cap;
	v->seg[i].pfn = obj_to_pfn(obj);
	v->seg[i].off = payload_offset(pool, zspage_class(pool, zspage), obj, &cap);
	v->seg[i].cap = cap;
}

/*
 * Describe a pinned object with a packed tail, read-locking the tail's
 * zspage too so compaction cannot move the tail under the reader; 0, or
 * -EINVAL with the head unlocked (cannot happen: the head holds its tail).
 */
static int pin_tail(struct zs_pool *pool, struct zspage *zspage, unsigned long obj,
		    struct obj_segs *v)
{
	unsigned long tobj;
	obj_segment(pool, zspage, obj, v, 0);
	/* The tail's handle is internal (HANDLE_INTERNAL_BIT), which checked mode
	 * refuses from a caller; the head, already checked, vouches for it. */
	struct zspage *tz = pin_object_as(pool, zspage->tail, &tobj, 0);
	if (!tz) {
		zspage_read_unlock(&zspage->lock);
		return -EINVAL;
	}
	obj_segment(pool, tz, tobj, v, 1);
	v->cap = v->seg[0].cap + v->seg[1].cap;
	v->tail_zspage = tz;
	return 0;
}

static void unpin_segments(struct zspage *zspage, const struct obj_segs *v)
{
	if (v->tail_zspage)
		zspage_read_unlock(&v->tail_zspage->lock);
	zspage_read_unlock(&zspage->lock);
}

/*
 * Unpin a packed tail whose head is still pinned: its zspage cannot move
 * while read-locked, so obj is stable without the pool lock.
 */
static void unpin_tail(struct zs_pool *pool, unsigned long tail)
{
	struct zspage *tz = obj_to_zspage(pool, handle_to_obj(tail));
	if (unlikely(pool->cfg.checked))
		zspage_read_unlock_checked(&tz->lock);
	else
		zspage_read_unlock(&tz->lock);
}

static inline void unpin_object_as(struct zs_pool *pool, unsigned long handle, int checked)
{
	if (unlikely(checked)) {
		unsigned long obj;
		struct zspage *zspage = pinned_zspage_checked(pool, handle, &obj);
		if (zspage) {
			unsigned long tail = zspage_tail(zspage);
			if (tail)
				unpin_tail(pool, tail);
			zspage_read_unlock_checked(&zspage->lock);
		}
		return;
	}
	/* No pool lock: a read-locked zspage cannot be migrated, so obj is stable. */
	struct zspage *zspage = obj_to_zspage(pool, handle_to_obj(handle));
	if (unlikely(zspage_tail(zspage)))
		unpin_tail(pool, zspage->tail);
	zspage_read_unlock(&zspage->lock);
}

static inline void unpin_object(struct zs_pool *pool, unsigned long handle)
{
	unpin_object_as(pool, handle, pool->cfg.checked);
}

/* Copy len (<= v->cap) payload bytes out of / into the object's segments. */
static void segs_read(const struct zs_pool *pool, const struct obj_segs *v, void *buf, size_t len)
{
	size_t first = len < v->seg[0].cap ? len : v->seg[0].cap;
	span_read(pool, v->seg[0].pfn, v->seg[0].off, buf, first);
	if (first < len)
		span_read(pool, v->seg[1].pfn, v->seg[1].off, (char *)buf + first, len - first);
}

static void segs_write(const struct zs_pool *pool, const struct obj_segs *v, const void *buf,
		       size_t len)
{
	size_t first = len < v->seg[0].cap ? len : v->seg[0].cap;
	span_write(pool, v->seg[0].pfn, v->seg[0].off, buf, first);
	if (first < len)
		span_write(pool, v->seg[1].pfn, v->seg[1].off, (const char *)buf + first,
			   len - first);
}

/* zs_obj_read_begin of an object with a packed tail (the head is pinned). */
static __attribute__((noinline)) void *read_begin_packed(struct zs_pool *pool,
							 struct zspage *zspage, unsigned long obj,
							 size_t mem_len, void *local_copy)
{
	struct obj_segs v;
	if (pin_tail(pool, zspage, obj, &v)) {
		errno = EINVAL;
		return NULL;
	}
	int direct = v.seg[0].off + mem_len <= pool->page_size;
	if (mem_len > v.cap || (!local_copy && !direct)) {
		unpin_segments(zspage, &v);
		errno = EINVAL;
		return NULL;
	}
	if (direct)
		return page_addr(pool, v.seg[0].pfn) + v.seg[0].off;
	segs_read(pool, &v, local_copy, mem_len);
	return local_copy;
}

/*
 * zs_obj_read_begin with the handle checked as `checked` says; `own` for a
 * handle the library holds itself (obj_read_begin_own), which also
 * prefetches the object.  The public call keeps its path free of the
 * prefetch's instructions (an unchecked pool's reads are counted in
 * docs/benchmarks.md).
 */
static inline __attribute__((always_inline)) void *
read_begin_as(struct zs_pool *pool, unsigned long handle, size_t mem_len, void *local_copy,
	      int checked, int own)
{
	unsigned long obj;
	struct zspage *zspage = own ? pin_object_at(pool, handle, &obj, 0, 1, mem_len)
				    : pin_object_as(pool, handle, &obj, checked);
	if (unlikely(!zspage)) {
		errno = EINVAL;
		return NULL;
	}
	if (unlikely(zspage_tail(zspage)))
		return read_begin_packed(pool, zspage, obj, mem_len, local_copy);
	struct size_class *class = zspage_class(pool, zspage);
	unsigned cap, off = payload_offset(pool, class, obj, &cap);
	/* The library's own reads always bring a buffer (obj_read_begin_own). */
	int copy_ok = own || local_copy;
	if (unlikely(mem_len > cap || (!copy_ok && off + mem_len > pool->page_size))) {
		zspage_read_unlock(&zspage->lock);
		errno = EINVAL;
		return NULL;
	}
	pfn_t pfn = obj_to_pfn(obj);
	char *addr = page_addr(pool, pfn);
	if (likely(off + mem_len <= pool->page_size))
		return addr + off;
	/* The object spans pages: stitch it together in the caller's buffer. */
	span_read(pool, pfn, off, local_copy, mem_len);
	return local_copy;
}

void *zs_obj_read_begin(struct zs_pool *pool, unsigned long handle, size_t mem_len,
			void *local_copy)
{
	return read_begin_as(pool, handle, mem_len, local_copy, pool->cfg.checked, 0);
}

void zs_obj_read_end(struct zs_pool *pool, unsigned long handle, size_t mem_len, void *mem)
{
	(void)mem_len;
	(void)mem;
	unpin_object(pool, handle);
}

/*
 * A handle the library holds, not a caller (the blob cache's index names it
 * under its shard lock, and an entry leaves the index before its object is
 * freed): live by construction, so checked mode's validation at begin and
 * end (the handle chunk lookup, the page, the zspage, the object's header)
 * buys nothing and was a fifth of a CompressedDict get's instructions.
 */
void *obj_read_begin_own(struct zs_pool *pool, unsigned long handle, size_t mem_len,
			 void *local_copy)
{
	return read_begin_as(pool, handle, mem_len, local_copy, 0, 1);
}

void obj_read_end_own(struct zs_pool *pool, unsigned long handle, size_t mem_len, void *mem)
{
	(void)mem_len;
	(void)mem;
	unpin_object_as(pool, handle, 0);
}

/* The pieces of len bytes from (pfn, off) along a chain, appended at sg[n]; the new n or -1. */
static int span_pieces(const struct zs_pool *pool, pfn_t pfn, unsigned off, size_t len,
		       struct zs_obj_piece *sg, int n, int nr_sg)
{
	size_t P = pool->page_size;
	while (len) {
		if (n >= nr_sg)
			return -1;
		size_t piece = P - off < len ? P - off : len;
		sg[n].addr = page_addr(pool, pfn) + off;
		sg[n++].len = piece;
		len -= piece;
		off = 0;
		if (len)
			pfn = page_desc(pool, pfn)->next;
	}
	return n;
}

int zs_obj_read_sgv_begin(struct zs_pool *pool, unsigned long handle, size_t mem_len,
			  struct zs_obj_piece *sg, int nr_sg)
{
	if (unlikely(!mem_len || nr_sg < 1))
		return -EINVAL;
	unsigned long obj;
	struct zspage *zspage = pin_object(pool, handle, &obj);
	if (unlikely(!zspage))
		return -EINVAL;
	struct obj_segs v;
	if (unlikely(zspage_tail(zspage))) {
		if (pin_tail(pool, zspage, obj, &v))
			return -EINVAL;
	} else {
		obj_segment(pool, zspage, obj, &v, 0);
		v.cap = v.seg[0].cap;
		v.tail_zspage = NULL;
	}
	if (unlikely(mem_len > v.cap)) {
		unpin_segments(zspage, &v);
		return -EINVAL;
	}
	size_t first = mem_len < v.seg[0].cap ? mem_len : v.seg[0].cap;
	int n = span_pieces(pool, v.seg[0].pfn, v.seg[0].off, first, sg, 0, nr_sg);
	if (n > 0 && first < mem_len)
		n = span_pieces(pool, v.seg[1].pfn, v.seg[1].off, mem_len - first, sg, n, nr_sg);
	if (unlikely(n < 0)) { /* more pieces than the caller has room for */
		unpin_segments(zspage, &v);
		return -EINVAL;
	}
	return n;
}

int zs_obj_read_sg_begin(struct zs_pool *pool, unsigned long handle, size_t mem_len,
			 struct zs_obj_piece sg[2])
{
	return zs_obj_read_sgv_begin(pool, handle, mem_len, sg, 2);
}

void zs_obj_read_sg_end(struct zs_pool *pool, unsigned long handle)
{
	unpin_object(pool, handle);
}

/* zs_obj_write of an object with a packed tail (the head is pinned). */
static __attribute__((noinline)) int write_packed(struct zs_pool *pool, struct zspage *zspage,
						  unsigned long obj, const void *src, size_t len)
{
	struct obj_segs v;
	if (pin_tail(pool, zspage, obj, &v))
		return -EINVAL;
	int rc = len > v.cap ? -EINVAL : 0;
	if (!rc)
		segs_write(pool, &v, src, len);
	unpin_segments(zspage, &v);
	return rc;
}

int zs_obj_write(struct zs_pool *pool, unsigned long handle, const void *src, size_t len)
{
	unsigned long obj;
	struct zspage *zspage = pin_object(pool, handle, &obj);
	if (unlikely(!zspage))
		return -EINVAL;
	if (unlikely(zspage_tail(zspage)))
		return write_packed(pool, zspage, obj, src, len);
	struct size_class *class = zspage_class(pool, zspage);
	unsigned cap, off = payload_offset(pool, class, obj, &cap);
	if (unlikely(len > cap)) {
		zspage_read_unlock(&zspage->lock);
		return -EINVAL;
	}
	span_write(pool, obj_to_pfn(obj), off, src, len);
	zspage_read_unlock(&zspage->lock);
	return 0;
}

/* ---- legacy map/unmap (pre seed 004) ---- */

/* The kernel's per-CPU mapping area, per thread here; one mapping at a time. */
struct mapping_area {
	char *buf;       /* grown to the largest object mapped (a page, or a multi-page object) */
	size_t cap;
	enum zs_mapmode mode;
	int spanning;
	const struct zs_pool *pool; /* the mapping in force (checked mode matches unmap to it) */
	unsigned long handle;       /* 0: nothing mapped */
};
static pthread_key_t map_key;
static pthread_once_t map_key_once = PTHREAD_ONCE_INIT;

static void mapping_area_free(void *p)
{
	struct mapping_area *a = p;
	free(a->buf);
	free(a);
}

static void map_key_create(void)
{
	pthread_key_create(&map_key, mapping_area_free);
}

static struct mapping_area *get_mapping_area(void)
{
	pthread_once(&map_key_once, map_key_create);
	struct mapping_area *a = pthread_getspecific(map_key);
	if (!a) {
		a = malloc(sizeof(*a));
		if (a) {
			a->pool = NULL;
			a->handle = 0;
			a->cap = 65536; /* largest pool page */
			a->buf = malloc(a->cap);
			if (!a->buf) {
				free(a);
				return NULL;
			}
		}
		if (a && pthread_setspecific(map_key, a)) {
			mapping_area_free(a);
			a = NULL;
		}
	}
	return a;
}

void *zs_map_object(struct zs_pool *pool, unsigned long handle, enum zs_mapmode mm)
{
	struct mapping_area *area = get_mapping_area();
	if (!area) {
		errno = ENOMEM;
		return NULL;
	}
	if (pool->cfg.checked && area->handle) {
		errno = EBUSY; /* one mapping per thread at a time */
		return NULL;
	}
	/* Room for the largest object: whole pages, a packed tail's slot included. */
	size_t need = pool->max_object_size;
	if (unlikely(need > area->cap)) {
		need = (need + pool->page_size - 1) & ~(size_t)(pool->page_size - 1);
		char *nb = realloc(area->buf, need);
		if (!nb) {
			errno = ENOMEM;
			return NULL;
		}
		area->buf = nb;
		area->cap = need;
	}
	unsigned long obj;
	struct zspage *zspage = pin_object(pool, handle, &obj);
	if (!zspage) {
		errno = EINVAL;
		return NULL;
	}
	area->mode = mm;
	area->pool = pool;
	area->handle = handle;
	if (unlikely(zspage_tail(zspage))) {
		struct obj_segs v;
		if (pin_tail(pool, zspage, obj, &v)) {
			area->handle = 0;
			errno = EINVAL;
			return NULL;
		}
		area->spanning = 1;
		if (mm != ZS_MM_WO)
			segs_read(pool, &v, area->buf, v.cap);
		return area->buf;
	}
	struct size_class *class = zspage_class(pool, zspage);
	pfn_t pfn = obj_to_pfn(obj);
	unsigned off = obj_page_offset(pool, class->size, obj_to_idx(obj));
	unsigned hdr = class->huge ? 0 : ZS_HANDLE_SIZE;
	char *addr = page_addr(pool, pfn);
	/* The old API decided "spans" from the whole slot (header included), as the kernel did. */
	if (off + class->size <= pool->page_size) {
		area->spanning = 0;
		return addr + off + hdr;
	}
	area->spanning = 1;
	if (mm != ZS_MM_WO)
		span_read(pool, pfn, off + hdr, area->buf, class->size - hdr);
	return area->buf;
}

void zs_unmap_object(struct zs_pool *pool, unsigned long handle)
{
	struct mapping_area *area = get_mapping_area();
	unsigned long obj;
	struct zspage *zspage;
	if (unlikely(pool->cfg.checked)) {
		/* Only the mapping this thread made: a failed or foreign map leaves nothing to undo. */
		if (!area || area->handle != handle || area->pool != pool)
			return;
		zspage = pinned_zspage_checked(pool, handle, &obj);
		area->handle = 0;
		if (!zspage)
			return;
	} else {
		obj = handle_to_obj(handle);
		zspage = obj_to_zspage(pool, obj);
		if (area)
			area->handle = 0;
	}
	unsigned long tail = zspage_tail(zspage);
	if (area && area->spanning && area->mode != ZS_MM_RO) {
		/* Still pinned by the map, so the object is where the map found it. */
		struct obj_segs v;
		memset(&v, 0, sizeof(v)); /* no tail: seg[1] is never read (said for gcc -O3) */
		obj_segment(pool, zspage, obj, &v, 0);
		v.cap = v.seg[0].cap;
		if (tail) {
			unsigned long tobj = handle_to_obj(tail);
			obj_segment(pool, obj_to_zspage(pool, tobj), tobj, &v, 1);
			v.cap += v.seg[1].cap;
		}
		segs_write(pool, &v, area->buf, v.cap);
	}
	if (tail)
		unpin_tail(pool, tail);
	if (pool->cfg.checked)
		zspage_read_unlock_checked(&zspage->lock);
	else
		zspage_read_unlock(&zspage->lock);
}
