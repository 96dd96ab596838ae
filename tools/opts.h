/*
 * Shared option parsing for the pool-shaping flags every `zs` command takes
 * (--page-size, --chain, --delta, --chain-policy, --free-mode), so each
 * command spells them the same way.  Header-only: tools/ has no library.
 */
#ifndef ZS_TOOLS_OPTS_H
#define ZS_TOOLS_OPTS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "zs/zsmalloc.h"

/* Parse a size with an optional K/M/G suffix; 0 on error. */
static inline size_t opt_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || v < 0)
		return 0;
	switch (*end) {
	case 'k': case 'K': v *= 1024; end++; break;
	case 'm': case 'M': v *= 1024 * 1024; end++; break;
	case 'g': case 'G': v *= 1024.0 * 1024 * 1024; end++; break;
	}
	return *end ? 0 : (size_t)v;
}

/*
 * If argv[*i] is a pool option, apply it to cfg (consuming its value) and
 * return 1; return -1 on a bad value (message printed), 0 if not a pool option.
 */
static inline int opt_pool(int argc, char **argv, int *i, struct zs_pool_config *cfg)
{
	const char *a = argv[*i];
	const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
	int known = !strcmp(a, "--page-size") || !strcmp(a, "--chain") || !strcmp(a, "--delta") ||
		    !strcmp(a, "--chain-policy") || !strcmp(a, "--free-mode");
	if (!known)
		return 0;
	if (!v) {
		fprintf(stderr, "%s needs a value\n", a);
		return -1;
	}
	(*i)++;
	if (!strcmp(a, "--page-size")) {
		cfg->page_size = opt_size(v);
		if (!cfg->page_size)
			goto bad;
	} else if (!strcmp(a, "--chain")) {
		cfg->max_chain = (unsigned)atoi(v);
		if (cfg->max_chain < 1 || cfg->max_chain > ZS_MAX_CHAIN)
			goto bad;
	} else if (!strcmp(a, "--delta")) {
		cfg->class_delta = (unsigned)atoi(v);
		if (!cfg->class_delta)
			goto bad;
	} else if (!strcmp(a, "--chain-policy")) {
		if (!strcmp(v, "exhaustive"))
			cfg->chain_policy = ZS_CHAIN_EXHAUSTIVE;
		else if (!strcmp(v, "heuristic"))
			cfg->chain_policy = ZS_CHAIN_HEURISTIC;
		else
			goto bad;
	} else {
		if (!strcmp(v, "pool"))
			cfg->free_mode = ZS_FREE_POOL_LOCK;
		else if (!strcmp(v, "class"))
			cfg->free_mode = ZS_FREE_CLASS_INDEX;
		else if (!strcmp(v, "class-unlocked"))
			cfg->free_mode = ZS_FREE_CLASS_INDEX_UNLOCKED;
		else
			goto bad;
	}
	return 1;
bad:
	fprintf(stderr, "bad value for %s: '%s'\n", a, v);
	return -1;
}

#define OPT_POOL_HELP                                                                  \
	"  --page-size N        pool page size, 4K..64K (default 4096)\n"              \
	"  --chain N            max pages per zspage, 1..16 (default 8)\n"            \
	"  --delta N            size-class delta in bytes (default: max(page/256, 16))\n" \
	"  --chain-policy P     exhaustive (kernel today) | heuristic (seed 002)\n"     \
	"  --free-mode M        pool | class | class-unlocked (zs_free locking)\n"

static inline const char *chain_policy_name(enum zs_chain_policy p)
{
	return p == ZS_CHAIN_HEURISTIC ? "heuristic" : "exhaustive";
}

#endif
