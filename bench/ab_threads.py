#!/usr/bin/env python3
"""ab_threads.py RUNS BENCH [BENCH...] [-- BENCH ARGS...]: bench_threads builds, interleaved.

Why: on the shared 2-vCPU machine one bench_threads run swings by 30% or more,
so whether a build of the allocator is faster at one thread shows only over
many short processes taken in turn (A, B, mimalloc, A, B, mimalloc, ...).
Each process is one round of the churn workload at T=1 (`--rows app` for each
BENCH, `--rows mimalloc` with the first BENCH), `--r 40` unless BENCH ARGS
say otherwise (add `--no-write` for the allocator alone).  Prints, per build
and for mimalloc, the best and the median of Mops/s and of Mops per second of
the thread's own CPU time (the column that the machine's load disturbs least),
and each build's best and median per-CPU-second rate over mimalloc's.
Typical (docs/benchmarks.md section 5):
  bench/ab_threads.py 5 build-rel/bench_threads build-noatomic/bench_threads
  bench/ab_threads.py 5 build-rel/bench_threads -- --r 40 --no-write
"""
import json
import os
import statistics
import subprocess
import sys


def one(path, row, args):
    out = subprocess.run([path, '--json', '--workload', 'churn', '--rows', row, '--threads', '1',
                          '--rounds', '1'] + args, capture_output=True, text=True, check=True).stdout
    d = json.loads(out)
    return d['churn_%s_t1_mops' % row], d['churn_%s_t1_mops_per_cpu_s' % row]


def main(argv):
    if '--' in argv:
        k = argv.index('--')
        argv, args = argv[:k], argv[k + 1:]
    else:
        args = ['--r', '40']
    if len(argv) < 3 or not argv[1].isdigit():
        sys.stderr.write(__doc__)
        return 2
    runs, benches = int(argv[1]), argv[2:]
    sides = [(b, 'app') for b in benches] + [(benches[0], 'mimalloc')]
    got = {s: [] for s in sides}
    for i in range(runs):
        for s in sides:
            got[s].append(one(s[0], s[1], args))
        print('run %d of %d done, load %.2f' % (i + 1, runs, os.getloadavg()[0]), file=sys.stderr)
    mi_best = max(c for _, c in got[sides[-1]])
    mi_med = statistics.median(c for _, c in got[sides[-1]])
    print('%d interleaved runs, args %s, load at end %.2f' % (runs, ' '.join(args),
                                                               os.getloadavg()[0]))
    print('%-44s %17s %21s %15s' % ('build (row)', 'Mops/s best/med', 'per CPU-s best/med',
                                   '/mimalloc b/m'))
    for s in sides:
        w = [x for x, _ in got[s]]
        c = [y for _, y in got[s]]
        print('%-44s %8.3f %8.3f %10.3f %10.3f %7.3f %7.3f' %
              ((s[0] + ' (' + s[1] + ')')[-44:], max(w), statistics.median(w), max(c),
               statistics.median(c), max(c) / mi_best, statistics.median(c) / mi_med))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
