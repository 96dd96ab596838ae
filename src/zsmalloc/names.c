/*
 * The names of zsmalloc's named choices (chain policy, free mode): one table
 * each, so the zs tool, the benchmarks, the report and the Python package
 * all spell and parse them the same way (they used to carry four spellings).
 */
#include <errno.h>
#include <string.h>

#include "zs/zsmalloc.h"

static const char *const chain_names[] = {
	[ZS_CHAIN_EXHAUSTIVE] = "exhaustive",
	[ZS_CHAIN_HEURISTIC] = "heuristic",
	NULL,
};

static const char *const free_names[] = {
	[ZS_FREE_POOL_LOCK] = "pool",
	[ZS_FREE_CLASS_INDEX] = "class",
	[ZS_FREE_CLASS_INDEX_UNLOCKED] = "class-unlocked",
	NULL,
};

#define NNAMES(t) (sizeof(t) / sizeof((t)[0]) - 1)

static int lookup(const char *const *names, size_t n, const char *name)
{
	if (!name)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(names[i], name))
			return (int)i;
	return -EINVAL;
}

const char *zs_chain_policy_name(enum zs_chain_policy p)
{
	return (unsigned)p < NNAMES(chain_names) ? chain_names[p] : NULL;
}

int zs_chain_policy_parse(const char *name, enum zs_chain_policy *out)
{
	int i = lookup(chain_names, NNAMES(chain_names), name);

	if (i < 0)
		return i;
	if (out)
		*out = (enum zs_chain_policy)i;
	return 0;
}

const char *const *zs_chain_policy_names(void)
{
	return chain_names;
}

const char *zs_free_mode_name(enum zs_free_mode m)
{
	return (unsigned)m < NNAMES(free_names) ? free_names[m] : NULL;
}

int zs_free_mode_parse(const char *name, enum zs_free_mode *out)
{
	int i = lookup(free_names, NNAMES(free_names), name);

	if (i < 0)
		return i;
	if (out)
		*out = (enum zs_free_mode)i;
	return 0;
}

const char *const *zs_free_mode_names(void)
{
	return free_names;
}
