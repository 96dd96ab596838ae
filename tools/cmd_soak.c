/*
 * `zs soak`: a long-running check that nothing is lost and nothing leaks.
 * Worker threads share one zsmalloc pool and one zram store (deferred free
 * on), taking random slots of two shadow tables and allocating, rewriting,
 * reading (verified byte for byte), freeing (directly or deferred, often
 * on another thread than the one that allocated) and storing/discarding
 * pages, while a maintenance thread compacts both, marks the store idle and
 * recompresses it.  The main thread samples RSS.  At the end every object
 * and slot is verified, everything is freed, and both must hold 0 pages.
 * Prints operations, threads x seconds, bytes lost (must be 0) and RSS drift
 * (end minus after warm-up); exits 1 if anything was lost or left behind.
 * Public headers only.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmds.h"
#include "util.h"
#include "opts.h"
#include "zs/pages.h"
#include "zs/zram.h"
#include "zs/zsmalloc.h"
#include "zs/harness.h"

struct sopts {
	double seconds, report, max_drift_mib;
	unsigned threads;
	size_t page_size, objects, slots;
	uint64_t mem_limit, seed;
	int checked, free_mode, quiet, fit;
	unsigned class_shards;     /* pool and store (zsmalloc): copies of each class */
	const char *comp, *recomp, *zbackend;
};

/* One pool object of the shadow table; `lock` is taken by CAS so one worker owns it at a time. */
struct pobj {
	atomic_int lock;
	unsigned long h;
	uint32_t size;
	uint64_t seed;
};

/* One zram slot: kind 0 = empty (reads as zeros), else the generator of its page. */
struct zslot {
	atomic_int lock;
	uint8_t kind;
	uint64_t seed;
};

/* Per-thread counters: the operations (up to C_BUSY), then the checks' totals. */
enum { C_ALLOC, C_FREE, C_FREE_DEF, C_READ, C_WRITE, C_ZWRITE, C_ZREAD, C_ZDISCARD, C_ZFAIL,
       C_BUSY, C_NR, C_LOST = C_NR, C_VERIFIED, C_ERR, C_ALL };
static const char *const cname[C_NR] = { "alloc", "free", "free_deferred", "read", "write",
					 "zram_write", "zram_read", "zram_discard",
					 "zram_write_enomem", "busy" };

struct worker {
	pthread_t tid;
	int id;
	uint64_t rng;
	_Atomic uint64_t cnt[C_ALL];
	unsigned char *buf, *exp;
};

static struct zs_pool *pool;
static struct zs_zram *zram;
static struct pobj *objs;
static struct zslot *slots;
static struct sopts o;
static atomic_int stop;
static _Atomic uint64_t m_compact_pool, m_compact_zram, m_idle, m_recomp, m_scanned, m_loops;
static _Atomic int reported;

/* An object's bytes: word i is a hash of (seed, i). */
static void fill(unsigned char *b, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i += 8) {
		uint64_t z = (seed + (i >> 3)) * 0x9e3779b97f4a7c15ULL;
		z ^= z >> 31;
		memcpy(b + i, &z, n - i < 8 ? n - i : 8);
	}
}

/* A zram page of a given kind: 1 same-filled, 2 text-like, 3 half random, 4 random. */
static void gen_page(unsigned char *b, size_t ps, int kind, uint64_t seed)
{
	switch (kind) {
	case 1:
		for (size_t i = 0; i < ps; i += 8)
			memcpy(b + i, &seed, 8);
		break;
	case 2:
		for (size_t i = 0; i < ps; i++)
			b[i] = (unsigned char)('a' + ((seed >> ((i >> 9) & 7) * 8) + (i >> 5)) % 11);
		break;
	case 3:
		fill(b, ps / 2, seed);
		memset(b + ps / 2, 0, ps - ps / 2);
		break;
	case 4:
		fill(b, ps, seed);
		break;
	default:
		memset(b, 0, ps);
	}
}

