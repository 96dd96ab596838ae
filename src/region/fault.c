/*
 * zs_region's fault side: the userfaultfd handler threads, sequential
 * stream detection and fault-around.  Kept apart from pageout and reclaim
 * (reclaim.c) because it is the latency-critical path; both meet only in
 * the per-page state machine described in region.c.
 *
 * Fault path: a handler reads messages under ulock, applies the events among
 * them there (region.c) and queues the faults.  For each queued fault it
 * claims the page (STORED or NONE -> IN), and when the fault continues a
 * sequential stream (a small table of "next expected page" per region, the
 * kernel's swap readahead in spirit) also claims up to fault_around-1
 * following pages.  It decompresses into a buffer outside ulock, then under
 * ulock checks the event flags and installs the run with UFFDIO_COPY, which
 * wakes the faulting thread; a read fault on never-written pages gets
 * UFFDIO_ZEROPAGE.  Only then are the slots discarded (their objects freed,
 * deferred if the store says so) and the pages marked RES; discard before
 * RES, so a pageout that claims the page next cannot have its new slot
 * contents discarded.
 *
 * A fault on a page someone else owns (pageout, release, another handler)
 * stays queued and is retried; the handler never waits for an owner,
 * because the owner may be waiting for the handler to read an event (its
 * own madvise, or the kernel refusing ioctls with EAGAIN while an event is
 * unread).  For the same reason an install that gets EAGAIN reads and
 * applies the pending events itself (pump) and looks at the flags again.
 *
 * Other missing faults: a RES page the application zapped (MADV_DONTNEED)
 * gets zeros (UFFDIO_ZEROPAGE/COPY never replace a mapped page, so a stale
 * message for a mapped page only wakes); an OUT page the application zapped
 * under pageout gets a write-protected zero page (OUTF), so pageout, which
 * may be the faulting thread, reads zeros instead of waiting for itself; a
 * moved page is served from its slot at its new address.
 *
 * Read errors: a slot that cannot be read (zs_zram_read fails, e.g. -EIO from
 * a backing file) is never answered with other bytes.  The faulting page is
 * poisoned with UFFDIO_POISON (Linux 6.6+): the access and every later one
 * get SIGBUS, as the kernel answers a swap read error, until the page is
 * released, dropped (MADV_DONTNEED) or unmapped.  Fault-around pages whose
 * read fails are left STORED: their own fault tries again.  Without
 * UFFDIO_POISON the faulting thread is sent SIGBUS (tgkill) and the page
 * stays BAD, so each later touch gets SIGBUS too; stderr says so once.
 *
 * Faults install with UFFDIO_COPY, not UFFDIO_MOVE: a move leaves a hole in
 * the decompression buffer that the next decompression must fault in and
 * zero - more work than the 4 KiB copy.  Pageout does move (reclaim.c).
 */
#include "internal.h"

/* ---- fault handling ---- */

/*
 * Fault-around window for a fault at p: > 0 ascending, < 0 descending (the
 * faulting page included), 1 when the fault continues no stream.  Streams are
 * a few "next page expected" slots updated racily (relaxed): a lost update
 * only costs one window.  Descending streams matter: glibc's memcpy of
 * page-aligned buffers copies backwards.
 */
static int stream_window(struct zs_region *r, size_t p)
{
	int k = (int)r->fault_around;

	if (k <= 1)
		return 1;
	for (int i = 0; i < NSTREAMS; i++) {
		if (atomic_load_explicit(&r->streams[i], memory_order_relaxed) == p) {
			atomic_store_explicit(&r->streams[i], p + (uint64_t)k, memory_order_relaxed);
			return k;
		}
		if (atomic_load_explicit(&r->rstreams[i], memory_order_relaxed) == p) {
			atomic_store_explicit(&r->rstreams[i], p - (uint64_t)k, memory_order_relaxed);
			return -k;
		}
	}
	unsigned s = atomic_fetch_add_explicit(&r->stream_next, 1, memory_order_relaxed) % NSTREAMS;
	atomic_store_explicit(&r->streams[s], p + 1, memory_order_relaxed);
	atomic_store_explicit(&r->rstreams[s], p - 1, memory_order_relaxed);
	return 1;
}

