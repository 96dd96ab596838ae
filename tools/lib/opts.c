/*
 * The one parser of `zs`'s shared options and checked values (see opts.h).
 * Everything that turns a command-line string into a number, a size, a
 * policy or a path is here, so a range or a message is fixed once.
 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "opts.h"
#include "zs/backend.h"
#include "zs/pages.h"

static const char *const pool_opt_name[] = { "--page-size",  "--chain",    "--chain-policy",
					     "--delta",      "--free-mode", "--deferred",
					     "--backend",    "--class-shards", "--max-object",
					     "--fit-zspages", "--profile" };

void pool_opts_init(struct pool_opts *po)
{
	memset(po, 0, sizeof(*po));
	/* The kernel profile, on purpose: replay, classes, testmod and zram
	 * --vs-kernel compare page counts with the kernel, which only the
	 * kernel's layout matches (zs_pool_config_init_app would not). */
	zs_pool_config_init(&po->cfg);
	po->backend = "zsmalloc";
	po->profile = "kernel";
}

/* --profile: the profile's values for the fields no flag of their own has set,
 * so the outcome does not depend on where --profile stands among the flags.
 * Only the fields the two profiles differ in (zs/zsmalloc.h lists them). */
static int set_profile(const char *cmd, unsigned accepted, const char *arg,
		       struct pool_opts *po)
{
	struct zs_pool_config p;
	if (!strcmp(arg, "kernel")) {
		zs_pool_config_init(&p);
	} else if (!strcmp(arg, "app")) {
		if ((accepted & OPT_APP_FIELDS) != OPT_APP_FIELDS) {
			fprintf(stderr, "zs %s: --profile app: this command runs the kernel profile "
					"only (`zs help %s` says why); accepted here: kernel\n",
				cmd, cmd);
			return 2;
		}
		zs_pool_config_init_app(&p);
	} else {
		fprintf(stderr, "zs %s: --profile: '%s' is not one of: kernel, app\n", cmd, arg);
		return 2;
	}
	po->profile = !strcmp(arg, "app") ? "app" : "kernel";
	if (!(po->set & OPT_CLASS_SHARDS))
		po->cfg.class_shards = p.class_shards;
	if (!(po->set & OPT_FREE_MODE))
		po->cfg.free_mode = p.free_mode;
	if (!(po->set & OPT_FIT_ZSPAGES))
		po->cfg.fit_zspages = p.fit_zspages;
	return 0;
}

int opt_free_mode(const char *cmd, const char *opt, const char *s, enum zs_free_mode *out)
{
	if (parse_free_mode(s, out)) {
		fprintf(stderr, "zs %s: %s: '%s' is not one of: %s\n", cmd, opt, s,
			names_list(zs_free_mode_names()));
		return 2;
	}
	return 0;
}

int opt_double(const char *cmd, const char *opt, const char *s, double lo, double hi,
	       double *out)
{
	double v;
	if (parse_double(s, &v) || v < lo || v > hi) {
		fprintf(stderr, "zs %s: %s: '%s' is not a number in %g..%g\n", cmd, opt, s, lo, hi);
		return 2;
	}
	*out = v;
	return 0;
}

static int range_msg(const char *cmd, const char *opt, const char *s, const char *what,
		     uint64_t lo, uint64_t hi)
{
	fprintf(stderr, "zs %s: %s: '%s' is not %s in %llu..%llu\n", cmd, opt, s, what,
		(unsigned long long)lo, (unsigned long long)hi);
	return 2;
}

int opt_u64(const char *cmd, const char *opt, const char *s, uint64_t lo, uint64_t hi,
	    uint64_t *out)
{
	uint64_t v;
	if (parse_u64(s, &v) || v < lo || v > hi)
		return range_msg(cmd, opt, s, "a whole number", lo, hi);
	*out = v;
	return 0;
}