static void report_loss(struct worker *w, const char *what, size_t idx, size_t bytes)
{
	atomic_fetch_add(&w->cnt[C_LOST], bytes);
	if (atomic_fetch_add(&reported, 1) < 10)
		fprintf(stderr, "zs soak: thread %d: %s %zu: %zu bytes differ or unreadable\n", w->id,
			what, idx, bytes);
}

static size_t pick_size(uint64_t r, size_t ps)
{
	switch (r % 8) {
	case 0: case 1: case 2: case 3:
		return 1 + (r >> 8) % 512;
	case 7:
		return ps - (r >> 8) % 64;
	default:
		return 1 + (r >> 8) % ps;
	}
}

/* Verify a pool object through read_begin (or the legacy map 1 in 8). */
static int pool_verify(struct worker *w, struct pobj *e, size_t idx, uint64_t r)
{
	fill(w->exp, e->size, e->seed);
	int ok;
	if (r % 8 == 0) {
		const unsigned char *m = zs_map_object(pool, e->h, ZS_MM_RO);
		ok = m && !memcmp(m, w->exp, e->size);
		if (m)
			zs_unmap_object(pool, e->h);
	} else {
		void *m = zs_obj_read_begin(pool, e->h, e->size, w->buf);
		ok = m && !memcmp(m, w->exp, e->size);
		if (m)
			zs_obj_read_end(pool, e->h, e->size, m);
	}
	if (!ok)
		report_loss(w, "pool object", idx, e->size);
	else
		atomic_fetch_add_explicit(&w->cnt[C_VERIFIED], e->size, memory_order_relaxed);
	return ok;
}

static void inc(struct worker *w, int c)
{
	atomic_fetch_add_explicit(&w->cnt[c], 1, memory_order_relaxed);
}

static void pool_op(struct worker *w)
{
	uint64_t r = tool_rand64(&w->rng);
	size_t idx = (size_t)(r % o.objects);
	struct pobj *e = &objs[idx];
	int z = 0;
	if (!atomic_compare_exchange_strong(&e->lock, &z, 1)) {
		inc(w, C_BUSY);
		return;
	}
	r = tool_rand64(&w->rng);
	unsigned kind = (unsigned)(r >> 56);
	if (!e->h) {
		size_t sz = pick_size(r, o.page_size);
		uint64_t seed = tool_rand64(&w->rng);
		fill(w->buf, sz, seed);
		/* Half the stores in one call (zs_malloc_write), half as zs_malloc + zs_obj_write. */
		int fused = (kind >> 7) & 1;
		unsigned long h = fused ? zs_malloc_write(pool, w->buf, sz) : zs_malloc(pool, sz);
		if (ZS_IS_ERR(h) || !h) {
			atomic_fetch_add(&w->cnt[C_ERR], 1);
			fprintf(stderr, "zs soak: %s(%zu) failed: %d\n",
				fused ? "zs_malloc_write" : "zs_malloc", sz, ZS_ERR(h));
		} else {
			e->h = h;
			e->size = (uint32_t)sz;
			e->seed = seed;
			if (!fused && zs_obj_write(pool, h, w->buf, sz)) {
				atomic_fetch_add(&w->cnt[C_ERR], 1);
				report_loss(w, "pool write", idx, sz);
			}
			inc(w, C_ALLOC);
		}
	} else if (kind < 96) {
		pool_verify(w, e, idx, r >> 8);
		int def = kind & 1;
		int ret = def ? zs_free_deferred(pool, e->h) : zs_free(pool, e->h);
		if (ret)
			atomic_fetch_add(&w->cnt[C_ERR], 1);
		e->h = 0;
		inc(w, def ? C_FREE_DEF : C_FREE);
	} else if (kind < 144) {
		e->seed = tool_rand64(&w->rng);
		fill(w->buf, e->size, e->seed);
		if (zs_obj_write(pool, e->h, w->buf, e->size)) {
			atomic_fetch_add(&w->cnt[C_ERR], 1);
			report_loss(w, "pool rewrite", idx, e->size);
		}
		inc(w, C_WRITE);
	} else {
		pool_verify(w, e, idx, r >> 8);
		inc(w, C_READ);
	}
	atomic_store(&e->lock, 0);
}

