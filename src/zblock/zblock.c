/*
 * zblock: contiguous blocks of equal slots (written from the published
 * description of zblock, no kernel code).
 *
 * Layout.  A block is P (1..8) contiguous pool pages from pages_alloc_run.
 * It starts with struct zb_block (H bytes, rounded up to 8) and is followed by
 * n slots of S bytes; slot i is at H + i*S.  Class = one descriptor (n, P);
 * S = round_down((P*page_size - H) / n, 8).  Our header is
 *     next, prev (active list) 16 B | pool 8 | pfn 8 | type 2 | free 2 | pad 4
 *     | bitmap: ceil(max n / 64) words
 * so H = 48 B at 4K (n <= 28) and 64 B at 16K (n <= 185), against the final
 * kernel header's 48 / 72 B on LP64 (it has an rcu_head; we have pool+pfn).
 * The kernel tables give only (n, P), so with our H the 4K S values equal
 * the kernel's and the 16K ones are up to 8 bytes larger.
 *
 * Handle = block address | slot.  Blocks are at least 4 KiB aligned (the
 * page provider hands out OS-page-aligned pages), so the low 12 bits are free
 * and n <= 256 fits.  The class is read back from the block header, as the
 * final kernel version does, so a handle never has to encode it.
 *
 * Lists.  Per class: a lock, a doubly linked active list of blocks with >= 1
 * free slot, and counters.  Allocation takes the head; a full block is
 * unlinked (nothing needs to find it again: destroy unmaps the whole page
 * provider).  A new block goes to the head, so the newest block fills first;
 * a block that goes from full to one free slot is re-linked at the tail; a
 * block that becomes empty is freed at once.
 *
 * Locking.  The class lock covers the list, the counters and the bitmap.
 * The kernel claims bitmap bits with atomic ops outside the lock; inside the
 * lock a plain word scan is simpler and costs the same here (one lock round
 * trip either way).  Reads and writes take no lock: a live object's block and
 * class cannot change.  One class lock at a time, taken before the page
 * provider's locks and after any of the callers' (zram's, zswap's); a
 * -DZS_DEBUG=ON build checks it (ZS_LOCK_ZBLOCK_CLASS, common/debug.h).
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "common/err.h"
#include "common/stats_copy.h"
#include "common/config.h"
#include "pages/pages.h"
#include "pages/lookup.h"
#include "zs/zblock.h"
#include "zs/harness.h"
#include "common/debug.h"

#define ZB_MAX_SLOTS 256        /* bitmap/handle limit; the 16K table peaks at 185 */
#define ZB_MAX_CLASSES 72       /* 64 like the kernel's limit, + huge, + slack */
#define ZB_SLOT_MASK 0xfffUL    /* low bits of a 4 KiB-aligned block address */
#define ZB_DERIVED_ENTRIES 64

struct zb_block {
	struct zb_block *next, *prev;
	struct zblock_pool *pool;
	pfn_t pfn;
	uint16_t type;
	uint16_t free_slots;
	uint32_t pad;
	uint64_t bitmap[]; /* set = used */
};

struct zb_desc {
	unsigned slot_size, n, pages;
};

struct zb_class {
	pthread_mutex_t lock;
	struct zb_block *head, *tail;
	struct zb_desc d;
	_Atomic unsigned long blocks;  /* written under lock, read anywhere */
	_Atomic unsigned long objects;
};

struct zblock_pool {
	struct zs_pages *pages;
	size_t page_size;
	size_t hdr;       /* H */
	unsigned words;   /* bitmap words per header */
	int checked;
	int nr_classes;
	size_t max_size;  /* S[last], or page_size when the huge class is on */
	_Atomic unsigned long total_pages;
	unsigned slot_sizes[ZB_MAX_CLASSES]; /* copy for the lookup's cache-friendly search */
	struct zb_class cls[ZB_MAX_CLASSES];
};

/* ---- Descriptor tables ---- */

/*
 * (n, P) of the final kernel version (vwool/linux-mm @b19d82b7), the only
 * data taken from it.  S follows from our H.
 */
