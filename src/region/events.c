/*
 * zs_region's page endings and events: how an owned page is finished
 * (region_final/region_finish: the events that hit it while owned win), the
 * library's own zaps told apart from the application's (region_self_zap),
 * and the application's remove/unmap/remap events applied page by page.
 * Kept apart from region.c (create/destroy, the range API) because every
 * path that ends a page's ownership - faults, pageout, release, events -
 * comes through here; the rules are in region.c's design note ("The
 * application's events", "Lock order").
 */
#include "internal.h"

/* ---- finishing an owned page ---- */

unsigned char region_final(unsigned char s, unsigned char want)
{
	if (s & F_GONE)
		return ST_GONE;
	if (s & F_MOVED)
		return want == ST_STORED ? ST_MOVED : ST_GONE;
	/*
	 * Dropped while owned: zeros, NONE - even for an owner that leaves the
	 * page mapped (an install, a pageout given back).  The kernel lets the
	 * application's madvise go on once its remove event is read and zaps
	 * after, so the page still mapped may be its old one with the zap to
	 * come.  Published RES, a pageout could claim it and store the old bytes
	 * before the zap (which then finds nothing): the dropped page read them
	 * back (test_mt_region_move_race, touch; 1 wrong page per ~10^4 races
	 * with the copy, more with the move).  NONE is never paged out and reads
	 * zeros once the zap lands.  An install of zeros for a dropped page clears
	 * the flag itself (fault.c): that page is RES.
	 */
	if (s & F_DROP)
		return ST_NONE;
	return want;
}

unsigned char region_finish(struct zs_region *r, size_t i, unsigned char want, int slot_held,
			    int counted)
{
	int held = slot_held;
	for (;;) {
		unsigned char s = st_load(r, i);
		unsigned char f = region_final(s, held ? want : (want == ST_STORED ? ST_NONE : want));
		int keeps = f == ST_STORED || f == ST_MOVED;
		if (held && !keeps) {
			/*
			 * Free before publishing: once NONE/RES the page can be claimed
			 * and its slot written again by a pageout.
			 */
			zs_zram_discard(r->store, i);
			atomic_fetch_sub_explicit(&r->stored, 1, memory_order_relaxed);
			held = 0;
			continue;
		}
		/*
		 * stats.resident moves while we still own the page: counted before
		 * it is published RES (a pageout may claim and uncount it at once),
		 * uncounted before it is published as anything else (a fault may
		 * install and count it at once).  So it never exceeds the pages nor
		 * goes below zero, even for a moment.
		 */
		int d = (f == ST_RES) - counted;
		if (d)
			atomic_fetch_add_explicit(&r->resident, (uint64_t)(int64_t)d, memory_order_relaxed);
		if (st_cas(r, i, s, f)) {
			if (f == ST_GONE || f == ST_MOVED)
				atomic_fetch_add_explicit(&r->ngone, 1, memory_order_release);
			return f;
		}
		if (d)
			atomic_fetch_sub_explicit(&r->resident, (uint64_t)(int64_t)d, memory_order_relaxed);
	}
}

/* ---- the library's own zaps ---- */

