#!/usr/bin/env bash
# Owner: the policy registries (ZS_CHAIN_POLICIES / ZS_FREE_MODES in
# include/zs/zsmalloc.h).  Adding a chain policy must take one registry line
# and its chain_<fn>() in src/zsmalloc/class.c, nothing else: this test
# copies the source tree, applies exactly that two-place change (a policy
# "lab-test", one page per zspage), builds the copy and checks that the new
# policy reaches every consumer: `zs help`, option parsing (`zs classes`),
# `zs replay --sweep` (its rows), the zs_const table (ZS_CHAIN_LABTEST) and
# the Python package (libzs.CHAIN_POLICIES).  The kernel's policy must still
# replay a committed trace with 0 mismatches.  As a control, the same checks
# run against BUILD_DIR (no lab-test) and must each fail there, so none of
# them passes vacuously.
# Usage: bash tests/package/policy_registry.sh BUILD_DIR
set -u
build=${1:?usage: tests/package/policy_registry.sh BUILD_DIR}
build=$(cd "$build" && pwd) || exit 2
root=$(pwd)
[ -x "$build/zs" ] && [ -f "$build/libzs.so" ] ||
	{ echo "policy_registry: $build/zs or libzs.so not built"; echo "0 passed, 1 failed"; exit 1; }
tmp=$(mktemp -d /tmp/zs-policy-registry.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; shift; printf '%s\n' "$@" | head -20 | sed 's/^/    /'; }
trace=tests/data/heap-lzorle.trace.xz

# The tree as it is (tracked and new files, not build output).
src=$tmp/src
mkdir -p "$src"
if git -C "$root" rev-parse --git-dir > /dev/null 2>&1; then
	(cd "$root" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$src") ||
		{ echo "policy_registry: copying the tree failed"; exit 1; }
else
	(cd "$root" && tar --exclude='./build*' -cf - .) | (cd "$src" && tar -xf -) || exit 1
fi

# The two places: a registry line after the last chain policy, and its function.
hdr=$src/include/zs/zsmalloc.h
last=$(grep -n '^#define ZS_CHAIN_POLICIES(X)' "$hdr" | cut -d: -f1)
[ -n "$last" ] || { bad "registry macro ZS_CHAIN_POLICIES not found in zsmalloc.h"; exit 1; }
# The list ends at its first line without a trailing backslash.
end=$(awk -v s="$last" 'NR > s && !/\\$/ { print NR; exit }' "$hdr")
sed -i "${end}s/\$/ \\\\/" "$hdr"
sed -i "${end}a\\	X(LABTEST, labtest, \"lab-test\", \"test only: one page per zspage\")" "$hdr"
cat >> "$src/src/zsmalloc/class.c" <<'EOF'

static unsigned chain_labtest(unsigned size, unsigned page_size, unsigned max_chain)
{
	(void)size;
	(void)page_size;
	(void)max_chain;
	return 1;
}
EOF
echo "policy_registry: building a copy with chain policy lab-test (two places changed)"
if ! { cmake -S "$src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release -DZS_EXAMPLES=OFF \
	-DZS_INSTALL=OFF > "$tmp/cmake.log" 2>&1 &&
	cmake --build "$tmp/build" -j2 --target zs zs_shared > "$tmp/build.log" 2>&1; }; then
	bad "build with the extra policy" "$(tail -20 "$tmp/cmake.log" "$tmp/build.log")"
	echo "$pass passed, $fail failed"
	exit 1
fi
ok "the copy builds with one registry line and one function added"

# check BUILD_DIR: 0 when every consumer knows lab-test; prints what is missing.
check() {
	local b=$1 miss=0
	"$b/zs" help replay > "$tmp/help" 2>&1
	grep -q 'lab-test' "$tmp/help" || { echo "zs help replay: no lab-test"; miss=1; }
	if "$b/zs" classes --chain-policy lab-test > "$tmp/classes" 2>&1; then
		# one page per zspage: no class may span two pages
		grep -q 'spanning slots summed 0$' "$tmp/classes" ||
			{ echo "zs classes --chain-policy lab-test: not one page per zspage"; miss=1; }
	else
		echo "zs classes --chain-policy lab-test: $(tail -1 "$tmp/classes")"; miss=1
	fi
	"$b/zs" replay --sweep --json --chain 4 --delta 16 --backend zsmalloc "$trace" \
		> "$tmp/sweep" 2> "$tmp/sweep.err"
	grep -q '"chain_policy": *"lab-test"' "$tmp/sweep" ||
		{ echo "zs replay --sweep: no lab-test row"; miss=1; }
	LIBZS_LIBRARY=$b/libzs.so PYTHONPATH=$src/python python3 - > "$tmp/py" 2>&1 <<'EOF' ||
import libzs
from libzs import _lib as L
assert libzs.CHAIN_POLICIES.get("lab-test") == L.const("ZS_CHAIN_LABTEST"), libzs.CHAIN_POLICIES
with libzs.Pool(chain_policy="lab-test") as p:
    h = p.malloc(100)
    p.free(h)
EOF
		{ echo "python: $(tail -1 "$tmp/py")"; miss=1; }
	return $miss
}

if out=$(check "$tmp/build"); then
	ok "lab-test reaches zs help, --chain-policy parsing, --sweep, zs_const and Python"
else
	bad "lab-test missing from a consumer" "$out"
fi
if "$tmp/build/zs" replay "$trace" > "$tmp/replay" 2>&1 && grep -q 'mismatches 0' "$tmp/replay"; then
	ok "the kernel's policy still replays $trace: $(head -1 "$tmp/replay")"
else
	bad "kernel parity with the extra policy" "$(cat "$tmp/replay")"
fi
# Control: without the registry line every check must fail.
out=$(check "$build")
n=$(printf '%s\n' "$out" | grep -c .)
if [ "$n" -ge 4 ]; then
	ok "control: all $n checks fail on the unchanged build ($build)"
else
	bad "control: only $n checks failed without lab-test (a check passes vacuously)" "$out"
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
