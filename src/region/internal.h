/*
 * zs_region's internals, shared by region.c (create/destroy, stats, range
 * API), events.c (finishing owned pages, own zaps, the application's
 * events), fault.c (userfaultfd handler threads) and reclaim.c (pageout,
 * CLOCK reclaimer): the region struct, the per-page state helpers and the
 * small uffd wrappers they all use.  The design note
 * is at the top of region.c (state machine, events, lock order), fault.c
 * (fault path, read errors) and reclaim.c (pageout protocol, reclaim).
 */
#ifndef ZS_REGION_INTERNAL_H
#define ZS_REGION_INTERNAL_H

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "zs/region.h"
#include "common/debug.h"
#include "common/sigblock.h"

/* Older uapi headers lack the newer feature bits; the values are ABI. */
#ifndef UFFD_FEATURE_MOVE
#define UFFD_FEATURE_MOVE (1ULL << 16)
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif
/* UFFDIO_POISON (Linux 6.6): Debian 12's 6.1 uapi headers lack it. */
#ifndef UFFD_FEATURE_POISON
#define UFFD_FEATURE_POISON (1 << 14)
#endif
#ifndef _UFFDIO_POISON
#define _UFFDIO_POISON (0x08)
#endif
#ifndef UFFDIO_POISON
struct uffdio_poison {
	struct uffdio_range range;
	__u64 mode;
	__s64 updated;
};
#define UFFDIO_POISON _IOWR(UFFDIO, _UFFDIO_POISON, struct uffdio_poison)
#endif
/* UFFDIO_MOVE (Linux 6.8): also missing from Debian 12's headers. */
#ifndef _UFFDIO_MOVE
#define _UFFDIO_MOVE (0x05)
#endif
#ifndef UFFDIO_MOVE
struct uffdio_move {
	__u64 dst;
	__u64 src;
	__u64 len;
#define UFFDIO_MOVE_MODE_DONTWAKE ((__u64)1 << 0)
#define UFFDIO_MOVE_MODE_ALLOW_SRC_HOLES ((__u64)1 << 1)
	__u64 mode;
	__s64 move;
};
#define UFFDIO_MOVE _IOWR(UFFDIO, _UFFDIO_MOVE, struct uffdio_move)
#endif

/*
 * Page states (low nibble).  Stable ones first: only those are claimed.
 * GONE and MOVED are terminal: the page is no longer the region's.
 */
enum {
	ST_NONE,    /* nothing mapped, nothing stored: reads zeros */
	ST_RES,     /* believed mapped (the application may have zapped it since) */
	ST_STORED,  /* contents in store slot <index>, nothing mapped */
	ST_BAD,     /* its slot could not be read: poisoned (SIGBUS) until dropped */
	ST_GONE,    /* unmapped by the application: not the region's any more */
	ST_MOVED,   /* moved away by mremap while stored: slot kept for faults at the new address */
	ST_OUT,     /* pageout owns it, page still mapped */
	ST_OUTF,    /* OUT, and a handler is filling a page the application zapped;
		       only that handler changes it (back to OUT): reclaim.c, out_settle */
	ST_OUTZ,    /* pageout owns it and is zapping it (data in the slot) */
	ST_IN,      /* a fault handler owns it */
	ST_REL,     /* release (or an event) owns it */
};
#define ST_MASK 0x0f
/* Set on an owned page by an event; the owner applies it when it finishes. */
#define F_DROP 0x10   /* MADV_DONTNEED/REMOVE: finish as NONE (zeros) */
#define F_GONE 0x20   /* munmap: finish as GONE */
#define F_MOVED 0x40  /* mremap moved it: finish as MOVED (slot kept) or GONE */

static inline int st_owned(unsigned char s)
{
	return (s & ST_MASK) >= ST_OUT;
}

#define NSTREAMS 8
#define MAX_AROUND 256
#define OUT_CHUNK 64     /* pages write-protected and compressed per step */
#define REL_CHUNK 512
#define NZAPS 64         /* the library's own zaps in flight */
#define NBUFS 4          /* pageout staging buffers kept, and move slices */

struct fault_item {
	unsigned long addr;   /* page address; 0: answered */
	unsigned flags;       /* UFFD_PAGEFAULT_FLAG_* */
	unsigned tid;         /* faulting thread (UFFD_FEATURE_THREAD_ID), 0 unknown */
	double t;             /* when read, for the latency histogram */
	uint16_t seq;         /* its page's wake count when read (wake_mark) */
};

struct handler {
	struct zs_region *r;
	pthread_t tid;
	unsigned char *buf;   /* MAX_AROUND pages */
	/* faults read but not yet answered (their page was owned) */
	struct fault_item *q;
	size_t qn, qcap;
};

/*
 * A zap (MADV_DONTNEED) the library itself issues, on pages it owns: its
 * remove events are not the application's.  While it is in flight, remove
 * events over its pages are only counted per page; when it completes, a page
 * counted twice was also dropped by the application.
 */