int opt_bytes(const char *cmd, const char *opt, const char *s, uint64_t lo, uint64_t hi,
	      uint64_t *out)
{
	uint64_t v;
	if (parse_bytes(s, &v) || v < lo || v > hi)
		return range_msg(cmd, opt, s, "a size (bytes, K/M/G suffix)", lo, hi);
	*out = v;
	return 0;
}

int opt_path(const char *cmd, const char *opt, const char *path, int dir_ok)
{
	struct stat st;
	if (!*path) {
		fprintf(stderr, "zs %s: %s: empty path\n", cmd, opt);
		return 2;
	}
	if (stat(path, &st)) {
		fprintf(stderr, "zs %s: %s %s: %s\n", cmd, opt, path, strerror(errno));
		return 2;
	}
	if (S_ISDIR(st.st_mode)) {
		if (!dir_ok) {
			fprintf(stderr, "zs %s: %s %s: is a directory (a file is needed)\n", cmd, opt,
				path);
			return 2;
		}
		DIR *d = opendir(path);
		if (!d) {
			fprintf(stderr, "zs %s: %s %s: %s\n", cmd, opt, path, strerror(errno));
			return 2;
		}
		struct dirent *e;
		int any = 0;
		while (!any && (e = readdir(d)))
			any = strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
		closedir(d);
		if (!any) {
			fprintf(stderr, "zs %s: %s %s: empty directory\n", cmd, opt, path);
			return 2;
		}
		return 0;
	}
	if (!S_ISREG(st.st_mode)) {
		fprintf(stderr, "zs %s: %s %s: not a regular file or directory\n", cmd, opt, path);
		return 2;
	}
	if (st.st_size == 0) {
		fprintf(stderr, "zs %s: %s %s: empty file\n", cmd, opt, path);
		return 2;
	}
	if (access(path, R_OK)) {
		fprintf(stderr, "zs %s: %s %s: %s\n", cmd, opt, path, strerror(errno));
		return 2;
	}
	return 0;
}

void remove_partial(const char *path)
{
	struct stat st;
	if (!lstat(path, &st) && S_ISREG(st.st_mode))
		unlink(path);
}

int opt_bad(const char *cmd, int argc, char **argv)
{
	(void)argc;
	(void)argv;
	/* getopt_long has already named the option on stderr. */
	fprintf(stderr, "zs %s: `zs help %s` lists the options\n", cmd, cmd);
	return 2;
}

int opt_progress_default(void)
{
	return isatty(2);
}

static uint64_t read_u64_file(const char *path)
{
	FILE *f = fopen(path, "r");
	unsigned long long v = 0;
	if (!f)
		return 0;
	if (fscanf(f, "%llu", &v) != 1)
		v = 0; /* "max": no limit */
	fclose(f);
	return v;
}

/* Room left under this process's cgroup memory limit (v2 or v1), 0 if none. */
static uint64_t cgroup_room(void)
{
	FILE *f = fopen("/proc/self/cgroup", "r");
	char line[512], path[700];
	uint64_t room = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *cg = NULL;
		const char *lim = NULL, *use = NULL, *base = NULL;
		line[strcspn(line, "\n")] = 0;
		if (!strncmp(line, "0::", 3)) {
			cg = line + 3;
			base = "/sys/fs/cgroup";
			lim = "memory.max";
			use = "memory.current";
		} else if ((cg = strstr(line, ":memory:"))) {
			cg += 8;
			base = "/sys/fs/cgroup/memory";
			lim = "memory.limit_in_bytes";
			use = "memory.usage_in_bytes";
		}
		if (!cg)
			continue;
		snprintf(path, sizeof(path), "%s%s/%s", base, cg, lim);
		uint64_t max = read_u64_file(path);
		snprintf(path, sizeof(path), "%s%s/%s", base, cg, use);
		uint64_t cur = read_u64_file(path);
		if (max && max < (1ull << 60)) {
			uint64_t r = max > cur ? max - cur : 1;
			if (!room || r < room)
				room = r;
		}
	}
	fclose(f);
	return room;
}

