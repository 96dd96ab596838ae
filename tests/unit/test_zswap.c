/*
 * The zswap front end (zs/zswap.h) against a shadow model: seeded random
 * programs of store / store_compressed (with data, size-only, garbage) /
 * load / invalidate / writeback / shrink / group limits / pool limits /
 * injected backing-file errors / compaction, on zsmalloc (several pool
 * policies, deferred free, 8 KiB pages) and zblock.  After every operation
 * every counter, every group's counters and the loaded bytes are compared
 * with the model.  The model's pool is a plain zs_pool (zsmalloc configs)
 * or a backend of the same kind, fed the same sizes in the same order, so
 * pool_total_size checks "zswap over zsmalloc = zsmalloc, page for page".
 * Before that, directed cases for each rule (zero bypass, no same-filled
 * path, raw pages, hysteresis, second chance, groups, configs).
 * Seeded: ZS_SEED=N reruns a failure; ZS_ZSWAP_OPS=N changes the length.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "testutil.h"
#include "zs/compress.h"
#include "zs/zswap.h"
#include "zs/harness.h"
#include "must.h"
#include "backend/backend_internal.h" /* swaps a backend's ops to inject faults */

static char path[64];

/* ---- page generators ---- */

enum { PG_ZERO, PG_SAME, PG_TEXT, PG_MIXED, PG_RANDOM, PG_NR };

static void gen_page(unsigned char *p, size_t ps, int kind, uint64_t *seed)
{
	switch (kind) {
	case PG_ZERO:
		memset(p, 0, ps);
		break;
	case PG_SAME:
		memset(p, 0xab, ps);
		break;
	case PG_TEXT:
		for (size_t k = 0; k < ps; k += 32) {
			char line[80];

			snprintf(line, sizeof(line), "line %05u of text, value %05u........",
				 (unsigned)(k / 32 % 100000), (unsigned)(tu_rand(seed) % 100000));
			memcpy(p + k, line, 32);
		}
		break;
	case PG_MIXED: {
		/* A random share of random bytes: compressed sizes spread over every class. */
		size_t cut = (size_t)(tu_rand(seed) % ps);

		memset(p, 'x', ps);
		for (size_t k = 0; k < cut; k++)
			p[k] = (unsigned char)tu_rand(seed);
		break;
	}
	default:
		for (size_t k = 0; k < ps; k += 8) {
			uint64_t r = tu_rand(seed);

			memcpy(p + k, &r, 8);
		}
	}
}

/* ---- directed cases ---- */

static struct zs_zswap *mk(size_t ps, const char *kind, uint64_t total_ram, unsigned maxpct,
			   const char *backing)
{
	struct zs_zswap_config cfg;
	struct zs_zswap *z;
	char err[200];
	int rc;

	zs_zswap_config_init(&cfg);
	cfg.page_size = ps;
	cfg.backend.kind = kind;
	cfg.total_ram = total_ram;
	cfg.max_pool_percent = maxpct;
	cfg.backing_path = backing;
	rc = zs_zswap_create(&cfg, &z, err, sizeof(err));
	if (rc)
		fprintf(stderr, "create: %d %s\n", rc, err);
	REQUIRE(rc == 0);
	CHECK(err[0] == 0);
	return z;
}

static void test_config(void)
{
	struct zs_zswap_config cfg;
	struct zs_zswap *z = (struct zs_zswap *)1;
	char err[200];

	zs_zswap_config_init(&cfg);
	CHECK_EQ(cfg.page_size, 4096);
	CHECK(!strcmp(cfg.comp, "lzo"));
	CHECK_EQ(cfg.max_pool_percent, 20);
	CHECK_EQ(cfg.accept_threshold_percent, 90);
	CHECK_EQ(cfg.shrinker_enabled, 0);
	CHECK(cfg.backing_path == NULL);

	cfg.page_size = 5000;
	CHECK_EQ(zs_zswap_create(&cfg, &z, err, sizeof(err)), -EINVAL);
	CHECK(z == NULL);
	CHECK(strstr(err, "page_size") != NULL);
	zs_zswap_config_init(&cfg);
	cfg.max_pool_percent = 101;
	CHECK_EQ(zs_zswap_create(&cfg, &z, err, sizeof(err)), -EINVAL);
	zs_zswap_config_init(&cfg);
	cfg.accept_threshold_percent = 101;
	CHECK_EQ(zs_zswap_create(&cfg, &z, err, sizeof(err)), -EINVAL);
	zs_zswap_config_init(&cfg);
	cfg.reserved[3] = 1;
	CHECK_EQ(zs_zswap_create(&cfg, &z, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "reserved") != NULL);
	zs_zswap_config_init(&cfg);
	cfg.deferred_free = 2;
	CHECK_EQ(zs_zswap_create(&cfg, &z, NULL, 0), -EINVAL);
	zs_zswap_config_init(&cfg);
	cfg.shrinker_enabled = -1;
	CHECK_EQ(zs_zswap_create(&cfg, &z, err, sizeof(err)), -EINVAL);
	zs_zswap_config_init(&cfg);
	cfg.total_ram = 100;
	CHECK_EQ(zs_zswap_create(&cfg, &z, err, sizeof(err)), -EINVAL);
	zs_zswap_config_init(&cfg);
	cfg.comp = "nope";
	CHECK_EQ(zs_zswap_create(&cfg, &z, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "nope") != NULL);
	zs_zswap_config_init(&cfg);
	cfg.comp = "lzo";
	cfg.comp_level = 3;
	CHECK_EQ(zs_zswap_create(&cfg, &z, err, sizeof(err)), -EINVAL);
	zs_zswap_config_init(&cfg);
	cfg.backend.kind = "nope";
	CHECK_EQ(zs_zswap_create(&cfg, &z, err, sizeof(err)), -EINVAL);
	CHECK(err[0] != 0);
	zs_zswap_config_init(&cfg);
	cfg.backing_path = "/tmp";
	CHECK_EQ(zs_zswap_create(&cfg, &z, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "directory") != NULL);
	cfg.backing_path = "/dev/null";
	CHECK_EQ(zs_zswap_create(&cfg, &z, err, sizeof(err)), -EINVAL);
	cfg.backing_path = "/nonexistent/zswap-file";
	CHECK_EQ(zs_zswap_create(&cfg, &z, err, sizeof(err)), -ENOENT);
	CHECK_EQ(zs_zswap_create(&cfg, NULL, err, sizeof(err)), -EINVAL);

	/* NULL config: defaults; zstd with a level; 64 KiB pages. */
	CHECK_EQ(zs_zswap_create(NULL, &z, NULL, 0), 0);
	CHECK_EQ(zs_zswap_page_size(z), 4096);
	CHECK(!strcmp(zs_zswap_comp_name(z), "lzo"));
	CHECK(zs_zswap_backend(z) != NULL);
	zs_zswap_destroy(z);
	zs_zswap_config_init(&cfg);
	cfg.comp = "zstd";
	cfg.comp_level = 5;
	cfg.page_size = 65536;
	CHECK_EQ(zs_zswap_create(&cfg, &z, err, sizeof(err)), 0);
	CHECK(strstr(zs_zswap_comp_name(z), "zstd") != NULL);
	zs_zswap_destroy(z);
	zs_zswap_destroy(NULL);
}

/*
 * zswap.h's promises about bad input, one check each: every config range at
 * both ends (just inside accepted, just outside refused), an argument
 * refused with -EINVAL leaves what the offset held, a failed load zeroes
 * the page (-EIO) or leaves it alone (-ENOENT), the NULL and shrinker-off
 * answers, and the backing file's refusals shared with zram.
 */
static int creates(struct zs_zswap_config *cfg)
{
	struct zs_zswap *z = (struct zs_zswap *)1;
	char err[200];
	int rc = zs_zswap_create(cfg, &z, err, sizeof(err));

	CHECK(rc == 0 ? z != NULL && err[0] == 0 : z == NULL && err[0] != 0);
	zs_zswap_destroy(rc == 0 ? z : NULL);
	return rc;
}

/* A backend malloc that takes no page-size object (as zram.h's -ENOSPC case). */
static const struct zs_backend_ops *zs_real_ops;

static unsigned long no_page_malloc(struct zs_backend *b, size_t size)
{
	if (size >= b->page_size)
		return (unsigned long)(long)-ENOSPC;
	return zs_real_ops->malloc(b, size);
}

static int refused_write(struct zs_backend *b, unsigned long h, const void *src, size_t len)
{
	(void)b, (void)h, (void)src, (void)len;
	return -EINVAL;
}

/* Every one of n bytes is c (a refused load left the page alone, or zeroed it). */
static int all_bytes(const unsigned char *b, size_t n, unsigned char c)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != c)
			return 0;
	return 1;
}

