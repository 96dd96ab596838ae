/*
 * Untouched slots (src/zsmalloc/internal.h, struct zspage): a new zspage
 * links none of its objects; obj_malloc hands out freed slots LIFO and
 * then the never-used ones in index order.  This test holds that change to
 * its three promises:
 *  - order: the slots come out exactly as from the kernel's fully linked
 *    list (0 -> 1 -> ... at creation, frees pushed on the head), so the
 *    kernel profile stays page-exact (`zs replay`); a seeded random
 *    alloc/free walk on one zspage is checked against that list;
 *  - nothing written: a new zspage's other slots keep the page's bytes;
 *  - words in untouched slots are not headers: checked mode refuses an obj
 *    naming one even when the stale word there looks like the handle, and
 *    compaction does not take a stale word with the allocated tag for an
 *    object (before the bound it would have followed it as a handle).
 * White box (internal.h) to name slots and zspages; the rest is the API.
 */
#include <errno.h>
#include <string.h>

#include "testutil.h"
#include "zs/zsmalloc.h"
#include "zsmalloc/internal.h"
#include "must.h"

static struct zs_pool *new_pool(int checked)
{
	struct zs_pool_config c;
	zs_pool_config_init(&c); /* the kernel profile: one class copy, so one zspage per class */
	c.checked = checked;
	struct zs_pool *p = must_pool_create(&c);
	REQUIRE(p);
	return p;
}

static struct zspage *zspage_of(struct zs_pool *p, unsigned long h)
{
	return obj_to_zspage(p, handle_to_obj(h));
}

static unsigned idx_of(unsigned long h)
{
	return obj_to_idx(handle_to_obj(h));
}

/* The page of the zspage's chain that slot idx starts in. */
static pfn_t slot_pfn(struct zs_pool *p, const struct zspage *z, unsigned size, unsigned idx)
{
	pfn_t pfn = z->pfn;
	for (unsigned k = obj_page_index(p, size, idx); k; k--)
		pfn = page_desc(p, pfn)->next;
	return pfn;
}

static void fill(unsigned char *b, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		b[i] = (unsigned char)(seed * 37 + i * 11);
}

static int reads_back(struct zs_pool *p, unsigned long h, size_t len, unsigned seed)
{
	unsigned char want[4096], copy[4096];
	fill(want, len, seed);
	void *m = zs_obj_read_begin(p, h, len, copy);
	if (!m)
		return 0;
	int ok = !memcmp(m, want, len);
	zs_obj_read_end(p, h, len, m);
	return ok;
}

/* Slots in the kernel's order: a seeded walk on one zspage against a model of the linked list. */
static void order_matches_linked_list(uint64_t seed)
{
	struct zs_pool *p = new_pool(0);
	const size_t size = 200;
	unsigned long first = zs_malloc(p, size);
	REQUIRE(!ZS_IS_ERR(first));
	struct zspage *z = zspage_of(p, first);
	struct size_class *class = zspage_class(p, z);
	unsigned n = z->objs;
	REQUIRE(n >= 8 && n <= 1024);
	CHECK_EQ(idx_of(first), 0);

	/* The model: the list as the kernel links it, head first; slot 0 already taken. */
	unsigned list[1024], nl = 0;
	for (unsigned i = 1; i < n; i++)
		list[nl++] = i;
	unsigned long live[1024];
	unsigned nlive = 0;
	live[nlive++] = first;
	int mismatches = 0;
	for (int step = 0; step < 20000; step++) {
		int alloc = nlive == 1 || (nlive < n && tu_rand(&seed) % 2);
		if (alloc) {
			unsigned long h = zs_malloc(p, size);
			REQUIRE(!ZS_IS_ERR(h));
			/* Never full nor empty: every object comes from this one zspage. */
			REQUIRE(zspage_of(p, h) == z);
			unsigned want = list[0];
			memmove(list, list + 1, (nl - 1) * sizeof(list[0]));
			nl--;
			mismatches += idx_of(h) != want;
			live[nlive++] = h;
		} else {
			/* free a random live object other than `first`, which keeps the zspage */
			unsigned k = 1 + (unsigned)(tu_rand(&seed) % (nlive - 1));
			unsigned idx = idx_of(live[k]);
			REQUIRE(zs_free(p, live[k]) == 0);
			live[k] = live[--nlive];
			memmove(list + 1, list, nl * sizeof(list[0]));
			list[0] = idx;
			nl++;
		}
	}
	CHECK_EQ(mismatches, 0);
	CHECK(z->untouched <= n && class->stats[ZS_OBJS_INUSE] == nlive);
	for (unsigned i = 0; i < nlive; i++)
		CHECK_EQ(zs_free(p, live[i]), 0);
	CHECK_EQ(zs_get_total_pages(p), 0);
	zs_destroy_pool(p);
}

