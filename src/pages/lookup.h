/*
 * The page provider's lock-free lookups (pfn -> address, pfn -> descriptor)
 * as inline functions for the allocators in this library.
 *
 * Why a second, internal header: these two lookups run on every object
 * access, and as calls into pages.c they cost about a fifth of zsmalloc's own
 * instructions on the read/write path (callgrind, bench_api).  Inlining needs
 * the lookup fields' layout, which stays out of pages.h (the provider's
 * interface); pages_addr()/pages_desc() there remain the entry points
 * and are these same functions.
 *
 * struct zs_pages begins with struct zs_pages_lookup, so a provider pointer
 * is also a pointer to its lookup fields (C11 6.7.2.1: a pointer to a struct
 * converts to a pointer to its first member).
 */
#ifndef ZS_PAGES_LOOKUP_H
#define ZS_PAGES_LOOKUP_H

#include <stdatomic.h>
#include "pages/pages.h"

/* One chunk-table entry; read without the lock.  32 bytes: an index is one shift. */
struct zs_pages_slot {
	_Atomic(char *) base;                 /* chunk data, NULL when unmapped */
	_Atomic(struct zs_page_desc *) meta;  /* set once on first use, kept until destroy */
	_Atomic(void **) owners;              /* meta's owner words (pages_set_owner), set with it */
	void *unused;
};
_Static_assert(sizeof(struct zs_pages_slot) == 32, "a slot index is one shift");

/* Read-only after create; grouped so a lookup touches one cache line. */
struct zs_pages_lookup {
	struct zs_pages_slot *slots;
	unsigned page_shift;
	unsigned ppc_shift;  /* log2(pages per chunk) */
	pfn_t ppc_mask;
};

static inline const struct zs_pages_lookup *pages_lk(const struct zs_pages *p)
{
	return (const struct zs_pages_lookup *)(const void *)p;
}

/* pfn must be a page the caller holds (allocated, not yet freed). */
static inline void *pages_lookup_addr(const struct zs_pages *p, pfn_t pfn)
{
	const struct zs_pages_lookup *lk = pages_lk(p);
	char *base = atomic_load_explicit(&lk->slots[pfn >> lk->ppc_shift].base,
					  memory_order_relaxed);
	return base + ((size_t)(pfn & lk->ppc_mask) << lk->page_shift);
}

static inline struct zs_page_desc *zs_page_desc(const struct zs_pages *p, pfn_t pfn)
{
	const struct zs_pages_lookup *lk = pages_lk(p);
	return atomic_load_explicit(&lk->slots[pfn >> lk->ppc_shift].meta, memory_order_relaxed) +
	       (pfn & lk->ppc_mask);
}

/*
 * Both at once, from one read of the chunk-table slot (its two fields share
 * a line): an owned free needs the descriptor (its zspage) and the address
 * (its header), and two calls recompute the slot, since each atomic load
 * makes the compiler read the lookup fields again.
 */
static inline struct zs_page_desc *pages_lookup_desc_addr(const struct zs_pages *p, pfn_t pfn,
						     char **addr)
{
	const struct zs_pages_lookup *lk = pages_lk(p);
	const struct zs_pages_slot *s = &lk->slots[pfn >> lk->ppc_shift];
	size_t i = pfn & lk->ppc_mask;
	unsigned shift = lk->page_shift;
	*addr = atomic_load_explicit(&s->base, memory_order_relaxed) + (i << shift);
	return atomic_load_explicit(&s->meta, memory_order_relaxed) + i;
}

/*
 * A page's owner word (pages_set_owner), with its address.  The owner words
 * are an array of their own beside the descriptors, 8 bytes a page: a free
 * that asks which zspage holds an object's page reads one line per eight
 * pages, not a 64-byte descriptor a page.  On the application profile's
 * churn (bench_layout, cachegrind) the descriptor was the free's one
 * last-level miss in two; the array of a 40 MiB pool is 80 KiB and stays in
 * cache.
 */
static inline void *pages_lookup_owner_addr(const struct zs_pages *p, pfn_t pfn, char **addr)
{
	const struct zs_pages_lookup *lk = pages_lk(p);
	const struct zs_pages_slot *s = &lk->slots[pfn >> lk->ppc_shift];
	size_t i = pfn & lk->ppc_mask;
	void *owner = atomic_load_explicit(&s->owners, memory_order_relaxed)[i];
	*addr = atomic_load_explicit(&s->base, memory_order_relaxed) + (i << lk->page_shift);
	return owner;
}

static inline void *pages_lookup_owner(const struct zs_pages *p, pfn_t pfn)
{
	const struct zs_pages_lookup *lk = pages_lk(p);
	return atomic_load_explicit(&lk->slots[pfn >> lk->ppc_shift].owners,
				    memory_order_relaxed)[pfn & lk->ppc_mask];
}

/*
 * The one writer of a page's owner word.  For a page the caller holds; a
 * plain store: the owner's own locking orders it for its readers.  Returns
 * the page's descriptor, for a caller that writes it too (one slot lookup).
 * Unlike the descriptor, the owner word
 * is not cleared when the page is taken again: an owner sets it on each page
 * it takes before it hands out anything in that page.
 */
static inline struct zs_page_desc *pages_set_owner(struct zs_pages *p, pfn_t pfn, void *owner)
{
	const struct zs_pages_lookup *lk = pages_lk(p);
	const struct zs_pages_slot *s = &lk->slots[pfn >> lk->ppc_shift];
	size_t i = pfn & lk->ppc_mask;
	atomic_load_explicit(&s->owners, memory_order_relaxed)[i] = owner;
	return atomic_load_explicit(&s->meta, memory_order_relaxed) + i;
}

/*
 * Whether page pfn + 1 lies in pfn's chunk: its descriptor is then the next
 * one and its data the next page_size bytes, so a walk along a chain of
 * consecutive pages (a zspage's pages taken as a run) needs no table read.
 */
static inline int pages_lookup_next_in_chunk(const struct zs_pages *p, pfn_t pfn)
{
	return ((pfn + 1) & pages_lk(p)->ppc_mask) != 0;
}

#endif