static void test_promises(uint64_t *seed)
{
	const size_t ps = 4096;
	unsigned char page[4096], other[4096], back[4096];
	struct zs_zswap_config cfg;
	struct zs_zswap_group_stats gs;
	struct zs_zswap *z;
	char p[96];

	/* total_ram: 0 (physical RAM) or page_size..2^60. */
	static const struct { uint64_t v; int rc; } ram[] = {
		{ 0, 0 }, { 4095, -EINVAL }, { 4096, 0 }, { (uint64_t)1 << 60, 0 },
		{ ((uint64_t)1 << 60) + 1, -EINVAL }, { UINT64_MAX, -EINVAL },
	};
	for (size_t i = 0; i < sizeof(ram) / sizeof(ram[0]); i++) {
		zs_zswap_config_init(&cfg);
		cfg.total_ram = ram[i].v;
		CHECK_EQ(creates(&cfg), ram[i].rc);
	}
	/* total_ram's lower end follows page_size. */
	zs_zswap_config_init(&cfg);
	cfg.page_size = 65536;
	cfg.total_ram = 65535;
	CHECK_EQ(creates(&cfg), -EINVAL);
	cfg.total_ram = 65536;
	CHECK_EQ(creates(&cfg), 0);
	/* page_size: 0 -> 4096, else a power of two in 4096..65536. */
	static const struct { size_t v; int rc; } psz[] = {
		{ 0, 0 }, { 2048, -EINVAL }, { 4096, 0 }, { 12288, -EINVAL }, { 65536, 0 },
		{ 131072, -EINVAL },
	};
	for (size_t i = 0; i < sizeof(psz) / sizeof(psz[0]); i++) {
		zs_zswap_config_init(&cfg);
		cfg.page_size = psz[i].v;
		CHECK_EQ(creates(&cfg), psz[i].rc);
	}
	/* The percentages: 0..100 each; the flags 0 or 1. */
	static const unsigned pct[] = { 0, 100 };
	for (size_t i = 0; i < 2; i++) {
		zs_zswap_config_init(&cfg);
		cfg.max_pool_percent = pct[i];
		CHECK_EQ(creates(&cfg), 0);
		zs_zswap_config_init(&cfg);
		cfg.accept_threshold_percent = pct[i];
		CHECK_EQ(creates(&cfg), 0);
	}
	zs_zswap_config_init(&cfg);
	cfg.max_pool_percent = ~0u;
	CHECK_EQ(creates(&cfg), -EINVAL);
	zs_zswap_config_init(&cfg);
	cfg.shrinker_enabled = 2;
	CHECK_EQ(creates(&cfg), -EINVAL);
	cfg.shrinker_enabled = 1;
	CHECK_EQ(creates(&cfg), 0);
	zs_zswap_config_init(&cfg);
	cfg.deferred_free = -1;
	CHECK_EQ(creates(&cfg), -EINVAL);
	cfg.deferred_free = 1;
	CHECK_EQ(creates(&cfg), 0);
	/* struct_size: 0 (this library's) or sizeof; anything else refused. */
	zs_zswap_config_init(&cfg);
	cfg.struct_size = 0;
	CHECK_EQ(creates(&cfg), 0);
	cfg.struct_size = sizeof(cfg) - 8;
	CHECK_EQ(creates(&cfg), -EINVAL);

	/* Backing files are refused as zram's are: a FIFO (never opened) and no write bit. */
	snprintf(p, sizeof(p), "%s.fifo", path);
	unlink(p);
	REQUIRE(mkfifo(p, 0600) == 0);
	zs_zswap_config_init(&cfg);
	cfg.backing_path = p;
	CHECK_EQ(creates(&cfg), -EINVAL);
	unlink(p);
	snprintf(p, sizeof(p), "%s.ro", path);
	int fd = open(p, O_CREAT | O_RDWR | O_TRUNC, 0400);
	REQUIRE(fd >= 0);
	close(fd);
	CHECK_EQ(creates(&cfg), -EACCES);   /* also for root, who could open it */
	unlink(p);

	/* Run-time setters: both ends of each range. */
	z = mk(ps, NULL, 0, 20, NULL);
	CHECK_EQ(zs_zswap_set_pool_limit(z, 100, 100), 0);
	CHECK_EQ(zs_zswap_set_pool_limit(z, 0, 0), 0);
	CHECK_EQ(zs_zswap_set_pool_limit(z, 50, 101), -EINVAL);
	CHECK_EQ(zs_zswap_set_pool_limit(z, 101, 101), -EINVAL);
	CHECK_EQ(zs_zswap_set_pool_limit(NULL, 20, 90), -EINVAL);
	CHECK_EQ(zs_zswap_set_pool_limit(z, 20, 90), 0);
	CHECK_EQ(zs_zswap_group_set(z, ZS_ZSWAP_MAX_GROUPS - 1, ZS_ZSWAP_NO_LIMIT, 0), 0);
	CHECK_EQ(zs_zswap_group_set(z, 1, ZS_ZSWAP_NO_LIMIT, -1), -EINVAL);
	CHECK_EQ(zs_zswap_group_stats(z, ZS_ZSWAP_MAX_GROUPS - 1, &gs, sizeof(gs)), 0);
	CHECK_EQ(gs.writeback, 0);
	CHECK_EQ(zs_zswap_group_stats(z, 1, &gs, sizeof(gs)), 0);
	CHECK_EQ(gs.writeback, 1);   /* the refused set changed nothing */
	CHECK_EQ(zs_zswap_group_stats(z, 0, NULL, sizeof(struct zs_zswap_group_stats)), -EINVAL);
	CHECK_EQ(zs_zswap_writeback(NULL, 1), -EINVAL);
	CHECK_EQ(zs_zswap_shrink(NULL, 1), -EINVAL);
	/* A NULL zswap is -EINVAL (or 0, or nothing, where a call returns no error). */
	CHECK_EQ(zs_zswap_load(NULL, 0, back), -EINVAL);
	CHECK_EQ(zs_zswap_invalidate(NULL, 0), -EINVAL);
	CHECK_EQ(zs_zswap_store_compressed(NULL, 0, NULL, 10, 0), -EINVAL);
	CHECK_EQ(zs_zswap_group_set(NULL, 0, 0, 1), -EINVAL);
	CHECK_EQ(zs_zswap_group_stats(NULL, 0, &gs, sizeof(gs)), -EINVAL);
	CHECK_EQ(zs_zswap_shrink_count(NULL), 0);
	CHECK_EQ(zs_zswap_compact(NULL), 0);
	zs_zswap_flush(NULL);
	struct zs_zswap_stats nst;
	memset(&nst, 0x55, sizeof(nst));
	zs_zswap_get_stats(NULL, &nst, sizeof(nst));
	CHECK_EQ(nst.zswpout + nst.stored_pages + nst.pool_pages, 0);
	zs_zswap_get_stats(z, NULL, sizeof(struct zs_zswap_stats));
	CHECK_EQ(zs_zswap_page_size(NULL), 0);
	CHECK(zs_zswap_comp_name(NULL) != NULL && !zs_zswap_comp_name(NULL)[0]);
	CHECK(zs_zswap_backend(NULL) == NULL);

	/* A refused argument leaves what the offset held. */
	gen_page(page, ps, PG_TEXT, seed);
	CHECK_EQ(zs_zswap_store(z, 5, page, 0), 0);
	gen_page(other, ps, PG_TEXT, seed);
	CHECK_EQ(zs_zswap_store(z, 5, other, ZS_ZSWAP_MAX_GROUPS), -EINVAL);
	CHECK_EQ(zs_zswap_store(z, 5, NULL, 0), -EINVAL);
	CHECK_EQ(zs_zswap_store_compressed(z, 5, other, 1u << 20, 0), -EINVAL);
	CHECK_EQ(zs_zswap_store_compressed(z, 5, other, ps, 0), -EINVAL); /* not a page */
	CHECK_EQ(zs_zswap_store_compressed(z, 5, other, 100, ZS_ZSWAP_MAX_GROUPS), -EINVAL);
	/* -ENOENT leaves page alone; the entry survives the refusals above. */
	memset(back, 0x11, ps);
	CHECK_EQ(zs_zswap_load(z, 6, back), -ENOENT);
	CHECK(all_bytes(back, ps, 0x11));
	CHECK_EQ(zs_zswap_load(z, 5, back), 0);
	CHECK(!memcmp(back, page, ps));
	/* -EIO (bytes that do not decompress): page zeroed, the offset keeps its entry. */
	memset(other, 0x5a, 100);
	CHECK_EQ(zs_zswap_store_compressed(z, 7, other, 100, 0), 0);
	memset(back, 0x11, ps);
	CHECK_EQ(zs_zswap_load(z, 7, back), -EIO);
	CHECK(all_bytes(back, ps, 0));
	CHECK_EQ(zs_zswap_load(z, 7, back), -EIO);
	CHECK_EQ(zs_zswap_invalidate(z, 7), 0);
	CHECK_EQ(zs_zswap_invalidate(z, 7), -ENOENT);
	/* clen up to zs_comp_bound of a page is taken (size-only: a raw entry), one more not. */
	struct zs_comp *c;
	REQUIRE(zs_comp_create(&(struct zs_comp_config){ .name = zs_zswap_comp_name(z), .max_src = ps }, &c, NULL, 0) == 0);
	size_t bound = zs_comp_bound(c, ps);
	zs_comp_destroy(c);
	CHECK_EQ(zs_zswap_store_compressed(z, 8, NULL, bound, 0), 0);
	CHECK_EQ(zs_zswap_store_compressed(z, 8, NULL, bound + 1, 0), -EINVAL);
	CHECK_EQ(zs_zswap_load(z, 8, back), ZS_ZSWAP_NODATA);   /* the refusal kept the entry */
	zs_zswap_destroy(z);

	/*
	 * The backend's refusals: one that takes no page-size object (here zsmalloc
	 * whose malloc is wrapped: no built-in backend refuses a page) gives -ENOSPC,
	 * passed on as reject_compress_poor; the backend's page limit is -ENOMEM
	 * (reject_alloc_fail).  Either drops what the offset held.
	 */
	zs_zswap_config_init(&cfg);
	cfg.backend.max_pages = 32;
	char err[200];
	REQUIRE(zs_zswap_create(&cfg, &z, err, sizeof(err)) == 0);
	gen_page(page, ps, PG_TEXT, seed);
	CHECK_EQ(zs_zswap_store(z, 1, page, 0), 0);
	struct zs_backend *b = zs_zswap_backend(z);
	static struct zs_backend_ops small;
	zs_real_ops = b->ops;
	small = *b->ops;
	small.malloc = no_page_malloc;
	b->ops = &small;
	gen_page(other, ps, PG_RANDOM, seed);
	CHECK_EQ(zs_zswap_store(z, 1, other, 0), -ENOSPC);
	CHECK_EQ(zs_zswap_load(z, 1, back), -ENOENT);
	/* A backend that refuses to write a handle it gave out: -EIO, the offset dropped. */
	CHECK_EQ(zs_zswap_store(z, 2, page, 0), 0);
	small.write = refused_write;
	CHECK_EQ(zs_zswap_store(z, 2, page, 0), -EIO);
	b->ops = zs_real_ops;
	CHECK_EQ(zs_zswap_load(z, 2, back), -ENOENT);
	struct zs_zswap_stats st;
	zs_zswap_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.reject_compress_poor, 1);
	CHECK_EQ(st.reject_alloc_fail, 0);
	int rc = 0;
	uint64_t off = 10;
	for (; off < 10000 && (rc = zs_zswap_store(z, off, page, 0)) == 0; off++)
		gen_page(page, ps, PG_TEXT, seed);
	CHECK_EQ(rc, -ENOMEM);
	CHECK_EQ(zs_zswap_load(z, off, back), -ENOENT);
	zs_zswap_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.reject_alloc_fail, 1);
	CHECK_EQ(st.reject_compress_poor, 1);
	CHECK(st.pool_pages <= 32);
	zs_zswap_destroy(z);

	/*
	 * An offset whose file position is past what the file system holds (ext4:
	 * 16 TiB; offset 2^40 - 1 is 4 PiB in): its writeback fails, counts
	 * reject_reclaim_fail, and the entry stays.
	 */
	struct statfs sfs;
	if (statfs(path, &sfs) == 0 && sfs.f_type == 0xEF53) {
		z = mk(ps, NULL, 0, 20, path);
		gen_page(page, ps, PG_TEXT, seed);
		CHECK_EQ(zs_zswap_store(z, ZS_ZSWAP_MAX_OFFSET - 1, page, 0), 0);
		CHECK_EQ(zs_zswap_writeback(z, 1), 0);   /* second chance: it was referenced */
		CHECK_EQ(zs_zswap_writeback(z, 1), 0);   /* the write fails */
		zs_zswap_get_stats(z, &st, sizeof(st));
		CHECK(st.reject_reclaim_fail >= 1);
		CHECK_EQ(st.written_back_pages, 0);
		CHECK_EQ(st.stored_pages, 1);
		CHECK_EQ(zs_zswap_load(z, ZS_ZSWAP_MAX_OFFSET - 1, back), 0);
		CHECK(!memcmp(back, page, ps));
		zs_zswap_destroy(z);
	} else {
		printf("offset past the file system's size: skipped (%s is not on ext4)\n", path);
	}

	/* With a backing file and the shrinker off: shrink writes nothing, count is 0. */
	z = mk(ps, NULL, 0, 20, path);
	gen_page(page, ps, PG_TEXT, seed);
	for (uint64_t off = 0; off < 8; off++)
		CHECK_EQ(zs_zswap_store(z, off, page, 0), 0);
	CHECK_EQ(zs_zswap_shrink_count(z), 0);
	CHECK_EQ(zs_zswap_shrink(z, 64), 0);
	zs_zswap_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.written_back_pages, 0);
	CHECK_EQ(st.stored_pages, 8);
	zs_zswap_destroy(z);
}

