/*
 * zs replay --store: pages whose compressed length (with the store's
 * compressor) is the trace's recorded size, written through the zram store,
 * and --verify's read-back of every slot.  Split from cmd_replay.c so the
 * replay driver reads as the kernel's slot semantics only.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "zs/compress.h"
#include "zs/zram.h"
#include "zs/zsmalloc.h"

static void synth_page(struct synth *sy, unsigned k, unsigned v, uint8_t *page)
{
	size_t ps = sy->ps;
	memcpy(page, sy->rnd, k);
	switch (v) {
	case 0: /* zeros */
		memset(page + k, 0, ps - k);
		break;
	case 1: /* zeros, one random byte in the middle of them */
		memset(page + k, 0, ps - k);
		page[k + (ps - k) / 2] = sy->rnd[ps - 1] | 1;
		break;
	case 2: /* a two-byte pattern */
		for (size_t i = k; i < ps; i++)
			page[i] = (i & 1) ? 0x5a : 0xa5;
		break;
	default: /* zeros with a random 8-byte run near the end */
		memset(page + k, 0, ps - k);
		if (ps - k > 64)
			memcpy(page + ps - 40, sy->rnd + ps - 8, 8);
		break;
	}
}

int synth_init(struct synth *sy, const char *comp, size_t ps)
{
	int rc = zs_comp_create(&(struct zs_comp_config){ .name = comp, .max_src = ps }, &sy->comp, NULL, 0);
	if (rc)
		return rc;
	sy->ps = ps;
	sy->out_cap = zs_comp_bound(sy->comp, ps);
	sy->rnd = malloc(ps);
	sy->page = malloc(ps);
	sy->out = malloc(sy->out_cap);
	sy->len_k = malloc((ps + 1) * sizeof(*sy->len_k));
	sy->len_v = calloc(ps + 1, 1);
	if (!sy->rnd || !sy->page || !sy->out || !sy->len_k || !sy->len_v)
		return -ENOMEM;
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < ps; i++) { /* xorshift64*: fixed, incompressible bytes */
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		sy->rnd[i] = (uint8_t)((x * 0x2545f4914f6cdd1dull) >> 56);
	}
	for (size_t i = 0; i <= ps; i++)
		sy->len_k[i] = -1;
	for (unsigned v = 0; v < SYNTH_VARIANTS; v++)
		for (size_t k = 0; k < ps; k++) {
			synth_page(sy, (unsigned)k, v, sy->page);
			if (zs_zram_page_same_filled(sy->page, ps, NULL))
				continue;
			int n = zs_compress(sy->comp, sy->page, ps, sy->out, sy->out_cap);
			if (n > 0 && (size_t)n <= ps && sy->len_k[n] < 0) {
				sy->len_k[n] = (int32_t)k;
				sy->len_v[n] = (uint8_t)v;
			}
		}
	return 0;
}

void synth_free(struct synth *sy)
{
	if (sy->comp)
		zs_comp_destroy(sy->comp);
	free(sy->rnd);
	free(sy->page);
	free(sy->out);
	free(sy->len_k);
	free(sy->len_v);
}

/*
 * Pick the recipe for a compressed object of `size` bytes: exact if one
 * exists, else the nearest length in the same size class (same page
 * accounting; the compr_bytes difference is tracked).  -1 if none.
 */
static long synth_pick(struct replay *R, size_t size)
{
	struct synth *sy = &R->sy;
	if (sy->len_k[size] >= 0)
		return (long)size;
	size_t huge = huge_size(R);
	int cls = class_of(R, size);
	for (size_t d = 1; d < sy->ps; d++) {
		size_t c[2] = { size - d, size + d };
		for (int i = 0; i < 2; i++) {
			if (c[i] == 0 || c[i] > sy->ps || (d > size && i == 0))
				continue;
			if (sy->len_k[c[i]] >= 0 &&
			    zs_zram_store_kind((long)c[i], huge) == ZS_ZRAM_STORE_COMPRESSED &&
			    class_of(R, c[i]) == cls)
				return (long)c[i];
		}
		if (d > 64)
			break;
	}
	return -1;
}

int store_write(struct replay *R, struct slot *s, unsigned long idx, unsigned long size,
		       char flag, long line)
{
	struct synth *sy = &R->sy;
	long len = (long)size;
	unsigned k = 0, v = 0;
	if (flag == 's') {
		memset(sy->page, 0, sy->ps);
		v = 255;
	} else if (flag == 'h') {
		memcpy(sy->page, sy->rnd, sy->ps);
		k = (unsigned)sy->ps;
		v = 254;
	} else {
		len = synth_pick(R, size);
		if (len < 0) {
			fprintf(stderr, "zs replay: line %ld: --store cannot make a page that compresses to "
					"%lu bytes (or another size of its class)\n", line, size);
			return 2;
		}
		if (len != (long)size)
			R->synth_inexact++;
		k = (unsigned)sy->len_k[len];
		v = sy->len_v[len];
		synth_page(sy, k, v, sy->page);
	}
	int rc = zs_zram_write(R->z, idx, sy->page);
	if (rc) {
		fprintf(stderr, "zs replay: line %ld: zs_zram_write(slot %lu): %s\n", line, idx,
			strerror(-rc));
		return 2;
	}
	if (s->used)
		R->synth_delta_total -= s->synth_delta;
	s->synth_delta = flag == 'n' ? (int16_t)(len - (long)size) : 0;
	R->synth_delta_total += s->synth_delta;
	s->synth_k = (uint16_t)k;
	s->synth_v = (uint8_t)v;
	return 0;
}

/* --verify: read every stored slot back through the store and compare. */
void store_verify(struct replay *R, long line)
{
	struct synth *sy = &R->sy;
	uint8_t *want = malloc(sy->ps), *got = malloc(sy->ps);
	if (!want || !got) {
		free(want);
		free(got);
		return;
	}
	for (size_t i = 0; i < R->nslots; i++) {
		struct slot *s = &R->slots[i];
		if (!s->used)
			continue;
		if (s->synth_v == 255)
			memset(want, 0, sy->ps);
		else if (s->synth_v == 254)
			memcpy(want, sy->rnd, sy->ps);
		else
			synth_page(sy, s->synth_k, s->synth_v, want);
		int rc = zs_zram_read(R->z, i, got, sy->ps);
		if (rc || memcmp(want, got, sy->ps)) {
			if (R->verify_errors++ < 5)
				fprintf(stderr, "zs replay: line %ld: slot %zu reads back %s\n", line, i,
					rc ? strerror(-rc) : "different contents");
		}
	}
	free(want);
	free(got);
}
