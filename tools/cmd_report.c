/*
 * zs report: a thin launcher for the report script (tools/report/report.py).
 *
 * The experiments, plots and markdown live in Python (matplotlib); this file
 * only finds the script, the libzs Python package, the bench_* programs and
 * the libzs.so that belong to this zs, and an interpreter that can import
 * matplotlib, then execs the script with them followed by the user's arguments.
 *
 * Lookup, from the directory of the zs executable (/proc/self/exe):
 *   installed (`cmake --install`): PREFIX/bin/zs finds the script in
 *     PREFIX/share/libzs/report/, the package in PREFIX/share/libzs/python,
 *     bench_* in PREFIX/libexec/libzs and libzs.so in PREFIX/lib (the
 *     relative paths come from CMake's GNUInstallDirs at build time);
 *   a build directory of a source tree (build, build-NAME, nested ones):
 *     ../tools/report or ../../tools/report, the package in ../python (or
 *     ../../python), bench_* and libzs.so next to zs.
 * $ZS_PYTHON_DIR names another directory holding the libzs package (a source
 * tree's python/); the script is then also looked for in its ../tools/report.
 * The script gets PYTHONPATH (the package) and LIBZS_LIBRARY (this zs's
 * libzs.so, unless already set), so the Python side and the C side measure
 * the same library.
 * Interpreter: $ZS_PYTHON, then /usr/bin/python3 (Debian's, which has
 * python3-matplotlib from scripts/deps.sh), then python3 on PATH; the first
 * one that can `import matplotlib` wins.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmds.h"
#include "opts.h"

/* The pool flags report.py passes on; it has no --class-shards, --max-object or
 * --fit-zspages, so those are refused here rather than listed and then rejected
 * by the script's own parser. */
#define REPORT_POOL_OPTS (OPT_PAGE_SIZE | OPT_POLICY | OPT_FREE_MODE | OPT_DEFERRED | OPT_BACKEND)

static void usage(FILE *f)
{
	fprintf(f,
		"usage: zs report [--quick] [--data FILE|DIR ...] [--out DIR]\n"
		"  --quick            short runs on the embedded corpus (under 2 minutes)\n"
		"  --data FILE|DIR    pages of these files instead of the embedded corpus\n"
		"  --out DIR          where report.md, the PNG plots and results.json go\n"
		"                     (default ./report)\n"
		"Pool shape of the zram-store and backend-comparison steps (the class-table and\n"
		"testmod steps sweep the chain policies themselves):\n");
	opt_pool_help(f, REPORT_POOL_OPTS);
	fprintf(f,
		"                     (--backend: compare zsmalloc with this kind only)\n"
		"No --profile: every step runs the kernel profile (the class-table and testmod\n"
		"steps are compared with the kernel's numbers).\n"
		"Runs the class table, testmod per chain policy, the lock-mode, deferred-free,\n"
		"API and chain benchmarks, zram store vs raw compressor (and kernel zram as\n"
		"root), and the backend comparison; progress on stderr.\n"
		"Environment: ZS_PYTHON (interpreter), ZS_PYTHON_DIR (a directory holding the libzs\n"
		"Python package, e.g. a source tree's python/), LIBZS_LIBRARY (the libzs.so it loads).\n");
}