static void test_rules(uint64_t *seed)
{
	const size_t ps = 4096;
	unsigned char page[4096], back[4096];
	struct zs_zswap_stats st;
	struct zs_zswap_group_stats gs;
	struct zs_zswap *z = mk(ps, NULL, 0, 20, NULL);

	/* Bad arguments change nothing. */
	gen_page(page, ps, PG_TEXT, seed);
	CHECK_EQ(zs_zswap_store(z, ZS_ZSWAP_MAX_OFFSET, page, 0), -EINVAL);
	CHECK_EQ(zs_zswap_store(z, 0, page, ZS_ZSWAP_MAX_GROUPS), -EINVAL);
	CHECK_EQ(zs_zswap_store(z, 0, NULL, 0), -EINVAL);
	CHECK_EQ(zs_zswap_store(NULL, 0, page, 0), -EINVAL);
	CHECK_EQ(zs_zswap_store_compressed(z, 0, page, 1u << 20, 0), -EINVAL);
	CHECK_EQ(zs_zswap_load(z, ZS_ZSWAP_MAX_OFFSET, back), -EINVAL);
	CHECK_EQ(zs_zswap_load(z, 0, NULL), -EINVAL);
	CHECK_EQ(zs_zswap_invalidate(z, ZS_ZSWAP_MAX_OFFSET), -EINVAL);
	CHECK_EQ(zs_zswap_group_set(z, ZS_ZSWAP_MAX_GROUPS, 0, 1), -EINVAL);
	CHECK_EQ(zs_zswap_group_set(z, 1, 0, 2), -EINVAL);
	CHECK_EQ(zs_zswap_group_stats(z, ZS_ZSWAP_MAX_GROUPS, &gs, sizeof(gs)), -EINVAL);
	CHECK_EQ(zs_zswap_set_pool_limit(z, 101, 50), -EINVAL);
	CHECK_EQ(zs_zswap_writeback(z, 1), -EOPNOTSUPP);
	CHECK_EQ(zs_zswap_shrink(z, 1), -EOPNOTSUPP);
	CHECK_EQ(zs_zswap_shrink_count(z), 0);
	CHECK_EQ(zs_zswap_load(z, 0, back), -ENOENT);
	CHECK_EQ(zs_zswap_invalidate(z, 0), -ENOENT);

	/* Zero bypass: marked, not stored; a load gives zeros once. */
	gen_page(page, ps, PG_ZERO, seed);
	CHECK_EQ(zs_zswap_store(z, 7, page, 0), ZS_ZSWAP_ZERO);
	zs_zswap_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.swpout_zero, 1);
	CHECK_EQ(st.stored_pages, 0);
	CHECK_EQ(st.zero_pages, 1);
	CHECK_EQ(st.pool_total_size, 0);
	memset(back, 1, ps);
	CHECK_EQ(zs_zswap_load(z, 7, back), ZS_ZSWAP_ZERO);
	CHECK(!memcmp(back, page, ps));
	CHECK_EQ(zs_zswap_load(z, 7, back), -ENOENT);
	zs_zswap_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.swpin_zero, 1);
	CHECK_EQ(st.zero_pages, 0);
	CHECK_EQ(zs_zswap_store_compressed(z, 8, NULL, 0, 0), ZS_ZSWAP_ZERO);
	CHECK_EQ(zs_zswap_invalidate(z, 8), 0);

	/* No same-filled path: 0xAB pages are compressed and stored. */
	gen_page(page, ps, PG_SAME, seed);
	CHECK_EQ(zs_zswap_store(z, 9, page, 0), 0);
	zs_zswap_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.stored_pages, 1);
	CHECK_EQ(st.zswpout, 1);
	CHECK(st.stored_bytes > 0 && st.stored_bytes < 200);
	CHECK_EQ(st.pool_total_size, ps);
	CHECK_EQ(st.meminfo_zswap, ps);
	CHECK_EQ(st.meminfo_zswapped, ps);
	CHECK_EQ(zs_zswap_load(z, 9, back), 0);
	CHECK(!memcmp(back, page, ps));
	CHECK_EQ(zs_zswap_load(z, 9, back), -ENOENT);

	/* Incompressible: raw page-size object. */
	gen_page(page, ps, PG_RANDOM, seed);
	CHECK_EQ(zs_zswap_store(z, 10, page, 0), 0);
	zs_zswap_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.stored_incompressible_pages, 1);
	CHECK_EQ(st.stored_bytes, ps);
	/* A stale entry is replaced (the old one freed). */
	gen_page(page, ps, PG_TEXT, seed);
	CHECK_EQ(zs_zswap_store(z, 10, page, 0), 0);
	zs_zswap_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.stored_pages, 1);
	CHECK_EQ(st.stored_incompressible_pages, 0);
	CHECK_EQ(zs_zswap_load(z, 10, back), 0);
	CHECK(!memcmp(back, page, ps));
	zs_zswap_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.zswpin, 2);
	CHECK_EQ(st.stored_pages, 0);
	CHECK_EQ(st.pool_total_size, 0);

	/* Groups: writeback off rejects incompressible pages; max 0 forbids. */
	CHECK_EQ(zs_zswap_group_set(z, 3, ZS_ZSWAP_NO_LIMIT, 0), 0);
	gen_page(page, ps, PG_RANDOM, seed);
	CHECK_EQ(zs_zswap_store(z, 11, page, 3), -E2BIG);
	zs_zswap_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.reject_compress_poor, 1);
	gen_page(page, ps, PG_TEXT, seed);
	CHECK_EQ(zs_zswap_store(z, 11, page, 3), 0);
	CHECK_EQ(zs_zswap_group_stats(z, 3, &gs, sizeof(gs)), 0);
	CHECK_EQ(gs.zswpout, 1);
	CHECK_EQ(gs.zswapped, ps);
	CHECK(gs.zswap > 0 && gs.zswap < ps);
	CHECK_EQ(gs.writeback, 0);
	CHECK_EQ(zs_zswap_group_set(z, 3, 0, 1), 0);
	/* Rejected: the stale entry at 11 is dropped too (the page goes elsewhere). */
	CHECK_EQ(zs_zswap_store(z, 11, page, 3), -EDQUOT);
	CHECK_EQ(zs_zswap_load(z, 11, back), -ENOENT);
	CHECK_EQ(zs_zswap_group_stats(z, 3, &gs, sizeof(gs)), 0);
	CHECK_EQ(gs.zswap, 0);
	CHECK_EQ(gs.max_bytes, 0);
	/* A limit is checked before storing: one store may go over. */
	CHECK_EQ(zs_zswap_group_set(z, 3, 1, 1), 0);
	CHECK_EQ(zs_zswap_store(z, 12, page, 3), 0);
	CHECK_EQ(zs_zswap_store(z, 13, page, 3), -EDQUOT);
	CHECK_EQ(zs_zswap_invalidate(z, 12), 0);

	/* Size-only entries (trace replay): accounted, load gives NODATA and zeros. */
	CHECK_EQ(zs_zswap_store_compressed(z, 20, NULL, 1000, 0), 0);
	CHECK_EQ(zs_zswap_store_compressed(z, 21, NULL, ps + 5, 0), 0);
	zs_zswap_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.stored_pages, 2);
	CHECK_EQ(st.stored_incompressible_pages, 1);
	CHECK_EQ(st.stored_bytes, 1000 + ps);
	memset(back, 1, ps);
	CHECK_EQ(zs_zswap_load(z, 20, back), ZS_ZSWAP_NODATA);
	CHECK_EQ(back[0], 0);
	CHECK_EQ(zs_zswap_load(z, 21, back), ZS_ZSWAP_NODATA);
	/* Garbage compressed bytes: the load fails, the entry stays until invalidated. */
	memset(page, 0x5a, 100);
	CHECK_EQ(zs_zswap_store_compressed(z, 22, page, 100, 0), 0);
	CHECK_EQ(zs_zswap_load(z, 22, back), -EIO);
	zs_zswap_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.decompress_fail, 1);
	CHECK_EQ(st.stored_pages, 1);
	CHECK_EQ(zs_zswap_invalidate(z, 22), 0);
	/* clen >= page size with data that is not a compressed page: -EINVAL, nothing changes. */
	CHECK_EQ(zs_zswap_store_compressed(z, 23, page, ps, 0), -EINVAL);
	/* Large offsets work without writeback. */
	gen_page(page, ps, PG_MIXED, seed);
	CHECK_EQ(zs_zswap_store(z, ZS_ZSWAP_MAX_OFFSET - 1, page, 0), 0);
	CHECK_EQ(zs_zswap_load(z, ZS_ZSWAP_MAX_OFFSET - 1, back), 0);
	CHECK(!memcmp(back, page, ps));
	zs_zswap_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.stored_pages, 0);
	CHECK_EQ(st.pool_total_size, 0);
	zs_zswap_destroy(z);
}