void progress_line(const char *fmt, ...)
{
	int tty = isatty(2);
	va_list ap;
	if (tty)
		fputc('\r', stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (!tty)
		fputc('\n', stderr);
}

void progress_done(void)
{
	if (isatty(2))
		fputc('\n', stderr);
}

uint64_t mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[128];
	unsigned long long kb = 0;
	if (f) {
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
				break;
		fclose(f);
	}
	uint64_t avail = (uint64_t)kb * 1024, room = cgroup_room();
	if (room && (!avail || room < avail))
		avail = room;
	return avail;
}

static int backend_known(const char *kind)
{
	for (const char *const *k = zs_backend_kinds(); *k; k++)
		if (!strcmp(*k, kind))
			return 1;
	return 0;
}

int opt_pool_arg(const char *cmd, unsigned accepted, int code, const char *arg,
		 struct pool_opts *po)
{
	unsigned bit = 1u << (code - OPT_POOL_FIRST);
	const char *name = pool_opt_name[code - OPT_POOL_FIRST];
	uint64_t v;
	if (!(accepted & bit)) {
		fprintf(stderr, "zs %s: %s does not apply to this command (it would not change the "
				"result); `zs help %s` lists the options\n",
			cmd, name, cmd);
		return 2;
	}
	if (code == OPTC_PROFILE)
		return set_profile(cmd, accepted, arg, po);
	po->set |= bit;
	switch (code) {
	case OPTC_PAGE_SIZE:
		if (opt_bytes(cmd, name, arg, ZS_PAGE_SIZE_MIN, ZS_PAGE_SIZE_MAX, &v))
			return 2;
		if (!zs_page_size_valid((size_t)v)) {
			fprintf(stderr, "zs %s: %s: '%s' is not a power of two in 4096..65536 (4K..64K)\n",
				cmd, name, arg);
			return 2;
		}
		po->cfg.page_size = (size_t)v;
		if (po->npage_sizes < OPT_PAGE_SIZES_MAX)
			po->page_sizes[po->npage_sizes] = (size_t)v;
		po->npage_sizes++;
		return 0;
	case OPTC_CHAIN:
		if (opt_u64(cmd, name, arg, 1, ZS_MAX_CHAIN, &v))
			return 2;
		po->cfg.max_chain = (unsigned)v;
		return 0;
	case OPTC_DELTA:
		if (opt_u64(cmd, name, arg, 8, 65536, &v))
			return 2;
		if (v % 8) {
			fprintf(stderr, "zs %s: %s: '%s' is not a multiple of 8 in 8..65536\n", cmd,
				name, arg);
			return 2;
		}
		po->cfg.class_delta = (unsigned)v;
		return 0;
	case OPTC_CHAIN_POLICY:
		if (parse_chain_policy(arg, &po->cfg.chain_policy)) {
			fprintf(stderr, "zs %s: %s: '%s' is not one of: %s (the first is the kernel's)\n",
				cmd, name, arg, names_list(zs_chain_policy_names()));
			return 2;
		}
		return 0;
	case OPTC_FREE_MODE:
		return opt_free_mode(cmd, name, arg, &po->cfg.free_mode);
	case OPTC_DEFERRED:
		po->deferred = 1;
		return 0;
	case OPTC_FIT_ZSPAGES:
		po->cfg.fit_zspages = 1;
		return 0;
	case OPTC_CLASS_SHARDS:
		if (parse_class_shards(arg, &po->cfg.class_shards))
			return range_msg(cmd, name, arg, "a whole number", 0,
					 ZS_MAX_CLASS_SHARDS);
		return 0;
	case OPTC_MAX_OBJECT:
		/* Checked against the page size by zs_pool_create (-EINVAL and a reason), as every
		 * other field. */
		if (opt_bytes(cmd, name, arg, ZS_PAGE_SIZE_MIN,
			      (uint64_t)ZS_MAX_OBJECT_PAGES * ZS_PAGE_SIZE_MAX, &v))
			return 2;
		po->cfg.max_object_size = (size_t)v;
		return 0;
	case OPTC_BACKEND:
		if (!backend_known(arg)) {
			fprintf(stderr, "zs %s: %s: '%s' is not one of:", cmd, name, arg);
			for (const char *const *k = zs_backend_kinds(); *k; k++)
				fprintf(stderr, " %s", *k);
			fprintf(stderr, "\n");
			return 2;
		}
		po->backend = arg;
		return 0;
	}
	return 2;
}

