/* The one definition of set_err (common/err.h). */
#include <stdarg.h>
#include <stdio.h>

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
