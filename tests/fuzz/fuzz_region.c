/*
 * libFuzzer target: the region's call sequence and the backing file's
 * faults.  The input's first bytes choose the region (fault-
 * around, handler threads, deferred free, a store mem_limit, a resident
 * limit with automatic reclaim, compressed writeback, the kernel's or the
 * application profile's store); the rest is a program
 * of whole and partial page writes, reads checked against a shadow copy,
 * pageout, release, advice, reclaim, the application's own
 * madvise(MADV_DONTNEED), writeback, injected write and read errors of the
 * backing file (transient: retried, or every read failing), the file
 * truncated or its bytes changed, compaction, idle marking, calls with bad
 * arguments, and destroy/create.
 *
 * The shadow says what every page must hold.  A read or write of a page may
 * raise SIGBUS only when its contents could be in the backing file while its
 * reads were made to fail (every read failing, the file truncated or
 * changed), or when it raised SIGBUS before and was not dropped since; it is
 * caught (sigsetjmp), and the page must hold its bytes or raise SIGBUS,
 * never read wrong bytes.  Releasing or MADV_DONTNEED makes it zeros again.
 * At the end every page is checked, everything is released and the store
 * must hold nothing (no slot, no file block).
 *
 * Regions cost threads to create: a few are kept between inputs (keyed by
 * config), reset by releasing the whole range; destroy/create is an
 * operation of its own, and a cache miss destroys the oldest.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <time.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "zs/harness.h"
#include "zs/region.h"

#define PG 4096
#define NP 32
#define NCACHE 4

struct creg {
	struct zs_region *r;
	unsigned key;       /* config byte; r NULL: slot empty */
	int fd;             /* the backing file (unlinked) */
	unsigned long age;
};
static struct creg cache[NCACHE];
static unsigned long clock_age;
static int region_ok = -1;   /* 0: no userfaultfd here: inputs do nothing */

/* shadow */
static unsigned char shadow[NP][PG];
static unsigned char wb[NP];        /* contents may be in the backing file */
static unsigned char mayfail[NP];   /* may raise SIGBUS */
static int read_perm;               /* backing reads are made to fail (not transiently) */

/* ---- SIGBUS guard ---- */
static sigjmp_buf jb;
static volatile sig_atomic_t in_guard;
static struct sigaction old_bus;

static void on_bus(int sig, siginfo_t *si, void *uc)
{
	if (in_guard) {
		in_guard = 0;
		siglongjmp(jb, 1);
	}
	/* not ours: whatever handled it before (libFuzzer's crash report) */
	if (old_bus.sa_flags & SA_SIGINFO)
		old_bus.sa_sigaction(sig, si, uc);
	else if (old_bus.sa_handler != SIG_IGN && old_bus.sa_handler != SIG_DFL)
		old_bus.sa_handler(sig);
	signal(SIGBUS, SIG_DFL);
	raise(SIGBUS);
}

/* 0 done, 1 SIGBUS */
__attribute__((noinline)) static int g_copy(void *dst, const void *src, size_t n)
{
	if (sigsetjmp(jb, 1))
		return 1;
	in_guard = 1;
	memcpy(dst, src, n);
	in_guard = 0;
	return 0;
}

/* 0 equal, 1 SIGBUS, 2 differ (first differing byte in *off) */
__attribute__((noinline)) static int g_cmp(const unsigned char *a, const unsigned char *e,
					   size_t *off)
{
	if (sigsetjmp(jb, 1))
		return 1;
	in_guard = 1;
	int rc = 0;
	if (memcmp(a, e, PG)) {
		rc = 2;
		for (*off = 0; *off < PG && a[*off] == e[*off]; (*off)++)
			;
	}
	in_guard = 0;
	return rc;
}

/* ---- hang watchdog ----
 * The library blocks every signal inside its calls, and libFuzzer's -timeout
 * (SIGALRM) acts only on the fuzzing thread: a hang inside a region call
 * would never end.  This thread aborts an input that runs past HANG_S
 * seconds (libFuzzer's crash handler then saves it). */
#define HANG_S 25
static _Atomic uint64_t input_start;   /* CLOCK_MONOTONIC seconds + 1; 0: idle */
static _Atomic int cur_op = -1;

static uint64_t now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec;
}

static void *watchdog(void *arg)
{
	(void)arg;
	for (;;) {
		sleep(1);
		uint64_t t0 = atomic_load(&input_start);
		if (t0 && now_s() + 1 - t0 > HANG_S) {
			dprintf(fuzz_errfd, "fuzz_region.c: check failed: HANG: one input ran over %d s "
				"(in op %d, or the end check if -1)\n", HANG_S, atomic_load(&cur_op));
			abort();
		}
	}
	return NULL;
}

/* ---- regions ---- */

