#!/usr/bin/env bash
# Owner: scripts/doc-counts.sh, which keeps the docs' exact counts from going
# stale.  Three parts:
#   1. every figure the script owns still has its markers in README.md and
#      docs/*.md (a hand edit that drops one would silently freeze it);
#   2. on a fixture tree with saved measurements (no callgrind: it would
#      take ~40 s), --check fails on stale figures, the rewrite fixes them and
#      leaves the text around them alone, and bad markers are refused;
#   3. the cheap figures for real: the check counts of tests/cli/cli_errors.sh
#      and two regression tests, and test_comp_dict's bytes, measured with
#      this build and compared with the docs (a few seconds).  A change that
#      adds a check must update the count: scripts/doc-counts.sh --only checks.
# The callgrind figures (api, alloc, layout) depend on a Release build with gcc:
# scripts/test.sh checks them with scripts/doc-counts.sh --check on its own
# Release build (build-counts), not this ctest.
# Usage: bash tests/package/doc_counts.sh BUILD_DIR   (from the repository root)
set -u
build=${1:?usage: tests/package/doc_counts.sh BUILD_DIR}
script=scripts/doc-counts.sh
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() { # check DESCRIPTION CMD...: CMD must succeed
	local what=$1
	shift
	if "$@" >"$tmp/out" 2>&1; then
		pass=$((pass + 1))
		echo "ok   $what"
	else
		fail=$((fail + 1))
		echo "FAIL $what:"
		head -20 "$tmp/out" | sed 's/^/    /'
	fi
}
status_is() { # status_is WANT CMD...: CMD exits with WANT
	local want=$1 rc
	shift
	"$@"
	rc=$?
	[ "$rc" -eq "$want" ] || { echo "exit $rc, want $want"; return 1; }
}
# markers FILE NAME COUNT: NAME's begin marker appears COUNT times in FILE, each closed.
markers() {
	local n
	n=$(grep -o "<!-- doc-counts:begin $2 -->" "$1" | wc -l)
	[ "$n" -eq "$3" ] || { echo "$1: $n '$2' markers, want $3"; return 1; }
}

# 1. The markers in the real docs.
check "README.md: api-summary" markers README.md api-summary 1
check "README.md: alloc-summary" markers README.md alloc-summary 1
check "benchmarks.md: api-linear" markers docs/benchmarks.md api-linear 1
check "benchmarks.md: api-table" markers docs/benchmarks.md api-table 1
check "benchmarks.md: alloc-table" markers docs/benchmarks.md alloc-table 1
check "reliability.md: checks-cli (summary and table)" markers docs/reliability.md checks-cli 2
check "reliability.md: checks-limits" markers docs/reliability.md checks-limits 2
check "reliability.md: checks-unpin" markers docs/reliability.md checks-unpin 2
check "zram.md: dict-bytes" markers docs/zram.md dict-bytes 1
check "benchmarks.md: layout-table" markers docs/benchmarks.md layout-table 1
check "benchmarks.md: layout-app" markers docs/benchmarks.md layout-app 1
check "benchmarks.md: layout-pair-extra" markers docs/benchmarks.md layout-pair-extra 1
check "benchmarks.md: layout-fenced" markers docs/benchmarks.md layout-fenced 1

# 2. A fixture tree and saved measurements.
mkdir -p "$tmp/t/docs"
cat >"$tmp/results" <<'EOF'
api_objects=4064
api_legacy=43576715
api_new=26539556
api_new_20=53079086
api_new_0=23
api_legacy_0=22
toolchain=gcc 12.2.0, valgrind-3.19.0
checks_cli=1234
EOF
cat >"$tmp/t/README.md" <<'EOF'
| what | result |
|---|---|
| api | <!-- doc-counts:begin api-summary -->**−1.0%** stale<!-- doc-counts:end -->; history stays |
EOF
cat >"$tmp/t/docs/x.md" <<'EOF'
Before.
<!-- doc-counts:begin api-table -->
| stale | table |
<!-- doc-counts:end -->

