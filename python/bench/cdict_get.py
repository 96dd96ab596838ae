#!/usr/bin/env python3
"""
Where a CompressedDict(lz4) get spends its time next to `lz4.block.decompress(d[k])`, the
get of records.py's dict+lz4.block row: the same 100k records (records.py, seed 1), both
stores in one process, random order, per record in microseconds of CPU time
(time.process_time), each figure measured `--runs` times (default 5), every run printed:

  dict[k]             the dict lookup alone (key hash is cached in the str)
  lz4.block.decomp    decompressing the values alone (fetched beforehand)
  dict+lz4.block      the reference get: lz4.block.decompress(d[k])
  bytes copy          bytes(memoryview(record)): a result of final size made by a copy
  k in CompressedDict key encoding, index lookup and the value's size (no decompression)
  CompressedDict[k]   the get
  ratio               reference time / CompressedDict time (get/s ratio, target >= 0.9)

Needs python3-lz4.  python3 python/bench/cdict_get.py [--n 100000] [--runs 5]
"""
import argparse
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import records  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    import lz4.block as lb
    import libzs
    recs = records.make_records(a.n, a.seed)
    keys = [f"rec:{i:08d}" for i in range(len(recs))]
    order = list(range(len(recs)))
    random.Random(a.seed).shuffle(order)
    okeys = [keys[i] for i in order]
    d = {k: lb.compress(v) for k, v in zip(keys, recs)}
    cd = libzs.CompressedDict("lz4")
    for k, v in zip(keys, recs):
        cd[k] = v
    vals = [d[k] for k in okeys]
    orecs = [recs[i] for i in order]
    dec = lb.decompress
    clock = time.process_time

    def t_dict() -> float:
        t = clock()
        for k in okeys:
            d[k]
        return clock() - t

    def t_dec() -> float:
        t = clock()
        for v in vals:
            dec(v)
        return clock() - t

    def t_ref() -> float:
        t = clock()
        for k in okeys:
            dec(d[k])
        return clock() - t

    def t_copy() -> float:
        t = clock()
        for r in orecs:
            bytes(memoryview(r))
        return clock() - t

    def t_contains() -> float:
        t = clock()
        for k in okeys:
            k in cd
        return clock() - t

    def t_get() -> float:
        t = clock()
        for k in okeys:
            cd[k]
        return clock() - t

    n = len(okeys)
    rows = {"dict[k]": [], "lz4.block.decomp": [], "dict+lz4.block": [], "bytes copy": [],
            "k in CompressedDict": [], "CompressedDict[k]": [], "ratio": []}
    for _ in range(a.runs):
        # one of each per run, the reference and the get side by side, so a change in the
        # machine's load reaches both
        for name, fn in (("dict[k]", t_dict), ("lz4.block.decomp", t_dec),
                         ("bytes copy", t_copy), ("k in CompressedDict", t_contains)):
            rows[name].append(fn() / n * 1e6)
        ref, got = t_ref() / n * 1e6, t_get() / n * 1e6
        rows["dict+lz4.block"].append(ref)
        rows["CompressedDict[k]"].append(got)
        rows["ratio"].append(ref / got)
    sizes = sorted(map(len, recs))
    print(f"{n} records, median {sizes[n // 2]} B; us per record (ratio: get/s against "
          f"dict+lz4.block), {a.runs} runs, each printed, then the median")
    for name, xs in rows.items():
        print(f"  {name:20} " + " ".join(f"{x:6.3f}" for x in xs) +
              f"   median {statistics.median(xs):.3f}")
    print("load average", " ".join(f"{x:.1f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