static int zram_verify(struct worker *w, struct zslot *s, size_t idx)
{
	int ret = zs_zram_read(zram, idx, w->buf, o.page_size);
	gen_page(w->exp, o.page_size, s->kind, s->seed);
	if (ret || memcmp(w->buf, w->exp, o.page_size)) {
		report_loss(w, "zram slot", idx, o.page_size);
		return 0;
	}
	atomic_fetch_add_explicit(&w->cnt[C_VERIFIED], o.page_size, memory_order_relaxed);
	return 1;
}

static void zram_op(struct worker *w)
{
	uint64_t r = tool_rand64(&w->rng);
	size_t idx = (size_t)(r % o.slots);
	struct zslot *s = &slots[idx];
	int z = 0;
	if (!atomic_compare_exchange_strong(&s->lock, &z, 1)) {
		inc(w, C_BUSY);
		return;
	}
	r = tool_rand64(&w->rng);
	unsigned kind = (unsigned)(r >> 56);
	if (!s->kind || kind < 96) {
		int k = 1 + (int)((r >> 8) % 4);
		uint64_t seed = tool_rand64(&w->rng);
		gen_page(w->buf, o.page_size, k, seed);
		int ret = zs_zram_write(zram, idx, w->buf);
		if (ret == 0) {
			s->kind = (uint8_t)k;
			s->seed = seed;
			inc(w, C_ZWRITE);
		} else if (ret == -ENOMEM && o.mem_limit) {
			inc(w, C_ZFAIL); /* over the limit: the old contents must stay */
		} else {
			atomic_fetch_add(&w->cnt[C_ERR], 1);
			fprintf(stderr, "zs soak: zs_zram_write(%zu) failed: %d\n", idx, ret);
		}
	} else if (kind < 128) {
		zram_verify(w, s, idx);
		/* free_notify may find the slot locked by recompression: then nothing changes */
		int ret = (kind & 1) ? zs_zram_discard(zram, idx) : zs_zram_free_notify(zram, idx);
		if (ret == 0)
			s->kind = 0;
		else if (ret != -EBUSY)
			atomic_fetch_add(&w->cnt[C_ERR], 1);
		inc(w, C_ZDISCARD);
	} else {
		zram_verify(w, s, idx);
		inc(w, C_ZREAD);
	}
	atomic_store(&s->lock, 0);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		for (int i = 0; i < 64; i++)
			pool_op(w);
		for (int i = 0; i < 8; i++)
			zram_op(w);
	}
	return NULL;
}

/* Compaction of both, idle marking and recompression, concurrently with the workers. */
static void *maint_main(void *arg)
{
	(void)arg;
	unsigned n = 0;
	while (!atomic_load(&stop)) {
		atomic_fetch_add(&m_compact_pool, zs_compact(pool));
		atomic_fetch_add(&m_compact_zram, zs_zram_compact(zram));
		if (n % 4 == 0) {
			atomic_fetch_add(&m_idle, (uint64_t)zs_zram_mark_idle(zram, 0));
			struct zs_zram_recomp_result res;
			if (zs_zram_recompress(zram, ZS_ZRAM_RECOMP_IDLE, 0, 512, &res) == 0) {
				atomic_fetch_add(&m_recomp, res.recompressed);
				atomic_fetch_add(&m_scanned, res.scanned);
			}
		}
		if (n % 16 == 0)
			zs_free_deferred_flush(pool);
		n++;
		atomic_fetch_add(&m_loops, 1);
		usleep(20000);
	}
	return NULL;
}

#define SOAK_POOL_OPTS (OPT_PAGE_SIZE | OPT_FREE_MODE | OPT_CLASS_SHARDS | OPT_FIT_ZSPAGES | \
			OPT_PROFILE)

/* --seconds and --max-drift: a finite number above 0. */
static int positive(const char *cmd, const char *opt, const char *arg, void *out)
{
	double v;
	if (parse_double(arg, &v) || v <= 0) {
		fprintf(stderr, "zs %s: %s: '%s' is not a number above 0\n", cmd, opt, arg);
		return 2;
	}
	*(double *)out = v;
	return 0;
}

