/*
 * The search for n free pages in a row in the provider's partly used
 * chunks: a word at a time through each chunk's bitmap, from the lowest
 * chunk up.  Apart from cache.c because it is about the chunks' layout,
 * not about caching, and is its own small algorithm; it calls nothing of
 * the caches.
 */
#include "pages/internal.h"
#include "pages/cache.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* First bit >= i that is clear (want 0) or set (want 1), or nbits; a word at a time. */
static size_t next_bit(const uint64_t *bits, size_t nbits, size_t i, int want)
{
	size_t w = i >> 6, nwords = (nbits + 63) >> 6;
	uint64_t flip = want ? 0 : ~0ull;

	if (i >= nbits)
		return nbits;
	uint64_t word = (bits[w] ^ flip) & (~0ull << (i & 63));
	while (!word) {
		if (++w >= nwords)
			return nbits;
		word = bits[w] ^ flip;
	}
	size_t r = (w << 6) + (size_t)__builtin_ctzll(word);
	return r < nbits ? r : nbits;
}

/* Lowest run of n clear bits, or -1: jumps from clear run to clear run. */
static long find_clear_run(const uint64_t *bits, size_t nbits, unsigned n)
{
	for (size_t i = next_bit(bits, nbits, 0, 0); i < nbits;) {
		size_t end = next_bit(bits, nbits, i, 1);
		if (end - i >= n)
			return (long)i;
		i = next_bit(bits, nbits, end, 0);
	}
	return -1;
}

/* Lock held: lowest partial chunk with at least n free pages in a row. */
bool pages_find_run(struct zs_pages *p, unsigned n, pfn_t *out)
{
	for (size_t w = p->partial_lo; w < p->slot_words; w++) {
		uint64_t word = p->partial_bm[w];
		if (!word) {
			if (w == p->partial_lo)
				p->partial_lo = w + 1;
			continue;
		}
		while (word) {
			size_t slot = w * 64 + (size_t)__builtin_ctzll(word);
			word &= word - 1;
			if (p->ppc - p->chunks[slot].ninuse < n)
				continue;
			long idx = find_clear_run(meta_bits(p, meta_desc(p, slot)), p->ppc, n);
			if (idx >= 0) {
				*out = ((pfn_t)slot << p->lk.ppc_shift) + (pfn_t)idx;
				return true;
			}
		}
	}
	return false;
}