static const uint8_t table_4k[][2] = {
	{ 28, 1 }, { 18, 1 }, { 12, 1 }, { 10, 1 }, { 17, 2 }, { 15, 2 }, { 13, 2 }, { 6, 1 },
	{ 11, 2 }, { 5, 1 },  { 19, 4 }, { 9, 2 },  { 17, 4 }, { 4, 1 },  { 23, 6 }, { 11, 3 },
	{ 7, 2 },  { 10, 3 }, { 19, 6 }, { 6, 2 },  { 14, 5 }, { 8, 3 },  { 5, 2 },  { 12, 5 },
	{ 9, 4 },  { 15, 7 }, { 2, 1 },  { 15, 8 }, { 9, 5 },  { 12, 7 }, { 13, 8 }, { 6, 4 },
	{ 11, 8 }, { 9, 7 },  { 6, 5 },  { 9, 8 },  { 4, 4 },
};
static const uint8_t table_16k[][2] = {
	{ 185, 1 }, { 113, 1 }, { 86, 1 }, { 72, 1 }, { 58, 1 }, { 49, 1 }, { 42, 1 }, { 37, 1 },
	{ 33, 1 },  { 59, 2 },  { 27, 1 }, { 25, 1 }, { 23, 1 }, { 21, 1 }, { 39, 2 }, { 37, 2 },
	{ 35, 2 },  { 33, 2 },  { 31, 2 }, { 29, 2 }, { 27, 2 }, { 25, 2 }, { 12, 1 }, { 11, 1 },
	{ 21, 2 },  { 10, 1 },  { 19, 2 }, { 9, 1 },  { 17, 2 }, { 8, 1 },  { 15, 2 }, { 14, 2 },
	{ 27, 4 },  { 13, 2 },  { 25, 4 }, { 12, 2 }, { 23, 4 }, { 11, 2 }, { 21, 4 }, { 10, 2 },
	{ 19, 4 },  { 9, 2 },   { 17, 4 }, { 4, 1 },  { 23, 6 }, { 11, 3 }, { 7, 2 },  { 10, 3 },
	{ 16, 5 },  { 6, 2 },   { 11, 4 }, { 8, 3 },  { 5, 2 },  { 7, 3 },  { 11, 5 }, { 4, 2 },
	{ 9, 5 },   { 8, 5 },   { 3, 2 },  { 7, 6 },  { 4, 4 },
};

static size_t round_up8(size_t x)
{
	return (x + 7) & ~(size_t)7;
}

static unsigned slot_size(size_t page_size, size_t hdr, unsigned n, unsigned pages)
{
	return (unsigned)(((page_size * pages - hdr) / n) & ~(size_t)7);
}

static size_t header_size(unsigned max_n)
{
	return round_up8(offsetof(struct zb_block, bitmap) + 8 * ((max_n + 63) / 64));
}

/*
 * Derived table for page sizes without a kernel table (8K, 32K, 64K).  Rule:
 * 64 target sizes spaced geometrically from the smallest useful slot
 * (max(64, what 256 slots in one page give)) to the 4-slots-in-4-pages slot
 * both kernel tables end with.  For each target, every P in 1..8 offers the
 * most slots n (<= 256) whose S still holds the target; among the offers
 * whose S is within 2% of the tightest, the fewest pages win (smaller blocks
 * fragment less), then the smaller S.  Duplicates are dropped, so S is
 * strictly ascending by construction; H assumes a 256-slot bitmap.
 */
