/*
 * Backend registry and the checked mode shared by every kind.
 *
 * Adapters (be_*.c) only translate calls; what they cannot do themselves is
 * done here once: in checked mode a side table maps each live handle to its
 * requested size, so every kind (malloc kinds included, whose free() would
 * crash on a bad pointer) rejects bad, foreign and double-freed handles with
 * -EINVAL and reports exact object_bytes.  Unchecked backends keep no table:
 * no allocator here stores request sizes, and a table would cost a lock and
 * 16 bytes per object on the paths `zs compare` times and measures, so there
 * object_bytes is 0 (callers that need it count it themselves).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/config.h"
#include "backend_internal.h"
#include "common/err.h"
#include "common/stats_copy.h"
#include "zsmalloc/check.h"
#include "zs/pages.h"

/* The library's own kinds first, then what backend_register added. */
#define NR_OWN 2
static const struct zs_backend_ops *registry[NR_OWN + ZS_BACKEND_MAX_EXTRA] = {
	&be_zsmalloc_ops,
	&be_zblock_ops,
};
static size_t nr_kinds = NR_OWN;
/* zs_backend_kinds()'s answer: registry's names, NULL-terminated. */
static const char *kind_names[NR_OWN + ZS_BACKEND_MAX_EXTRA + 1] = { "zsmalloc", "zblock" };

int backend_register(const struct zs_backend_ops *ops)
{
	if (!ops || !ops->kind || !ops->create)
		return -EINVAL;
	for (size_t i = 0; i < nr_kinds; i++)
		if (!strcmp(registry[i]->kind, ops->kind))
			return -EEXIST;
	if (nr_kinds == NR_OWN + ZS_BACKEND_MAX_EXTRA)
		return -ENOSPC;
	registry[nr_kinds] = ops;
	kind_names[nr_kinds] = ops->kind;
	nr_kinds++;
	return 0;
}

static const char *const all_kinds[] = { "zsmalloc", "zblock", "malloc", "jemalloc", "mimalloc" };

/* ---- handle -> size table (checked mode) ---- */

/* Handles are never 0 and never error values, so both can mark slots. */
#define TAB_EMPTY 0UL
#define TAB_DEAD ((unsigned long)-1)

struct tab_ent {
	unsigned long h;
	size_t size;
};

struct sizetab {
	pthread_mutex_t lock;
	struct tab_ent *ent;
	size_t cap, used, dead; /* used counts live + dead slots */
	size_t live_bytes;
	unsigned long live;
};

static size_t tab_hash(unsigned long h, size_t cap)
{
	uint64_t x = h * 0x9e3779b97f4a7c15ULL;
	return (size_t)(x >> 17) & (cap - 1);
}

static struct tab_ent *tab_find(struct sizetab *t, unsigned long h)
{
	for (size_t i = tab_hash(h, t->cap);; i = (i + 1) & (t->cap - 1)) {
		if (t->ent[i].h == h)
			return &t->ent[i];
		if (t->ent[i].h == TAB_EMPTY)
			return NULL;
	}
}

static int tab_grow(struct sizetab *t)
{
	size_t ncap = t->live * 4 > t->cap ? t->cap * 2 : t->cap;
	struct tab_ent *n = calloc(ncap, sizeof(*n));
	if (!n)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++) {
		unsigned long h = t->ent[i].h;
		if (h == TAB_EMPTY || h == TAB_DEAD)
			continue;
		size_t j = tab_hash(h, ncap);
		while (n[j].h != TAB_EMPTY)
			j = (j + 1) & (ncap - 1);
		n[j] = t->ent[i];
	}
	free(t->ent);
	t->ent = n;
	t->cap = ncap;
	t->used = t->live;
	t->dead = 0;
	return 0;
}

/* Caller holds t->lock. */
static int tab_insert(struct sizetab *t, unsigned long h, size_t size)
{
	if ((t->used + 1) * 4 > t->cap * 3 && tab_grow(t))
		return -ENOMEM;
	size_t i = tab_hash(h, t->cap);
	while (t->ent[i].h != TAB_EMPTY && t->ent[i].h != TAB_DEAD)
		i = (i + 1) & (t->cap - 1);
	if (t->ent[i].h == TAB_EMPTY)
		t->used++;
	else
		t->dead--;
	t->ent[i].h = h;
	t->ent[i].size = size;
	t->live++;
	t->live_bytes += size;
	return 0;
}

/* ---- the private backend object ---- */

