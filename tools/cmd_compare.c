/*
 * zs compare: the same workload on every backend, one table.
 *
 * Answers the zblock thread's question (seed 003) with measurements instead
 * of kernel-build anecdotes: density and speed of zsmalloc vs zblock at 4K and
 * 16K pages, after a random churn and after compaction, next to what an
 * application gets from glibc/jemalloc/mimalloc holding exact-size buffers.
 *
 * Fairness rules, and why:
 *  - Workloads are built once per page size in the parent (page data is
 *    compressed with LZ4 here, directly, so this tool does not depend on the
 *    zram layer); each backend then runs in its own forked child, so malloc
 *    kinds start from a clean heap and their RSS is theirs alone.
 *  - Memory: pool kinds report pool pages * page size (what the kernel would
 *    count); malloc kinds have no pages, so their memory is the child's RSS
 *    growth since just before the backend was created.  Both are printed for
 *    every kind in --json.
 *  - Pages are stored as zram does: same-filled pages are not stored at all,
 *    pages that compress to zsmalloc's huge class size or more are stored
 *    raw at page size.  The rule is computed once per page size so every
 *    backend stores exactly the same blobs.
 * Public headers only (include/zs/), plus <lz4.h>.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <lz4.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "cmds.h"
#include "compare.h"
#include "util.h"
#include "waste.h"
#include "opts.h"
#include "zs/backend.h"
#include "zs/pages.h"
#include "zs/harness.h"
#include "zs/zram.h"

/* ---- options ---- */

struct opts {
	const char *files[64];
	int nfiles;
	const char *heap_file;
	int pid;
	size_t page_sizes[4];
	int nps;
	const char *backends;   /* comma list or NULL = all */
	const char *workloads;  /* comma list or NULL = all */
	size_t max_mib;         /* raw input per page workload */
	size_t mix_n;           /* objects in the churn mix */
	size_t testmod_n;       /* objects per testmod size */
	int rounds;             /* churn rounds */
	int repeat;             /* runs per backend; speeds are the best run's */
	uint64_t seed;
	int json;
	struct pool_opts po;  /* --chain/--chain-policy/--delta/--free-mode shape zsmalloc */
};

#define COMPARE_OPTS OPT_ALL

/* The pool shape of every zsmalloc run (a policy experiment changes only these). */
static const struct pool_opts *g_po;

/* One item of a comma list at p: its length in *len; returns where the next starts. */
static const char *list_item(const char *p, size_t *len)
{
	const char *e = strchr(p, ',');
	*len = e ? (size_t)(e - p) : strlen(p);
	return p + *len + (e ? 1 : 0);
}

static int in_list(const char *list, const char *name)
{
	if (!list)
		return 1;
	size_t n = strlen(name), len;
	for (const char *p = list, *next; *p; p = next) {
		next = list_item(p, &len);
		if (len == n && !strncmp(p, name, n))
			return 1;
	}
	return 0;
}

/* Every item of a comma list names something in known[] (a typo must not run nothing). */
static int list_known(const char *list, const char *const *known, const char *what)
{
	if (!list)
		return 1;
	if (!*list) {
		fprintf(stderr, "zs compare: empty %s list\n", what);
		return 0;
	}
	size_t len;
	for (const char *p = list, *next; *p; p = next) {
		next = list_item(p, &len);
		int ok = 0;
		for (const char *const *k = known; *k && !ok; k++)
			ok = strlen(*k) == len && !strncmp(p, *k, len);
		if (!ok) {
			fprintf(stderr, "zs compare: unknown %s '%.*s' (known:", what, (int)len, p);
			for (const char *const *k = known; *k; k++)
				fprintf(stderr, " %s", *k);
			fprintf(stderr, ")\n");
			return 0;
		}
	}
	return 1;
}

/* ---- one backend run (in a child) ---- */

enum { PH_FILL, PH_CHURN, PH_COMPACT, NR_PH };
static const char *const ph_name[NR_PH] = { "fill", "churn", "compact" };

