/*
 * Internal consistency checks for every layer, the user-space counterpart of
 * the kernel's VM_BUG_ON/lockdep_assert_held and mimalloc's
 * mi_assert_internal.  The lock rules and invariants the comments state
 * (class lock held here, a zspage sits on the list its fullness names, a
 * handle is live when freed) are checked only in a build configured with
 * -DZS_DEBUG=ON, which CI uses for its ASan and TSan runs: there a broken
 * rule stops the program at the line that broke it instead of showing up
 * later as corrupt memory or a wrong count.  Otherwise the checks compile
 * to nothing: the condition sits behind a constant false, so it is never
 * evaluated, yet it is still compiled (it cannot rot) and counts as a use of
 * the variables and helpers only it names (no unused warnings, gcc or clang).
 *
 * These are for the library's own bugs.  Caller mistakes that the API
 * promises to report (checked mode's double free, a bad index) stay error
 * codes: an assert is never the answer to bad input.
 */
#ifndef ZS_SRC_COMMON_DEBUG_H
#define ZS_SRC_COMMON_DEBUG_H

#include <stdint.h>

#ifdef ZS_DEBUG
#define ZS_DEBUG_ON 1

/* common/debug.c: prints "file:line: func: internal check failed: cond" and aborts. */
__attribute__((noreturn, cold)) void zs_assert_fail(const char *cond, const char *file, int line,
						     const char *func);

#define zs_assert_internal(cond)                                                       \
	((void)(__builtin_expect(!!(cond), 1) ? 0                                      \
					      : (zs_assert_fail(#cond, __FILE__, __LINE__, \
								__func__), 0)))
#else
#define ZS_DEBUG_ON 0
#define zs_assert_internal(cond) ((void)(0 && (cond)))
#endif

/*
 * An id for the calling thread, for lock owner fields: the address of a
 * thread-local byte is unique among live threads and costs no system call.
 * Never 0, so 0 can mean "no owner".  One variable for the whole library
 * (common/debug.c), not one per file as a static in this header would be.
 */
extern _Thread_local char zs_debug_thread_id;
static inline uintptr_t zs_debug_self(void)
{
	return (uintptr_t)&zs_debug_thread_id;
}

#endif
