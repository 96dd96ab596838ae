/*
 * Example: replay a zram-trace -- a record of what the running kernel's
 * zram + zsmalloc did with a page workload (docs/trace-format.md; make your
 * own with `sudo zs record -o my.trace /some/files`) -- on a libzs zsmalloc
 * pool, and check after every operation that the pool holds exactly as many
 * pages as the kernel did.  This is the core of `zs replay` with only the
 * public header; copy it to replay your own traces through your own
 * configuration.
 *
 *   cc trace_replay.c $(pkg-config --cflags --libs libzs) -o trace_replay
 *   ./trace_replay my.trace          (plain text)
 *   xz -dc my.trace.xz | ./trace_replay -
 *   ./trace_replay                   (a short trace recorded with zs record)
 *
 * The reader here is deliberately minimal: plain text, the header's
 * page_size and chain_size, and w/d/c/= records.  `zs replay` (its reader
 * is tools/lib/trace.c) also reads .xz, range-checks every field with line
 * numbers, compares all six mm_stat fields and shows the operations before a
 * mismatch.
 *
 * zram's rules the replay must follow: a same-filled page ('s') stores no
 * object; an incompressible page ('h') is a page-size object; an overwrite
 * allocates the new object before freeing the old one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zs/zsmalloc.h>

/* `zs record -o t --pages 10 --workload mix --ops 8 --p-compact 0.2 --seed 5 /usr/bin` */
static const char *const sample =
	"# zram-trace 1\n"
	"# page_size 4096\n"
	"# comp lz4\n"
	"# kernel 6.18.44-fc-v669\n"
	"# chain_size 8\n"
	"# data /usr/bin pages 10 workload mix seed 5 ops 8 p_compact 0.2 p_discard 0.5 (zs record)\n"
	"w 0 1406 n\n"
	"= 8 0 1 1406 0 0\n"
	"w 1 3365 n\n"
	"= 13 0 2 4771 0 0\n"
	"w 2 3280 n\n"
	"= 13 0 3 8051 0 0\n"
	"w 3 1520 n\n"
	"= 16 0 4 9571 0 0\n"
	"w 4 2005 n\n"
	"= 17 0 5 11576 0 0\n"
	"w 5 1110 n\n"
	"= 25 0 6 12686 0 0\n"
	"w 6 1785 n\n"
	"= 29 0 7 14471 0 0\n"
	"w 7 1697 n\n"
	"= 37 0 8 16168 0 0\n"
	"w 8 163 n\n"
	"= 41 0 9 16331 0 0\n"
	"w 9 3354 n\n"
	"= 41 0 10 19685 0 0\n"
	"w 9 1520 n\n"
	"= 41 0 10 17851 0 0\n"
	"c\n"
	"= 41 0 10 17851 0 0\n"
	"w 0 1110 n\n"
	"= 33 0 10 17555 0 0\n"
	"d 4\n"
	"= 32 0 9 15550 0 0\n"
	"d 1\n"
	"= 32 0 8 12185 0 0\n"
	"w 9 3365 n\n"
	"= 32 0 8 14030 0 0\n"
	"d 7\n"
	"= 24 0 7 12333 0 0\n"
	"w 3 3365 n\n"
	"= 21 0 7 14178 0 0\n"
	"c\n"
	"= 21 0 7 14178 0 0\n"
	"d 2\n"
	"= 21 0 6 10898 0 0\n"
	"d 6\n"
	"= 17 0 5 9113 0 0\n"
	"d 8\n"
	"= 13 0 4 8950 0 0\n"
	"d 3\n"
	"= 13 0 3 5585 0 0\n"
	"d 9\n"
	"= 8 0 2 2220 0 0\n"
	"d 5\n"
	"= 8 0 1 1110 0 0\n"
	"d 0\n"
	"= 0 0 0 0 0 0\n";

struct slot {
	unsigned long handle; /* 0: nothing stored (empty or same-filled) */
};

struct replay {
	struct zs_pool *pool;
	size_t page_size;
	unsigned chain;
	struct slot *slots;
	unsigned long nslots;
	long ops, records, mismatches, line;
	unsigned long kernel_peak, libzs_peak;
};

static struct slot *slot_at(struct replay *r, unsigned long i)
{
	if (i >= r->nslots) {
		unsigned long n = r->nslots ? r->nslots : 1024;
		while (n <= i)
			n *= 2;
		struct slot *s = realloc(r->slots, n * sizeof(*s));
		if (!s)
			return NULL;
		memset(s + r->nslots, 0, (n - r->nslots) * sizeof(*s));
		r->slots = s;
		r->nslots = n;
	}
	return &r->slots[i];
}

