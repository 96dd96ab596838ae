/* The kernel's debugfs class table (kclasses.h): located and parsed by column name. */
#include "kclasses.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kclasses_path(int dev, char *buf, size_t len)
{
	snprintf(buf, len, "/sys/kernel/debug/zsmalloc/zram%d/classes", dev);
}

enum { COL_CLASS, COL_ALLOC, COL_USED, COL_PAGES, NCOL };
static const char *const col_name[NCOL] = { "class", "obj_allocated", "obj_used", "pages_used" };

/* Split one line into at most max blank-separated tokens (in place). */
static int tokens(char *line, char **tok, int max)
{
	int n = 0;
	for (char *p = strtok(line, " \t"); p && n < max; p = strtok(NULL, " \t"))
		tok[n++] = p;
	return n;
}

int kclasses_parse(const char *text, struct kclass_row *rows, int max, char *err, size_t errlen)
{
	char *copy = strdup(text ? text : "");
	if (!copy) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	int col[NCOL] = { -1, -1, -1, -1 }, ncols = 0, n = 0, rc = 0;
	char *save = NULL;
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *tok[64];
		int nt = tokens(line, tok, 64);
		if (!nt)
			continue;
		if (ncols == 0) {
			/* the header: every column named, the ones we need found by name */
			ncols = nt;
			for (int i = 0; i < nt; i++)
				for (int c = 0; c < NCOL; c++)
					if (!strcmp(tok[i], col_name[c]))
						col[c] = i;
			for (int c = 0; c < NCOL; c++)
				if (col[c] < 0) {
					snprintf(err, errlen, "no '%s' column in the class table's header",
						 col_name[c]);
					rc = -1;
					goto out;
				}
			continue;
		}
		if (tok[0][0] < '0' || tok[0][0] > '9')
			continue; /* the closing "Total" row */
		if (nt != ncols) {
			snprintf(err, errlen, "a class row has %d columns, the header %d", nt, ncols);
			rc = -1;
			goto out;
		}
		uint64_t v[NCOL];
		for (int c = 0; c < NCOL; c++) {
			char *end;
			v[c] = strtoull(tok[col[c]], &end, 10);
			if (*end || end == tok[col[c]]) {
				snprintf(err, errlen, "'%s' is not a number (column %s)", tok[col[c]],
					 col_name[c]);
				rc = -1;
				goto out;
			}
		}
		if (!v[COL_ALLOC])
			continue;
		if (n < max)
			rows[n] = (struct kclass_row){ (unsigned)v[COL_CLASS], v[COL_ALLOC], v[COL_USED],
						       v[COL_PAGES] };
		n++;
	}
	if (!ncols) {
		snprintf(err, errlen, "empty class table");
		rc = -1;
	}
out:
	free(copy);
	return rc ? rc : n < max ? n : max;
}
