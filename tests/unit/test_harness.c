/*
 * The harness's promises (include/zs/harness.h): the one page
 * loader's two layouts and two directory walks, its byte bounds, and the
 * malloc baselines registered in a harness program before main() (so that
 * libzs itself needs no load-time code).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "zs/backend.h"
#include "zs/harness.h"
#include "must.h"

static char dir[64];

static void put(const char *name, size_t len, int byte)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	REQUIRE(f);
	for (size_t i = 0; i < len; i++)
		fputc(byte, f);
	fclose(f);
}

/* Bytes [off, off + len) of the set all equal `byte`. */
static int run_of(const struct zs_pageset *ps, size_t off, size_t len, int byte)
{
	for (size_t i = 0; i < len; i++)
		if (ps->data[off + i] != (unsigned char)byte)
			return 0;
	return 1;
}

static void test_layouts(void)
{
	char sub[128];
	/* Top level: b (100 x 'b'), a (5000 x 'a'), .hidden; sub/c (10 x 'c'). */
	put("b", 100, 'b');
	put("a", 5000, 'a');
	put(".hidden", 10, 'h');
	snprintf(sub, sizeof(sub), "%s/sub", dir);
	REQUIRE(mkdir(sub, 0700) == 0);
	put("sub/c", 10, 'c');

	/* Packed, top level: a then b back to back (sorted, no hidden file, no subdirectory). */
	struct zs_pageset ps;
	REQUIRE(zs_pageset_init(&ps, 4096, 1 << 20) == 0);
	CHECK_EQ(zs_pageset_add(&ps, dir, 0, ZS_PAGESET_PACK | ZS_PAGESET_TOP_LEVEL), 0);
	CHECK_EQ(ps.len, 5100);
	CHECK_EQ(ps.files, 2);
	CHECK_EQ(ps.npages, 2);
	CHECK(run_of(&ps, 0, 5000, 'a') && run_of(&ps, 5000, 100, 'b') && run_of(&ps, 5100, 100, 0));
	/* A byte bound per call, and the set's capacity. */
	CHECK_EQ(zs_pageset_add(&ps, dir, 50, ZS_PAGESET_PACK | ZS_PAGESET_TOP_LEVEL), 0);
	CHECK_EQ(ps.len, 5150);
	CHECK(run_of(&ps, 5100, 50, 'a'));
	zs_pageset_free(&ps);
	REQUIRE(zs_pageset_init(&ps, 4096, 4096) == 0);
	CHECK_EQ(zs_pageset_add(&ps, dir, 0, ZS_PAGESET_PACK | ZS_PAGESET_TOP_LEVEL), 0);
	CHECK_EQ(ps.len, 4096);
	CHECK_EQ(zs_pageset_add(&ps, dir, 0, ZS_PAGESET_PACK), 0);
	CHECK_EQ(ps.len, 4096);
	zs_pageset_free(&ps);

	/* Padded, recursive (zs_pageset_load): every file from a page boundary, hidden and
	 * nested ones included; each file's last page zero padded. */
	char *paths[] = { dir };
	REQUIRE(zs_pageset_load(&ps, 4096, paths, 1, 0) == 0);
	CHECK_EQ(ps.files, 4);
	CHECK_EQ(ps.npages, 5); /* a: 2 pages, b, .hidden, sub/c: 1 each */
	CHECK_EQ(ps.len, 5 * 4096);
	CHECK_EQ(ps.file_bytes, 5120);
	size_t a_pages = 0, other = 0;
	for (size_t i = 0; i < ps.npages; i++) {
		const unsigned char *pg = ps.data + i * 4096;
		if (pg[0] == 'a')
			a_pages++;
		else
			other += run_of(&ps, i * 4096 + 100, 4096 - 100, 0);
	}
	CHECK_EQ(a_pages, 2);
	CHECK_EQ(other, 3);
	zs_pageset_free(&ps);
	/* max_bytes bounds the pages. */
	REQUIRE(zs_pageset_load(&ps, 4096, paths, 1, 2 * 4096) == 0);
	CHECK_EQ(ps.npages, 2);
	zs_pageset_free(&ps);
	/* A page size that is not a power of two is refused. */
	CHECK_EQ(zs_pageset_load(&ps, 3000, paths, 1, 0), -EINVAL);
	CHECK_EQ(zs_pageset_init(&ps, 0, 4096), -EINVAL);
}

static void test_baselines_registered(void)
{
	/* register.c's constructor ran before main: the baselines are kinds here. */
	int seen = 0;
	for (const char *const *k = zs_backend_kinds(); *k; k++)
		seen |= !strcmp(*k, "malloc");
	CHECK(seen);
	struct zs_backend_config cfg;
	zs_backend_config_init(&cfg);
	cfg.kind = "malloc";
	struct zs_backend *b = must_backend_create(&cfg);
	CHECK(b != NULL);
	zs_backend_destroy(b);
	zs_harness_register(); /* idempotent: no second "malloc" */
	int n = 0;
	for (const char *const *k = zs_backend_kinds(); *k; k++)
		n += !strcmp(*k, "malloc");
	CHECK_EQ(n, 1);
	CHECK(zs_process_rss() > 0);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/zs-harness-%d", (int)getpid());
	REQUIRE(mkdir(dir, 0700) == 0);
	test_layouts();
	test_baselines_registered();
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return tu_done();
}