static void cfg_from(unsigned key, struct zs_region_config *c)
{
	static const unsigned fa[4] = { 1, 4, 16, 1 };
	/* bit 7: the application profile's store (class copies, fitted zspages) */
	if ((key >> 7) & 1)
		zs_region_config_init_app(c);
	else
		zs_region_config_init(c);
	c->size = NP * PG;
	c->fault_around = fa[key & 3];
	c->handler_threads = 1 + ((key >> 2) & 1);
	c->store.deferred_free = (key >> 3) & 1;
	if ((key >> 4) & 1)
		c->store.mem_limit = 8 * PG;
	if ((key >> 5) & 1)
		c->resident_limit = 8 * PG;
	c->store.writeback_compressed = (key >> 6) & 1;
}

static void drop(struct creg *cr)
{
	if (cr->r)
		zs_region_destroy(cr->r);
	if (cr->fd >= 0)
		close(cr->fd);
	cr->r = NULL;
	cr->fd = -1;
}

static int make(struct creg *cr, unsigned key)
{
	char path[] = "/tmp/zs_fuzz_regionXXXXXX", err[512];
	struct zs_region_config c;
	cfg_from(key, &c);
	cr->fd = mkstemp(path);
	FUZZ_CHECK(cr->fd >= 0, "mkstemp: %s", strerror(errno));
	c.store.backing_path = path;
	int rc = zs_region_create(&c, &cr->r, err, sizeof err);
	unlink(path);
	FUZZ_CHECK(rc == 0, "zs_region_create(key 0x%x) -> %d: %s", key, rc, err);
	cr->key = key;
	return 0;
}

static struct creg *get_region(unsigned key)
{
	struct creg *old = &cache[0];
	for (int i = 0; i < NCACHE; i++) {
		if (cache[i].r && cache[i].key == key) {
			cache[i].age = ++clock_age;
			return &cache[i];
		}
		if (!cache[i].r || cache[i].age < old->age)
			old = &cache[i];
	}
	drop(old);
	make(old, key);
	old->age = ++clock_age;
	return old;
}

/* ---- checks ---- */

static void page_zero(size_t p)
{
	memset(shadow[p], 0, PG);
	wb[p] = 0;
	mayfail[p] = 0;
}

/* a SIGBUS on page p: allowed only if it may fail */
static void bus(size_t p, const char *what)
{
	FUZZ_CHECK(mayfail[p] || (wb[p] && read_perm),
		   "SIGBUS on page %zu (%s) though its backing read was not made to fail "
		   "(wb %d, read_perm %d)", p, what, wb[p], read_perm);
	mayfail[p] = 1;
}

static void verify(unsigned char *a, size_t p, const char *what)
{
	size_t off = 0;
	int rc = g_cmp(a + p * PG, shadow[p], &off);
	if (rc == 1) {
		bus(p, what);
		return;
	}
	FUZZ_CHECK(rc == 0, "%s: page %zu differs from its shadow at byte %zu (0x%02x, want 0x%02x; "
		   "wb %d mayfail %d read_perm %d)", what, p, off, a[p * PG + off], shadow[p][off],
		   wb[p], mayfail[p], read_perm);
	wb[p] = 0;
	mayfail[p] = 0;
}

static void write_bytes(unsigned char *a, size_t p, size_t off, const unsigned char *src,
			size_t n)
{
	if (g_copy(a + p * PG + off, src, n)) {
		bus(p, "write");
		return;
	}
	memcpy(shadow[p] + off, src, n);
	wb[p] = 0;
	mayfail[p] = 0;
}

static void gen_page(unsigned char *b, unsigned kind, uint64_t seed)
{
	switch (kind % 4) {
	case 0:
		memset(b, 0, PG);
		break;
	case 1:
		for (size_t i = 0; i < PG; i += 8)
			memcpy(b + i, &seed, 8);
		break;
	case 2:
		for (size_t i = 0; i < PG; i++)
			b[i] = (unsigned char)("abcdefgh \n"[(i / 7 + seed) % 10]);
		b[0] = (unsigned char)seed;
		break;
	default:
		fuzz_fill(b, PG, seed);   /* incompressible: stored huge, written back */
	}
}

static void range(struct fin *in, size_t *p, size_t *n)
{
	*p = fin_u8(in) % NP;
	*n = 1 + fin_u8(in) % NP;
	if (*p + *n > NP)
		*n = NP - *p;
}