static void lat_record(struct zs_region *r, double ns)
{
	uint64_t q = (uint64_t)(ns / 128.0);
	int b = 0;
	while (q > 1 && b < ZS_REGION_LAT_BUCKETS - 1) {
		q >>= 1;
		b++;
	}
	atomic_fetch_add_explicit(&r->hist[b], 1, memory_order_relaxed);
}

enum { DONE, AGAIN };
enum { K_NONE, K_STORED, K_RES };                          /* what a claimed page held */
/* what the install did; O_DROPPED: found the dropped page's old one still mapped (NONE) */
enum { O_INSTALLED, O_POISONED, O_KEPT, O_SKIPPED, O_DROPPED };

/* ---- reading the uffd ---- */

static void enqueue(struct handler *h, const struct uffd_msg *m, double t)
{
	struct zs_region *r = h->r;
	unsigned long a = (unsigned long)m->arg.pagefault.address & ~(unsigned long)(r->page - 1);
	unsigned fl = (unsigned)m->arg.pagefault.flags;

	uintptr_t b = (uintptr_t)r->base;
	uint16_t seq = a >= b && a - b < r->size ?
		atomic_load_explicit(&r->wseq[(a - b) / r->page], memory_order_seq_cst) : 0;

	/*
	 * One entry per page and kind: answering it wakes every thread waiting
	 * there.  It stands for the newest message now (internal.h, wake_mark).
	 */
	for (size_t i = 0; i < h->qn; i++) {
		if (h->q[i].addr == a && !((h->q[i].flags ^ fl) & UFFD_PAGEFAULT_FLAG_WP)) {
			h->q[i].flags |= fl & UFFD_PAGEFAULT_FLAG_WRITE;
			h->q[i].seq = seq;
			return;
		}
	}
	if (h->qn == h->qcap) {
		size_t cap = h->qcap ? 2 * h->qcap : 64;
		struct fault_item *q = realloc(h->q, cap * sizeof(*q));
		if (!q) {
			/* No room: wake the thread, its retry faults again later. */
			struct uffdio_range rg = { .start = a, .len = r->page };
			wake_mark(r, a, r->page);
			ioctl(r->uffd, UFFDIO_WAKE, &rg);
			return;
		}
		h->q = q;
		h->qcap = cap;
	}
	h->q[h->qn++] = (struct fault_item){ .addr = a, .flags = fl,
					     .tid = r->have_tid ? m->arg.pagefault.feat.ptid : 0,
					     .t = t, .seq = seq };
}

/*
 * ulock held: read what is there (one message when `one`), apply the events,
 * queue the faults, stamped t (now_ns() of the caller's loop turn: one clock
 * read a turn, not one a message).  Messages read, or -1.
 */
static ssize_t pump(struct handler *h, double t, int one)
{
	struct zs_region *r = h->r;
	struct uffd_msg msgs[16];
	ssize_t got = read(r->uffd, msgs, one ? sizeof(msgs[0]) : sizeof(msgs));

	if (got <= 0)
		return got < 0 ? -1 : 0;
	size_t nm = (size_t)got / sizeof(msgs[0]);
	for (size_t i = 0; i < nm; i++) {
		const struct uffd_msg *m = &msgs[i];
		switch (m->event) {
		case UFFD_EVENT_PAGEFAULT:
			enqueue(h, m, t);
			break;
		case UFFD_EVENT_REMOVE:
			region_event_remove(r, (uintptr_t)m->arg.remove.start, (uintptr_t)m->arg.remove.end);
			break;
		case UFFD_EVENT_UNMAP:
			region_event_unmap(r, (uintptr_t)m->arg.remove.start, (uintptr_t)m->arg.remove.end);
			break;
		case UFFD_EVENT_REMAP:
			region_event_remap(r, (uintptr_t)m->arg.remap.from, (uintptr_t)m->arg.remap.to,
					   (uintptr_t)m->arg.remap.len);
			break;
		default:
			break;
		}
	}
	return (ssize_t)nm;
}

