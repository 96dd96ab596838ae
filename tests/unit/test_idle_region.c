/*
 * For a region: memory goes back while the program is
 * idle.  A region of 320 MiB filled with half-compressible pages, paged out
 * into its store (~160 MiB of pool pages, past the page cache's 128 MiB
 * budget), then released whole (the stored objects are freed), then 1.5 s
 * with no libzs call: RSS back within 8 MiB of where it was before the
 * fill.  In the kernel profile and the application profile (its store's
 * emptied zspages parked in their class, src/zsmalloc/park.c).  Skipped
 * (exit 77) where userfaultfd is not available.
 */
#include "testutil.h"
#include "idle.h"
#include "forkcase.h"
#include "zs/region.h"

#include <stdlib.h>
#include <string.h>

#define PAGE 4096
#define NPAGES (80 * 1024)

static void region_case(int app)
{
	char err[512];
	struct zs_region_config c;
	if (app)
		zs_region_config_init_app(&c);
	else
		zs_region_config_init(&c);
	c.size = (size_t)NPAGES * PAGE;
	struct zs_region *r;
	REQUIRE(zs_region_create(&c, &r, err, sizeof err) == 0);
	unsigned char *a = zs_region_addr(r);
	size_t rss0 = idle_rss();
	for (size_t i = 0; i < NPAGES; i++)
		idle_fill_page(a + i * PAGE, PAGE, PAGE / 2, i + 7);
	size_t rss_touched = idle_rss();
	REQUIRE(zs_region_pageout(r, a, c.size) == (long)NPAGES);
	struct zs_region_stats st;
	REQUIRE(zs_region_get_stats(r, &st, sizeof(st)) == 0);
	size_t rss_out = idle_rss();
	REQUIRE(zs_region_release(r, a, c.size) == 0);
	size_t rss_released = idle_rss();
	unsigned waited = idle_wait(rss0 + 8 * IDLE_MIB, 1500, 20000);
	size_t rss_idle = idle_rss();
	printf("region (%s profile): %.1f MiB in the store; touched %+.1f MiB, paged out %+.1f, released %+.1f, "
	       "after %.1f s idle %+.1f\n",
	       app ? "application" : "kernel", (double)st.store.mem_used_total / (double)IDLE_MIB,
	       idle_mib(rss_touched, rss0),
	       idle_mib(rss_out, rss0), idle_mib(rss_released, rss0), waited / 1000.0,
	       idle_mib(rss_idle, rss0));
	CHECK(st.store.mem_used_total > 140 * IDLE_MIB);
	if (IDLE_RSS_MEANINGFUL) {
		CHECK(rss_out > rss0 + 140 * IDLE_MIB);
		CHECK(rss_idle <= rss0 + 8 * IDLE_MIB);
	}
	CHECK_EQ(idle_purge_threads(), 0);
	zs_region_destroy(r);
}

int main(void)
{
	fc_skip_without_uffd();
	region_case(0);
	region_case(1);
	return tu_done();
}
