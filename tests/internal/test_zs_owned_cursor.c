/*
 * The owned allocation's cursor (src/zsmalloc/owned.c set_cur, zsmalloc.c
 * owned_place): a heap class keeps its current zspage's next untouched
 * slot as a ready address and obj, moved along by each allocation, across
 * pages without a lookup when the zspage's pages are a run (flat) and by
 * the cached page addresses when they are not.  Holds, for objects whose
 * slots end inside, at and past their pages' ends:
 *  - every object's obj names the page its slot starts in and its index,
 *    as the class path computes them (zspage_page, obj_page_index);
 *  - after every allocation the cursor is the next untouched slot's address
 *    and obj base, in flat zspages and in zspages whose pages are scattered
 *    (made here by giving back every other page of a filled class first);
 *  - slots the owner freed in its current zspage are taken again, the
 *    cursor unmoved, and every object reads back as written;
 *  - every current zspage whose second page follows its first has its
 *    chain noted (z->chain, what set_cur trusts instead of walking
 *    the chain) and the note says what the chain is, also for zspages
 *    taken again whole from the heap's spares and the class's park after a
 *    free-all.
 * Seeded; white box (internal.h) to read the heap and the zspages.
 */
#include <string.h>

#include "testutil.h"
#include "zs/zsmalloc.h"
#include "zsmalloc/internal.h"
#include "must.h"

#define NOBJ 4000

static unsigned char src[4096], dst[4096];
static unsigned long hs[NOBJ];
static size_t lens[NOBJ];
static unsigned tags[NOBJ];
static unsigned long flat_seen, scattered_seen, crossed, noted_seen;

static void fill(size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		src[i] = (unsigned char)(seed * 29 + i * 13 + 3);
}

/* The object's obj is where the class path puts slot idx of its zspage. */
static void check_obj(struct zs_pool *p, unsigned long h)
{
	unsigned long obj = handle_to_obj(h);
	struct zspage *z = obj_to_zspage(p, obj);
	struct size_class *class = zspage_class(p, z);
	unsigned idx = obj_to_idx(obj);
	CHECK(idx < z->objs);
	CHECK_EQ(obj_to_class_idx(obj), z->class_idx);
	CHECK_EQ(obj_to_pfn(obj), zspage_page(p, z, obj_page_index(p, class->size, idx)));
	unsigned long end = (unsigned long)(idx + 1) * class->size;
	crossed += (end >> p->page_shift) != (((unsigned long)idx * class->size) >> p->page_shift);
}

/* The heap class of len-byte objects: its cursor on cur's next untouched slot. */
static void check_cursor(struct zs_pool *p, size_t len)
{
	struct zs_heap *hp = heap_tls.heap[0];
	struct zs_heap_class *c = &hp->cls[size_to_class(p, len + ZS_HANDLE_SIZE)];
	struct zspage *z = c->cur;
	if (!z || z->untouched >= z->objs)
		return;
	unsigned long pos = (unsigned long)z->untouched * c->size;
	pfn_t pfn = zspage_page(p, z, (unsigned)(pos >> p->page_shift));
	CHECK(c->bnext == page_addr(p, pfn) + (pos & (p->page_size - 1)));
	CHECK_EQ(c->bbase, location_to_obj(pfn, z->class_idx, 0));
	/* flat says what the chain is: every page the one after the last, in number and place */
	int run = 1;
	pfn_t a = z->pfn;
	for (pfn_t b = page_desc(p, a)->next; b != ZS_PFN_NONE; a = b, b = page_desc(p, b)->next)
		run &= b == a + 1 && page_addr(p, b) == page_addr(p, a) + p->page_size;
	CHECK_EQ(c->flat, run);
	/* A chain whose second page follows its first carries its note, and the note is right. */
	pfn_t second = page_desc(p, z->pfn)->next;
	if (second == (pfn_t)z->pfn + 1 && page_addr(p, second) == page_addr(p, z->pfn) + p->page_size) {
		unsigned note = z->chain;
		CHECK(note != ZS_CHAIN_UNKNOWN);
		CHECK_EQ(note == ZS_CHAIN_RUN, run);
		CHECK_EQ(note == ZS_CHAIN_SCATTERED, !run);
		noted_seen += z->untouched <= 1;
	}
	/* The zspage's own copy of its slot size (the owned free's offset) is its class's. */
	CHECK_EQ(z->size, c->size);
	if (z->untouched == 0 || z->untouched == 1) {
		flat_seen += run;
		scattered_seen += !run;
	}
}