static int derive_table(size_t ps, size_t hdr, struct zb_desc *d)
{
	double smin = (double)((ps - hdr) / ZB_MAX_SLOTS);
	if (smin < 64)
		smin = 64;
	double smax = slot_size(ps, hdr, 4, 4);
	int cnt = 0;
	for (int k = 0; k < ZB_DERIVED_ENTRIES; k++) {
		double t = smin * exp(log(smax / smin) * k / (ZB_DERIVED_ENTRIES - 1));
		unsigned target = (unsigned)round_up8((size_t)ceil(t));
		struct zb_desc offer[ZBLOCK_MAX_PAGES_PER_BLOCK];
		unsigned tight = UINT32_MAX;
		int nof = 0;
		for (unsigned p = 1; p <= ZBLOCK_MAX_PAGES_PER_BLOCK; p++) {
			unsigned n = (unsigned)((ps * p - hdr) / target);
			if (n > ZB_MAX_SLOTS)
				n = ZB_MAX_SLOTS;
			while (n >= 1 && slot_size(ps, hdr, n, p) < target)
				n--;
			if (n < 1)
				continue;
			offer[nof] = (struct zb_desc){ slot_size(ps, hdr, n, p), n, p };
			if (offer[nof].slot_size < tight)
				tight = offer[nof].slot_size;
			nof++;
		}
		if (!nof)
			continue;
		const struct zb_desc *best = NULL;
		for (int i = 0; i < nof; i++) {
			if (offer[i].slot_size > tight + tight / 50)
				continue;
			if (!best || offer[i].pages < best->pages ||
			    (offer[i].pages == best->pages && offer[i].slot_size < best->slot_size))
				best = &offer[i];
		}
		if (cnt == 0 || best->slot_size > d[cnt - 1].slot_size)
			d[cnt++] = *best;
	}
	return cnt;
}

/* Fills d (ZB_MAX_CLASSES) and *hdr; returns the class count or -EINVAL. */
static int build_table(size_t ps, int huge, struct zb_desc *d, size_t *hdr)
{
	if (!zs_page_size_valid(ps))
		return -EINVAL;
	const uint8_t(*t)[2] = NULL;
	int cnt = 0;
	if (ps == 4096) {
		t = table_4k;
		cnt = (int)(sizeof(table_4k) / sizeof(table_4k[0]));
	} else if (ps == 16384) {
		t = table_16k;
		cnt = (int)(sizeof(table_16k) / sizeof(table_16k[0]));
	}
	if (t) {
		unsigned max_n = 0;
		for (int i = 0; i < cnt; i++)
			if (t[i][0] > max_n)
				max_n = t[i][0];
		*hdr = header_size(max_n);
		for (int i = 0; i < cnt; i++)
			d[i] = (struct zb_desc){ slot_size(ps, *hdr, t[i][0], t[i][1]), t[i][0], t[i][1] };
	} else {
		*hdr = header_size(ZB_MAX_SLOTS);
		cnt = derive_table(ps, *hdr, d);
	}
	/* Page-size objects: the most slots of >= page_size that 8 pages hold (7). */
	if (huge && d[cnt - 1].slot_size < ps) {
		unsigned p = ZBLOCK_MAX_PAGES_PER_BLOCK;
		unsigned n = (unsigned)((ps * p - *hdr) / ps);
		d[cnt++] = (struct zb_desc){ slot_size(ps, *hdr, n, p), n, p };
	}
	/* The lookup is a binary search: it needs S strictly ascending (the kernel's init check). */
	for (int i = 0; i < cnt; i++) {
		if (d[i].n < 1 || d[i].n > ZB_MAX_SLOTS || d[i].pages < 1 ||
		    d[i].pages > ZBLOCK_MAX_PAGES_PER_BLOCK || d[i].slot_size < 8)
			return -EINVAL;
		if (i && d[i].slot_size <= d[i - 1].slot_size)
			return -EINVAL;
	}
	return cnt;
}

int zblock_geometry(size_t page_size, int huge, struct zblock_class_info *out, int max)
{
	struct zb_desc d[ZB_MAX_CLASSES];
	size_t hdr;
	int cnt = build_table(page_size, huge, d, &hdr);
	if (cnt < 0)
		return cnt;
	for (int i = 0; i < cnt && i < max; i++)
		out[i] = (struct zblock_class_info){ i, d[i].slot_size, d[i].n, d[i].pages };
	return cnt;
}

/*
 * Smallest class whose slot holds `size`: S[i] >= size.  The kernel's rbtree
 * maps [S[i], S[i+1]) to i+1, i.e. S[j] > size, so an object of exactly S[j]
 * bytes wastes a whole step, and the final version dropped the check that
 * size <= S[last], indexing past the table for size == S[last].  Here an
 * exact fit uses its own class and anything above S[last] is refused first.
 */
