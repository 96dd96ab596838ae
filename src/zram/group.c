/*
 * Large-folio groups (cfg.group_pages > 1): the slot API over a store whose
 * page is a group of slots, so that N contiguous pages compress as one
 * object, as the kernel's 64 KiB mTHP-in-zram RFC does.  Owns the mapping
 * slot -> (group, offset), the read-modify-write of partial group writes
 * and the stripe locks that make it atomic.  A view over a core store: it
 * calls core.c's slot paths on the group store (`inner`, whose page is a
 * group) and stream.c for the counters, never the public zs_zram_*; only
 * zram.c calls in here, for a handle with `grp` set.
 *
 * Where a group's object lives: on zsmalloc, in the pool of the slots' own
 * page size, as a multi-page object of ceil(bytes / page) pages (zsmalloc's
 * max_object_size; the RFC's multi-page objects), so the group store
 * costs the pages its objects fill.  It used to be a pool whose page was
 * the group, whose every class in use kept a partly filled zspage of up to
 * 8 group-size pages: 1.17x the pool memory of single pages on 128 MiB of
 * /usr/lib, 1.82x the compressed bytes on 32 MiB (docs/zram.md).  Kinds
 * whose objects end at their page (zblock, the malloc baselines) still get
 * a pool of group-size pages (group_pool_page).
 *
 * Each stripe lock owns a group-size buffer, so holding the lock is
 * holding the buffer; 64 stripes keep writers of different groups apart.
 * Every access to a group's object from the slot view, reads included, runs
 * under its stripe lock, so a group's object and its slots' marks (below)
 * change together for every reader.
 *
 * Per-slot marks (one byte per slot, under the stripe lock), for the two
 * cases where a group's object cannot simply be rewritten:
 *   - M_ZERO, "discarded, bytes still in the object": a discard of part of
 *     a group must never fail for lack of memory (the kernel's discard
 *     only frees).  It rewrites the group without the slot when the store
 *     has room for the new object, and otherwise (memory limit reached, or
 *     the allocation fails) only marks the slot: it reads as zeros and its
 *     stale bytes go at the group's next rewrite, or with the group when
 *     its last slot is discarded.  Such a discard needs no memory at all.
 *     Rewriting past the limit instead was tried and rejected: a smaller
 *     object can still need a new zspage of several pages, so the pool
 *     would grow past mem_limit on a discard.
 *   - M_LOST, "its group could not be read back": a write or discard of one
 *     slot must not depend on reading its group.  A discard needs nothing
 *     from the group: it marks the slot M_ZERO and the group keeps its
 *     (unreadable) reference for the other slots, so a transient error loses
 *     nothing; the group goes when none of its slots needs it any more.  A
 *     write must replace the group (the new page has to live somewhere), and
 *     the other slots' bytes are gone with it (only the file had them): the
 *     write stores a group holding the new page and zeros, and every other
 *     slot not marked M_ZERO is marked lost.  A lost slot reads -EIO (never
 *     zeros, never another slot's bytes) until it is written or discarded.
 *     An unreadable group that is only read keeps its reference and nothing
 *     is marked.  What is conservative: a slot that held zeros, or had been
 *     discarded before the group went unreadable without a mark, reads -EIO
 *     too, as the store cannot tell which slots of a lost group held data.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "zram/internal.h"

#define STRIPES 64

enum { M_ZERO = 1, M_LOST = 2 };

struct zram_group {
	unsigned g;          /* slots per group */
	size_t gbytes;
	unsigned char *mark; /* per slot: 0, M_ZERO or M_LOST; under the group's stripe lock */
	struct {
		pthread_mutex_t lock;
		unsigned char *buf;
	} stripe[STRIPES];
};

/*
 * The pool page under a group store: the slots' own page for zsmalloc, whose
 * objects may span up to 16 pages (max_object_size), so a group's object
 * costs the pages it fills and no more; the group itself for the other
 * kinds, whose objects end at their page.
 */
static size_t group_pool_page(const struct zs_zram_config *cfg, size_t ps, size_t gbytes)
{
	const char *kind = cfg->backend.kind;
	if (!kind || !strcmp(kind, "zsmalloc"))
		return ps;
	return gbytes;
}

