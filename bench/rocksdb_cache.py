#!/usr/bin/env python3
"""rocksdb_cache.py [--quick] [options]: RocksDB's secondary caches side by side in db_bench.

Why: the libzs plugin (plugins/rocksdb) and RocksDB 7.8's own compressed
secondary cache apply the same admission rules, so at one capacity C they
differ only in how they store bytes and count memory.  This runs, interleaved
and with LD_PRELOAD of the plugin in every run (identical processes): no
secondary cache; RocksDB's default ("compressed_secondary_cache://capacity=C");
its split mode (enable_custom_split_merge=true); libzs ("libzs://capacity:C").
Per cache and C it prints the medians over seeds of the secondary hit rate
(secondary hits / (secondary hits + SST block reads), from the measured
phase's PERF_CONTEXT), RSS growth (the process's peak RSS, VmHWM, less the
no-secondary-cache runs' median), growth / C, ops/s, and libzs against the
default.  Hit rates and memory repeat within about 1%; ops/s on a shared
2-CPU machine does not.

Protocol (full, the default): 1M keys of 100 B, 1 KB values at compression
ratio 0.5, lz4; a 16 MiB block cache; readrandom with read_random_exp_range
10, one thread, a warm-up phase then a measured phase of --duration seconds
each; C = 128 and 256 MiB; seeds 1-3.  --quick: 200k keys, a 4 MiB block
cache, C = 16 and 32 MiB, seed 1, 10 s phases.
--equal-rss: after the same-capacity runs, gives libzs, for each RocksDB
cache and C, the capacity that makes its RSS growth equal that cache's
(C * that growth / libzs's growth at C, recalibrated once when the median
growth misses by over 2%), and prints both hit rates and the difference.
--sweep 'OPTS|OPTS...': instead, for each seed, RocksDB's default cache at
each --caps C and libzs with each set of URI options at each --sweep-caps
capacity (MiB, e.g. the equal-RSS capacities), all in one interleaved batch:
per setting the secondary hit rate, RSS growth / capacity, real B /
uncompressed B, and process CPU time against the default's at the first C
(median of the per-seed ratios).  It compares codecs at one protocol.
--cost: instead, CPU seconds per read (the process's rusage user+sys over
both phases' reads) for no secondary cache, RocksDB's default and split
caches at the first C and libzs with each --sweep option set (default: lz4)
at the first --sweep-caps capacity (default: the first C), at each
--ops-threads count and seed, --jobs at once; then one run per libzs setting
and thread count (first seed) with ZS_ROCKSDB_TIMING=1, the plugin's
per-call timers: per hit, per block stored, per dummy, the codec alone, and
the plugin's share of a read's CPU time.  Needs --reads.
--ops-pairs N: instead, N interleaved pairs (RocksDB's default, libzs; the
order alternates) at each --ops-threads count and the first C, printing each
pair's ops/s ratio, the median and the range.
"real B / uncompressed B": libzs's real bytes (zs_cache_stats mem_bytes, the
pages cached for reuse included, plus the dummy table) per uncompressed byte
of the blocks it holds, from its statistics line; RocksDB's caches report no
such count, so for them it is RSS growth / an estimate of what they hold: a
full cache of C holds C / (compressed block + 88 B handle) blocks, with the
compressed and uncompressed block sizes taken from libzs's lz4 statistics of
the same run set (the same blocks, the same codec).
Every figure is printed with the 1-minute load average seen before its runs.
Typical: bench/rocksdb_cache.py --quick --build build
"""
import argparse
import concurrent.futures
import queue
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

MiB = 1 << 20