/* Store random pages at offsets 0, 1, ... until one is refused, which must be
 * for the pool limit (-ENOSPC); returns how many went in (at most 20). */
static int fill_until_full(struct zs_zswap *z, size_t ps, uint64_t *seed)
{
	unsigned char page[4096];
	int i, rc = 0;

	for (i = 0; i < 20 && !rc; i++) {
		gen_page(page, ps, PG_RANDOM, seed);
		rc = zs_zswap_store(z, (uint64_t)i, page, 0);
	}
	CHECK_EQ(rc, -ENOSPC);
	return rc ? i - 1 : i;
}

/* Pool limit with hysteresis: 100 pages of RAM at 10% -> max 10 pages, accept 9. */
static void test_pool_limit(uint64_t *seed)
{
	const size_t ps = 4096;
	unsigned char page[4096];
	struct zs_zswap_stats st;
	struct zs_zswap *z = mk(ps, NULL, 100 * ps, 10, NULL);
	int i;

	zs_zswap_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.max_pool_pages, 10);
	CHECK_EQ(st.accept_pool_pages, 9);
	CHECK_EQ(fill_until_full(z, ps, seed), 10);
	zs_zswap_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.pool_limit_hit, 1);
	CHECK_EQ(st.reached_full, 1);
	CHECK_EQ(st.pool_total_size, 10 * ps);
	/* Freeing one page: 9 <= accept, so the next store is accepted again. */
	CHECK_EQ(zs_zswap_invalidate(z, 0), 0);
	gen_page(page, ps, PG_RANDOM, seed);
	CHECK_EQ(zs_zswap_store(z, 100, page, 0), 0);
	zs_zswap_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.reached_full, 0);
	/* Full again; drop to 9 pages... no: stays full until <= 9 (max 10 * 90%). */
	CHECK_EQ(zs_zswap_store(z, 101, page, 0), -ENOSPC);
	CHECK_EQ(zs_zswap_set_pool_limit(z, 10, 50), 0); /* accept 5 */
	CHECK_EQ(zs_zswap_invalidate(z, 1), 0);
	CHECK_EQ(zs_zswap_invalidate(z, 2), 0);
	CHECK_EQ(zs_zswap_store(z, 102, page, 0), -ENOSPC); /* 8 pages: still full */
	zs_zswap_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.pool_limit_hit, 2);
	CHECK_EQ(st.accept_pool_pages, 5);
	for (i = 3; i < 6; i++)
		CHECK_EQ(zs_zswap_invalidate(z, (uint64_t)i), 0);
	CHECK_EQ(zs_zswap_store(z, 103, page, 0), 0);
	CHECK_EQ(zs_zswap_set_pool_limit(z, 0, 90), 0);
	CHECK_EQ(zs_zswap_store(z, 104, page, 0), -ENOSPC);
	zs_zswap_destroy(z);
}

/*
 * The pool limit with deferred frees and no worker to run them (backend
 * deferred_worker -1): an invalidation only queues its free, so a store
 * right after it would see the pool as full as before.  The pool waits for
 * its queued frees before it counts a limit hit.
 */
static void test_pool_limit_deferred(uint64_t *seed)
{
	const size_t ps = 4096;
	unsigned char page[4096];
	struct zs_zswap_config cfg;
	struct zs_zswap_stats st;
	struct zs_zswap *z;
	char err[200];

	zs_zswap_config_init(&cfg);
	cfg.page_size = ps;
	cfg.total_ram = 100 * ps;
	cfg.max_pool_percent = 10;
	cfg.deferred_free = 1;
	cfg.backend.zs.deferred_worker = -1;
	REQUIRE(zs_zswap_create(&cfg, &z, err, sizeof(err)) == 0);
	CHECK_EQ(fill_until_full(z, ps, seed), 10);
	/* One invalidated: 9 pages once its free runs, <= the accept threshold (9). */
	CHECK_EQ(zs_zswap_invalidate(z, 0), 0);
	gen_page(page, ps, PG_RANDOM, seed);
	CHECK_EQ(zs_zswap_store(z, 100, page, 0), 0);
	zs_zswap_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.pool_limit_hit, 1);
	CHECK_EQ(st.reached_full, 0);
	CHECK_EQ(st.pool_total_size, 10 * ps);
	unsigned char out[4096];
	CHECK_EQ(zs_zswap_load(z, 100, out), 0);
	CHECK(!memcmp(out, page, ps));
	zs_zswap_destroy(z);
}

