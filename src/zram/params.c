/*
 * The store's compressor parameters: turns the level/dictionary fields of
 * zs_zram_config (bytes or a file path) into struct zs_comp_params for the
 * primary and secondary algorithms, and create's error text.  Kept apart
 * from the slot code so that file loading and its errors stay out of it; a
 * leaf every create path (core.c, backing.c, group.c, zram.c) calls down to.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "zram/internal.h"

/* Read a whole dictionary file (1..ZS_COMP_MAX_DICT bytes) into *buf. */
static int read_dict_file(const char *path, void **buf, size_t *len)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	int rc = 0;

	if (!f)
		return -errno;
	if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    (uint64_t)st.st_size > ZS_COMP_MAX_DICT) {
		fclose(f);
		return -EINVAL;
	}
	*len = (size_t)st.st_size;
	*buf = malloc(*len);
	if (!*buf)
		rc = -ENOMEM;
	else if (fread(*buf, 1, *len, f) != *len)
		rc = -EIO;
	fclose(f);
	if (rc) {
		free(*buf);
		*buf = NULL;
	}
	return rc;
}

static int one(const char *name, int level, const void *dict, size_t dict_len, const char *path,
	       struct zs_comp_params *p, void **owned)
{
	int rc;

	*owned = NULL;
	p->level = level;
	p->dict = dict;
	p->dict_len = dict_len;
	if (path) {
		if (dict || dict_len)
			return -EINVAL;
		/* Check the name and level first: a bad level must not depend on the file. */
		if ((rc = zs_comp_check_params(name, p)))
			return rc;
		if ((rc = read_dict_file(path, owned, &p->dict_len)))
			return rc;
		p->dict = *owned;
	}
	if ((rc = zs_comp_check_params(name, p)))
		return rc;
	if (!path && dict && dict_len) {
		/* Copied (checked first: its length is bounded), since the store builds
		 * streams after the create returns (zram/stream.c). */
		if (!(*owned = malloc(dict_len)))
			return -ENOMEM;
		memcpy(*owned, dict, dict_len);
		p->dict = *owned;
	}
	return 0;
}

int zram_params_load(const struct zs_zram_config *cfg, struct zram_params *out)
{
	int rc;

	*out = (struct zram_params){ 0 };
	rc = one(cfg->comp ? cfg->comp : "lz4", cfg->comp_level, cfg->comp_dict, cfg->comp_dict_len,
		 cfg->comp_dict_path, &out->comp, &out->owned[0]);
	if (rc)
		goto fail;
	if (!cfg->recomp) {
		if (cfg->recomp_level || cfg->recomp_dict || cfg->recomp_dict_len ||
		    cfg->recomp_dict_path) {
			rc = -EINVAL;
			goto fail;
		}
		return 0;
	}
	rc = one(cfg->recomp, cfg->recomp_level, cfg->recomp_dict, cfg->recomp_dict_len,
		 cfg->recomp_dict_path, &out->recomp, &out->owned[1]);
	if (!rc)
		return 0;
fail:
	zram_params_free(out);
	return rc;
}

void zram_params_free(struct zram_params *p)
{
	free(p->owned[0]);
	free(p->owned[1]);
	*p = (struct zram_params){ 0 };
}
