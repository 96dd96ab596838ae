#!/usr/bin/env python3
"""
Benchmark of libzs.CompressedDict against the ways a Python program keeps many
records compressed today: a dict of bytes, of lz4 bytes, of python-zstandard
bytes with and without a trained dictionary; put and get records/s, RSS growth
for the fill, RSS after deleting 60% and idling 1.5 s, each the median of 3
runs, each run in a fresh process (RSS from /proc/self/statm).  Then the Pool
micro-benchmark: Pool.read of a 1 KB object and Pool.store, per call.

Records: 100k JSON-like records of 200..3,500 bytes built from the text files
under /usr/share/doc (fixed seed).  Needs python3-lz4 and python3-zstandard
(scripts/deps.sh); a missing one's rows are skipped.

    python3 python/bench/records.py [--n 100000] [--runs 3] [--seed 1]
"""
import argparse
import json
import os
import pickle
import random
import statistics
import subprocess
import sys
import tempfile
import time

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def doc_text(limit: int = 40 << 20) -> list:
    """Lines of the plain-text files under /usr/share/doc, in sorted path order."""
    lines, total = [], 0
    for root, dirs, files in sorted(os.walk("/usr/share/doc")):
        dirs.sort()
        for name in sorted(files):
            if name.endswith((".gz", ".xz", ".bz2", ".png", ".jpg", ".gif", ".pdf")):
                continue
            try:
                with open(os.path.join(root, name), "rb") as f:
                    data = f.read(1 << 20)
            except OSError:
                continue
            if b"\0" in data:
                continue
            for ln in data.decode("utf-8", "replace").splitlines():
                ln = ln.strip()
                if 8 <= len(ln) <= 200:
                    lines.append(ln)
                    total += len(ln)
            if total > limit:
                return lines
    return lines


def make_records(n: int, seed: int) -> list:
    rng = random.Random(seed)
    lines = doc_text()
    if len(lines) < 1000:
        sys.exit("records.py: too little text under /usr/share/doc")
    out = []
    for i in range(n):
        target = rng.randint(200, 3500)
        rec = {"id": i, "user": f"user{rng.randrange(5000)}", "ts": 1700000000 + rng.randrange(10 ** 7),
               "status": rng.choice(["ok", "pending", "failed", "retry"]),
               "tags": rng.sample(["doc", "pkg", "copyright", "license", "changelog", "readme",
                                   "debian", "upstream"], 3),
               "lines": []}
        s = json.dumps(rec)
        start = rng.randrange(len(lines))
        j = start
        while len(s) < target:
            rec["lines"].append(lines[j % len(lines)])
            j += 1 if rng.random() < 0.8 else rng.randrange(1, 1000)
            s = json.dumps(rec)
        out.append(s[:target].encode() if len(s) > 3500 else s.encode())
    return out


# ---- one variant, in its own process ----

