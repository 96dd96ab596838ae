/*
 * zram store tests, run on every backend kind (zs_backend_kinds()): round
 * trip of real files' pages under every compressor with the mm_stat columns
 * checked against what the test itself counts; same-filled and
 * incompressible pages; overwrite accounting; the memory limit (write fails,
 * nothing lost); discard / free_notify / compaction / idle / recompression;
 * bad input.
 */
#include <errno.h>
#include <string.h>

#include "testutil.h"
#include "zs/compress.h"
#include "zs/pages.h"
#include "zs/zram.h"
#include "zs/harness.h"

#define PS 4096

static const char *const comps[] = { "lz4", "lz4hc", "zstd", "lzo", NULL };
static struct zs_pageset bin, txt;

static struct zs_zram *mk(const char *kind, const char *comp, uint64_t slots, uint64_t limit,
			  int deferred)
{
	struct zs_zram_config cfg;
	struct zs_zram *z = NULL;
	int rc;

	zs_zram_config_init(&cfg);
	cfg.backend.kind = kind;
	cfg.comp = comp;
	cfg.recomp = "zstd:9";
	cfg.disksize = slots * PS;
	cfg.mem_limit = limit;
	cfg.deferred_free = deferred;
	cfg.track_actime = 1;
	rc = zs_zram_create(&cfg, &z, NULL, 0);
	if (rc)
		fprintf(stderr, "create %s/%s: %d\n", kind, comp, rc);
	REQUIRE(rc == 0 && z);
	return z;
}

static int same_filled(const unsigned char *p)
{
	return !memcmp(p, p + 8, PS - 8);
}

static void fill_random(unsigned char *p, uint64_t *seed)
{
	for (size_t i = 0; i < PS; i += 8) {
		uint64_t r = tu_rand(seed);
		memcpy(p + i, &r, 8);
	}
}

/* Sum of slot sizes and flag counts must equal what the stats report. */
static void check_consistent(struct zs_zram *z, const char *kind)
{
	struct zs_zram_stats st;
	uint64_t size_sum = 0, stored = 0, same = 0, huge = 0;

	for (uint64_t i = 0; i < zs_zram_slots(z); i++) {
		size_t size;
		unsigned flags;

		zs_zram_slot_info(z, i, &size, &flags, NULL);
		size_sum += size;
		stored += size || (flags & ZS_ZRAM_F_SAME);
		same += !!(flags & ZS_ZRAM_F_SAME);
		huge += !!(flags & ZS_ZRAM_F_HUGE);
	}
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.compr_data_size, size_sum);
	CHECK_EQ(st.pages_stored, stored);
	CHECK_EQ(st.orig_data_size, stored * PS);
	CHECK_EQ(st.same_pages, same);
	CHECK_EQ(st.huge_pages, huge);
	CHECK(st.mem_used_max >= st.mem_used_total || strcmp(kind, "zsmalloc"));
	if (!strcmp(kind, "zsmalloc"))
		CHECK_EQ(st.mem_used_total,
			 zs_get_total_pages(zs_backend_zspool(zs_zram_backend(z))) * PS);
}

