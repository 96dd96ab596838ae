/*
 * zswap_pages: the page reader of scripts/zswap_capture.sh.  Given the PIDs
 * of a frozen memory cgroup, it finds every swapped page of their address
 * spaces (/proc/PID/pagemap: bit 62, swap type and offset), reads each
 * distinct swap entry once through /proc/PID/mem (which swaps it in: one
 * exclusive zswap load), and prints what zswap held for it: nothing for an
 * all-zero page (the swap layer's zeromap), else the size liblzo2's
 * lzo1x_1_15 gives (the kernel's "lzo" byte for byte, docs/zswap.md), with
 * 4096 for a page that does not compress below a page (zswap keeps it raw).
 *
 * Output: one size per line on stdout, in swap-offset order (the order the
 * swap allocator handed slots out, roughly the order of the stores); a
 * summary on stderr as "key value" lines the script copies into the capture
 * header.  Built by the script (cc -O2 ... -llzo2); not part of libzs: it
 * exists because the kernel side of a capture must read other processes'
 * memory, which nothing in the library or the zs tool should do.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lzo/lzo1x.h>

#define PAGE 4096u
#define PM_PRESENT (1ull << 63)
#define PM_SWAP (1ull << 62)

struct ent {
	uint64_t key;  /* swap type << 50 | swap offset */
	uint64_t addr; /* a virtual address mapping it */
	int pid;
};

static struct ent *ents;
static size_t nents, cap;

static int add(uint64_t key, uint64_t addr, int pid)
{
	if (nents == cap) {
		size_t nc = cap ? cap * 2 : 65536;
		struct ent *n = realloc(ents, nc * sizeof(*n));
		if (!n)
			return -1;
		ents = n;
		cap = nc;
	}
	ents[nents++] = (struct ent){ key, addr, pid };
	return 0;
}

/* Collect the swapped pages of one process; returns the swap ptes seen, -1 on error. */
static long scan(int pid)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	FILE *maps = fopen(path, "r");
	snprintf(path, sizeof(path), "/proc/%d/pagemap", pid);
	int pm = open(path, O_RDONLY);
	long seen = 0;
	uint64_t buf[512];

	if (!maps || pm < 0) {
		fprintf(stderr, "zswap_pages: pid %d: %s (gone?)\n", pid, strerror(errno));
		if (maps)
			fclose(maps);
		if (pm >= 0)
			close(pm);
		return 0; /* a process that exited holds nothing */
	}
	while (fgets(line, sizeof(line), maps)) {
		uint64_t lo, hi;
		if (sscanf(line, "%" SCNx64 "-%" SCNx64, &lo, &hi) != 2)
			continue;
		if (strstr(line, "[vsyscall]"))
			continue;
		for (uint64_t a = lo; a < hi;) {
			size_t n = (size_t)((hi - a) / PAGE);
			if (n > 512)
				n = 512;
			ssize_t got = pread(pm, buf, n * 8, (off_t)(a / PAGE * 8));
			if (got <= 0)
				break;
			n = (size_t)got / 8;
			for (size_t i = 0; i < n; i++) {
				uint64_t e = buf[i];
				if (!(e & PM_SWAP) || (e & PM_PRESENT))
					continue;
				uint64_t type = e & 0x1f, off = (e >> 5) & ((1ull << 50) - 1);
				seen++;
				if (add(type << 50 | off, a + i * PAGE, pid)) {
					fclose(maps);
					close(pm);
					return -1;
				}
			}
			a += n * PAGE;
		}
	}
	fclose(maps);
	close(pm);
	return seen;
}

static int by_key(const void *x, const void *y)
{
	const struct ent *a = x, *b = y;
	return a->key < b->key ? -1 : a->key > b->key;
}

int main(int argc, char **argv)
{
	static unsigned char page[PAGE], out[PAGE + PAGE / 16 + 64 + 3];
	static unsigned char wrk[LZO1X_1_15_MEM_COMPRESS];
	long ptes = 0;
	uint64_t zero = 0, stored = 0, incompressible = 0, errors = 0, bytes = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: zswap_pages PID...  (sizes on stdout, summary on stderr)\n");
		return 2;
	}
	if (lzo_init() != LZO_E_OK) {
		fprintf(stderr, "zswap_pages: lzo_init failed\n");
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		long s = scan(atoi(argv[i]));
		if (s < 0) {
			fprintf(stderr, "zswap_pages: out of memory\n");
			return 2;
		}
		ptes += s;
	}
	qsort(ents, nents, sizeof(*ents), by_key);
	int fd = -1, fd_pid = 0;
	size_t uniq = 0;
	for (size_t i = 0; i < nents; i++) {
		if (i && ents[i].key == ents[i - 1].key)
			continue; /* shared (a fork's copy-on-write page): one zswap entry */
		uniq++;
		if (ents[i].pid != fd_pid) {
			char path[64];
			if (fd >= 0)
				close(fd);
			snprintf(path, sizeof(path), "/proc/%d/mem", ents[i].pid);
			fd = open(path, O_RDONLY);
			fd_pid = ents[i].pid;
		}
		if (fd < 0 || pread(fd, page, PAGE, (off_t)ents[i].addr) != (ssize_t)PAGE) {
			errors++;
			continue;
		}
		int nz = 0;
		for (unsigned k = 0; k < PAGE && !nz; k += 8) {
			uint64_t w;
			memcpy(&w, page + k, 8);
			nz = w != 0;
		}
		if (!nz) {
			zero++;
			continue;
		}
		lzo_uint len = sizeof(out);
		if (lzo1x_1_15_compress(page, PAGE, out, &len, wrk) != LZO_E_OK || len == 0 ||
		    len >= PAGE) {
			len = PAGE;
			incompressible++;
		}
		stored++;
		bytes += len;
		printf("%lu\n", (unsigned long)len);
	}
	if (fd >= 0)
		close(fd);
	fprintf(stderr, "swap_ptes %ld\nswap_entries %zu\nzero_pages %" PRIu64 "\n", ptes, uniq,
		zero);
	fprintf(stderr, "pages %" PRIu64 "\nincompressible_pages %" PRIu64 "\n", stored,
		incompressible);
	fprintf(stderr, "compressed_bytes %" PRIu64 "\nread_errors %" PRIu64 "\n", bytes, errors);
	free(ents);
	return errors ? 1 : 0;
}