/*
 * ulock held, an install got EAGAIN: the kernel refuses installs while an
 * event is unread and until the thread that raised it has run again.  Read
 * and apply what is there; if nothing was, let go of ulock and the core for
 * a moment (that thread, or one waiting for ulock, needs them).  Callers
 * look at the page flags again afterwards.
 */
static void eagain(struct handler *h, unsigned *tries)
{
	struct zs_region *r = h->r;
	if (pump(h, now_ns(), 0) > 0)
		return;
	mutex_unlock_ranked(&r->ulock);
	if (++*tries < 64) {
		sched_yield();
	} else {
		struct timespec ts = { 0, 20000 };
		nanosleep(&ts, NULL);
	}
	mutex_lock_ranked(&r->ulock, ZS_LOCK_REGION_ULOCK);
}

/* ---- answering with SIGBUS ---- */

/*
 * ulock held.  Poison the page at addr (SIGBUS on access).  0 done, -EAGAIN
 * when events were applied meanwhile (the caller looks at the flags again).
 */
static int poison_page(struct handler *h, uintptr_t addr, const struct fault_item *it)
{
	struct zs_region *r = h->r;

	wake_mark(r, addr, r->page);
	if (r->can_poison) {
		struct uffdio_poison po = { .range = { .start = addr, .len = r->page }, .mode = 0 };
		int rc = ioctl(r->uffd, UFFDIO_POISON, &po);
		if (rc == 0 || errno == EEXIST) {
			if (rc)   /* something is mapped there: no wake came with it (wake_mark) */
				ioctl(r->uffd, UFFDIO_WAKE, &po.range);
			atomic_fetch_add_explicit(&r->sigbus_pages, 1, memory_order_relaxed);
			return 0;
		}
		if (errno == EAGAIN) {
			unsigned t = 0;
			eagain(h, &t);
			return -EAGAIN;
		}
	}
	if (!atomic_exchange(&r->warned_nopoison, 1))
		fprintf(stderr, "zs_region: a stored page could not be read back and UFFDIO_POISON "
				"(Linux 6.6+) is not available: sending SIGBUS to the faulting thread\n");
	if (it && it->tid)
		syscall(SYS_tgkill, (int)getpid(), (int)it->tid, SIGBUS);
	else
		kill(getpid(), SIGBUS);
	struct uffdio_range rg = { .start = addr, .len = r->page };
	ioctl(r->uffd, UFFDIO_WAKE, &rg);
	atomic_fetch_add_explicit(&r->sigbus_pages, 1, memory_order_relaxed);
	return 0;
}

/* ulock held: zeros at addr for a page nothing is known about; a mapped page is left alone. */
static void zero_at(struct handler *h, uintptr_t addr)
{
	struct zs_region *r = h->r;
	unsigned tries = 0;
	wake_mark(r, addr, r->page);
	for (;;) {
		struct uffdio_zeropage zp = { .range = { .start = addr, .len = r->page } };
		if (ioctl(r->uffd, UFFDIO_ZEROPAGE, &zp) == 0)
			return;
		if (errno == EAGAIN) {
			eagain(h, &tries);
			continue;
		}
		break;
	}
	struct uffdio_range rg = { .start = addr, .len = r->page };
	ioctl(r->uffd, UFFDIO_WAKE, &rg);
}

/* ---- installing ---- */

/*
 * Install pages [p, p+n) claimed IN; kind[i] says what each held, fp is the
 * faulting page.  Reads outside ulock (decompression is the slow part),
 * installs under it.
 */
