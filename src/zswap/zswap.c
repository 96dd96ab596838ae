/*
 * The zswap front end: mm/zswap.c's store, load and invalidate over a libzs
 * backend, with the swap layer's zero-page bypass, in user space.
 *
 * Design (read this first):
 *   - Offset table: ZW_NSHARDS shards chosen by a hash of the offset
 *     (table.c), each a hash table of nodes under one mutex.  A node is what
 *     the offset holds: an entry (backend handle, object length, group,
 *     flags), a zero mark (the kernel's zeromap bit) or a written-back page.
 *     One table for all three keeps "one offset, one state" a single lookup.
 *   - LRU: every entry is on its shard's LRU and on its group's LRU in that
 *     shard, youngest at the head.  A global sequence number, taken under
 *     the shard lock when an entry is inserted or rotated, orders all
 *     shards: the writeback walk takes the shard whose tail is oldest, so
 *     the walk is one global LRU (exact when single threaded) without a
 *     global list lock.
 *   - Store order is the kernel's: group limit (memory.zswap.max), pool
 *     limit with hysteresis, node allocation, compression (outside every
 *     lock, on a stream), object allocation and write, then under the shard
 *     lock: drop the stale contents, insert, charge, put on the LRU.  A
 *     rejection drops the offset's stale contents, as zswap_store's failure
 *     path does, then wakes the shrink worker if the pool is full.
 *   - Load is always exclusive: decompress under the shard lock (so a
 *     concurrent invalidate or writeback cannot free the object under the
 *     reader), then free.  A failed decompression keeps the entry.
 *   - Counters: levels and events changed under a shard lock live in the
 *     shard (plain relaxed stores, summed by stats.c); rare events outside
 *     any lock are atomic adds on z->ev; group charges are atomic adds.
 *
 * Lock order (a thread takes them top down):
 *   1. a stream (stream.c: a busy flag; at most one per thread);
 *   2. one shard lock (never two at once: walks go shard by shard);
 *   3. leaves: the backend's locks, the backing file's I/O and its
 *      injection lock (writeback.c), and to queue a pass: the lock that
 *      starts the worker, then the workers' fork gate, then the worker's
 *      mutex.
 *   The shrink worker and zs_zswap_writeback take 1 then 2 per LRU step.
 *   A -DZS_DEBUG=ON build checks it (ZS_LOCK_ZSWAP_* in common/debug.h,
 *   between zram's ranks and zsmalloc's: zram and zswap never nest).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "zswap/internal.h"
#include "zs/pages.h"
#include "backend/backend_internal.h"   /* backend_create_for_store */

/* ---- Create / destroy ---- */

void zs_zswap_config_init(struct zs_zswap_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->struct_size = sizeof(*cfg);
	cfg->page_size = ZS_PAGE_SIZE_DEFAULT;
	cfg->comp = "lzo";
	zs_backend_config_init(&cfg->backend);
	cfg->max_pool_percent = 20;
	cfg->accept_threshold_percent = 90;
}

static uint64_t phys_ram(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);

	return pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : (uint64_t)1 << 30;
}

static int check_config(const struct zs_zswap_config *cfg, size_t ps, char *err, size_t errlen)
{
	const char *comp = cfg->comp ? cfg->comp : "lzo";
	struct zs_comp_params prm = { .level = cfg->comp_level };
	int rc, bad;

	if (!zs_page_size_valid(ps)) {
		set_err(err, errlen, "page_size %zu is not a power of two in 4096..65536", ps);
		return -EINVAL;
	}
	if (cfg->total_ram && (cfg->total_ram < ps || cfg->total_ram > ((uint64_t)1 << 60))) {
		set_err(err, errlen, "total_ram %llu is outside page_size..2^60",
			      (unsigned long long)cfg->total_ram);
		return -EINVAL;
	}
	if (cfg->max_pool_percent > 100 || cfg->accept_threshold_percent > 100) {
		set_err(err, errlen, "max_pool_percent %u / accept_threshold_percent %u: "
			      "each must be 0..100", cfg->max_pool_percent,
			      cfg->accept_threshold_percent);
		return -EINVAL;
	}
	if ((cfg->shrinker_enabled != 0 && cfg->shrinker_enabled != 1) ||
	    (cfg->deferred_free != 0 && cfg->deferred_free != 1)) {
		set_err(err, errlen, "shrinker_enabled and deferred_free must be 0 or 1");
		return -EINVAL;
	}
	if (ZS_CONFIG_ABI_CHECK(cfg, &bad)) {
		config_abi_err(err, errlen, "zs_zswap_config", cfg->struct_size, sizeof(*cfg),
				  bad);
		return -EINVAL;
	}
	if ((rc = zs_comp_check_params(comp, &prm))) {
		set_err(err, errlen, "compressor \"%s\" level %d: %s", comp, cfg->comp_level,
			      strerror(-rc));
		return rc;
	}
	return 0;
}

