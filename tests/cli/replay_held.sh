#!/usr/bin/env bash
# Owner: `zs replay --deferred-held N` (tools/replay/replay_held.c), the model check
# of deferred free while frees are queued.  On every committed zram trace:
# with up to 64 and 4096 frees held, the pool equals its synchronous model at
# every record (and frees really were queued at most of them), also in the
# page-deferred free mode; with 1 held
# (each free drained at once) the replay is the kernel's, 0 records differ.
# Refused where it cannot hold: zswap-traces, --store, --sweep, percpu-deferred.
# Usage: bash tests/cli/replay_held.sh BUILD_DIR
set -u
build=${1:?usage: tests/cli/replay_held.sh BUILD_DIR}
zs=$build/zs
data=$(cd "$(dirname "$0")/.." && pwd)/data
[ -x "$zs" ] || { echo "replay_held: $zs not built"; echo "0 passed, 1 failed"; exit 1; }
command -v python3 > /dev/null || { echo "SKIP replay_held: no python3"; exit 77; }
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; shift; printf '%s\n' "$@" | head -20 | sed 's/^/    /'; }

for t in "$data"/*.trace.xz; do
	case $(basename "$t") in zswap-*) continue ;; esac
	for run in 1 64 4096 "64 --free-mode page-deferred"; do
		n=${run%% *}
		out=$("$zs" replay "$t" --deferred-held $run --json 2>&1)
		rc=$?
		verdict=$(printf '%s' "$out" | python3 -c '
import json, sys
n = int(sys.argv[1])
d = json.load(sys.stdin)
h = d["deferred_held"]
errs = []
if h["model_differences"]:
    errs.append("%d records differ from the model" % h["model_differences"])
if h["records_checked"] != d["records"]:
    errs.append("model checked %d of %d records" % (h["records_checked"], d["records"]))
if n == 1 and (d["mismatches"] or h["records_with_frees_queued"]):
    errs.append("one held: %d kernel mismatches, %d records queued" % (d["mismatches"], h["records_with_frees_queued"]))
if n > 1 and h["records_with_frees_queued"] * 4 < d["records"]:
    errs.append("frees queued at only %d of %d records" % (h["records_with_frees_queued"], d["records"]))
print("; ".join(errs) if errs else "%d records, %d with frees queued, %d drains, 0 model differences, %d differ from the kernel" % (d["records"], h["records_with_frees_queued"], h["drains"], d["mismatches"]))
sys.exit(1 if errs else 0)' $n 2>&1)
		vrc=$?
		if [ "$rc" = 0 ] && [ "$vrc" = 0 ]; then
			ok "$(basename "$t") held $run: $verdict"
		else
			bad "$(basename "$t") held $run: exit $rc" "$verdict"
		fi
	done
done

refuse() {
	local what=$1; shift
	"$zs" replay "$@" > /dev/null 2> "$tmpf"
	local rc=$?
	if [ "$rc" = 2 ] && grep -q -- "--deferred-held" "$tmpf"; then
		ok "refused: $what"
	else
		bad "not refused: $what (exit $rc)" "$(cat "$tmpf")"
	fi
}
tmpf=$(mktemp /tmp/zs-replay-held.XXXXXX)
trap 'rm -f "$tmpf"' EXIT
refuse "zswap-trace" "$data/zswap-usrlib-lzo.trace.xz" --deferred-held 64
refuse "--store" "$data/text-lzorle.trace.xz" --deferred-held 64 --store
refuse "--sweep" "$data/text-lzorle.trace.xz" --deferred-held 64 --sweep
refuse "percpu-deferred" "$data/text-lzorle.trace.xz" --deferred-held 64 --free-mode percpu-deferred
refuse "0 held" "$data/text-lzorle.trace.xz" --deferred-held 0
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
