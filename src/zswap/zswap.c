/*
 * The zswap front end (zs/zswap.h).  Placeholder so the header's API links
 * and the export check holds while the implementation lands: every call
 * answers -EOPNOTSUPP.
 */
#include <errno.h>
#include <string.h>

#include "zs/zswap.h"

void zs_zswap_config_init(struct zs_zswap_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->page_size = 4096;
	cfg->comp = "lzo";
	zs_backend_config_init(&cfg->backend);
	cfg->max_pool_percent = 20;
	cfg->accept_threshold_percent = 90;
}

int zs_zswap_create(const struct zs_zswap_config *cfg, struct zs_zswap **out, char *err,
		    size_t errlen)
{
	(void)cfg;
	if (out)
		*out = NULL;
	if (err && errlen)
		strncpy(err, "zswap: not implemented yet", errlen - 1), err[errlen - 1] = 0;
	return -EOPNOTSUPP;
}

void zs_zswap_destroy(struct zs_zswap *z) { (void)z; }
size_t zs_zswap_page_size(const struct zs_zswap *z) { (void)z; return 0; }
const char *zs_zswap_comp_name(const struct zs_zswap *z) { (void)z; return ""; }
struct zs_backend *zs_zswap_backend(struct zs_zswap *z) { (void)z; return NULL; }
int zs_zswap_store(struct zs_zswap *z, uint64_t o, const void *p, unsigned g)
{ (void)z; (void)o; (void)p; (void)g; return -EOPNOTSUPP; }
int zs_zswap_store_compressed(struct zs_zswap *z, uint64_t o, const void *c, size_t l, unsigned g)
{ (void)z; (void)o; (void)c; (void)l; (void)g; return -EOPNOTSUPP; }
int zs_zswap_load(struct zs_zswap *z, uint64_t o, void *p) { (void)z; (void)o; (void)p; return -EOPNOTSUPP; }
int zs_zswap_invalidate(struct zs_zswap *z, uint64_t o) { (void)z; (void)o; return -EOPNOTSUPP; }
long zs_zswap_writeback(struct zs_zswap *z, size_t nr) { (void)z; (void)nr; return -EOPNOTSUPP; }
unsigned long zs_zswap_shrink_count(struct zs_zswap *z) { (void)z; return 0; }
long zs_zswap_shrink(struct zs_zswap *z, unsigned long n) { (void)z; (void)n; return -EOPNOTSUPP; }
int zs_zswap_set_pool_limit(struct zs_zswap *z, unsigned a, unsigned b)
{ (void)z; (void)a; (void)b; return -EOPNOTSUPP; }
void zs_zswap_flush(struct zs_zswap *z) { (void)z; }
unsigned long zs_zswap_compact(struct zs_zswap *z) { (void)z; return 0; }
int zs_zswap_group_set(struct zs_zswap *z, unsigned g, uint64_t m, int w)
{ (void)z; (void)g; (void)m; (void)w; return -EOPNOTSUPP; }
int zs_zswap_group_stats(struct zs_zswap *z, unsigned g, struct zs_zswap_group_stats *st)
{ (void)z; (void)g; (void)st; return -EOPNOTSUPP; }
void zs_zswap_get_stats(struct zs_zswap *z, struct zs_zswap_stats *st) { (void)z; memset(st, 0, sizeof(*st)); }
void zs_zswap_wb_inject(struct zs_zswap *z, int r, uint64_t a, uint64_t c)
{ (void)z; (void)r; (void)a; (void)c; }