static void free_all(struct zs_zswap *z)
{
	for (unsigned i = 0; i < ZW_NSHARDS; i++) {
		struct zw_shard *sh = &z->shards[i];

		if (!sh->buckets)
			continue;
		for (size_t k = 0; k < sh->nbuckets; k++) {
			struct zw_node *n = sh->buckets[k], *next;

			for (; n; n = next) {
				next = n->hnext;
				if (n->kind == K_ENTRY &&
				    !(zs_backend_caps(z->b) & ZS_BACKEND_CAP_FREES_ON_DESTROY))
					zs_backend_free(z->b, n->handle);
				free(n);
			}
			sh->buckets[k] = NULL;
		}
		zswap_shard_fini(sh);
	}
}

static void destroy(struct zs_zswap *z)
{
	zswap_worker_stop(z);
	if (z->b) {
		if (z->deferred)
			zs_backend_flush(z->b);
		free_all(z);
		zs_backend_destroy(z->b);
	} else {
		for (unsigned i = 0; i < ZW_NSHARDS; i++)
			zswap_shard_fini(&z->shards[i]);
	}
	zswap_wb_destroy(z);
	zswap_streams_free(z);
	pthread_mutex_destroy(&z->worker_lock);
	free(z);
}

static int create(const struct zs_zswap_config *cfg, struct zs_zswap **out, char *err,
		  size_t errlen)
{
	struct zs_zswap_config def;
	struct zs_zswap *z;
	size_t ps;
	int rc;

	if (!cfg) {
		zs_zswap_config_init(&def);
		cfg = &def;
	}
	ps = cfg->page_size ? cfg->page_size : ZS_PAGE_SIZE_DEFAULT;
	if ((rc = check_config(cfg, ps, err, errlen)))
		return rc;

	z = aligned_alloc(64, sizeof(*z));
	if (!z)
		return -ENOMEM;
	memset(z, 0, sizeof(*z));
	if (pthread_mutex_init(&z->worker_lock, NULL)) {
		free(z);
		return -ENOMEM;
	}
	z->page_size = ps;
	z->deferred = cfg->deferred_free;
	z->shrinker = cfg->shrinker_enabled;
	z->total_ram_pages = (cfg->total_ram ? cfg->total_ram : phys_ram()) / ps;
	zswap_set_limits(z, cfg->max_pool_percent, cfg->accept_threshold_percent);
	for (unsigned g = 0; g < ZS_ZSWAP_MAX_GROUPS; g++) {
		atomic_init(&z->groups[g].max_bytes, ZS_ZSWAP_NO_LIMIT);
		atomic_init(&z->groups[g].writeback, 1);
	}
	rc = -ENOMEM;
	for (unsigned i = 0; i < ZW_NSHARDS; i++)
		if ((rc = zswap_shard_init(&z->shards[i])))
			goto fail;

	z->b = backend_create_for_store(&cfg->backend, ps, &rc, err, errlen);
	if (!z->b)
		goto fail;
	z->has_pages = (zs_backend_caps(z->b) & ZS_BACKEND_CAP_PAGES) != 0;
	if ((rc = zswap_streams_create(z, cfg->comp ? cfg->comp : "lzo", cfg->comp_level)))
		goto fail;
	snprintf(z->comp_name, sizeof(z->comp_name), "%s", zs_comp_name(z->streams[0].comp));
	if (cfg->backing_path && (rc = zswap_wb_create(z, cfg->backing_path, err, errlen)))
		goto fail;
	*out = z;
	return 0;
fail:
	destroy(z);
	return rc;
}

