/*
 * Option parsing shared by every `zs` command: the pool-shaping flags
 * (--profile, --page-size, --chain, --chain-policy, --delta, --free-mode,
 * --deferred, --backend, --class-shards, --fit-zspages) and the checked
 * number/size/path parsers.  One place, so that
 * every command spells, range-checks and reports them the same way: a bad
 * value is one message naming the option and the accepted range, exit 2.
 * A command describes its own flags in a table (struct opt_flag) and calls
 * opt_parse, which runs getopt_long over the table and the pool options the
 * command accepts; opt_flags_help prints the table's help lines, so a flag
 * and its line in --help live in one place (a command whose help is prose
 * grouped by topic, as record's and replay's, leaves the lines NULL).  Flags
 * that need more than a range check (repeatable ones, a choice of words, a
 * process that must exist) are OPTK_FN hooks; rules between flags are
 * checked after opt_parse, with the table's `given` marks.  Every command
 * parses this way but `zs report`, which hands its arguments to a Python
 * script and only checks the pool options among them (OPT_POOL_LONGOPTS and
 * opt_pool_arg) as every command checks them.
 */
#ifndef ZS_TOOLS_OPTS_H
#define ZS_TOOLS_OPTS_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include "json.h"
#include "parse.h"
#include "zs/zsmalloc.h"

/* Pool options a command accepts (a mask) and which were given (po->set). */
enum {
	OPT_PAGE_SIZE = 1 << 0,
	OPT_CHAIN = 1 << 1,
	OPT_CHAIN_POLICY = 1 << 2,
	OPT_DELTA = 1 << 3,
	OPT_FREE_MODE = 1 << 4,
	OPT_DEFERRED = 1 << 5,
	OPT_BACKEND = 1 << 6,
	OPT_CLASS_SHARDS = 1 << 7,
	OPT_MAX_OBJECT = 1 << 8,
	OPT_FIT_ZSPAGES = 1 << 9,
	OPT_PROFILE = 1 << 10, /* --profile kernel|app; app only where OPT_APP_FIELDS all are */
	OPT_POLICY = OPT_CHAIN | OPT_CHAIN_POLICY | OPT_DELTA, /* change the class table */
	/* The fields zs_pool_config_init_app changes (zs/zsmalloc.h): a command
	 * that refuses any of them runs the kernel profile only. */
	OPT_APP_FIELDS = OPT_CLASS_SHARDS | OPT_FREE_MODE | OPT_FIT_ZSPAGES,
	OPT_ALL = 0x7ff,
};

/* getopt_long codes of the pool options (above any short option character). */
enum {
	OPT_POOL_FIRST = 0x1000,
	OPTC_PAGE_SIZE = OPT_POOL_FIRST,
	OPTC_CHAIN,
	OPTC_CHAIN_POLICY,
	OPTC_DELTA,
	OPTC_FREE_MODE,
	OPTC_DEFERRED,
	OPTC_BACKEND,
	OPTC_CLASS_SHARDS,
	OPTC_MAX_OBJECT,
	OPTC_FIT_ZSPAGES,
	OPTC_PROFILE,
	OPT_POOL_LAST = OPTC_PROFILE,
};

#define OPT_POOL_LONGOPTS                                                   \
	{ "page-size", required_argument, NULL, OPTC_PAGE_SIZE },           \
	{ "chain", required_argument, NULL, OPTC_CHAIN },                   \
	{ "chain-policy", required_argument, NULL, OPTC_CHAIN_POLICY },     \
	{ "delta", required_argument, NULL, OPTC_DELTA },                   \
	{ "free-mode", required_argument, NULL, OPTC_FREE_MODE },           \
	{ "deferred", no_argument, NULL, OPTC_DEFERRED },                   \
	{ "backend", required_argument, NULL, OPTC_BACKEND },               \
	{ "class-shards", required_argument, NULL, OPTC_CLASS_SHARDS },     \
	{ "max-object", required_argument, NULL, OPTC_MAX_OBJECT },         \
	{ "fit-zspages", no_argument, NULL, OPTC_FIT_ZSPAGES },             \
	{ "profile", required_argument, NULL, OPTC_PROFILE }

struct pool_opts {
	struct zs_pool_config cfg; /* page_size/max_chain/class_delta/policies */
	const char *backend;       /* --backend kind (checked against zs_backend_kinds) */
	int deferred;              /* --deferred: free through zs_free_deferred */
	unsigned set;              /* OPT_* given on the command line */
	const char *profile;       /* "kernel" (the default) or "app" */
	/* Every --page-size given, in order (the first OPT_PAGE_SIZES_MAX kept;
	 * npage_sizes counts them all), for a command that runs several. */
	size_t page_sizes[4];
	unsigned npage_sizes;
};
#define OPT_PAGE_SIZES_MAX 4

void pool_opts_init(struct pool_opts *po);

/*
 * Apply the pool option with getopt code `code` and value `arg` (NULL for
 * --deferred).  --profile kernel|app (the words of zs_pool_config_init and
 * zs_pool_config_init_app, and of the Python binding's profile=) sets the
 * defaults of the fields the profiles differ in (OPT_APP_FIELDS); a field
 * given by its own flag keeps that value whether the flag comes before or
 * after --profile.  --profile app is refused (exit 2) by a command whose
 * `accepted` lacks any of OPT_APP_FIELDS: it runs the kernel profile only.
 * `accepted` is the command's OPT_* mask: an option outside it
 * is refused with a message saying it does not change this command's result.
 * Returns 0, or 2 after printing the error.
 */