def args_parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="200k keys, 4 MiB block cache, C 16,32 MiB, 1 seed, 10 s")
    p.add_argument("--build", default="build", help="build dir holding plugins/rocksdb/libzs_rocksdb.so")
    p.add_argument("--db-bench", default=shutil.which("db_bench") or "/usr/bin/db_bench")
    p.add_argument("--keys", type=int, help="keys in the DB (default 1000000; quick 200000)")
    p.add_argument("--cache-mib", type=int, help="primary block cache (default 16; quick 4)")
    p.add_argument("--caps", help="secondary capacities in MiB, comma-separated (default 128,256; quick 16,32)")
    p.add_argument("--seeds", help="comma-separated (default 1,2,3; quick 1)")
    p.add_argument("--duration", type=int, help="seconds per phase (default 15; quick 10)")
    p.add_argument("--db", help="existing or new DB dir to reuse (default: a temporary one, removed)")
    p.add_argument("--reads", type=int, help="reads per thread per phase instead of --duration: hit rates "
                   "and memory then do not depend on how fast the machine is at the time")
    p.add_argument("--jobs", type=int, default=1, help="runs at once (hit rates and memory with --reads only; "
                   "each on its own copy of the DB, DIR-1, DIR-2...)")
    p.add_argument("--equal-rss", action="store_true", help="also libzs at the RSS growth of each RocksDB cache")
    p.add_argument("--ops-pairs", type=int, default=0, help="only ops/s: N interleaved default/libzs pairs")
    p.add_argument("--ops-threads", default="1,2", help="reader threads for --ops-pairs (default 1,2)")
    p.add_argument("--cost", action="store_true", help="only CPU per read and the plugin's per-call timers")
    p.add_argument("--sweep", help="only codecs: '|'-separated libzs URI option sets, e.g. "
                   "',codec:zstd,level:-1|,codec:lz4'")
    p.add_argument("--sweep-caps", help="libzs capacities in MiB for --sweep (default: --caps)")
    p.add_argument("--arena-max", type=int, help="MALLOC_ARENA_MAX for every run, the no-cache and RocksDB "
                   "ones included: glibc's per-thread arenas then cannot hold RocksDB's freed heap apart")
    p.add_argument("--libzs-opts", default="", help="extra libzs URI options, e.g. ',codec:zstd,level:1'")
    a = p.parse_args()
    q = a.quick
    a.keys = a.keys or (200000 if q else 1000000)
    a.cache_mib = a.cache_mib or (4 if q else 16)
    a.caps = [int(x) for x in (a.caps or ("16,32" if q else "128,256")).split(",")]
    a.seeds = [int(x) for x in (a.seeds or ("1" if q else "1,2,3")).split(",")]
    a.duration = a.duration or (10 if q else 15)
    return a


