/*
 * The kernel's per-class zsmalloc table, as debugfs shows it
 * (/sys/kernel/debug/zsmalloc/POOL/classes, CONFIG_ZSMALLOC_STAT): `zs
 * record` captures it into a trace's `k` lines and `zs replay` compares
 * libzs's classes with it.  The parser reads the columns by their header
 * names, so it takes both layouts the kernel has printed (the older
 * almost_full/almost_empty columns and the newer fullness percentages).
 */
#ifndef ZS_TOOLS_KCLASSES_H
#define ZS_TOOLS_KCLASSES_H

#include <stddef.h>
#include <stdint.h>

struct kclass_row {
	unsigned cls;
	uint64_t obj_allocated, obj_used, pages_used;
};

/* The debugfs file of the pool zram device N uses (its pool is named zramN). */
void kclasses_path(int dev, char *buf, size_t len);

/*
 * Rows of `text` with objects allocated (classes never used are left out, as
 * `k` lines leave them).  Returns how many (at most max), or -1 with a reason
 * in err when the header lacks a column or a row is malformed.
 */
int kclasses_parse(const char *text, struct kclass_row *rows, int max, char *err, size_t errlen);

#endif