int zs_zswap_create(const struct zs_zswap_config *cfg, struct zs_zswap **out, char *err,
		    size_t errlen)
{
	int rc;

	if (err && errlen)
		err[0] = 0;
	if (!out) {
		set_err(err, errlen, "zs_zswap_create: out is NULL");
		return create_finish("zs_zswap_create", -EINVAL, err, errlen);
	}
	*out = NULL;
	rc = create(cfg, out, err, errlen);
	if (rc)
		*out = NULL;
	return create_finish("zs_zswap_create", rc, err, errlen);
}

void zs_zswap_destroy(struct zs_zswap *z)
{
	if (z)
		destroy(z);
}

/* NULL z: zswap.h refuses NULL pointers everywhere; these answer "nothing" instead. */
size_t zs_zswap_page_size(const struct zs_zswap *z)
{
	return z ? z->page_size : 0;
}

const char *zs_zswap_comp_name(const struct zs_zswap *z)
{
	return z ? z->comp_name : "";
}

struct zs_backend *zs_zswap_backend(struct zs_zswap *z)
{
	return z ? z->b : NULL;
}

/* ---- Store ---- */

static int page_is_zero(const void *page, size_t ps)
{
	const unsigned char *p = page;

	/* The first word decides most pages; memcmp against itself shifted does the rest. */
	for (size_t i = 0; i < sizeof(unsigned long); i++)
		if (p[i])
			return 0;
	return !memcmp(p, p + sizeof(unsigned long), ps - sizeof(unsigned long));
}

static int args_ok(struct zs_zswap *z, uint64_t offset, unsigned group)
{
	return z && offset < ZS_ZSWAP_MAX_OFFSET && group < ZS_ZSWAP_MAX_GROUPS;
}

/*
 * Drop what node n holds and free it (unlinked from the table): an entry's
 * object (deferred: zs_backend_free_deferred), its charge and counts; a zero
 * mark; a written-back page (its file range punched).  Here, not in the
 * table (table.c), because a written-back page's file range is writeback's:
 * the table stays below writeback, which walks its LRU.
 */
static void drop_locked(struct zs_zswap *z, struct zw_shard *sh, struct zw_node *n, int deferred)
{
	switch (n->kind) {
	case K_ENTRY:
		zswap_entry_release(z, sh, n, deferred);
		break;
	case K_ZERO:
		sc_add(sh, SC_ZERO, -1);
		break;
	case K_DISK:
		sc_add(sh, SC_DISK, -1);
		zswap_wb_punch(z, n->offset);
		break;
	}
	zswap_unlink(sh, n);
	free(n);
}

/*
 * A rejected store: the page goes to the caller's swap device, so whatever
 * the offset held is stale (zswap_store's check_old).  A rejection while the
 * pool is full wakes the shrink worker.
 */
static int reject(struct zs_zswap *z, uint64_t offset, int rc)
{
	struct zw_shard *sh = zw_shard_of(z, offset);
	struct zw_node *n;

	mutex_lock_ranked(&sh->lock, ZS_LOCK_ZSWAP_SHARD);
	n = zswap_lookup(sh, offset);
	if (n)
		drop_locked(z, sh, n, 0);
	mutex_unlock_ranked(&sh->lock);
	if (atomic_load_explicit(&z->reached_full, memory_order_relaxed))
		zswap_worker_queue(z);
	return rc;
}

/* The swap layer's zero-page bypass: mark, never store. */
static int store_zero(struct zs_zswap *z, uint64_t offset)
{
	struct zw_shard *sh = zw_shard_of(z, offset);
	struct zw_node *nn = malloc(sizeof(*nn)), *n;
	int rc = ZS_ZSWAP_ZERO;

	mutex_lock_ranked(&sh->lock, ZS_LOCK_ZSWAP_SHARD);
	n = zswap_lookup(sh, offset);
	if (n && n->kind == K_ZERO) {
		free(nn);
	} else {
		if (n)
			drop_locked(z, sh, n, 0);
		if (nn) {
			memset(nn, 0, sizeof(*nn));
			nn->offset = offset;
			nn->kind = K_ZERO;
			zswap_insert(sh, nn);
			sc_add(sh, SC_ZERO, 1);
		} else {
			rc = -ENOMEM;
		}
	}
	if (rc > 0)
		sc_add(sh, SC_SWPOUT_ZERO, 1);
	mutex_unlock_ranked(&sh->lock);
	return rc;
}

