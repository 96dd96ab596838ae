/*
 * Giving the page provider's pages back to the OS: RELEASING pages
 * MADV_DONTNEED'd (neighbours in one call, outside the provider's lock),
 * then marked free, and chunks left with nothing in use or cached
 * unmapped.  Apart from cache.c because it is the one part that talks to
 * the OS about memory and calls nothing of the caches (cache.c, "Freeing",
 * says when pages get here).
 */
#include "pages/internal.h"
#include "pages/cache.h"

#include <pthread.h>
#include <sys/mman.h>

/* Lock held: n RELEASING pages are back with the OS; wake a trim waiting for none. */
static void released_locked(struct zs_pages *p, unsigned n)
{
	releasing_sync(p);
	assert_internal(p->releasing >= n);
	p->releasing -= n;
	if (!p->releasing && p->trim_waiters)
		pthread_cond_broadcast(&p->released);
}

static void sort_pfns(pfn_t *v, unsigned n)
{
	/* n <= RELEASE_MAX and usually nearly sorted. */
	for (unsigned i = 1; i < n; i++) {
		pfn_t x = v[i];
		unsigned j = i;
		for (; j > 0 && v[j - 1] > x; j--)
			v[j] = v[j - 1];
		v[j] = x;
	}
}

/*
 * Lock NOT held: give RELEASING pages back to the OS (neighbours share one
 * madvise), then mark them free and unmap the chunks left empty.
 */
void pages_release(struct zs_pages *p, pfn_t *rel, unsigned nrel)
{
	char *unmap[RELEASE_MAX];
	unsigned nunmap = 0;

	if (nrel == 0)
		return;
	sort_pfns(rel, nrel);
	for (unsigned i = 0; i < nrel;) {
		unsigned j = i + 1;
		while (j < nrel && rel[j] == rel[j - 1] + 1 && pfn_slot(p, rel[j]) == pfn_slot(p, rel[i]))
			j++;
		madvise(pages_lookup_addr(p, rel[i]), (size_t)(j - i) << p->lk.page_shift, MADV_DONTNEED);
		i = j;
	}
	mutex_lock_ranked(&p->lock, ZS_LOCK_PAGES_PROVIDER);
	for (unsigned i = 0; i < nrel; i++) {
		pfn_t pfn = rel[i];
		size_t slot = pfn_slot(p, pfn);
		bm_clr(meta_bits(p, meta_desc(p, slot)), pfn_idx(p, pfn));
		set_state(p, pfn, PG_FREE);
		p->chunks[slot].ninuse--;
		pages_partial_set(p, slot);
		if (p->chunks[slot].ninuse == 0 && p->chunks[slot].ncached == 0)
			unmap[nunmap++] = pages_chunk_unmap(p, slot);
	}
	if (!nunmap)
		released_locked(p, nrel);
	mutex_unlock_ranked(&p->lock);
	if (!nunmap)
		return;
	for (unsigned i = 0; i < nunmap; i++)
		munmap(unmap[i], p->chunk_bytes);
	/* Counted down only with the chunks unmapped: a waiting trim sees them gone. */
	mutex_lock_ranked(&p->lock, ZS_LOCK_PAGES_PROVIDER);
	released_locked(p, nrel);
	mutex_unlock_ranked(&p->lock);
}
