/*
 * The `zs` CLI's subcommands: one file per command (tools/cmd_NAME.c), each
 * exporting cmd_NAME(argc, argv) with argv[0] = the command name.  Commands
 * use only the public headers in include/zs/.  Exit codes: 0 ok, 1 a check
 * failed (e.g. replay mismatches), 2 usage or runtime error.
 */
#ifndef ZS_TOOLS_CMDS_H
#define ZS_TOOLS_CMDS_H

int cmd_record(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_classes(int argc, char **argv);
int cmd_testmod(int argc, char **argv);
int cmd_zram(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_region(int argc, char **argv);
int cmd_soak(int argc, char **argv);
int cmd_dict(int argc, char **argv);
int cmd_pages(int argc, char **argv);
int cmd_zswap(int argc, char **argv);

struct zs_pageset;
/* zram_matrix.c: `zs zram --matrix` (compressor x level x dict x 4K/64K groups). */
int zram_matrix(const struct zs_pageset *ps, const char *dict, const char *filter, int json);

#endif