static int is_file(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Run `py -c "import matplotlib"` quietly; 1 if it succeeds. */
static int has_matplotlib(const char *py)
{
	pid_t pid = fork();
	if (pid < 0)
		return 0;
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execlp(py, py, "-c", "import matplotlib", (char *)NULL);
		_exit(127);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return 0;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int cmd_report(int argc, char **argv)
{
	static const struct option pool_lopts[] = { OPT_POOL_LONGOPTS, { NULL, 0, NULL, 0 } };
	struct pool_opts po;
	pool_opts_init(&po);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		}
		/* The pool flags are checked here, as every command checks them; the script
		 * gets them as given. */
		for (const struct option *o = pool_lopts; o->name; o++) {
			if (strncmp(argv[i], "--", 2) || strcmp(argv[i] + 2, o->name))
				continue;
			const char *v = NULL;
			if (o->has_arg == required_argument) {
				if (i + 1 >= argc) {
					fprintf(stderr, "zs report: %s needs a value\n", argv[i]);
					return 2;
				}
				v = argv[i + 1];
			}
			if (opt_pool_arg("report", REPORT_POOL_OPTS, o->val, v, &po))
				return 2;
		}
	}

	char exe[PATH_MAX], dir[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0) {
		fprintf(stderr, "zs report: cannot read /proc/self/exe: %s\n", strerror(errno));
		return 2;
	}
	exe[n] = 0;
	snprintf(dir, sizeof(dir), "%s", exe);
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = 0;

	/* Candidate layouts: where the script is, and what goes with it there. */
	static char script[PATH_MAX + 64], pydir[PATH_MAX + 64], benchdir[PATH_MAX + 64],
		lib[PATH_MAX + 64];
	const char *env_dir = getenv("ZS_PYTHON_DIR");
	struct layout { const char *script, *py, *bench, *lib; } lay[] = {
		{ ZS_BIN_TO_DATA "/report/report.py", ZS_BIN_TO_DATA "/python", ZS_BIN_TO_LIBEXEC,
		  ZS_BIN_TO_LIB "/libzs.so" },
		{ "../tools/report/report.py", "../python", ".", "libzs.so" },
		{ "../../tools/report/report.py", "../../python", ".", "libzs.so" },
	};
	script[0] = 0;
	for (size_t i = 0; i < sizeof(lay) / sizeof(lay[0]) && !script[0]; i++) {
		snprintf(script, sizeof(script), "%s/%s", dir, lay[i].script);
		if (!is_file(script)) {
			script[0] = 0;
			continue;
		}
		snprintf(pydir, sizeof(pydir), "%s/%s", dir, lay[i].py);
		snprintf(benchdir, sizeof(benchdir), "%s/%s", dir, lay[i].bench);
		snprintf(lib, sizeof(lib), "%s/%s", dir, lay[i].lib);
	}
	if (env_dir && *env_dir) {
		snprintf(pydir, sizeof(pydir), "%s", env_dir);
		char pkg[PATH_MAX + 64];
		snprintf(pkg, sizeof(pkg), "%s/libzs/__init__.py", env_dir);
		if (!is_file(pkg)) {
			fprintf(stderr, "zs report: ZS_PYTHON_DIR=%s has no libzs package\n", env_dir);
			return 2;
		}
		if (!script[0]) {
			/* A zs outside any tree: the source tree of that python/. */
			snprintf(script, sizeof(script), "%s/../tools/report/report.py", env_dir);
			if (!is_file(script))
				script[0] = 0;
			snprintf(benchdir, sizeof(benchdir), "%s", dir);
			snprintf(lib, sizeof(lib), "%s/libzs.so", dir);
		}
	}
	if (!script[0]) {
		fprintf(stderr,
			"zs report: cannot find report.py for %s (looked in %s/%s/report, "
			"%s/../tools/report and %s/../../tools/report); install with `cmake --install`, "
			"or run the zs of a source tree's build directory\n",
			exe, dir, ZS_BIN_TO_DATA, dir, dir);
		return 2;
	}
	if (!is_file(lib))
		fprintf(stderr, "zs report: warning: no libzs.so at %s; the Python side uses "
				"LIBZS_LIBRARY or its own lookup\n", lib);
	else if (!getenv("LIBZS_LIBRARY"))
		setenv("LIBZS_LIBRARY", lib, 1);
	/* The package first on the path, ahead of any other libzs installed. */
	const char *old_pp = getenv("PYTHONPATH");
	char *pp = malloc(strlen(pydir) + (old_pp ? strlen(old_pp) : 0) + 2);
	if (!pp) {
		fprintf(stderr, "zs report: out of memory\n");
		return 2;
	}
	sprintf(pp, "%s%s%s", pydir, old_pp && *old_pp ? ":" : "", old_pp && *old_pp ? old_pp : "");
	setenv("PYTHONPATH", pp, 1);
	free(pp);

	const char *env_py = getenv("ZS_PYTHON");
	const char *cands[] = {env_py && *env_py ? env_py : NULL, "/usr/bin/python3", "python3"};
	const char *py = NULL;
	for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]) && !py; i++)
		if (cands[i] && has_matplotlib(cands[i]))
			py = cands[i];
	if (!py) {
		fprintf(stderr,
			"zs report: no Python 3 with matplotlib found (tried %s/usr/bin/python3 and "
			"python3 on PATH).\n"
			"Install it with `bash scripts/deps.sh` (Debian: python3-matplotlib), or set "
			"ZS_PYTHON to an interpreter that has matplotlib.\n",
			env_py && *env_py ? "$ZS_PYTHON, " : "");
		return 2;
	}

	char **nargv = calloc((size_t)argc + 8, sizeof(char *));
	if (!nargv) {
		fprintf(stderr, "zs report: out of memory\n");
		return 2;
	}
	int k = 0;
	nargv[k++] = (char *)py;
	nargv[k++] = script;
	nargv[k++] = "--zs";
	nargv[k++] = exe;
	nargv[k++] = "--bench-dir";
	nargv[k++] = benchdir;
	for (int i = 1; i < argc; i++)
		nargv[k++] = argv[i];
	nargv[k] = NULL;
	fflush(stdout);
	execvp(py, nargv);
	fprintf(stderr, "zs report: cannot run %s: %s\n", py, strerror(errno));
	free(nargv);
	return 2;
}
