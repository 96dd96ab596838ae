/*
 * libFuzzer target: the zram-trace and zswap-trace reader behind `zs replay`
 * (tools/lib/trace.c), plain and .xz.  Input byte 0 chooses the form: the rest of the input as
 * is (plain, or xz if it carries the magic), or the rest xz-compressed here
 * (so the xz path sees valid streams too), optionally with one byte changed
 * or the end cut off.  Every record trace_parse accepts must be within the
 * format's limits, and an intact xz stream must read exactly as the plain
 * text it holds (same records, same errors, same line numbers).
 */
#include <fcntl.h>
#include <lzma.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "trace.h"
#include "zs/zsmalloc.h"

static int memfd = -1;
static char path[64];
static FILE *devnull;

/* Read the whole trace; returns a digest of everything the reader reported. */
static uint64_t read_all(const uint8_t *buf, size_t len)
{
	FUZZ_CHECK(ftruncate(memfd, 0) == 0, "ftruncate");
	FUZZ_CHECK(pwrite(memfd, buf, len, 0) == (ssize_t)len, "pwrite");
	FILE *real = stderr;
	stderr = devnull; /* the reader reports every malformed line: keep the fuzzer quiet */
	struct trace *t = trace_new();
	FUZZ_CHECK(t, "trace_new");
	int ret = trace_open(t, path);
	uint64_t dig = 1469598103934665603ULL;
#define MIX(v) (dig = (dig ^ (uint64_t)(v)) * 1099511628211ULL)
	MIX(ret);
	int n = 0, r = 0;
	const char *line;
	while (!ret && (r = trace_next(t, &line)) > 0 && n++ < 100000) {
		if (trace_hdr(t)->kind == TRACE_ZSWAP) {
			/* a zswap-trace (its magic line): trace_parse_zswap's limits */
			struct trace_zswap_rec zr;
			memset(&zr, 0, sizeof(zr));
			int pz = trace_parse_zswap(t, line, &zr);
			MIX(pz);
			MIX(trace_lineno(t));
			if (pz)
				break;
			uint64_t zps = (uint64_t)trace_hdr(t)->page_size;
			stderr = real;
			FUZZ_CHECK(strchr("=slic", zr.op) && zr.op, "zswap op %d", zr.op);
			if (zr.op != '=' && zr.op != 'c')
				FUZZ_CHECK(zr.offset < TRACE_ZSWAP_MAX_OFFSET, "offset %llu",
					   (unsigned long long)zr.offset);
			if (zr.op == 's')
				FUZZ_CHECK((zr.flag == 'n' && zr.size > 0 && zr.size < zps) ||
					   (zr.flag == 'h' && zr.size == zps) ||
					   (zr.flag == 'z' && zr.size == 0),
					   "store flag %d size %llu", zr.flag, (unsigned long long)zr.size);
			stderr = devnull;
			MIX(zr.op);
			MIX(zr.offset);
			MIX(zr.size);
			MIX(zr.flag);
			for (int i = 0; i < TRACE_ZSWAP_NF; i++)
				MIX(zr.exp[i]);
			continue;
		}
		struct trace_rec rec;
		memset(&rec, 0, sizeof(rec));
		int pr = trace_parse(t, line, &rec);
		MIX(pr);
		MIX(trace_lineno(t));
		if (pr)
			break; /* the replay stops at the first bad record */
		const struct trace_header *h = trace_hdr(t);
		long ps = h->page_size;
		stderr = real;
		FUZZ_CHECK(ps >= 4096 && ps <= 65536 && !(ps & (ps - 1)), "page size %ld", ps);
		FUZZ_CHECK(h->chain == -1 || (h->chain >= 1 && h->chain <= ZS_MAX_CHAIN), "chain %ld",
			   h->chain);
		FUZZ_CHECK(rec.op == '=' || rec.op == 'w' || rec.op == 'd' || rec.op == 'c' ||
				   rec.op == 'k', "op %d",
			   rec.op);
		if (rec.op == 'w') {
			FUZZ_CHECK(rec.slot < (1UL << 26), "slot %llu", (unsigned long long)rec.slot);
			FUZZ_CHECK(rec.flag == 'n' || rec.flag == 's' || rec.flag == 'h', "flag %d",
				   rec.flag);
			FUZZ_CHECK(rec.size <= (uint64_t)ps, "size %llu", (unsigned long long)rec.size);
			FUZZ_CHECK(rec.flag != 'n' || rec.size > 0, "n with size 0");
			FUZZ_CHECK(rec.flag != 's' || rec.size == 0, "s with a size");
		} else if (rec.op == 'd') {
			FUZZ_CHECK(rec.slot < (1UL << 26), "slot %llu", (unsigned long long)rec.slot);
		}
		stderr = devnull;
		MIX(rec.op);
		MIX(rec.slot);
		MIX(rec.size);
		MIX(rec.flag);
		for (int i = 0; i < TRACE_NF; i++)
			MIX(rec.exp[i]);
	}
	MIX(r);
	trace_free(t);
	long max = trace_max_slot(path);
	stderr = real;
	FUZZ_CHECK(max >= -1 && max < (1L << 26), "trace_max_slot %ld", max);
	MIX(max >= 0);
	return dig;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	memfd = memfd_create("fuzz_trace", 0);
	if (memfd < 0)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
	devnull = fopen("/dev/null", "w");
	if (!devnull)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	unsigned mode = data[0];
	const uint8_t *p = data + 1;
	size_t n = size - 1;
	if (!(mode & 1)) {
		read_all(p, n);
		return 0;
	}
	size_t cap = lzma_stream_buffer_bound(n);
	uint8_t *xz = malloc(cap);
	FUZZ_CHECK(xz, "out of memory");
	size_t len = 0;
	/* preset 0 with the smallest dictionary: the encoder's set-up is most of an execution */
	lzma_options_lzma opt;
	lzma_lzma_preset(&opt, 0);
	opt.dict_size = LZMA_DICT_SIZE_MIN;
	lzma_filter filters[2] = { { LZMA_FILTER_LZMA2, &opt }, { LZMA_VLI_UNKNOWN, NULL } };
	lzma_ret lr = lzma_stream_buffer_encode(filters, (mode & 2) ? LZMA_CHECK_CRC64
								    : LZMA_CHECK_CRC32,
						NULL, p, n, xz, &len, cap);
	FUZZ_CHECK(lr == LZMA_OK, "lzma_easy_buffer_encode %d", lr);
	static const uint8_t magic[6] = { 0xFD, '7', 'z', 'X', 'Z', 0 };
	if ((mode & 12) == 0 && !(n >= 6 && !memcmp(p, magic, 6))) {
		/* intact: the xz form must read exactly as the plain one */
		uint64_t a = read_all(p, n), b = read_all(xz, len);
		FUZZ_CHECK(a == b, "plain and xz forms of the same trace read differently");
	} else if ((mode & 12) == 4 || (mode & 12) == 0) {
		xz[(mode >> 4) * 7919 % len] ^= (uint8_t)(1 + (mode >> 4));
		read_all(xz, len);
	} else {
		read_all(xz, len - 1 - (mode >> 4) % len);
	}
	free(xz);
	return 0;
}