static void test_roundtrip(const char *kind, const struct zs_pageset *ps, const char *comp)
{
	struct zs_zram *z = mk(kind, comp, ps->npages + 8, 0, 0);
	unsigned char *out = malloc(PS);
	unsigned long bad = 0, nsame = 0;
	struct zs_zram_stats st;
	char line[256];

	REQUIRE(out);
	for (size_t i = 0; i < ps->npages; i++) {
		CHECK_EQ(zs_zram_write(z, i, ps->data + i * PS), 0);
		nsame += same_filled(ps->data + i * PS);
	}
	for (size_t i = 0; i < ps->npages; i++)
		bad += zs_zram_read(z, i, out, PS) != 0 || memcmp(out, ps->data + i * PS, PS);
	CHECK_EQ(bad, 0);
	/* Never-written slots read as zeros. */
	memset(out, 0xaa, PS);
	CHECK_EQ(zs_zram_read(z, ps->npages + 3, out, PS), 0);
	CHECK(same_filled(out) && out[0] == 0);

	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.pages_stored, ps->npages);
	CHECK_EQ(st.same_pages, nsame);
	CHECK_EQ(st.num_writes, ps->npages);
	CHECK_EQ(st.failed_writes + st.failed_reads, 0);
	check_consistent(z, kind);
	CHECK(zs_zram_format_mm_stat(&st, line, sizeof(line)) > 0);
	{
		unsigned long long v[10];
		CHECK_EQ(sscanf(line, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
				&v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]),
			 9);
	}
	printf("  %-9s %-8s %6zu pages  mm_stat %s", kind, zs_zram_comp_name(z), ps->npages, line);

	/* Compaction after freeing every other page keeps the rest intact. */
	for (size_t i = 0; i < ps->npages; i += 2)
		zs_zram_discard(z, i);
	zs_zram_compact(z);
	bad = 0;
	for (size_t i = 1; i < ps->npages; i += 2)
		bad += zs_zram_read(z, i, out, PS) != 0 || memcmp(out, ps->data + i * PS, PS);
	CHECK_EQ(bad, 0);
	check_consistent(z, kind);
	if (!strcmp(kind, "zsmalloc") && ps->npages > 1000) {
		zs_zram_get_stats(z, &st, sizeof(st));
		CHECK(st.pages_compacted > 0);
	}
	zs_zram_destroy(z);
	free(out);
}

static void test_same_and_huge(const char *kind, uint64_t *seed)
{
	struct zs_zram *z = mk(kind, "lz4", 64, 0, 0);
	unsigned char page[PS], out[PS];
	struct zs_zram_stats st, st0;
	size_t size;
	unsigned flags;

	zs_zram_get_stats(z, &st0, sizeof(st0));
	/* Zero page, byte pattern, word pattern: all same-filled, no allocation. */
	memset(page, 0, PS);
	CHECK_EQ(zs_zram_write(z, 0, page), 0);
	memset(page, 0x5a, PS);
	CHECK_EQ(zs_zram_write(z, 1, page), 0);
	for (size_t i = 0; i < PS; i += 8)
		memcpy(page + i, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
	CHECK_EQ(zs_zram_write(z, 2, page), 0);
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.same_pages, 3);
	CHECK_EQ(st.pages_stored, 3);
	CHECK_EQ(st.compr_data_size, 0);
	if (strcmp(kind, "malloc") && strcmp(kind, "jemalloc") && strcmp(kind, "mimalloc"))
		CHECK_EQ(st.mem_used_total, st0.mem_used_total);
	CHECK_EQ(zs_zram_read(z, 2, out, PS), 0);
	CHECK(!memcmp(out, page, PS));
	CHECK_EQ(zs_zram_slot_info(z, 2, &size, &flags, NULL), 0);
	CHECK(flags & ZS_ZRAM_F_SAME);
	/* A 4-byte pattern that differs across an 8-byte word is not same-filled... */
	page[PS - 1] ^= 1;
	CHECK_EQ(zs_zram_write(z, 3, page), 0);
	zs_zram_slot_info(z, 3, &size, &flags, NULL);
	CHECK(!(flags & ZS_ZRAM_F_SAME) && size > 0 && size < PS);
	CHECK_EQ(zs_zram_read(z, 3, out, PS), 0);
	CHECK(!memcmp(out, page, PS));

	/* Incompressible: stored raw as a page-size object. */
	fill_random(page, seed);
	CHECK_EQ(zs_zram_write(z, 4, page), 0);
	zs_zram_slot_info(z, 4, &size, &flags, NULL);
	CHECK((flags & ZS_ZRAM_F_HUGE) && size == PS);
	CHECK_EQ(zs_zram_read(z, 4, out, PS), 0);
	CHECK(!memcmp(out, page, PS));
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.huge_pages, 1);
	CHECK_EQ(st.huge_pages_since, 1);
	/* Overwrite huge with same-filled: old object freed, huge count drops, "since" stays. */
	memset(page, 0, PS);
	CHECK_EQ(zs_zram_write(z, 4, page), 0);
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.huge_pages, 0);
	CHECK_EQ(st.huge_pages_since, 1);
	CHECK_EQ(st.same_pages, 4);
	/* Overwrite same-filled with data and back. */
	memcpy(page, txt.data, PS);
	CHECK_EQ(zs_zram_write(z, 0, page), 0);
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.same_pages, 3);
	CHECK_EQ(st.pages_stored, 5);
	check_consistent(z, kind);

	/* Discard and free_notify. */
	CHECK_EQ(zs_zram_discard(z, 0), 0);
	CHECK_EQ(zs_zram_free_notify(z, 1), 0);
	CHECK_EQ(zs_zram_discard_range(z, 2, 3), 0);
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.pages_stored, 0);
	CHECK_EQ(st.same_pages, 0);
	CHECK_EQ(st.compr_data_size, 0);
	CHECK_EQ(st.notify_free, 5);
	CHECK_EQ(st.miss_free, 0);
	if (!strcmp(kind, "zsmalloc")) {
		zs_zram_compact(z);
		zs_zram_get_stats(z, &st, sizeof(st));
		CHECK_EQ(st.mem_used_total, 0);
	}
	zs_zram_destroy(z);
}