void region_self_zap(struct zs_region *r, size_t first, size_t n, int exact)
{
	uintptr_t start = (uintptr_t)(r->base + first * r->page), len = n * r->page;
	int slot = -1;

	while (slot < 0) {
		mutex_lock_ranked(&r->ulock, ZS_LOCK_REGION_ULOCK);
		for (int k = 0; k < NZAPS; k++) {
			if (!r->zaps[k].len) {
				r->zaps[k].start = start;
				r->zaps[k].len = len;
				memset(r->zaps[k].cnt, 0, n);
				slot = k;
				break;
			}
		}
		mutex_unlock_ranked(&r->ulock);
		if (slot < 0)
			sched_yield();
	}
	/*
	 * Returns once a handler has read our remove events (the kernel waits
	 * for that); pages the application unmapped meanwhile raise none.
	 *
	 * exact: one page a call.  madvise drops the mmap lock while it waits
	 * for the event to be read; if the application splits the mapping
	 * meanwhile (munmap of a hole in the run, mprotect), the kernel looks
	 * the mapping up again, zaps only up to the split and raises the event
	 * again for the part after it - a second count nothing tells from the
	 * application's own MADV_DONTNEED there, which would finish those pages
	 * as dropped (zeros) though their bytes are stored
	 * (test_mt_region_move_race, munmap, copy path: 9,339 wrong pages in
	 * 5 s).  If the run's first page is unmapped meanwhile, the call stops
	 * there (ENOMEM) and zaps nothing after it.  One page cannot be split:
	 * every second count is the application's.  The cost is one handler
	 * round trip a page; release (every page ends zeros either way) zaps
	 * the whole run and only needs the remaining pages zapped.
	 */
	if (exact || madvise((void *)start, len, MADV_DONTNEED) != 0) {
		/*
		 * (not exact: part of the run was unmapped under us; the rest, page
		 * by page.)  A page the application unmapped is skipped, looked at
		 * under ulock (its unmap is read and applied there, before its
		 * munmap returns), so a mapping it placed there since is not zapped.
		 * What remains is the moment between that look and the zap, and the
		 * zap's own wait for its event: an application that unmaps the page
		 * then and maps its own memory there at once loses that memory's
		 * page.  No lock user space can take stops it; pageout by move
		 * (reclaim.c) has no such moment, so it remains only where the
		 * kernel cannot move (region.h).
		 */
		for (size_t j = 0; j < n; j++) {
			mutex_lock_ranked(&r->ulock, ZS_LOCK_REGION_ULOCK);
			int lost = !!(st_load(r, first + j) & (F_GONE | F_MOVED));
			mutex_unlock_ranked(&r->ulock);
			if (!lost)
				madvise((void *)(start + j * r->page), r->page, MADV_DONTNEED);
		}
	}
	/*
	 * Events read are applied under ulock: taking it means ours were
	 * counted.  Every still-mapped page got exactly one from us, so a page
	 * counted twice was dropped by the application too: apply that now,
	 * while we still own the page (it finishes as dropped).
	 */
	mutex_lock_ranked(&r->ulock, ZS_LOCK_REGION_ULOCK);
	struct self_zap *z = &r->zaps[slot];
	z->len = 0;
	for (size_t j = 0; j < n; j++)
		if (z->cnt[j] >= 2)
			region_event_page_remove(r, first + j);
	mutex_unlock_ranked(&r->ulock);
}

/* ulock held: count a remove event on the page at addr if one of our zaps covers it. */
static int own_zap_page(struct zs_region *r, uintptr_t addr)
{
	for (int k = 0; k < NZAPS; k++) {
		struct self_zap *z = &r->zaps[k];
		if (z->len && addr >= z->start && addr - z->start < z->len) {
			unsigned char *c = &z->cnt[(addr - z->start) / r->page];
			if (*c < 255)
				(*c)++;
			return 1;
		}
	}
	return 0;
}

/* ---- the application's events (a handler, ulock held) ---- */

/* Moved pages: the region page a moved-to address holds, or (size_t)-1. */
size_t region_moved_page(struct zs_region *r, uintptr_t addr)
{
	for (size_t k = r->nmoves; k-- > 0;) {
		const struct move_rec *m = &r->moves[k];
		if (addr >= m->to && addr - m->to < m->len)
			return m->first + (addr - m->to) / r->page;
	}
	return (size_t)-1;
}

static void move_add(struct zs_region *r, uintptr_t to, uintptr_t len, size_t first)
{
	if (r->nmoves == r->capmoves) {
		size_t cap = r->capmoves ? 2 * r->capmoves : 8;
		struct move_rec *m = realloc(r->moves, cap * sizeof(*m));
		if (!m) {
			fprintf(stderr, "zs_region: out of memory recording an mremap; pages stored "
					"in the moved part will read as zeros\n");
			return;
		}
		r->moves = m;
		r->capmoves = cap;
	}
	r->moves[r->nmoves++] = (struct move_rec){ .to = to, .len = len, .first = first };
}

/* [a, a+len) no longer holds what the log says (moved on): cut it out of every record. */
static void move_cut(struct zs_region *r, uintptr_t a, uintptr_t len)
{
	size_t n = r->nmoves;
	for (size_t k = 0; k < n; k++) {
		struct move_rec m = r->moves[k];
		if (!m.len || a >= m.to + m.len || a + len <= m.to)
			continue;
		uintptr_t lo = a > m.to ? a : m.to, hi = a + len < m.to + m.len ? a + len : m.to + m.len;
		r->moves[k].len = lo - m.to;   /* the left part stays here */
		if (hi < m.to + m.len)
			move_add(r, hi, m.to + m.len - hi, m.first + (hi - m.to) / r->page);
	}
	size_t j = 0;
	for (size_t k = 0; k < r->nmoves; k++)
		if (r->moves[k].len)
			r->moves[j++] = r->moves[k];
	r->nmoves = j;
}