struct result {
	int ok, errors;
	double store_ops, load_ops, free_ops, restore_ops;
	size_t objects[NR_PH], live[NR_PH], mem[NR_PH], rss[NR_PH], be_mem[NR_PH];
	unsigned long pages[NR_PH];
	int paged; /* ZS_BACKEND_CAP_PAGES: memory is pool pages, not the child's RSS */
	int has_waste; /* a zsmalloc pool: waste[] splits mem - live by cause */
	struct zs_waste waste[NR_PH];
};

static void measure(struct zs_backend *b, size_t rss0, size_t live, size_t nobj, struct result *res,
		    int ph)
{
	struct zs_backend_stats st;
	zs_backend_stats(b, &st, sizeof(st));
	size_t rss = zs_process_rss();
	res->rss[ph] = rss > rss0 ? rss - rss0 : 0;
	res->pages[ph] = st.pages;
	res->be_mem[ph] = st.mem_bytes;
	res->paged = !!(zs_backend_caps(b) & ZS_BACKEND_CAP_PAGES);
	res->mem[ph] = res->paged ? zs_backend_mem_bytes(b, &st) : res->rss[ph];
	res->live[ph] = live;
	res->objects[ph] = nobj;
	struct zs_pool *zp = zs_backend_zspool(b);
	res->has_waste = zp != NULL;
	if (zp)
		zs_waste_measure(zp, live, &res->waste[ph]);
}

static void run_backend(const char *kind, size_t ps, const struct workload *w, int rounds,
			uint64_t seed, unsigned long *h, uint32_t *bi, unsigned char *local,
			struct result *res)
{
	memset(res, 0, sizeof(*res));
	size_t rss0 = zs_process_rss();
	struct zs_backend_config c;
	zs_backend_config_init(&c);
	if (g_po)
		c.zs = g_po->cfg;
	c.kind = kind;
	c.page_size = ps;
	struct zs_backend *b;
	if (zs_backend_create(&c, &b, NULL, 0))
		return;
	int deferred = g_po && g_po->deferred;
	size_t n = w->n, live = 0, bytes = 0, frees = 0, restores = 0;
	double tfree = 0, trestore = 0;

	double t0 = tool_now();
	for (size_t i = 0; i < n; i++) {
		const struct blob *bl = &w->b[i];
		unsigned long x = zs_backend_malloc(b, bl->len);
		if (ZS_IS_ERR(x)) {
			res->errors++;
			continue;
		}
		zs_backend_write(b, x, bl->data, bl->len);
		h[live] = x;
		bi[live++] = (uint32_t)i;
		bytes += bl->len;
	}
	double t1 = tool_now();
	res->store_ops = (double)live / (t1 - t0);
	measure(b, rss0, bytes, live, res, PH_FILL);

	/* Load: what a swap-in does before decompressing: map, copy out, unmap. */
	t0 = tool_now();
	for (size_t i = 0; i < live; i++) {
		uint32_t len = w->b[bi[i]].len;
		void *m = zs_backend_read_begin(b, h[i], len, local);
		memcpy(local + ps, m, len);
		zs_backend_read_end(b, h[i], len, m);
	}
	t1 = tool_now();
	res->load_ops = (double)live / (t1 - t0);

	/* Churn: each round frees 30% of the live objects at random and stores
	 * 20% of the original count again (random blobs), so the pool shrinks
	 * while its blocks/zspages get holes -- the fragmentation argument. */
	uint64_t s = seed;
	for (int r = 0; r < rounds; r++) {
		size_t kill = live * 3 / 10;
		t0 = tool_now();
		for (size_t k = 0; k < kill; k++) {
			size_t i = tool_rand64(&s) % live;
			if (deferred)
				zs_backend_free_deferred(b, h[i]);
			else
				zs_backend_free(b, h[i]);
			bytes -= w->b[bi[i]].len;
			h[i] = h[--live];
			bi[i] = bi[live];
		}
		tfree += tool_now() - t0;
		frees += kill;
		size_t add = n / 5;
		t0 = tool_now();
		for (size_t k = 0; k < add && live < n; k++) {
			uint32_t j = (uint32_t)(tool_rand64(&s) % n);
			unsigned long x = zs_backend_malloc(b, w->b[j].len);
			if (ZS_IS_ERR(x)) {
				res->errors++;
				continue;
			}
			zs_backend_write(b, x, w->b[j].data, w->b[j].len);
			h[live] = x;
			bi[live++] = j;
			bytes += w->b[j].len;
			restores++;
		}
		trestore += tool_now() - t0;
	}
	res->restore_ops = trestore > 0 ? (double)restores / trestore : 0;
	zs_backend_flush(b);
	measure(b, rss0, bytes, live, res, PH_CHURN);
	zs_backend_compact(b);
	measure(b, rss0, bytes, live, res, PH_COMPACT);

