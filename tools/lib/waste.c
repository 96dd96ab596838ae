/*
 * The waste breakdown of a zsmalloc pool, from public stats only
 * (zs_class_stats per physical class, zs_class_info for huge classes).
 * Rounding is what is left of the used slots once payload and headers are
 * taken out, so it needs the caller's live byte count; "other" is the
 * remainder and is where pages the class table does not explain would show.
 */
#include "waste.h"

void zs_waste_measure(struct zs_pool *pool, size_t live_bytes, struct zs_waste *w)
{
	size_t ps = zs_pool_page_size(pool);
	size_t used_slots = 0;
	*w = (struct zs_waste){ 0 };
	w->pool_bytes = zs_get_total_pages(pool) * ps;
	w->live_bytes = live_bytes;
	for (int i = 0, n = zs_class_count(pool); i < n; i++) {
		struct zs_class_stats st;
		struct zs_class_info ci;
		if (zs_class_stats(pool, i, &st, sizeof(st)) || zs_class_info(pool, i, &ci) || !st.obj_allocated)
			continue;
		/* Summed over zspages, which need not be one length (fitted zspages). */
		w->tails += (size_t)st.pages_used * ps - (size_t)st.obj_allocated * st.size;
		w->free_slots += (st.obj_allocated - st.obj_used) * (size_t)st.size;
		for (int g = 0; g < ZS_NR_FULLNESS_GROUPS - 1; g++)
			w->partial_zspages += st.fullness[g];
		used_slots += st.obj_used * (size_t)st.size;
		if (!ci.huge)
			w->handles += st.obj_used * (size_t)ZS_HANDLE_SIZE;
	}
	/* A payload larger than its slots would be a caller error; keep the sum honest. */
	size_t payload_room = used_slots - w->handles;
	w->rounding = payload_room > live_bytes ? payload_room - live_bytes : 0;
	w->other = (long long)w->pool_bytes - (long long)live_bytes - (long long)w->rounding -
		   (long long)w->tails - (long long)w->free_slots - (long long)w->handles;
}
