/*
 * `zs record --zswap --memcg-fill`: one fill under a memory-limited
 * cgroup-v1 memcg, so that the kernel's own reclaim (not madvise) chooses
 * what goes to zswap.  A child joins the memcg and writes the pages; the
 * parent reads the child's pagemap and zswap's counters before the child
 * exits, and writes the stored pages as 's' records in swap-offset order.
 * Its own file because it is the only mode with a second process and the
 * only user of the memcg.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "record.h"
#include "record_zswap.h"
#include "zs/harness.h"

#define MEMCG_ROOT "/sys/fs/cgroup/memory"

/* The memcg fill's child: joins the memcg, writes the pages once, reports its buffer's
 * address on wfd and waits for the parent to close rfd.  Never returns. */
static void fill_child(struct zrec *r, const char *procs, int rfd, int wfd)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != r->parent)
		_exit(9);
	stop_signals(0);
	volatile unsigned char stack[65536];
	for (size_t k = 0; k < sizeof(stack); k += 4096)
		stack[k] = 1;
	/* Our own pages are charged outside the memcg and locked; only the buffer is
	 * charged inside and evictable. */
	if (mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT))
		_exit(10);
	char pid[32];
	snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (zs_sysfs_write(procs, pid))
		_exit(11);
	size_t bytes = r->n * r->P;
	unsigned char *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				  -1, 0);
	if (buf == MAP_FAILED)
		_exit(12);
	munlock(buf, bytes);
	madvise(buf, bytes, MADV_NOHUGEPAGE);
	for (size_t i = 0; i < r->n; i++)
		memcpy(buf + i * r->P, r->ps->data + i * r->P, r->P);
	uintptr_t a = (uintptr_t)buf;
	if (write(wfd, &a, sizeof(a)) != (ssize_t)sizeof(a))
		_exit(13);
	char c;
	while (read(rfd, &c, 1) > 0)
		;
	_exit(0);
}

struct fillrec {
	uint64_t off;
	uint32_t size;
	char flag;
};

static int cmp_off(const void *a, const void *b)
{
	const struct fillrec *x = a, *y = b;
	return x->off < y->off ? -1 : x->off > y->off;
}