int zram_group_create(const struct zs_zram_config *cfg, size_t ps, struct zs_zram **out,
		      char *err, size_t err_len)
{
	unsigned g = cfg->group_pages;
	struct zs_zram_config ic = *cfg;
	struct zram_group *grp;
	struct zs_zram *z;
	uint64_t nslots = cfg->disksize / ps;
	int rc;

	if (g < 2 || g > 16 || (g & (g - 1)) || !zs_page_size_valid(ps * g)) {
		set_err(err, err_len, "group_pages %u: needs a power of two 2..16 with "
			     "group_pages x page_size <= 65536", g);
		return -EINVAL;
	}
	ic.page_size = ps * g;
	ic.group_pages = 0;
	ic.disksize = (nslots + g - 1) / g * ic.page_size;
	z = calloc(1, sizeof(*z));
	grp = calloc(1, sizeof(*grp));
	if (grp)
		grp->mark = calloc(nslots, 1);
	if (!z || !grp || !grp->mark) {
		free(z);
		if (grp)
			free(grp->mark);
		free(grp);
		return -ENOMEM;
	}
	rc = zram_core_create(&ic, ic.page_size, group_pool_page(cfg, ps, ic.page_size), &z->inner,
			      err, err_len);
	if (rc) {
		free(z);
		free(grp->mark);
		free(grp);
		return rc;
	}
	grp->g = g;
	grp->gbytes = ps * g;
	for (int i = 0; i < STRIPES; i++) {
		pthread_mutex_init(&grp->stripe[i].lock, NULL);
		grp->stripe[i].buf = malloc(grp->gbytes);
		if (!grp->stripe[i].buf)
			rc = -ENOMEM;
	}
	z->grp = grp;
	z->page_size = ps;
	z->nslots = nslots;
	z->b = z->inner->b;
	z->huge_size = z->inner->huge_size;
	snprintf(z->comp_name, sizeof(z->comp_name), "%s", z->inner->comp_name);
	if (rc) {
		zram_group_destroy(z);
		return rc;
	}
	*out = z;
	return 0;
}

void zram_group_destroy(struct zs_zram *z)
{
	struct zram_group *grp = z->grp;

	zram_core_destroy(z->inner);
	for (int i = 0; i < STRIPES; i++) {
		pthread_mutex_destroy(&grp->stripe[i].lock);
		free(grp->stripe[i].buf);
	}
	free(grp->mark);
	free(grp);
	free(z);
}

static int bad_index(struct zs_zram *z, uint64_t index)
{
	if (index < z->nslots)
		return 0;
	count_invalid(z->inner);
	return 1;
}

/* Group gi's stripe lock (and with it the stripe's buffer), lock order checked. */
static void stripe_take(struct zram_group *grp, uint64_t gi)
{
	mutex_lock_ranked(&grp->stripe[gi % STRIPES].lock, ZS_LOCK_ZRAM_STRIPE);
}

static void stripe_drop(struct zram_group *grp, uint64_t gi)
{
	mutex_unlock_ranked(&grp->stripe[gi % STRIPES].lock);
}

/* Slots of group gi that exist (the last group may be partial). */
static unsigned group_slots(struct zs_zram *z, uint64_t gi)
{
	uint64_t first = gi * z->grp->g;

	return (unsigned)(z->nslots - first < z->grp->g ? z->nslots - first : z->grp->g);
}

static void clear_marks(struct zs_zram *z, uint64_t gi)
{
	memset(z->grp->mark + gi * z->grp->g, 0, group_slots(z, gi));
}

/* Count a read answered from the marks alone in the inner store's io_stat. */
static void count_read(struct zs_zram *z, int failed)
{
	struct stream *s = zram_stream_get(z->inner);

	cnt_add(s, C_READS, 1);
	if (failed)
		cnt_add(s, C_FAILED_READS, 1);
	stream_put(s);
}

