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

/*
 * Every public create's exit: on failure a reason is always there (the
 * layer's own line, else "<fn>: <strerror>"), errno holds the positive code
 * so callers of the older pointer-returning creates keep their errno checks.
 * Call create_begin first so a stale message is never taken for this one's.
 */
void create_begin(char *err, size_t err_len);
int create_finish(const char *fn, int rc, char *err, size_t err_len);

#endif