struct self_zap {
	uintptr_t start, len;   /* under ulock; len 0: free */
	unsigned char cnt[REL_CHUNK];
};

/* Pages [first, first+len/page) now live at [to, to+len) (mremap). */
struct move_rec {
	uintptr_t to, len;
	size_t first;
};

struct zs_region {
	struct zs_region *live_next;   /* the live-region list (region.c, zs_region_destroy) */
	unsigned char *base;
	size_t size, page, npages;
	int uffd, efd;
	int uffd_move;
	int can_poison;          /* UFFDIO_POISON usable on the range */
	int have_tid;            /* fault messages carry the thread id */
	_Atomic unsigned char *state;
	_Atomic unsigned char *ref;
	_Atomic uint16_t *wseq;  /* per page: wakes issued (wake_mark) */
	struct zs_zram *store;
	unsigned fault_around;
	double spin_ns;
	size_t resident_limit;   /* pages; 0 none */

	atomic_int stop, hstop, broken;   /* stop: reclaimer; hstop: handlers (after it) */
	unsigned nhandlers;
	atomic_uint hready;      /* handlers that have entered their loop (start_threads waits) */
	atomic_uint rready;      /* the reclaimer has entered its function (start_threads waits) */
	struct handler *h;
	unsigned char *zero;     /* MAX_AROUND zero pages */

	/*
	 * ulock: reading the uffd and applying the events read, and every
	 * install ioctl with the check of the flags it depends on.  So an event
	 * read is applied before any later fault is answered, and no install
	 * lands between an event being read and being applied.  Held only for
	 * non-blocking work (see the lock order in region.c).
	 */
	pthread_mutex_t ulock;
	struct self_zap zaps[NZAPS];   /* under ulock */
	struct move_rec *moves;        /* under ulock: where moved pages live, newest last */
	size_t nmoves, capmoves;
	atomic_size_t ngone;           /* pages GONE or MOVED, or flagged so while owned (a hint for
	                                  the range check: a page may count twice) */
	atomic_uint move_lie;          /* zs_region_move_inject: moves left to misreport */
	/* zs_region_pageout_hook: called with a claimed run before it is paged out */
	void (*_Atomic pageout_hook)(void *arg, size_t first, size_t n);
	void *pageout_hook_arg;

	/* now_ns() when a handler last read faults beside their threads (fault.c) */
	_Atomic uint64_t local_read_ns;

	_Atomic uint64_t streams[NSTREAMS];    /* next page expected, ascending */
	_Atomic uint64_t rstreams[NSTREAMS];   /* next page expected, descending */
	atomic_uint stream_next;

	/* counters */
	_Atomic uint64_t resident, stored, faults, faults_zero, faults_wp, pages_in, around,
		pageouts, reclaimed, releases, removed, unmapped, sigbus_pages, read_errors,
		faults_stale;   /* messages dropped as stale (wake_mark); not in the public stats */
	_Atomic uint64_t hist[ZS_REGION_LAT_BUCKETS];
	atomic_int warned_nopoison;

	/* reclaim */
	pthread_t rtid;
	int have_reclaimer;
	pthread_mutex_t rlock;   /* kick + condvar only; never held across a pageout */
	pthread_cond_t rcond;
	pthread_mutex_t hlock;   /* the CLOCK hand: one reclaim pass at a time */
	int rkick;
	size_t hand;             /* CLOCK hand, under rlock */

	pthread_mutex_t block;   /* bufs, stage_free */
	unsigned char *bufs[NBUFS];
	int nbufs;

	/*
	 * Pageout by UFFDIO_MOVE (reclaim.c): NBUFS staging slices of OUT_CHUNK
	 * pages, registered on a second userfaultfd (mvfd) that asks for no
	 * events, so freeing a slice raises nothing; mvfd < 0: not used.
	 */
	int mvfd;
	int move_out;            /* pageout moves runs out (else it copies; the slices still
				    take the copied pages out, so pinned ones are seen) */
	unsigned char *stage;
	unsigned stage_free;     /* bit k: slice k is free, under block */
};

static inline double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static inline size_t pidx(const struct zs_region *r, const void *p)
{
	return (size_t)((const unsigned char *)p - r->base) / r->page;
}

static inline unsigned char st_load(struct zs_region *r, size_t i)
{
	return atomic_load_explicit(&r->state[i], memory_order_acquire);
}

static inline int st_cas(struct zs_region *r, size_t i, unsigned char from, unsigned char to)
{
	unsigned char f = from;
	return atomic_compare_exchange_strong_explicit(&r->state[i], &f, to, memory_order_acq_rel,
						       memory_order_acquire);
}

static inline void st_set(struct zs_region *r, size_t i, unsigned char v)
{
	atomic_store_explicit(&r->state[i], v, memory_order_release);
}