/* Stripe locked: does no slot of group gi need its object any more (each zero or lost)? */
static int all_marked(struct zs_zram *z, uint64_t gi)
{
	const unsigned char *m = z->grp->mark + gi * z->grp->g;

	for (unsigned k = 0; k < group_slots(z, gi); k++)
		if (!m[k])
			return 0;
	return 1;
}

/*
 * Stripe locked, group gi's object unreadable.  A discard only marks the
 * slot (the others keep the reference: the error may pass).  A write
 * replaces the object with one holding only `page` and marks the rest lost,
 * after the write succeeded: a failed write leaves the old reference.
 */
static int replace_lost(struct zs_zram *z, uint64_t gi, uint64_t index, const void *page,
			unsigned char *buf)
{
	struct zram_group *grp = z->grp;
	uint64_t first = gi * grp->g;
	int rc;

	if (!page) {
		grp->mark[index] = M_ZERO;
		if (all_marked(z, gi)) {
			zram_core_discard(z->inner, gi);   /* frees the object or block; cannot fail */
			/* The group is empty now: a zero mark and an empty slot read alike. */
			for (unsigned k = 0; k < group_slots(z, gi); k++)
				if (grp->mark[first + k] == M_ZERO)
					grp->mark[first + k] = 0;
		}
		return 0;
	}
	memset(buf, 0, grp->gbytes);
	memcpy(buf + (index - first) * z->page_size, page, z->page_size);
	rc = zram_core_write(z->inner, gi, buf);
	if (rc)
		return rc;
	for (unsigned k = 0; k < group_slots(z, gi); k++)
		if (grp->mark[first + k] != M_ZERO)
			grp->mark[first + k] = M_LOST;
	grp->mark[index] = 0;
	return 0;
}

/* Read-modify-write of one slot: page NULL discards it. */
static int rmw(struct zs_zram *z, uint64_t index, const void *page)
{
	struct zram_group *grp = z->grp;
	uint64_t gi = index / grp->g, first = gi * grp->g;
	size_t off = (size_t)(index - first) * z->page_size;
	unsigned char *buf = grp->stripe[gi % STRIPES].buf;
	int rc;

	stripe_take(grp, gi);
	rc = zram_core_read(z->inner, gi, buf);
	if (rc) {
		rc = replace_lost(z, gi, index, page, buf);
		goto out;
	}
	/* Discarded slots' stale bytes leave with this rewrite. */
	for (unsigned k = 0; k < group_slots(z, gi); k++)
		if (grp->mark[first + k] == M_ZERO)
			memset(buf + (size_t)k * z->page_size, 0, z->page_size);
	if (page)
		memcpy(buf + off, page, z->page_size);
	else
		memset(buf + off, 0, z->page_size);
	if (!page && buf[0] == 0 && !memcmp(buf, buf + 1, grp->gbytes - 1)) {
		/* A group of zeros is dropped, as a discard of the whole group. */
		rc = zram_core_discard(z->inner, gi);
	} else {
		rc = zram_core_write(z->inner, gi, buf);
		if (rc && !page) {
			/* No room for the rewrite: the mark alone discards, costing nothing. */
			grp->mark[index] = M_ZERO;
			rc = 0;
			goto out;
		}
	}
	if (!rc) {
		/* The new object holds real zeros where marks said so; lost slots stay lost. */
		for (unsigned k = 0; k < group_slots(z, gi); k++)
			if (grp->mark[first + k] == M_ZERO)
				grp->mark[first + k] = 0;
		grp->mark[index] = 0;
	}
out:
	stripe_drop(grp, gi);
	return rc;
}

int zram_group_write(struct zs_zram *z, uint64_t index, const void *page)
{
	if (bad_index(z, index) || !page) {
		if (!page)
			count_invalid(z->inner);
		return -EINVAL;
	}
	return rmw(z, index, page);
}

int zram_group_discard(struct zs_zram *z, uint64_t index)
{
	if (bad_index(z, index))
		return -EINVAL;
	return rmw(z, index, NULL);
}

