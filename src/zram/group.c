/*
 * Large-folio groups (cfg.group_pages > 1): the slot API over a store whose
 * page is a group of slots, so that N contiguous pages compress as one
 * object, as the kernel's 64 KiB mTHP-in-zram RFC does.  Owns the mapping
 * slot -> (group, offset), the read-modify-write of partial group writes
 * and the stripe locks that make it atomic.  zram.c only forwards here.
 *
 * Why a store of group-size pages rather than new zsmalloc classes: a
 * zsmalloc pool whose page is the group already has the classes such
 * objects need (delta page/256, zspages of 1..max_chain group-size pages,
 * spanning objects as usual), so the allocator is unchanged and the group
 * policy is exactly "raise the page size" plus the slot view; the
 * difference between the two is only what a 4 KiB access costs (a whole
 * group decompressed per read, a read-modify-write per partial write).
 *
 * Each stripe lock owns a group-size buffer, so holding the lock is
 * holding the buffer; 64 stripes keep writers of different groups apart.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "zram/internal.h"

#define STRIPES 64

struct zram_group {
	unsigned g;          /* slots per group */
	size_t gbytes;
	struct {
		pthread_mutex_t lock;
		unsigned char *buf;
	} stripe[STRIPES];
};

int zram_group_create(const struct zs_zram_config *cfg, size_t ps, struct zs_zram **out)
{
	unsigned g = cfg->group_pages;
	struct zs_zram_config ic = *cfg;
	struct zram_group *grp;
	struct zs_zram *z;
	uint64_t nslots = cfg->disksize / ps;
	int rc;

	if (g < 2 || g > 16 || (g & (g - 1)) || !zs_page_size_valid(ps * g))
		return -EINVAL;
	ic.page_size = ps * g;
	ic.group_pages = 0;
	ic.disksize = (nslots + g - 1) / g * ic.page_size;
	z = calloc(1, sizeof(*z));
	grp = calloc(1, sizeof(*grp));
	if (!z || !grp) {
		free(z);
		free(grp);
		return -ENOMEM;
	}
	rc = zs_zram_create(&ic, &z->inner);
	if (rc) {
		free(z);
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

	zs_zram_destroy(z->inner);
	for (int i = 0; i < STRIPES; i++) {
		pthread_mutex_destroy(&grp->stripe[i].lock);
		free(grp->stripe[i].buf);
	}
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

/* Read-modify-write of one slot: page NULL writes zeros (discard). */
static int rmw(struct zs_zram *z, uint64_t index, const void *page)
{
	struct zram_group *grp = z->grp;
	uint64_t gi = index / grp->g;
	size_t off = (size_t)(index % grp->g) * z->page_size;
	unsigned si = (unsigned)(gi % STRIPES);
	unsigned char *buf = grp->stripe[si].buf;
	int rc;

	pthread_mutex_lock(&grp->stripe[si].lock);
	rc = zs_zram_read(z->inner, gi, buf, grp->gbytes);
	if (!rc) {
		if (page)
			memcpy(buf + off, page, z->page_size);
		else
			memset(buf + off, 0, z->page_size);
		/* A group of zeros is dropped, as a discard of the whole group. */
		if (!page && buf[0] == 0 && !memcmp(buf, buf + 1, grp->gbytes - 1))
			rc = zs_zram_discard(z->inner, gi);
		else
			rc = zs_zram_write(z->inner, gi, buf);
	}
	pthread_mutex_unlock(&grp->stripe[si].lock);
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
	unsigned si = (unsigned)(gi % STRIPES);
	int rc;

	if (bad_index(z, index))
		return -EINVAL;
	/* The whole group is decompressed for one slot, as the RFC reads a large folio. */
	pthread_mutex_lock(&grp->stripe[si].lock);
	rc = zs_zram_read(z->inner, gi, grp->stripe[si].buf, grp->gbytes);
	if (!rc)
		memcpy(out, grp->stripe[si].buf + (size_t)(index % grp->g) * z->page_size,
		       z->page_size);
	pthread_mutex_unlock(&grp->stripe[si].lock);
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
			unsigned si = (unsigned)(gi % STRIPES);

			/* Under the stripe lock so a concurrent partial write cannot revert it. */
			pthread_mutex_lock(&grp->stripe[si].lock);
			rc = zs_zram_write(z->inner, gi, p + (i - first) * z->page_size);
			pthread_mutex_unlock(&grp->stripe[si].lock);
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

int zram_group_read_range(struct zs_zram *z, uint64_t first, uint64_t n, void *buf)
{
	struct zram_group *grp = z->grp;
	unsigned char *p = buf;

	for (uint64_t i = first; i < first + n;) {
		int rc;

		if (i % grp->g == 0 && first + n - i >= grp->g) {
			rc = zs_zram_read(z->inner, i / grp->g, p + (i - first) * z->page_size,
					  grp->gbytes);
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

int zram_group_slot_info(struct zs_zram *z, uint64_t index, size_t *size, unsigned *flags,
			 unsigned *prio)
{
	if (index >= z->nslots)
		return -EINVAL;
	return zs_zram_slot_info(z->inner, index / z->grp->g, size, flags, prio);
}
