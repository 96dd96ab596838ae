/*
 * The kernel's debugfs class-table parser (tools/lib/kclasses.c), which
 * `zs record` uses on kernels with CONFIG_ZSMALLOC_STAT.  This machine's
 * kernel has the option off, so the table is fed from two sources whose
 * layout the kernel prints: libzs's own zs_print_classes (the newer layout,
 * fullness percentages) checked row by row against zs_class_stats, and a
 * table in the older layout (almost_full / almost_empty columns).  Bad
 * tables are refused with the reason.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kclasses.h"
#include "testutil.h"
#include "zs/zsmalloc.h"
#include "must.h"

static void newer_layout_from_libzs(void)
{
	struct zs_pool_config c;
	zs_pool_config_init(&c);
	struct zs_pool *p = must_pool_create(&c);
	REQUIRE(p != NULL);
	uint64_t seed = tu_seed("test_kclasses");
	for (int i = 0; i < 3000; i++)
		zs_malloc(p, 1 + tu_rand(&seed) % 4000);
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	zs_print_classes(p, f);
	fclose(f);
	struct kclass_row rows[512];
	char err[128] = "";
	int n = kclasses_parse(text, rows, 512, err, sizeof err);
	int want = 0;
	for (int i = 0; i < zs_class_count(p); i++) {
		struct zs_class_stats st;
		if (!zs_class_stats(p, i, &st, sizeof(st)) && st.obj_allocated)
			want++;
	}
	CHECK_EQ(n, want);
	for (int i = 0; i < n; i++) {
		struct zs_class_stats st;
		CHECK_EQ(zs_class_stats(p, (int)rows[i].cls, &st, sizeof(st)), 0);
		CHECK_EQ(rows[i].obj_allocated, st.obj_allocated);
		CHECK_EQ(rows[i].obj_used, st.obj_used);
		CHECK_EQ(rows[i].pages_used, st.pages_used);
	}
	printf("newer layout: %d classes with objects, every row equal to zs_class_stats\n", n);
	free(text);
	zs_destroy_pool(p);
}

static void older_layout(void)
{
	const char *t =
		" class  size almost_full almost_empty obj_allocated   obj_used pages_used "
		"pages_per_zspage freeable\n"
		"     0    32            0            0             0          0          0 "
		"               1        0\n"
		"     9   176            1            2           115        100          5 "
		"               5        0\n"
		"   254  4096            0            0             7          7          7 "
		"               1        0\n"
		"\n"
		" Total                  1            2           122        107         12 "
		"                        0\n";
	struct kclass_row rows[8];
	char err[128] = "";
	int n = kclasses_parse(t, rows, 8, err, sizeof err);
	CHECK_EQ(n, 2);
	CHECK_EQ(rows[0].cls, 9u);
	CHECK_EQ(rows[0].obj_allocated, 115u);
	CHECK_EQ(rows[0].obj_used, 100u);
	CHECK_EQ(rows[0].pages_used, 5u);
	CHECK_EQ(rows[1].cls, 254u);
	CHECK_EQ(rows[1].pages_used, 7u);
	printf("older layout: 2 classes with objects read by column name, empty class and Total "
	       "left out\n");
}

static void refusals(void)
{
	struct kclass_row rows[8];
	char err[128];
	CHECK_EQ(kclasses_parse(" class size obj_used pages_used\n 1 32 4 1\n", rows, 8, err,
				sizeof err), -1);
	CHECK(strstr(err, "obj_allocated") != NULL);
	CHECK_EQ(kclasses_parse(" class obj_allocated obj_used pages_used\n 1 4 4\n", rows, 8, err,
				sizeof err), -1);
	CHECK(strstr(err, "columns") != NULL);
	CHECK_EQ(kclasses_parse(" class obj_allocated obj_used pages_used\n 1 4x 4 1\n", rows, 8,
				err, sizeof err), -1);
	CHECK(strstr(err, "not a number") != NULL);
	CHECK_EQ(kclasses_parse("", rows, 8, err, sizeof err), -1);
	CHECK(strstr(err, "empty") != NULL);
	printf("refused: a missing column, a short row, a bad number, an empty table\n");
}

int main(void)
{
	newer_layout_from_libzs();
	older_layout();
	refusals();
	return tu_done();
}