	/* Every object must still hold its bytes (compaction moved some). */
	for (size_t i = 0; i < live; i++) {
		const struct blob *bl = &w->b[bi[i]];
		void *m = zs_backend_read_begin(b, h[i], bl->len, local);
		if (!m || memcmp(m, bl->data, bl->len))
			res->errors++;
		if (m)
			zs_backend_read_end(b, h[i], bl->len, m);
	}
	t0 = tool_now();
	for (size_t i = 0; i < live; i++)
		zs_backend_free(b, h[i]);
	tfree += tool_now() - t0;
	frees += live;
	res->free_ops = tfree > 0 ? (double)frees / tfree : 0;
	zs_backend_destroy(b);
	res->ok = 1;
}

/* Fork so malloc kinds get a clean heap and their own RSS. */
static int run_isolated(const char *kind, size_t ps, const struct workload *w, int rounds,
			uint64_t seed, struct result *res)
{
	unsigned long *h = malloc(w->n * sizeof(*h) + 1);
	uint32_t *bi = malloc(w->n * sizeof(*bi) + 1);
	unsigned char *local = malloc(2 * ps);
	int fd[2];
	if (!h || !bi || !local || pipe(fd)) {
		free(h);
		free(bi);
		free(local);
		return -ENOMEM;
	}
	/* Touch everything the child will write before it measures its baseline. */
	memset(h, 0, w->n * sizeof(*h));
	memset(bi, 0, w->n * sizeof(*bi));
	memset(local, 0, 2 * ps);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close(fd[0]);
		struct result r;
		run_backend(kind, ps, w, rounds, seed, h, bi, local, &r);
		ssize_t wr = write(fd[1], &r, sizeof(r));
		_exit(wr == (ssize_t)sizeof(r) ? 0 : 1);
	}
	close(fd[1]);
	memset(res, 0, sizeof(*res));
	ssize_t got = pid > 0 ? read(fd[0], res, sizeof(*res)) : -1;
	close(fd[0]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	free(h);
	free(bi);
	free(local);
	return got == (ssize_t)sizeof(*res) ? 0 : -ECHILD;
}

/* ---- output ---- */

static double mib(size_t b)
{
	return (double)b / 1048576.0;
}

static double util(const struct result *r, int ph)
{
	return r->mem[ph] ? 100.0 * (double)r->live[ph] / (double)r->mem[ph] : 0.0;
}

static void print_header(void)
{
	printf("%-8s %5s %-9s %7s | %9s %6s | %9s %6s | %9s %6s | %7s %7s %7s %7s | %s\n",
	       "workload", "page", "backend", "objects", "fill MiB", "util%", "churn MiB", "util%",
	       "compc MiB", "util%", "store/s", "restor/s", "load/s", "free/s", "err");
}