/*
 * The store rule's one home (zs/zram.h) and zs_page_size_valid: the pieces
 * alone, and the decision agreeing with what zs_zram_write stores.
 */
static void test_store_rule(uint64_t *seed)
{
	static unsigned char page[PS], buf[2 * PS], out[PS];
	unsigned long fill = 1;
	struct zs_zram_store_decision d;
	struct zs_comp *c = NULL;

	CHECK(!zs_page_size_valid(0) && !zs_page_size_valid(2048) && !zs_page_size_valid(4095));
	CHECK(zs_page_size_valid(4096) && zs_page_size_valid(16384) && zs_page_size_valid(65536));
	CHECK(!zs_page_size_valid(6144) && !zs_page_size_valid(131072) &&
	      !zs_page_size_valid((size_t)-1));

	memset(page, 0, PS);
	CHECK(zs_zram_page_same_filled(page, PS, &fill) && fill == 0);
	for (size_t i = 0; i < PS; i += 8)
		memcpy(page + i, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
	CHECK(zs_zram_page_same_filled(page, PS, &fill));
	CHECK(!memcmp(&fill, page, sizeof(fill)));
	CHECK(zs_zram_page_same_filled(page, PS, NULL));
	page[PS - 1] ^= 1;
	CHECK(!zs_zram_page_same_filled(page, PS, NULL));

	CHECK_EQ(zs_zram_store_kind(100, 3000), ZS_ZRAM_STORE_COMPRESSED);
	CHECK_EQ(zs_zram_store_kind(2999, 3000), ZS_ZRAM_STORE_COMPRESSED);
	CHECK_EQ(zs_zram_store_kind(3000, 3000), ZS_ZRAM_STORE_RAW);
	CHECK_EQ(zs_zram_store_kind(0, 3000), ZS_ZRAM_STORE_RAW);
	CHECK_EQ(zs_zram_store_kind(-22, 3000), ZS_ZRAM_STORE_RAW);

	REQUIRE(zs_comp_create(&(struct zs_comp_config){ .name = "lz4", .max_src = PS }, &c, NULL, 0) == 0);
	REQUIRE(zs_comp_bound(c, PS) <= sizeof(buf));
	memset(page, 0x5a, PS);
	CHECK_EQ(zs_zram_store_decide(c, page, PS, 3000, buf, sizeof(buf), &d), 0);
	CHECK(d.kind == ZS_ZRAM_STORE_SAME && d.len == 0 && !d.data && d.comp_len == 0);
	CHECK_EQ(d.fill, 0x5a5a5a5a5a5a5a5aull & (unsigned long)-1);
	fill_random(page, seed);
	CHECK_EQ(zs_zram_store_decide(c, page, PS, 3000, buf, sizeof(buf), &d), 0);
	CHECK(d.kind == ZS_ZRAM_STORE_RAW && d.data == page && d.len == PS && d.comp_len >= 3000);
	memcpy(page, txt.data, PS);
	CHECK_EQ(zs_zram_store_decide(c, page, PS, 3000, buf, sizeof(buf), &d), 0);
	CHECK(d.kind == ZS_ZRAM_STORE_COMPRESSED && d.data == buf && d.len == d.comp_len &&
	      d.len < 3000);
	CHECK_EQ(zs_decompress(c, buf, d.len, out, PS), PS);
	CHECK(!memcmp(out, page, PS));

	/* What the store keeps for real pages is what the decision says. */
	struct zs_zram *z = mk("zsmalloc", "lz4", 256, 0, 0);
	size_t huge = zs_backend_huge_class_size(zs_zram_backend(z));
	int kinds_seen[3] = { 0 };
	for (uint64_t i = 0; i < 256; i++) {
		const struct zs_pageset *src = i & 1 ? &bin : &txt;
		const unsigned char *pg = src->data + (i * 7 % src->npages) * PS;
		size_t size;
		unsigned flags;
		if (i % 16 == 0) {
			memset(page, (int)i, PS);
			pg = page;
		}
		CHECK_EQ(zs_zram_store_decide(c, pg, PS, huge, buf, sizeof(buf), &d), 0);
		CHECK_EQ(zs_zram_write(z, i, pg), 0);
		CHECK_EQ(zs_zram_slot_info(z, i, &size, &flags, NULL), 0);
		kinds_seen[d.kind]++;
		CHECK_EQ(!!(flags & ZS_ZRAM_F_SAME), d.kind == ZS_ZRAM_STORE_SAME);
		CHECK_EQ(!!(flags & ZS_ZRAM_F_HUGE), d.kind == ZS_ZRAM_STORE_RAW);
		CHECK_EQ(size, d.len);
	}
	CHECK(kinds_seen[ZS_ZRAM_STORE_SAME] > 0 && kinds_seen[ZS_ZRAM_STORE_COMPRESSED] > 0);
	zs_zram_destroy(z);
	zs_comp_destroy(c);
}

static void test_limit(const char *kind, uint64_t *seed)
{
	enum { N = 200, LIMIT_PAGES = 40 };
	struct zs_zram *z = mk(kind, "lz4", N, LIMIT_PAGES * PS, 0);
	unsigned char *pages = malloc((size_t)N * PS), out[PS], page[PS];
	struct zs_zram_stats st;
	int stored = 0, failed = 0;

	REQUIRE(pages);
	for (int i = 0; i < N; i++)
		fill_random(pages + (size_t)i * PS, seed);
	for (int i = 0; i < N; i++) {
		int rc = zs_zram_write(z, (uint64_t)i, pages + (size_t)i * PS);

		if (rc == 0)
			stored = i + 1;
		else {
			CHECK_EQ(rc, -ENOMEM);
			failed++;
		}
		if (rc)
			break;
	}
	CHECK(failed == 1 && stored > 0 && stored <= LIMIT_PAGES);
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.failed_writes, 1);
	CHECK_EQ(st.pages_stored, stored);
	CHECK(st.mem_used_total <= (uint64_t)LIMIT_PAGES * PS);
	CHECK(st.mem_used_max > (uint64_t)LIMIT_PAGES * PS);  /* the failed allocation's peak */
	CHECK_EQ(st.mem_limit, (uint64_t)LIMIT_PAGES * PS);
	/* Overwriting a stored slot past the limit fails and keeps the old page. */
	fill_random(page, seed);
	CHECK_EQ(zs_zram_write(z, 0, page), -ENOMEM);
	/* Same-filled pages allocate nothing, so they still go in. */
	memset(page, 0, PS);
	CHECK_EQ(zs_zram_write(z, (uint64_t)stored + 1, page), 0);
	for (int i = 0; i < stored; i++) {
		CHECK_EQ(zs_zram_read(z, (uint64_t)i, out, PS), 0);
		CHECK(!memcmp(out, pages + (size_t)i * PS, PS));
	}
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.failed_writes, 2);
	CHECK_EQ(st.pages_stored, stored + 1);
	check_consistent(z, kind);
	/* Freeing makes room again; mem_used_max can be reset to current usage. */
	zs_zram_discard_range(z, 0, (uint64_t)stored / 2);
	zs_zram_compact(z);
	CHECK_EQ(zs_zram_write(z, 0, pages), 0);
	zs_zram_reset_mem_used_max(z);
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.mem_used_max, st.mem_used_total);
	zs_zram_destroy(z);
	free(pages);
}

