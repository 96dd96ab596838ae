#!/usr/bin/env bash
# Owner: trace replay.  The zswap-trace half of
# `zs replay` (docs/trace-format.md, "The zswap-trace format"): every
# tests/data/zswap-*.trace replays through libzs's zswap (zs/zswap.h) with 0
# mismatches, also with deferred free and another free mode; a wrong '='
# value is a mismatch (exit 1); malformed zswap-traces are refused (exit 2);
# --backend zblock and --sweep work on them.
#
# Until recorded kernel zswap-traces exist, the traces here are synthetic:
# the generator below writes them, its '=' states computed from a plain
# libzs zs_pool driven with zswap's rules (store: new object, then the stale
# one freed; a zero page only marked; loads exclusive), independently of the
# zswap front end under test.  With python3 and BUILD_DIR/libzs.so the test
# regenerates them and checks the committed files are exactly that output;
# ZS_REGEN=1 rewrites them instead (after a change to zsmalloc's placement).
# Usage: bash tests/cli/replay_zswap.sh BUILD_DIR   (from the repository root)
set -u
build=${1:?usage: tests/cli/replay_zswap.sh BUILD_DIR}
zs=$build/zs
here=$(cd "$(dirname "$0")/.." && pwd)
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
if [ ! -x "$zs" ]; then
	echo "replay_zswap: $zs not built"
	echo "0 passed, 1 failed"
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
shopt -s nullglob
traces=("$here"/data/zswap-*.trace "$here"/data/zswap-*.trace.xz)
if [ ${#traces[@]} -lt 2 ]; then
	echo "replay_zswap: expected the zswap-*.trace files in tests/data, found ${#traces[@]}"
	echo "0 passed, 1 failed"
	exit 1
fi
out=$("$zs" replay "${traces[0]}" 2>&1)
if [[ $out == *"zs_zswap_create"*"not implemented"* ]]; then
	echo "SKIP replay_zswap: this libzs's zswap is a placeholder: $out"
	exit 77
fi

# The generator (see the top).  Its modes: ops (a state after every
# operation) and fill (stores only, one state at the end).
cat > "$tmp/gen.py" <<'EOF'
import ctypes, sys
so, mode, seed, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
lib = ctypes.CDLL(so)
P, U, S = ctypes.c_void_p, ctypes.c_ulong, ctypes.c_size_t
for name, res, args in (("zs_pool_create", ctypes.c_int, [P, ctypes.POINTER(P), P, S]),
                        ("zs_malloc", U, [P, S]),
                        ("zs_free", ctypes.c_int, [P, U]), ("zs_get_total_pages", U, [P]),
                        ("zs_compact", U, [P]), ("zs_destroy_pool", None, [P])):
    getattr(lib, name).restype = res
    getattr(lib, name).argtypes = args
PS, M64 = 4096, (1 << 64) - 1
st = [seed]
def below(n):  # splitmix64
    st[0] = (st[0] + 0x9E3779B97F4A7C15) & M64
    z = st[0]
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return (z ^ (z >> 31)) % n
pool = P()                               # the kernel's: chain 8, exhaustive, delta 16
assert lib.zs_pool_create(None, ctypes.byref(pool), None, 0) == 0
pool = pool.value
entries, zero, cnt = {}, set(), {"out": 0, "in": 0}
lines = ["# zswap-trace 1", "# page_size 4096", "# comp lzo", "# kernel synthetic",
         "# chain_size 8", "# mode " + mode,
         "# data synthetic sizes, tests/cli/replay_zswap.sh generator, seed %d" % seed]
def state():
    raw = sum(1 for h, r in entries.values() if r)
    return "= %d %d %d %d %d" % (lib.zs_get_total_pages(pool), len(entries), raw,
                                 cnt["out"], cnt["in"])
def drop(off):
    if off in entries:
        lib.zs_free(pool, entries.pop(off)[0])
    zero.discard(off)
def store(off):
    r = below(100)
    size, flag = ((0, "z") if r < 10 else (PS, "h") if r < 18 else
                  (2800 + below(PS - 2800), "n") if r < 30 else
                  (900 + below(1800), "n") if r < 70 else (40 + below(860), "n"))
    lines.append("s %d %d %s" % (off, size, flag))
    if flag == "z":
        drop(off)
        zero.add(off)
    else:
        h = lib.zs_malloc(pool, size)
        assert h < (1 << 63), "zs_malloc failed"
        drop(off)
        entries[off] = (h, flag == "h")
        cnt["out"] += 1
    if mode == "ops":
        lines.append(state())
def offset():  # a dense swap area, and clusters far away
    return below(700) if below(4) else (1 << 32) + below(64) * 512 + below(8)
def held():
    keys = sorted(entries.keys() | zero)
    return keys[below(len(keys))] if keys else None
def compact():
    lines.append("c")
    lib.zs_compact(pool)
    lines.append(state())
if mode == "fill":
    for i in range(600):
        store(offset())
    lines.append(state())
else:
    for i in range(500):
        store(i)
    for i in range(2500):
        r = below(100)
        off = held() if 2 <= r < 55 else None
        if r < 2:
            compact()
        elif off is None:
            store(offset())
        else:
            op = "l" if r < 32 else "i"
            lines.append("%s %d" % (op, off))
            cnt["in"] += op == "l" and off in entries
            drop(off)
            lines.append(state())
    compact()
    for off in sorted(entries.keys() | zero):
        lines.append("i %d" % off)
        drop(off)
        lines.append(state())
lib.zs_destroy_pool(pool)
open(out, "w").write("\n".join(lines) + "\n")
EOF
gens=("zswap-small.trace ops 1" "zswap-fill.trace fill 2")
if [ -e "$build/libzs.so" ] && nm -D "$build/libzs.so" 2>/dev/null | grep -q " U __asan_init"; then
	# a sanitizer build's libzs.so needs its runtime loaded first: Python's
	# dlopen cannot load it (the plain builds check the committed traces)
	echo "note: $build/libzs.so is built with ASan: the committed traces are not regenerated here"
elif command -v python3 > /dev/null && [ -e "$build/libzs.so" ]; then
	for g in "${gens[@]}"; do
		set -- $g
		if ! python3 "$tmp/gen.py" "$build/libzs.so" "$2" "$3" "$tmp/$1"; then
			bad "generator $g failed"
		elif [ "${ZS_REGEN:-0}" = 1 ]; then
			cp "$tmp/$1" "$here/data/$1" && ok "regenerated tests/data/$1"
		elif cmp -s "$tmp/$1" "$here/data/$1"; then
			ok "tests/data/$1 is the generator's output (states from a plain zs_pool)"
		else
			bad "tests/data/$1 differs from the generator's output (ZS_REGEN=1 rewrites it):"
			diff "$here/data/$1" "$tmp/$1" | head -5 | sed 's/^/    /'
		fi
	done
else
	echo "note: no python3 or $build/libzs.so: the committed traces are not regenerated"
fi

# Parity: 0 mismatches in every mode.
for t in "${traces[@]}"; do
	for mode in "" "--deferred" "--free-mode class" "--checked"; do
		# shellcheck disable=SC2086
		out=$("$zs" replay "$t" $mode 2>&1)
		rc=$?
		first=$(printf '%s\n' "$out" | head -1)
		if [ $rc -eq 0 ] && [[ $first == *" mismatches 0" ]]; then
			ok "$(basename "$t") ${mode:-(zsmalloc)}: $first"
		else
			bad "$(basename "$t") ${mode:-(zsmalloc)} (exit $rc):"
			printf '%s\n' "$out" | head -30 | sed 's/^/    /'
		fi
	done
done

# A wrong '=' value is a mismatch, reported with its context, exit 1.
small=$here/data/zswap-small.trace
for field in 2 6; do
	awk -v f="$field" '/^=/ { if (++n == 50) $f = $f + 1 } { print }' "$small" > "$tmp/corrupt"
	out=$("$zs" replay "$tmp/corrupt" 2>&1)
	rc=$?
	if [ $rc -eq 1 ] && printf '%s\n' "$out" | grep -q "^mismatch at record 50:" &&
		printf '%s\n' "$out" | grep -q "preceding operations" &&
		[[ $(printf '%s\n' "$out" | head -1) == *" mismatches 1" ]]; then
		ok "corrupted '=' field $((field - 1)) at record 50: exit 1, $(printf '%s\n' "$out" | grep '<--' | sed 's/  */ /g')"
	else
		bad "corrupted '=' field $((field - 1)): exit $rc, want 1 with a mismatch report"
		printf '%s\n' "$out" | head -20 | sed 's/^/    /'
	fi
done

# Malformed zswap-traces: exit 2 with a message, never a crash.
h='# zswap-trace 1\n# page_size 4096\n'
printf "$h"'= 1 0 0 0 0\n' > "$tmp/orphan"
printf "$h"'s 1 4096 n\n= 1 1 0 1 0\n' > "$tmp/n-page-size"
printf "$h"'s 1 100 h\n= 1 1 1 1 0\n' > "$tmp/h-size"
printf "$h"'s 1 100 z\n= 0 0 0 0 0\n' > "$tmp/z-size"
printf "$h"'s 1 100 x\n= 1 1 0 1 0\n' > "$tmp/flag"
printf "$h"'s 1099511627776 100 n\n= 1 1 0 1 0\n' > "$tmp/offset"
printf "$h"'w 1 100 n\n= 1 0 1 100 0 0\n' > "$tmp/zram-record"
printf "$h"'s 1 100 n\n= 1 1 0 1 0 0\n' > "$tmp/six-fields"
printf "$h"'l\n= 0 0 0 0 0\n' > "$tmp/load-no-offset"
printf '# zswap-trace 1\n# mode sometimes\ns 1 100 n\n= 1 1 0 1 0\n' > "$tmp/mode"
printf '# zswap-trace 1\n# max_pool_percent 101\ns 1 100 n\n= 1 1 0 1 0\n' > "$tmp/percent"
printf '# zswap-trace 1\n# zram-trace 1\ns 1 100 n\n= 1 1 0 1 0\n' > "$tmp/two-formats"
printf '# zswap-trace 2\ns 1 100 n\n= 1 1 0 1 0\n' > "$tmp/version"
for f in orphan n-page-size h-size z-size flag offset zram-record six-fields load-no-offset mode \
	percent two-formats version; do
	"$zs" replay "$tmp/$f" > "$tmp/out.txt" 2>&1
	rc=$?
	if [ $rc -eq 2 ] && [ -s "$tmp/out.txt" ]; then
		ok "bad zswap-trace $f: $(tail -1 "$tmp/out.txt")"
	else
		bad "bad zswap-trace $f: exit $rc (want 2)"
		head -5 "$tmp/out.txt" | sed 's/^/    /'
	fi
done
"$zs" replay "$small" --store > "$tmp/out.txt" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q "zswap-trace: --store" "$tmp/out.txt"; then
	ok "--store on a zswap-trace is refused"
else
	bad "--store on a zswap-trace: exit $rc, want 2"
fi

# zblock: an experiment (exit 0), its pool pages set against the kernel's.
for t in "${traces[@]}"; do
	out=$("$zs" replay "$t" --backend zblock 2>&1)
	rc=$?
	if [ $rc -eq 0 ] && [[ $out == *"not the kernel's policy: backend zblock"* ]] &&
		printf '%s\n' "$out" | grep -q "^  zblock/kernel "; then
		ok "$(basename "$t") --backend zblock: $(printf '%s\n' "$out" | grep "^  zblock/kernel" | sed 's/  */ /g')"
	else
		bad "$(basename "$t") --backend zblock: exit $rc"
		printf '%s\n' "$out" | head -10 | sed 's/^/    /'
	fi
done

# The sweep: every configuration (on the fill trace only chain 8's, for CI
# time), the kernel's row exact; JSON one row each.
for t in "${traces[@]}"; do
	narrow=() n=97
	[[ $t == *fill* ]] && narrow=(--chain 8) n=7
	out=$("$zs" replay "$t" --sweep "${narrow[@]}" 2>&1)
	rc=$?
	krow=$(printf '%s\n' "$out" | grep -E '^  K[ *] ')
	if [ $rc -eq 0 ] && [[ $out == *"sweep of $n configurations"* ]] &&
		[[ $krow == *" 1.0000 |"* ]] && printf '%s\n' "$out" | grep -qE '^  .\* '; then
		ok "$(basename "$t") --sweep ${narrow[*]}: $n configurations, kernel row:$(printf '%s' "$krow" | sed 's/  */ /g')"
	else
		bad "$(basename "$t") --sweep ${narrow[*]}: exit $rc"
		printf '%s\n' "$out" | head -12 | sed 's/^/    /'
	fi
done
if command -v python3 > /dev/null; then
	"$zs" replay "$small" --sweep --json > "$tmp/sweep.json" 2> "$tmp/sweep.err"
	rc=$?
	if [ $rc -eq 0 ] && python3 - "$tmp/sweep.json" <<'EOF'
import json, sys
rows = json.load(open(sys.argv[1]))
assert len(rows) == 97, len(rows)
k = [r for r in rows if r["kernel_config"]]
assert len(k) == 1 and k[0]["differing_records"] == 0, k
assert k[0]["chain"] == 8 and k[0]["delta"] == 16 and k[0]["chain_policy"] == "exhaustive"
assert sum(r["backend"] == "zblock" for r in rows) == 1
assert any(r["pareto"] for r in rows)
for r in rows:  # no Pareto row is beaten on both axes
    if r["pareto"]:
        assert not any(o["pages_mean"] < r["pages_mean"] and o["spanning_mean"] < r["spanning_mean"] for o in rows)
EOF
	then
		ok "zswap-small --sweep --json: 97 rows, one kernel row with 0 differences, Pareto rows undominated"
	else
		bad "zswap-small --sweep --json (exit $rc)"
		head -c 600 "$tmp/sweep.json" | sed 's/^/    /'
	fi
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
