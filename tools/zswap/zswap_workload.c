/*
 * `zs zswap`'s runs: one plan (zswap_plan.c) through libzs's zswap front end
 * on one backend: the fill, the churn (timed per operation kind, with the
 * pool-page series and --shrinker's pressure), compaction and the drain that
 * checks every page byte for byte.  The one file that drives zs/zswap.h, so
 * what a row of the output measures is decided here and nowhere else.
 */
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "zs/harness.h"
#include "zswap_cmd.h"

static int do_store(struct zs_zswap *z, const struct input *in, uint64_t off, uint32_t item)
{
	if (in->ps)
		return zs_zswap_store(z, off, in->ps->data + (size_t)item * in->ps->page_size, 0);
	return zs_zswap_store_compressed(z, off, NULL, in->sizes[item], 0);
}

static int make_zswap(const struct opts *o, const char *backend, uint64_t total_ram,
		      unsigned max_pool, struct zs_zswap **z, char *err, size_t errlen)
{
	struct zs_zswap_config cfg;

	zs_zswap_config_init(&cfg);
	cfg.comp = o->comp;
	cfg.backend.kind = backend;
	cfg.backend.zs = o->po.cfg;
	cfg.backend.zs.page_size = 0;
	cfg.deferred_free = o->po.deferred;
	cfg.total_ram = total_ram;
	cfg.max_pool_percent = max_pool;
	cfg.backing_path = o->backing;
	cfg.shrinker_enabled = o->shrinker;
	return zs_zswap_create(&cfg, z, err, errlen);
}

/* Per entry: its offset (while stored) and where it is. */
enum { E_NONE, E_ZSWAP, E_DISK };

/* Pool pages at the end of every interval that ends by op `done` (every `every`-th kept). */
static void record_series(struct zs_zswap *z, const struct plan *p, struct run *r,
			  size_t *next_int, size_t every, size_t done)
{
	for (; *next_int < p->nint && p->iend[*next_int] <= done; (*next_int)++) {
		struct zs_zswap_stats st;

		if ((*next_int % every != every - 1 && *next_int != p->nint - 1) ||
		    r->nseries >= SERIES_MAX)
			continue;
		zs_zswap_get_stats(z, &st, sizeof(st));
		r->series_t[r->nseries] = p->kt ? p->kt[*next_int] : (double)p->iend[*next_int];
		r->series_pool[r->nseries] = st.pool_pages;
		r->series_stored[r->nseries++] = st.stored_pages;
	}
}

/* --shrinker: at the end of each interval, the shrinker scans an eighth of what it counts (a
 * steady, moderate pressure; the kernel's share depends on reclaim priority). */
static void shrink_at_interval(struct zs_zswap *z, const struct plan *p, size_t *next, size_t done)
{
	int ended = 0;

	for (; *next < p->nint && p->iend[*next] <= done; (*next)++)
		ended = 1;
	if (ended) {
		unsigned long n = zs_zswap_shrink_count(z);
		if (n)
			zs_zswap_shrink(z, n / 8 + 1);
	}
}

int run_plan(const struct opts *o, const char *backend, const struct plan *p,
		    const struct input *in, uint64_t total_ram, unsigned max_pool, int drain,
		    struct run *r)
{
	struct zs_zswap *z = NULL;
	uint64_t *off = calloc(p->nids ? p->nids : 1, sizeof(*off));
	uint8_t *where = calloc(p->nids ? p->nids : 1, 1);
	uint64_t *freelist = malloc((p->nids ? p->nids : 1) * sizeof(*freelist));
	size_t nfree = 0, nextoff = 0, psz = 4096;
	unsigned char *buf = NULL;
	double t, tw = tool_now();
	int rc;

	memset(r, 0, sizeof(*r));
	r->backend = backend;
	if (!off || !where || !freelist) {
		snprintf(r->err, sizeof(r->err), "out of memory");
		goto out;
	}
	rc = make_zswap(o, backend, total_ram, max_pool, &z, r->err, sizeof(r->err));
	if (rc) {
		size_t l = strlen(r->err);
		snprintf(r->err + l, sizeof(r->err) - l, "%s%s", l ? ": " : "", strerror(-rc));
		z = NULL;
		goto out;
	}
	psz = zs_zswap_page_size(z);
	if (!(buf = malloc(psz))) {
		snprintf(r->err, sizeof(r->err), "out of memory");
		goto out;
	}

