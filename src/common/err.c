/* The one definition of set_err (common/err.h). */
#include <stdarg.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"

void set_err(char *err, size_t err_len, const char *fmt, ...)
{
	va_list ap;

	if (!err || !err_len)
		return;
	va_start(ap, fmt);
	vsnprintf(err, err_len, fmt, ap);
	va_end(ap);
}

void create_begin(char *err, size_t err_len)
{
	if (err && err_len)
		err[0] = '\0';
}

int create_finish(const char *fn, int rc, char *err, size_t err_len)
{
	if (!rc)
		return 0;
	if (err && err_len && !err[0])
		set_err(err, err_len, "%s: %s", fn, strerror(rc < 0 ? -rc : rc));
	errno = rc < 0 ? -rc : rc;
	return rc;
}