static void print_row(const char *wl, size_t ps, const char *kind, const struct result *r)
{
	if (!r->ok) {
		printf("%-8s %4zuK %-9s   (failed)\n", wl, ps / 1024, kind);
		return;
	}
	printf("%-8s %4zuK %-9s %7zu | %9.2f %6.1f | %9.2f %6.1f | %9.2f %6.1f | %6.2fM %6.2fM %6.2fM %6.2fM | %d\n",
	       wl, ps / 1024, kind, r->objects[PH_FILL], mib(r->mem[PH_FILL]), util(r, PH_FILL),
	       mib(r->mem[PH_CHURN]), util(r, PH_CHURN), mib(r->mem[PH_COMPACT]), util(r, PH_COMPACT),
	       r->store_ops / 1e6, r->restore_ops / 1e6, r->load_ops / 1e6, r->free_ops / 1e6,
	       r->errors);
	if (r->has_waste) {
		const struct zs_waste *w = &r->waste[PH_COMPACT];
		double lost = (double)(w->pool_bytes - w->live_bytes);
		printf("  %-8s %2zuK %-8s waste after compaction %.2f MiB: rounding %.2f (%.0f%%), "
		       "zspage tails %.2f (%.0f%%), free slots %.2f (%.0f%%) in %zu zspages, "
		       "handles %.2f (%.0f%%), other %.2f\n",
		       wl, ps / 1024, kind, mib(w->pool_bytes - w->live_bytes), mib(w->rounding),
		       lost > 0 ? 100.0 * (double)w->rounding / lost : 0.0, mib(w->tails),
		       lost > 0 ? 100.0 * (double)w->tails / lost : 0.0, mib(w->free_slots),
		       lost > 0 ? 100.0 * (double)w->free_slots / lost : 0.0, w->partial_zspages,
		       mib(w->handles),
		       lost > 0 ? 100.0 * (double)w->handles / lost : 0.0,
		       (double)w->other / 1048576.0);
	}
}

static void print_json(struct json *js, const char *wl, const struct workload *w, size_t ps,
		       const char *kind, const struct result *r)
{
	json_obj(js);
	json_kstr(js, "workload", wl);
	json_kstr(js, "source", w->source ? w->source : "");
	json_kuint(js, "page_size", ps);
	json_kstr(js, "backend", kind);
	json_kbool(js, "paged", r->paged); /* memory is pool pages (else RSS growth) */
	json_kint(js, "ok", r->ok);
	json_kint(js, "errors", r->errors);
	json_kuint(js, "blobs", w->n);
	json_kuint(js, "pages_in", w->pages_in);
	json_kuint(js, "same_filled", w->same_filled);
	json_kuint(js, "raw_stored", w->raw_stored);
	json_kfixed(js, "store_ops", r->store_ops, 0);
	json_kfixed(js, "restore_ops", r->restore_ops, 0);
	json_kfixed(js, "load_ops", r->load_ops, 0);
	json_kfixed(js, "free_ops", r->free_ops, 0);
	for (int ph = 0; ph < NR_PH; ph++) {
		json_kobj(js, ph_name[ph]);
		json_kuint(js, "objects", r->objects[ph]);
		json_kuint(js, "live_bytes", r->live[ph]);
		json_kuint(js, "mem_bytes", r->mem[ph]);
		json_kuint(js, "pool_pages", r->pages[ph]);
		json_kuint(js, "rss_delta", r->rss[ph]);
		json_kuint(js, "backend_mem_bytes", r->be_mem[ph]);
		json_kfixed(js, "util", util(r, ph) / 100.0, 4);
		if (r->has_waste) {
			/* mem_bytes - live_bytes, by cause; the five add up exactly */
			const struct zs_waste *w = &r->waste[ph];
			json_kobj(js, "waste");
			json_kuint(js, "rounding", w->rounding);
			json_kuint(js, "zspage_tails", w->tails);
			json_kuint(js, "free_slots", w->free_slots);
			json_kuint(js, "handles", w->handles);
			json_kint(js, "other", w->other);
			json_obj_end(js);
			json_kuint(js, "partial_zspages", w->partial_zspages);
		}
		json_obj_end(js);
	}
	json_obj_end(js);
}