/* Steps 2-3 of the kernel's order: memory.zswap.max, then the pool limit. */
static int admit(struct zs_zswap *z, unsigned group)
{
	struct zw_group *g = &z->groups[group];
	uint64_t max = atomic_load_explicit(&g->max_bytes, memory_order_relaxed);

	if (unlikely(max != ZS_ZSWAP_NO_LIMIT)) {
		if (max == 0)
			return -EDQUOT;
		/* Checked before storing (the kernel's obj_cgroup_may_zswap): one store may go over. */
		if (atomic_load_explicit(&g->charged, memory_order_relaxed) >= max &&
		    zswap_group_shrink(z, group))
			return -EDQUOT;
	}
	if (zswap_pool_full(z))
		return -ENOSPC;
	return 0;
}

static int group_writeback(struct zs_zswap *z, unsigned group)
{
	return atomic_load_explicit(&z->groups[group].writeback, memory_order_relaxed);
}

/* Allocate, write and publish the object; nn is consumed. */
static int commit(struct zs_zswap *z, struct zw_node *nn, uint64_t offset, unsigned group,
		  const void *data, size_t len, unsigned flags)
{
	struct zw_shard *sh = zw_shard_of(z, offset);
	struct zw_group *g = &z->groups[group];
	struct zw_node *old;
	unsigned long h;

	/* Allocated and written in one call (zs_backend_malloc_write); -EIO: a refused write. */
	h = data ? zs_backend_malloc_write(z->b, data, len) : zs_backend_malloc(z->b, len);
	if (unlikely(ZS_IS_ERR(h))) {
		int e = (int)ZS_ERR(h);

		/* The kernel counts an allocator's -ENOSPC (object too large) as a poor compression. */
		if (e != -EIO)
			ev_inc(z, e == -ENOSPC ? EV_COMP_POOR : EV_ALLOC_FAIL);
		free(nn);
		return reject(z, offset, e);
	}
	memset(nn, 0, sizeof(*nn));
	nn->offset = offset;
	nn->handle = h;
	nn->len = (uint32_t)len;
	nn->group = (uint16_t)group;
	nn->kind = K_ENTRY;
	nn->flags = (uint8_t)(flags | NF_REFERENCED);

	mutex_lock_ranked(&sh->lock, ZS_LOCK_ZSWAP_SHARD);
	old = zswap_lookup(sh, offset);
	if (old)
		drop_locked(z, sh, old, 0);
	zswap_insert(sh, nn);
	zswap_lru_add(z, sh, nn);
	sc_add(sh, SC_STORED, 1);
	sc_add(sh, SC_BYTES, (int64_t)len);
	sc_add(sh, SC_ZSWPOUT, 1);
	if (flags & NF_RAW)
		sc_add(sh, SC_INCOMP, 1);
	g_add(&g->charged, (int64_t)len);
	g_add(&g->pages, 1);
	g_add(&g->zswpout, 1);
	mutex_unlock_ranked(&sh->lock);
	return 0;
}

int zs_zswap_store(struct zs_zswap *z, uint64_t offset, const void *page, unsigned group)
{
	struct zw_stream *s;
	struct zw_node *nn;
	size_t ps;
	int n, rc;

	if (unlikely(!args_ok(z, offset, group) || !page))
		return -EINVAL;
	ps = z->page_size;
	if (unlikely(page_is_zero(page, ps)))
		return store_zero(z, offset);
	if (unlikely((rc = admit(z, group))))
		return reject(z, offset, rc);
	nn = malloc(sizeof(*nn));
	if (unlikely(!nn)) {
		ev_inc(z, EV_KMEM_FAIL);
		return reject(z, offset, -ENOMEM);
	}
	s = zswap_stream_get(z);
	n = zs_compress(s->comp, page, ps, s->buf, s->buf_cap);
	if (likely(n > 0 && (size_t)n < ps)) {
		rc = commit(z, nn, offset, group, s->buf, (size_t)n, 0);
		zswap_stream_put(s);
		return rc;
	}
	zswap_stream_put(s);
	/* Not smaller than a page: kept raw, to keep its place in the LRU, unless the group
	 * cannot write back, where a raw page only adds overhead. */
	if (!group_writeback(z, group)) {
		free(nn);
		if (n >= (int)ps || n == -ENOSPC) {
			ev_inc(z, EV_COMP_POOR);
			return reject(z, offset, -E2BIG);
		}
		ev_inc(z, EV_COMP_FAIL);
		return reject(z, offset, -EIO);
	}
	return commit(z, nn, offset, group, page, ps, NF_RAW);
}