static void install_run(struct handler *h, size_t p, size_t n, const unsigned char *kind,
			size_t fp, const struct fault_item *it)
{
	struct zs_region *r = h->r;
	unsigned char bad[MAX_AROUND], out[MAX_AROUND];
	int write = !!(it->flags & UFFD_PAGEFAULT_FLAG_WRITE), any_stored = 0, wake = 0;
	unsigned tries = 0;
	uintptr_t start = (uintptr_t)(r->base + p * r->page);

	for (size_t i = 0; i < n; i++) {
		bad[i] = 0;
		if (kind[i] != K_STORED)
			continue;
		any_stored = 1;
		if (zs_zram_read(r->store, p + i, h->buf + i * r->page, r->page) != 0) {
			bad[i] = 1;
			atomic_fetch_add_explicit(&r->read_errors, 1, memory_order_relaxed);
		}
	}
	/* A read fault on pages with no contents gets the shared zero page. */
	int zeromode = !any_stored && !write;
	if (!zeromode)
		for (size_t i = 0; i < n; i++)
			if (kind[i] != K_STORED)
				memset(h->buf + i * r->page, 0, r->page);

	mutex_lock_ranked(&r->ulock, ZS_LOCK_REGION_ULOCK);
	for (size_t i = 0; i < n;) {
		unsigned char s = st_load(r, p + i);
		if (s & (F_GONE | F_MOVED)) {
			out[i++] = O_SKIPPED;   /* not ours any more: leave the address alone */
			wake = 1;
			continue;
		}
		if (bad[i] && !(s & F_DROP)) {
			if (p + i != fp) {
				out[i++] = O_KEPT;   /* not asked for: its own fault tries again */
				continue;
			}
			if (poison_page(h, start + i * r->page, it))
				continue;
			out[i++] = O_POISONED;
			continue;
		}
		/* a run of pages to install: data, or zeros when dropped meanwhile */
		size_t j = i;
		while (j < n) {
			unsigned char t = st_load(r, p + j);
			if ((t & (F_GONE | F_MOVED)) || (bad[j] && !(t & F_DROP)))
				break;
			if ((t & F_DROP) && !zeromode)
				memset(h->buf + j * r->page, 0, r->page);
			j++;
		}
		int rc;
		size_t did = 0;
		wake_mark(r, start + i * r->page, (j - i) * r->page);
		if (zeromode) {
			struct uffdio_zeropage zp = { .range = { .start = start + i * r->page,
								 .len = (j - i) * r->page } };
			rc = ioctl(r->uffd, UFFDIO_ZEROPAGE, &zp);
			if (rc && zp.zeropage > 0)
				did = (size_t)zp.zeropage / r->page;
		} else {
			struct uffdio_copy cp = { .dst = start + i * r->page,
						  .src = (uintptr_t)(h->buf + i * r->page),
						  .len = (j - i) * r->page, .mode = 0 };
			rc = ioctl(r->uffd, UFFDIO_COPY, &cp);
			if (rc && cp.copy > 0)
				did = (size_t)cp.copy / r->page;
		}
		if (rc == 0)
			did = j - i;
		for (size_t k = 0; k < did; k++) {
			/*
			 * Installed as zeros because dropped (F_DROP seen above, under
			 * ulock): the drop is applied, the page is RES.  Cleared here so
			 * a drop read after the install - the old page is mapped then,
			 * its zap to come - is told apart (events.c, region_final).
			 */
			for (;;) {
				unsigned char t = st_load(r, p + i);
				if (!(t & F_DROP) || st_cas(r, p + i, t, (unsigned char)(t & ~F_DROP)))
					break;
			}
			out[i++] = O_INSTALLED;
		}
		if (rc == 0 || did)
			continue;
		if (errno == EAGAIN) {
			eagain(h, &tries);   /* then look at the flags again */
			continue;
		}
		/*
		 * EEXIST: a page is mapped there already.  A RES page the application
		 * did not zap after all stays RES.  But a page the application
		 * dropped (NONE when claimed, or F_DROP now) that is still mapped is
		 * its old page with the zap still to come: the kernel lets madvise
		 * go on once its remove event is read and zaps afterwards.  Publishing
		 * that RES let a pageout store the old bytes before the zap landed
		 * (nothing left to zap then), and the dropped page read them back
		 * (test_mt_region_move_race, touch; with the move and with the copy).
		 * It is NONE: nothing to page out, zeros once the zap lands.
		 * Anything else (the mm is going away): leave the page as it was.
		 */
		if (errno == EEXIST)
			out[i] = kind[i] == K_NONE || (st_load(r, p + i) & F_DROP) ? O_DROPPED :
										    O_INSTALLED;
		else
			out[i] = kind[i] == K_STORED ? O_KEPT : O_SKIPPED;
		i++;
		wake = 1;
	}
	mutex_unlock_ranked(&r->ulock);
	if (wake)
		uffd_wake(r, p, n);

	size_t nin = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char want = out[i] == O_INSTALLED ? ST_RES : out[i] == O_POISONED ? ST_BAD :
				     out[i] == O_DROPPED ? ST_NONE :
				     out[i] == O_KEPT || kind[i] == K_STORED ? ST_STORED : ST_NONE;
		int held = kind[i] == K_STORED;
		if (want == ST_RES)
			atomic_store_explicit(&r->ref[p + i], 1, memory_order_relaxed);
		region_finish(r, p + i, want, held, kind[i] == K_RES);
		nin += out[i] == O_INSTALLED && held && !bad[i];
	}
	if (zeromode)
		atomic_fetch_add_explicit(&r->faults_zero, 1, memory_order_relaxed);
	uint64_t res = atomic_load_explicit(&r->resident, memory_order_relaxed);
	atomic_fetch_add_explicit(&r->pages_in, nin, memory_order_relaxed);
	if (n > 1)
		atomic_fetch_add_explicit(&r->around, n - 1, memory_order_relaxed);
	if (r->resident_limit && res > r->resident_limit)
		kick_reclaim(r);
}

