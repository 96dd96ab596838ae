/*
 * The names of zsmalloc's named choices (chain policy, free mode), built
 * from the registries in zs/zsmalloc.h, so the zs tool, the benchmarks, the
 * report and the Python package all spell, parse and list them the same way
 * and a registry entry reaches every one of them.
 */
#include <errno.h>
#include <string.h>

#include "zs/zsmalloc.h"

#define CHAIN_NAME(id, fn, name, help) [ZS_CHAIN_##id] = name,
#define FREE_NAME(id, fn, name, help) [ZS_FREE_##id] = name,

static const char *const chain_names[] = { ZS_CHAIN_POLICIES(CHAIN_NAME) NULL };
static const char *const free_names[] = { ZS_FREE_MODES(FREE_NAME) NULL };

/* Values callers and bindings already hold must not move (registries are append-only). */
_Static_assert(ZS_CHAIN_EXHAUSTIVE == 0 && ZS_CHAIN_HEURISTIC == 1, "chain policy values moved");
_Static_assert(ZS_FREE_POOL_LOCK == 0 && ZS_FREE_CLASS_INDEX == 1 &&
		       ZS_FREE_CLASS_INDEX_UNLOCKED == 2,
	       "free mode values moved");
_Static_assert(sizeof(chain_names) / sizeof(chain_names[0]) == ZS_CHAIN_POLICY_COUNT + 1,
	       "one name per chain policy");
_Static_assert(sizeof(free_names) / sizeof(free_names[0]) == ZS_FREE_MODE_COUNT + 1,
	       "one name per free mode");

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
