/*
 * Backend kind "malloc" (a harness kind, registered by register.c): glibc's allocator holding each object in an
 * exact-size buffer, the baseline an application would use today.
 *
 * Why __libc_malloc and not malloc: the zs tool, tests and benchmarks link
 * jemalloc (Debian's build exports malloc/free), which interposes `malloc`
 * for the whole process, so plain malloc() here would silently be jemalloc.  glibc exports its own allocator as __libc_malloc/__libc_free,
 * which no interposer replaces, so this kind stays ptmalloc in every build.
 * mem_bytes comes from mallinfo2() (arena + mmapped bytes); it is process
 * wide, which is honest only while nothing else uses ptmalloc -- true when
 * an interposer is linked, otherwise `zs compare` measures RSS in a child.
 */
#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "common/hints.h"   /* thread_index */
#include "harness_internal.h"

extern void *__libc_malloc(size_t size);
extern void __libc_free(void *ptr);

/* ---- shared by the malloc kinds ---- */

void *be_ptr_read_begin(struct zs_backend *b, unsigned long h, size_t len, void *local)
{
	(void)b;
	(void)len;
	(void)local;
	return (void *)h;
}

void be_ptr_read_end(struct zs_backend *b, unsigned long h, size_t len, void *mem)
{
	(void)b;
	(void)h;
	(void)len;
	(void)mem;
}

int be_ptr_write(struct zs_backend *b, unsigned long h, const void *src, size_t len)
{
	if (len > b->page_size)
		return -EINVAL;
	memcpy((void *)h, src, len);
	return 0;
}

/* The shard this thread owns in c (claiming a free one), or -1 when all are taken. */
static int count_claim(struct zs_be_count *c, unsigned me)
{
	for (int k = 0; k < ZS_BE_COUNT_SHARDS; k++)
		if (atomic_load_explicit(&c->shard[k].owner, memory_order_relaxed) == me)
			return k;
	for (int k = 0; k < ZS_BE_COUNT_SHARDS; k++) {
		unsigned free_owner = 0;
		if (atomic_compare_exchange_strong_explicit(&c->shard[k].owner, &free_owner, me,
							    memory_order_relaxed,
							    memory_order_relaxed))
			return k;
	}
	return -1;
}

void be_count_add(struct zs_be_count *c, long d)
{
	/* The last count this thread used and its shard there: checked against
	 * the shard's owner, since a new count may reuse a freed one's address. */
	static _Thread_local struct zs_be_count *last;
	static _Thread_local int last_k;
	unsigned me = thread_index() + 1;
	if (unlikely(last != c || (last_k >= 0 && atomic_load_explicit(&c->shard[last_k].owner,
									 memory_order_relaxed) != me))) {
		last = c;
		last_k = count_claim(c, me);
	}
	if (unlikely(last_k < 0)) {
		atomic_fetch_add_explicit(&c->shared, d, memory_order_relaxed);
		return;
	}
	_Atomic long *o = &c->shard[last_k].objects;
	atomic_store_explicit(o, atomic_load_explicit(o, memory_order_relaxed) + d,
			      memory_order_relaxed);
}

unsigned long be_count_objects(struct zs_be_count *c)
{
	long n = atomic_load_explicit(&c->shared, memory_order_relaxed);
	for (int i = 0; i < ZS_BE_COUNT_SHARDS; i++)
		n += atomic_load_explicit(&c->shard[i].objects, memory_order_relaxed);
	return n > 0 ? (unsigned long)n : 0;
}

/* ---- glibc ---- */

/*
 * ptmalloc initialises itself on its first call and hands the calling thread
 * main_arena without counting it as attached: glibc assumes that call is the
 * main thread's, alone, at start-up.  With jemalloc interposed nothing calls
 * __libc_malloc during start-up, so the first calls come from whichever
 * worker threads first store objects; when two make it at once both get
 * main_arena on one count, and the second to exit aborts in glibc
 * ("a->attached_threads > 0": test_mt_zram, 6 runs in 20;
 * test_backend_threads reproduces it in 30 of 40 fresh processes).
 * Initialising ptmalloc on the main thread before any worker exists keeps
 * its bookkeeping right: the harness's registration (register.c) does it,
 * from its constructor, before main().
 */
void zs_be_malloc_init(void)
{
	__libc_free(__libc_malloc(1));
}

static int gl_create(struct zs_backend *b, const struct zs_backend_config *cfg)
{
	(void)cfg;
	b->impl = calloc(1, sizeof(struct zs_be_count));
	return b->impl ? 0 : -ENOMEM;
}

/* Live objects are not tracked unchecked (that would cost memory we are
 * measuring); backend.c frees them in checked mode, otherwise they leak. */
static void gl_destroy(struct zs_backend *b)
{
	free(b->impl);
}

static unsigned long gl_malloc(struct zs_backend *b, size_t size)
{
	if (be_bad_size(b, size))
		return (unsigned long)(size ? -ENOSPC : -EINVAL);
	void *p = __libc_malloc(size);
	if (!p)
		return (unsigned long)-ENOMEM;
	struct zs_be_count *c = b->impl;
	be_count_add(c, 1);
	return (unsigned long)p;
}

static int gl_free(struct zs_backend *b, unsigned long h)
{
	if (h == 0 || ZS_IS_ERR(h))
		return 0;
	__libc_free((void *)h);
	struct zs_be_count *c = b->impl;
	be_count_add(c, -1);
	return 0;
}

/* glibc's only compaction: give free memory at the top and inside the heap back. */
static unsigned long gl_compact(struct zs_backend *b)
{
	(void)b;
	malloc_trim(0);
	return 0;
}

static void gl_stats(struct zs_backend *b, struct zs_backend_stats *st)
{
	struct zs_be_count *c = b->impl;
	struct mallinfo2 mi = mallinfo2();
	memset(st, 0, sizeof(*st));
	st->mem_bytes = mi.arena + mi.hblkhd;
	st->objects = be_count_objects(c);
}

const struct zs_backend_ops zs_be_malloc_ops = {
	.kind = "malloc",
	.create = gl_create,
	.destroy = gl_destroy,
	.malloc = gl_malloc,
	.free = gl_free,
	.read_begin = be_ptr_read_begin,
	.read_end = be_ptr_read_end,
	.write = be_ptr_write,
	.compact = gl_compact,
	.stats = gl_stats,
};
