/*
 * The page provider's entry points for what is not an allocation or a
 * free: trims, the decay and the purge thread's kick asked for by an owner,
 * the owner's parked pages in the process-wide budget (zsmalloc's parked
 * zspages, pages.h) and pages given straight back (pages_release_bulk).
 * Apart from cache.c because none of it is on the allocation or free path;
 * it calls cache.c and below, nothing calls it from there.
 */
#include "pages/internal.h"
#include "pages/cache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

void pages_trim(struct zs_pages *p)
{
	if (!p)
		return;
	pages_pcp_drain_all(p);
	pages_purge(p, true);
	/* Pages another thread took for release before ours: wait until they are gone too. */
	mutex_lock_ranked(&p->lock, ZS_LOCK_PAGES_PROVIDER);
	p->trim_waiters++;
	releasing_sync(p);
	while (p->releasing)
		pthread_cond_wait(&p->released, &p->lock);
	p->trim_waiters--;
	mutex_unlock_ranked(&p->lock);
}

void pages_idle_kick(struct zs_pages *p, uint64_t due)
{
	if (p && p->registered && p->idle_work)
		purge_kick(due, pages_idle_pass);
}

void pages_decay(struct zs_pages *p)
{
	if (p)
		pages_purge(p, false);
}

bool pages_parks(const struct zs_pages *p)
{
	return p->reclaim != NULL;
}

bool pages_park_room(struct zs_pages *p, unsigned n)
{
	return p->reclaim && pages_park_fits(p, n);
}

/* Cache c's unsynced count of the owner's parked pages into the process total. */
static bool owner_fold(struct zs_pages *p, struct zs_pcp *c)
{
	bool started = false;
	long take = atomic_exchange_explicit(&c->owner_unsynced, 0, memory_order_relaxed);
	if (take) {
		atomic_fetch_add_explicit(&p->owner_in_budget, take, memory_order_relaxed);
		purge_budget_add(take * (long)p->page_size, &started);
	}
	return started;
}

void pages_park_note(struct zs_pages *p, long delta_pages)
{
	struct zs_pcp *c = this_pcp(p);
	long v = atomic_fetch_add_explicit(&c->owner_unsynced, delta_pages, memory_order_relaxed) +
		 delta_pages;
	if (v < (long)PARK_SYNC && v > -(long)PARK_SYNC)
		return;
	/* Whatever is there now, another thread's note on this CPU's slot included. */
	bool started = owner_fold(p, c);
	if ((v > 0 && pages_take_park_rekick(p)) || started)
		pages_kick(p);
}

void pages_park_released(struct zs_pages *p, unsigned long pages, bool may_kick)
{
	atomic_fetch_sub_explicit(&p->owner_in_budget, (long)pages, memory_order_relaxed);
	purge_budget_add(-(long)(pages * p->page_size), NULL);
	/*
	 * The CPUs' unsynced counts too: left there, a pool's parks and takes
	 * net of them (up to PARK_SYNC a CPU, either way) would keep the
	 * process total off the truth after everything went back, and a total
	 * stuck above the thread's start means no later park ever crosses it to
	 * start the thread again.
	 */
	bool started = false;
	for (unsigned i = 0; i < p->npcp; i++)
		started |= owner_fold(p, &p->pcp[i]);
	if (started && may_kick)
		pages_kick(p);
}

void pages_release_bulk(struct zs_pages *p, const pfn_t *pfns, unsigned n)
{
	pfn_t rel[RELEASE_MAX];

	for (unsigned i = 0; i < n; i += RELEASE_MAX) {
		unsigned k = n - i < RELEASE_MAX ? n - i : RELEASE_MAX, nrel = 0;
		mutex_lock_ranked(&p->lock, ZS_LOCK_PAGES_PROVIDER);
		for (unsigned j = 0; j < k; j++) {
			pfn_t pfn = pfns[i + j];
			if (!pages_valid(p, pfn))
				continue;
			/* Bit and ninuse stay until release_pages: the chunk stays mapped meanwhile. */
			set_state(p, pfn, PG_RELEASING);
			releasing_take(p);
			rel[nrel++] = pfn;
		}
		add_relaxed(&p->in_use, -(long)nrel);
		p->frees += nrel;
		mutex_unlock_ranked(&p->lock);
		pages_release(p, rel, nrel);
	}
}