/*
 * A store with deferred frees at its limit: slots discarded just before are
 * queued, not yet freed, and with no worker (deferred_worker -1) they stay
 * queued until something flushes.  Writes into the room they leave must
 * succeed: the store waits for its own queued frees before it says -ENOMEM.
 */
static void test_limit_deferred(const char *kind, uint64_t *seed)
{
	enum { N = 200, LIMIT_PAGES = 40 };
	struct zs_zram_config cfg;
	struct zs_zram *z = NULL;
	unsigned char *pages = malloc((size_t)N * PS), out[PS];
	int stored = 0;

	REQUIRE(pages);
	zs_zram_config_init(&cfg);
	cfg.backend.kind = kind;
	cfg.backend.zs.deferred_worker = -1;
	cfg.disksize = (uint64_t)N * PS;
	cfg.mem_limit = (uint64_t)LIMIT_PAGES * PS;
	cfg.deferred_free = 1;
	REQUIRE(zs_zram_create(&cfg, &z, NULL, 0) == 0 && z);
	for (int i = 0; i < N; i++)
		fill_random(pages + (size_t)i * PS, seed);
	while (stored < N && zs_zram_write(z, (uint64_t)stored, pages + (size_t)stored * PS) == 0)
		stored++;
	CHECK(stored > 4 && stored < N);
	int half = stored / 2, refilled = 0;
	CHECK_EQ(zs_zram_discard_range(z, 0, (uint64_t)half), 0);
	/* New pages into the discarded slots: each fits in the room the discard left. */
	for (int i = 0; i < half; i++) {
		int rc = zs_zram_write(z, (uint64_t)i, pages + (size_t)(N - 1 - i) * PS);
		if (rc) {
			printf("  %s: write %d of %d after the discard: %d\n", kind, i, half, rc);
			break;
		}
		refilled++;
	}
	CHECK_EQ(refilled, half);
	unsigned long bad = 0;
	for (int i = 0; i < stored; i++) {
		const unsigned char *want = pages + (size_t)(i < refilled ? N - 1 - i : i) * PS;
		bad += zs_zram_read(z, (uint64_t)i, out, PS) != 0 || memcmp(out, want, PS) != 0;
	}
	CHECK_EQ(bad, 0);
	check_consistent(z, kind);
	zs_zram_destroy(z);
	free(pages);
}

