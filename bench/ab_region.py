#!/usr/bin/env python3
"""ab_region.py A_BENCH B_BENCH [PAIRS [BENCH ARGS...]]: two bench_region builds, interleaved.

Why: bench_region's single runs swing by 2x on a shared 2-vCPU machine, so a
change's cost is only visible as the median over many interleaved pairs (A B,
B A, A B, ...), each `--quick --no-kernel`.  Prints per process count the
medians of pageout, sequential and random swap-in throughput and the random
fault's p50 over the userfaultfd floor, B/A, and each side's range, then each
side's p50-over-floor run by run (in the order run) with the load average.
BENCH ARGS replace the default `--quick --no-kernel`.
Typical: build both at Release in two worktrees, then
  bench/ab_region.py OLD/build-rel/bench_region NEW/build-rel/bench_region 15
  bench/ab_region.py OLD/... NEW/... 4 --threads --procs 2 --no-kernel   (two handler threads)
"""
import os
import re
import statistics
import subprocess
import sys

KEYS = ['pageout MB/s (all procs)', 'sequential swap-in MB/s', 'random swap-in MB/s',
        'random swap-in vs floor: p50']


def run(path, args):
    out = subprocess.run([path] + args, capture_output=True, text=True, check=True).stdout
    got, sec = {}, None
    for line in out.splitlines():
        m = re.match(r'== P=(\d+)', line)
        if m:
            sec = 'P' + m.group(1)
            continue
        if sec and line.startswith('  touch p50 us') and (sec, KEYS[2]) in got:
            got[(sec, 'random touch p50 us')] = float(line.split()[3])   # the random phase's
        for k in KEYS:
            if sec and line.startswith(k):
                if k.endswith('floor: p50'):
                    v = float(re.search(r'p50 ([\d.]+)x', line).group(1))
                else:
                    v = float(line[len(k):].split()[0])
                got[(sec, k)] = v
    return got


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    a, b = sys.argv[1], sys.argv[2]
    pairs = int(sys.argv[3]) if len(sys.argv) > 3 else 15
    args = sys.argv[4:] or ['--quick', '--no-kernel']
    res = {'A': {}, 'B': {}}
    runs = {'A': [], 'B': []}
    for i in range(pairs):
        order = [('A', a), ('B', b)] if i % 2 == 0 else [('B', b), ('A', a)]
        for side, path in order:
            got = run(path, args)
            for key, v in got.items():
                res[side].setdefault(key, []).append(v)
            runs[side].append(' '.join(f"{k[0]} {v:.2f}x" for k, v in sorted(got.items())
                                       if k[1].endswith('floor: p50')) + f" (load {os.getloadavg()[0]:.1f})")
    print(f"{pairs} interleaved pairs; A={a} B={b}; {' '.join(args)}")
    for key in res['A']:
        va, vb = res['A'][key], res['B'].get(key, [float('nan')])
        ma, mb = statistics.median(va), statistics.median(vb)
        print(f"{key[0]} {key[1]:32s} A {ma:9.2f} B {mb:9.2f} B/A {mb / ma:5.2f}   "
              f"A {min(va):.2f}-{max(va):.2f} B {min(vb):.2f}-{max(vb):.2f}")
    for side in 'AB':
        print(f"{side} p50 over the floor, run by run: " + '; '.join(runs[side]))


if __name__ == '__main__':
    main()