/* A fault at the new address of a page mremap moved while it was stored. */
static int serve_moved(struct handler *h, size_t p, const struct fault_item *it)
{
	struct zs_region *r = h->r;
	unsigned char s = st_load(r, p);

	if (st_owned(s))
		return AGAIN;
	if ((s & ST_MASK) != ST_MOVED) {
		mutex_lock_ranked(&r->ulock, ZS_LOCK_REGION_ULOCK);
		zero_at(h, it->addr);
		mutex_unlock_ranked(&r->ulock);
		return DONE;
	}
	/*
	 * Lost the claim: most likely another handler is serving this page
	 * (two threads faulted on it).  No zeros here - they would land before
	 * its copy and make it fail with EEXIST, losing the contents; look again
	 * once it is done.
	 */
	if (!st_cas(r, p, s, ST_IN))
		return AGAIN;
	int bad = zs_zram_read(r->store, p, h->buf, r->page) != 0;
	unsigned tries = 0;
	if (bad)
		atomic_fetch_add_explicit(&r->read_errors, 1, memory_order_relaxed);
	mutex_lock_ranked(&r->ulock, ZS_LOCK_REGION_ULOCK);
	for (;;) {
		unsigned char t = st_load(r, p);
		if (t & F_GONE)
			break;
		if (t & F_DROP) {
			zero_at(h, it->addr);
			break;
		}
		if (bad) {
			if (poison_page(h, it->addr, it))
				continue;
			break;
		}
		struct uffdio_copy cp = { .dst = it->addr, .src = (uintptr_t)h->buf, .len = r->page };
		wake_mark(r, it->addr, r->page);
		if (ioctl(r->uffd, UFFDIO_COPY, &cp) == 0) {
			atomic_fetch_add_explicit(&r->pages_in, 1, memory_order_relaxed);
			break;
		}
		if (errno == EAGAIN) {
			eagain(h, &tries);
			continue;
		}
		struct uffdio_range rg = { .start = it->addr, .len = r->page };
		ioctl(r->uffd, UFFDIO_WAKE, &rg);
		break;
	}
	mutex_unlock_ranked(&r->ulock);
	zs_zram_discard(r->store, p);
	atomic_fetch_sub_explicit(&r->stored, 1, memory_order_relaxed);
	st_set(r, p, ST_GONE);   /* what is at the new address is the application's now */
	return DONE;
}

/* An OUT page the application zapped: a write-protected zero page, so pageout can finish. */
static void fill_out(struct handler *h, size_t p)
{
	struct zs_region *r = h->r;
	unsigned tries = 0;
	mutex_lock_ranked(&r->ulock, ZS_LOCK_REGION_ULOCK);
	for (;;) {
		struct uffdio_copy cp = { .dst = (uintptr_t)(r->base + p * r->page),
					  .src = (uintptr_t)r->zero, .len = r->page,
					  .mode = UFFDIO_COPY_MODE_WP };
		wake_mark(r, cp.dst, r->page);
		if (ioctl(r->uffd, UFFDIO_COPY, &cp) == 0)
			break;
		if (errno == EAGAIN) {
			eagain(h, &tries);
			continue;
		}
		uffd_wake(r, p, 1);   /* EEXIST: mapped after all (a stale message) */
		break;
	}
	mutex_unlock_ranked(&r->ulock);
}