static void test_idle_recompress(const char *kind, uint64_t *seed)
{
	size_t n = txt.npages < 512 ? txt.npages : 512;
	struct zs_zram *z = mk(kind, "lz4", n + 4, 0, 0);
	struct zs_zram_recomp_result r;
	struct zs_zram_stats st0, st;
	unsigned char out[PS], rnd[PS], zero[PS] = { 0 };
	unsigned long bad = 0;
	unsigned prio, flags;

	for (size_t i = 0; i < n; i++)
		zs_zram_write(z, i, txt.data + i * PS);
	fill_random(rnd, seed);
	zs_zram_write(z, n, rnd);
	zs_zram_write(z, n + 1, zero);

	CHECK_EQ(zs_zram_mark_idle(z, 3600), 0);   /* nothing that old */
	CHECK(zs_zram_mark_idle(z, 0) >= (long)n); /* all but the same-filled one */
	zs_zram_slot_info(z, n + 1, NULL, &flags, NULL);
	CHECK(!(flags & ZS_ZRAM_F_IDLE));
	/* A read clears idle. */
	zs_zram_read(z, 0, out, PS);
	zs_zram_slot_info(z, 0, NULL, &flags, NULL);
	CHECK(!(flags & ZS_ZRAM_F_IDLE));

	zs_zram_get_stats(z, &st0, sizeof(st0));
	CHECK_EQ(zs_zram_recompress(z, ZS_ZRAM_RECOMP_IDLE, 0, 0, &r), 0);
	CHECK_EQ(r.scanned, n);  /* slot 0 was read, the random page is idle too */
	CHECK(r.recompressed > 0);
	CHECK_EQ(r.recompressed + r.incompressible, r.scanned);
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK(st.compr_data_size < st0.compr_data_size);
	CHECK_EQ(st.incompressible_pages, r.incompressible);
	check_consistent(z, kind);
	/* The random page could not gain: marked, and never tried again. */
	zs_zram_slot_info(z, n, NULL, &flags, &prio);
	CHECK((flags & ZS_ZRAM_F_INCOMPRESSIBLE) && prio == 0);
	CHECK_EQ(zs_zram_recompress(z, ZS_ZRAM_RECOMP_HUGE, 0, 0, &r), 0);
	CHECK_EQ(r.scanned, 0);
	for (size_t i = 0; i < n; i++)
		bad += zs_zram_read(z, i, out, PS) || memcmp(out, txt.data + i * PS, PS);
	CHECK_EQ(bad, 0);
	CHECK_EQ(zs_zram_read(z, n, out, PS), 0);
	CHECK(!memcmp(out, rnd, PS));
	/* A rewrite clears incompressible and priority. */
	zs_zram_write(z, n, rnd);
	zs_zram_slot_info(z, n, NULL, &flags, &prio);
	CHECK(!(flags & ZS_ZRAM_F_INCOMPRESSIBLE) && prio == 0);
	CHECK_EQ(zs_zram_recompress(z, ZS_ZRAM_RECOMP_ALL, 100000, 0, &r), -EINVAL);
	zs_zram_destroy(z);
}

