/*
 * zs replay --events FILE: every decision the pool made while replaying a
 * zram-trace, one line each (docs/trace-format.md, "Events"): the size class
 * each object went to, the zspages each class gained and lost, the objects
 * that span two pool pages, the objects compaction moved, and the pool's
 * pages at every record.  Read from the outside, through the public API
 * (zs_class_stats, zs_obj_read_sg_begin), so the allocator carries no hook
 * and pays nothing when no one asks: a class's zspage count is compared
 * before and after each operation that touched it, and compaction's moves
 * are the objects whose address changed across zs_compact.  Plain zsmalloc
 * replays only; the checks that the events add up to the trace's page
 * counts are in tests/cli/replay_events.sh.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "zs/zsmalloc.h"

struct replay_events {
	FILE *f;
	const char *path;
	int ncls;
	uint64_t *pages;      /* per physical class, as last written */
	const void **where;   /* per slot, before a compaction: its object's first byte */
	size_t nwhere;
	long resyncs;         /* records where the touched classes did not account for every page */
};

int events_open(struct replay *R, const char *path)
{
	struct replay_events *E = calloc(1, sizeof(*E));
	if (!E)
		return -1;
	E->f = strcmp(path, "-") ? fopen(path, "w") : stdout;
	if (!E->f) {
		fprintf(stderr, "zs replay: --events %s: cannot write: %s\n", path, strerror(errno));
		free(E);
		return -1;
	}
	E->path = path;
	R->ev = E;
	return 0;
}

/* The pool exists: size the per-class table and write the header. */
int events_begin(struct replay *R, unsigned chain, unsigned delta)
{
	struct replay_events *E = R->ev;
	E->ncls = zs_class_count(R->pool);
	E->pages = calloc((size_t)E->ncls, sizeof(*E->pages));
	if (!E->pages)
		return -1;
	fprintf(E->f, "# zs-events 1\n# trace %s\n# page_size %zu chain %u chain_policy %s delta %u\n",
		R->o.path, R->page_size, chain, zs_chain_policy_name(R->o.po.cfg.chain_policy),
		delta);
	return 0;
}

void events_op(struct replay *R, long line, const char *op)
{
	if (R->ev)
		fprintf(R->ev->f, "op %ld %s\n", line, op);
}

/* Write the zspages class cls gained or lost since it was last looked at. */
static void class_diff(struct replay *R, int cls)
{
	struct replay_events *E = R->ev;
	struct zs_class_stats st;
	if (cls < 0 || cls >= E->ncls || zs_class_stats(R->pool, cls, &st, sizeof(st)))
		return;
	uint64_t now = st.pages_used, ppz = st.pages_per_zspage ? st.pages_per_zspage : 1;
	/* One line per zspage of the class's length; a remainder (fit_zspages'
	 * shorter zspages) as one line of its own. */
	while (now > E->pages[cls]) {
		uint64_t d = now - E->pages[cls] >= ppz ? ppz : now - E->pages[cls];
		fprintf(E->f, "zspage+ %d %" PRIu64 "\n", cls, d);
		E->pages[cls] += d;
	}
	while (now < E->pages[cls]) {
		uint64_t d = E->pages[cls] - now >= ppz ? ppz : E->pages[cls] - now;
		fprintf(E->f, "zspage- %d %" PRIu64 "\n", cls, d);
		E->pages[cls] -= d;
	}
}

void events_alloc(struct replay *R, unsigned long idx, int cls, size_t req)
{
	if (!R->ev)
		return;
	struct zs_class_stats st;
	unsigned slot_size = zs_class_stats(R->pool, cls, &st, sizeof(st)) ? 0 : st.size;
	fprintf(R->ev->f, "alloc %lu %d %zu %u\n", idx, cls, req, slot_size);
	class_diff(R, cls);
}

void events_span(struct replay *R, unsigned long idx, const struct slot *s, int cls)
{
	if (R->ev && (s->flags & SL_SPAN))
		fprintf(R->ev->f, "span %lu %d\n", idx, cls);
}

/* Before zram frees the slot's object: its class, to diff after the free. */
int events_free_begin(struct replay *R, unsigned long idx, const struct slot *s)
{
	if (!R->ev || !s->used || (s->flags & SL_SAME))
		return -1;
	int cls = class_of(R, (s->flags & SL_HUGE) ? R->page_size : s->size);
	fprintf(R->ev->f, "free %lu %d\n", idx, cls);
	return cls;
}

void events_free_end(struct replay *R, int cls)
{
	if (R->ev && cls >= 0)
		class_diff(R, cls);
}

static const void *obj_addr(struct replay *R, const struct slot *s)
{
	struct zs_obj_piece sg[2];
	size_t len = (s->flags & SL_HUGE) ? R->page_size : s->size;
	if (zs_obj_read_sg_begin(R->pool, s->handle, len, sg) < 0)
		return NULL;
	zs_obj_read_sg_end(R->pool, s->handle);
	return sg[0].addr;
}

void events_compact_begin(struct replay *R)
{
	struct replay_events *E = R->ev;
	if (!E)
		return;
	if (E->nwhere < R->nslots) {
		const void **w = realloc(E->where, R->nslots * sizeof(*w));
		if (!w) {
			fprintf(E->f, "# out of memory: this compaction's moves are not listed\n");
			E->nwhere = 0;
			return;
		}
		E->where = w;
		E->nwhere = R->nslots;
	}
	for (size_t i = 0; i < R->nslots; i++) {
		const struct slot *s = &R->slots[i];
		E->where[i] = s->used && !(s->flags & SL_SAME) ? obj_addr(R, s) : NULL;
	}
}

void events_compact_end(struct replay *R)
{
	struct replay_events *E = R->ev;
	if (!E)
		return;
	for (size_t i = 0; i < R->nslots && i < E->nwhere; i++) {
		const struct slot *s = &R->slots[i];
		if (!E->where[i] || !s->used || (s->flags & SL_SAME))
			continue;
		if (obj_addr(R, s) != E->where[i])
			fprintf(E->f, "move %zu %d\n", i,
				class_of(R, (s->flags & SL_HUGE) ? R->page_size : s->size));
	}
	for (int c = 0; c < E->ncls; c++)
		class_diff(R, c);
}

void events_record(struct replay *R, uint64_t pages)
{
	struct replay_events *E = R->ev;
	if (!E)
		return;
	uint64_t sum = 0;
	for (int c = 0; c < E->ncls; c++)
		sum += E->pages[c];
	if (sum != pages) {
		/* Not expected: an operation changed a class it was not charged to.
		 * Every class is diffed so the lines still add up, and it is counted. */
		E->resyncs++;
		fprintf(E->f, "# resync: the classes touched held %" PRIu64 " pages, the pool %" PRIu64
			      "\n", sum, pages);
		for (int c = 0; c < E->ncls; c++)
			class_diff(R, c);
	}
	fprintf(E->f, "= %ld %" PRIu64 "\n", R->records, pages);
}

int events_close(struct replay *R)
{
	struct replay_events *E = R->ev;
	int rc = 0;
	if (!E)
		return 0;
	if (E->resyncs)
		fprintf(stderr, "zs replay: --events: %ld records needed a resync of every class\n",
			E->resyncs);
	if (E->f != stdout) {
		if (fclose(E->f)) {
			fprintf(stderr, "zs replay: --events %s: write failed\n", E->path);
			rc = -1;
		}
	} else {
		fflush(stdout);
	}
	free(E->pages);
	free(E->where);
	free(E);
	R->ev = NULL;
	return rc;
}