static int handle_missing(struct handler *h, const struct fault_item *it)
{
	struct zs_region *r = h->r;
	uintptr_t addr = it->addr, b = (uintptr_t)r->base;
	unsigned char kind[MAX_AROUND];
	size_t p;

	/* Woken since it was read: its thread is not waiting on it (internal.h, wake_mark). */
	if (addr >= b && addr - b < r->size &&
	    atomic_load_explicit(&r->wseq[(addr - b) / r->page], memory_order_seq_cst) != it->seq) {
		atomic_fetch_add_explicit(&r->faults_stale, 1, memory_order_relaxed);
		return DONE;
	}
	if (addr < b || addr - b >= r->size ||
	    (st_load(r, (addr - b) / r->page) & ST_MASK) == ST_GONE ||
	    (st_load(r, (addr - b) / r->page) & ST_MASK) == ST_MOVED) {
		int home;
		mutex_lock_ranked(&r->ulock, ZS_LOCK_REGION_ULOCK);
		p = region_locate(r, addr, &home);
		if (p == (size_t)-1 || home) {
			/*
			 * Not a region page (e.g. mremap grew the mapping), or one that
			 * left this address: new anonymous memory.
			 */
			zero_at(h, addr);
			mutex_unlock_ranked(&r->ulock);
			return DONE;
		}
		mutex_unlock_ranked(&r->ulock);
		return serve_moved(h, p, it);
	}
	p = (addr - b) / r->page;
	for (;;) {
		unsigned char s = st_load(r, p), m = s & ST_MASK;
		if (m == ST_NONE || m == ST_STORED || m == ST_RES) {
			if (!st_cas(r, p, s, ST_IN))
				continue;
			kind[0] = m == ST_STORED ? K_STORED : m == ST_RES ? K_RES : K_NONE;
			break;
		}
		if (m == ST_OUT) {
			if (!st_cas(r, p, s, (unsigned char)((s & ~ST_MASK) | ST_OUTF)))
				continue;
			fill_out(h, p);
			/*
			 * Back to OUT, keeping the flags events set meanwhile.  Only
			 * from OUTF: pageout leaves an OUTF page alone until we are done
			 * (reclaim.c, out_settle), and stamping OUT on a page it had
			 * finished would leave it owned by nobody.
			 */
			for (;;) {
				unsigned char t = st_load(r, p);
				if ((t & ST_MASK) != ST_OUTF ||
				    st_cas(r, p, t, (unsigned char)((t & ~ST_MASK) | ST_OUT)))
					break;
			}
			return DONE;
		}
		if (m == ST_BAD) {
			mutex_lock_ranked(&r->ulock, ZS_LOCK_REGION_ULOCK);
			while (poison_page(h, addr, it))
				if ((st_load(r, p) & ST_MASK) != ST_BAD)
					break;
			mutex_unlock_ranked(&r->ulock);
			return (st_load(r, p) & ST_MASK) == ST_BAD ? DONE : AGAIN;
		}
		if (m == ST_GONE || m == ST_MOVED) {
			mutex_lock_ranked(&r->ulock, ZS_LOCK_REGION_ULOCK);
			zero_at(h, addr);
			mutex_unlock_ranked(&r->ulock);
			return DONE;
		}
		return AGAIN;   /* owned: retried after the next read */
	}
	atomic_fetch_add_explicit(&r->faults, 1, memory_order_relaxed);
	size_t n = 1, fp = p;
	int win = kind[0] == K_RES ? 1 : stream_window(r, p);
	if (win > 0) {
		while (n < (size_t)win && p + n < r->npages) {
			unsigned char s = st_load(r, p + n);
			if ((s != ST_STORED && s != ST_NONE) || !st_cas(r, p + n, s, ST_IN))
				break;
			kind[n++] = s == ST_STORED ? K_STORED : K_NONE;
		}
	} else {
		/* claim downwards, then shift so kind[] starts at the lowest page */
		unsigned char down[MAX_AROUND];
		while (n < (size_t)-win && n <= p) {
			unsigned char s = st_load(r, p - n);
			if ((s != ST_STORED && s != ST_NONE) || !st_cas(r, p - n, s, ST_IN))
				break;
			down[n++] = s == ST_STORED ? K_STORED : K_NONE;
		}
		unsigned char top = kind[0];
		for (size_t i = 1; i < n; i++)
			kind[n - 1 - i] = down[i];
		kind[n - 1] = top;
		p -= n - 1;
	}
	install_run(h, p, n, kind, fp, it);
	return DONE;
}