	/* Fill. */
	t = tool_now();
	for (size_t i = 0; i < p->nfill; i++) {
		off[i] = nextoff++;
		rc = do_store(z, in, off[i], p->item[i]);
		where[i] = rc >= 0 ? E_ZSWAP : E_DISK;
		r->rejected += rc < 0;
	}
	r->fill.n_store = p->nfill;
	r->fill.store_ns = p->nfill ? (tool_now() - t) * 1e9 / (double)p->nfill : 0;
	zs_zswap_flush(z);
	zs_zswap_get_stats(z, &r->fill.st, sizeof(r->fill.st));

	/* Churn, timed per operation kind. */
	double ts = 0, tl = 0, ti = 0;
	size_t next_int = 0, every = p->nint > SERIES_MAX ? (p->nint + SERIES_MAX - 1) / SERIES_MAX : 1;
	size_t next_shrink = 0;
	record_series(z, p, r, &next_int, every, 0);
	for (size_t k = 0; k < p->nops; k++) {
		const struct op *op = &p->ops[k];
		uint32_t id = op->id;

		if (op->type == OP_STORE) {
			off[id] = nfree ? freelist[--nfree] : nextoff++;
			t = tool_now();
			rc = do_store(z, in, off[id], p->item[id]);
			ts += tool_now() - t;
			where[id] = rc >= 0 ? E_ZSWAP : E_DISK;
			r->rejected += rc < 0;
			r->churn.n_store++;
		} else {
			if (where[id] == E_ZSWAP) {
				t = tool_now();
				if (op->type == OP_LOAD) {
					rc = zs_zswap_load(z, off[id], buf);
					tl += tool_now() - t;
					if (rc == ZS_ZSWAP_DISK)
						r->disk_loads++;
					if (in->ps && rc >= 0 && rc != ZS_ZSWAP_NODATA &&
					    memcmp(buf, in->ps->data + (size_t)p->item[id] * psz, psz))
						r->mismatches++;
				} else {
					zs_zswap_invalidate(z, off[id]);
					ti += tool_now() - t;
				}
			} else if (op->type == OP_LOAD) {
				r->disk_loads++;
			}
			if (op->type == OP_LOAD)
				r->churn.n_load++;
			else
				r->churn.n_inval++;
			where[id] = E_NONE;
			freelist[nfree++] = off[id];
		}
		if (o->shrinker)
			shrink_at_interval(z, p, &next_shrink, k + 1);
		record_series(z, p, r, &next_int, every, k + 1);
	}
	r->churn.store_ns = r->churn.n_store ? ts * 1e9 / (double)r->churn.n_store : 0;
	r->churn.load_ns = r->churn.n_load ? tl * 1e9 / (double)r->churn.n_load : 0;
	r->churn.inval_ns = r->churn.n_inval ? ti * 1e9 / (double)r->churn.n_inval : 0;
	zs_zswap_flush(z);
	zs_zswap_get_stats(z, &r->churn.st, sizeof(r->churn.st));

	r->compacted_pages = zs_zswap_compact(z);
	zs_zswap_flush(z);
	zs_zswap_get_stats(z, &r->compacted.st, sizeof(r->compacted.st));

	/* Drain: load every live entry back (FILE mode checks each byte). */
	if (drain) {
		t = tool_now();
		for (size_t id = 0; id < p->nids; id++) {
			if (where[id] != E_ZSWAP)
				continue;
			rc = zs_zswap_load(z, off[id], buf);
			r->drain.n_load++;
			if (rc == ZS_ZSWAP_DISK)
				r->disk_loads++;
			if (in->ps && rc >= 0 && rc != ZS_ZSWAP_NODATA &&
			    memcmp(buf, in->ps->data + (size_t)p->item[id] * psz, psz))
				r->mismatches++;
			if (in->ps && rc < 0)
				r->mismatches++;
		}
		r->drain.load_ns = r->drain.n_load ? (tool_now() - t) * 1e9 / (double)r->drain.n_load : 0;
		zs_zswap_flush(z);
		zs_zswap_get_stats(z, &r->drain.st, sizeof(r->drain.st));
	}
	r->ok = 1;
out:
	r->wall_s = tool_now() - tw;
	zs_zswap_destroy(z);
	free(buf);
	free(off);
	free(where);
	free(freelist);
	return r->ok ? 0 : -1;
}