def variant(name: str, recs: list, dct: bytes, seed: int) -> dict:
    keys = [f"rec:{i:08d}" for i in range(len(recs))]
    rng = random.Random(seed)
    order = list(range(len(recs)))
    rng.shuffle(order)
    gone = order[: int(len(recs) * 0.6)]
    comp = decomp = None
    d = None
    if name == "dict":
        # a copy of each value, as a program that built it would hold (the records here
        # already sit in this process)
        d, comp, decomp = {}, (lambda v: bytes(memoryview(v))), None
    elif name == "dict+lz4.block":
        import lz4.block as lb
        d, comp, decomp = {}, lb.compress, lb.decompress
    elif name == "dict+lz4.frame":
        import lz4.frame as lf
        d, comp, decomp = {}, lf.compress, lf.decompress
    elif name.startswith("dict+zstandard"):
        import zstandard as zstd
        zd = zstd.ZstdCompressionDict(dct) if name.endswith("+dict") else None
        c = zstd.ZstdCompressor(level=3, dict_data=zd) if zd else zstd.ZstdCompressor(level=3)
        dd = zstd.ZstdDecompressor(dict_data=zd) if zd else zstd.ZstdDecompressor()
        d, comp, decomp = {}, c.compress, dd.decompress
    else:
        import libzs
        if name == "CompressedDict(lz4)":
            d = libzs.CompressedDict("lz4")
        elif name == "CompressedDict(zstd)":
            d = libzs.CompressedDict("zstd", level=3)
        elif name == "CompressedDict(zstd+dict)":
            d = libzs.CompressedDict("zstd", level=3, dict=dct)
        elif name == "CompressedDict(zstd,train=2000)":
            d = libzs.CompressedDict("zstd", level=3, train=2000)
        else:
            raise SystemExit(f"unknown variant {name}")
    base = rss()
    clock = time.process_time   # CPU time of the process: the machine may be shared
    t = clock()
    if comp is None:
        for k, v in zip(keys, recs):
            d[k] = v
    else:
        for k, v in zip(keys, recs):
            d[k] = comp(v)
    put = clock() - t
    fill = rss() - base
    t = clock()
    if decomp is None:
        for i in order:
            v = d[keys[i]]
    else:
        for i in order:
            v = decomp(d[keys[i]])
    get = clock() - t
    assert v == recs[order[-1]]
    if isinstance(d, dict):
        payload = sum(map(len, d.values()))
    else:
        payload = d.stats()["stored_bytes"]
    for i in gone:
        del d[keys[i]]
    time.sleep(1.5)
    after = rss() - base
    n = len(recs)
    return {"put": n / put, "get": n / get, "fill": fill, "after": after, "payload": payload}


def pool_micro() -> dict:
    """Per-call CPU time, each result dropped at once (a list of 200k 1 KB results would
    measure page faults)."""
    import libzs
    p = libzs.Pool()
    obj = os.urandom(1024)
    h = p.store(obj)
    n = 200000
    rd, ri, st, fr = p.read, p.read_into, p.store, p.free
    buf = bytearray(1024)

    def reads():
        for _ in range(n):
            rd(h)

    def reads_into():
        for _ in range(n):
            ri(h, buf)

    best_read = min(_loop(reads) for _ in range(5)) / n
    best_into = min(_loop(reads_into) for _ in range(5)) / n
    best_store = float("inf")
    for _ in range(5):
        hs = []
        add = hs.append
        t = time.thread_time()
        for _ in range(n):
            add(st(obj))
        best_store = min(best_store, (time.thread_time() - t) / n)
        for x in hs:
            fr(x)
    c = libzs.Compressor("lz4")
    cc = c.compress

    def comps():
        for _ in range(n):
            cc(obj)
    best_comp = min(_loop(comps) for _ in range(3)) / n
    return {"read_1k_us": best_read * 1e6, "store_1k_us": best_store * 1e6,
            "read_into_1k_us": best_into * 1e6, "compress_1k_us": best_comp * 1e6,
            "ext": bool(getattr(libzs, "_ext", None))}


def _loop(fn) -> float:
    t = time.thread_time()
    fn()
    return time.thread_time() - t


