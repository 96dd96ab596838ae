/*
 * The pool gives memory back, shown: "after freeing everything and
 * compacting, the pool holds 0 pages and the process RSS is back within
 * 1 MiB of where it started".  At 4K and 16K pool pages: note the RSS after
 * creating the pool, fill ~64 MiB of objects of mixed sizes (written, so the
 * pages are really resident), free them all in random order, zs_compact,
 * zs_pool_trim, then require 0 pool pages and RSS within 1 MiB of the start.
 * The growth in between is checked too, so a stuck RSS reading cannot pass.
 * Both RSS numbers are printed.  Under TSan RSS is meaningless (shadow
 * memory), so only the page counts are checked there.
 */
#include "testutil.h"
#include "zs/pages.h"
#include "zs/zsmalloc.h"
#include "zs/harness.h"

#include <string.h>
#include "must.h"

#include "sanitizer.h"
#define RSS_MEANINGFUL (!TU_TSAN)

#define MIB ((size_t)1 << 20)
#define TARGET (64 * MIB)
#define MAXOBJ 262144

static unsigned long handles[MAXOBJ];
static unsigned char wbuf[65536];

static void run(size_t ps, uint64_t seed)
{
	struct zs_pool_config c;
	zs_pool_config_init(&c);
	c.page_size = ps;
	c.deferred_worker = -1;
	struct zs_pool *p = must_pool_create(&c);
	REQUIRE(p);
	/* Touch everything the test itself uses before the first reading. */
	memset(handles, 0, sizeof(handles));
	memset(wbuf, 0xa5, sizeof(wbuf));
	size_t rss0 = zs_process_rss();
	REQUIRE(rss0 > 0);

	size_t bytes = 0;
	int n = 0;
	uint64_t s = seed;
	while (bytes < TARGET && n < MAXOBJ) {
		uint64_t r = tu_rand(&s);
		/* Mixed: mostly compressed-page-like sizes, some small, some huge. */
		size_t sz;
		switch (r % 4) {
		case 0:
			sz = 1 + (r >> 8) % 256;
			break;
		case 1:
		case 2:
			sz = 1 + (r >> 8) % ps;
			break;
		default:
			sz = ps - (r >> 8) % (ps / 8);
			break;
		}
		unsigned long h = zs_malloc(p, sz);
		REQUIRE(!ZS_IS_ERR(h));
		wbuf[0] = (unsigned char)n;
		CHECK_EQ(zs_obj_write(p, h, wbuf, sz), 0);
		handles[n++] = h;
		bytes += sz;
	}
	size_t rss_full = zs_process_rss();
	unsigned long pages_full = zs_get_total_pages(p);
	CHECK(pages_full * ps >= bytes);

	for (int i = n - 1; i > 0; i--) {
		int j = (int)(tu_rand(&s) % (uint64_t)(i + 1));
		unsigned long t = handles[i];
		handles[i] = handles[j];
		handles[j] = t;
	}
	for (int i = 0; i < n; i++)
		CHECK_EQ(zs_free(p, handles[i]), 0);
	zs_compact(p);
	zs_pool_trim(p);
	size_t rss_end = zs_process_rss();
	CHECK_EQ(zs_get_total_pages(p), 0);
	CHECK_EQ(zs_pool_objects(p), 0);
	printf("page size %zu: %d objects, %zu MiB written in %lu pool pages (%zu MiB); "
	       "RSS start %zu KiB, full %zu KiB, end %zu KiB (end - start %+ld KiB)\n",
	       ps, n, bytes / MIB, pages_full, pages_full * ps / MIB, rss0 / 1024, rss_full / 1024,
	       rss_end / 1024, ((long)rss_end - (long)rss0) / 1024);
	if (RSS_MEANINGFUL) {
		CHECK(rss_full >= rss0 + TARGET * 3 / 4);
		CHECK(rss_end <= rss0 + MIB);
		CHECK(rss_end + MIB >= rss0);
	}
	zs_destroy_pool(p);
}

int main(void)
{
	uint64_t seed = tu_seed("test_zs_rss");
	if (!RSS_MEANINGFUL)
		printf("RSS checks skipped under ThreadSanitizer (shadow memory)\n");
	run(4096, seed);
	run(16384, seed + 1);
	return tu_done();
}