static void test_deferred(const char *kind)
{
	size_t n = bin.npages < 1024 ? bin.npages : 1024;
	struct zs_zram *z = mk(kind, "lz4", n, 0, 1);
	unsigned char out[PS];
	struct zs_zram_stats st;
	unsigned long bad = 0;

	for (int round = 0; round < 3; round++)
		for (size_t i = 0; i < n; i++)
			zs_zram_write(z, i, bin.data + ((i + (size_t)round) % n) * PS);
	for (size_t i = 0; i < n; i++)
		bad += zs_zram_read(z, i, out, PS) || memcmp(out, bin.data + ((i + 2) % n) * PS, PS);
	CHECK_EQ(bad, 0);
	zs_zram_flush(z);
	check_consistent(z, kind);
	zs_zram_discard_range(z, 0, n);
	zs_zram_flush(z);
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.pages_stored, 0);
	if (!strcmp(kind, "zsmalloc")) {
		zs_zram_compact(z);
		zs_zram_get_stats(z, &st, sizeof(st));
		CHECK_EQ(st.mem_used_total, 0);
	}
	zs_zram_destroy(z);
}

static void test_bad_input(void)
{
	struct zs_zram_config cfg;
	struct zs_zram *z;
	unsigned char page[PS] = { 1 }, big[2 * PS];
	struct zs_zram_stats st;

	zs_zram_config_init(&cfg);
	cfg.comp = "nope";
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), -EINVAL);
	CHECK(z == NULL);
	cfg.comp = "lzo-rle";
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), -EOPNOTSUPP);
	cfg.comp = "lz4";
	cfg.recomp = "zstd:1000";
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), -EINVAL);
	cfg.recomp = NULL;
	cfg.page_size = 5000;
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), -EINVAL);
	cfg.page_size = PS;
	cfg.disksize = PS - 1;
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), -EINVAL);
	cfg.disksize = 16 * PS;
	cfg.backend.kind = "nosuchkind";
	CHECK(zs_zram_create(&cfg, &z, NULL, 0) < 0);
	cfg.backend.kind = "zsmalloc";
	REQUIRE(zs_zram_create(&cfg, &z, NULL, 0) == 0);
	CHECK_EQ(zs_zram_slots(z), 16);
	CHECK_EQ(zs_zram_write(z, 16, page), -EINVAL);
	CHECK_EQ(zs_zram_write(z, UINT64_MAX, page), -EINVAL);
	CHECK_EQ(zs_zram_write(z, 0, NULL), -EINVAL);
	CHECK_EQ(zs_zram_read(z, 16, page, PS), -EINVAL);
	CHECK_EQ(zs_zram_read(z, 0, page, PS - 1), -EINVAL);
	CHECK_EQ(zs_zram_read(z, 0, NULL, PS), -EINVAL);
	CHECK_EQ(zs_zram_discard(z, 16), -EINVAL);
	CHECK_EQ(zs_zram_free_notify(z, 16), -EINVAL);
	CHECK_EQ(zs_zram_write_range(z, 15, 2, big), -EINVAL);
	CHECK_EQ(zs_zram_read_range(z, 0, 2, big, 2 * PS - 1), -EINVAL);
	CHECK_EQ(zs_zram_discard_range(z, 10, 7), -EINVAL);
	CHECK_EQ(zs_zram_slot_info(z, 16, NULL, NULL, NULL), -EINVAL);
	CHECK_EQ(zs_zram_recompress(z, ZS_ZRAM_RECOMP_ALL, 0, 0, NULL), -EINVAL); /* no secondary */
	CHECK_EQ(zs_zram_mark_idle(z, 10), -EINVAL);  /* no actime tracking */
	/* Ranges work when in bounds. */
	memcpy(big, txt.data, 2 * PS);
	CHECK_EQ(zs_zram_write_range(z, 14, 2, big), 0);
	memset(big, 0, sizeof(big));
	CHECK_EQ(zs_zram_read_range(z, 14, 2, big, sizeof(big)), 0);
	CHECK(!memcmp(big, txt.data, 2 * PS));
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.invalid_io, 11);
	CHECK_EQ(st.failed_writes, 0);
	zs_zram_destroy(z);
}