struct be_priv {
	struct zs_backend pub;              /* first: adapters see only this */
	const struct zs_backend_ops *inner; /* the adapter */
	struct zs_backend_ops wrapped;      /* checked-mode ops, kind = inner kind */
	int checked;
	struct sizetab tab;
};

static struct be_priv *priv(struct zs_backend *b)
{
	return (struct be_priv *)b;
}

static unsigned long chk_malloc(struct zs_backend *b, size_t size)
{
	struct be_priv *p = priv(b);
	unsigned long h = p->inner->malloc(b, size);
	if (ZS_IS_ERR(h))
		return h;
	pthread_mutex_lock(&p->tab.lock);
	int err = tab_insert(&p->tab, h, size);
	pthread_mutex_unlock(&p->tab.lock);
	if (err) {
		p->inner->free(b, h);
		return (unsigned long)(long)err;
	}
	return h;
}

/* Remove h from the table before the allocator sees it, so a racing second
 * free of the same handle fails here instead of freeing twice. */
static int chk_take(struct be_priv *p, unsigned long h)
{
	pthread_mutex_lock(&p->tab.lock);
	struct tab_ent *e = tab_find(&p->tab, h);
	if (e) {
		p->tab.live--;
		p->tab.live_bytes -= e->size;
		e->h = TAB_DEAD;
		p->tab.dead++;
	}
	pthread_mutex_unlock(&p->tab.lock);
	return e ? 0 : -EINVAL;
}

static int chk_free(struct zs_backend *b, unsigned long h)
{
	if (h == 0 || ZS_IS_ERR(h))
		return 0;
	if (chk_take(priv(b), h))
		return -EINVAL;
	return priv(b)->inner->free(b, h);
}

static int chk_free_deferred(struct zs_backend *b, unsigned long h)
{
	if (h == 0 || ZS_IS_ERR(h))
		return 0;
	if (chk_take(priv(b), h))
		return -EINVAL;
	return priv(b)->inner->free_deferred(b, h);
}

/* A live handle and len within its requested size. */
static int chk_access(struct be_priv *p, unsigned long h, size_t len)
{
	pthread_mutex_lock(&p->tab.lock);
	struct tab_ent *e = h == 0 || ZS_IS_ERR(h) ? NULL : tab_find(&p->tab, h);
	int ok = e && len <= e->size;
	pthread_mutex_unlock(&p->tab.lock);
	return ok;
}

static void *chk_read_begin(struct zs_backend *b, unsigned long h, size_t len, void *local)
{
	if (!chk_access(priv(b), h, len)) {
		errno = EINVAL;
		return NULL;
	}
	return priv(b)->inner->read_begin(b, h, len, local);
}

/* An end for a handle that is not live (e.g. after a failed begin) must not reach the allocator. */
static void chk_read_end(struct zs_backend *b, unsigned long h, size_t len, void *mem)
{
	if (!chk_access(priv(b), h, 0))
		return;
	priv(b)->inner->read_end(b, h, len, mem);
}

static int chk_write(struct zs_backend *b, unsigned long h, const void *src, size_t len)
{
	if (!chk_access(priv(b), h, len))
		return -EINVAL;
	return priv(b)->inner->write(b, h, src, len);
}

static void chk_stats(struct zs_backend *b, struct zs_backend_stats *st)
{
	struct be_priv *p = priv(b);
	p->inner->stats(b, st);
	pthread_mutex_lock(&p->tab.lock);
	st->objects = p->tab.live;
	st->object_bytes = p->tab.live_bytes;
	pthread_mutex_unlock(&p->tab.lock);
}

static void set_checked_ops(struct be_priv *p)
{
	const struct zs_backend_ops *in = p->inner;
	p->wrapped = *in; /* caps and create/destroy/flush/compact/huge/lookup/total_pages/
			     class_count pass straight through */
	p->wrapped.malloc = chk_malloc;
	p->wrapped.free = chk_free;
	p->wrapped.free_deferred = in->free_deferred ? chk_free_deferred : NULL;
	p->wrapped.read_begin = chk_read_begin;
	p->wrapped.read_end = chk_read_end;
	p->wrapped.write = chk_write;
	p->wrapped.stats = chk_stats;
}

/* ---- public entry points ---- */

unsigned long zs_backend_malloc_write(struct zs_backend *b, const void *src, size_t len)
{
	if (b->ops == &be_zsmalloc_ops) /* not a checked backend: those have wrapped ops */
		return zs_malloc_write(b->impl, src, len);
	unsigned long h = b->ops->malloc(b, len);
	if (!ZS_IS_ERR(h) && b->ops->write(b, h, src, len)) {
		b->ops->free(b, h);
		return (unsigned long)-EIO;
	}
	return h;
}