/* A new zspage writes none of its other slots; it counts the one it handed out. */
static void nothing_written(void)
{
	struct zs_pool *p = new_pool(0);
	unsigned long h = zs_malloc(p, 1000);
	REQUIRE(!ZS_IS_ERR(h));
	struct zspage *z = zspage_of(p, h);
	unsigned size = zspage_class(p, z)->size;
	CHECK_EQ(z->untouched, 1);
	CHECK_EQ(z->freeobj, FREEOBJ_END);
	/* The first pages of a fresh process's first pool come zeroed from mmap. */
	int zero = 1;
	for (unsigned i = 1; i < z->objs; i++)
		zero &= *obj_header(p, slot_pfn(p, z, size, i), i, size) == 0;
	CHECK(zero);
	CHECK_EQ(zs_free(p, h), 0);
	zs_destroy_pool(p);
}

/* Checked mode refuses an obj that names an untouched slot, whatever word sits there. */
static void checked_refuses_untouched(void)
{
	struct zs_pool *p = new_pool(1);
	unsigned long h = zs_malloc(p, 1000);
	REQUIRE(!ZS_IS_ERR(h));
	unsigned long obj = handle_to_obj(h);
	struct zspage *z = obj_to_zspage(p, obj);
	struct size_class *class = zspage_class(p, z);
	REQUIRE(z->objs >= 2 && z->untouched == 1);
	pfn_t pfn1 = slot_pfn(p, z, class->size, 1);
	unsigned long forged = location_to_obj(pfn1, class->enc, 1);
	/* A stale header from the page's last life, naming this very handle. */
	*obj_header(p, pfn1, 1, class->size) = h | OBJ_ALLOCATED_TAG;
	read_lock(&p->lock);
	CHECK_EQ(validate_obj(p, h, obj), 0);
	CHECK_EQ(validate_obj(p, h, forged), -EINVAL);
	read_unlock(&p->lock);
	/* Once handed out, the slot is an object like any other. */
	unsigned long h2 = zs_malloc(p, 1000);
	REQUIRE(!ZS_IS_ERR(h2));
	CHECK_EQ(handle_to_obj(h2), forged);
	read_lock(&p->lock);
	CHECK_EQ(validate_obj(p, h2, forged), 0);
	read_unlock(&p->lock);
	CHECK_EQ(zs_free(p, h2), 0);
	CHECK_EQ(zs_free(p, h), 0);
	zs_destroy_pool(p);
}

/*
 * Compaction moves the objects out of a zspage whose untouched slots hold
 * words with the allocated tag set, and takes none of them for an object.
 */
static void compaction_skips_untouched(void)
{
	struct zs_pool *p = new_pool(0);
	const size_t size = 200;
	unsigned long a[1024];
	a[0] = zs_malloc(p, size);
	REQUIRE(!ZS_IS_ERR(a[0]));
	struct zspage *za = zspage_of(p, a[0]);
	unsigned n = za->objs;
	REQUIRE(n >= 12 && n <= 1024);
	for (unsigned i = 1; i < n; i++) {
		a[i] = zs_malloc(p, size);
		REQUIRE(!ZS_IS_ERR(a[i]) && zspage_of(p, a[i]) == za);
	}
	/* A is full, so B is a second zspage with one object and n - 1 untouched slots. */
	unsigned long b = zs_malloc(p, size);
	REQUIRE(!ZS_IS_ERR(b));
	struct zspage *zb = zspage_of(p, b);
	REQUIRE(zb != za && zb->untouched == 1);
	unsigned csize = zspage_class(p, zb)->size;
	for (unsigned i = 1; i < n; i++)
		*obj_header(p, slot_pfn(p, zb, csize, i), i, csize) = 0xdead0000UL | OBJ_ALLOCATED_TAG;
	/* A keeps two objects (2/n: a fuller group than B's 1/n), so B is the source. */
	for (unsigned i = 2; i < n; i++)
		REQUIRE(zs_free(p, a[i]) == 0);
	unsigned char buf[256];
	fill(buf, size, 1);
	CHECK_EQ(zs_obj_write(p, a[0], buf, size), 0);
	fill(buf, size, 2);
	CHECK_EQ(zs_obj_write(p, a[1], buf, size), 0);
	fill(buf, size, 3);
	CHECK_EQ(zs_obj_write(p, b, buf, size), 0);
	unsigned long pages = zs_get_total_pages(p);
	zs_compact(p);
	CHECK(zs_get_total_pages(p) < pages);
	CHECK_EQ(zs_pool_objects(p), 3);
	CHECK(zspage_of(p, b) == za);
	CHECK(reads_back(p, a[0], size, 1));
	CHECK(reads_back(p, a[1], size, 2));
	CHECK(reads_back(p, b, size, 3));
	CHECK_EQ(zs_free(p, a[0]), 0);
	CHECK_EQ(zs_free(p, a[1]), 0);
	CHECK_EQ(zs_free(p, b), 0);
	CHECK_EQ(zs_get_total_pages(p), 0);
	zs_destroy_pool(p);
}

int main(void)
{
	uint64_t seed = tu_seed("test_zs_untouched");
	nothing_written();
	order_matches_linked_list(seed);
	checked_refuses_untouched();
	compaction_skips_untouched();
	return tu_done();
}