After, with <!-- doc-counts:begin checks-cli -->7<!-- doc-counts:end --> checks and
<!-- doc-counts:begin checks-cli -->8<!-- doc-counts:end --> again.
EOF
cp -r "$tmp/t" "$tmp/orig"
run() { bash "$script" --root "$tmp/t" --results "$tmp/results" "$@"; }
check "--check fails on stale figures" status_is 1 run --check
cp "$tmp/out" "$tmp/check.out"
check "--check changed nothing" diff -r "$tmp/orig" "$tmp/t"
check "--check shows the difference" grep -q '^+.*>1,234<' "$tmp/check.out"
check "rewrite succeeds" run
check "--check passes after the rewrite" status_is 0 run --check
check "inline figure rewritten, text around it kept" \
	grep -qF '| api | <!-- doc-counts:begin api-summary -->**−39.1%** instructions per object (1072.3 → 653.0; Release, gcc 12.2.0, valgrind-3.19.0)<!-- doc-counts:end -->; history stays |' "$tmp/t/README.md"
check "table rewritten between its marker lines" \
	grep -qx '| legacy | 43,576,715 | 1072.3 |' "$tmp/t/docs/x.md"
check "every copy of a figure rewritten" test "$(grep -c '>1,234<' "$tmp/t/docs/x.md")" -eq 2
check "lines outside the markers kept" bash -c "grep -qx 'Before.' '$tmp/t/docs/x.md' && [ \"\$(tail -1 '$tmp/t/docs/x.md')\" = '<!-- doc-counts:begin checks-cli -->1,234<!-- doc-counts:end --> again.' ]"
check "--only leaves other groups alone" bash -c "cp -r '$tmp/orig' '$tmp/o2' && bash '$script' --root '$tmp/o2' --results '$tmp/results' --only checks >/dev/null && grep -q 'stale' '$tmp/o2/README.md' && ! grep -q '>7<' '$tmp/o2/docs/x.md'"
printf 'x <!-- doc-counts:begin checks-cli -->1\n' >"$tmp/t/docs/bad.md"
check "an unclosed marker is refused" status_is 2 run --check
printf 'x <!-- doc-counts:begin nosuch-thing -->1<!-- doc-counts:end -->\n' >"$tmp/t/docs/bad.md"
check "an unknown figure is refused, whatever --only says" status_is 2 run --only checks --check
check "an unknown figure in a known group is refused" bash -c "printf 'x <!-- doc-counts:begin checks-nosuch -->1<!-- doc-counts:end -->\n' >'$tmp/t/docs/bad.md'; bash '$script' --root '$tmp/t' --results '$tmp/results' --only checks --check; [ \$? -eq 2 ]"
rm -f "$tmp/t/docs/bad.md"
check "a missing measurement is an error" bash -c "grep -v checks_cli '$tmp/results' >'$tmp/r2'; ! bash '$script' --root '$tmp/t' --results '$tmp/r2' --check"

# 3. The cheap figures, measured with this build.
if [ -x "$build/test_comp_dict" ] && [ -x "$build/zs" ]; then
	check "docs' check counts and dictionary bytes match this build" \
		bash "$script" --check --no-build --only checks,dict --build "$build"
else
	echo "skip the measured part: no $build/zs or $build/test_comp_dict"
fi
# The object-API counts take ~3 s under callgrind but hold only for the build the docs name
# (Release, the compiler in the table): checked when this is such a build.
want=$(grep -o 'Release build, [a-z]* [0-9.]*' docs/benchmarks.md | head -1 | sed 's/Release build, //')
have=$(sed -n 's/^set(CMAKE_C_COMPILER_ID "\(.*\)")/\1 /p; s/^set(CMAKE_C_COMPILER_VERSION "\(.*\)")/\1/p' \
	"$build"/CMakeFiles/*/CMakeCCompiler.cmake 2>/dev/null | head -2 | tr -d '\n' | sed 's/^GNU/gcc/; s/^Clang/clang/')
if grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' "$build/CMakeCache.txt" 2>/dev/null &&
	[ "$have" = "$want" ] && [ -x "$build/bench_api" ] && command -v valgrind >/dev/null; then
	check "docs' object-API instruction counts match this $have Release build" \
		bash "$script" --check --no-build --only api --build "$build"
else
	echo "skip the object-API counts: not a Release $want build (scripts/doc-counts.sh --check does it)"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