def run(cmd, env):
    """Runs cmd; returns (output, peak RSS in bytes (VmHWM), CPU seconds) from the child's rusage."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = proc.stdout.read()
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (proc.returncode, " ".join(cmd), out[-2000:]))
    return out, ru.ru_maxrss * 1024, ru.ru_utime + ru.ru_stime


def last_int(pattern, text):
    found = re.findall(pattern, text)
    return int(found[-1]) if found else None


def med(xs):
    return statistics.median(list(xs))


def hit_rate(r):
    return 100.0 * r["sec"] / max(1, r["sec"] + r["reads"])


def load_range(rs):
    lo, hi = min(r["load"] for r in rs), max(r["load"] for r in rs)
    return "%.1f" % lo if abs(hi - lo) < 0.05 else "%.1f-%.1f" % (lo, hi)


def main():
    a = args_parse()
    plugin = os.path.abspath(os.path.join(a.build, "plugins/rocksdb/libzs_rocksdb.so"))
    for f in (a.db_bench, plugin):
        if not os.path.exists(f):
            sys.exit("missing %s (apt-get install rocksdb-tools librocksdb-dev; build the plugin)" % f)
    tmp = None
    db = a.db
    if not db:
        tmp = tempfile.mkdtemp(prefix="zs_rocksdb_bench.")
        db = os.path.join(tmp, "db")
    env = dict(os.environ, LD_PRELOAD=plugin, ZS_ROCKSDB_STATS="1")
    if a.arena_max:
        env["MALLOC_ARENA_MAX"] = str(a.arena_max)
    common = ["--num=%d" % a.keys, "--key_size=100", "--value_size=1024"]
    dbs = queue.Queue()
    caches = [("rocksdb", "compressed_secondary_cache://capacity=%d"),
              ("rocksdb-split", "compressed_secondary_cache://capacity=%d;enable_custom_split_merge=true"),
              ("libzs", "libzs://capacity:%d" + a.libzs_opts)]
    uris = dict(caches)
    a.sweep_uris = uris
    sweep = a.sweep.split("|") if a.sweep else []
    for i, o in enumerate(sweep):
        uris["sweep%d" % i] = "libzs://capacity:%d" + o
    rows = {}  # (name, cap in bytes) -> list of dicts

    def one(name, cap, seed, threads=1, keep=True, timing=False):
        d = dbs.get()
        try:
            return one_db(name, cap, seed, threads, keep, d, timing)
        finally:
            dbs.put(d)

    def batch(runs):
        """Runs (name, cap, seed[, threads, keep, timing]) tuples, a.jobs at a time."""
        with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as ex:
            for f in [ex.submit(one, *r) for r in runs]:
                f.result()

    def one_db(name, cap, seed, threads, keep, d, timing):
        cmd = [a.db_bench, "--db=" + d, "--use_existing_db=1", "--cache_size=%d" % (a.cache_mib * MiB),
               "--read_random_exp_range=10", "--threads=%d" % threads, "--statistics=1", "--perf_level=2",
               "--benchmarks=readrandom,resetstats,readrandom", "--seed=%d" % seed] + common
        cmd.append("--reads=%d" % a.reads if a.reads else "--duration=%d" % a.duration)
        if name != "none":
            cmd.append("--secondary_cache_uri=" + uris[name] % cap)
        load = os.getloadavg()[0]
        uptime = " ".join("%.2f" % x for x in os.getloadavg())
        out, hwm, cpu = run(cmd, dict(env, ZS_ROCKSDB_TIMING="1") if timing else env)
        timers = (re.findall(r"libzs_rocksdb_timing:.*", out) or [""])[-1]
        r = {"hwm": hwm, "threads": threads, "name": name, "cap": cap,
             "timers": {k: (int(n), float(ns)) for k, n, ns in re.findall(r"(\w+)=(\d+):(\d+)", timers)}, "load": load, "cpu": cpu, "seed": seed, "uptime": uptime,
             "sec": last_int(r"secondary_cache_hit_count = (\d+)", out) or 0,
             "reads": last_int(r"(?<![a-z_])block_read_count = (\d+)", out) or 0,
             "ops": last_int(r"readrandom\s*:.*? (\d+) ops/sec", out) or 0}
        for f in ("entries", "raw_entries", "value_bytes", "stored_bytes", "mem_bytes", "cached_bytes", "real_bytes",
                  "dummies", "dummy_bytes", "insert_failures", "evictions", "train_cpu_ns", "rebuild_cpu_ns"):
            r[f] = last_int(r"libzs_rocksdb:.* %s=(\d+)" % f, out)
        if keep:
            rows.setdefault(rkey(name, cap, threads, timing), []).append(r)
        held = " real/value %.4f" % (r["real_bytes"] / r["value_bytes"]) if r["real_bytes"] and r["value_bytes"] else ""
        if r["train_cpu_ns"]:
            held += ", dictionary: training %.3f + rebuild %.3f CPU s" % (r["train_cpu_ns"] / 1e9,
                                                                        (r["rebuild_cpu_ns"] or 0) / 1e9)
        print("  seed %d %-13s C=%7.1f MiB threads %d: VmHWM %7.1f MiB, sec hits %d, SST reads %d (%.1f%%), "
              "%d ops/s, %.1f CPU s, load %.1f%s" % (seed, name, cap / MiB, threads, hwm / MiB, r["sec"], r["reads"],
                                                     hit_rate(r), r["ops"], cpu, load, held), flush=True)
        return r

    try:
        if not os.path.exists(os.path.join(db, "CURRENT")):
            print("fillseq: %d keys into %s" % (a.keys, db), flush=True)
            run([a.db_bench, "--db=" + db, "--benchmarks=fillseq", "--compression_ratio=0.5",
                 "--compression_type=lz4", "--disable_wal=1"] + common, env)
        dbs.put(db)
        for j in range(1, a.jobs if not a.ops_pairs else 1):
            copy = "%s-%d" % (db.rstrip("/"), j)
            if not os.path.exists(os.path.join(copy, "CURRENT")):
                shutil.copytree(db, copy, ignore=shutil.ignore_patterns("LOCK"))
            dbs.put(copy)
        if a.ops_pairs:
            ops_pairs(a, one)
            return
        if a.cost:
            cost(a, rows, batch, sweep)
            return
        if sweep:
            zcaps = [float(x) for x in (a.sweep_caps or ",".join(map(str, a.caps))).split(",")]
            batch([("none", 0, seed) for seed in a.seeds] +
                  [r for seed in a.seeds for r in
                   [("rocksdb", cap * MiB, seed) for cap in a.caps] +
                   [("sweep%d" % i, int(z * MiB), seed) for z in zcaps for i in range(len(sweep))]])
            report_sweep(a, rows, sweep, zcaps)
            return
        batch([("none", 0, seed) for seed in a.seeds] +
              [(name, cap * MiB, seed) for seed in a.seeds for cap in a.caps for name, _ in caches])
        base = med(r["hwm"] for r in rows[("none", 0)])
        report_same_cap(a, rows, base, caches)
        if a.equal_rss:
            equal_rss(a, rows, base, batch)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def rkey(name, cap, threads=1, timing=False):
    """rows' key: (name, cap) for the one-thread untimed runs every mode but --cost makes."""
    return (name, cap) if threads == 1 and not timing else (name, cap, threads, timing)