/* Writeback: second chance, the file, loads from it, injected errors. */
static void test_writeback(uint64_t *seed)
{
	const size_t ps = 4096;
	unsigned char page[8][4096], back[4096];
	struct zs_zswap_stats st;
	struct zs_zswap_group_stats gs;
	struct zs_zswap *z = mk(ps, NULL, 0, 20, path);

	for (int i = 0; i < 8; i++) {
		gen_page(page[i], ps, i % 2 ? PG_TEXT : PG_RANDOM, seed);
		CHECK_EQ(zs_zswap_store(z, (uint64_t)i * 3, page[i], (unsigned)i % 2), 0);
	}
	/* Every entry is referenced: the first pass only rotates. */
	CHECK_EQ(zs_zswap_writeback(z, 1), 1);
	zs_zswap_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.written_back_pages, 1);
	CHECK_EQ(st.zswpwb, 1);
	CHECK_EQ(st.disk_pages, 1);
	CHECK_EQ(st.stored_pages, 7);
	/* The coldest (offset 0) went first. */
	CHECK_EQ(zs_zswap_load(z, 0, back), ZS_ZSWAP_DISK);
	CHECK(!memcmp(back, page[0], ps));
	CHECK_EQ(zs_zswap_load(z, 0, back), -ENOENT);
	zs_zswap_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.pswpin, 1);
	CHECK_EQ(st.disk_pages, 0);
	/* Injected write errors: counted, the entries stay. */
	zs_zswap_wb_inject(z, 0, 0, 2);
	CHECK_EQ(zs_zswap_writeback(z, 2), 2);
	zs_zswap_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.reject_reclaim_fail, 2);
	CHECK_EQ(st.written_back_pages, 3);
	/* Group 1 with writeback off: its entries are passed over. */
	CHECK_EQ(zs_zswap_group_set(z, 1, ZS_ZSWAP_NO_LIMIT, 0), 0);
	CHECK_EQ(zs_zswap_writeback(z, 100), 2); /* the group-0 entries left: 2 of 4 */
	CHECK_EQ(zs_zswap_group_stats(z, 0, &gs, sizeof(gs)), 0);
	CHECK_EQ(gs.zswpwb, 4);
	CHECK_EQ(gs.zswapped, 0);
	/* Order after the first pass: 1..7; the failed 1 and 2 went young, 3 and 4 were written. */
	CHECK_EQ(zs_zswap_group_stats(z, 1, &gs, sizeof(gs)), 0);
	CHECK_EQ(gs.zswpwb, 1);
	CHECK_EQ(gs.zswapped, 3 * ps);
	/* Injected read error: -EIO, zeroed, the page stays on disk. */
	zs_zswap_wb_inject(z, 1, 0, 1);
	memset(back, 1, ps);
	CHECK_EQ(zs_zswap_load(z, 6, back), -EIO);
	CHECK_EQ(back[0], 0);
	CHECK_EQ(zs_zswap_load(z, 6, back), ZS_ZSWAP_DISK);
	CHECK(!memcmp(back, page[2], ps));
	/* Every written-back page reads back. */
	for (int i = 0; i < 8; i++) {
		int rc = zs_zswap_load(z, (uint64_t)i * 3, back);

		if (i == 0 || i == 2)
			CHECK_EQ(rc, -ENOENT);
		else {
			CHECK(rc == 0 || rc == ZS_ZSWAP_DISK);
			CHECK(!memcmp(back, page[i], ps));
		}
	}
	zs_zswap_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.stored_pages, 0);
	CHECK_EQ(st.disk_pages, 0);
	CHECK_EQ(st.pool_total_size, 0);
	zs_zswap_destroy(z);

	/* The shrinker: off by default (0), on: second chance then writeback. */
	struct zs_zswap_config cfg;
	zs_zswap_config_init(&cfg);
	cfg.backing_path = path;
	cfg.shrinker_enabled = 1;
	REQUIRE(zs_zswap_create(&cfg, &z, NULL, 0) == 0);
	for (int i = 0; i < 8; i++)
		CHECK_EQ(zs_zswap_store(z, (uint64_t)i, page[i], 0), 0);
	CHECK(zs_zswap_shrink_count(z) > 0);
	CHECK_EQ(zs_zswap_shrink(z, 8), 0);  /* 8 steps: all rotated */
	CHECK_EQ(zs_zswap_shrink(z, 3), 3);
	zs_zswap_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.written_back_pages, 3);
	zs_zswap_destroy(z);
}

static int thread_count(void)
{
	char line[256];
	int n = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "Threads:", 8))
			n = atoi(line + 8);
	if (f)
		fclose(f);
	return n;
}

/* The shrink worker: a rejection while full writes back down to the accept threshold. */
static void test_worker(uint64_t *seed)
{
	const size_t ps = 4096;
	unsigned char page[4096];
	struct zs_zswap_stats st;
	int threads0 = thread_count();
	struct zs_zswap *z = mk(ps, NULL, 100 * ps, 20, path); /* max 20, accept 18 */
	int i;

	/* No thread at create, nor while nothing is rejected. */
	CHECK_EQ(thread_count(), threads0);
	for (i = 0; i < 20; i++) {
		gen_page(page, ps, PG_RANDOM, seed);
		CHECK_EQ(zs_zswap_store(z, (uint64_t)i, page, 0), 0);
	}
	zs_zswap_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.shrink_worker_runs, 0);
	CHECK_EQ(thread_count(), threads0);
	/* Entries are referenced: each rejected store's pass rotates 16 and gives up, until
	 * the cold ones are written back. */
	int rejected = 0;
	for (i = 20; i < 60; i++) {
		int rc;

		gen_page(page, ps, PG_RANDOM, seed);
		rc = zs_zswap_store(z, (uint64_t)i, page, 0);
		zs_zswap_flush(z);
		if (rc == -ENOSPC)
			rejected++;
	}
	zs_zswap_get_stats(z, &st, sizeof(st));
	CHECK(rejected > 0);
	CHECK(st.shrink_worker_runs > 0);
	CHECK(st.written_back_pages > 0);
	CHECK(st.pool_pages <= 20);
	CHECK_EQ(thread_count(), threads0 + 1);
	printf("worker: %d rejected, %llu passes, %llu written back\n", rejected,
	       (unsigned long long)st.shrink_worker_runs,
	       (unsigned long long)st.written_back_pages);
	zs_zswap_destroy(z);
}

/* ---- the shadow model ---- */

#define NOFF 160
#define NGRP 4
enum { M_NONE, M_ENTRY, M_ZERO, M_DISK };
enum { ST_EMPTY, ST_WRITTEN, ST_ROTATED, ST_SKIPPED, ST_FAILED };

struct ment {
	int kind;
	unsigned len, group;
	int raw, nodata, bad, ref;
	uint64_t seq;
	unsigned long h;
	unsigned char *data; /* the page (entries with data, disk pages) */
};

struct mgroup {
	uint64_t charged, pages, zswpin, zswpout, zswpwb, max;
	int wb;
};

struct model {
	size_t ps;
	struct ment e[NOFF];
	struct mgroup g[NGRP];
	struct zs_zswap_stats st; /* the counters the model keeps */
	uint64_t seq, total_pages, max_pages, accept_pages;
	int full, backing, shrinker, deferred;
	int inj_on[2];
	uint64_t inj_after[2], inj_count[2];
	struct zs_pool *pool;    /* zsmalloc configs: a plain pool */
	struct zs_backend *be;   /* others: a backend of the same kind */
	struct zs_comp *comp;
	unsigned char *cbuf;
	size_t cbuf_cap;
};

static unsigned long sh_malloc(struct model *m, size_t len)
{
	return m->pool ? zs_malloc(m->pool, len) : zs_backend_malloc(m->be, len);
}

static void sh_free(struct model *m, unsigned long h, int deferred)
{
	if (m->pool)
		deferred ? zs_free_deferred(m->pool, h) : zs_free(m->pool, h);
	else
		deferred ? zs_backend_free_deferred(m->be, h) : zs_backend_free(m->be, h);
}

static uint64_t sh_pages(struct model *m)
{
	return m->pool ? zs_get_total_pages(m->pool) : zs_backend_total_pages(m->be);
}

static void sh_flush(struct model *m)
{
	if (m->pool)
		zs_free_deferred_flush(m->pool);
	else
		zs_backend_flush(m->be);
}

