/*
 * Backend kind "jemalloc" (built when CMake finds libjemalloc: ZS_HAVE_JEMALLOC).
 *
 * Each backend gets its own jemalloc arena (mallctl "arenas.create") and
 * allocates with MALLOCX_ARENA|MALLOCX_TCACHE_NONE: the thread caches are
 * shared by all arenas, so with them on, objects of this pool could come from
 * (and stats would leak into) other arenas.  That costs jemalloc its tcache
 * fast path; density, which is what the comparison is about, is measured
 * exactly, per arena.  Debian's libjemalloc exports unprefixed malloc, so
 * the executables that link it (zs, tests, benchmarks) get jemalloc as their
 * process malloc; the "malloc" kind stays glibc's by calling __libc_malloc
 * (see be_malloc.c).
 */
#ifdef ZS_HAVE_JEMALLOC
#include <errno.h>
#include <jemalloc/jemalloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>
#include <pthread.h>
#include "harness_internal.h"

/*
 * The library does not link jemalloc: linked into libzs.so, its initial-exec
 * TLS stops the library from being loaded with dlopen (Python's ctypes), and
 * it would replace malloc for every program using libzs.  Instead the symbols
 * are weak: programs that link jemalloc themselves (the zs tool, tests,
 * benchmarks) resolve them; otherwise dlopen is tried, which works only where
 * the loader has static TLS to spare; else the kind reports -ENOTSUP.
 */
#pragma weak mallocx
#pragma weak dallocx
#pragma weak mallctl
static int (*p_mallctl)(const char *, void *, size_t *, void *, size_t);
static void *(*p_mallocx)(size_t, int);
static void (*p_dallocx)(void *, int);
static pthread_once_t je_once = PTHREAD_ONCE_INIT;

static void je_load(void)
{
	if (mallocx && dallocx && mallctl) {
		p_mallocx = mallocx;
		p_dallocx = dallocx;
		p_mallctl = mallctl;
		return;
	}
	void *lib = dlopen("libjemalloc.so.2", RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		return;
	*(void **)&p_mallocx = dlsym(lib, "mallocx");
	*(void **)&p_dallocx = dlsym(lib, "dallocx");
	*(void **)&p_mallctl = dlsym(lib, "mallctl");
	if (!p_mallocx || !p_dallocx)
		p_mallctl = NULL;
}
#define mallctl p_mallctl
#define mallocx p_mallocx
#define dallocx p_dallocx

struct je_be {
	struct zs_be_count count;
	unsigned arena;
	int flags;
};

static int je_create(struct zs_backend *b, const struct zs_backend_config *cfg)
{
	(void)cfg;
	pthread_once(&je_once, je_load);
	if (!p_mallctl)
		return -ENOTSUP;
	struct je_be *j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	size_t sz = sizeof(j->arena);
	if (mallctl("arenas.create", &j->arena, &sz, NULL, 0)) {
		free(j);
		return -ENOMEM;
	}
	j->flags = MALLOCX_ARENA(j->arena) | MALLOCX_TCACHE_NONE;
	b->impl = j;
	return 0;
}

static void je_destroy(struct zs_backend *b)
{
	struct je_be *j = b->impl;
	char name[64];
	/* Destroying the arena frees every live object with it. */
	snprintf(name, sizeof(name), "arena.%u.destroy", j->arena);
	mallctl(name, NULL, NULL, NULL, 0);
	free(j);
}

static unsigned long je_malloc(struct zs_backend *b, size_t size)
{
	struct je_be *j = b->impl;
	if (be_bad_size(b, size))
		return (unsigned long)(size ? -ENOSPC : -EINVAL);
	void *p = mallocx(size, j->flags);
	if (!p)
		return (unsigned long)-ENOMEM;
	be_count_add(&j->count, 1);
	return (unsigned long)p;
}

static int je_free(struct zs_backend *b, unsigned long h)
{
	struct je_be *j = b->impl;
	if (h == 0 || ZS_IS_ERR(h))
		return 0;
	dallocx((void *)h, MALLOCX_TCACHE_NONE);
	be_count_add(&j->count, -1);
	return 0;
}

/* Return dirty and muzzy pages of this arena to the OS now instead of after decay. */
static unsigned long je_compact(struct zs_backend *b)
{
	struct je_be *j = b->impl;
	char name[64];
	snprintf(name, sizeof(name), "arena.%u.purge", j->arena);
	mallctl(name, NULL, NULL, NULL, 0);
	return 0;
}

static size_t je_arena_stat(unsigned arena, const char *what)
{
	char name[96];
	size_t v = 0, sz = sizeof(v);
	snprintf(name, sizeof(name), "stats.arenas.%u.%s", arena, what);
	if (mallctl(name, &v, &sz, NULL, 0))
		return 0;
	return v;
}

static void je_stats(struct zs_backend *b, struct zs_backend_stats *st)
{
	struct je_be *j = b->impl;
	uint64_t epoch = 1;
	size_t sz = sizeof(epoch), page = 0, psz = sizeof(page);
	memset(st, 0, sizeof(*st));
	st->objects = be_count_objects(&j->count);
	/* Stats are snapshots refreshed by bumping the epoch. */
	mallctl("epoch", &epoch, &sz, &epoch, sz);
	if (mallctl("arenas.page", &page, &psz, NULL, 0))
		return;
	/* Active pages plus dirty ones not yet purged: both are resident. */
	st->mem_bytes = (je_arena_stat(j->arena, "pactive") + je_arena_stat(j->arena, "pdirty")) * page;
}

const struct zs_backend_ops zs_be_jemalloc_ops = {
	.kind = "jemalloc",
	.create = je_create,
	.destroy = je_destroy,
	.malloc = je_malloc,
	.free = je_free,
	.read_begin = be_ptr_read_begin,
	.read_end = be_ptr_read_end,
	.write = be_ptr_write,
	.compact = je_compact,
	.stats = je_stats,
	.caps = ZS_BACKEND_CAP_FREES_ON_DESTROY, /* the arena goes with its objects */
};
#else
/* ISO C forbids an empty translation unit. */
typedef int zs_be_jemalloc_unused;
#endif
