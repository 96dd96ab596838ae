/*
 * The slot lock's slow path: the fast path (one fetch_or) is inline in
 * zram/internal.h; contention spins, then yields.  Its own file so the lock
 * is read in one place, apart from the write/read paths that take it.
 */
#include <sched.h>

#include "zram/internal.h"

uint32_t zram_slot_lock_slow(struct slot *sl)
{
	for (unsigned spins = 0;;) {
		uint32_t f = atomic_load_explicit(&sl->flags, memory_order_relaxed);

		if (!(f & F_SLOCK)) {
			f = atomic_fetch_or_explicit(&sl->flags, F_SLOCK, memory_order_acquire);
			if (!(f & F_SLOCK))
				return f;
		}
		spin_wait(&spins);
	}
}
