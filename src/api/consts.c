/*
 * Public constants by name, for bindings that cannot read the headers
 * (Python's ctypes used to carry its own copies of flag bits, enum values
 * and limits, which could drift from C).  Each entry is built from the macro
 * or enumerator itself, so the table cannot disagree with the headers; a
 * constant a binding needs is added here once.
 */
#include <errno.h>
#include <string.h>

#include "zs/common.h"
#include "zs/compress.h"
#include "zs/pages.h"
#include "zs/region.h"
#include "zs/zram.h"
#include "zs/zsmalloc.h"

#define ZS_CONSTS(X) \
	X(ZS_MIN_ALLOC_SIZE) X(ZS_MAX_CHAIN) X(ZS_NR_FULLNESS_GROUPS) X(ZS_HANDLE_SIZE) \
	X(ZS_MAX_CLASS_SHARDS) X(ZS_CLASS_SHARDS_AUTO) X(ZS_MAX_DEFERRED_CAPACITY) \
	X(ZS_CHAIN_POLICY_COUNT) X(ZS_FREE_MODE_COUNT) \
	X(ZS_PAGES_NO_CACHE) X(ZS_PAGES_DECAY_NEVER) X(ZS_PAGE_SIZE_MIN) X(ZS_PAGE_SIZE_MAX) \
	X(ZS_PAGE_SIZE_DEFAULT) \
	X(ZS_COMP_MAX_SRC) X(ZS_COMP_MAX_DICT) \
	X(ZS_ZRAM_MAX_SLOTS) X(ZS_ZRAM_MAX_STREAMS) X(ZS_ZRAM_MAX_MEM_LIMIT) \
	X(ZS_ZRAM_F_SAME) X(ZS_ZRAM_F_WB) X(ZS_ZRAM_F_HUGE) X(ZS_ZRAM_F_IDLE) \
	X(ZS_ZRAM_F_INCOMPRESSIBLE) \
	X(ZS_ZRAM_RECOMP_ALL) X(ZS_ZRAM_RECOMP_IDLE) X(ZS_ZRAM_RECOMP_HUGE) \
	X(ZS_ZRAM_RECOMP_HUGE_IDLE) \
	X(ZS_ZRAM_WB_IDLE) X(ZS_ZRAM_WB_HUGE) X(ZS_ZRAM_WB_HUGE_IDLE) X(ZS_ZRAM_WB_INCOMPRESSIBLE) \
	X(ZS_REGION_COLD) X(ZS_REGION_HOT) X(ZS_REGION_PAGEOUT) X(ZS_REGION_NO_SPIN) \
	X(ZS_REGION_LAT_BUCKETS)

#define ZS_CONST_NAME(n) #n,
#define ZS_CONST_VALUE(n) (unsigned long long)(n),
/* Every registered chain policy and free mode (zs/zsmalloc.h), so a new one
 * reaches the bindings without an edit here. */
#define ZS_CHAIN_CONST_NAME(id, fn, name, help) "ZS_CHAIN_" #id,
#define ZS_CHAIN_CONST_VALUE(id, fn, name, help) (unsigned long long)ZS_CHAIN_##id,
#define ZS_FREE_CONST_NAME(id, fn, name, help) "ZS_FREE_" #id,
#define ZS_FREE_CONST_VALUE(id, fn, name, help) (unsigned long long)ZS_FREE_##id,

static const char *const names[] = { ZS_CONSTS(ZS_CONST_NAME)
	ZS_CHAIN_POLICIES(ZS_CHAIN_CONST_NAME) ZS_FREE_MODES(ZS_FREE_CONST_NAME) NULL };
static const unsigned long long values[] = { ZS_CONSTS(ZS_CONST_VALUE)
	ZS_CHAIN_POLICIES(ZS_CHAIN_CONST_VALUE) ZS_FREE_MODES(ZS_FREE_CONST_VALUE) };
_Static_assert(sizeof(names) / sizeof(names[0]) == sizeof(values) / sizeof(values[0]) + 1,
	       "one name per value");

int zs_const(const char *name, unsigned long long *value)
{
	if (!name)
		return -ENOENT;
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		if (!strcmp(names[i], name)) {
			if (value)
				*value = values[i];
			return 0;
		}
	}
	return -ENOENT;
}

const char *const *zs_const_names(void)
{
	return names;
}
