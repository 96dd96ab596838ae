/*
 * Idle marking and recompression (the kernel's idle and recompress
 * attributes): walk the slot table under each slot's lock and re-store
 * idle or huge pages with the secondary algorithm when that lands them in a
 * smaller size class.  Apart from the write path because it runs only on
 * request, from maintenance, never on a store's hot path.  Over the core
 * (core.c's slot read and free, stream.c), called only by zram.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "zram/internal.h"

long zram_core_mark_idle(struct zs_zram *z, unsigned age_seconds)
{
	uint32_t now;
	long marked = 0;

	if (age_seconds && !z->track_actime)
		return -EINVAL;
	now = now_secs(z);
	for (uint64_t i = 0; i < z->nslots; i++) {
		struct slot *sl = &z->slots[i];
		uint32_t f = slot_lock(sl);

		if (sl->handle && !(f & (F_SAME | F_WB)) &&
		    (!age_seconds || now - sl->ac_time >= age_seconds)) {
			marked += !(f & F_IDLE);
			f |= F_IDLE;
		}
		slot_unlock(sl, f);
	}
	return marked;
}

static int recomp_wanted(uint32_t f, unsigned long h, enum zs_zram_recomp_type type)
{
	if (!h || (f & (F_SAME | F_INCOMPRESSIBLE | F_WB)) || (f & F_PRIO_MASK))
		return 0;
	if ((type & ZS_ZRAM_RECOMP_IDLE) && !(f & F_IDLE))
		return 0;
	if ((type & ZS_ZRAM_RECOMP_HUGE) && !(f & F_HUGE))
		return 0;
	return 1;
}

/* A smaller physical class, or a smaller size where the backend has no classes. */
static int recomp_gains(struct zs_zram *z, size_t old_len, size_t new_len, size_t threshold)
{
	int old_class, new_class;

	if (zram_store_kind((long)new_len, z->huge_size) == ZS_ZRAM_STORE_RAW ||
	    (threshold && new_len >= threshold))
		return 0;
	old_class = zs_backend_lookup_class(z->b, old_len);
	new_class = zs_backend_lookup_class(z->b, new_len);
	if (old_class >= 0 && new_class >= 0)
		return new_class < old_class;
	return new_len < old_len;
}

int zram_core_recompress(struct zs_zram *z, enum zs_zram_recomp_type type, size_t threshold,
			 unsigned long max_pages, struct zs_zram_recomp_result *res)
{
	struct zs_zram_recomp_result r = { 0, 0, 0 };
	size_t ps = z->page_size;
	unsigned char *page;
	struct stream *s;
	int rc = 0;

	if (!z->recomp_name[0] || (threshold && threshold >= z->huge_size) ||
	    (unsigned)type > ZS_ZRAM_RECOMP_HUGE_IDLE)
		return -EINVAL;
	page = malloc(ps);
	if (!page)
		return -ENOMEM;

	s = zram_stream_get(z);
	for (uint64_t i = 0; i < z->nslots && (!max_pages || r.scanned < max_pages); i++) {
		struct slot *sl = &z->slots[i];
		uint32_t f = slot_lock(sl);
		size_t old_len = f & F_SIZE_MASK;
		unsigned long h;
		int n;

		if (!recomp_wanted(f, sl->handle, type)) {
			slot_unlock(sl, f);
			continue;
		}
		r.scanned++;
		/* Touched now: it must not stay a candidate for other idle post-processing. */
		f &= ~F_IDLE;
		if (zram_read_locked(z, s, sl, f, page)) {
			slot_unlock(sl, f);
			rc = -EIO;
			break;
		}
		n = zs_compress(s->recomp, page, ps, s->buf, s->buf_cap);
		if (n <= 0 || !recomp_gains(z, old_len, (size_t)n, threshold)) {
			/* One secondary algorithm: it is also the highest priority, so give up on the page. */
			cnt_add(s, C_INCOMPRESSIBLE, 1);
			r.incompressible++;
			slot_unlock(sl, f | F_INCOMPRESSIBLE);
			continue;
		}
		/* As zs_zram_write: the allocator's code, -EIO for a refused write. */
		h = zs_backend_malloc_write(z->b, s->buf, (size_t)n);
		rc = ZS_IS_ERR(h) ? ZS_ERR(h) : 0;
		if (rc) {
			slot_unlock(sl, f);
			break;
		}
		f = zram_slot_free_locked(z, s, sl, f);
		sl->handle = h;
		if (z->track_actime)
			sl->ac_time = now_secs(z);
		cnt_add(s, C_PAGES_STORED, 1);
		cnt_add(s, C_COMPR_SIZE, n);
		slot_unlock(sl, f | (uint32_t)n | (1u << F_PRIO_SHIFT));
		r.recompressed++;
	}
	stream_put(s);
	if (res)
		*res = r;
	free(page);
	return rc;
}
