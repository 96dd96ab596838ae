#!/usr/bin/env python3
"""Writes the committed seed corpus (tests/fuzz/corpus/<target>/): a few
hand-made programs per target that reach every allocator, config axis and
operation, so a short CI run starts from useful inputs.  Rerun after
changing a target's input format: python3 tests/fuzz/make_corpus.py"""
import lzma, os, random, re

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
rng = random.Random(9)

def write(target, name, data):
    d = os.path.join(root, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(bytes(data))

def alloc_prog(nops):
    out = []
    for _ in range(nops):
        op = rng.choice([0, 1, 2, 3, 0, 1, 4, 6, 8, 9, 10, 11, 12, 13, 14, 15])
        out += [op | rng.randrange(16) << 4, rng.randrange(256)]
        out += [rng.randrange(256) for _ in range(rng.choice([0, 2, 2, 9]))]
    return out

# Start clean, but keep what fuzzing runs found and was committed beside the seeds (files named
# by their SHA-1, as libFuzzer names them): this script cannot make those again.
if os.path.isdir(root):
    for t in os.listdir(root):
        for f in os.listdir(os.path.join(root, t)):
            if not re.fullmatch(r"[0-9a-f]{40}", f):
                os.remove(os.path.join(root, t, f))
# fuzz_alloc: b0 = kind | pageshift<<2 | checked<<5, b1 = limit, b2 = chain/policy/free mode,
# b3 = delta/worker/queue
for kind in range(4):
    for ps in (0, 4, 5, 6, 7):  # page size index: 0-3 -> 4K, 4..7 -> 8K..64K
        for checked in (0, 1):
            b0 = kind | ps << 2 | checked << 5
            b1 = rng.choice([0, 0, 1 | rng.randrange(128) << 1])
            hdr = [b0, b1, rng.randrange(256), rng.randrange(256)]
            if (kind + ps + checked) % 3 == 0:
                write("fuzz_alloc", "k%d-ps%d-c%d" % (kind, ps, checked), hdr + alloc_prog(60))

# fuzz_alloc with objects over a page (b0 bits 6-7 = max_object_size mode, then b4, and for
# mode 2 two more bytes): zsmalloc direct and through the backend.  Its own generator, so the
# seeds above and below stay as they were.
mrng = random.Random(21)
def mp_prog(nops):
    out = []
    for _ in range(nops):
        op = mrng.choice([0, 1, 2, 3, 0, 1, 4, 6, 8, 9, 8, 9, 10, 11, 12, 13, 14, 15])
        out += [op | mrng.randrange(16) << 4, mrng.randrange(256)]
        out += [mrng.randrange(256) for _ in range(mrng.choice([2, 4, 4, 9]))]
    return out
for i, (kind, ps, mo) in enumerate([(0, 0, 1), (1, 0, 2), (0, 4, 3), (1, 5, 1), (0, 0, 2),
                                    (1, 0, 3), (0, 7, 1), (0, 6, 2)]):
    checked = i % 2
    b0 = kind | ps << 2 | checked << 5 | mo << 6
    b1 = mrng.choice([0, 0, 1 | mrng.randrange(128) << 1])
    b4 = mrng.randrange(256) & ~1 if mo == 3 else mrng.randrange(256)  # mode 3: 16 pages
    hdr = [b0, b1, mrng.randrange(256), mrng.randrange(256), b4]
    if mo == 2:
        hdr += [mrng.randrange(256), mrng.randrange(256)]
    write("fuzz_alloc", "mp-k%d-ps%d-c%d-m%d" % (kind, ps, checked, mo), hdr + mp_prog(80))
# found by fuzz_alloc: 64 KiB pages, class_delta 8 and objects of 8 pages are more classes
# than the obj's class field numbers (8192): refused (zsmalloc.h, test_zs_multipage_limits.c)
write("fuzz_alloc", "found-classes-64k-delta8", bytes.fromhex(
    "5c62e100abb52c9a9fa6b509c2f4b1cd578ae4782bd0d6b13544d3aec2a91411f22b097acf3cc867b2e212a7"
    "4cdb087d0c081e9da7325dd17d8736d87c0d81fa1584207358360866b6ade91eca7232d6bb75a2b44ef41525"
    "20bad4040000000000ffff7e094b332f19e1f4f98356edf81a154d73f0000000000000000000000000000000"
    "0000006b6e45"))

# fuzz_zram: b0 = page size | slots, b1 = comp/recomp/backend, b2 = flags, b3 = limit
for i in range(12):
    hdr = [rng.randrange(256) for _ in range(4)]
    prog = []
    for _ in range(80):
        op = rng.randrange(256)
        prog += [op, rng.randrange(256)] + [rng.randrange(256) for _ in range(rng.choice([0, 2, 3, 9]))]
    write("fuzz_zram", "store-%02d" % i, hdr + prog)

# fuzz_zram grouped stores: b0 page size index 4-6 (4K, 8K, 16K) makes a grouped store whose
# group_pages comes from a fifth byte b4 (2 << (b4 & 3), halved to fit 64 KiB); on zsmalloc
# (b1 bit 7 clear) mostly, with filters (b3 bits 5-7, b2 bit 5).  Its own generator, so the
# seeds above and below stay as they were.
grng = random.Random(22)
for i in range(10):
    b0 = (4 + i % 3) | grng.randrange(32) << 3
    b1 = grng.randrange(128) | (0x80 if i == 9 else 0)
    b2 = grng.randrange(256) & ~0xc0          # never the bad-config path (b2 >> 5 == 7)
    b3 = grng.randrange(256)
    b4 = i % 4 | grng.randrange(7) << 2       # group_pages 2, 4, 8, 16 (before fitting)
    prog = []
    for _ in range(90):
        op = grng.choice([0, 1, 2, 3, 4, 4, 5, 6, 7, 8, 11, 13, 14, 15, 0x1f, 0x15, 0x14])
        op |= grng.randrange(16) << 4 if op < 16 else 0
        prog += [op & 0xff, grng.randrange(256)] + [grng.randrange(256) for _ in range(grng.choice([0, 2, 3, 9]))]
    write("fuzz_zram", "group-%02d" % i, [b0, b1, b2, b3, b4] + prog)

# fuzz_trace: byte 0 = form (0 plain, 1 xz, 5 xz + one byte changed, 9 xz cut short)
good = (b"# zram-trace 1\n# page_size 4096\n# comp lz4\n# kernel 6.18\n# chain_size 8\n"
        b"# data seed\nw 0 1764 n\n= 7 0 1 1764 0 0\nw 1 0 s\nw 2 4096 h\n"
        b"d 1\nc\n= 7 0 2 5860 0 0\n  w 3 17 n\r\n# late comment\n")
bad = [b"w 0 0 n\n", b"w 99999999 1 n\n", b"# page_size 3000\nw 0 1 n\n", b"# zram-trace 2\n",
       b"= 1 2 3\n", b"d\n", b"c 1\n", b"x\n", b"# chain_size 0\n", b"w 1 4097 h\n",
       b"w 1 18446744073709551616 n\n", b"# page_size 65536\nw 0 65536 n\n" + b"a" * 5000]
write("fuzz_trace", "plain", [0] + list(good))
write("fuzz_trace", "xz", [1] + list(good))
write("fuzz_trace", "xz-flip", [5 | 3 << 4] + list(good))
write("fuzz_trace", "xz-cut", [9 | 2 << 4] + list(good))
write("fuzz_trace", "xz-file", [0] + list(lzma.compress(good, format=lzma.FORMAT_XZ,
                                                             filters=[{"id": lzma.FILTER_LZMA2, "dict_size": 4096}])))
for i, b in enumerate(bad):
    write("fuzz_trace", "bad-%02d" % i, [2 * (i % 2)] + list(good[:60] + b))
# zswap-traces (trace_parse_zswap): a good one, plain and xz, and bad records after its start
zgood = (b"# zswap-trace 1\n# page_size 4096\n# comp lzo\n# chain_size 8\n# max_pool_percent 20\n"
         b"# totalram_pages 6171021\n# mode ops\ns 7 1764 n\n= 1 1 0 1 0\ns 8 4096 h\n= 2 2 1 2 0\n"
         b"s 9 0 z\n= 2 2 1 2 0\nl 7\n= 1 1 1 2 1\ni 8\n= 0 0 0 2 1\nc\n= 0 0 0 2 1\n")
zbad = [b"s 1 4096 n\n", b"s 1 17 h\n", b"s 1 3 z\n", b"s 1099511627776 9 n\n", b"l\n",
        b"i 1 2\n", b"= 1 2 3\n", b"s 1 9 q\n", b"w 0 1 n\n"]
write("fuzz_trace", "zswap-plain", [0] + list(zgood))
write("fuzz_trace", "zswap-xz", [1] + list(zgood))
for i, b in enumerate(zbad):
    write("fuzz_trace", "zswap-bad-%02d" % i, [2 * (i % 2)] + list(zgood[:120] + b))

# fuzz_region: b0 = config (fault-around, handlers, deferred free, mem_limit, resident limit,
# compressed writeback); then ops: op byte (low nibble: 0-1 write, 2 partial write, 3-4 read,
# 5 pageout, 6 release, 7 advise, 8 reclaim, 9 MADV_DONTNEED, 10 writeback, 11 inject,
# 12 compact, 13 idle/truncate/corrupt, 14 bad args/recreate, 15 stats) and its argument bytes.
# A separate generator, so the other targets' seeds stay as they were.
rrng = random.Random(18)
def region_op(op, *args):
    return [op] + list(args)
for i in range(12):
    key = [0x00, 0x02, 0x06, 0x0a, 0x12, 0x22, 0x42, 0x2e, 0x1a, 0x7f, 0x36, 0x4c][i]
    prog = []
    # fill pages (incompressible: written back), page them out, write back
    for p in range(0, 32, 4):
        prog += region_op(0x00 | rrng.randrange(16) << 4, p, 3, 3 + 4 * rrng.randrange(60))
    prog += region_op(0x05, 0, 31) + region_op(0x0a, 1 + 2 * rrng.randrange(100))
    if i % 3 == 0:
        prog += region_op(0x0b, 2, 0)               # every backing read fails
    elif i % 3 == 1:
        prog += region_op(0x0b, 1, rrng.randrange(8))  # one read fails once
    else:
        prog += region_op(0x0b, 0, 2) + region_op(0x0a, 0xff)  # write errors, writeback again
    prog += region_op(0x03, 0, 31)                   # read everything back
    if i % 4 == 0:
        prog += region_op(rrng.choice([0xcd, 0xdd, 0xed, 0xfd]))  # corrupt/truncate the file
    for _ in range(40):
        op = rrng.randrange(256)
        prog += [op] + [rrng.randrange(256) for _ in range(rrng.choice([2, 3, 4]))]
    prog += region_op(0x0b, 3, 0) + region_op(0x04, 0, 31)
    write("fuzz_region", "region-%02d" % i, [key] + prog)
# inputs fuzz_region found (kept as seeds): a release that spun forever on a page left
# OUT|F_DROP (fixed in b6433b6), and a SIGBUS on a page rewritten after its backing reads
# were made to fail (seen twice at 9247787 under ASan, not reproduced since)
write("fuzz_region", "found-hang-out-drop", bytes.fromhex("7fb00003032004ffff03001f713ed00fd5a509f4937b39dd7d911d45a2"))
write("fuzz_region", "found-sigbus-1ae1789", bytes.fromhex("22a00003d7900403e300080307c00c03937003038060270b101418030b401c03b705005f0a3b0b00020aff03001fede73f4e3e88c425f08012fb8b196879c01800d11770b707d1f2790695c4e19d4be656985c82814eaf3eae11589687acbe207421212121212196740f181c2433cf776a621697544495572e8a7ec05f41d42cba3c6dc810e50cd6bc775ce2bad37525f32000031370040387d00803e3200c5151515151515151515151515151515151515151515151515151515151515151515151515151515151515151515151510323801003aba014033f10dd18"))
# and the stats.resident defects: read 2^64-1 for a moment (fixed in bd13724), left at 1 after
# release-all by a stale fault message served late, and 33 of 32 pages for a moment (both 4b09eee)
write("fuzz_region", "found-resident-underflow", bytes.fromhex("2e4000038fa004036f200803db800c034b901003dfe014030f6018031ba01c03ef05001f0a5b0b010703001f10e682cd5dbd3ee9e2f0ff9e53abbbbcdf5dd2a7b83d257d0520087aa03b60bc36d4baddb25f928743d7cf717bc004313a64492a035eb54790a9c646f4ecc9873a43217b5a06bee2ad9a3bd615a300d73cd203df300c03b34010036f701403b3b01803afe01c03cf05001f0a010b010603001fcdfa6f2d568bea443a370d6aa40ab32f4a409499ddf76d6d6d6d6d6d9ab699d7d2cd4fa3e12a51006ea5b912e7ab33214d4d789708749d1f"))
write("fuzz_region", "found-resident-stale-fault", bytes.fromhex("7fb000030320040337d008037ff00c031f201003dfd014034f601803afd01c03bf05001f0a3b0b020003001f711e3ed00fd5e0a5091d26702dcd63bdf4930001d43064adca23a6ed7a996d84377538e733633c2407eaab9fec7d7f080d9fb80231761fede73f4e3e88c4250b030004001f"))
write("fuzz_region", "found-resident-overshoot", bytes.fromhex("22a00003d7900403e30008030fc00c03937010030b60140327db541a2503aa22cdea3a0f7a736d9f936c9ec326d312a54d06c2efca701b4032dbfd16f7062b33991bee1aba23697c7193eab00004001f"))

# fuzz_zswap: b0 = page size (0-2) | comp (3-4) | zblock (5) | deferred (6) | shrinker (7),
# b1 = backing file (0) | total_ram (1-7), b2 = pool percents; then ops: op byte (op % 14:
# 0-3 store + kind, seed; 4-5 store_compressed + form, kind, seed; 6-7 load; 8 invalidate;
# 9 writeback/shrink + n; 10 group_set + a; 11 set_pool_limit + a, b; 12 inject + a;
# 13 stats; op >> 4: group), offset byte.  Its own generator, so the others stay as they were.
zrng = random.Random(19)
ZSWAP_ARGS = {0: 2, 1: 2, 2: 2, 3: 2, 4: 3, 5: 3, 6: 0, 7: 0, 8: 0, 9: 1, 10: 1, 11: 2, 12: 1, 13: 0}
def zswap_op(kind=None):
    op = zrng.randrange(256) if kind is None else (kind | zrng.randrange(16) << 4)
    while kind is None and op % 14 not in ZSWAP_ARGS:
        op = zrng.randrange(256)
    return [op, zrng.randrange(25)] + [zrng.randrange(256) for _ in range(ZSWAP_ARGS[op % 14])]
for i in range(12):
    b0 = (i % 8) | zrng.randrange(4) << 3 | (0x20 if i % 3 == 2 else 0) | (i % 2) << 6 | (i % 4 // 2) << 7
    b1 = (1 if i % 4 else 0) | zrng.randrange(128) << 1
    b2 = [20, 5, 50, 1, 100, 30][i % 6]
    prog = []
    for _ in range(30):
        prog += zswap_op(zrng.choice([0, 1, 2, 3, 4]))
    prog += zswap_op(13) + zswap_op(9) + zswap_op(13)
    for _ in range(60):
        prog += zswap_op()
    prog += zswap_op(13)
    write("fuzz_zswap", "zswap-%02d" % i, [b0, b1, b2] + prog)
