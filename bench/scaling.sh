#!/usr/bin/env bash
# bench/scaling.sh: the scaling runs (1..16 threads) in one go, for a
# many-core machine: bench_threads churn and zram mix, and bench_zram against
# raw lz4 in both store profiles.  Prints the tables; with OUT set, tees each
# into $OUT.  usage: bench/scaling.sh BINDIR [THREADS] [PAGES_DIR]
#   BINDIR     a Release build (bench_threads, bench_zram)
#   THREADS    default 1,2,4,8,16
#   PAGES_DIR  bench_zram's pages; default /usr/lib (512 MiB of them are loaded)
set -u
B=${1:?usage: bench/scaling.sh BINDIR [THREADS] [PAGES_DIR]}
T=${2:-1,2,4,8,16}
P=${3:-/usr/lib}
O=${OUT:-/tmp}
echo "nproc $(nproc); $(grep -m1 'model name' /proc/cpuinfo); kernel $(uname -r)"
run() { local name=$1; shift; echo "== $*"; "$@" 2>&1 | tee "$O/$name.txt"; }
run churn "$B/bench_threads" --workload churn --rows app,kernel,mimalloc,glibc --threads "$T" --rounds 3
run zram_app "$B/bench_zram" --no-kernel --comp lz4 --threads "$T" --rounds 3 --max 512 --profile app "$P"
run zram_kernel "$B/bench_zram" --no-kernel --comp lz4 --threads "$T" --rounds 3 --max 512 --profile kernel "$P"
run zmix "$B/bench_threads" --workload zram --rows app,kernel,mimalloc --threads "$T" --rounds 3
