/*
 * Writeback (the kernel's writeback attribute): the walk that moves idle,
 * huge or incompressible slots to blocks of the backing file in batches.
 * Over the core: it calls core.c (the slot read and free), backing.c (blocks,
 * the limit, file I/O) and stream.c, and nothing calls it but zram.c's
 * zs_zram_writeback.  backing.c's top comment has the design (the three
 * phases, checksums).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "zram/internal.h"
#include "zram/backing.h"

/* ---- writeback ---- */

static int wb_wanted(uint32_t f, unsigned long h, enum zs_zram_wb_type type)
{
	if (!h || (f & (F_SAME | F_WB | F_PP_SLOT)))
		return 0;
	switch (type) {
	case ZS_ZRAM_WB_IDLE: return !!(f & F_IDLE);
	case ZS_ZRAM_WB_HUGE: return !!(f & F_HUGE);
	case ZS_ZRAM_WB_HUGE_IDLE: return (f & (F_HUGE | F_IDLE)) == (F_HUGE | F_IDLE);
	case ZS_ZRAM_WB_INCOMPRESSIBLE: return !!(f & F_INCOMPRESSIBLE);
	}
	return 0;
}

struct wb_item {
	uint64_t index, blk;
	unsigned long handle;
	uint32_t len, prio;
};

/* Phase 1, slot locked: copy the slot's data into out; returns bytes or -errno. */
static int copy_out(struct zs_zram *z, struct stream *s, struct slot *sl, uint32_t f, void *out)
{
	size_t size = f & F_SIZE_MASK;
	int rc;

	if (!z->wb->compressed || (f & F_HUGE)) {
		rc = zram_read_locked(z, s, sl, f, out);
		return rc ? rc : (int)z->page_size;
	}
	void *p = zs_backend_read_begin(z->b, sl->handle, size, s->local_copy);
	if (!p)
		return -EIO;
	memcpy(out, p, size);
	zs_backend_read_end(z->b, sl->handle, size, p);
	return (int)size;
}

int zram_core_writeback(struct zs_zram *z, enum zs_zram_wb_type type, unsigned long max_pages,
			struct zs_zram_wb_result *res)
{
	struct zram_wb *wb = z->wb;
	struct zs_zram_wb_result r = { 0, 0 };
	size_t ps = z->page_size;
	unsigned char *bufs;
	struct wb_item *items;
	uint64_t next = 0;
	int rc = 0;

	if (res)
		*res = r;
	if (!wb || type < ZS_ZRAM_WB_IDLE || type > ZS_ZRAM_WB_INCOMPRESSIBLE)
		return -EINVAL;
	bufs = malloc((size_t)wb->batch * ps);
	items = malloc(wb->batch * sizeof(*items));
	if (!bufs || !items) {
		free(bufs);
		free(items);
		return -ENOMEM;
	}
	mutex_lock_ranked(&wb->run, ZS_LOCK_ZRAM_WB_RUN);
	while (!rc && next < z->nslots && (!max_pages || r.written < max_pages)) {
		unsigned n = 0;
		struct stream *s = zram_stream_get(z);

		/* Phase 1: pick and copy out up to a batch, marking each F_PP_SLOT. */
		for (; next < z->nslots && n < wb->batch &&
		       (!max_pages || r.written + n < max_pages); next++) {
			struct slot *sl = &z->slots[next];
			uint32_t f = slot_lock(sl);
			int len;

			if (!wb_wanted(f, sl->handle, type)) {
				slot_unlock(sl, f);
				continue;
			}
			r.scanned++;
			if (!zram_wb_limit_take(wb)) {
				slot_unlock(sl, f);
				rc = -EIO;
				break;
			}
			items[n].blk = zram_wb_block_alloc(wb);
			if (items[n].blk == UINT64_MAX) {
				zram_wb_limit_give_back(wb);
				slot_unlock(sl, f);
				rc = -ENOSPC;
				break;
			}
			len = copy_out(z, s, sl, f, bufs + (size_t)n * ps);
			if (len < 0) {
				zram_wb_block_free(z, items[n].blk);
				zram_wb_limit_give_back(wb);
				slot_unlock(sl, f);
				rc = len;
				break;
			}
			items[n].index = next;
			items[n].handle = sl->handle;
			items[n].len = (uint32_t)len;
			items[n].prio = f & F_PRIO_MASK;
			n++;
			slot_unlock(sl, f | F_PP_SLOT);
		}
		stream_put(s);

		/* Phase 2: write the batch, no slot lock held. */
		unsigned ok = 0;
		int werr = 0;
		for (; ok < n; ok++) {
			/* The block is ours until the commit publishes it: no reader sees csum yet. */
			wb->csum[items[ok].blk] = zram_wb_csum(bufs + (size_t)ok * ps, items[ok].len);
			werr = zram_wb_file_io(z, 0, bufs + (size_t)ok * ps, items[ok].len, items[ok].blk);
			if (werr)
				break;
		}

		/* Phase 3: commit what was written and is unchanged; undo the rest. */
		s = zram_stream_get(z);
		for (unsigned k = 0; k < n; k++) {
			struct slot *sl = &z->slots[items[k].index];
			uint32_t f = slot_lock(sl);
			int same = (f & F_PP_SLOT) && !(f & F_WB) && sl->handle == items[k].handle;

			if (k >= ok || !same) {
				slot_unlock(sl, same ? f & ~F_PP_SLOT : f);
				zram_wb_block_free(z, items[k].blk);
				if (k >= ok)
					zram_wb_limit_give_back(wb);
				continue;
			}
			f = zram_slot_free_locked(z, s, sl, f);
			sl->handle = (unsigned long)items[k].blk;
			cnt_add(s, C_PAGES_STORED, 1);
			slot_unlock(sl, f | F_WB | items[k].len | items[k].prio);
			atomic_fetch_add_explicit(&wb->bd_count, 1, memory_order_relaxed);
			r.written++;
		}
		stream_put(s);
		/* bd_writes counts pages that reached the file, committed or not (the kernel's). */
		atomic_fetch_add_explicit(&wb->bd_writes, ok, memory_order_relaxed);
		if (werr && !rc)
			rc = werr;
	}
	mutex_unlock_ranked(&wb->run);
	free(bufs);
	free(items);
	if (res)
		*res = r;
	return rc;
}

