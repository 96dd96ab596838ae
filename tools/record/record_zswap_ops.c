/*
 * `zs record --zswap`'s ops mode: the recorder itself.  Each operation is one
 * madvise or touch of one page of our buffer (a store, a load, an
 * invalidate), and after each, zswap's debugfs and vmstat counters must have
 * moved by exactly that operation, or the trace ends with why.  This file
 * owns that probe: reading the counters, the sizes the kernel's lzo gives,
 * the per-operation checks and the records they write.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "opts.h"
#include "record.h"
#include "record_zswap.h"
#include "util.h"
#include "zs/compress.h"
#include "zs/harness.h"

/* ---- Small file helpers ---- */

static int64_t read_i64(const char *path)
{
	char b[64];
	uint64_t v;
	if (zs_sysfs_read(path, b, sizeof(b)) || parse_u64(b, &v))
		return -1;
	return (int64_t)v;
}

/* ---- zswap's counters ---- */

const char *const ctr_name[NCTR] = {
	"stored_pages", "stored_incompressible_pages", "pool_total_size", "pool_limit_hit",
	"written_back_pages", "reject_reclaim_fail", "reject_alloc_fail", "reject_kmemcache_fail",
	"reject_compress_fail", "reject_compress_poor", "decompress_fail",
	"zswpout", "zswpin", "zswpwb", "pswpout", "pswpin", "swpout_zero", "swpin_zero",
};

int read_counters(struct ctr *c)
{
	char path[128];
	for (int j = 0; j < V_FIRST; j++) {
		snprintf(path, sizeof(path), ZSWAP_DBG "%s", ctr_name[j]);
		c->v[j] = read_i64(path);
	}
	for (int j = V_FIRST; j < NCTR; j++)
		c->v[j] = -1;
	/* /proc/vmstat through one read (it is ~6 KiB). */
	static char vm[32768];
	int fd = open("/proc/vmstat", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, vm, sizeof(vm) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return -EIO;
	vm[n] = 0;
	for (char *line = vm; *line;) {
		char *nl = strchr(line, '\n'), *sp = strchr(line, ' ');
		if (nl)
			*nl = 0;
		if (sp) {
			*sp = 0;
			for (int j = V_FIRST; j < NCTR; j++)
				if (!strcmp(line, ctr_name[j]))
					c->v[j] = strtoll(sp + 1, NULL, 10);
		}
		if (!nl)
			break;
		line = nl + 1;
	}
	if (c->v[C_STORED] < 0 || c->v[C_INCOMP] < 0 || c->v[C_POOL] < 0 || c->v[V_ZSWPOUT] < 0 ||
	    c->v[V_ZSWPIN] < 0)
		return -ENOENT;
	return 0;
}

/* ---- The recorder ---- */

static void set_move(struct zrec *r, uint32_t i, int to)
{
	struct bpage *p = &r->pg[i];
	if (p->state != to) {
		uint32_t last = r->set[p->state][--r->cnt[p->state]];
		r->set[p->state][p->pos] = last;
		r->pg[last].pos = p->pos;
		p->state = (uint8_t)to;
		p->pos = (uint32_t)r->cnt[to];
		r->set[to][r->cnt[to]++] = i;
	}
}

/*
 * 0 if libzs's "lzo" is lzo1x_1_15 (the kernel's lzo): a fixed page of words, on which
 * liblzo2 2.10's lzo1x_1_15_compress gives 1642 bytes and lzo1x_1_compress 1641.
 */
static int lzo_is_1_15(struct zs_comp *c, void *dst, size_t cap)
{
	static const char *const w[16] = { "zswap", "store", "load", "pool", "page", "swap",
					   "entry", "class", "free", "alloc", "lock", "zero",
					   "size", "slot", "map", "the" };
	unsigned char pg[4096];
	uint64_t s = 1;
	for (size_t i = 0; i < sizeof(pg);) {
		for (const char *x = w[tool_rand64(&s) % 16]; *x && i < sizeof(pg); x++)
			pg[i++] = (unsigned char)*x;
		if (i < sizeof(pg))
			pg[i++] = tool_rand64(&s) % 7 ? ' ' : '\n';
	}
	int len = zs_compress(c, pg, sizeof(pg), dst, cap);
	if (len == 1642)
		return 0;
	fprintf(stderr, "zs record: libzs's \"lzo\" gives %d bytes on the self-test page where "
			"lzo1x_1_15 gives 1642: it is not the kernel's lzo (a libzs from before the switch "
			"to lzo1x_1_15?), so the trace's sizes would be wrong\n", len);
	return -EINVAL;
}

/* Each pageset page's size and flag as zswap stores it. */
int lzo_page_sizes(struct zrec *r)
{
	struct zs_comp *c;
	int err = zs_comp_create(&(struct zs_comp_config){ .name = "lzo", .max_src = r->P }, &c, NULL, 0);
	if (err) {
		fprintf(stderr, "zs record: libzs lzo: %s\n", strerror(-err));
		return err;
	}
	size_t cap = zs_comp_bound(c, r->P);
	void *dst = malloc(cap);
	if (dst && cap >= 4096 && (err = lzo_is_1_15(c, dst, cap)))
		goto out;
	r->size = calloc(r->ps->npages, sizeof(*r->size));
	r->flag = calloc(r->ps->npages, 1);
	if (!dst || !r->size || !r->flag) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < r->ps->npages; i++) {
		const unsigned char *pg = r->ps->data + i * r->P;
		size_t k = 0;
		while (k < r->P && !pg[k])
			k++;
		if (k == r->P) {
			r->flag[i] = 'z';
			continue;
		}
		int len = zs_compress(c, pg, r->P, dst, cap);
		if (len <= 0) {
			err = len ? len : -EIO;
			fprintf(stderr, "zs record: lzo of page %zu: %s\n", i, strerror(-err));
			goto out;
		}
		/* zswap stores a page that does not shrink raw, as a PAGE_SIZE object. */
		r->flag[i] = (size_t)len >= r->P ? 'h' : 'n';
		r->size[i] = (size_t)len >= r->P ? (uint32_t)r->P : (uint32_t)len;
	}
out:
	free(dst);
	zs_comp_destroy(c);
	return err;
}

