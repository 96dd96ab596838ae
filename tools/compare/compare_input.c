/*
 * zs compare's inputs: where raw pages come from (files, a process's
 * anonymous memory, a python3 heap) and the workloads built from them, split
 * from cmd_compare.c so the driver reads as the fairness rules and the runs.
 */
#include <errno.h>
#include <fcntl.h>
#include <lz4.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compare.h"
#include "util.h"
#include "zs/zram.h"

/* ---- raw page sources ---- */

int raw_reserve(struct raw *r, size_t cap)
{
	return zs_pageset_init(&r->ps, 4096, cap);
}

/* Anonymous writable mappings of a process (heap, anon mmaps) via /proc/PID/mem. */
int raw_add_process(struct raw *r, int pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	FILE *maps = fopen(path, "r");
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	int mem = open(path, O_RDONLY);
	if (!maps || mem < 0) {
		if (maps)
			fclose(maps);
		if (mem >= 0)
			close(mem);
		return -errno;
	}
	char line[512];
	while (r->ps.len < r->ps.map_bytes && fgets(line, sizeof(line), maps)) {
		unsigned long lo, hi;
		char perms[8], name[256] = "";
		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %255s", &lo, &hi, perms, name) < 3)
			continue;
		if (perms[0] != 'r' || perms[1] != 'w' || (name[0] && strcmp(name, "[heap]")))
			continue;
		for (unsigned long a = lo; a < hi && r->ps.len < r->ps.map_bytes;) {
			size_t chunk = hi - a < r->ps.map_bytes - r->ps.len ? hi - a : r->ps.map_bytes - r->ps.len;
			ssize_t got = pread(mem, r->ps.data + r->ps.len, chunk, (off_t)a);
			if (got <= 0)
				break;
			r->ps.len += (size_t)got;
			a += (unsigned long)got;
		}
	}
	fclose(maps);
	close(mem);
	return 0;
}

/*
 * A real heap when none is given: a Python process building dicts, strings,
 * lists and floats (the kind of anonymous memory zram swaps), read while it
 * waits on stdin.  We are its parent, so ptrace_scope=1 lets us read its mem.
 */
int raw_add_python_heap(struct raw *r)
{
	int in[2], out[2];
	if (pipe(in) || pipe(out))
		return -errno;
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		setenv("PYTHONHASHSEED", "0", 1); /* same heap every run */
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execlp("python3", "python3", "-c",
		       "import sys,random\n"
		       "random.seed(3)\n"
		       "d={('k%d'%i):[i,str(i)*(i%7),i*0.5,(i,'v')] for i in range(250000)}\n"
		       "l=[random.random() for _ in range(800000)]\n"
		       "s=[' '.join(random.choice(['alpha','beta','gamma','delta','zeta']) for _ in range(20)) for _ in range(80000)]\n"
		       "sys.stdout.write('ready\\n');sys.stdout.flush();sys.stdin.read()\n",
		       (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	char buf[16] = "";
	ssize_t got = read(out[0], buf, sizeof(buf) - 1);
	int err = got > 0 && !strncmp(buf, "ready", 5) ? raw_add_process(r, pid) : -ECHILD;
	close(in[1]);
	close(out[0]);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	return err;
}

/* ---- workloads: lists of blobs ---- */

void wl_free(struct workload *w)
{
	free(w->b);
	free(w->store);
	memset(w, 0, sizeof(*w));
}

/* zram's store rule (zs/zram.h) on raw pages: skip same-filled, raw at >= huge, else LZ4. */
int wl_from_pages(struct workload *w, const struct raw *r, size_t ps, size_t huge)
{
	size_t npages = r->ps.len / ps;
	w->b = calloc(npages ? npages : 1, sizeof(*w->b));
	w->store = malloc(npages * (size_t)LZ4_compressBound((int)ps) + 1);
	if (!w->b || !w->store)
		return -ENOMEM;
	w->source = r->what;
	size_t off = 0;
	for (size_t i = 0; i < npages; i++) {
		const unsigned char *page = r->ps.data + i * ps;
		w->pages_in++;
		if (zs_zram_page_same_filled(page, ps, NULL)) {
			w->same_filled++;
			continue;
		}
		int c = LZ4_compress_default((const char *)page, (char *)w->store + off, (int)ps,
					     LZ4_compressBound((int)ps));
		if (zs_zram_store_kind(c, huge) == ZS_ZRAM_STORE_RAW) {
			w->b[w->n++] = (struct blob){ page, (uint32_t)ps };
			w->raw_stored++;
		} else {
			w->b[w->n++] = (struct blob){ w->store + off, (uint32_t)c };
			off += (size_t)c;
		}
	}
	return 0;
}

/* zsmalloc_test's sizes: 32, 48, ... 4080 at 4K (step page/256), n of each. */
int wl_testmod(struct workload *w, size_t ps, size_t n, const unsigned char *noise)
{
	size_t step = ps / 256, nsizes = (ps - 16 - 32) / step + 1;
	w->b = calloc(nsizes * n, sizeof(*w->b));
	if (!w->b)
		return -ENOMEM;
	for (size_t k = 0; k < n; k++)
		for (size_t s = 0; s < nsizes; s++)
			w->b[w->n++] = (struct blob){ noise, (uint32_t)(32 + s * step) };
	w->source = "sizes 32..page-16";
	return 0;
}

/*
 * A seeded mix shaped like compressed anonymous pages: 30% small (32..512 B),
 * 50% around 1.2 KB, 15% large (2..3.2 KB), 5% page size; scaled to the page.
 */
int wl_mix(struct workload *w, size_t ps, size_t n, uint64_t seed,
		  const unsigned char *noise)
{
	w->b = calloc(n, sizeof(*w->b));
	if (!w->b)
		return -ENOMEM;
	uint64_t s = seed;
	double k = (double)ps / 4096.0;
	for (size_t i = 0; i < n; i++) {
		uint64_t r = tool_rand64(&s) % 100;
		double v;
		if (r < 30)
			v = 32 + (double)(tool_rand64(&s) % 481);
		else if (r < 80)
			v = 600 + (double)(tool_rand64(&s) % 600) + (double)(tool_rand64(&s) % 600);
		else if (r < 95)
			v = 2048 + (double)(tool_rand64(&s) % 1200);
		else
			v = 4096;
		size_t len = (size_t)(v * k);
		if (len > ps)
			len = ps;
		w->b[w->n++] = (struct blob){ noise + tool_rand64(&s) % 64, (uint32_t)len };
	}
	w->source = "seeded size mix";
	return 0;
}
