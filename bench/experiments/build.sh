#!/usr/bin/env bash
# bench/experiments/build.sh NAME DIR [REV]: a scratch Release build of the
# commit the patch names on its first line ("base: REV"; or REV given) with
# bench/experiments/NAME.patch applied, in a git worktree at DIR (made anew),
# for the measurements in the docs that needed switches the library must not
# have.  Why patches and not options: the switches make the library wrong on
# purpose (ZS_EXP_NOREAD installs pages it never read, ZS_EXP_PLAIN takes
# locks without atomics), so they live outside the tree's code, and this
# script is the command that reproduces those figures from a clean clone.
#
#   region-limits  fault handler variants (docs/region.md, "What any handler
#                  can reach here"): ZS_EXP_NOREAD, ZS_EXP_FLOORLOOP,
#                  ZS_EXP_PURE, ZS_EXP_IDLE, ZS_EXP_THP; the floor registered
#                  as the region is: ZS_EXP_FLOOR_WP, ZS_EXP_FLOOR_FEAT
#   lock-limits    T=1 churn without locked instructions or with
#                  non-temporal copies: ZS_EXP_PLAIN (one thread only),
#                  ZS_EXP_NT=BYTES (docs/benchmarks.md states the outcome;
#                  the figures are in the git history of that file)
#
# Each switch is an environment variable read by the built binaries
# (DIR/build-rel/bench_region, DIR/build-rel/bench_threads); unset, the
# build behaves as its base commit.  Remove the worktree afterwards with
# `git worktree remove --force DIR`.
set -euo pipefail
name=${1:?usage: bench/experiments/build.sh NAME DIR}
dir=${2:?usage: bench/experiments/build.sh NAME DIR}
top=$(git rev-parse --show-toplevel)
patch="$top/bench/experiments/$name.patch"
[ -f "$patch" ] || { echo "no $patch" >&2; exit 2; }
rev=${3:-$(sed -n '1s/^base: \([0-9a-f]*\).*/\1/p' "$patch")}
if [ -e "$dir" ]; then
	git -C "$top" worktree remove --force "$dir" 2>/dev/null || rm -rf "$dir"
fi
git -C "$top" worktree prune
git -C "$top" worktree add --detach "$dir" "${rev:-HEAD}" >/dev/null
git -C "$dir" apply "$patch"
cmake -S "$dir" -B "$dir/build-rel" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$dir/build-rel" -j"$(nproc)" --target bench_region bench_threads >/dev/null
echo "$dir/build-rel"