static int m_inject(struct model *m, int reads)
{
	if (!m->inj_on[reads])
		return 0;
	if (m->inj_after[reads]) {
		m->inj_after[reads]--;
		return 0;
	}
	if (m->inj_count[reads] && !--m->inj_count[reads])
		m->inj_on[reads] = 0;
	return 1;
}

static void m_release(struct model *m, struct ment *e, int deferred)
{
	sh_free(m, e->h, deferred);
	m->st.stored_pages--;
	m->st.stored_bytes -= e->len;
	if (e->raw)
		m->st.stored_incompressible_pages--;
	m->g[e->group].charged -= e->len;
	m->g[e->group].pages--;
}

static void m_drop(struct model *m, struct ment *e, int deferred)
{
	if (e->kind == M_ENTRY)
		m_release(m, e, deferred);
	else if (e->kind == M_ZERO)
		m->st.zero_pages--;
	else if (e->kind == M_DISK)
		m->st.disk_pages--;
	e->kind = M_NONE;
}

static struct ment *m_coldest(struct model *m, int group)
{
	struct ment *best = NULL;

	for (int i = 0; i < NOFF; i++) {
		struct ment *e = &m->e[i];

		if (e->kind == M_ENTRY && (group < 0 || (int)e->group == group) &&
		    (!best || e->seq < best->seq))
			best = e;
	}
	return best;
}

static int m_write(struct model *m, struct ment *e)
{
	if (e->bad) {
		m->st.decompress_fail++;
		m->st.reject_reclaim_fail++;
		e->seq = m->seq++;
		return -1;
	}
	if (m_inject(m, 0)) {
		m->st.reject_reclaim_fail++;
		e->seq = m->seq++;
		return -1;
	}
	m->g[e->group].zswpwb++;
	m_release(m, e, 0);
	e->kind = M_DISK;
	if (e->nodata)
		memset(e->data, 0, m->ps);
	m->st.disk_pages++;
	m->st.written_back_pages++;
	m->st.zswpwb++;
	return 0;
}

static int m_step(struct model *m)
{
	struct ment *e = m_coldest(m, -1);

	if (!e)
		return ST_EMPTY;
	if (!m->g[e->group].wb) {
		e->seq = m->seq++;
		return ST_SKIPPED;
	}
	if (e->ref) {
		e->ref = 0;
		e->seq = m->seq++;
		return ST_ROTATED;
	}
	return m_write(m, e) ? ST_FAILED : ST_WRITTEN;
}

static int m_group_shrink(struct model *m, unsigned group)
{
	struct ment *e;

	if (!m->backing || !m->g[group].wb)
		return -1;
	e = m_coldest(m, (int)group);
	if (!e)
		return -1;
	if (e->ref) {
		e->ref = 0;
		e->seq = m->seq++;
		return -1;
	}
	return m_write(m, e);
}

static void m_worker(struct model *m)
{
	unsigned failures = 0;

	while (sh_pages(m) > m->accept_pages) {
		int r = m_step(m);

		if (r == ST_EMPTY)
			break;
		if (r != ST_WRITTEN && ++failures == ZS_ZSWAP_WORKER_RETRIES)
			break;
	}
	m->st.shrink_worker_runs++;
}

static int m_reject(struct model *m, struct ment *e, int rc)
{
	m_drop(m, e, 0);
	if (m->full && m->backing)
		m_worker(m);
	return rc;
}

static int m_zero(struct model *m, struct ment *e)
{
	if (e->kind != M_ZERO) {
		m_drop(m, e, 0);
		e->kind = M_ZERO;
		m->st.zero_pages++;
	}
	m->st.swpout_zero++;
	return ZS_ZSWAP_ZERO;
}

static int m_admit(struct model *m, unsigned group)
{
	struct mgroup *g = &m->g[group];
	uint64_t cur;

	if (g->max != ZS_ZSWAP_NO_LIMIT) {
		if (g->max == 0)
			return -EDQUOT;
		if (g->charged >= g->max && m_group_shrink(m, group))
			return -EDQUOT;
	}
	cur = sh_pages(m);
	if (cur >= m->max_pages) {
		m->st.pool_limit_hit++;
		m->full = 1;
	} else if (m->full && cur <= m->accept_pages) {
		m->full = 0;
	}
	return m->full ? -ENOSPC : 0;
}

/* data: the page to remember (NULL: size-only); len, raw, bad as stored. */
static int m_commit(struct model *m, struct ment *e, unsigned group, const unsigned char *data,
		    size_t len, int raw, int bad)
{
	unsigned long h = sh_malloc(m, len);

	REQUIRE(!ZS_IS_ERR(h));
	m_drop(m, e, 0);
	e->kind = M_ENTRY;
	e->h = h;
	e->len = (unsigned)len;
	e->group = group;
	e->raw = raw;
	e->nodata = data == NULL;
	e->bad = bad;
	e->ref = 1;
	e->seq = m->seq++;
	if (data)
		memcpy(e->data, data, m->ps);
	else
		memset(e->data, 0, m->ps);
	m->st.stored_pages++;
	m->st.stored_bytes += len;
	m->st.zswpout++;
	if (raw)
		m->st.stored_incompressible_pages++;
	m->g[group].charged += len;
	m->g[group].pages++;
	m->g[group].zswpout++;
	return 0;
}

static int m_store(struct model *m, struct ment *e, const unsigned char *page, unsigned group)
{
	int n, rc;

	if (!memcmp(page, m->cbuf + m->cbuf_cap - m->ps, m->ps)) /* the zero page kept there */
		return m_zero(m, e);
	if ((rc = m_admit(m, group)))
		return m_reject(m, e, rc);
	n = zs_compress(m->comp, page, m->ps, m->cbuf, m->cbuf_cap - m->ps);
	REQUIRE(n > 0);
	if ((size_t)n < m->ps)
		return m_commit(m, e, group, page, (size_t)n, 0, 0);
	if (!m->g[group].wb) {
		m->st.reject_compress_poor++;
		return m_reject(m, e, -E2BIG);
	}
	return m_commit(m, e, group, page, m->ps, 1, 0);
}

/* page: the page cdata came from (NULL: size-only or garbage, bad says which). */
static int m_store_c(struct model *m, struct ment *e, const unsigned char *page, size_t clen,
		     int bad, unsigned group)
{
	int rc, raw = clen >= m->ps;

	if (clen == 0)
		return m_zero(m, e);
	if ((rc = m_admit(m, group)))
		return m_reject(m, e, rc);
	if (raw && !m->g[group].wb) {
		m->st.reject_compress_poor++;
		return m_reject(m, e, -E2BIG);
	}
	return m_commit(m, e, group, page, raw ? m->ps : clen, raw, bad);
}

static int m_load(struct model *m, struct ment *e, unsigned char *want)
{
	memset(want, 0, m->ps);
	switch (e->kind) {
	case M_NONE:
		return -ENOENT;
	case M_ZERO:
		m->st.swpin_zero++;
		m_drop(m, e, 0);
		return ZS_ZSWAP_ZERO;
	case M_DISK:
		if (m_inject(m, 1))
			return -EIO;
		memcpy(want, e->data, m->ps);
		m->st.pswpin++;
		m_drop(m, e, 0);
		return ZS_ZSWAP_DISK;
	}
	if (e->bad) {
		m->st.decompress_fail++;
		return -EIO;
	}
	memcpy(want, e->data, m->ps);
	m->st.zswpin++;
	m->g[e->group].zswpin++;
	int rc = e->nodata ? ZS_ZSWAP_NODATA : 0;
	m_drop(m, e, m->deferred);
	return rc;
}

