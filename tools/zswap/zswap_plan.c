/*
 * `zs zswap`'s workload as a plan: the fill, then the churn's stores, loads
 * and invalidates in intervals, made before any backend runs so that every
 * backend gets the very same operations (seeded), and with --sizes samples
 * the kernel's own counts per interval.  Apart from running the plan
 * (zswap_workload.c) so that what is measured and how it is driven can be
 * read and changed separately.
 */
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "zswap_cmd.h"

void plan_free(struct plan *p)
{
	free(p->ops);
	free(p->item);
	free(p->iend);
	free(p->kt);
	free(p->kpool);
	memset(p, 0, sizeof(*p));
}

static int plan_op(struct plan *p, int type, uint32_t id)
{
	if (p->nops == p->opcap) {
		struct op *n = realloc(p->ops, (p->opcap = p->opcap ? p->opcap * 2 : 65536) * sizeof(*n));
		if (!n)
			return -1;
		p->ops = n;
	}
	p->ops[p->nops++] = (struct op){ (uint32_t)type, id };
	if (type == OP_STORE)
		p->stores++;
	else if (type == OP_LOAD)
		p->loads++;
	else
		p->invals++;
	return 0;
}

static int plan_id(struct plan *p, uint32_t item, uint32_t *id)
{
	if (p->nids >= (1u << 30) - 1)
		return -1;
	if (p->nids == p->idcap) {
		uint32_t *n = realloc(p->item, (p->idcap = p->idcap ? p->idcap * 2 : 65536) * sizeof(*n));
		if (!n)
			return -1;
		p->item = n;
	}
	p->item[p->nids] = item;
	*id = (uint32_t)p->nids++;
	return 0;
}

/* The live entries while a plan is made: a set with uniform random removal. */
struct live {
	uint32_t *v;
	size_t n, cap;
};

static int live_add(struct live *l, uint32_t id)
{
	if (l->n == l->cap) {
		uint32_t *n = realloc(l->v, (l->cap = l->cap ? l->cap * 2 : 65536) * sizeof(*n));
		if (!n)
			return -1;
		l->v = n;
	}
	l->v[l->n++] = id;
	return 0;
}

static uint32_t live_take(struct live *l, uint64_t *rng)
{
	size_t k = tool_rand64(rng) % l->n;
	uint32_t id = l->v[k];
	l->v[k] = l->v[--l->n];
	return id;
}

/*
 * One interval of the churn: `st` stores, `ld` loads and `iv` invalidates in
 * a random interleaving (each next op drawn in proportion to what is left;
 * a removal with nothing live becomes a store first).  Victims are uniform
 * over the live entries; a store's item is drawn from 0..nitems-1.
 */
static int plan_interval(struct plan *p, struct live *l, uint64_t st, uint64_t ld, uint64_t iv,
			 size_t nitems, uint64_t *rng)
{
	while (st + ld + iv) {
		uint64_t r = tool_rand64(rng) % (st + ld + iv);
		int type = r < st ? OP_STORE : r < st + ld ? OP_LOAD : OP_INVAL;
		uint32_t id;

		if (type != OP_STORE && l->n == 0) {
			if (!st)
				break; /* nothing to remove: the samples disagree; drop the rest */
			type = OP_STORE;
		}
		if (type == OP_STORE) {
			st--;
			if (plan_id(p, (uint32_t)(tool_rand64(rng) % nitems), &id) || live_add(l, id) ||
			    plan_op(p, OP_STORE, id))
				return -1;
		} else {
			if (type == OP_LOAD)
				ld--;
			else
				iv--;
			if (plan_op(p, type, live_take(l, rng)))
				return -1;
		}
	}
	size_t *n = realloc(p->iend, (p->nint + 1) * sizeof(*n));
	if (!n)
		return -1;
	p->iend = n;
	p->iend[p->nint++] = p->nops;
	return 0;
}

static int by_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/*
 * FILE mode, and --sizes without samples: fill every item, then `ops`
 * operations in 50 intervals, half stores of a random item, a quarter loads,
 * a quarter invalidates.
 */
int plan_synthetic(struct plan *p, size_t nitems, uint64_t ops, uint64_t seed)
{
	struct live l = { 0 };
	uint64_t rng = seed;
	int rc = 0;

	memset(p, 0, sizeof(*p));
	for (size_t i = 0; i < nitems && !rc; i++) {
		uint32_t id;
		rc = plan_id(p, (uint32_t)i, &id) || live_add(&l, id);
	}
	p->nfill = nitems;
	for (int k = 0; k < 50 && !rc; k++) {
		uint64_t n = ops / 50 + (k < (int)(ops % 50));
		rc = plan_interval(p, &l, n / 2, n / 4, n - n / 2 - n / 4, nitems, &rng);
	}
	p->survivors = l.n;
	free(l.v);
	return rc ? -1 : 0;
}

/*
 * --sizes with samples: each sample interval gets the kernel's stores
 * (zswpout delta), loads (zswpin delta) and invalidates (stores - loads -
 * the change of stored_pages: entries freed by a process's exit or munmap),
 * from an empty pool.  Then the entries live at the end, in store order, get
 * the captured sizes in swap-offset order (they are the same entries: the
 * kernel held exactly these at the freeze) and every other store a size
 * drawn from the capture.  Exact counts, synthetic order and victims.
 */
int plan_samples(struct plan *p, const struct capture *c, uint64_t seed)
{
	struct live l = { 0 };
	uint64_t rng = seed, carry = 0;
	int rc = 0;

	memset(p, 0, sizeof(*p));
	if (!(p->kt = calloc(c->ns, sizeof(*p->kt))) || !(p->kpool = calloc(c->ns, sizeof(*p->kpool))))
		return -1;
	for (size_t k = 1; k < c->ns && !rc; k++) {
		const uint64_t *a = c->sv[k - 1], *b = c->sv[k];
		uint64_t st = b[2] > a[2] ? b[2] - a[2] : 0, ld = b[3] > a[3] ? b[3] - a[3] : 0;
		int64_t dstored = (int64_t)b[0] - (int64_t)a[0];
		int64_t iv = (int64_t)st - (int64_t)ld - dstored;

		/* Counters are read one by one: a negative count waits for the next interval. */
		iv -= (int64_t)carry;
		carry = iv < 0 ? (uint64_t)-iv : 0;
		rc = plan_interval(p, &l, st, ld, iv > 0 ? (uint64_t)iv : 0, c->n, &rng);
		p->kt[p->nint - 1] = c->st[k];
		p->kpool[p->nint - 1] = b[1];
	}
	if (!rc) {
		qsort(l.v, l.n, sizeof(*l.v), by_u32);
		p->survivors = l.n;
		p->matched = l.n < c->n ? l.n : c->n;
		for (size_t i = 0; i < p->matched; i++)
			p->item[l.v[i]] = (uint32_t)i;
	}
	free(l.v);
	return rc ? -1 : 0;
}
