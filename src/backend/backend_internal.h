/*
 * Private glue between src/backend/backend.c (the registry and the checked
 * mode every kind shares) and the per-allocator adapters (be_*.c).  Kept out
 * of include/ because adapters are not a public extension point yet.
 */
#ifndef ZS_BACKEND_INTERNAL_H
#define ZS_BACKEND_INTERNAL_H

#include "zs/backend.h"

/*
 * What a kind implements.  Private since 4.0.0 (it was in zs/backend.h with
 * inline dispatch): only the library and the harness's malloc baselines
 * register kinds, so a new op is no longer an ABI change.
 */
struct zs_backend_ops {
	const char *kind;
	int (*create)(struct zs_backend *b, const struct zs_backend_config *cfg);
	void (*destroy)(struct zs_backend *b);
	unsigned long (*malloc)(struct zs_backend *b, size_t size);
	int (*free)(struct zs_backend *b, unsigned long handle);
	int (*free_deferred)(struct zs_backend *b, unsigned long handle);  /* NULL: free */
	void (*flush)(struct zs_backend *b);                                 /* NULL: no-op */
	void *(*read_begin)(struct zs_backend *b, unsigned long h, size_t len, void *local_copy);
	void (*read_end)(struct zs_backend *b, unsigned long h, size_t len, void *mem);
	int (*write)(struct zs_backend *b, unsigned long h, const void *src, size_t len);
	unsigned long (*compact)(struct zs_backend *b);                      /* NULL: 0 */
	void (*stats)(struct zs_backend *b, struct zs_backend_stats *st);
	size_t (*huge_class_size)(struct zs_backend *b);                     /* NULL: page size */
	int (*lookup_class)(struct zs_backend *b, size_t size);              /* NULL: -EOPNOTSUPP */
	unsigned long (*total_pages)(struct zs_backend *b);                  /* NULL: 0 */
	int (*class_count)(struct zs_backend *b);                            /* NULL: 0 */
	unsigned caps;                                                       /* ZS_BACKEND_CAP_* */
};

struct zs_backend {
	const struct zs_backend_ops *ops;
	void *impl;
	size_t page_size;
	char kind[16];
};

extern const struct zs_backend_ops be_zsmalloc_ops;
extern const struct zs_backend_ops be_zblock_ops;

/*
 * Kinds that live outside the library: the malloc baselines (glibc, jemalloc,
 * mimalloc; harness/be_*.c) that `zs compare`, the benchmarks and the tests
 * measure against.  The harness registers them (harness/register.c) before
 * its main() runs; libzs.so itself holds only zsmalloc and zblock, and runs
 * no code at load time.  Not ZS_API: hidden in libzs.so, linkable from
 * libzs.a.  Returns 0, -EEXIST (kind already there), -ENOSPC (table full)
 * or -EINVAL.  Registration is not synchronised with zs_backend_create or
 * zs_backend_kinds: make it before any thread uses backends.
 */
#define ZS_BACKEND_MAX_EXTRA 4
int backend_register(const struct zs_backend_ops *ops);

/*
 * A store's backend (zram, zswap): cfg's kind (zsmalloc when unset) at the
 * store's page size, which is the one knob of the two (zs/backend.h).  NULL
 * on failure, with *rc = -errno and err saying why, naming the kind.
 */
struct zs_backend *backend_create_for_store(const struct zs_backend_config *cfg,
					       size_t page_size, int *rc, char *err,
					       size_t err_len);

/* Largest object every kind accepts: one pool page, as zs_malloc. */
static inline int be_bad_size(const struct zs_backend *b, size_t size)
{
	return size == 0 || size > b->page_size;
}

/*
 * Shared by the malloc kinds: the handle is the object's address, reads are
 * the pointer itself and writes a memcpy, exactly what an application
 * holding exact-size buffers does.  Live objects are counted in a
 * struct zs_be_count that each malloc adapter keeps first in its impl.
 */
#define ZS_BE_COUNT_SHARDS 16
struct zs_be_count {
	/*
	 * One shard per thread, claimed on the thread's first count and written
	 * by that thread alone, so a count is a plain load and store: an atomic
	 * add per malloc and per free (what this was) stalls on the caller's
	 * pending stores - the memcpy just before it - and charged the malloc
	 * baselines a cost a real caller of theirs never pays (bench_threads
	 * measured it at 15% of the mimalloc row's time).  Threads that find
	 * every shard taken share one atomic counter.  Padded, not aligned:
	 * impls come from calloc.
	 */
	struct {
		_Atomic unsigned owner; /* thread_index() + 1; 0: unclaimed */
		_Atomic long objects;
		char pad[64 - 2 * sizeof(long)];
	} shard[ZS_BE_COUNT_SHARDS];
	_Atomic long shared;
};
void be_count_add(struct zs_be_count *c, long d);
unsigned long be_count_objects(struct zs_be_count *c);
void *be_ptr_read_begin(struct zs_backend *b, unsigned long h, size_t len, void *local);
void be_ptr_read_end(struct zs_backend *b, unsigned long h, size_t len, void *mem);
int be_ptr_write(struct zs_backend *b, unsigned long h, const void *src, size_t len);

#endif