static int handle_wp(struct handler *h, const struct fault_item *it)
{
	struct zs_region *r = h->r;
	uintptr_t addr = it->addr, b = (uintptr_t)r->base;

	atomic_fetch_add_explicit(&r->faults_wp, 1, memory_order_relaxed);
	if (addr >= b && addr - b < r->size) {
		unsigned char m = st_load(r, (addr - b) / r->page) & ST_MASK;
		/* Pageout wakes the writer after the page is dropped. */
		if (m == ST_OUT || m == ST_OUTF || m == ST_OUTZ)
			return DONE;
		uffd_wake(r, (addr - b) / r->page, 1);
		return DONE;
	}
	/*
	 * Outside the range: a page mremap moved while pageout had it
	 * write-protected.  It is the application's now: lift the protection.
	 */
	struct uffdio_writeprotect wp = { .range = { .start = addr, .len = r->page }, .mode = 0 };
	unsigned tries = 0;
	wake_mark(r, addr, r->page);
	mutex_lock_ranked(&r->ulock, ZS_LOCK_REGION_ULOCK);
	while (ioctl(r->uffd, UFFDIO_WRITEPROTECT, &wp) && errno == EAGAIN)
		eagain(h, &tries);
	mutex_unlock_ranked(&r->ulock);
	struct uffdio_range rg = { .start = addr, .len = r->page };
	ioctl(r->uffd, UFFDIO_WAKE, &rg);
	return DONE;
}

/* Try every queued fault once.  Returns how many were answered; *t: now_ns() after the last. */
static size_t serve_queue(struct handler *h, double *t)
{
	struct zs_region *r = h->r;
	size_t n0 = h->qn, served = 0;

	for (size_t i = 0; i < n0; i++) {
		struct fault_item it = h->q[i];   /* copy: pump may grow the queue */
		int wp = !!(it.flags & UFFD_PAGEFAULT_FLAG_WP);
		if ((wp ? handle_wp(h, &it) : handle_missing(h, &it)) == AGAIN)
			continue;
		if (!wp)
			lat_record(r, (*t = now_ns()) - it.t);
		h->q[i].addr = 0;
		served++;
	}
	if (served) {
		size_t j = 0;
		for (size_t i = 0; i < h->qn; i++)
			if (h->q[i].addr)
				h->q[j++] = h->q[i];
		h->qn = j;
	}
	return served;
}

/* A loop turn shorter than this gave the CPU to nobody (a read and a yield take ~1 us here). */
#define RAN_ALONE_NS 2500.0
/* How often a handler with no faulting thread beside it looks at the uffd... */
#define REMOTE_READ_NS 10000.0
/* ...while another handler has read faults beside their threads this recently. */
#define LOCAL_ACTIVE_NS 100000.0