static int lookup(const struct zblock_pool *pool, size_t size)
{
	int lo = 0, hi = pool->nr_classes - 1;
	if (size == 0)
		return -EINVAL;
	if (size > pool->max_size)
		return -ENOSPC;
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (pool->slot_sizes[mid] >= size)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* ---- Handles and blocks ---- */

static unsigned long encode(struct zb_block *b, unsigned slot)
{
	return (unsigned long)b | slot;
}

static struct zb_block *handle_block(unsigned long h)
{
	return (struct zb_block *)(h & ~ZB_SLOT_MASK);
}

static unsigned handle_slot(unsigned long h)
{
	return (unsigned)(h & ZB_SLOT_MASK);
}

static char *slot_addr(const struct zblock_pool *pool, struct zb_block *b, unsigned slot)
{
	return (char *)b + pool->hdr + (size_t)slot * pool->cls[b->type].d.slot_size;
}

static void list_add_head(struct zb_class *c, struct zb_block *b)
{
	b->prev = NULL;
	b->next = c->head;
	if (c->head)
		c->head->prev = b;
	else
		c->tail = b;
	c->head = b;
}

static void list_add_tail(struct zb_class *c, struct zb_block *b)
{
	b->next = NULL;
	b->prev = c->tail;
	if (c->tail)
		c->tail->next = b;
	else
		c->head = b;
	c->tail = b;
}

static void list_del(struct zb_class *c, struct zb_block *b)
{
	if (b->prev)
		b->prev->next = b->next;
	else
		c->head = b->next;
	if (b->next)
		b->next->prev = b->prev;
	else
		c->tail = b->prev;
	b->next = b->prev = NULL;
}

/* Claim the lowest free slot; the caller holds the lock and knows one exists. */
static unsigned claim_slot(struct zb_block *b, unsigned words)
{
	for (unsigned w = 0; w < words; w++) {
		uint64_t inv = ~b->bitmap[w];
		if (inv) {
			unsigned bit = (unsigned)__builtin_ctzll(inv);
			b->bitmap[w] |= 1ULL << bit;
			return w * 64 + bit;
		}
	}
	abort(); /* free_slots said there was one: the header is corrupt */
}

static int test_slot(const struct zb_block *b, unsigned slot)
{
	return (b->bitmap[slot / 64] >> (slot % 64)) & 1;
}

/*
 * ZS_DEBUG, class lock held: the block's header agrees with itself -- its
 * free count is what its bitmap says, no bit past the last slot is set, and
 * it is on the active list exactly when it has a free slot and is not empty
 * (an empty block is freed at once, a full one leaves the list).
 */
static inline int block_sane(const struct zblock_pool *pool, const struct zb_block *b)
{
	const struct zb_class *c = &pool->cls[b->type];
	unsigned used = 0;
	if (b->pool != pool || b->type >= pool->nr_classes)
		return 0;
	for (unsigned w = 0; w < pool->words; w++) {
		uint64_t bits = b->bitmap[w];
		if (w * 64 + 64 > c->d.n)
			bits &= c->d.n > w * 64 ? ~((1ULL << (c->d.n - w * 64)) - 1) : ~0ULL;
		else
			bits = 0;
		if (bits)
			return 0; /* a slot past n is marked used */
		used += (unsigned)__builtin_popcountll(b->bitmap[w]);
	}
	if (used + b->free_slots != c->d.n)
		return 0;
	int listed = b->prev || b->next || c->head == b;
	return listed == (b->free_slots > 0 && b->free_slots < c->d.n);
}

/* A new block with slot 0 already taken, not yet on any list. */
static struct zb_block *new_block(struct zblock_pool *pool, int type)
{
	const struct zb_desc *d = &pool->cls[type].d;
	pfn_t pfn;
	if (pages_alloc_run(pool->pages, d->pages, &pfn))
		return NULL;
	struct zb_block *b = pages_lookup_addr(pool->pages, pfn);
	if ((uintptr_t)b & ZB_SLOT_MASK)
		abort(); /* the page provider broke its alignment promise */
	memset(b, 0, pool->hdr);
	b->pool = pool;
	b->pfn = pfn;
	b->type = (uint16_t)type;
	b->free_slots = (uint16_t)(d->n - 1);
	b->bitmap[0] = 1;
	/* Marks the first page as a block head for checked-mode validation. */
	pages_set_owner(pool->pages, pfn, b);
	atomic_fetch_add_explicit(&pool->total_pages, d->pages, memory_order_relaxed);
	return b;
}

static void free_block(struct zblock_pool *pool, struct zb_block *b)
{
	unsigned pages = pool->cls[b->type].d.pages;
	pages_set_owner(pool->pages, b->pfn, NULL);
	pages_free_run(pool->pages, b->pfn, pages);
	atomic_fetch_sub_explicit(&pool->total_pages, pages, memory_order_relaxed);
}

/*
 * Checked mode: is h a block head of this pool with a sane slot?  The page
 * provider is per pool, so a foreign address has no page number here.  (A
 * handle into a block that was freed and reused is indistinguishable from a
 * live one, as in any allocator without generation counters.)
 */
static struct zb_block *checked_block(const struct zblock_pool *pool, unsigned long h)
{
	if (h == 0 || ZS_IS_ERR(h))
		return NULL;
	struct zb_block *b = handle_block(h);
	pfn_t pfn = pages_pfn_of(pool->pages, b);
	if (pfn == ZS_PFN_NONE || !pages_valid(pool->pages, pfn) ||
	    pages_lookup_addr(pool->pages, pfn) != (void *)b || pages_lookup_owner(pool->pages, pfn) != b)
		return NULL;
	if (b->pool != pool || b->type >= pool->nr_classes ||
	    handle_slot(h) >= pool->cls[b->type].d.n)
		return NULL;
	return b;
}

/* Checked mode: block valid and the slot in use (under the class lock for a stable bitmap). */
static struct zb_block *checked_live(struct zblock_pool *pool, unsigned long h)
{
	struct zb_block *b = checked_block(pool, h);
	if (!b)
		return NULL;
	struct zb_class *c = &pool->cls[b->type];
	mutex_lock_ranked(&c->lock, ZS_LOCK_ZBLOCK_CLASS);
	int used = test_slot(b, handle_slot(h));
	mutex_unlock_ranked(&c->lock);
	return used ? b : NULL;
}

/* ---- Pool ---- */

void zblock_config_init(struct zblock_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->struct_size = sizeof(*cfg);
	cfg->page_size = ZS_PAGE_SIZE_DEFAULT;
}

static int pool_create(const struct zblock_config *cfg, struct zblock_pool **out, char *err,
		       size_t err_len)
{
	struct zblock_config c;
	if (cfg)
		c = *cfg;
	else
		zblock_config_init(&c);
	if (!c.page_size)
		c.page_size = ZS_PAGE_SIZE_DEFAULT;
	struct zb_desc d[ZB_MAX_CLASSES];
	size_t hdr;
	int cnt = -EINVAL;
	/* The ranges in zblock.h; page counts are checked again by the page provider. */
	int bad;
	if (ZS_CONFIG_ABI_CHECK(&c, &bad)) {
		config_abi_err(err, err_len, "zblock_config", c.struct_size, sizeof(c), bad);
		return -EINVAL;
	}
	if (c.checked != 0 && c.checked != 1) {
		set_err(err, err_len, "zblock_config.checked %d: must be 0 or 1", c.checked);
		return -EINVAL;
	}
	if (c.huge != 0 && c.huge != 1) {
		set_err(err, err_len, "zblock_config.huge %d: must be 0 or 1", c.huge);
		return -EINVAL;
	}
	cnt = build_table(c.page_size, c.huge, d, &hdr);
	if (cnt <= 0) {
		set_err(err, err_len, "zblock_config.page_size %zu: must be a power of two in "
			"4096..65536", c.page_size);
		return -EINVAL;
	}
	struct zblock_pool *pool = calloc(1, sizeof(*pool));
	if (!pool)
		return -ENOMEM;
	struct zs_pages_config pc = {
		.page_size = c.page_size,
		.max_pages = c.max_pages,
		.cache_pages = c.page_cache_pages,
	};
	pool->pages = pages_create(&pc);
	if (!pool->pages) {
		int e = errno ? errno : ENOMEM;
		free(pool);
		set_err(err, err_len, "zblock_config: the page provider refused page_size %zu, "
			"max_pages %zu, page_cache_pages %zu: %s", c.page_size, (size_t)c.max_pages,
			(size_t)c.page_cache_pages, strerror(e));
		return -e;
	}
	pool->page_size = c.page_size;
	pool->hdr = hdr;
	pool->words = (unsigned)((hdr - offsetof(struct zb_block, bitmap)) / 8);
	pool->checked = !!c.checked;
	pool->nr_classes = cnt;
	/* The huge class exists for page-size objects, not to accept larger ones. */
	pool->max_size = d[cnt - 1].slot_size < c.page_size ? d[cnt - 1].slot_size : c.page_size;
	for (int i = 0; i < cnt; i++) {
		pthread_mutex_init(&pool->cls[i].lock, NULL);
		pool->cls[i].d = d[i];
		pool->slot_sizes[i] = d[i].slot_size;
	}
	*out = pool;
	return 0;
}

int zblock_pool_create(const struct zblock_config *cfg, struct zblock_pool **out, char *err,
		       size_t err_len)
{
	create_begin(err, err_len);
	if (!out) {
		set_err(err, err_len, "zblock_pool_create: out is NULL");
		return create_finish("zblock_pool_create", -EINVAL, err, err_len);
	}
	*out = NULL;
	return create_finish("zblock_pool_create", pool_create(cfg, out, err, err_len), err,
			     err_len);
}


void zblock_destroy_pool(struct zblock_pool *pool)
{
	if (!pool)
		return;
	/* Full blocks are on no list; the page provider owns every page anyway. */
	pages_destroy(pool->pages);
	for (int i = 0; i < pool->nr_classes; i++)
		pthread_mutex_destroy(&pool->cls[i].lock);
	free(pool);
}

/* ---- Allocation ---- */

unsigned long zblock_malloc(struct zblock_pool *pool, size_t size)
{
	if (size == 0)
		return (unsigned long)-EINVAL;
	int type = lookup(pool, size);
	if (type < 0)
		return (unsigned long)(long)type;
	struct zb_class *c = &pool->cls[type];

	mutex_lock_ranked(&c->lock, ZS_LOCK_ZBLOCK_CLASS);
	struct zb_block *b = c->head;
	if (b) {
		assert_internal(block_sane(pool, b));
		if (--b->free_slots == 0)
			list_del(c, b); /* full blocks leave the list */
		unsigned slot = claim_slot(b, pool->words);
		assert_internal(block_sane(pool, b));
		atomic_fetch_add_explicit(&c->objects, 1, memory_order_relaxed);
		mutex_unlock_ranked(&c->lock);
		return encode(b, slot);
	}
	mutex_unlock_ranked(&c->lock);

	/* No room: allocate outside the lock; racing allocators may each add a block. */
	b = new_block(pool, type);
	if (!b)
		return (unsigned long)-ENOMEM;
	mutex_lock_ranked(&c->lock, ZS_LOCK_ZBLOCK_CLASS);
	if (b->free_slots)
		list_add_head(c, b); /* the newest block fills first */
	assert_internal(block_sane(pool, b));
	atomic_fetch_add_explicit(&c->blocks, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->objects, 1, memory_order_relaxed);
	mutex_unlock_ranked(&c->lock);
	return encode(b, 0);
}

int zblock_free(struct zblock_pool *pool, unsigned long h)
{
	if (h == 0 || ZS_IS_ERR(h))
		return 0;
	struct zb_block *b = pool->checked ? checked_block(pool, h) : handle_block(h);
	if (!b)
		return -EINVAL;
	unsigned slot = handle_slot(h);
	struct zb_class *c = &pool->cls[b->type];

	mutex_lock_ranked(&c->lock, ZS_LOCK_ZBLOCK_CLASS);
	if (pool->checked && !test_slot(b, slot)) {
		mutex_unlock_ranked(&c->lock);
		return -EINVAL;
	}
	/* Unchecked mode trusts the caller; a double free is still a bug to stop here. */
	assert_internal(test_slot(b, slot) && block_sane(pool, b));
	b->bitmap[slot / 64] &= ~(1ULL << (slot % 64));
	atomic_fetch_sub_explicit(&c->objects, 1, memory_order_relaxed);
	if (++b->free_slots == c->d.n) {
		/* Empty: never cached, the pages go back now. */
		if (c->d.n > 1)
			list_del(c, b);
		atomic_fetch_sub_explicit(&c->blocks, 1, memory_order_relaxed);
		mutex_unlock_ranked(&c->lock);
		free_block(pool, b);
		return 0;
	}
	if (b->free_slots == 1)
		list_add_tail(c, b); /* refilled blocks wait behind partly used ones */
	assert_internal(block_sane(pool, b));
	mutex_unlock_ranked(&c->lock);
	return 0;
}

/* ---- Object access ---- */

void *zblock_obj_read_begin(struct zblock_pool *pool, unsigned long h, size_t mem_len,
			    void *local_copy)
{
	(void)local_copy;
	struct zb_block *b = pool->checked ? checked_live(pool, h) : handle_block(h);
	if (!b || mem_len > pool->cls[b->type].d.slot_size) {
		errno = EINVAL;
		return NULL;
	}
	return slot_addr(pool, b, handle_slot(h));
}

void zblock_obj_read_end(struct zblock_pool *pool, unsigned long h, size_t mem_len, void *mem)
{
	(void)pool;
	(void)h;
	(void)mem_len;
	(void)mem;
}

int zblock_obj_write(struct zblock_pool *pool, unsigned long h, const void *src, size_t len)
{
	struct zb_block *b = pool->checked ? checked_live(pool, h) : handle_block(h);
	if (!b || len > pool->cls[b->type].d.slot_size)
		return -EINVAL;
	memcpy(slot_addr(pool, b, handle_slot(h)), src, len);
	return 0;
}

/* ---- Stats ---- */

unsigned long zblock_compact(struct zblock_pool *pool)
{
	(void)pool;
	return 0;
}

unsigned long zblock_get_total_pages(const struct zblock_pool *pool)
{
	return atomic_load_explicit(&pool->total_pages, memory_order_relaxed);
}

unsigned long zblock_pool_objects(const struct zblock_pool *pool)
{
	unsigned long n = 0;
	for (int i = 0; i < pool->nr_classes; i++)
		n += atomic_load_explicit(&pool->cls[i].objects, memory_order_relaxed);
	return n;
}

size_t zblock_max_size(const struct zblock_pool *pool)
{
	return pool->max_size;
}

size_t zblock_header_size(const struct zblock_pool *pool)
{
	return pool->hdr;
}

int zblock_class_count(const struct zblock_pool *pool)
{
	return pool->nr_classes;
}

int zblock_class_info(const struct zblock_pool *pool, int index, struct zblock_class_info *info)
{
	if (index < 0 || index >= pool->nr_classes)
		return -EINVAL;
	const struct zb_desc *d = &pool->cls[index].d;
	*info = (struct zblock_class_info){ index, d->slot_size, d->n, d->pages };
	return 0;
}

int zblock_lookup_class(const struct zblock_pool *pool, size_t size)
{
	return lookup(pool, size);
}

/* arg: the class index (int). */
static int fill_zblock_class_stats(void *obj, const void *arg, void *full)
{
	struct zblock_pool *pool = obj;
	int index = *(const int *)arg;
	struct zblock_class_stats *st = full;
	if (!pool || index < 0 || index >= pool->nr_classes)
		return -EINVAL;
	struct zb_class *c = &pool->cls[index];
	st->index = index;
	st->slot_size = c->d.slot_size;
	st->slots_per_block = c->d.n;
	st->pages_per_block = c->d.pages;
	mutex_lock_ranked(&c->lock, ZS_LOCK_ZBLOCK_CLASS);
	st->blocks = atomic_load_explicit(&c->blocks, memory_order_relaxed);
	st->objects = atomic_load_explicit(&c->objects, memory_order_relaxed);
	mutex_unlock_ranked(&c->lock);
	st->pages = st->blocks * c->d.pages;
	return 0;
}

int zblock_class_stats(struct zblock_pool *pool, int index, struct zblock_class_stats *st, size_t size)
{
	struct zblock_class_stats full;
	return stats_get(st, size, &full, sizeof(full), fill_zblock_class_stats, pool, &index);
}

void zblock_pool_fail_pages(struct zblock_pool *pool, uint64_t after, uint64_t count)
{
	if (after == UINT64_MAX)
		pages_fail_reset(pool->pages);
	else
		pages_fail_after(pool->pages, after, count);
}