/*
 * zram.h's remaining bad-input promises: ranges whose end wraps past
 * UINT64_MAX or that start at the last slot + 1 are -EINVAL and touch no
 * slot; recompress's threshold must be below the huge class size (the size
 * itself refused, one less taken); a nonzero idle age works with
 * track_actime; mem_limit is rounded up to whole pages.
 */
static void test_bad_input_edges(void)
{
	unsigned char big[2 * PS], out[PS];
	struct zs_zram_stats st;
	struct zs_zram *z = mk("zsmalloc", "lz4", 16, ((uint64_t)1 << 20) + 1, 0);

	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.mem_limit, ((uint64_t)1 << 20) + PS);
	memcpy(big, txt.data, 2 * PS);
	CHECK_EQ(zs_zram_write_range(z, 14, 2, big), 0);
	CHECK_EQ(zs_zram_write_range(z, 1, UINT64_MAX, big), -EINVAL);
	CHECK_EQ(zs_zram_write_range(z, 16, 0, big), -EINVAL);
	CHECK_EQ(zs_zram_read_range(z, 15, UINT64_MAX - 14, big, sizeof(big)), -EINVAL);
	CHECK_EQ(zs_zram_discard_range(z, 14, UINT64_MAX - 13), -EINVAL);
	CHECK_EQ(zs_zram_discard_range(z, UINT64_MAX, 2), -EINVAL);
	CHECK_EQ(zs_zram_slot_info(z, UINT64_MAX, NULL, NULL, NULL), -EINVAL);
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.invalid_io, 5);     /* slot_info is no I/O: not counted */
	CHECK_EQ(st.pages_stored, 2);   /* the refused calls left slots 14-15 */
	for (uint64_t i = 14; i < 16; i++) {
		CHECK_EQ(zs_zram_read(z, i, out, PS), 0);
		CHECK(!memcmp(out, txt.data + (i - 14) * PS, PS));
	}

	size_t huge = zs_backend_huge_class_size(zs_zram_backend(z));
	struct zs_zram_recomp_result r;
	CHECK_EQ(zs_zram_recompress(z, ZS_ZRAM_RECOMP_ALL, huge, 0, &r), -EINVAL);
	CHECK_EQ(zs_zram_recompress(z, ZS_ZRAM_RECOMP_ALL, huge - 1, 0, &r), 0);
	CHECK_EQ(r.scanned, 2);
	CHECK_EQ(zs_zram_mark_idle(z, 3600), 0);   /* track_actime: nothing that old */
	CHECK_EQ(zs_zram_mark_idle(z, 0), 2);
	zs_zram_destroy(z);

	/* create_err: a reason on failure, the empty string on success (after a failure). */
	struct zs_zram_config cfg;
	char why[200];
	zs_zram_config_init(&cfg);
	cfg.disksize = 0;
	CHECK_EQ(zs_zram_create(&cfg, &z, why, sizeof(why)), -EINVAL);
	CHECK(z == NULL && why[0] != 0);
	CHECK_EQ(zs_zram_create(&cfg, &z, why, 1), -EINVAL);   /* truncated to fit */
	CHECK_EQ(why[0], 0);
	memset(why, 'x', sizeof(why));
	cfg.disksize = 4 * PS;
	CHECK_EQ(zs_zram_create(&cfg, &z, why, sizeof(why)), 0);
	CHECK_EQ(why[0], 0);
	zs_zram_destroy(z);
}