int opt_pool_arg(const char *cmd, unsigned accepted, int code, const char *arg,
		 struct pool_opts *po);

/* Help lines for the options in `accepted`. */
void opt_pool_help(FILE *f, unsigned accepted);

/*
 * Checked numbers: the whole string must be a decimal integer (no sign, no
 * trailing text, no overflow) in lo..hi.  opt_bytes also takes a K/M/G
 * suffix (binary units, optional "iB"/"B").  0, or 2 after printing
 * "zs CMD: OPT: 'S' is not ... (accepted: lo..hi)".
 */
int opt_u64(const char *cmd, const char *opt, const char *s, uint64_t lo, uint64_t hi,
	    uint64_t *out);
int opt_bytes(const char *cmd, const char *opt, const char *s, uint64_t lo, uint64_t hi,
	      uint64_t *out);
/* A finite number in lo..hi (parse_double); 0, or 2 after the message. */
int opt_double(const char *cmd, const char *opt, const char *s, double lo, double hi,
	       double *out);
/* A --free-mode value (parse_free_mode); 0, or 2 after the message. */
int opt_free_mode(const char *cmd, const char *opt, const char *s, enum zs_free_mode *out);
/* The same rules without a message (parse_u64, parse_bytes, ...) are in parse.h. */

/*
 * A path option: must exist; a regular file must be non-empty, a directory
 * must hold at least one entry (when dir_ok), anything else is refused.
 * 0, or 2 after a message naming the option.
 */
int opt_path(const char *cmd, const char *opt, const char *path, int dir_ok);
/* After a failed write of an output file: remove it when it is a regular file,
 * so a failure leaves no partial output behind (a device such as /dev/full stays). */
void remove_partial(const char *path);

/* The message getopt_long's '?' deserves: names the bad option; returns 2. */
int opt_bad(const char *cmd, int argc, char **argv);

/*
 * One flag of a command's table.  kind says what ptr points to and what a
 * value must be: OPTK_FLAG sets an int to 1 (no value); OPTK_U64 and
 * OPTK_BYTES check a uint64_t in lo..hi (opt_u64, opt_bytes); OPTK_INT an
 * int in lo..hi; OPTK_FRAC a double in 0..1 (opt_double); OPTK_STR stores
 * the value as given (const char *); OPTK_FN: ptr is a struct opt_hook,
 * whose fn gets the value (NULL for a flag without one: lo 1 means the flag
 * takes none) and the hook's ptr, checks and stores it and returns 0, or 2
 * after its message (a repeatable option, a choice of words, a value
 * checked against the system).  name is the long
 * name without "--" ("" for a flag with only its one-letter form); a name
 * that is also a pool option's replaces it for this command.  short_name,
 * when not 0, is its one-letter form.  help is the flag's line(s) in --help,
 * printed as written (NULL: described with another flag).  A table ends with
 * an entry whose name is NULL.
 */
enum opt_kind { OPTK_FLAG, OPTK_U64, OPTK_BYTES, OPTK_INT, OPTK_FRAC, OPTK_STR, OPTK_FN };
struct opt_flag {
	const char *name;
	char short_name;
	enum opt_kind kind;
	void *ptr;
	uint64_t lo, hi;
	const char *help;
};
struct opt_hook {
	int (*fn)(const char *cmd, const char *opt, const char *arg, void *ptr);
	void *ptr;
};

/*
 * Parse argv[1..] against `flags`, --help (-h), and, when po is not NULL,
 * the pool options in pool_accepted (opt_pool_arg).  Stops at the first
 * argument that is not an option (optind points at it).  given, when not
 * NULL, has an entry per flag of the table, set to 1 for each flag given
 * (for rules between flags, checked after parsing).  Returns 0, 1 after
 * printing usage(stdout) for --help, or 2 after a message.
 */
int opt_parse(const char *cmd, int argc, char **argv, const struct opt_flag *flags,
	      unsigned pool_accepted, struct pool_opts *po, void (*usage)(FILE *),
	      unsigned char *given);
/* Whether the flag of `flags` that stores into ptr was given (opt_parse's given). */
int opt_given(const struct opt_flag *flags, const unsigned char *given, const void *ptr);
/* --pid: a process that exists now; 0, or 2 after the message (an OPTK_FN). */
int opt_pid(const char *cmd, const char *opt, const char *arg, void *pid /* int * */);
/* The help lines of `flags`, in table order. */
void opt_flags_help(FILE *f, const struct opt_flag *flags);

/* Progress lines: on when stderr is a terminal, or forced by --progress. */
int opt_progress_default(void);
/* One progress update: rewritten in place ('\r') on a terminal, one line each elsewhere;
 * progress_done() ends the in-place line. */
void progress_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void progress_done(void);

/* MemAvailable from /proc/meminfo, or less when this process's cgroup has less
 * room under its memory limit; bytes, 0 if unknown. */
uint64_t mem_available(void);


#endif