static void mark_wb(void)
{
	/* anything not checked since may now live in the file */
	for (size_t p = 0; p < NP; p++) {
		wb[p] = 1;
		if (read_perm)
			mayfail[p] = 1;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (region_ok < 0) {
		char err[512];
		region_ok = zs_region_available(err, sizeof err);
		if (!region_ok)
			fprintf(stdout, "fuzz_region: no userfaultfd (%s): inputs do nothing\n", err);
		for (int i = 0; i < NCACHE; i++)
			cache[i].fd = -1;
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = on_bus;
		sa.sa_flags = SA_SIGINFO | SA_NODEFER;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGBUS, &sa, &old_bus);
		pthread_t wd;
		if (pthread_create(&wd, NULL, watchdog, NULL) == 0)
			pthread_detach(wd);
	}
	if (!region_ok)
		return 0;
	struct fin in = { data, size, 0 };
	atomic_store(&input_start, now_s() + 1);
	atomic_store(&cur_op, -1);
	unsigned key = fin_u8(&in);
	struct creg *cr = get_region(key);
	struct zs_region *r = cr->r;
	struct zs_zram *z = zs_region_store(r);
	unsigned char *a = zs_region_addr(r);
	int limited = (key >> 4) & 1;
	memset(shadow, 0, sizeof shadow);
	memset(wb, 0, sizeof wb);
	memset(mayfail, 0, sizeof mayfail);
	read_perm = 0;
	static unsigned char buf[PG];

	int ops = 0;
	while (fin_more(&in) && ops++ < 512) {
		unsigned op = fin_u8(&in);
		size_t p, n;
		long rc;
		atomic_store(&cur_op, (int)(op % 16));
		switch (op % 16) {
		case 0: case 1: {
			range(&in, &p, &n);
			if (n > 4)
				n = 4;
			unsigned kind = fin_u8(&in);
			for (size_t i = 0; i < n; i++) {
				gen_page(buf, kind, kind * 131 + (op >> 4) + p + i);
				write_bytes(a, p + i, 0, buf, PG);
			}
			break;
		}
		case 2: {
			p = fin_u8(&in) % NP;
			size_t off = fin_u16(&in) % PG, len = 1 + fin_u8(&in) % 64;
			if (off + len > PG)
				len = PG - off;
			memset(buf, (int)(op >> 4) + 1, len);
			write_bytes(a, p, off, buf, len);
			break;
		}
		case 3: case 4:
			range(&in, &p, &n);
			for (size_t i = 0; i < n; i++)
				verify(a, p + i, "read");
			break;
		case 5:
			range(&in, &p, &n);
			rc = zs_region_pageout(r, a + p * PG, n * PG);
			FUZZ_CHECK(rc >= 0 || (rc == -ENOMEM && limited), "pageout(%zu, %zu) -> %ld", p, n,
				   rc);
			break;
		case 6:
			range(&in, &p, &n);
			rc = zs_region_release(r, a + p * PG, n * PG);
			FUZZ_CHECK(rc == 0, "release(%zu, %zu) -> %ld", p, n, rc);
			for (size_t i = 0; i < n; i++)
				page_zero(p + i);
			break;
		case 7: {
			range(&in, &p, &n);
			enum zs_region_advice adv = (enum zs_region_advice)(1 + (op >> 4) % 3);
			rc = zs_region_advise(r, a + p * PG, n * PG, adv);
			FUZZ_CHECK(rc == 0 || (adv == ZS_REGION_PAGEOUT && rc == -ENOMEM && limited),
				   "advise(%zu, %zu, %d) -> %ld", p, n, adv, rc);
			break;
		}
		case 8:
			rc = zs_region_reclaim(r, (size_t)(fin_u8(&in) % (NP + 1)) * PG);
			FUZZ_CHECK(rc >= 0 || (rc == -ENOMEM && limited), "reclaim -> %ld", rc);
			break;
		case 9:
			range(&in, &p, &n);
			FUZZ_CHECK(madvise(a + p * PG, n * PG, MADV_DONTNEED) == 0, "madvise: %s",
				   strerror(errno));
			for (size_t i = 0; i < n; i++)
				page_zero(p + i);
			break;
		case 10: {
			struct zs_zram_wb_result res = { 0, 0 };
			unsigned t = fin_u8(&in);
			int w = zs_zram_writeback(z, t & 1 ? ZS_ZRAM_WB_HUGE : ZS_ZRAM_WB_IDLE, t >> 1, &res);
			FUZZ_CHECK(w == 0 || w == -EIO, "writeback -> %d", w);
			/*
			 * verify() takes a page read right as back in memory.  A page the
			 * reclaim thread is paging out stays mapped until its pageout
			 * zaps it: a read then hits the old mapping, brings nothing back,
			 * and the page ends stored in the file if the writeback took its
			 * slot (correct: SIGBUS is allowed there once the file changes).
			 * Reclaim passes run one at a time, so this waits for the one in
			 * flight; the writeback above still raced it.
			 */
			zs_region_reclaim(r, NP * PG);
			mark_wb();
			break;
		}
		case 11: {
			unsigned a1 = fin_u8(&in), after = fin_u8(&in) % 8;
			switch (a1 % 4) {
			case 0:
				zs_zram_wb_inject(z, 0, after, 1 + (a1 >> 2) % 4);
				break;
			case 1:   /* one read fails once: retried, no SIGBUS */
				zs_zram_wb_inject(z, 1, after, 1);
				read_perm = 0;
				break;
			case 2:   /* every read fails (after `after` more) */
				zs_zram_wb_inject(z, 1, after, 0);
				read_perm = 1;
				for (size_t i = 0; i < NP; i++)
					mayfail[i] |= wb[i];
				break;
			default:
				zs_zram_wb_inject(z, 0, UINT64_MAX, 0);
				zs_zram_wb_inject(z, 1, UINT64_MAX, 0);
				read_perm = 0;
			}
			break;
		}
		case 12:
			zs_zram_compact(z);
			if (op & 16)
				zs_zram_flush(z);
			break;
		case 13:
			if ((op >> 4) < 12) {
				zs_zram_mark_idle(z, 0);
			} else {
				/* the file fails under the store: truncated, or its bytes changed */
				if ((op >> 4) & 1) {
					FUZZ_CHECK(ftruncate(cr->fd, 0) == 0, "ftruncate");
				} else {
					unsigned char junk[64];
					fuzz_fill(junk, sizeof junk, op);
					for (off_t o = 0; o < NP * PG; o += PG)
						if (pwrite(cr->fd, junk, sizeof junk, o + 100) < 0)
							break;
				}
				for (size_t i = 0; i < NP; i++)
					mayfail[i] |= wb[i];
			}
			break;
		case 14:
			if (op >> 4) {
				/* bad arguments: refused, nothing changes */
				p = fin_u8(&in) % NP;
				FUZZ_CHECK(zs_region_pageout(r, a + p * PG + 1, PG) == -EINVAL, "unaligned");
				FUZZ_CHECK(zs_region_release(r, a + p * PG, (NP + 1) * PG) == -EINVAL,
					   "past the end");
				FUZZ_CHECK(zs_region_advise(r, a - PG, PG, ZS_REGION_COLD) == -EINVAL,
					   "before the start");
				FUZZ_CHECK(zs_region_advise(r, a, PG, (enum zs_region_advice)9) == -EINVAL,
					   "bad advice");
			} else {
				/* destroy and create again: the range is new, every page zero */
				zs_zram_wb_inject(z, 0, UINT64_MAX, 0);
				drop(cr);
				make(cr, key);
				r = cr->r;
				z = zs_region_store(r);
				a = zs_region_addr(r);
				for (size_t i = 0; i < NP; i++)
					page_zero(i);
				read_perm = 0;
			}
			break;
		default: {
			struct zs_region_stats st;
			zs_region_get_stats(r, &st, sizeof(st));
			FUZZ_CHECK(st.pages == NP && st.resident <= NP && st.stored <= NP && !st.broken,
				   "stats: pages %llu resident %llu stored %llu broken %d",
				   (unsigned long long)st.pages, (unsigned long long)st.resident,
				   (unsigned long long)st.stored, st.broken);
		}
		}
	}

	atomic_store(&cur_op, -1);
	/* the end: reads come back, every page checked, everything released, the store empty */
	zs_zram_wb_inject(z, 0, UINT64_MAX, 0);
	zs_zram_wb_inject(z, 1, UINT64_MAX, 0);
	read_perm = 0;
	for (size_t p = 0; p < NP; p++)
		verify(a, p, "at the end");
	FUZZ_CHECK(zs_region_release(r, a, NP * PG) == 0, "release all");
	zs_zram_flush(z);
	/* counters may lag a moment behind a handler that is finishing (region.h) */
	struct zs_region_stats st;
	for (int k = 0;; k++) {
		zs_region_get_stats(r, &st, sizeof(st));
		if ((st.stored == 0 && st.resident == 0 && st.store.pages_stored == 0 &&
		     st.store.bd_count == 0 && !st.broken) || k == 200)
			break;
		usleep(1000);
	}
	FUZZ_CHECK(st.stored == 0 && st.resident == 0 && st.store.pages_stored == 0 &&
		   st.store.bd_count == 0 && !st.broken,
		   "after releasing everything: stored %llu resident %llu; store pages_stored %llu "
		   "bd_count %llu; broken %d", (unsigned long long)st.stored,
		   (unsigned long long)st.resident, (unsigned long long)st.store.pages_stored,
		   (unsigned long long)st.store.bd_count, st.broken);
	for (size_t p = 0; p < NP; p += 7)
		FUZZ_CHECK(a[p * PG + 5] == 0, "page %zu not zero after release", p);
	atomic_store(&input_start, 0);
	return 0;
}
