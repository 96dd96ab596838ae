/*
 * The create calls' reason for a failure: every layer's *_create(..., err,
 * err_len) writes one line into the caller's buffer, or nothing when the
 * caller passed none.  One function, so every layer truncates and skips the
 * same way.
 */
#ifndef ZS_SRC_COMMON_ERR_H
#define ZS_SRC_COMMON_ERR_H

#include <stddef.h>

void set_err(char *err, size_t err_len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