static uint64_t pagemap(struct zrec *r, const void *addr)
{
	uint64_t e = 0;
	if (pread(r->pm_fd, &e, sizeof(e), (off_t)((uintptr_t)addr / r->P * sizeof(e))) != sizeof(e))
		return 0;
	return e;
}

/* The expected change of each counter for one operation; everything else must not move. */
struct expect {
	int64_t d[NCTR];
	int pool_dir; /* +1: pool pages may only grow, -1: only shrink */
};

/* 0 when c - prev is exactly e, else -1 with r->why saying what moved. */
static int check(struct zrec *r, const struct ctr *c, const struct expect *e, const char *what)
{
	if (c->v[C_POOL] % (int64_t)r->P) {
		snprintf(r->why, sizeof(r->why), "after %s: pool_total_size %lld is not whole pages",
			 what, (long long)c->v[C_POOL]);
		return -1;
	}
	for (int j = 0; j < NCTR; j++) {
		if (j == C_POOL || c->v[j] < 0 || r->prev.v[j] < 0)
			continue;
		int64_t d = c->v[j] - r->prev.v[j];
		if (d != e->d[j]) {
			r->retryable = 1;
			snprintf(r->why, sizeof(r->why),
				 "after %s: %s moved by %+lld, expected %+lld: something else on this "
				 "machine used zswap or swap meanwhile (zswap's pool is global), or the "
				 "kernel reclaimed on its own",
				 what, ctr_name[j], (long long)d, (long long)e->d[j]);
			return -1;
		}
	}
	int64_t dp = c->v[C_POOL] - r->prev.v[C_POOL];
	if ((e->pool_dir > 0 && dp < 0) || (e->pool_dir < 0 && dp > 0)) {
		r->retryable = 1;
		snprintf(r->why, sizeof(r->why),
			 "after %s: the pool went from %lld to %lld pages: the kernel compacted it "
			 "(memory pressure?) or someone else used zswap",
			 what, (long long)(r->prev.v[C_POOL] / (int64_t)r->P),
			 (long long)(c->v[C_POOL] / (int64_t)r->P));
		return -1;
	}
	return 0;
}