static void alloc_one(struct zs_pool *p, int i, unsigned tag)
{
	tags[i] = tag + (unsigned)i;
	fill(lens[i], tags[i]);
	hs[i] = zs_malloc_write(p, src, lens[i]);
	REQUIRE(!ZS_IS_ERR(hs[i]));
	check_obj(p, hs[i]);
	check_cursor(p, lens[i]);
}

static void read_free(struct zs_pool *p, int i)
{
	fill(lens[i], tags[i]);
	void *m = zs_obj_read_begin(p, hs[i], lens[i], dst);
	REQUIRE(m);
	CHECK(memcmp(m, src, lens[i]) == 0);
	zs_obj_read_end(p, hs[i], lens[i], m);
	CHECK_EQ(zs_free(p, hs[i]), 0);
	hs[i] = 0;
}

int main(void)
{
	uint64_t seed = tu_seed("test_zs_owned_cursor");
	uint64_t x = seed | 1;
	struct zs_pool_config c;
	zs_pool_config_init_app(&c);
	c.autocompact_ms = 0;
	struct zs_pool *p = must_pool_create(&c);
	if (!p->owned) {
		printf("test_zs_owned_cursor: built without owned zspages, nothing to check\n");
		zs_destroy_pool(p);
		return tu_done();
	}

	/* Scattered free pages first: a class of one-page zspages filled, every other zspage
	 * emptied and the pool trimmed, so its pages go back to the provider one apart. */
	size_t small = 500;
	for (int i = 0; i < NOBJ; i++) {
		lens[i] = small;
		alloc_one(p, i, 1);
	}
	struct zs_heap_class *sc = &heap_tls.heap[0]->cls[size_to_class(p, small + ZS_HANDLE_SIZE)];
	unsigned per = sc->cur->objs;
	for (int i = 0; i < NOBJ; i++)
		if ((i / per) % 2)
			read_free(p, i);
	zs_pool_trim(p);

	/* Multi-page zspages on those pages, and on fresh runs once they are used up. */
	for (int i = 0; i < NOBJ; i++)
		if (!hs[i]) {
			lens[i] = 200 + tu_rand(&x) % 3401;
			alloc_one(p, i, 2);
		}
	printf("test_zs_owned_cursor: %lu flat and %lu scattered current zspages, %lu slots crossing a page\n",
	       flat_seen, scattered_seen, crossed);
	CHECK(flat_seen > 0);
	CHECK(scattered_seen > 0);
	CHECK(crossed > 0);

	/* Frees into the current zspages, then allocations that take those slots back first
	 * (fresh ones after): the cursor stays on the next untouched slot. */
	for (unsigned r = 3; r < 8; r++) {
		for (int i = 0; i < NOBJ; i++)
			if (tu_rand(&x) % 3 == 0)
				read_free(p, i);
		for (int i = 0; i < NOBJ; i++)
			if (!hs[i]) {
				lens[i] = 200 + tu_rand(&x) % 3401;
				alloc_one(p, i, r * 100000);
			}
	}
	/* Free-all, then the same again: the zspages come back whole from the spares and the
	 * park, each made current on its noted chain, with no walk. */
	unsigned long noted_before = noted_seen;
	for (unsigned r = 8; r < 11; r++) {
		unsigned long round_before = noted_seen;
		for (int i = 0; i < NOBJ; i++)
			read_free(p, i);
		for (int i = 0; i < NOBJ; i++) {
			lens[i] = 200 + tu_rand(&x) % 3401;
			alloc_one(p, i, r * 100000);
		}
		printf("test_zs_owned_cursor: round %u: %lu zspages taken again on their note\n", r,
		       noted_seen - round_before);
	}
	CHECK(noted_seen > noted_before);
	for (int i = 0; i < NOBJ; i++)
		read_free(p, i);
	zs_compact(p);
	CHECK_EQ(zs_get_total_pages(p), 0);
	zs_destroy_pool(p);
	return tu_done();
}