int zram_group_read(struct zs_zram *z, uint64_t index, void *out)
{
	struct zram_group *grp = z->grp;
	uint64_t gi = index / grp->g;
	unsigned char m;
	int rc = 0;

	if (bad_index(z, index))
		return -EINVAL;
	stripe_take(grp, gi);
	m = grp->mark[index];
	if (m) {
		memset(out, 0, z->page_size);
		if (m == M_LOST)
			rc = -EIO;
		count_read(z, rc != 0);
	} else {
		/* The whole group is decompressed for one slot, as the RFC reads a large folio. */
		rc = zram_core_read(z->inner, gi, grp->stripe[gi % STRIPES].buf);
		if (!rc)
			memcpy(out, grp->stripe[gi % STRIPES].buf +
			       (size_t)(index % grp->g) * z->page_size, z->page_size);
		else
			memset(out, 0, z->page_size);
	}
	stripe_drop(grp, gi);
	return rc;
}

/* Whole aligned groups go straight to the group store; the edges per slot. */
int zram_group_write_range(struct zs_zram *z, uint64_t first, uint64_t n, const void *buf)
{
	struct zram_group *grp = z->grp;
	const unsigned char *p = buf;

	for (uint64_t i = first; i < first + n;) {
		int rc;

		if (i % grp->g == 0 && first + n - i >= grp->g) {
			uint64_t gi = i / grp->g;

			/* Under the stripe lock so a concurrent partial write cannot revert it. */
			stripe_take(grp, gi);
			rc = zram_core_write(z->inner, gi, p + (i - first) * z->page_size);
			if (!rc)
				clear_marks(z, gi);
			stripe_drop(grp, gi);
			i += grp->g;
		} else {
			rc = rmw(z, i, p + (i - first) * z->page_size);
			i++;
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* Stops at the first page that cannot be read: the call's result is that error. */
int zram_group_read_range(struct zs_zram *z, uint64_t first, uint64_t n, void *buf)
{
	struct zram_group *grp = z->grp;
	unsigned char *p = buf;

	for (uint64_t i = first; i < first + n;) {
		int rc;

		if (i % grp->g == 0 && first + n - i >= grp->g) {
			uint64_t gi = i / grp->g;
			unsigned char *dst = p + (i - first) * z->page_size;

			stripe_take(grp, gi);
			rc = zram_core_read(z->inner, gi, dst);
			for (unsigned k = 0; !rc && k < grp->g; k++) {
				unsigned char m = grp->mark[i + k];

				if (m)
					memset(dst + (size_t)k * z->page_size, 0, z->page_size);
				if (m == M_LOST) {
					rc = -EIO;
					count_read(z, 1);
				}
			}
			stripe_drop(grp, gi);
			i += grp->g;
		} else {
			rc = zram_group_read(z, i, p + (i - first) * z->page_size);
			i++;
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* Whole aligned groups are dropped outright (no read, no memory); the edges per slot. */
int zram_group_discard_range(struct zs_zram *z, uint64_t first, uint64_t n)
{
	struct zram_group *grp = z->grp;
	int rc = 0;

	for (uint64_t i = first; i < first + n;) {
		int r;

		if (i % grp->g == 0 && first + n - i >= grp->g) {
			uint64_t gi = i / grp->g;

			stripe_take(grp, gi);
			r = zram_core_discard(z->inner, gi);
			if (!r)
				clear_marks(z, gi);
			stripe_drop(grp, gi);
			i += grp->g;
		} else {
			r = rmw(z, i, NULL);
			i++;
		}
		if (r && !rc)
			rc = r;
	}
	return rc;
}

void zram_group_reset_marks(struct zs_zram *z)
{
	struct zram_group *grp = z->grp;

	for (uint64_t gi = 0; gi * grp->g < z->nslots; gi++) {
		stripe_take(grp, gi);
		clear_marks(z, gi);
		stripe_drop(grp, gi);
	}
}

int zram_group_slot_info(struct zs_zram *z, uint64_t index, size_t *size, unsigned *flags,
			 unsigned *prio)
{
	if (index >= z->nslots)
		return -EINVAL;
	return zram_core_slot_info(z->inner, index / z->grp->g, size, flags, prio);
}