static void slot_free(struct replay *r, struct slot *s)
{
	if (s->handle)
		zs_free(r->pool, s->handle);
	s->handle = 0;
}

/* One line of the trace: 0, or -1 on a malformed line or a failed allocation. */
static int replay_line(struct replay *r, const char *line)
{
	unsigned long a, b, mem;
	char flag;
	while (*line == ' ' || *line == '\t')
		line++;
	if (*line == '\n' || *line == '\r' || !*line)
		return 0;
	if (*line == '#') {
		/* Header: only what the pool needs; must come before the first operation. */
		if (!r->pool && sscanf(line, "# page_size %lu", &a) == 1)
			r->page_size = a;
		if (!r->pool && sscanf(line, "# chain_size %lu", &a) == 1 && a >= 1 && a <= 16)
			r->chain = (unsigned)a;
		return 0;
	}
	if (!r->pool) {
		struct zs_pool_config cfg;
		/* The kernel profile: a kernel trace replays page-exact only on it. */
		zs_pool_config_init(&cfg);
		cfg.name = "trace_replay";
		cfg.page_size = r->page_size;
		cfg.max_chain = r->chain;
		char why[256];
		if (zs_pool_create(&cfg, &r->pool, why, sizeof(why))) {
			fprintf(stderr, "trace_replay: cannot create a pool (page_size %zu, chain %u): "
				"%s\n", r->page_size, r->chain, why);
			return -1;
		}
	}
	if (sscanf(line, "w %lu %lu %c", &a, &b, &flag) == 3 &&
	    (flag == 'n' || flag == 's' || flag == 'h') && b <= r->page_size) {
		struct slot *s = slot_at(r, a);
		unsigned long h = 0;
		if (!s)
			return -1;
		if (flag != 's') {
			h = zs_malloc(r->pool, flag == 'h' ? r->page_size : b);
			if (ZS_IS_ERR(h)) {
				fprintf(stderr, "trace_replay: line %ld: zs_malloc(%lu) failed\n", r->line, b);
				return -1;
			}
		}
		slot_free(r, s); /* the old object goes after the new one is in */
		s->handle = h;
	} else if (sscanf(line, "d %lu", &a) == 1) {
		if (a < r->nslots)
			slot_free(r, &r->slots[a]);
	} else if (line[0] == 'c' && (line[1] == '\n' || line[1] == '\r' || !line[1])) {
		zs_compact(r->pool);
	} else if (sscanf(line, "= %lu", &mem) == 1) {
		/* The first field is the kernel's mem_used_total in pages. */
		unsigned long ours = zs_get_total_pages(r->pool);
		r->records++;
		r->mismatches += ours != mem;
		if (ours != mem && r->mismatches <= 3)
			printf("line %ld: kernel %lu pages, libzs %lu\n", r->line, mem, ours);
		if (mem > r->kernel_peak)
			r->kernel_peak = mem;
		if (ours > r->libzs_peak)
			r->libzs_peak = ours;
		return 0;
	} else {
		fprintf(stderr, "trace_replay: line %ld: not a trace record: %.40s\n", r->line, line);
		return -1;
	}
	r->ops++;
	return 0;
}

int main(int argc, char **argv)
{
	struct replay r = { .page_size = 4096, .chain = 8 };
	const char *name = argc > 1 ? argv[1] : "(built-in sample)";
	FILE *f = NULL;
	if (argc > 1) {
		f = strcmp(argv[1], "-") ? fopen(argv[1], "r") : stdin;
		if (!f) {
			perror(argv[1]);
			return 2;
		}
	}
	char buf[4100];
	const char *p = sample;
	int rc = 0;
	for (;;) {
		if (f) {
			if (!fgets(buf, sizeof(buf), f))
				break;
		} else {
			size_t len = strcspn(p, "\n");
			if (!*p)
				break;
			snprintf(buf, sizeof(buf), "%.*s", (int)len, p);
			p += len + (p[len] == '\n');
		}
		r.line++;
		if (replay_line(&r, buf)) {
			rc = 2;
			break;
		}
	}
	if (f && f != stdin)
		fclose(f);
	if (!rc && !r.records) {
		fprintf(stderr, "trace_replay: %s: no '=' records\n", name);
		rc = 2;
	}
	if (!rc) {
		printf("%s: %ld operations, %ld records, %ld mem_used mismatches; peak pages: "
		       "kernel %lu, libzs %lu\n",
		       name, r.ops, r.records, r.mismatches, r.kernel_peak, r.libzs_peak);
		rc = r.mismatches ? 1 : 0;
	}
	for (unsigned long i = 0; i < r.nslots; i++)
		slot_free(&r, &r.slots[i]);
	free(r.slots);
	if (r.pool)
		zs_destroy_pool(r.pool);
	return rc;
}