/* The flags of `zs soak` (the pool's are opts.h's), stored into o; usage
 * passes scratch ones for the help. */
#define SOAK_FLAGS(o, threads, seconds, report, drift)                                              \
	{                                                                                      \
		{ "seconds", 0, OPTK_FN, seconds, 0, 0,                                         \
		  "  --seconds S          how long to run, more than 0 (default 10)\n" },       \
		{ "threads", 0, OPTK_U64, threads, 1, 256,                                      \
		  "  --threads N          worker threads, 1..256 (default 4), plus one "         \
		  "maintenance thread\n" },                                                     \
		{ "objects", 0, OPTK_U64, &(o)->objects, 1, 1u << 26,                           \
		  "  --objects N          pool objects in the shadow table, 1..67108864 (default " \
		  "65536)\n" },                                                                 \
		{ "slots", 0, OPTK_U64, &(o)->slots, 1, 1u << 24,                               \
		  "  --slots N            zram slots, 1..16777216 (default 8192)\n" },          \
		{ "comp", 0, OPTK_STR, &(o)->comp, 0, 0,                                        \
		  "  --comp NAME          zram compressor (default lz4)\n" },                   \
		{ "recomp", 0, OPTK_STR, &(o)->recomp, 0, 0,                                    \
		  "  --recomp NAME        zram recompression algorithm (default zstd)\n" },     \
		{ "zram-backend", 0, OPTK_STR, &(o)->zbackend, 0, 0,                            \
		  "  --zram-backend K     backend of the store (default zsmalloc)\n" },         \
		{ "mem-limit", 0, OPTK_BYTES, &(o)->mem_limit, 1, UINT64_MAX,                   \
		  "  --mem-limit SIZE     zram mem_limit (writes past it must keep old "         \
		  "contents)\n" },                                                              \
		{ "checked", 0, OPTK_FLAG, &(o)->checked, 0, 0,                                 \
		  "  --checked            checked pool\n" },                                    \
		{ "seed", 0, OPTK_U64, &(o)->seed, 0, UINT64_MAX,                               \
		  "  --seed N             RNG seed (default: time)\n" },                        \
		{ "report", 0, OPTK_FN, report, 0, 0,                                           \
		  "  --report S           progress line every S seconds, 0 none (default 60)\n" }, \
		{ "max-drift", 0, OPTK_FN, drift, 0, 0,                                         \
		  "  --max-drift MIB      also fail if RSS grows more than MIB after the "      \
		  "warm-up\n" },                                                                \
		{ "quiet", 0, OPTK_FLAG, &(o)->quiet, 0, 0,                                     \
		  "  --quiet              no progress lines\n" },                               \
		{ NULL, 0, OPTK_FLAG, NULL, 0, 0, NULL },                                      \
	}

static void usage(FILE *f)
{
	struct sopts scratch;
	uint64_t threads;
	const struct opt_flag flags[] = SOAK_FLAGS(&scratch, &threads, NULL, NULL, NULL);
	fprintf(f, "usage: zs soak [options]\n"
		   "Threads on one pool and one zram store, every byte checked against a shadow\n"
		   "copy; then everything freed: nothing may be lost or left.\n");
	opt_pool_help(f, SOAK_POOL_OPTS);
	fprintf(f, "                       (--page-size: the pool's and the store's)\n");
	opt_flags_help(f, flags);
	fprintf(f, "Exit status: 0 nothing lost and nothing left (and the drift within --max-drift),\n"
		   "1 otherwise, 2 bad usage or a store/pool that cannot be created.\n");
}

static uint64_t sum(struct worker *ws, int c)
{
	uint64_t t = 0;
	for (unsigned i = 0; i < o.threads; i++)
		t += atomic_load(&ws[i].cnt[c]);
	return t;
}