int record_fill(struct zrec *r, struct settings *s)
{
	char procs[PATH_MAX + 32], lim[PATH_MAX + 32], val[32];
	if (access(MEMCG_ROOT "/memory.limit_in_bytes", F_OK)) {
		fprintf(stderr, "zs record: --memcg-fill needs the cgroup-v1 memory controller at %s\n",
			MEMCG_ROOT);
		return -1;
	}
	if (!s->memcg[0]) { /* made once, kept for further attempts */
		snprintf(s->memcg, sizeof(s->memcg), MEMCG_ROOT "/libzs-record-%ld", (long)getpid());
		write_state(s);
		if (mkdir(s->memcg, 0755)) {
			fprintf(stderr, "zs record: mkdir %s: %s\n", s->memcg, strerror(errno));
			if (errno == EEXIST)
				s->memcg[0] = 0; /* not ours */
			return -1;
		}
	}
	snprintf(lim, sizeof(lim), "%s/memory.limit_in_bytes", s->memcg);
	snprintf(val, sizeof(val), "%llu", (unsigned long long)r->o->memcg_limit);
	if (zs_sysfs_write(lim, val)) {
		fprintf(stderr, "zs record: %s <- %s: %s\n", lim, val, strerror(errno));
		return -1;
	}
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", s->memcg);
	uint64_t *pm = calloc(r->n, sizeof(*pm));
	struct fillrec *fr = calloc(r->n, sizeof(*fr));
	int p2c[2], c2p[2];
	if (!pm || !fr || pipe2(p2c, O_CLOEXEC) || pipe2(c2p, O_CLOEXEC)) {
		fprintf(stderr, "zs record: %s\n", strerror(errno ? errno : ENOMEM));
		free(pm);
		free(fr);
		return -1;
	}
	trace_header(r, "fill");
	struct ctr base, c;
	if (read_counters(&base)) {
		fprintf(stderr, "zs record: zswap counters unreadable\n");
		return -1;
	}
	fflush(NULL);
	r->parent = getpid();
	pid_t child = fork();
	if (child == 0) {
		close(p2c[1]);
		close(c2p[0]);
		fill_child(r, procs, p2c[0], c2p[1]);
	}
	close(p2c[0]);
	close(c2p[1]);
	int rc = -1;
	uintptr_t addr = 0;
	if (child < 0) {
		fprintf(stderr, "zs record: fork: %s\n", strerror(errno));
		goto out;
	}
	for (;;) {
		ssize_t got = read(c2p[0], &addr, sizeof(addr));
		if (got == (ssize_t)sizeof(addr))
			break;
		if (got < 0 && errno == EINTR && !stop_requested())
			continue;
		if (!g_stop) {
			int st = 0;
			waitpid(child, &st, 0);
			child = -1;
			fprintf(stderr, "zs record: the fill process ended early (%s %d%s)\n",
				WIFSIGNALED(st) ? "signal" : "exit",
				WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st),
				WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL ? ": the memcg OOM killer? "
				"raise --memcg-limit" : "");
		} else {
			stop_requested();
		}
		goto out;
	}
	/* The state now, before the child exits and frees everything. */
	char pmpath[64];
	snprintf(pmpath, sizeof(pmpath), "/proc/%ld/pagemap", (long)child);
	int fd = open(pmpath, O_RDONLY | O_CLOEXEC);
	ssize_t want = (ssize_t)(r->n * sizeof(*pm));
	if (read_counters(&c) || fd < 0 ||
	    pread(fd, pm, (size_t)want, (off_t)(addr / r->P * sizeof(*pm))) != want) {
		fprintf(stderr, "zs record: reading the counters or %s: %s\n", pmpath, strerror(errno));
		if (fd >= 0)
			close(fd);
		goto out;
	}
	close(fd);
	size_t nrec = 0, present = 0, zero = 0, huge = 0, swapped = 0;
	int type = -1;
	for (size_t i = 0; i < r->n; i++) {
		present += PM_PRESENT(pm[i]);
		if (!PM_SWAP(pm[i]))
			continue;
		swapped++;
		if (type < 0)
			type = PM_SWAP_TYPE(pm[i]);
		if (PM_SWAP_TYPE(pm[i]) != type) {
			fprintf(stderr, "zs record: pages on two swap devices (%d and %d)\n", type,
				PM_SWAP_TYPE(pm[i]));
			goto out;
		}
		if (r->flag[i] == 'z') {
			zero++;
			continue;
		}
		huge += r->flag[i] == 'h';
		fr[nrec++] = (struct fillrec){ PM_SWAP_OFF(pm[i]), r->size[i], r->flag[i] };
	}
	if (!swapped) {
		fprintf(stderr, "zs record: the kernel reclaimed none of the %zu pages: the memcg's "
				"limit (%llu MiB) holds them all; lower --memcg-limit or give more --pages\n",
			r->n, (unsigned long long)(r->o->memcg_limit >> 20));
		goto out;
	}
	/* The kernel must hold exactly the pages pagemap says, and nothing went to disk. */
	struct {
		int j;
		int64_t want;
	} chk[] = { { C_STORED, (int64_t)nrec }, { C_INCOMP, (int64_t)huge },
		    { V_ZSWPOUT, (int64_t)nrec }, { V_ZSWPIN, 0 }, { V_SWPOUT_ZERO, (int64_t)zero },
		    { V_PSWPOUT, 0 }, { V_PSWPIN, 0 }, { C_LIMIT, 0 }, { C_WB, 0 }, { C_RALLOC, 0 },
		    { C_RCFAIL, 0 }, { C_RCPOOR, 0 }, { C_RKMEM, 0 }, { C_RREC, 0 } };
	for (size_t k = 0; k < sizeof(chk) / sizeof(chk[0]); k++) {
		int j = chk[k].j;
		int64_t d = c.v[j] - (j == C_STORED || j == C_INCOMP ? 0 : base.v[j]);
		if (c.v[j] >= 0 && base.v[j] >= 0 && d != chk[k].want) {
			r->retryable = 1;
			snprintf(r->why, sizeof(r->why), "after the fill %s is %+lld, but pagemap "
				 "says %+lld (%zu pages swapped, %zu zero): something else used "
				 "zswap/swap meanwhile, or the pool limit was hit",
				 ctr_name[j], (long long)d, (long long)chk[k].want, swapped, zero);
			goto out;
		}
	}
	qsort(fr, nrec, sizeof(*fr), cmp_off);
	for (size_t k = 0; k < nrec; k++)
		fprintf(r->out, "s %llu %u %c\n", (unsigned long long)fr[k].off, fr[k].size, fr[k].flag);
	fprintf(r->out, "= %lld %lld %lld %lld %lld\n", (long long)(c.v[C_POOL] / (int64_t)r->P),
		(long long)c.v[C_STORED], (long long)c.v[C_INCOMP],
		(long long)(c.v[V_ZSWPOUT] - base.v[V_ZSWPOUT]),
		(long long)(c.v[V_ZSWPIN] - base.v[V_ZSWPIN]));
	r->nstore[0] = (long)(nrec - huge);
	r->nstore[1] = (long)huge;
	r->nstore[2] = (long)zero;
	r->ops = (long)nrec;
	fprintf(stderr, "zs record: fill of %zu pages under a %llu MiB memcg: %zu in memory, %zu "
			"swapped (%zu zero pages, %zu in zswap, %zu of them raw); kernel pool %lld pages\n",
		r->n, (unsigned long long)(r->o->memcg_limit >> 20), present, swapped, zero, nrec, huge,
		(long long)(c.v[C_POOL] / (int64_t)r->P));
	rc = 0;
out:
	close(p2c[1]); /* the child exits */
	close(c2p[0]);
	if (child > 0) {
		kill(child, SIGKILL);
		while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
			;
	}
	free(pm);
	free(fr);
	return rc;
}
