/*
 * zs replay --deferred-held N: a model check of deferred free while frees
 * are queued.  Plain --deferred drains the queue before every comparison
 * with the kernel, so the pages a pool holds while frees wait are never
 * looked at.  Here the pool (no worker) keeps up to N frees queued and
 * drains them as one flush; beside it a synchronous pool of the same
 * configuration (the model) holds the same frees back and, when the pool
 * drains, frees them in the order the drain does: batches of the queue's
 * drain size in queue order, each batch by physical class, queue order kept
 * within a class (src/zsmalloc/deferred.c).  At every record the two pools'
 * pages must be equal: queued objects keep exactly their own memory, and a
 * batched drain leaves what the same frees one at a time leave.  The kernel
 * ran no deferral, so the kernel's counts are compared only at records with
 * nothing queued; the rest is a check of libzs against its own model, and
 * the report says which is which.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "zs/zsmalloc.h"

/* The drain's batch (DRAIN_BATCH in src/zsmalloc/deferred.c): its order is the model's. */
#define HELD_BATCH 256

struct held {
	unsigned long h; /* the model's handle */
	int cls;
	size_t pos;
};

int held_setup(struct replay *R, const struct zs_pool_config *cfg)
{
	struct zs_pool_config mc = *cfg;
	/* The model frees at once: page-deferred would hold emptied zspages' pages back (its
	 * layout is the kernel's, so the kernel's mode stands in for it; percpu-deferred is
	 * refused: its frees bypass the queue this check holds). */
	if (mc.free_mode == ZS_FREE_PAGE_DEFERRED)
		mc.free_mode = ZS_FREE_POOL_LOCK;
	if (zs_pool_create(&mc, &R->shadow, NULL, 0))
		return -ENOMEM;
	R->held = calloc((size_t)R->o.held, sizeof(*R->held));
	if (!R->shadow || !R->held)
		return -ENOMEM;
	return 0;
}

/* The pool's config for the held replay: no worker, a queue that never overflows. */
void held_pool_config(const struct replay *R, struct zs_pool_config *cfg)
{
	size_t cap = 16;
	while (cap < (size_t)R->o.held)
		cap *= 2;
	cfg->deferred_worker = -1;
	cfg->deferred_capacity = cap;
}

int held_alloc(struct replay *R, unsigned long *out, size_t req, long line)
{
	unsigned long h = zs_malloc(R->shadow, req);
	if (ZS_IS_ERR(h)) {
		fprintf(stderr, "zs replay: line %ld: the model's zs_malloc(%zu) failed: %s\n", line,
			req, strerror(-ZS_ERR(h)));
		return 2;
	}
	*out = h;
	return 0;
}

static int by_class_then_pos(const void *a, const void *b)
{
	const struct held *x = a, *y = b;
	if (x->cls != y->cls)
		return x->cls < y->cls ? -1 : 1;
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* The pool drains everything queued; the model frees the same, in the drain's order. */
void held_drain(struct replay *R)
{
	if (!R->nheld)
		return;
	zs_free_deferred_flush(R->pool);
	for (size_t b = 0; b < R->nheld; b += HELD_BATCH) {
		size_t n = R->nheld - b < HELD_BATCH ? R->nheld - b : HELD_BATCH;
		qsort(R->held + b, n, sizeof(*R->held), by_class_then_pos);
		for (size_t i = b; i < b + n; i++)
			zs_free(R->shadow, R->held[i].h);
	}
	R->nheld = 0;
	R->held_drains++;
}

int held_free(struct replay *R, struct slot *s, long line)
{
	int ret = zs_free_deferred(R->pool, s->handle);
	if (ret) {
		fprintf(stderr, "zs replay: line %ld: zs_free_deferred(%#lx) failed: %s\n", line,
			s->handle, strerror(-ret));
		return 2;
	}
	size_t req = (s->flags & SL_HUGE) ? R->page_size : s->size;
	struct held *e = &R->held[R->nheld];
	e->h = s->shadow_h;
	e->cls = zs_lookup_class_index(R->shadow, req + ZS_HANDLE_SIZE); /* as zs_malloc */
	e->pos = R->nheld++;
	if (R->nheld == (size_t)R->o.held)
		held_drain(R);
	return 0;
}

/* After an operation: the pool against its model.  1 when they differ. */
int held_record(struct replay *R, uint64_t pool_pages)
{
	uint64_t model = zs_get_total_pages(R->shadow);
	R->held_records++;
	R->held_queued_records += R->nheld > 0;
	if (model == pool_pages)
		return 0;
	if (!R->held_bad++ && !R->o.json)
		fprintf(stderr, "zs replay: --deferred-held: record %ld: the pool holds %llu pages "
				"with %zu frees queued, its model %llu\n", R->records,
			(unsigned long long)pool_pages, R->nheld, (unsigned long long)model);
	return 1;
}

void held_free_all(struct replay *R)
{
	if (R->shadow)
		zs_destroy_pool(R->shadow);
	R->shadow = NULL;
	free(R->held);
	R->held = NULL;
}