/* Per workload and page size: each pool kind against the best malloc kind. */
static void print_summary(const char *wl, size_t ps, const char *const *kinds,
			  const struct result *res, int nk)
{
	int best = -1;
	for (int i = 0; i < nk; i++)
		if (res[i].ok && !res[i].paged &&
		    (best < 0 || res[i].mem[PH_COMPACT] < res[best].mem[PH_COMPACT]))
			best = i;
	if (best < 0)
		return;
	for (int i = 0; i < nk; i++) {
		if (!res[i].ok || !res[i].paged || !res[i].mem[PH_COMPACT])
			continue;
		printf("  %-8s %2zuK %-8s best malloc (%s) / %s memory: fill %.2fx, churn %.2fx, "
		       "churn+compaction %.2fx\n",
		       wl, ps / 1024, kinds[i], kinds[best], kinds[i],
		       (double)res[best].mem[PH_FILL] / (double)res[i].mem[PH_FILL],
		       (double)res[best].mem[PH_CHURN] / (double)res[i].mem[PH_CHURN],
		       (double)res[best].mem[PH_COMPACT] / (double)res[i].mem[PH_COMPACT]);
	}
}

/* --files: repeatable; each a file or a non-empty directory. */
static int add_files(const char *cmd, const char *opt, const char *arg, void *ptr)
{
	struct opts *o = ptr;
	if (o->nfiles == 64) {
		fprintf(stderr, "zs %s: %s: at most 64\n", cmd, opt);
		return 2;
	}
	if (opt_path(cmd, opt, arg, 1))
		return 2;
	o->files[o->nfiles++] = arg;
	return 0;
}

/* --heap: a non-empty file. */
static int set_heap(const char *cmd, const char *opt, const char *arg, void *ptr)
{
	if (opt_path(cmd, opt, arg, 0))
		return 2;
	*(const char **)ptr = arg;
	return 0;
}

/* The flags of `zs compare` (the pool options come from opts.h), stored into
 * o and the numbers n; usage passes scratch ones for the help. */
struct compare_nums {
	uint64_t max_mib, mix_n, testmod_n;
};
#define COMPARE_FLAGS(o, n, files_hook, heap_hook, pid_hook)                                      \
	{                                                                                          \
		{ "workloads", 0, OPTK_STR, &(o)->workloads, 0, 0, NULL },                         \
		{ "backends", 0, OPTK_STR, &(o)->backends, 0, 0, NULL },                           \
		{ "files", 0, OPTK_FN, files_hook, 0, 0,                                          \
		  "  --files PATH       file or directory for the files workload; repeatable\n"     \
		  "                     (default /usr/lib/x86_64-linux-gnu + /usr/include)\n" },    \
		{ "heap", 0, OPTK_FN, heap_hook, 0, 0,                                            \
		  "  --heap FILE        raw memory dump for the heap workload\n" },                 \
		{ "pid", 0, OPTK_FN, pid_hook, 0, 0,                                              \
		  "  --pid PID          read that process's anonymous memory (default: a python3 "  \
		  "heap)\n" },                                                                      \
		{ "max-mib", 0, OPTK_U64, &(n)->max_mib, 1, 65536,                                 \
		  "  --max-mib N        raw MiB per page workload, 1..65536 (default 64)\n" },      \
		{ "mix-n", 0, OPTK_U64, &(n)->mix_n, 1, 100000000,                                 \
		  "  --mix-n N          objects in the mix workload, 1..100000000 (default "        \
		  "100000)\n" },                                                                    \
		{ "testmod-n", 0, OPTK_U64, &(n)->testmod_n, 1, 1000000,                           \
		  "  --testmod-n N      objects per testmod size, 1..1000000 (default 64)\n" },     \
		{ "rounds", 0, OPTK_INT, &(o)->rounds, 0, 1000,                                    \
		  "  --rounds N         churn rounds, 0..1000 (default 4)\n" },                     \
		{ "repeat", 0, OPTK_INT, &(o)->repeat, 1, 100,                                     \
		  "  --repeat N         runs per backend, best speed reported, 1..100 (default "    \
		  "2)\n" },                                                                         \
		{ "seed", 0, OPTK_U64, &(o)->seed, 0, UINT64_MAX,                                  \
		  "  --seed N           churn and mix seed (default 1)\n" },                        \
		{ "json", 0, OPTK_FLAG, &(o)->json, 0, 0,                                          \
		  "  --json             JSON instead of the table\n" },                             \
		{ NULL, 0, OPTK_FLAG, NULL, 0, 0, NULL },                                          \
	}