VARIANTS = ["dict", "dict+lz4.block", "dict+lz4.frame", "dict+zstandard", "dict+zstandard+dict",
            "CompressedDict(lz4)", "CompressedDict(zstd)", "CompressedDict(zstd+dict)",
            "CompressedDict(zstd,train=2000)"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", default="", help="variants, separated by semicolons")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        with open(a.child[1], "rb") as f:
            recs, dct = pickle.load(f)
        print(json.dumps(variant(a.child[0], recs, dct, a.seed)))
        return
    recs = make_records(a.n, a.seed)
    sizes = sorted(map(len, recs))
    print(f"{len(recs)} records from /usr/share/doc, seed {a.seed}: {sizes[0]}..{sizes[-1]} B, "
          f"median {sizes[len(sizes) // 2]}, {sum(sizes) / 1e6:.1f} MB")
    dct = b""
    try:
        import zstandard
        dct = zstandard.train_dictionary(16384, recs[:2000]).as_bytes()
        print(f"zstd dictionary: {len(dct)} B trained by python-zstandard on the first 2000 "
              f"records (the same bytes for zstandard+dict and CompressedDict(zstd+dict)); "
              f"zstd level 3 everywhere")
    except ImportError:
        print("python-zstandard missing: its rows and the dict rows are skipped")
    tmp = tempfile.NamedTemporaryFile(suffix=".pkl", delete=False)
    pickle.dump((recs, dct), tmp)
    tmp.close()
    names = a.only.split(";") if a.only else VARIANTS
    runs: dict = {n: [] for n in names}
    try:
        # round-robin: run i of every variant before run i+1 of any, so a change in the
        # machine's load spreads over all of them
        for _ in range(a.runs):
            for name in names:
                if runs[name] is None:
                    continue
                r = subprocess.run([sys.executable, __file__, "--seed", str(a.seed), "--child",
                                    name, tmp.name], capture_output=True, text=True)
                if r.returncode != 0:
                    print(f"{name}: skipped ({r.stderr.strip().splitlines()[-1:]})")
                    runs[name] = None
                    continue
                runs[name].append(json.loads(r.stdout))
    finally:
        os.unlink(tmp.name)
    res = {n: {k: statistics.median(x[k] for x in rs) for k in rs[0]}
           for n, rs in runs.items() if rs}
    raw = sum(sizes)
    print(f"\nrecords/s from CPU time (time.process_time), medians of {a.runs} runs")
    print("payload: the stored values' bytes (a dict's values; CompressedDict's objects with "
          "their headers); RSS: the process's growth")
    print(f"{'variant':34} {'put rec/s':>10} {'get rec/s':>10} {'payload MB':>10} "
          f"{'RSS fill MB':>11} {'x of raw':>8} {'after del MB':>12} {'after/fill':>10}")
    for name, r in res.items():
        print(f"{name:34} {r['put']:10.0f} {r['get']:10.0f} {r['payload'] / 1e6:10.1f} "
              f"{r['fill'] / 1e6:11.1f} "
              f"{raw / max(r['fill'], 1):8.2f} {r['after'] / 1e6:12.1f} "
              f"{r['after'] / max(r['fill'], 1):10.2f}")

    def ratio(a_, b_, k):
        if a_ in res and b_ in res:
            return f"{res[a_][k] / res[b_][k]:.2f}"
        return "n/a"
    print("\nacceptance ratios (medians):")
    print(f"  CompressedDict(lz4) / dict+lz4.block   put {ratio('CompressedDict(lz4)', 'dict+lz4.block', 'put')}"
          f"  get {ratio('CompressedDict(lz4)', 'dict+lz4.block', 'get')}   (target >= 0.9)")
    print(f"  CompressedDict(zstd) / dict+zstandard  put {ratio('CompressedDict(zstd)', 'dict+zstandard', 'put')}"
          f"  get {ratio('CompressedDict(zstd)', 'dict+zstandard', 'get')}   (target >= 0.9)")
    print(f"  CompressedDict(zstd+dict) RSS fill / dict+zstandard       "
          f"{ratio('CompressedDict(zstd+dict)', 'dict+zstandard', 'fill')}   (target <= 0.5)")
    print(f"  CompressedDict(zstd+dict) RSS fill / dict+zstandard+dict  "
          f"{ratio('CompressedDict(zstd+dict)', 'dict+zstandard+dict', 'fill')}   (target <= 0.8)")
    for name in res:
        if name.startswith("CompressedDict"):
            print(f"  {name} after deleting 60% + 1.5 s / fill  "
                  f"{res[name]['after'] / max(res[name]['fill'], 1):.2f}   (target <= 0.45)")
    m = pool_micro()
    print(f"\nPool micro-benchmark (best of 5 x 200k calls, thread CPU time, compiled module: {m['ext']}):")
    print(f"  Pool.read(h) of a 1 KB object      {m['read_1k_us']:.2f} us   (target <= 0.5)")
    print(f"  Pool.read_into(h, buf), 1 KB       {m['read_into_1k_us']:.2f} us")
    print(f"  Pool.store(1 KB)                   {m['store_1k_us']:.2f} us   (target <= 0.7)")
    print(f"  Compressor('lz4').compress(1 KB)   {m['compress_1k_us']:.2f} us (random bytes)")


if __name__ == "__main__":
    main()
