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
Typical: bench/rocksdb_cache.py --quick --build build
"""
import argparse
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
    a = p.parse_args()
    q = a.quick
    a.keys = a.keys or (200000 if q else 1000000)
    a.cache_mib = a.cache_mib or (4 if q else 16)
    a.caps = [int(x) for x in (a.caps or ("16,32" if q else "128,256")).split(",")]
    a.seeds = [int(x) for x in (a.seeds or ("1" if q else "1,2,3")).split(",")]
    a.duration = a.duration or (10 if q else 15)
    return a


def run(cmd, env):
    """Runs cmd; returns (output, peak RSS in bytes) from the child's rusage (VmHWM)."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = proc.stdout.read()
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (proc.returncode, " ".join(cmd), out[-2000:]))
    return out, ru.ru_maxrss * 1024


def last_int(pattern, text):
    found = re.findall(pattern, text)
    return int(found[-1]) if found else None


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
    common = ["--db=" + db, "--num=%d" % a.keys, "--key_size=100", "--value_size=1024"]
    try:
        if not os.path.exists(os.path.join(db, "CURRENT")):
            print("fillseq: %d keys into %s" % (a.keys, db), flush=True)
            run([a.db_bench, "--benchmarks=fillseq", "--compression_ratio=0.5",
                 "--compression_type=lz4", "--disable_wal=1"] + common, env)
        caches = [("rocksdb", "compressed_secondary_cache://capacity=%d"),
                  ("rocksdb-split", "compressed_secondary_cache://capacity=%d;enable_custom_split_merge=true"),
                  ("libzs", "libzs://capacity:%d")]
        rows = {}  # (name, cap) -> list of dicts

        def one(name, cap, uri, seed):
            cmd = [a.db_bench, "--use_existing_db=1", "--cache_size=%d" % (a.cache_mib * MiB),
                   "--read_random_exp_range=10", "--threads=1", "--statistics=1", "--perf_level=2",
                   "--benchmarks=readrandom,resetstats,readrandom", "--duration=%d" % a.duration,
                   "--seed=%d" % seed] + common
            if uri:
                cmd.append("--secondary_cache_uri=" + uri)
            out, hwm = run(cmd, env)
            r = {"hwm": hwm,
                 "sec": last_int(r"secondary_cache_hit_count = (\d+)", out) or 0,
                 "reads": last_int(r"(?<![a-z_])block_read_count = (\d+)", out) or 0,
                 "ops": last_int(r"readrandom\s*:.*? (\d+) ops/sec", out) or 0,
                 "zs_mem": last_int(r"libzs_rocksdb:.* mem_bytes=(\d+)", out),
                 "zs_cached": last_int(r"libzs_rocksdb:.* cached_bytes=(\d+)", out),
                 "zs_values": last_int(r"libzs_rocksdb:.* value_bytes=(\d+)", out)}
            rows.setdefault((name, cap), []).append(r)
            print("  seed %d %-13s C=%4s MiB: VmHWM %7.1f MiB, sec hits %d, SST reads %d, %d ops/s"
                  % (seed, name, cap or "-", hwm / MiB, r["sec"], r["reads"], r["ops"]), flush=True)

        for seed in a.seeds:
            one("none", 0, None, seed)
            for cap in a.caps:
                for name, fmt in caches:
                    one(name, cap, fmt % (cap * MiB), seed)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)

    med = statistics.median
    base = med(r["hwm"] for r in rows[("none", 0)])
    base_ops = med(r["ops"] for r in rows[("none", 0)])
    print("\n%d keys, block cache %d MiB, %d s phases, seeds %s; no secondary cache: VmHWM %.1f MiB, %d ops/s"
          % (a.keys, a.cache_mib, a.duration, ",".join(map(str, a.seeds)), base / MiB, base_ops))
    print("| C MiB | cache | secondary hit % | RSS growth MiB | growth / C | ops/s | libzs held / values |")
    print("|---|---|---|---|---|---|---|")
    summary = {}
    for cap in a.caps:
        for name, _ in caches:
            rs = rows[(name, cap)]
            hit = med(100.0 * r["sec"] / max(1, r["sec"] + r["reads"]) for r in rs)
            growth = med(r["hwm"] for r in rs) - base
            ops = med(r["ops"] for r in rs)
            held = ""
            if name == "libzs" and rs[0]["zs_values"]:
                held = "%.3f" % med((r["zs_mem"] - r["zs_cached"]) / r["zs_values"] for r in rs)
            summary[(name, cap)] = (hit, growth, ops)
            print("| %d | %s | %.1f | %.1f | %.2f | %d | %s |"
                  % (cap, name, hit, growth / MiB, growth / (cap * MiB), ops, held))
    print("\nlibzs against RocksDB's default and split caches (same C):")
    for cap in a.caps:
        z, d, s = summary[("libzs", cap)], summary[("rocksdb", cap)], summary[("rocksdb-split", cap)]
        print("  C=%d MiB: hit rate %+.1f / %+.1f points; RSS growth x%.2f / x%.2f; ops/s x%.2f / x%.2f"
              % (cap, z[0] - d[0], z[0] - s[0], z[1] / d[1] if d[1] > 0 else float("nan"),
                 z[1] / s[1] if s[1] > 0 else float("nan"), z[2] / max(1, d[2]), z[2] / max(1, s[2])))


if __name__ == "__main__":
    main()