void opt_pool_help(FILE *f, unsigned accepted)
{
	static const char *const help[] = {
		"  --page-size N        pool page size, a power of two in 4K..64K (default 4096)\n",
		"  --chain N            max pages per zspage, 1..16 (default 8, the kernel's)\n",
		NULL, /* --chain-policy: from the registry, below */
		("  --delta N            bytes between size classes, multiple of 8 in 8..65536\n"
		 "                       (default: the kernel's, max(page/256, 16))\n"),
		NULL, /* --free-mode: from the registry, below */
		"  --deferred           free through zs_free_deferred (batched frees)\n",
		"  --backend KIND       zsmalloc (default), zblock, malloc, ... (zs_backend_kinds)\n",
		("  --class-shards N     copies of each size class, one used per CPU: 0..64 or auto\n"
		 "                       (default 1, the kernel's; page counts then differ from it)\n"),
		("  --max-object N       largest object, page size..16 pages (K/M suffix; default one\n"
		 "                       page, the kernel's): one class per page count past a page\n"),
		("  --fit-zspages        compaction leaves each class at most one partly used zspage,\n"
		 "                       of the fewest pages its objects need (the app profile's;\n"
		 "                       page counts then differ from the kernel's)\n"),
	};
	/* Policy lists come from the registries (zs/zsmalloc.h), so a new entry is
	 * documented wherever the option is. */
#define HELP_ROW(id, fn, name, text) fprintf(f, "                         %-15s %s\n", name, text);
	if ((accepted & OPT_PROFILE) && (accepted & OPT_APP_FIELDS) == OPT_APP_FIELDS)
		fputs("  --profile P          the pool's profile (zs/zsmalloc.h), default kernel:\n"
		      "                         kernel  zs_pool_config_init: the kernel's layout\n"
		      "                         app     zs_pool_config_init_app: --class-shards auto\n"
		      "                                 --free-mode class --fit-zspages\n"
		      "                       the profile sets the defaults; --class-shards,\n"
		      "                       --free-mode or --fit-zspages, before or after it,\n"
		      "                       change that one field\n",
		      f);
	else if (accepted & OPT_PROFILE)
		fputs("  --profile kernel     the only profile here (default; --profile app is\n"
		      "                       refused, see below)\n",
		      f);
	for (unsigned i = 0; i < sizeof(help) / sizeof(help[0]); i++) {
		if (!(accepted & (1u << i)))
			continue;
		if (help[i]) {
			fputs(help[i], f);
		} else if ((1u << i) == OPT_CHAIN_POLICY) {
			fputs("  --chain-policy P     how a class picks its pages per zspage:\n", f);
			ZS_CHAIN_POLICIES(HELP_ROW)
		} else {
			fputs("  --free-mode M        how zs_free finds and locks the object's class:\n", f);
			ZS_FREE_MODES(HELP_ROW)
		}
	}
#undef HELP_ROW
}

/* ---- the flag-table parser ---- */

/* getopt_long codes of a table's flags: past the pool options' codes. */
#define OPT_TABLE_FIRST 0x2000