static void usage(FILE *f)
{
	struct opts scratch;
	struct compare_nums n;
	const struct opt_flag flags[] = COMPARE_FLAGS(&scratch, &n, NULL, NULL, NULL);
	fprintf(f,
		"usage: zs compare [options]\n"
		"  --workloads LIST   files,heap,testmod,mix (default all)\n"
		"  --backends LIST    kinds to run (default every kind built in)\n");
	opt_pool_help(f, COMPARE_OPTS);
	fprintf(f,
		"                     (--page-size is repeatable, default 4096 and 16384;\n"
		"                     --backend KIND is --backends KIND; --chain, --chain-policy,\n"
		"                     --delta and --free-mode shape the zsmalloc pool; --deferred\n"
		"                     frees through the backend's deferred path)\n");
	opt_flags_help(f, flags);
}

/* Options -> o.  0, 1 after --help, or -1 after a message. */
static int parse(int argc, char **argv, struct opts *o)
{
	memset(o, 0, sizeof(*o));
	pool_opts_init(&o->po);
	o->rounds = 4;
	o->repeat = 2;
	o->seed = 1;
	struct compare_nums n = { .max_mib = 64, .mix_n = 100000, .testmod_n = 64 };
	const struct opt_hook files = { add_files, o }, heap = { set_heap, &o->heap_file },
			      pid = { opt_pid, &o->pid };
	const struct opt_flag flags[] = COMPARE_FLAGS(o, &n, (void *)&files, (void *)&heap,
						      (void *)&pid);
	int rc = opt_parse("compare", argc, argv, flags, COMPARE_OPTS, &o->po, usage, NULL);
	if (rc)
		return rc == 1 ? 1 : -1;
	o->max_mib = (size_t)n.max_mib;
	o->mix_n = (size_t)n.mix_n;
	o->testmod_n = (size_t)n.testmod_n;
	if (o->po.npage_sizes > OPT_PAGE_SIZES_MAX) {
		fprintf(stderr, "zs compare: --page-size: at most %d\n", OPT_PAGE_SIZES_MAX);
		return -1;
	}
	for (unsigned i = 0; i < o->po.npage_sizes; i++)
		o->page_sizes[o->nps++] = o->po.page_sizes[i];
	int backend_set = !!(o->po.set & OPT_BACKEND);
	if (optind < argc) {
		fprintf(stderr, "zs compare: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	if (backend_set) {
		if (o->backends) {
			fprintf(stderr, "zs compare: give --backend or --backends, not both\n");
			return -1;
		}
		o->backends = o->po.backend;
	}
	if (o->heap_file && o->pid) {
		fprintf(stderr, "zs compare: give --heap or --pid, not both\n");
		return -1;
	}
	if (!o->nps) {
		o->page_sizes[o->nps++] = ZS_PAGE_SIZE_DEFAULT;
		o->page_sizes[o->nps++] = 16384;
	}
	static const char *const workloads[] = { "files", "heap", "testmod", "mix", NULL };
	if (!list_known(o->workloads, workloads, "workload") ||
	    !list_known(o->backends, zs_backend_kinds(), "backend"))
		return -1;
	/* An input for a workload that does not run was ignored without a word. */
	if (o->nfiles && !in_list(o->workloads, "files")) {
		fprintf(stderr, "zs compare: --files is the files workload's input, and --workloads "
				"leaves it out\n");
		return -1;
	}
	if ((o->heap_file || o->pid) && !in_list(o->workloads, "heap")) {
		fprintf(stderr, "zs compare: %s is the heap workload's input, and --workloads "
				"leaves it out\n", o->heap_file ? "--heap" : "--pid");
		return -1;
	}
	static struct pool_opts po_copy; /* outlives parse(): the forked runs read it */
	po_copy = o->po;
	g_po = &po_copy;
	return 0;
}

/* zram stores a page raw once it compresses to zsmalloc's huge class size. */
static size_t huge_threshold(size_t ps)
{
	struct zs_backend_config c;
	zs_backend_config_init(&c);
	if (g_po)
		c.zs = g_po->cfg;
	c.page_size = ps;
	struct zs_backend *b;
	zs_backend_create(&c, &b, NULL, 0);
	size_t huge = b ? zs_backend_huge_class_size(b) : ps;
	zs_backend_destroy(b);
	return huge;
}

/* What every measurement shares: the selected kinds and the raw pages, read once. */
struct inputs {
	const char *kinds[8];
	int nk;
	struct raw files, heap;
	unsigned char *noise;   /* bytes the synthetic workloads' blobs point into */
};

static void inputs_free(struct inputs *in)
{
	zs_pageset_free(&in->files.ps);
	zs_pageset_free(&in->heap.ps);
	free(in->noise);
}

/* Kinds and raw pages (each page size compresses them its own way).  0 or 2. */
static int setup(const struct opts *o, struct inputs *in)
{
	memset(in, 0, sizeof(*in));
	in->files.what = "files";
	in->heap.what = "heap";
	for (const char *const *k = zs_backend_kinds(); *k && in->nk < 8; k++)
		if (in_list(o->backends, *k))
			in->kinds[in->nk++] = *k;
	if (!in->nk) {
		fprintf(stderr, "zs compare: no backend selected\n");
		return 2;
	}
	size_t cap = o->max_mib << 20;
	struct raw *files = &in->files, *heap = &in->heap;
	if (in_list(o->workloads, "files")) {
		if (raw_reserve(files, cap))
			return 2;
		if (o->nfiles) {
			for (int i = 0; i < o->nfiles; i++) {
				zs_pageset_add(&files->ps, o->files[i], cap, RAW_FILES);
			}
		} else {
			zs_pageset_add(&files->ps, "/usr/lib/x86_64-linux-gnu", cap / 2, RAW_FILES);
			zs_pageset_add(&files->ps, "/usr/include", cap - files->ps.len, RAW_FILES);
		}
		files->what = o->nfiles ? "given files" : "/usr/lib/x86_64-linux-gnu + /usr/include";
		if (o->nfiles && files->ps.len < 4096) {
			fprintf(stderr, "zs compare: --files: the given paths hold %zu bytes, not one "
					"whole page (regular files, one directory level)\n", files->ps.len);
			return 2;
		}
	}
	if (in_list(o->workloads, "heap")) {
		if (raw_reserve(heap, cap))
			return 2;
		int err;
		if (o->heap_file) {
			zs_pageset_add(&heap->ps, o->heap_file, cap, RAW_FILES);
			heap->what = o->heap_file;
			err = heap->ps.len ? 0 : -ENOENT;
		} else if (o->pid) {
			err = raw_add_process(heap, o->pid);
			heap->what = "process anon memory";
		} else {
			err = raw_add_python_heap(heap);
			heap->what = "python3 heap";
		}
		if ((o->heap_file || o->pid) && (err || heap->ps.len < 4096)) {
			fprintf(stderr, "zs compare: %s %s: %s\n", o->heap_file ? "--heap" : "--pid",
				o->heap_file ? o->heap_file : "", err ? strerror(-err)
								      : "less than one page of data");
			return 2;
		}
		if (err || !heap->ps.len)
			fprintf(stderr, "zs compare: heap workload unavailable (%s), skipped\n",
				strerror(err ? -err : ENOENT));
	}
	in->noise = malloc(65536 + 64);
	if (!in->noise)
		return 2;
	uint64_t ns = o->seed ^ 0x5eed;
	for (size_t i = 0; i < 65536 + 64; i++)
		in->noise[i] = (unsigned char)tool_rand64(&ns);
	return 0;
}

static const char *const wl_names[] = { "files", "heap", "testmod", "mix" };

/* Workload wi at page size ps; -ENOENT when it has no data there. */
static int build_workload(const struct opts *o, const struct inputs *in, int wi, size_t ps,
			  size_t huge, struct workload *w)
{
	memset(w, 0, sizeof(*w));
	w->name = wl_names[wi];
	if (wi == 0)
		return in->files.ps.len >= ps ? wl_from_pages(w, &in->files, ps, huge) : -ENOENT;
	if (wi == 1)
		return in->heap.ps.len >= ps ? wl_from_pages(w, &in->heap, ps, huge) : -ENOENT;
	if (wi == 2)
		return wl_testmod(w, ps, o->testmod_n, in->noise);
	return wl_mix(w, ps, o->mix_n, o->seed, in->noise);
}

/* One kind on one workload, --repeat times: same seed, same memory; the
 * repeats only steady the timings on a busy box (best speed kept). */
static void run_kind(const struct opts *o, const char *kind, size_t ps, const struct workload *w,
		     uint64_t seed, struct result *res)
{
	if (run_isolated(kind, ps, w, o->rounds, seed, res))
		memset(res, 0, sizeof(*res));
	for (int r = 1; r < o->repeat && res->ok; r++) {
		struct result again;
		if (run_isolated(kind, ps, w, o->rounds, seed, &again) || !again.ok)
			continue;
		res->errors += again.errors;
		if (again.store_ops > res->store_ops)
			res->store_ops = again.store_ops;
		if (again.restore_ops > res->restore_ops)
			res->restore_ops = again.restore_ops;
		if (again.load_ops > res->load_ops)
			res->load_ops = again.load_ops;
		if (again.free_ops > res->free_ops)
			res->free_ops = again.free_ops;
	}
}

int cmd_compare(int argc, char **argv)
{
	struct opts o;
	int pr = parse(argc, argv, &o);
	if (pr)
		return pr > 0 ? 0 : 2;
	struct inputs in;
	if (setup(&o, &in)) {
		inputs_free(&in);
		return 2;
	}

	int measured = 0;
	double t_start = tool_now();
	struct json js;
	if (o.json) {
		json_init(&js, stdout, 2);
		json_obj(&js);
		json_kuint(&js, "seed", o.seed);
		json_kint(&js, "rounds", o.rounds);
		json_kint(&js, "repeat", o.repeat);
		json_karr(&js, "results");
	} else {
		print_header();
	}
	for (int p = 0; p < o.nps; p++) {
		size_t ps = o.page_sizes[p];
		size_t huge = huge_threshold(ps);
		for (int wi = 0; wi < 4; wi++) {
			const char *wl = wl_names[wi];
			if (!in_list(o.workloads, wl))
				continue;
			struct workload w;
			if (build_workload(&o, &in, wi, ps, huge, &w) || !w.n) {
				wl_free(&w);
				continue;
			}
			measured++;
			struct result res[8];
			for (int k = 0; k < in.nk; k++) {
				run_kind(&o, in.kinds[k], ps, &w, o.seed + (uint64_t)p, &res[k]);
				if (o.json)
					print_json(&js, wl, &w, ps, in.kinds[k], &res[k]);
				else
					print_row(wl, ps, in.kinds[k], &res[k]);
			}
			if (!o.json) {
				if (wi < 2)
					printf("  (%s: %zu pages in, %zu same-filled not stored, %zu stored raw)\n",
					       w.source, w.pages_in, w.same_filled, w.raw_stored);
				print_summary(wl, ps, in.kinds, res, in.nk);
			}
			wl_free(&w);
		}
	}
	if (o.json) {
		json_arr_end(&js);
		json_kfixed(&js, "seconds", tool_now() - t_start, 1);
		json_obj_end(&js);
		json_done(&js);
	} else {
		printf("(%.1f s; memory = pool pages x page size for zsmalloc/zblock, RSS growth for malloc kinds)\n",
		       tool_now() - t_start);
	}
	inputs_free(&in);
	if (!measured) {
		fprintf(stderr, "zs compare: nothing was measured (no workload had data at these page "
				"sizes)\n");
		return 2;
	}
	return 0;
}
