/*
 * Anonymous mappings for the tables of the layers above (zsmalloc's class
 * table and parked-zspage stacks): owned here because the page provider and
 * the region are the only parts of libzs that map memory (tests/package/layering.sh
 * checks it), so every mapping the library makes has one home to audit for
 * its flags and its accounting.
 */
#include <sys/mman.h>
#include <unistd.h>

#include "pages/pages.h"

void *pages_table_map(size_t bytes, size_t *mapped)
{
	size_t os_page = (size_t)sysconf(_SC_PAGESIZE);

	if (!bytes || bytes > SIZE_MAX - os_page)
		return NULL;
	bytes = (bytes + os_page - 1) & ~(os_page - 1);
	/* NORESERVE: a table sized for every class copy is mostly never written. */
	void *t = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		       -1, 0);
	if (t == MAP_FAILED)
		return NULL;
	*mapped = bytes;
	return t;
}

void pages_table_unmap(void *table, size_t mapped)
{
	if (table)
		munmap(table, mapped);
}