int zs_zswap_store_compressed(struct zs_zswap *z, uint64_t offset, const void *cdata, size_t clen,
			      unsigned group)
{
	unsigned char *tmp = NULL;
	struct zw_node *nn;
	const void *data = cdata;
	unsigned flags = cdata ? 0 : NF_NODATA;
	size_t ps, len = clen;
	int rc;

	if (unlikely(!args_ok(z, offset, group) || clen > z->comp_bound))
		return -EINVAL;
	ps = z->page_size;
	if (clen == 0)
		return store_zero(z, offset);
	if (clen >= ps) {
		flags |= NF_RAW;
		len = ps;
		if (cdata) {
			struct zw_stream *s;

			/* Validated before any side effect: a bad input changes nothing. */
			tmp = malloc(ps);
			if (!tmp)
				return -ENOMEM;
			s = zswap_stream_get(z);
			rc = zs_decompress(s->comp, cdata, clen, tmp, ps);
			zswap_stream_put(s);
			if (rc != (int)ps) {
				free(tmp);
				return -EINVAL;
			}
			data = tmp;
		}
	}
	if (unlikely((rc = admit(z, group)))) {
		free(tmp);
		return reject(z, offset, rc);
	}
	if ((flags & NF_RAW) && !group_writeback(z, group)) {
		free(tmp);
		ev_inc(z, EV_COMP_POOR);
		return reject(z, offset, -E2BIG);
	}
	nn = malloc(sizeof(*nn));
	if (unlikely(!nn)) {
		free(tmp);
		ev_inc(z, EV_KMEM_FAIL);
		return reject(z, offset, -ENOMEM);
	}
	rc = commit(z, nn, offset, group, data, len, flags);
	free(tmp);
	return rc;
}

/* ---- Load, invalidate ---- */

int zs_zswap_load(struct zs_zswap *z, uint64_t offset, void *page)
{
	struct zw_shard *sh;
	struct zw_stream *s;
	struct zw_node *n;
	int rc;

	if (unlikely(!z || offset >= ZS_ZSWAP_MAX_OFFSET || !page))
		return -EINVAL;
	sh = zw_shard_of(z, offset);
	s = zswap_stream_get(z);
	mutex_lock_ranked(&sh->lock, ZS_LOCK_ZSWAP_SHARD);
	n = zswap_lookup(sh, offset);
	if (!n) {
		rc = -ENOENT;
	} else if (n->kind == K_ZERO) {
		memset(page, 0, z->page_size);
		sc_add(sh, SC_SWPIN_ZERO, 1);
		drop_locked(z, sh, n, 0);
		rc = ZS_ZSWAP_ZERO;
	} else if (n->kind == K_DISK) {
		rc = zswap_wb_read(z, offset, page);
		if (rc) {
			memset(page, 0, z->page_size);
			rc = -EIO;
		} else {
			sc_add(sh, SC_PSWPIN, 1);
			drop_locked(z, sh, n, 0);
			rc = ZS_ZSWAP_DISK;
		}
	} else if (zswap_entry_read(z, s, n, page)) {
		memset(page, 0, z->page_size);
		sc_add(sh, SC_DECOMP_FAIL, 1);
		rc = -EIO;
	} else {
		rc = (n->flags & NF_NODATA) ? ZS_ZSWAP_NODATA : 0;
		sc_add(sh, SC_ZSWPIN, 1);
		g_add(&z->groups[n->group].zswpin, 1);
		drop_locked(z, sh, n, z->deferred);
	}
	mutex_unlock_ranked(&sh->lock);
	zswap_stream_put(s);
	return rc;
}

int zs_zswap_invalidate(struct zs_zswap *z, uint64_t offset)
{
	struct zw_shard *sh;
	struct zw_node *n;
	int rc = 0;

	if (unlikely(!z || offset >= ZS_ZSWAP_MAX_OFFSET))
		return -EINVAL;
	sh = zw_shard_of(z, offset);
	mutex_lock_ranked(&sh->lock, ZS_LOCK_ZSWAP_SHARD);
	n = zswap_lookup(sh, offset);
	if (n)
		drop_locked(z, sh, n, z->deferred);
	else
		rc = -ENOENT;
	mutex_unlock_ranked(&sh->lock);
	return rc;
}
