/*
 * zs_region's internals, shared by region.c (create/destroy, stats, range
 * API), fault.c (userfaultfd handler threads) and reclaim.c (pageout,
 * CLOCK reclaimer): the region struct, the per-page state helpers and the
 * small uffd wrappers all three use.  The design note is at the top of
 * region.c (state machine), fault.c (fault path) and reclaim.c (pageout
 * protocol, reclaim).
 */
#ifndef ZS_REGION_INTERNAL_H
#define ZS_REGION_INTERNAL_H

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
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
#include <time.h>
#include <unistd.h>

#include "zs/region.h"

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

enum { ST_NONE, ST_RES, ST_STORED, ST_OUT, ST_IN, ST_REL };

#define NSTREAMS 8
#define MAX_AROUND 256
#define OUT_CHUNK 64     /* pages write-protected and compressed per step */
#define REL_CHUNK 512

struct handler {
	struct zs_region *r;
	pthread_t tid;
	unsigned char *buf;   /* MAX_AROUND pages */
};

struct zs_region {
	unsigned char *base;
	size_t size, page, npages;
	int uffd, efd;
	int uffd_move;
	_Atomic unsigned char *state;
	_Atomic unsigned char *ref;
	struct zs_zram *store;
	unsigned fault_around;
	double spin_ns;
	size_t resident_limit;   /* pages; 0 none */

	atomic_int stop, broken;
	unsigned nhandlers;
	struct handler *h;
	unsigned char *zero;     /* MAX_AROUND zero pages */

	_Atomic uint64_t streams[NSTREAMS];    /* next page expected, ascending */
	_Atomic uint64_t rstreams[NSTREAMS];   /* next page expected, descending */
	atomic_uint stream_next;

	/* counters */
	_Atomic uint64_t resident, stored, faults, faults_zero, faults_wp, pages_in, around,
		pageouts, reclaimed, releases;
	_Atomic uint64_t hist[ZS_REGION_LAT_BUCKETS];

	/* reclaim */
	pthread_t rtid;
	int have_reclaimer;
	pthread_mutex_t rlock;   /* kick + condvar only; never held across a pageout */
	pthread_cond_t rcond;
	pthread_mutex_t hlock;   /* the CLOCK hand: one reclaim pass at a time */
	int rkick;
	size_t hand;             /* CLOCK hand, under rlock */
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

static inline void uffd_wake(struct zs_region *r, size_t first, size_t n)
{
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
	while (ioctl(r->uffd, UFFDIO_WRITEPROTECT, &wp)) {
		if (errno != EAGAIN)
			return -errno;
	}
	return 0;
}

static inline void kick_reclaim(struct zs_region *r)
{
	if (!r->have_reclaimer)
		return;
	pthread_mutex_lock(&r->rlock);
	if (!r->rkick) {
		r->rkick = 1;
		pthread_cond_signal(&r->rcond);
	}
	pthread_mutex_unlock(&r->rlock);
}

/* region.c */
int region_range_ok(struct zs_region *r, const void *addr, size_t len);
/* fault.c: a handler thread; arg is its struct handler */
void *region_handler_main(void *arg);
/* reclaim.c: the reclaim thread; arg is the region */
void *region_reclaim_main(void *arg);

#endif