/* What a run leaves for the report. */
struct soak_result {
	size_t rss_start, rss_warm, rss_max, rss_min_after, rss_end;
	double warm_at, drift, elapsed;
	unsigned long pool_left, pool_objs;   /* after free-all + compact: must be 0 */
	struct zs_zram_stats st;              /* likewise */
};

/* --report: a finite number, 0 or more. */
static int nonnegative(const char *cmd, const char *opt, const char *arg, void *out)
{
	double v;
	if (parse_double(arg, &v) || v < 0) {
		fprintf(stderr, "zs %s: %s: '%s' is not a number, 0 or more\n", cmd, opt, arg);
		return 2;
	}
	*(double *)out = v;
	return 0;
}

/* Options -> o.  0, 1 after --help, or 2 after a message. */
static int parse(int argc, char **argv)
{
	memset(&o, 0, sizeof(o));
	o.seconds = 10;
	o.report = 60;
	o.objects = 65536;
	o.slots = 8192;
	o.seed = (uint64_t)time(NULL);
	o.comp = "lz4";
	o.recomp = "zstd";
	o.zbackend = "zsmalloc";
	uint64_t threads = 4;
	const struct opt_hook seconds = { positive, &o.seconds },
			      drift = { positive, &o.max_drift_mib },
			      report = { nonnegative, &o.report };
	const struct opt_flag flags[] = SOAK_FLAGS(&o, &threads, (void *)&seconds, (void *)&report,
						   (void *)&drift);
	struct pool_opts po;
	pool_opts_init(&po);
	int rc = opt_parse("soak", argc, argv, flags, SOAK_POOL_OPTS, &po, usage, NULL);
	if (rc)
		return rc;
	o.threads = (unsigned)threads;
	o.page_size = po.cfg.page_size;
	o.free_mode = (int)po.cfg.free_mode;
	o.class_shards = po.cfg.class_shards;
	o.fit = po.cfg.fit_zspages;
	if (optind < argc) {
		fprintf(stderr, "zs soak: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	return 0;
}

/* The pool, the zram store, the shadow tables and the workers' slots.  0, or 2
 * after a message (teardown() releases what was made). */
static int setup(struct worker **wsp)
{
	struct zs_pool_config pc;
	zs_pool_config_init(&pc);
	pc.name = "soak";
	pc.page_size = o.page_size;
	pc.free_mode = (enum zs_free_mode)o.free_mode;
	pc.checked = o.checked;
	pc.class_shards = o.class_shards;
	pc.fit_zspages = o.fit;
	char why[256];
	if (zs_pool_create(&pc, &pool, why, sizeof(why))) {
		fprintf(stderr, "zs soak: %s\n", why);
		return 2;
	}
	struct zs_zram_config zc;
	zs_zram_config_init(&zc);
	zc.page_size = o.page_size;
	zc.disksize = (uint64_t)o.slots * o.page_size;
	zc.comp = o.comp;
	zc.recomp = o.recomp;
	zc.backend.kind = o.zbackend;
	zc.mem_limit = o.mem_limit;
	zc.deferred_free = 1;
	zc.backend.zs.class_shards = o.class_shards;
	int ret = zs_zram_create(&zc, &zram, NULL, 0);
	if (ret) {
		fprintf(stderr, "zs soak: cannot create the zram store (--comp %s, --recomp %s, "
			"--zram-backend %s): %s\n", o.comp, o.recomp, o.zbackend, strerror(-ret));
		return 2;
	}
	objs = calloc(o.objects, sizeof(*objs));
	slots = calloc(o.slots, sizeof(*slots));
	*wsp = calloc(o.threads, sizeof(**wsp));
	if (!objs || !slots || !*wsp) {
		fprintf(stderr, "zs soak: out of memory\n");
		return 2;
	}
	printf("zs soak: %u threads + 1 maintenance, %.0f s, page size %zu, %zu pool objects, "
	       "%zu zram slots (%s -> %s, %s backend, deferred free), free mode %d%s, "
	       "class copies %u%s, seed %llu\n",
	       o.threads, o.seconds, o.page_size, o.objects, o.slots, o.comp, o.recomp, o.zbackend,
	       o.free_mode, o.checked ? ", checked" : "", zs_pool_class_shards(pool),
	       o.fit ? ", fit zspages" : "", (unsigned long long)o.seed);
	fflush(stdout);
	return 0;
}

/* Stop and join the first n workers (a thread failed to start). */
static void stop_workers(struct worker *ws, unsigned n)
{
	atomic_store(&stop, 1);
	for (unsigned i = 0; i < n; i++)
		pthread_join(ws[i].tid, NULL);
}

/* Workers and the maintenance thread for --seconds, sampling RSS; then every
 * object and slot is read back and freed.  0, or 2 if a thread cannot start. */
static int run(struct worker *ws, struct soak_result *r)
{
	r->rss_start = zs_process_rss();
	atomic_store(&stop, 0);
	for (unsigned i = 0; i < o.threads; i++) {
		ws[i].id = (int)i;
		ws[i].rng = o.seed + 0x1000003ULL * (i + 1);
		ws[i].buf = malloc(o.page_size);
		ws[i].exp = malloc(o.page_size);
		if (!ws[i].buf || !ws[i].exp || pthread_create(&ws[i].tid, NULL, worker_main, &ws[i])) {
			fprintf(stderr, "zs soak: cannot start thread %u\n", i);
			stop_workers(ws, i);
			return 2;
		}
	}
	pthread_t mt;
	if (pthread_create(&mt, NULL, maint_main, NULL)) {
		fprintf(stderr, "zs soak: cannot start the maintenance thread\n");
		stop_workers(ws, o.threads);
		return 2;
	}

	/* RSS drift is measured from the end of the warm-up: 10% of the run, at least 1 s. */
	double t0 = tool_now(), next_report = o.report;
	r->warm_at = o.seconds / 10 < 1 ? 1 : o.seconds / 10;
	if (r->warm_at > o.seconds)
		r->warm_at = o.seconds;
	r->rss_warm = 0;
	r->rss_max = r->rss_start;
	r->rss_min_after = (size_t)-1;
	r->rss_end = 0;
	for (;;) {
		double t = tool_now() - t0;
		if (t >= o.seconds)
			break;
		double nap = o.seconds - t < 0.25 ? o.seconds - t : 0.25;
		usleep((useconds_t)(nap * 1e6));
		t = tool_now() - t0;
		size_t rss = zs_process_rss();
		if (rss > r->rss_max)
			r->rss_max = rss;
		if (!r->rss_warm && t >= r->warm_at)
			r->rss_warm = rss;
		if (r->rss_warm && rss < r->rss_min_after)
			r->rss_min_after = rss;
		if (o.report > 0 && !o.quiet && t >= next_report) {
			uint64_t ops = 0;
			for (int k = 0; k < C_BUSY; k++)
				ops += sum(ws, k);
			printf("  t=%5.0f s  ops %llu  rss %.1f MiB  pool pages %lu  lost %llu\n", t,
			       (unsigned long long)ops, rss / 1048576.0, zs_get_total_pages(pool),
			       (unsigned long long)sum(ws, C_LOST));
			fflush(stdout);
			next_report += o.report;
		}
	}
	r->rss_end = zs_process_rss();
	if (!r->rss_warm)
		r->rss_warm = r->rss_end;
	r->drift = ((double)r->rss_end - (double)r->rss_warm) / 1048576.0;
	atomic_store(&stop, 1);
	for (unsigned i = 0; i < o.threads; i++)
		pthread_join(ws[i].tid, NULL);
	pthread_join(mt, NULL);
	r->elapsed = tool_now() - t0;

	/* Final check: every object and slot reads back, then everything is freed. */
	struct worker *w0 = &ws[0];
	for (size_t i = 0; i < o.objects; i++)
		if (objs[i].h) {
			pool_verify(w0, &objs[i], i, i);
			if (zs_free_deferred(pool, objs[i].h))
				atomic_fetch_add(&w0->cnt[C_ERR], 1);
			objs[i].h = 0;
		}
	for (size_t i = 0; i < o.slots; i++)
		if (slots[i].kind)
			zram_verify(w0, &slots[i], i);
	zs_free_deferred_flush(pool);
	zs_compact(pool);
	r->pool_left = zs_get_total_pages(pool);
	r->pool_objs = zs_pool_objects(pool);
	zs_zram_discard_range(zram, 0, o.slots);
	zs_zram_flush(zram);
	zs_zram_compact(zram);
	zs_zram_get_stats(zram, &r->st, sizeof(r->st));
	return 0;
}

/* The report; returns 1 when the run failed (lost bytes, errors, leftovers, drift). */
static int print_report(struct worker *ws, const struct soak_result *r)
{
	uint64_t ops = 0;
	for (int k = 0; k < C_BUSY; k++)
		ops += sum(ws, k);
	uint64_t lost = sum(ws, C_LOST), errors = sum(ws, C_ERR);
	printf("operations: %llu (%.0f/s)\n", (unsigned long long)ops, ops / r->elapsed);
	for (int k = 0; k < C_NR; k++)
		printf("  %-18s %llu\n", cname[k], (unsigned long long)sum(ws, k));
	printf("maintenance: %llu rounds, pool pages compacted %llu, zram pages compacted %llu, "
	       "idle marks %llu, recompressed %llu of %llu scanned\n",
	       (unsigned long long)m_loops, (unsigned long long)m_compact_pool,
	       (unsigned long long)m_compact_zram, (unsigned long long)m_idle,
	       (unsigned long long)m_recomp, (unsigned long long)m_scanned);
	printf("threads x seconds: %u x %.1f = %.1f thread-seconds\n", o.threads + 1, r->elapsed,
	       (o.threads + 1) * r->elapsed);
	printf("bytes verified: %llu\n", (unsigned long long)sum(ws, C_VERIFIED));
	printf("bytes lost: %llu\n", (unsigned long long)lost);
	printf("errors: %llu\n", (unsigned long long)errors);
	printf("after free-all + compact: pool %lu pages, %lu objects; zram mem_used_total %llu, "
	       "pages_stored %llu\n",
	       r->pool_left, r->pool_objs, (unsigned long long)r->st.mem_used_total,
	       (unsigned long long)r->st.pages_stored);
	printf("rss: start %.1f MiB, after warm-up (%.0f s) %.1f MiB, min after %.1f MiB, "
	       "max %.1f MiB, end %.1f MiB\n",
	       r->rss_start / 1048576.0, r->warm_at, r->rss_warm / 1048576.0,
	       (r->rss_min_after == (size_t)-1 ? r->rss_end : r->rss_min_after) / 1048576.0,
	       r->rss_max / 1048576.0, r->rss_end / 1048576.0);
	printf("rss drift: %+.1f MiB (end - after warm-up)%s\n", r->drift,
	       o.max_drift_mib > 0 && r->drift > o.max_drift_mib ? ", over --max-drift" : "");
	int fail = lost || errors || r->pool_left || r->pool_objs || r->st.mem_used_total ||
		   r->st.pages_stored || (o.max_drift_mib > 0 && r->drift > o.max_drift_mib);
	printf("soak: %s\n", fail ? "FAILED" : "ok");
	return fail;
}

static void teardown(struct worker *ws)
{
	if (zram)
		zs_zram_destroy(zram);
	if (pool)
		zs_destroy_pool(pool);
	for (unsigned i = 0; ws && i < o.threads; i++) {
		free(ws[i].buf);
		free(ws[i].exp);
	}
	free(ws);
	free(objs);
	free(slots);
	zram = NULL;
	pool = NULL;
	objs = NULL;
	slots = NULL;
}

int cmd_soak(int argc, char **argv)
{
	int rc = parse(argc, argv);
	if (rc)
		return rc == 1 ? 0 : 2;
	struct worker *ws = NULL;
	struct soak_result r;
	memset(&r, 0, sizeof(r));
	rc = setup(&ws);
	if (!rc)
		rc = run(ws, &r);
	if (!rc)
		rc = print_report(ws, &r) ? 1 : 0;
	teardown(ws);
	return rc;
}