static int compare(struct zs_zswap *z, struct model *m, long op, const char *what)
{
	struct zs_zswap_stats st;
	int bad = 0;

	zs_zswap_get_stats(z, &st, sizeof(st));
	m->st.pool_pages = sh_pages(m);
	m->st.pool_total_size = m->st.meminfo_zswap = m->st.pool_pages * m->ps;
	m->st.meminfo_zswapped = m->st.stored_pages * m->ps;
	m->st.reached_full = m->full;
	m->st.max_pool_pages = m->max_pages;
	m->st.accept_pool_pages = m->accept_pages;
#define F(f)                                                                           \
	if (st.f != m->st.f) {                                                         \
		fprintf(stderr, "op %ld (%s): %s = %llu, model %llu\n", op, what, #f,  \
			(unsigned long long)st.f, (unsigned long long)m->st.f);        \
		bad++;                                                                 \
	}
	F(stored_pages) F(stored_incompressible_pages) F(pool_total_size) F(pool_limit_hit)
	F(reject_reclaim_fail) F(reject_alloc_fail) F(reject_kmemcache_fail)
	F(reject_compress_fail) F(reject_compress_poor) F(decompress_fail) F(written_back_pages)
	F(zswpout) F(zswpin) F(zswpwb) F(swpout_zero) F(swpin_zero) F(meminfo_zswap)
	F(meminfo_zswapped) F(pool_pages) F(max_pool_pages) F(accept_pool_pages) F(reached_full)
	F(stored_bytes) F(zero_pages) F(disk_pages) F(pswpin) F(shrink_worker_runs)
#undef F
	for (unsigned g = 0; g < NGRP; g++) {
		struct zs_zswap_group_stats gs;

		zs_zswap_group_stats(z, g, &gs, sizeof(gs));
		if (gs.zswap != m->g[g].charged || gs.zswapped != m->g[g].pages * m->ps ||
		    gs.zswpin != m->g[g].zswpin || gs.zswpout != m->g[g].zswpout ||
		    gs.zswpwb != m->g[g].zswpwb) {
			fprintf(stderr, "op %ld (%s): group %u: zswap %llu/%llu pages %llu/%llu "
				"in %llu/%llu out %llu/%llu wb %llu/%llu\n", op, what, g,
				(unsigned long long)gs.zswap, (unsigned long long)m->g[g].charged,
				(unsigned long long)(gs.zswapped / m->ps),
				(unsigned long long)m->g[g].pages,
				(unsigned long long)gs.zswpin, (unsigned long long)m->g[g].zswpin,
				(unsigned long long)gs.zswpout, (unsigned long long)m->g[g].zswpout,
				(unsigned long long)gs.zswpwb, (unsigned long long)m->g[g].zswpwb);
			bad++;
		}
	}
	return bad;
}

struct mcfg {
	const char *name;
	const char *kind;
	size_t ps;
	const char *comp;
	int deferred, backing, shrinker;
	unsigned class_delta, max_chain;
	enum zs_free_mode free_mode;
	enum zs_chain_policy chain;
};

static void run_model(const struct mcfg *c, uint64_t seed, long nops)
{
	const size_t ps = c->ps;
	struct zs_zswap_config cfg;
	struct zs_zswap *z;
	struct model m;
	unsigned char *page = malloc(ps), *back = malloc(ps), *want = malloc(ps);
	unsigned gen[NOFF] = { 0 };
	char err[200];
	long op, fails = 0, nstore = 0, nload = 0, nwb = 0;
	const char *what = "";

	REQUIRE(page && back && want);
	memset(&m, 0, sizeof(m));
	m.ps = ps;
	zs_zswap_config_init(&cfg);
	cfg.page_size = ps;
	cfg.comp = c->comp;
	cfg.backend.kind = c->kind;
	cfg.backend.zs.class_delta = c->class_delta;
	cfg.backend.zs.max_chain = c->max_chain;
	cfg.backend.zs.free_mode = c->free_mode;
	cfg.backend.zs.chain_policy = c->chain;
	cfg.deferred_free = c->deferred;
	cfg.shrinker_enabled = c->shrinker;
	cfg.backing_path = c->backing ? path : NULL;
	cfg.total_ram = 400 * ps;
	cfg.max_pool_percent = 10 + (unsigned)(tu_rand(&seed) % 30);
	cfg.accept_threshold_percent = 50 + (unsigned)(tu_rand(&seed) % 51);
	if (zs_zswap_create(&cfg, &z, err, sizeof(err))) {
		fprintf(stderr, "%s: create: %s\n", c->name, err);
		REQUIRE(0);
	}
	m.total_pages = 400;
	m.max_pages = m.total_pages * cfg.max_pool_percent / 100;
	m.accept_pages = m.max_pages * cfg.accept_threshold_percent / 100;
	m.backing = c->backing;
	m.shrinker = c->shrinker;
	m.deferred = c->deferred;
	for (int g = 0; g < NGRP; g++) {
		m.g[g].max = ZS_ZSWAP_NO_LIMIT;
		m.g[g].wb = 1;
	}
	if (!strcmp(c->kind, "zsmalloc")) {
		struct zs_pool_config pc = cfg.backend.zs;

		pc.page_size = ps;
		m.pool = must_pool_create(&pc);
		REQUIRE(m.pool);
	} else {
		struct zs_backend_config bc = cfg.backend;

		bc.page_size = ps;
		m.be = must_backend_create(&bc);
		REQUIRE(m.be);
	}
	REQUIRE(zs_comp_create(&(struct zs_comp_config){ .name = c->comp, .max_src = ps }, &m.comp, NULL, 0) == 0);
	/* The compression buffer, then one zero page (m_store compares against it). */
	m.cbuf_cap = zs_comp_bound(m.comp, ps) + ps;
	m.cbuf = calloc(1, m.cbuf_cap);
	REQUIRE(m.cbuf);
	for (int i = 0; i < NOFF; i++)
		REQUIRE((m.e[i].data = malloc(ps)));

	for (op = 0; op < nops && fails < 5; op++) {
		unsigned r = (unsigned)(tu_rand(&seed) % 100);
		int i = (int)(tu_rand(&seed) % NOFF);
		unsigned g = (unsigned)(tu_rand(&seed) % NGRP);
		struct ment *e = &m.e[i];
		int rc = 0, want_rc = 0, check_bytes = 0;

		if (r < 35) {
			int kind = (int)(tu_rand(&seed) % PG_NR);

			what = "store";
			gen[i]++;
			gen_page(page, ps, kind, &seed);
			want_rc = m_store(&m, e, page, g);
			rc = zs_zswap_store(z, (uint64_t)i, page, g);
			nstore++;
		} else if (r < 45) {
			/* Compressed elsewhere: real output, size-only, or garbage bytes. */
			int form = (int)(tu_rand(&seed) % 8), n;

			what = "store_compressed";
			gen_page(page, ps, (int)(tu_rand(&seed) % PG_NR), &seed);
			n = zs_compress(m.comp, page, ps, m.cbuf, m.cbuf_cap - ps);
			REQUIRE(n > 0);
			if (!memcmp(page, m.cbuf + m.cbuf_cap - ps, ps))
				n = 0; /* the caller's zero check */
			if (form <= 4) {
				want_rc = m_store_c(&m, e, page, (size_t)n, 0, g);
				rc = zs_zswap_store_compressed(z, (uint64_t)i, m.cbuf, (size_t)n, g);
			} else if (form <= 6) {
				want_rc = m_store_c(&m, e, NULL, (size_t)n, 0, g);
				rc = zs_zswap_store_compressed(z, (uint64_t)i, NULL, (size_t)n, g);
			} else {
				size_t len = 1 + (size_t)(tu_rand(&seed) % (ps - 1));
				unsigned char *junk = m.cbuf;
				int dec;

				for (size_t k = 0; k < len; k++)
					junk[k] = (unsigned char)tu_rand(&seed);
				/* Garbage that happens to decompress to a page is good data. */
				dec = zs_decompress(m.comp, junk, len, want, ps) == (int)ps;
				want_rc = m_store_c(&m, e, dec ? want : NULL, len, !dec, g);
				rc = zs_zswap_store_compressed(z, (uint64_t)i, junk, len, g);
			}
			nstore++;
		} else if (r < 65) {
			what = "load";
			memset(back, 0xee, ps);
			want_rc = m_load(&m, e, want);
			rc = zs_zswap_load(z, (uint64_t)i, back);
			check_bytes = rc != -ENOENT;
			nload++;
		} else if (r < 75) {
			what = "invalidate";
			want_rc = e->kind == M_NONE ? -ENOENT : 0;
			m_drop(&m, e, m.deferred);
			rc = zs_zswap_invalidate(z, (uint64_t)i);
		} else if (r < 82) {
			size_t nr = (size_t)(tu_rand(&seed) % 12);
			uint64_t budget = 2 * m.st.stored_pages;
			long w = 0;

			what = "writeback";
			if (!m.backing) {
				want_rc = -EOPNOTSUPP;
			} else {
				while ((size_t)w < nr && budget) {
					int s = m_step(&m);

					budget--;
					if (s == ST_EMPTY)
						break;
					w += s == ST_WRITTEN;
				}
				want_rc = (int)w;
			}
			rc = (int)zs_zswap_writeback(z, nr);
			nwb++;
		} else if (r < 86) {
			unsigned long nr = tu_rand(&seed) % 20;
			long w = 0;

			what = "shrink";
			if (!m.backing) {
				want_rc = -EOPNOTSUPP;
			} else if (m.shrinker) {
				for (unsigned long k = 0; k < nr; k++) {
					int s = m_step(&m);

					if (s == ST_EMPTY)
						break;
					w += s == ST_WRITTEN;
				}
				want_rc = (int)w;
			}
			rc = (int)zs_zswap_shrink(z, nr);
		} else if (r < 91) {
			static const uint64_t maxes[] = { ZS_ZSWAP_NO_LIMIT, ZS_ZSWAP_NO_LIMIT, 0,
							  3000, 20000, 60000 };
			uint64_t mx = maxes[tu_rand(&seed) % 6];
			int wb = tu_rand(&seed) % 4 != 0;

			what = "group_set";
			m.g[g].max = mx;
			m.g[g].wb = wb;
			rc = zs_zswap_group_set(z, g, mx, wb);
		} else if (r < 94) {
			int reads = (int)(tu_rand(&seed) % 2);
			uint64_t after = tu_rand(&seed) % 6, count = tu_rand(&seed) % 4;

			what = "inject";
			if (tu_rand(&seed) % 3 == 0)
				after = UINT64_MAX;
			if (m.backing) {
				m.inj_on[reads] = after != UINT64_MAX;
				m.inj_after[reads] = after;
				m.inj_count[reads] = count;
			}
			zs_zswap_wb_inject(z, reads, after, count);
		} else if (r < 96) {
			unsigned mp = 5 + (unsigned)(tu_rand(&seed) % 40);
			unsigned ap = (unsigned)(tu_rand(&seed) % 101);

			what = "set_pool_limit";
			m.max_pages = m.total_pages * mp / 100;
			m.accept_pages = m.max_pages * ap / 100;
			rc = zs_zswap_set_pool_limit(z, mp, ap);
		} else if (r < 98) {
			what = "compact";
			zs_zswap_compact(z);
			if (m.pool)
				zs_compact(m.pool);
			else
				zs_backend_compact(m.be);
		} else {
			what = "shrink_count";
			(void)zs_zswap_shrink_count(z);
		}
		zs_zswap_flush(z);
		sh_flush(&m);
		if (rc != want_rc) {
			fprintf(stderr, "%s op %ld (%s offset %d group %u): rc %d, model %d\n",
				c->name, op, what, i, g, rc, want_rc);
			fails++;
		}
		if (check_bytes && memcmp(back, want, ps)) {
			fprintf(stderr, "%s op %ld (load offset %d): wrong bytes\n", c->name, op, i);
			fails++;
		}
		fails += compare(z, &m, op, what) != 0;
	}
	/* Everything left reads back, then the pool is empty. */
	for (int i = 0; i < NOFF && !fails; i++) {
		int want_rc, rc;

		zs_zswap_wb_inject(z, 1, UINT64_MAX, 0);
		m.inj_on[1] = 0;
		want_rc = m_load(&m, &m.e[i], want);
		rc = zs_zswap_load(z, (uint64_t)i, back);
		if (rc == -EIO && want_rc == -EIO) {
			/* A bad entry stays until invalidated. */
			m_drop(&m, &m.e[i], m.deferred);
			want_rc = 0;
			rc = zs_zswap_invalidate(z, (uint64_t)i);
			memset(back, 0, ps);
		}
		zs_zswap_flush(z);
		sh_flush(&m);
		if (rc != want_rc || (rc != -ENOENT && memcmp(back, want, ps)))
			fails++;
	}
	fails += compare(z, &m, op, "drain") != 0;
	{
		struct zs_zswap_stats st;

		zs_zswap_get_stats(z, &st, sizeof(st));
		CHECK_EQ(st.stored_pages + st.zero_pages + st.disk_pages, 0);
		CHECK_EQ(st.pool_pages, 0);
		printf("%s: %ld ops (%ld stores, %ld loads, %ld writebacks): stored %llu, "
		       "limit hits %llu, written back %llu, reclaim fails %llu, worker passes %llu, "
		       "poor %llu\n", c->name, op, nstore, nload, nwb,
		       (unsigned long long)st.zswpout,
		       (unsigned long long)st.pool_limit_hit,
		       (unsigned long long)st.written_back_pages,
		       (unsigned long long)st.reject_reclaim_fail,
		       (unsigned long long)st.shrink_worker_runs,
		       (unsigned long long)st.reject_compress_poor);
	}
	CHECK_EQ(fails, 0);
	zs_zswap_destroy(z);
	if (m.pool)
		zs_destroy_pool(m.pool);
	else
		zs_backend_destroy(m.be);
	zs_comp_destroy(m.comp);
	for (int i = 0; i < NOFF; i++)
		free(m.e[i].data);
	free(m.cbuf);
	free(page);
	free(back);
	free(want);
}