/* The dispatch: one call through the kind's ops (what zs/backend.h inlined before 4.0.0). */
unsigned long zs_backend_malloc(struct zs_backend *b, size_t size)
{
	return b->ops->malloc(b, size);
}

int zs_backend_free(struct zs_backend *b, unsigned long h)
{
	return b->ops->free(b, h);
}

int zs_backend_free_deferred(struct zs_backend *b, unsigned long h)
{
	return b->ops->free_deferred ? b->ops->free_deferred(b, h) : b->ops->free(b, h);
}

void zs_backend_flush(struct zs_backend *b)
{
	if (b->ops->flush)
		b->ops->flush(b);
}

void *zs_backend_read_begin(struct zs_backend *b, unsigned long h, size_t len, void *local_copy)
{
	return b->ops->read_begin(b, h, len, local_copy);
}

void zs_backend_read_end(struct zs_backend *b, unsigned long h, size_t len, void *mem)
{
	b->ops->read_end(b, h, len, mem);
}

int zs_backend_write(struct zs_backend *b, unsigned long h, const void *src, size_t len)
{
	return b->ops->write(b, h, src, len);
}

unsigned long zs_backend_compact(struct zs_backend *b)
{
	return b->ops->compact ? b->ops->compact(b) : 0;
}

int zs_backend_stats(struct zs_backend *b, struct zs_backend_stats *st, size_t size)
{
	struct zs_backend_stats full;

	if (!b || !st || !size)
		return -EINVAL;
	memset(&full, 0, sizeof(full));
	b->ops->stats(b, &full);
	return stats_copy_out(st, size, &full, sizeof(full));
}

size_t zs_backend_huge_class_size(struct zs_backend *b)
{
	return b->ops->huge_class_size ? b->ops->huge_class_size(b) : b->page_size;
}

int zs_backend_lookup_class(struct zs_backend *b, size_t size)
{
	return b->ops->lookup_class ? b->ops->lookup_class(b, size) : -EOPNOTSUPP;
}

unsigned zs_backend_caps(const struct zs_backend *b)
{
	return b->ops->caps;
}

unsigned long zs_backend_total_pages(struct zs_backend *b)
{
	return b->ops->total_pages ? b->ops->total_pages(b) : 0;
}

int zs_backend_class_count(struct zs_backend *b)
{
	return b->ops->class_count ? b->ops->class_count(b) : 0;
}

size_t zs_backend_mem_bytes(const struct zs_backend *b, const struct zs_backend_stats *st)
{
	if (zs_backend_caps(b) & ZS_BACKEND_CAP_PAGES)
		return st->pages * b->page_size;
	return st->mem_bytes ? st->mem_bytes : st->object_bytes;
}

const char *zs_backend_kind(const struct zs_backend *b)
{
	return b->kind;
}

size_t zs_backend_page_size(const struct zs_backend *b)
{
	return b->page_size;
}

void zs_backend_config_init(struct zs_backend_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->struct_size = sizeof(*cfg);
	cfg->kind = "zsmalloc";
	cfg->page_size = ZS_PAGE_SIZE_DEFAULT;
	zs_pool_config_init(&cfg->zs);
}