/*
 * A missing-fault message read before a wake of its page is stale: the wake
 * (an install, UFFDIO_WAKE, lifting write protection) woke its thread, which
 * retried and, if it still missed, raised a new message.  Serving the stale
 * one faults in a page nobody waits for - after a release, a resident page
 * no one touched (found by fuzz_region: stats.resident 1 after releasing
 * everything, the page really mapped).  So every waking ioctl on the range
 * counts a wake on its pages first, and a handler drops a queued fault whose
 * page was woken since it was read.  First, never after: a message raised
 * after the wake must carry the new count, or a live fault would be dropped
 * and its thread wait forever.  A wrap of the 16-bit count only lets a stale
 * message through, as before.
 */
static inline void wake_mark(struct zs_region *r, uintptr_t start, size_t len)
{
	uintptr_t b = (uintptr_t)r->base;
	if (start + len <= b || start >= b + r->size)
		return;
	uintptr_t lo = start > b ? start : b, hi = start + len < b + r->size ? start + len : b + r->size;
	for (size_t i = (lo - b) / r->page; i < (hi - b + r->page - 1) / r->page; i++)
		atomic_fetch_add_explicit(&r->wseq[i], 1, memory_order_seq_cst);
}

static inline void uffd_wake(struct zs_region *r, size_t first, size_t n)
{
	wake_mark(r, (uintptr_t)(r->base + first * r->page), n * r->page);
	struct uffdio_range rg = { .start = (uintptr_t)(r->base + first * r->page),
				   .len = n * r->page };
	ioctl(r->uffd, UFFDIO_WAKE, &rg);
}

static inline int uffd_wp(struct zs_region *r, size_t first, size_t n, int on)
{
	struct uffdio_writeprotect wp = {
		.range = { .start = (uintptr_t)(r->base + first * r->page), .len = n * r->page },
		.mode = on ? UFFDIO_WRITEPROTECT_MODE_WP : 0,
	};
	if (!on)
		wake_mark(r, wp.range.start, wp.range.len);   /* lifting it wakes the writers */
	while (ioctl(r->uffd, UFFDIO_WRITEPROTECT, &wp)) {
		if (errno != EAGAIN) {
			int e = errno;
			if (!on)
				ioctl(r->uffd, UFFDIO_WAKE, &wp.range);   /* counted: wake them anyway */
			return -e;
		}
		sched_yield();   /* an event is unread: a handler reads it */
	}
	return 0;
}

static inline void kick_reclaim(struct zs_region *r)
{
	if (!r->have_reclaimer)
		return;
	mutex_lock_ranked(&r->rlock, ZS_LOCK_REGION_KICK);
	if (!r->rkick) {
		r->rkick = 1;
		pthread_cond_signal(&r->rcond);
	}
	mutex_unlock_ranked(&r->rlock);
}

/* events.c */
/* Wait until every event a handler has read is applied (signals blocked meanwhile). */
void region_events_sync(struct zs_region *r);
/*
 * A range call's check: inside the region, page aligned (-EINVAL), no page
 * of it unmapped or moved away by the application (-EFAULT), after the
 * events already read are applied.
 */
int region_range_ok(struct zs_region *r, const void *addr, size_t len);
/*
 * Zap [first, first+n) of the library's own pages (owned): MADV_DONTNEED, its
 * event ignored, a page the application dropped meanwhile flagged dropped.
 * exact: page by page, so no page is taken for dropped that was not (pageout).
 */
void region_self_zap(struct zs_region *r, size_t first, size_t n, int exact);
/* The state an owner finishing with outcome want leaves, given the event flags in s. */
unsigned char region_final(unsigned char s, unsigned char want);
/*
 * Finish owning page i with outcome want (slot_held: slot i holds its
 * contents; counted: stats.resident counts it now).  Frees the slot when the
 * final state does not keep it, and counts or uncounts the page, before
 * publishing that state.  Returns the final state.
 */
unsigned char region_finish(struct zs_region *r, size_t i, unsigned char want, int slot_held,
			    int counted);
/* ulock held: the region page now living at a moved-to address, or (size_t)-1. */
size_t region_moved_page(struct zs_region *r, uintptr_t addr);
/* ulock held: the region page living at addr (home: at its own address), or (size_t)-1. */
size_t region_locate(struct zs_region *r, uintptr_t addr, int *home);
/* ulock held: apply the application's events (region.c, "The application's events"). */
void region_event_remove(struct zs_region *r, uintptr_t s, uintptr_t e);
void region_event_page_remove(struct zs_region *r, size_t i);
void region_event_unmap(struct zs_region *r, uintptr_t s, uintptr_t e);
void region_event_remap(struct zs_region *r, uintptr_t from, uintptr_t to, uintptr_t len);
/* fault.c: a handler thread; arg is its struct handler */
void *region_handler_main(void *arg);
/* reclaim.c: the reclaim thread; arg is the region */
void *region_reclaim_main(void *arg);

#endif