int opt_parse(const char *cmd, int argc, char **argv, const struct opt_flag *flags,
	      unsigned pool_accepted, struct pool_opts *po, void (*usage)(FILE *),
	      unsigned char *given)
{
	static const struct option pool_longopts[] = { OPT_POOL_LONGOPTS };
	size_t npool = po ? sizeof(pool_longopts) / sizeof(pool_longopts[0]) : 0, n = 0;
	while (flags[n].name)
		n++;
	struct option *lo = calloc(n + npool + 2, sizeof(*lo));
	char *shorts = malloc(2 * n + 2);
	if (!lo || !shorts) {
		free(lo);
		free(shorts);
		fprintf(stderr, "zs %s: out of memory\n", cmd);
		return 2;
	}
	size_t k = 0, ns = 0;
	shorts[ns++] = 'h';
	for (size_t i = 0; i < n; i++) {
		int arg = flags[i].kind == OPTK_FLAG || (flags[i].kind == OPTK_FN && flags[i].lo == 1)
				  ? no_argument
				  : required_argument;
		if (flags[i].name[0])
			lo[k++] = (struct option){ flags[i].name, arg, NULL, OPT_TABLE_FIRST + (int)i };
		if (flags[i].short_name) {
			shorts[ns++] = flags[i].short_name;
			if (arg == required_argument)
				shorts[ns++] = ':';
		}
	}
	shorts[ns] = 0;
	for (size_t i = 0; i < npool; i++)
		lo[k++] = pool_longopts[i];
	lo[k++] = (struct option){ "help", no_argument, NULL, 'h' };
	int rc = 0, opt;
	optind = 1;
	while (!rc && (opt = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
		const struct opt_flag *f = NULL;
		if (opt >= OPT_TABLE_FIRST && opt < OPT_TABLE_FIRST + (int)n)
			f = &flags[opt - OPT_TABLE_FIRST];
		for (size_t i = 0; !f && opt > 0 && opt < 128 && i < n; i++)
			if (flags[i].short_name == opt)
				f = &flags[i];
		if (f) {
			char dashed[64];
			uint64_t v;
			if (given)
				given[f - flags] = 1;
			if (f->name[0])
				snprintf(dashed, sizeof dashed, "--%s", f->name);
			else
				snprintf(dashed, sizeof dashed, "-%c", f->short_name);
			switch (f->kind) {
			case OPTK_FLAG: *(int *)f->ptr = 1; break;
			case OPTK_U64: rc = opt_u64(cmd, dashed, optarg, f->lo, f->hi, f->ptr); break;
			case OPTK_BYTES: rc = opt_bytes(cmd, dashed, optarg, f->lo, f->hi, f->ptr); break;
			case OPTK_INT:
				rc = opt_u64(cmd, dashed, optarg, f->lo, f->hi, &v);
				if (!rc)
					*(int *)f->ptr = (int)v;
				break;
			case OPTK_FRAC: rc = opt_double(cmd, dashed, optarg, 0, 1, f->ptr); break;
			case OPTK_STR: *(const char **)f->ptr = optarg; break;
			case OPTK_FN: {
				const struct opt_hook *h = f->ptr;
				rc = h->fn(cmd, dashed, optarg, h->ptr);
				break;
			}
			}
		} else if (po && opt >= OPT_POOL_FIRST && opt <= OPT_POOL_LAST) {
			rc = opt_pool_arg(cmd, pool_accepted, opt, optarg, po);
		} else if (opt == 'h') {
			usage(stdout);
			rc = 1;
		} else {
			rc = opt_bad(cmd, argc, argv);
		}
	}
	free(lo);
	free(shorts);
	return rc;
}

int opt_given(const struct opt_flag *flags, const unsigned char *given, const void *ptr)
{
	for (size_t i = 0; flags[i].name; i++)
		if (flags[i].ptr == ptr && given[i])
			return 1;
	return 0;
}

int opt_pid(const char *cmd, const char *opt, const char *arg, void *pid)
{
	uint64_t v;
	char proc[32];
	if (opt_u64(cmd, opt, arg, 1, 4194304, &v))
		return 2;
	snprintf(proc, sizeof(proc), "/proc/%llu", (unsigned long long)v);
	if (access(proc, F_OK)) {
		fprintf(stderr, "zs %s: %s %s: no such process\n", cmd, opt, arg);
		return 2;
	}
	*(int *)pid = (int)v;
	return 0;
}

void opt_flags_help(FILE *f, const struct opt_flag *flags)
{
	for (; flags->name; flags++)
		if (flags->help)
			fputs(flags->help, f);
}