static void write_state_rec(struct zrec *r, const struct ctr *c)
{
	fprintf(r->out, "= %lld %lld %lld %lld %lld\n", (long long)(c->v[C_POOL] / (int64_t)r->P),
		(long long)c->v[C_STORED], (long long)c->v[C_INCOMP],
		(long long)(c->v[V_ZSWPOUT] - r->base.v[V_ZSWPOUT]),
		(long long)(c->v[V_ZSWPIN] - r->base.v[V_ZSWPIN]));
	r->prev = *c;
	r->ops++;
	if (r->o->progress && !(r->ops & 1023))
		progress_line("  %ld operations", r->ops);
}

static int counters(struct zrec *r, struct ctr *c)
{
	int err = read_counters(c);
	if (err)
		snprintf(r->why, sizeof(r->why), "reading zswap's counters: %s", strerror(-err));
	return err ? -1 : 0;
}

/* Page out buffer page i (ST_RES): one 's' record. 0, 1 if the kernel kept the page
 * in memory every time (no record), -1 with r->why. */
static int op_store(struct zrec *r, uint32_t i)
{
	unsigned char *a = r->buf + (size_t)i * r->P;
	uint32_t src = r->pg[i].src;
	char f = r->flag[src];
	struct ctr c;
	uint64_t e = 0;
	for (int tries = 0;; tries++) {
		if (madvise(a, r->P, MADV_PAGEOUT)) {
			snprintf(r->why, sizeof(r->why), "MADV_PAGEOUT: %s (kernel without it?)",
				 strerror(errno));
			return -1;
		}
		if (counters(r, &c))
			return -1;
		e = pagemap(r, a);
		if (PM_SWAP(e))
			break;
		/* Not reclaimed (e.g. still in a per-CPU LRU batch): nothing may have moved. */
		struct expect none = { .pool_dir = 0 };
		if (check(r, &c, &none, "a page-out that left the page in memory"))
			return -1;
		if (c.v[C_POOL] != r->prev.v[C_POOL]) {
			r->retryable = 1;
			snprintf(r->why, sizeof(r->why), "the pool changed while a page-out left the "
				 "page in memory: someone else used zswap");
			return -1;
		}
		if (tries == 50) {
			r->skipped++;
			return 1;
		}
		r->retries++;
		usleep(tries < 5 ? 0 : 1000);
	}
	uint64_t off = PM_SWAP_OFF(e);
	if (r->swap_type < 0)
		r->swap_type = PM_SWAP_TYPE(e);
	char what[96];
	snprintf(what, sizeof(what), "the store of buffer page %u (offset %llu, %c)", i,
		 (unsigned long long)off, f);
	if (PM_SWAP_TYPE(e) != r->swap_type) {
		snprintf(r->why, sizeof(r->why), "%s: swap device %d, not ours (%d)", what,
			 PM_SWAP_TYPE(e), r->swap_type);
		return -1;
	}
	struct expect x = { .pool_dir = f == 'z' ? 0 : 1 };
	if (f == 'z') {
		x.d[V_SWPOUT_ZERO] = 1;
	} else {
		x.d[C_STORED] = 1;
		x.d[C_INCOMP] = f == 'h';
		x.d[V_ZSWPOUT] = 1;
	}
	if (check(r, &c, &x, what))
		return -1;
	if (f == 'z' && c.v[C_POOL] != r->prev.v[C_POOL]) {
		r->retryable = 1;
		snprintf(r->why, sizeof(r->why), "%s: the pool changed for a zero page", what);
		return -1;
	}
	fprintf(r->out, "s %llu %u %c\n", (unsigned long long)off, r->size[src], f);
	write_state_rec(r, &c);
	r->pg[i].off = off;
	set_move(r, i, ST_SWP);
	r->nstore[f == 'n' ? 0 : f == 'h' ? 1 : 2]++;
	return 0;
}