static int backend_create(const struct zs_backend_config *cfg, struct zs_backend **out, char *err,
			  size_t err_len)
{
	const char *kind = cfg && cfg->kind ? cfg->kind : "zsmalloc";
	const struct zs_backend_ops *ops = NULL;
	for (size_t i = 0; i < nr_kinds; i++)
		if (!strcmp(registry[i]->kind, kind))
			ops = registry[i];
	if (!ops) {
		int known = 0;
		for (size_t i = 0; i < sizeof(all_kinds) / sizeof(all_kinds[0]); i++)
			known |= !strcmp(all_kinds[i], kind);
		set_err(err, err_len, "zs_backend_config.kind \"%s\": %s", kind,
			known ? "not available in this process (the malloc kinds are the test "
				"harness's)" : "unknown (zsmalloc, zblock, malloc, jemalloc, mimalloc)");
		return known ? -ENOTSUP : -EINVAL;
	}
	struct zs_backend_config c;
	if (cfg)
		c = *cfg;
	else
		zs_backend_config_init(&c);
	c.kind = kind;
	if (!c.page_size)
		c.page_size = ZS_PAGE_SIZE_DEFAULT;
	int bad;
	if (ZS_CONFIG_ABI_CHECK(&c, &bad)) {
		config_abi_err(err, err_len, "zs_backend_config", c.struct_size, sizeof(c), bad);
		return -EINVAL;
	}
	if (!zs_page_size_valid(c.page_size)) {
		set_err(err, err_len, "zs_backend_config.page_size %zu: must be a power of two in "
			"4096..65536", c.page_size);
		return -EINVAL;
	}
	if (c.checked != 0 && c.checked != 1) {
		set_err(err, err_len, "zs_backend_config.checked %d: must be 0 or 1", c.checked);
		return -EINVAL;
	}
	if (c.max_pages > ZS_PAGES_MAX_SPAN / c.page_size) {
		set_err(err, err_len, "zs_backend_config.max_pages %zu: must be 0..%zu", c.max_pages,
			(size_t)(ZS_PAGES_MAX_SPAN / c.page_size));
		return -EINVAL;
	}
	/* The nested pool config, whatever the kind: as the zsmalloc kind builds its pool (the
	 * three knobs above replace the pool's own), so no kind accepts what another refuses. */
	struct zs_pool_config zc = c.zs;
	zc.page_size = c.page_size;
	zc.max_pages = c.max_pages;
	zc.checked = c.checked;
	char sub[200] = "";
	if (pool_config_check(&zc, sub, sizeof(sub))) {
		set_err(err, err_len, "zs_backend_config.zs (the nested pool config): %s", sub);
		return -EINVAL;
	}

	struct be_priv *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->inner = ops;
	p->pub.ops = ops;
	p->pub.page_size = c.page_size;
	snprintf(p->pub.kind, sizeof(p->pub.kind), "%s", kind);
	p->checked = !!c.checked;
	if (p->checked) {
		pthread_mutex_init(&p->tab.lock, NULL);
		p->tab.cap = 1024;
		p->tab.ent = calloc(p->tab.cap, sizeof(*p->tab.ent));
		if (!p->tab.ent) {
			free(p);
			return -ENOMEM;
		}
		set_checked_ops(p);
		p->pub.ops = &p->wrapped;
	}
	int rc = ops->create(&p->pub, &c);
	if (rc) {
		if (p->checked) {
			free(p->tab.ent);
			pthread_mutex_destroy(&p->tab.lock);
		}
		free(p);
		set_err(err, err_len, "zs_backend_create: kind %s: %s", kind, strerror(-rc));
		return rc < 0 ? rc : -rc;
	}
	*out = &p->pub;
	return 0;
}

int zs_backend_create(const struct zs_backend_config *cfg, struct zs_backend **out, char *err,
		      size_t err_len)
{
	create_begin(err, err_len);
	if (!out) {
		set_err(err, err_len, "zs_backend_create: out is NULL");
		return create_finish("zs_backend_create", -EINVAL, err, err_len);
	}
	*out = NULL;
	return create_finish("zs_backend_create", backend_create(cfg, out, err, err_len), err,
			     err_len);
}



struct zs_backend *backend_create_for_store(const struct zs_backend_config *cfg,
					       size_t page_size, int *rc, char *err,
					       size_t err_len)
{
	struct zs_backend_config bc = *cfg;
	if (!bc.kind)
		bc.kind = "zsmalloc";
	bc.page_size = page_size;
	struct zs_backend *b;
	*rc = zs_backend_create(&bc, &b, err, err_len);
	if (!*rc)
		return b;
	return NULL;
}

void zs_backend_destroy(struct zs_backend *b)
{
	if (!b)
		return;
	struct be_priv *p = priv(b);
	if (p->checked) {
		/* Kinds that cannot find their live objects themselves: the table can. */
		if (!(p->inner->caps & ZS_BACKEND_CAP_FREES_ON_DESTROY))
			for (size_t i = 0; i < p->tab.cap; i++)
				if (p->tab.ent[i].h != TAB_EMPTY && p->tab.ent[i].h != TAB_DEAD)
					p->inner->free(b, p->tab.ent[i].h);
		free(p->tab.ent);
		pthread_mutex_destroy(&p->tab.lock);
	}
	p->inner->destroy(b);
	free(p);
}

const char *const *zs_backend_kinds(void)
{
	return kind_names;
}

struct zs_pool *zs_backend_zspool(struct zs_backend *b)
{
	if (!b || priv(b)->inner != &be_zsmalloc_ops)
		return NULL;
	return b->impl;
}