void *region_handler_main(void *arg)
{
	struct handler *h = arg;
	struct zs_region *r = h->r;
	/* prev: when this loop last gave up the CPU (yield); lastread: when it last read */
	double last = now_ns(), prev = last, lastread = last;

	signals_blocked_thread();   /* created with every signal blocked (region.c) */
	atomic_fetch_add_explicit(&r->hready, 1, memory_order_release);

	while (!atomic_load_explicit(&r->hstop, memory_order_acquire)) {
		/*
		 * Several spinning handlers: a fault is best read on its thread's
		 * CPU.  The thread blocks, that CPU's handler (region.c,
		 * spread_cpu) runs and reads at once, and the install wakes the
		 * thread where it was.  Read from another CPU, the install must
		 * wake a thread whose CPU is busy: bench_region --threads --procs
		 * 2 with a timestamp per step had such faults at 30-40 us p50
		 * against 10-20 us read locally.  A handler whose loop ran
		 * without a break since its last yield (nothing else wanted its
		 * CPU) has no faulting thread beside it, so while another
		 * handler reads faults beside their threads it looks at the uffd
		 * only every REMOTE_READ_NS, taking a fault only when that
		 * handler did not run in time.  One that was off the CPU in
		 * between (the sign that a thread beside it ran, and may just
		 * have blocked in a fault) reads at once, and so does every
		 * handler when none reads beside its threads (more CPUs than
		 * busy threads: a handler spinning on a CPU of its own is then
		 * the fastest reader).
		 */
		int beside = 0;
		double t = now_ns();
		if (r->nhandlers > 1 && !h->qn && r->spin_ns > 0) {
			uint64_t lr = atomic_load_explicit(&r->local_read_ns, memory_order_relaxed);
			beside = t - prev >= RAN_ALONE_NS;
			if (!beside && t - lastread < REMOTE_READ_NS && t - last < r->spin_ns &&
			    t - (double)lr < LOCAL_ACTIVE_NS) {
				prev = t;
				sched_yield();
				continue;
			}
			lastread = t;
		}
		/*
		 * While spinning, a handler that finds ulock taken does not wait
		 * for it: the holder is reading the uffd or installing, and
		 * sleeping on the mutex costs a futex wait and wake - two context
		 * switches on the fault path of the thread the holder is about to
		 * wake (bench_region --threads, two handlers on one region).
		 */
		int spinning = !h->qn && r->spin_ns > 0 && t - last < r->spin_ns;
		if (!spinning) {
			mutex_lock_ranked(&r->ulock, ZS_LOCK_REGION_ULOCK);
		} else if (pthread_mutex_trylock(&r->ulock)) {
			prev = t;
			sched_yield();
			continue;
		} else {
			lock_took_try(&r->ulock, ZS_LOCK_REGION_ULOCK);
		}
		/*
		 * Back on its CPU (beside), a handler reads one message: most
		 * likely the fault of the thread that just gave the CPU up.  A
		 * second one read with it - another CPU's thread - would wait for
		 * the first's whole answer (decompression, install, ~8 us) while
		 * its own CPU's handler, about to run, could answer it at once.
		 * bench_region --threads --procs 2, interleaved with the handlers
		 * bound one per CPU (region.c, spread_cpu; docs/region.md): random
		 * touch p50 17.5-17.6 -> 14.4-16.1 us in two runs of three pairs.
		 */
		ssize_t got = pump(h, t, beside);
		int e = errno;
		mutex_unlock_ranked(&r->ulock);
		if (got > 0 && beside)
			atomic_store_explicit(&r->local_read_ns, (uint64_t)t, memory_order_relaxed);
		if (got < 0 && e != EAGAIN && e != EINTR)
			break;
		size_t served = h->qn ? serve_queue(h, &t) : 0;
		if (got > 0 || served) {
			last = t;
			continue;
		}
		if (h->qn) {
			/* Faults on owned pages: their owners finish in microseconds. */
			sched_yield();
			continue;
		}
		/*
		 * Spin on the non-blocking read, yielding the core each time:
		 * with more busy threads than cores (P processes, each an
		 * application thread and a handler) a pure spin keeps the
		 * faulting thread from running once woken; measured on 2 cores
		 * at P=2 the yield doubled random swap-in throughput, and
		 * costs nothing when nothing else is runnable.
		 */
		if (r->spin_ns > 0 && (prev = t) - last < r->spin_ns) {
			sched_yield();
			continue;
		}
		struct pollfd pf[2] = { { .fd = r->uffd, .events = POLLIN },
					{ .fd = r->efd, .events = POLLIN } };
		poll(pf, 2, -1);
		last = now_ns();
	}
	return NULL;
}