def phases(a):
    return "%d reads per thread per phase" % a.reads if a.reads else "%d s phases" % a.duration


def growth(rows, key, base):
    return med(r["hwm"] for r in rows[key]) - base


def libzs_ratio(rs):
    """libzs's real bytes per uncompressed byte held (median over runs)."""
    if not rs[0].get("real_bytes") or not rs[0].get("value_bytes"):
        return None
    return med(r["real_bytes"] / r["value_bytes"] for r in rs)


def report_same_cap(a, rows, base, caches):
    base_ops = med(r["ops"] for r in rows[("none", 0)])
    print("\n%d keys, block cache %d MiB, %s, seeds %s; no secondary cache: VmHWM %.1f MiB, %d ops/s"
          % (a.keys, a.cache_mib, phases(a), ",".join(map(str, a.seeds)), base / MiB, base_ops))
    print("| C MiB | cache | secondary hit % | RSS growth MiB | growth / C (max run) | ops/s "
          "| real B / uncompressed B | load |")
    print("|---|---|---|---|---|---|---|---|")
    summary = {}
    for cap in a.caps:
        zs = rows[("libzs", cap * MiB)]
        # Block sizes from libzs's statistics: the same blocks, lz4 (only when
        # libzs uses lz4 without a dictionary, as RocksDB does; blocks =
        # entries less the raw ones, the dummies)
        opts = a.libzs_opts + ","
        lz4 = ("codec" not in opts or "codec:lz4," in opts) and ("dict_kib" not in opts or "dict_kib:0," in opts)
        ok = lz4 and zs[0]["entries"] and zs[0]["raw_entries"] is not None
        blocks = [max(1, r["entries"] - r["raw_entries"]) for r in zs] if ok else None
        blk_c = med(r["stored_bytes"] / n for r, n in zip(zs, blocks)) if ok else None
        blk_u = med(r["value_bytes"] / n for r, n in zip(zs, blocks)) if ok else None
        for name, _ in caches:
            rs = rows[(name, cap * MiB)]
            hit = med(hit_rate(r) for r in rs)
            g = growth(rows, (name, cap * MiB), base)
            gmax = max(r["hwm"] for r in rs) - base
            ops = med(r["ops"] for r in rs)
            if name == "libzs":
                ratio = libzs_ratio(rs)
                held = "%.3f (own count)" % ratio if ratio else ""
            elif blk_c:
                held_u = cap * MiB / (blk_c + 88) * blk_u
                held = "%.3f (RSS growth / est.)" % (g / held_u)
            else:
                held = ""
            summary[(name, cap)] = (hit, g, ops)
            print("| %d | %s | %.1f | %.1f | %.2f (%.2f) | %d | %s | %s |"
                  % (cap, name, hit, g / MiB, g / (cap * MiB), gmax / (cap * MiB), ops, held, load_range(rs)))
        if blk_c:
            print("  (blocks: %.0f B uncompressed, %.0f B stored by libzs with lz4)" % (blk_u, blk_c))
    print("\nlibzs against RocksDB's default and split caches (same C):")
    for cap in a.caps:
        z, d, s = summary[("libzs", cap)], summary[("rocksdb", cap)], summary[("rocksdb-split", cap)]
        print("  C=%d MiB: hit rate %+.1f / %+.1f points; RSS growth x%.2f / x%.2f; ops/s x%.2f / x%.2f"
              % (cap, z[0] - d[0], z[0] - s[0], z[1] / d[1] if d[1] > 0 else float("nan"),
                 z[1] / s[1] if s[1] > 0 else float("nan"), z[2] / max(1, d[2]), z[2] / max(1, s[2])))


