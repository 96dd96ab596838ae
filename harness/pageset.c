/*
 * Pages of real files, loaded into one page-aligned array: the harness's one
 * file loader.  `zs zram`, `zs record`, `zs compare`, bench_zram,
 * bench_chain and the tests read their real pages through it, so all of
 * them (and the kernel zram comparison, which writes this array with
 * O_DIRECT) see the same bytes for the same files.
 *
 * Two layouts, because two kinds of input exist: page-padded (each file
 * starts a page and its last page is zero padded: a file's pages as a page
 * cache would hold them) and packed (files' bytes back to back, what
 * `zs compare` has always cut into pages).  And two ways to walk a
 * directory: recursively in nftw order, or its top level sorted by name.
 */
#include "zs/harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct file_list {
	char **paths;
	size_t n, cap;
	uint64_t pages, max_pages;  /* for sizing zs_pageset_load's array */
	size_t page_size;
};

/* nftw passes no user pointer; the walk is short and single threaded per call. */
static _Thread_local struct file_list *walk_list;

static int list_add(struct file_list *fl, const char *path, off_t size)
{
	uint64_t pages = ((uint64_t)size + fl->page_size - 1) / fl->page_size;

	if (fl->max_pages && fl->pages >= fl->max_pages)
		return 0;
	if (fl->n == fl->cap) {
		size_t cap = fl->cap ? fl->cap * 2 : 256;
		char **p = realloc(fl->paths, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		fl->paths = p;
		fl->cap = cap;
	}
	fl->paths[fl->n] = strdup(path);
	if (!fl->paths[fl->n])
		return -ENOMEM;
	fl->n++;
	fl->pages += pages;
	return 0;
}

static void list_free(struct file_list *fl)
{
	for (size_t i = 0; i < fl->n; i++)
		free(fl->paths[i]);
	free(fl->paths);
	fl->paths = NULL;
	fl->n = fl->cap = 0;
}

static int walk_cb(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)ftw;
	if (type != FTW_F || !S_ISREG(st->st_mode) || st->st_size <= 0)
		return 0;
	if (list_add(walk_list, path, st->st_size))
		return 1;
	return walk_list->max_pages && walk_list->pages >= walk_list->max_pages ? 2 : 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A directory's top level: regular files (lstat), names not starting with '.', sorted. */
static int list_top_level(struct file_list *fl, const char *dir)
{
	DIR *d = opendir(dir);
	struct file_list names = { .page_size = 1 };
	struct dirent *e;
	int rc = 0;
	/* Every file is listed: one that cannot be read leaves its room to the next. */
	uint64_t bound = fl->max_pages;

	fl->max_pages = 0;
	if (!d)
		goto out;
	while (!rc && (e = readdir(d)))
		if (e->d_name[0] != '.')
			rc = list_add(&names, e->d_name, 0);
	closedir(d);
	if (names.n)
		qsort(names.paths, names.n, sizeof(*names.paths), cmp_str);
	for (size_t i = 0; !rc && i < names.n; i++) {
		char path[4096];
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s", dir, names.paths[i]);
		if (!lstat(path, &st) && S_ISREG(st.st_mode))
			rc = list_add(fl, path, st.st_size);
	}
	list_free(&names);
out:
	fl->max_pages = bound;
	return rc;
}

/*
 * The files behind one path, in load order.  A path that is not a directory
 * is itself (packed: whatever it is, as `zs compare` read it; padded: a
 * non-empty regular file only).
 */
static int list_path(struct file_list *fl, const char *path, unsigned flags)
{
	struct stat st;

	if (stat(path, &st))
		return 0;
	if (S_ISDIR(st.st_mode)) {
		if (flags & ZS_PAGESET_TOP_LEVEL)
			return list_top_level(fl, path);
		walk_list = fl;
		return nftw(path, walk_cb, 32, FTW_PHYS) == 1 ? -ENOMEM : 0;
	}
	if (flags & ZS_PAGESET_PACK)
		return list_add(fl, path, st.st_size);
	return S_ISREG(st.st_mode) && st.st_size > 0 ? list_add(fl, path, st.st_size) : 0;
}

int zs_pageset_init(struct zs_pageset *ps, size_t page_size, uint64_t cap_bytes)
{
	memset(ps, 0, sizeof(*ps));
	if (!page_size || (page_size & (page_size - 1)))
		return -EINVAL;
	ps->page_size = page_size;
	cap_bytes = (cap_bytes + page_size - 1) / page_size * page_size;
	if (!cap_bytes)
		return 0;
	/* mmap: page aligned (O_DIRECT straight from it) and zero filled (the padding). */
	void *m = mmap(NULL, cap_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return -ENOMEM;
	ps->data = m;
	ps->map_bytes = cap_bytes;
	return 0;
}

/* Read up to `want` bytes of one file at ps->len; bytes read, 0 if it cannot be opened. */
static uint64_t read_file(struct zs_pageset *ps, const char *path, uint64_t want)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	uint64_t got = 0;

	if (fd < 0)
		return 0;
	while (got < want) {
		ssize_t r = read(fd, ps->data + ps->len + got, want - got);

		if (r <= 0)
			break;
		got += (uint64_t)r;
	}
	close(fd);
	return got;
}

int zs_pageset_add(struct zs_pageset *ps, const char *path, uint64_t want, unsigned flags)
{
	struct file_list fl = { .page_size = ps->page_size };
	uint64_t start = ps->len, limit = ps->map_bytes - ps->len;

	if (want && want < limit)
		limit = want;
	if (!limit)
		return 0;
	/* List no more than can be read: a walk of a large tree stops early. */
	fl.max_pages = (limit + ps->page_size - 1) / ps->page_size;
	int rc = list_path(&fl, path, flags);

	for (size_t i = 0; !rc && i < fl.n; i++) {
		uint64_t room = ps->map_bytes - ps->len, used = ps->len - start;

		if (want && used >= want)
			break;
		if (want && want - used < room)
			room = want - used;
		if (!room)
			break;
		uint64_t got = read_file(ps, fl.paths[i], room);
		if (!got)
			continue;
		ps->files++;
		ps->file_bytes += got;
		ps->len += got;
		if (!(flags & ZS_PAGESET_PACK))
			ps->len = (ps->len + ps->page_size - 1) / ps->page_size * ps->page_size;
	}
	list_free(&fl);
	ps->npages = (ps->len + ps->page_size - 1) / ps->page_size;
	return rc;
}

int zs_pageset_load(struct zs_pageset *ps, size_t page_size, char *const *paths, int npaths,
		    uint64_t max_bytes)
{
	struct file_list fl = { .page_size = page_size };
	int rc = 0;

	memset(ps, 0, sizeof(*ps));
	if (!page_size || (page_size & (page_size - 1)))
		return -EINVAL;
	/* Size the array first: the files' pages, bounded by max_bytes. */
	fl.max_pages = max_bytes / page_size;
	for (int i = 0; i < npaths && !rc; i++)
		rc = list_path(&fl, paths[i], 0);
	uint64_t cap_pages = fl.pages;
	if (fl.max_pages && cap_pages > fl.max_pages)
		cap_pages = fl.max_pages;
	list_free(&fl);
	if (!rc)
		rc = zs_pageset_init(ps, page_size, cap_pages * page_size);
	for (int i = 0; i < npaths && !rc && ps->len < ps->map_bytes; i++)
		rc = zs_pageset_add(ps, paths[i], 0, 0);
	if (rc) {
		zs_pageset_free(ps);
		return rc;
	}
	return 0;
}

void zs_pageset_free(struct zs_pageset *ps)
{
	if (ps->data)
		munmap(ps->data, ps->map_bytes);
	memset(ps, 0, sizeof(*ps));
}