/*
 * Set flag on page i while it is owned.  0: its owner finished it meanwhile,
 * so the event must be applied to the finished page instead (event_page
 * looks again): dropping it lost an application's MADV_DONTNEED when a
 * pageout stored the page just then (test_mt_repro_region_madvise,
 * dontneed_reclaim, once pageout by move made pageout short).
 */
static int add_flag(struct zs_region *r, size_t i, unsigned char flag)
{
	for (;;) {
		unsigned char s = st_load(r, i);
		if (!st_owned(s))
			return 0;
		if (st_cas(r, i, s, s | flag))
			return 1;
	}
}

enum ev { EV_REMOVE, EV_UNMAP, EV_MOVE };

/* Apply one event to region page i (its current address, in the range or moved). */
static void event_page(struct zs_region *r, size_t i, enum ev ev)
{
	static const unsigned char flag[] = { F_DROP, F_GONE, F_MOVED };
	for (;;) {
		unsigned char s = st_load(r, i), m = s & ST_MASK, to;
		if (m == ST_GONE)
			return;
		if (st_owned(s)) {
			if (!add_flag(r, i, flag[ev]))
				continue;
			if (ev == EV_REMOVE) {
				atomic_fetch_add_explicit(&r->removed, 1, memory_order_relaxed);
			} else {
				atomic_fetch_add_explicit(&r->unmapped, 1, memory_order_relaxed);
				/*
				 * Counted now, not only when the owner finishes it: the range
				 * check looks at the flags only once ngone says there is
				 * something to find.  A page of the region's first unmap that
				 * a pageout held was otherwise still the application's to
				 * the next zs_region_pageout (test_mt_region_stress,
				 * ZS_REGION_MOVE=0: pageout and release returned 0 there).
				 */
				atomic_fetch_add_explicit(&r->ngone, 1, memory_order_release);
			}
			return;
		}
		if (m == ST_MOVED) {
			/* a moved page's slot: dropped with its new mapping, or moved again */
			if (ev == EV_MOVE)
				return;
			if (!st_cas(r, i, s, ST_REL))
				continue;
			zs_zram_discard(r->store, i);
			atomic_fetch_sub_explicit(&r->stored, 1, memory_order_relaxed);
			st_set(r, i, ST_GONE);
			return;
		}
		if (m == ST_NONE && ev == EV_REMOVE)
			return;
		to = ev == EV_REMOVE ? ST_NONE : ev == EV_UNMAP ? ST_GONE :
		     m == ST_STORED ? ST_MOVED : ST_GONE;
		if (m == ST_STORED && to != ST_MOVED) {
			if (!st_cas(r, i, s, ST_REL))
				continue;
			zs_zram_discard(r->store, i);
			atomic_fetch_sub_explicit(&r->stored, 1, memory_order_relaxed);
			st_set(r, i, to);
		} else if (m == ST_RES) {
			/* uncounted while owned, so stats.resident never overshoots (region_finish) */
			if (!st_cas(r, i, s, ST_REL))
				continue;
			atomic_fetch_sub_explicit(&r->resident, 1, memory_order_relaxed);
			st_set(r, i, to);
		} else if (!st_cas(r, i, s, to)) {
			continue;
		}
		if (to == ST_GONE || to == ST_MOVED) {
			atomic_fetch_add_explicit(&r->ngone, 1, memory_order_release);
			atomic_fetch_add_explicit(&r->unmapped, 1, memory_order_relaxed);
		} else if (m != ST_NONE) {
			atomic_fetch_add_explicit(&r->removed, 1, memory_order_relaxed);
		}
		return;
	}
}

/*
 * ulock held: the region page living at addr, or (size_t)-1.  *home says
 * whether it is at its own address.  A page that left its address (unmapped
 * or moved) is looked for among the moved-to ranges first: mremap may move
 * one part of the range into a hole of another.
 */