/* After a load or invalidate of swapped buffer page i: the counters now, and the
 * operation's name for messages.  0, or -1 with r->why. */
static int op_counters(struct zrec *r, uint32_t i, const char *verb, struct ctr *c, char *what,
		       size_t len)
{
	if (counters(r, c))
		return -1;
	snprintf(what, len, "the %s of buffer page %u (offset %llu, %c)", verb, i,
		 (unsigned long long)r->pg[i].off, r->flag[r->pg[i].src]);
	return 0;
}

/* Its end: the counters checked against x, then its record (type rec, the page's swap
 * offset) and the '=' after it, and the page in its new state.  0, or -1 with r->why. */
static int op_record(struct zrec *r, uint32_t i, const struct ctr *c, const struct expect *x,
		     const char *what, char rec, int to)
{
	if (check(r, c, x, what))
		return -1;
	fprintf(r->out, "%c %llu\n", rec, (unsigned long long)r->pg[i].off);
	write_state_rec(r, c);
	set_move(r, i, to);
	return 0;
}

/* Touch swapped buffer page i with a write (a write fault frees the swap slot at once;
 * a read would leave the page in the swap cache): one 'l' record. */
static int op_load(struct zrec *r, uint32_t i)
{
	unsigned char *a = r->buf + (size_t)i * r->P;
	const unsigned char *want = r->ps->data + (size_t)r->pg[i].src * r->P;
	char f = r->flag[r->pg[i].src];
	*(volatile unsigned char *)a = want[0]; /* a store, no load first: one write fault */
	struct ctr c;
	char what[96];
	if (op_counters(r, i, "load", &c, what, sizeof(what)))
		return -1;
	if (!PM_PRESENT(pagemap(r, a)) || memcmp(a, want, r->P)) {
		snprintf(r->why, sizeof(r->why), "%s: the page came back %s", what,
			 PM_PRESENT(pagemap(r, a)) ? "with other contents" : "not present");
		return -1;
	}
	struct expect x = { .pool_dir = -1 };
	if (f == 'z') {
		x.d[V_SWPIN_ZERO] = 1;
	} else {
		x.d[C_STORED] = -1;
		x.d[C_INCOMP] = -(f == 'h');
		x.d[V_ZSWPIN] = 1;
	}
	if (op_record(r, i, &c, &x, what, 'l', ST_RES))
		return -1;
	r->nload++;
	return 0;
}

/* Drop swapped buffer page i (MADV_DONTNEED frees its swap slot): one 'i' record. */
static int op_inval(struct zrec *r, uint32_t i)
{
	unsigned char *a = r->buf + (size_t)i * r->P;
	char f = r->flag[r->pg[i].src];
	if (madvise(a, r->P, MADV_DONTNEED)) {
		snprintf(r->why, sizeof(r->why), "MADV_DONTNEED: %s", strerror(errno));
		return -1;
	}
	struct ctr c;
	char what[96];
	if (op_counters(r, i, "invalidate", &c, what, sizeof(what)))
		return -1;
	struct expect x = { .pool_dir = -1 };
	if (f != 'z') {
		x.d[C_STORED] = -1;
		x.d[C_INCOMP] = -(f == 'h');
	}
	if (op_record(r, i, &c, &x, what, 'i', ST_EMPTY))
		return -1;
	r->ninval++;
	return 0;
}

static uint32_t pick(struct zrec *r, int state)
{
	return r->set[state][tool_rand64(&r->rng) % r->cnt[state]];
}

