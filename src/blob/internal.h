/*
 * What the cache (cache.c) needs of the blob store beyond its public calls:
 * objects that carry a key before the value, their header parsed, an
 * object encoded before it is allocated (so the cache can make room for
 * exactly its size first), and the limit test.  The object format is
 * blob.c's alone; this header only names its parts.
 */
#ifndef ZS_BLOB_INTERNAL_H
#define ZS_BLOB_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "zs/blob.h"

/* Largest header: tag byte, value length (3-byte varint), stored length (3), key length (2). */
#define BLOB_MAX_HDR 9
/* Every object is at least this long, so the header can be read in one fixed-size read. */
#define BLOB_MIN_OBJ 16

struct blob_obj {
	unsigned codec;   /* ZS_BLOB_NONE: raw */
	size_t vlen;      /* value length */
	size_t plen;      /* payload bytes stored (vlen when raw) */
	size_t klen;      /* key bytes (0: no key) */
	size_t hdr;       /* header bytes; the key follows, then the payload */
	size_t size;      /* object bytes in the pool (padding included) */
};

/* An encoded object, ready to allocate: bytes obj[0..size), in a buffer of the caller's thread. */
struct blob_enc {
	const uint8_t *obj;
	size_t size;
	size_t vlen;
	int raw;
	void *mem; /* the buffer, for blob_enc_done */
};

/* Parse h's header (one 16-byte read).  0, -EINVAL (bad handle), -EIO (not an object of ours). */
int blob_head(struct zs_blob *s, unsigned long h, struct blob_obj *o);
/* Encode key (may be NULL/0) and value.  0, -ENOSPC, -ENOMEM, -EIO. */
int blob_encode(struct zs_blob *s, const void *key, size_t klen, const void *val, size_t vlen,
		struct blob_enc *e);
void blob_enc_done(struct blob_enc *e);
/* Allocate and write an encoded object; a handle or an error value.  No limit test. */
unsigned long blob_store_enc(struct zs_blob *s, const struct blob_enc *e);
/* 1 if adding `extra` bytes would pass the store's mem_limit (0 when it has none). */
int blob_over_limit(struct zs_blob *s, size_t extra);
/* 1 if the store has a mem_limit. */
int blob_has_limit(const struct zs_blob *s);
/* Its mem_limit in bytes (0: none). */
size_t blob_limit(const struct zs_blob *s);
/* Free an object whose header is parsed; no compaction step (blob_after_free runs one). */
int blob_free_obj(struct zs_blob *s, unsigned long h, const struct blob_obj *o);
/* Bytes freed since the last completed compaction pass (holes in zspages). */
size_t blob_freed_bytes(struct zs_blob *s);
/* One compaction step now (waits for a step another thread or the pool's idle compaction runs). */
void blob_step_now(struct zs_blob *s);
/* Finish the current compaction pass, or run a whole one (waiting as blob_step_now). */
void blob_pass_now(struct zs_blob *s);
/* The compaction policy after frees (a bounded step when due). */
void blob_after_free(struct zs_blob *s);

/*
 * Read h whole (header from blob_head): compare its key with key/klen
 * (a mismatch: 1, nothing else done), then, when fn is not NULL, call fn
 * with the value (decoded as needed) and store its result in *fn_ret;
 * when buf is not NULL, copy the value there instead (cap checked by the
 * caller).  0, 1 (key differs), -EINVAL, -EIO.
 */
int blob_read_obj(struct zs_blob *s, unsigned long h, const struct blob_obj *o, const void *key,
		  size_t klen, zs_blob_read_fn fn, void *arg, int *fn_ret, void *buf);
/* Copy the key of h (o->klen bytes) into dst.  0, -EINVAL, -EIO. */
int blob_read_key(struct zs_blob *s, unsigned long h, const struct blob_obj *o, void *dst);
/*
 * Read h, whose object is `size` bytes (struct blob_enc.size when it was
 * stored), under one pin: compare its key with key/klen, set *vlen, then
 * deliver the value as blob_read_obj does (fn, else buf when cap holds it).
 * With neither fn nor buf only the header and the key are read.  0, 1 (key
 * differs), 2 (buf shorter than *vlen: nothing copied), -EINVAL, -EIO (also
 * when the header's size is not `size`), -ENOMEM.
 */
int blob_read_sized(struct zs_blob *s, unsigned long h, size_t size, const void *key, size_t klen,
		    zs_blob_read_fn fn, void *arg, int *fn_ret, void *buf, size_t cap, size_t *vlen);
/* Fixed bytes the store itself holds beyond zs_blob_mem_bytes' pool part (for the cache's sum). */
size_t blob_max_obj(const struct zs_blob *s);

#endif