/* zsmalloc under zswap = a plain zs_pool fed the same sizes, for a long fill and churn. */
static void test_pool_parity(uint64_t *seed)
{
	const size_t ps = 4096;
	struct zs_zswap *z = mk(ps, NULL, 0, 100, NULL);
	struct zs_pool *pool = must_pool_create(NULL);
	struct zs_comp *comp;
	unsigned char page[4096], cbuf[8192];
	unsigned long *h = calloc(3000, sizeof(*h));
	struct zs_zswap_stats st;
	int mism = 0;

	REQUIRE(pool && h && zs_comp_create(&(struct zs_comp_config){ .name = "lzo", .max_src = ps }, &comp, NULL, 0) == 0);
	for (int round = 0; round < 4; round++) {
		for (int i = 0; i < 3000; i++) {
			int n, rc;

			if (round && tu_rand(seed) % 2)
				continue;
			gen_page(page, ps, 1 + (int)(tu_rand(seed) % (PG_NR - 1)), seed);
			n = zs_compress(comp, page, ps, cbuf, sizeof(cbuf));
			rc = zs_zswap_store(z, (uint64_t)i, page, 0);
			CHECK_EQ(rc, 0);
			/* As commit does it: allocate the new object, then free the stale one. */
			unsigned long nh = zs_malloc(pool, (size_t)n < ps ? (size_t)n : ps);

			if (h[i])
				zs_free(pool, h[i]);
			h[i] = nh;
		}
		for (int i = 0; i < 3000; i += 1 + round)
			if (h[i]) {
				CHECK_EQ(zs_zswap_load(z, (uint64_t)i, page), 0);
				zs_free(pool, h[i]);
				h[i] = 0;
			}
		zs_zswap_get_stats(z, &st, sizeof(st));
		mism += st.pool_pages != zs_get_total_pages(pool);
	}
	CHECK_EQ(mism, 0);
	zs_zswap_get_stats(z, &st, sizeof(st));
	printf("pool parity: %llu pages both sides (%llu stored)\n",
	       (unsigned long long)st.pool_pages, (unsigned long long)st.stored_pages);
	zs_zswap_destroy(z);
	for (int i = 0; i < 3000; i++)
		if (h[i])
			zs_free(pool, h[i]);
	zs_destroy_pool(pool);
	zs_comp_destroy(comp);
	free(h);
}

/* The malloc baseline works too (its pool limit counts bytes rounded to pages). */
static void test_malloc_kind(uint64_t *seed)
{
	const size_t ps = 4096;
	unsigned char page[4096], back[4096];
	struct zs_zswap *z = mk(ps, "malloc", 0, 20, NULL);

	for (int i = 0; i < 50; i++) {
		gen_page(page, ps, (int)(tu_rand(seed) % PG_NR), seed);
		int rc = zs_zswap_store(z, (uint64_t)i, page, 0);

		CHECK(rc == 0 || rc == ZS_ZSWAP_ZERO);
		memset(back, 1, ps);
		CHECK(zs_zswap_load(z, (uint64_t)i, back) >= 0);
		CHECK(!memcmp(back, page, ps));
	}
	zs_zswap_destroy(z);
}

int main(void)
{
	uint64_t seed = tu_seed("test_zswap");
	const char *e = getenv("ZS_ZSWAP_OPS");
	long nops = e ? atol(e) : 3000;
	int fd;

	snprintf(path, sizeof(path), "/tmp/zs-zswap-test-XXXXXX");
	fd = mkstemp(path);
	REQUIRE(fd >= 0);
	close(fd);

	test_config();
	test_rules(&seed);
	test_promises(&seed);
	test_pool_limit(&seed);
	test_pool_limit_deferred(&seed);
	test_writeback(&seed);
	test_worker(&seed);
	test_pool_parity(&seed);
	test_malloc_kind(&seed);

	static const struct mcfg cfgs[] = {
		{ "zsmalloc+wb", "zsmalloc", 4096, "lzo", 0, 1, 1, 0, 0, 0, 0 },
		{ "zsmalloc", "zsmalloc", 4096, "lzo", 0, 0, 0, 0, 0, 0, 0 },
		{ "zsmalloc+deferred+wb", "zsmalloc", 4096, "lz4", 1, 1, 1, 0, 0, 0, 0 },
		{ "zsmalloc-delta16-chain4", "zsmalloc", 4096, "lzo", 0, 1, 0, 16, 4,
		  ZS_FREE_CLASS_INDEX_UNLOCKED, ZS_CHAIN_HEURISTIC },
		{ "zsmalloc-8k-zstd", "zsmalloc", 8192, "zstd", 0, 1, 1, 0, 0, 0, 0 },
		{ "zblock+wb", "zblock", 4096, "lzo", 0, 1, 1, 0, 0, 0, 0 },
	};
	for (size_t k = 0; k < sizeof(cfgs) / sizeof(cfgs[0]); k++)
		run_model(&cfgs[k], seed + k, nops);
	unlink(path);
	return tu_done();
}