static double rand01(uint64_t *s)
{
	return (double)(tool_rand64(s) >> 11) / 9007199254740992.0;
}

/* An empty buffer page gets a random pageset page (no kernel operation, no record). */
static uint32_t refill(struct zrec *r)
{
	uint32_t i = pick(r, ST_EMPTY);
	r->pg[i].src = (uint32_t)(tool_rand64(&r->rng) % r->ps->npages);
	memcpy(r->buf + (size_t)i * r->P, r->ps->data + (size_t)r->pg[i].src * r->P, r->P);
	set_move(r, i, ST_RES);
	return i;
}

/*
 * The ops workload: store every page once, in order; then --ops operations
 * (a load of a swapped page with p_load, an invalidate with p_invalidate,
 * else a store of a page in memory, or of an emptied page refilled with a
 * random page of the set); then invalidate every swapped page in random
 * order.  0, or -1 with r->why (the trace then ends there).
 */
static int run_ops(struct zrec *r)
{
	int rc = 0;
	for (uint32_t i = 0; i < r->n && rc >= 0; i++) {
		if (stop_requested())
			return -2;
		rc = op_store(r, i);
	}
	for (uint64_t k = 0; k < r->o->nops && rc >= 0; k++) {
		if (stop_requested())
			return -2;
		double x = rand01(&r->rng);
		if (x < r->o->p_load && r->cnt[ST_SWP]) {
			rc = op_load(r, pick(r, ST_SWP));
		} else if (x < r->o->p_load + r->o->p_inval && r->cnt[ST_SWP]) {
			rc = op_inval(r, pick(r, ST_SWP));
		} else if (r->cnt[ST_RES] && (!r->cnt[ST_EMPTY] || rand01(&r->rng) < 0.5)) {
			rc = op_store(r, pick(r, ST_RES));
		} else if (r->cnt[ST_EMPTY]) {
			rc = op_store(r, refill(r));
		}
	}
	while (r->cnt[ST_SWP] && rc >= 0) {
		if (stop_requested())
			return -2;
		rc = op_inval(r, pick(r, ST_SWP));
	}
	return rc < 0 ? rc : 0;
}

/* ---- The ops mode ---- */

int record_ops(struct zrec *r)
{
	int cpu = sched_getcpu();
	if (cpu >= 0) {
		/* One CPU: a page just written sits in this CPU's LRU batch, which madvise's
		 * page-out drains first; on another CPU's batch it could not be isolated. */
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		sched_setaffinity(0, sizeof(set), &set);
	}
	size_t bytes = r->n * r->P;
	r->buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	r->pg = calloc(r->n, sizeof(*r->pg));
	for (int s = 0; s < NST; s++)
		r->set[s] = calloc(r->n, sizeof(uint32_t));
	if (r->buf == MAP_FAILED || !r->pg || !r->set[0] || !r->set[1] || !r->set[2]) {
		if (r->buf == MAP_FAILED)
			r->buf = NULL;
		fprintf(stderr, "zs record: out of memory for %zu pages\n", r->n);
		return -1;
	}
	/* Everything of ours stays in memory except the buffer, which only we page out. */
	if (mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT))
		fprintf(stderr, "zs record: mlockall: %s (continuing)\n", strerror(errno));
	munlock(r->buf, bytes);
	madvise(r->buf, bytes, MADV_NOHUGEPAGE);
	for (uint32_t i = 0; i < r->n; i++) {
		r->pg[i] = (struct bpage){ .src = i, .pos = i, .state = ST_RES };
		r->set[ST_RES][i] = i;
	}
	r->cnt[ST_RES] = r->n;
	memcpy(r->buf, r->ps->data, bytes);
	trace_header(r, "ops");
	if (read_counters(&r->base)) {
		fprintf(stderr, "zs record: zswap counters unreadable\n");
		return -1;
	}
	r->prev = r->base;
	return run_ops(r);
}