def equal_rss(a, rows, base, batch):
    """libzs at the capacity that makes its RSS growth equal each RocksDB cache's."""
    plan = []
    for cap in a.caps:
        c = cap * MiB
        g_zs = growth(rows, ("libzs", c), base)
        for comp in ("rocksdb", "rocksdb-split"):
            target = growth(rows, (comp, c), base)
            zcap = int(c * target / g_zs)
            print("equal RSS: C=%d MiB, %s grew %.1f MiB: libzs at %.1f MiB" % (cap, comp, target / MiB, zcap / MiB),
                  flush=True)
            plan.append([cap, comp, zcap, target])
    batch([("libzs", p[2], seed) for p in plan for seed in a.seeds])
    again = []
    for p in plan:
        g = growth(rows, ("libzs", p[2]), base)
        if abs(g - p[3]) > 0.02 * p[3]:
            zcap2 = int(p[2] * p[3] / g)
            print("  C=%d MiB, %s: libzs growth %.1f MiB is off by %+.1f%%: again at %.1f MiB"
                  % (p[0], p[1], g / MiB, 100 * (g / p[3] - 1), zcap2 / MiB), flush=True)
            p[2] = zcap2
            again += [("libzs", zcap2, seed) for seed in a.seeds]
    batch(again)
    out = [(cap, comp, zcap, growth(rows, ("libzs", zcap), base), target) for cap, comp, zcap, target in plan]
    print("\nEqual RSS growth (medians over seeds %s): libzs's capacity chosen so its growth matches"
          % ",".join(map(str, a.seeds)))
    print("| C MiB | competitor | its hit % | its growth MiB | libzs capacity MiB | libzs growth MiB (vs its) "
          "| libzs growth / capacity (max run) | libzs hit % | difference, points | real B / uncompressed B | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for cap, comp, zcap, g, target in out:
        rc, rz = rows[(comp, cap * MiB)], rows[("libzs", zcap)]
        hc, hz = med(hit_rate(r) for r in rc), med(hit_rate(r) for r in rz)
        gmax = max(r["hwm"] for r in rz) - base
        ratio = libzs_ratio(rz)
        print("| %d | %s | %.1f | %.1f | %.1f | %.1f (%+.1f%%) | %.2f (%.2f) | %.1f | %+.1f | %s | %s |"
              % (cap, comp, hc, target / MiB, zcap / MiB, g / MiB, 100 * (g / target - 1), g / zcap, gmax / zcap,
                 hz, hz - hc, "%.3f" % ratio if ratio else "", load_range(rc + rz)))


def report_sweep(a, rows, sweep, zcaps):
    base = med(r["hwm"] for r in rows[("none", 0)])
    ref = rows[("rocksdb", a.caps[0] * MiB)]
    print("\n%d keys, block cache %d MiB, %s, seeds %s; no secondary cache: VmHWM %.1f MiB"
          % (a.keys, a.cache_mib, phases(a), ",".join(map(str, a.seeds)), base / MiB))
    print("| cache | capacity MiB | secondary hit %% | RSS growth MiB | growth / capacity (max run) "
          "| real B / uncompressed B | CPU s | CPU / default at %d MiB (per seed) | load |" % a.caps[0])
    print("|---|---|---|---|---|---|---|---|---|")
    for cap in a.caps:
        rs = rows[("rocksdb", cap * MiB)]
        g = growth(rows, ("rocksdb", cap * MiB), base)
        print("| RocksDB default | %d | %.1f | %.1f | %.2f (%.2f) | | %.1f | | %s |"
              % (cap, med(hit_rate(r) for r in rs), g / MiB, g / (cap * MiB),
                 (max(r["hwm"] for r in rs) - base) / (cap * MiB), med(r["cpu"] for r in rs), load_range(rs)))
    for i, o in enumerate(sweep):
        for z in zcaps:
            c = int(z * MiB)
            rs = rows[("sweep%d" % i, c)]
            g = growth(rows, ("sweep%d" % i, c), base)
            dcpu = {d["seed"]: d["cpu"] for d in ref}
            ratios = [r["cpu"] / dcpu[r["seed"]] for r in sorted(rs, key=lambda r: r["seed"])]
            ratio = libzs_ratio(rs)
            print("| libzs%s | %.1f | %.1f | %.1f | %.3f (%.3f) | %s | %.1f | %.3f (%s) | %s |"
                  % (o, z, med(hit_rate(r) for r in rs), g / MiB, g / c, (max(r["hwm"] for r in rs) - base) / c,
                     "%.3f" % ratio if ratio else "", med(r["cpu"] for r in rs), med(ratios),
                     " ".join("%.3f" % x for x in ratios), load_range(rs)))


def cost(a, rows, batch, sweep):
    """CPU seconds per read for each cache, then the plugin's per-call timers."""
    if not a.reads:
        sys.exit("--cost needs --reads")
    threads = [int(t) for t in a.ops_threads.split(",")]
    c = a.caps[0] * MiB
    zc = int(float((a.sweep_caps or str(a.caps[0])).split(",")[0]) * MiB)
    opts = sweep or [""]
    names = ["none", "rocksdb", "rocksdb-split"] + ["sweep%d" % i for i in range(len(opts))]
    if not sweep:
        a.sweep_uris["sweep0"] = "libzs://capacity:%d"
    cap_of = lambda n: 0 if n == "none" else zc if n.startswith("sweep") else c
    batch([(n, cap_of(n), seed, t, True, False) for t in threads for seed in a.seeds for n in names])
    batch([("sweep%d" % i, zc, a.seeds[0], t, True, True) for t in threads for i in range(len(opts))])
    label = {"none": "no secondary cache", "rocksdb": "RocksDB default", "rocksdb-split": "RocksDB split"}
    for i, o in enumerate(opts):
        label["sweep%d" % i] = "libzs" + (o or ",codec:lz4")
    print("\nCPU per read: process user+sys CPU s / (2 phases x %d reads x threads); C = %d MiB, libzs at %.1f "
          "MiB; seeds %s; medians" % (a.reads, a.caps[0], zc / MiB, ",".join(map(str, a.seeds))))
    # A dictionary's training and the rebuild into a cache that uses it
    # happen once per cache; "steady" leaves them out of the CPU time.
    once = lambda r: ((r.get("train_cpu_ns") or 0) + (r.get("rebuild_cpu_ns") or 0)) / 1e9
    print("| cache | threads | CPU us per read, per seed | median | / default's (per seed median) "
          "| steady: less the dictionary's one-off CPU s (per seed) | steady median | steady / default's | hit % | load |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for t in threads:
        ref = {r["seed"]: r["cpu"] for r in rows[rkey("rocksdb", c, t)]}
        for n in names:
            rs = sorted(rows[rkey(n, cap_of(n), t)], key=lambda r: r["seed"])
            us = [1e6 * r["cpu"] / (2 * a.reads * t) for r in rs]
            steady = [1e6 * (r["cpu"] - once(r)) / (2 * a.reads * t) for r in rs]
            ratio = med(r["cpu"] / ref[r["seed"]] for r in rs)
            sratio = med((r["cpu"] - once(r)) / ref[r["seed"]] for r in rs)
            print("| %s | %d | %s | %.2f | %.3f | %s | %.2f | %.3f | %.1f | %s |" % (
                  label[n], t, " ".join("%.2f" % x for x in us), med(us), ratio,
                  " ".join("%.2f" % once(r) for r in rs), med(steady), sratio,
                  med(hit_rate(r) for r in rs), load_range(rs)))
    print("\nThe plugin's timers (ZS_ROCKSDB_TIMING=1, seed %d, one run each; ns per call, CLOCK_MONOTONIC, "
          "calls over 100 us left out):" % a.seeds[0])
    print("| libzs | threads | per hit: index+decompress / RocksDB's create / advise drop (per hit) / handle "
          "| per miss probe | per block stored: probe / saveto / store (codec, pool, index) | per dummy: probe / "
          "insert | codec alone: compress / decompress per block | plugin ns per read | of the read's CPU |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for t in threads:
        for i in range(len(opts)):
            r = rows[rkey("sweep%d" % i, zc, t, True)][0]
            tm = r["timers"]
            if not tm:
                print("| %s | %d | (no timers printed) |" % (label["sweep%d" % i], t))
                continue
            g = lambda k: tm.get(k, (0, 0.0))
            hits = max(1, g("hit")[0])
            own = sum(n * ns for k, (n, ns) in tm.items() if k not in ("create", "compress", "decompress"))
            own -= g("create")[0] * g("create")[1]  # inside "hit"; RocksDB's, any cache pays it
            per_read = own / (2 * a.reads * t)
            ref = med(x["cpu"] for x in rows[rkey("sweep%d" % i, zc, t)]) * 1e9 / (2 * a.reads * t)
            print("| %s | %d | %.0f / %.0f / %.0f / %.0f | %.0f | %.0f / %.0f / %.0f | %.0f / %.0f | %.0f / %.0f "
                  "| %.0f | %.1f%% |" % (
                      label["sweep%d" % i], t, g("hit")[1] - g("create")[1], g("create")[1],
                      g("advise")[0] * g("advise")[1] / hits, g("handle")[1], g("miss")[1],
                      g("probe")[1], g("saveto")[1], g("store")[1], g("probe")[1], g("ins_dummy")[1],
                      g("compress")[1], g("decompress")[1], per_read, 100 * per_read / ref))


def ops_pairs(a, one):
    """Interleaved pairs, RocksDB's default and libzs at the first C; the order alternates."""
    c = a.caps[0] * MiB
    print("ops/s pairs at C=%d MiB, %s" % (a.caps[0], phases(a)))
    for threads in (int(t) for t in a.ops_threads.split(",")):
        ratios, cpus, loads = [], [], []
        for i in range(a.ops_pairs):
            order = ("rocksdb", "libzs") if i % 2 == 0 else ("libzs", "rocksdb")
            got = {}
            for name in order:
                got[name] = one(name, c, i + 1, threads, keep=False)
            ratio = got["libzs"]["ops"] / max(1, got["rocksdb"]["ops"])
            ratios.append(ratio)
            cpus.append(got["libzs"]["cpu"] / max(1e-9, got["rocksdb"]["cpu"]))
            loads += [got["libzs"]["load"], got["rocksdb"]["load"]]
            print("  threads %d pair %d: default %d, libzs %d ops/s: x%.3f; CPU s %.2f / %.2f: x%.3f; "
                  "libzs insert failures %s; load averages (1, 5, 15 min) before each: default %s, libzs %s" % (
                      threads, i + 1, got["rocksdb"]["ops"], got["libzs"]["ops"], ratio, got["rocksdb"]["cpu"],
                      got["libzs"]["cpu"], cpus[-1], got["libzs"]["insert_failures"], got["rocksdb"]["uptime"],
                      got["libzs"]["uptime"]), flush=True)
        print("threads %d: libzs / default ops/s median x%.3f, range x%.3f-x%.3f over %d pairs; process CPU "
              "time libzs / default median x%.3f, range x%.3f-x%.3f; load %.1f-%.1f"
              % (threads, med(ratios), min(ratios), max(ratios), len(ratios), med(cpus), min(cpus), max(cpus),
                 min(loads), max(loads)), flush=True)


if __name__ == "__main__":
    main()