size_t region_locate(struct zs_region *r, uintptr_t addr, int *home)
{
	uintptr_t b = (uintptr_t)r->base;
	size_t j = (size_t)-1;

	if (addr >= b && addr - b < r->size) {
		j = (addr - b) / r->page;
		unsigned char s = st_load(r, j), m = s & ST_MASK;
		if (m != ST_GONE && m != ST_MOVED && !(s & (F_GONE | F_MOVED))) {
			*home = 1;
			return j;
		}
	}
	size_t i = region_moved_page(r, addr);
	if (i != (size_t)-1) {
		*home = 0;
		return i;
	}
	*home = 1;
	return j;
}

/* Apply ev to every region page of [s, e), in the range or at a moved-to address. */
static void event_range(struct zs_region *r, uintptr_t s, uintptr_t e, enum ev ev)
{
	s &= ~(uintptr_t)(r->page - 1);
	for (uintptr_t a = s; a < e; a += r->page) {
		int home;
		size_t i = region_locate(r, a, &home);
		if (i == (size_t)-1)
			continue;
		unsigned char st = st_load(r, i);
		/* a page that left this address: the event is about whatever is there now */
		if (home && ((st & ST_MASK) == ST_MOVED || (st & F_MOVED)))
			continue;
		if (ev == EV_REMOVE && home && own_zap_page(r, a))
			continue;
		event_page(r, i, ev);
	}
}

void region_event_remove(struct zs_region *r, uintptr_t s, uintptr_t e)
{
	event_range(r, s, e, EV_REMOVE);
}

void region_event_page_remove(struct zs_region *r, size_t i)
{
	event_page(r, i, EV_REMOVE);
}

void region_event_unmap(struct zs_region *r, uintptr_t s, uintptr_t e)
{
	event_range(r, s, e, EV_UNMAP);
}

void region_event_remap(struct zs_region *r, uintptr_t from, uintptr_t to, uintptr_t len)
{
	uintptr_t pg = r->page;
	/* Record where each moved region page lives now, one run per contiguous piece. */
	for (uintptr_t off = 0; off < len;) {
		uintptr_t a = from + off;
		int home;
		size_t i = region_locate(r, a, &home);
		if (i == (size_t)-1) {
			off += pg;
			continue;
		}
		uintptr_t run = pg;
		while (off + run < len) {
			int h2;
			if (region_locate(r, a + run, &h2) != i + run / pg)
				break;
			run += pg;
		}
		move_add(r, to + off, run, i);
		off += run;
	}
	event_range(r, from, from + len, EV_MOVE);
	/* what the log said lived at the old place has moved on (the new records are newer) */
	move_cut(r, from, len);
	if (!atomic_exchange(&r->broken, 1))
		fprintf(stderr, "zs_region: the application moved part of the region with mremap; "
				"the moved part is no longer the region's (see region.h)\n");
}

/* ---- waiting for the application's events ---- */

/*
 * Here, not in region.c: every range call (region.c's release and advise,
 * reclaim.c's pageout) first waits for the events already read and then
 * refuses pages those events took away, which is this file's business; in
 * region.c the check made region.c and reclaim.c depend on each other.
 */
void region_events_sync(struct zs_region *r)
{
	/*
	 * The application's munmap/madvise returned once a handler read its
	 * event; taking ulock waits until that handler has applied it too.
	 * Signals blocked: a handler touching region memory on this thread
	 * while it holds ulock would wait for a fault that needs ulock.
	 */
	struct zs_sigguard old;
	signals_block(&old);
	mutex_lock_ranked(&r->ulock, ZS_LOCK_REGION_ULOCK);
	mutex_unlock_ranked(&r->ulock);
	signals_restore(&old);
}

int region_range_ok(struct zs_region *r, const void *addr, size_t len)
{
	const unsigned char *a = addr;
	if (a < r->base || len > r->size || (size_t)(a - r->base) > r->size - len)
		return -EINVAL;
	if (((uintptr_t)a | len) & (r->page - 1))
		return -EINVAL;
	region_events_sync(r);
	/* Pages the application unmapped or moved away are not ours to touch. */
	if (atomic_load_explicit(&r->ngone, memory_order_acquire)) {
		size_t first = pidx(r, a), n = len / r->page;
		for (size_t i = first; i < first + n; i++) {
			unsigned char s = st_load(r, i), m = s & ST_MASK;
			if (m == ST_GONE || m == ST_MOVED || (s & (F_GONE | F_MOVED)))
				return -EFAULT;
		}
	}
	return 0;
}
