/*
 * What the page provider's per-CPU side (cache.c) shares with the files
 * split from it: release.c (pages back to the OS) and runs.c (free runs in
 * a chunk's bitmap) below it, trim.c (trims and the owner's parked pages)
 * above it.  Private to src/pages; lock held unless said.
 */
#ifndef ZS_PAGES_CACHE_H
#define ZS_PAGES_CACHE_H

#include "pages/internal.h"
#include "common/hints.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

static inline struct zs_pcp *this_pcp(struct zs_pages *p)
{
	int cpu = current_cpu();
	return &p->pcp[cpu > 0 ? (unsigned)cpu % p->npcp : 0];
}

static inline void add_relaxed(_Atomic long *v, long d)
{
	atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + d,
			      memory_order_relaxed);
}

/* Lock held: a count from before a fork is of threads the child does not have. */
static inline void releasing_sync(struct zs_pages *p)
{
	unsigned gen = purge_fork_gen();

	if (p->releasing_gen != gen) {
		p->releasing = 0;
		p->releasing_gen = gen;
	}
}

/* Lock held: one more page RELEASING (taken for release_pages). */
static inline void releasing_take(struct zs_pages *p)
{
	releasing_sync(p);
	p->releasing++;
}

/* release.c, lock NOT held: RELEASING pages back to the OS, empty chunks unmapped. */
void pages_release(struct zs_pages *p, pfn_t *rel, unsigned nrel);
/* runs.c: the lowest partly used chunk with n free pages in a row. */
bool pages_find_run(struct zs_pages *p, unsigned n, pfn_t *out);

/* cache.c, for trim.c: wake the purge thread; release what must go (lock NOT held). */
void pages_kick(struct zs_pages *p);
void pages_purge(struct zs_pages *p, bool force);
/* cache.c: the purge thread's pass over one provider (handed over by a kick). */
uint64_t pages_idle_pass(struct zs_pages *p, uint64_t now);
/* cache.c: every per-CPU cache emptied into the shared one (lock NOT held). */
void pages_pcp_drain_all(struct zs_pages *p);
/* cache.c: a park of n pages fits the budget; the first park after a fork asks for a kick. */
bool pages_park_fits(struct zs_pages *p, unsigned n);
bool pages_take_park_rekick(struct zs_pages *p);

#endif