int main(void)
{
	uint64_t seed = tu_seed("test_zram");
	char *pbin[] = { "/usr/bin" }, *ptxt[] = { "/usr/include", "/usr/share/perl5" };
	const char *const *kinds = zs_backend_kinds();

	REQUIRE(zs_pageset_load(&bin, PS, pbin, 1, 16u << 20) == 0);
	REQUIRE(zs_pageset_load(&txt, PS, ptxt, 2, 8u << 20) == 0);
	REQUIRE(bin.npages > 100 && txt.npages > 100);

	test_bad_input();
	test_bad_input_edges();
	test_store_rule(&seed);
	for (int k = 0; kinds[k]; k++) {
		const char *kind = kinds[k];
		int is_malloc = !strcmp(kind, "malloc") || !strcmp(kind, "jemalloc") ||
				!strcmp(kind, "mimalloc");

		printf("backend %s\n", kind);
		for (int c = 0; comps[c]; c++) {
			test_roundtrip(kind, &bin, comps[c]);
			test_roundtrip(kind, &txt, comps[c]);
		}
		test_same_and_huge(kind, &seed);
		/* malloc kinds report process-wide heap bytes: no per-store limit to test. */
		if (!is_malloc) {
			test_limit(kind, &seed);
			test_limit_deferred(kind, &seed);
		}
		test_idle_recompress(kind, &seed);
		test_deferred(kind);
	}
	zs_pageset_free(&bin);
	zs_pageset_free(&txt);
	return tu_done();
}
