/*
 * Pages of real files, loaded once into one page-aligned array: the common
 * input of `zs zram`, bench_zram and the zram tests, so all of them (and the
 * kernel zram comparison, which writes this array with O_DIRECT) see exactly
 * the same pages.
 */
#include "zs/zram.h"
#include "zs/harness.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct file_list {
	char **paths;
	size_t n, cap;
	uint64_t pages, max_pages;
	size_t page_size;
};

/* nftw passes no user pointer; the walk is short and single threaded per call. */
static _Thread_local struct file_list *walk_list;

static int add_file(struct file_list *fl, const char *path, off_t size)
{
	uint64_t pages = ((uint64_t)size + fl->page_size - 1) / fl->page_size;

	if (size <= 0 || (fl->max_pages && fl->pages >= fl->max_pages))
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

static int walk_cb(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)ftw;
	if (type != FTW_F || !S_ISREG(st->st_mode))
		return 0;
	if (add_file(walk_list, path, st->st_size))
		return 1;
	return walk_list->max_pages && walk_list->pages >= walk_list->max_pages ? 2 : 0;
}

int zs_pageset_load(struct zs_pageset *ps, size_t page_size, char *const *paths, int npaths,
		    uint64_t max_bytes)
{
	struct file_list fl = { 0 };
	size_t cap_pages, used = 0;
	int rc = 0;

	memset(ps, 0, sizeof(*ps));
	if (!page_size || (page_size & (page_size - 1)))
		return -EINVAL;
	ps->page_size = page_size;
	fl.page_size = page_size;
	fl.max_pages = max_bytes / page_size;

	for (int i = 0; i < npaths && !rc; i++) {
		struct stat st;

		if (stat(paths[i], &st))
			continue;
		if (S_ISDIR(st.st_mode)) {
			walk_list = &fl;
			if (nftw(paths[i], walk_cb, 32, FTW_PHYS) == 1)
				rc = -ENOMEM;
		} else if (S_ISREG(st.st_mode)) {
			rc = add_file(&fl, paths[i], st.st_size);
		}
	}
	cap_pages = fl.pages;
	if (fl.max_pages && cap_pages > fl.max_pages)
		cap_pages = fl.max_pages;
	if (!rc && cap_pages) {
		/* mmap: page aligned (O_DIRECT straight from it) and zero filled (the padding). */
		void *m = mmap(NULL, cap_pages * page_size, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (m == MAP_FAILED)
			rc = -ENOMEM;
		else {
			ps->data = m;
			ps->map_bytes = cap_pages * page_size;
		}
	}
	for (size_t i = 0; !rc && i < fl.n && used < cap_pages; i++) {
		int fd = open(fl.paths[i], O_RDONLY | O_CLOEXEC);
		uint64_t got = 0;

		if (fd < 0)
			continue;
		for (;;) {
			size_t room = (cap_pages - used) * page_size - got;
			ssize_t r;

			if (!room)
				break;
			r = read(fd, ps->data + used * page_size + got, room);
			if (r <= 0)
				break;
			got += (uint64_t)r;
		}
		close(fd);
		if (got) {
			ps->files++;
			ps->file_bytes += got;
			used += (got + page_size - 1) / page_size;
		}
	}
	for (size_t i = 0; i < fl.n; i++)
		free(fl.paths[i]);
	free(fl.paths);
	ps->npages = used;
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
