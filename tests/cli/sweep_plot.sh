#!/usr/bin/env bash
# Owner: `zs replay --sweep --plot FILE` (tools/replay/replay_sweep.c): the picture
# holds exactly the sweep's configurations, its Pareto marks are the ones
# --json marks, the kernel's configuration is ringed once, and the front is
# drawn left to right through the Pareto points only.  Misuse is refused:
# --plot without --sweep, a file that cannot be written.
# Usage: bash tests/cli/sweep_plot.sh BUILD_DIR
set -u
build=${1:?usage: tests/cli/sweep_plot.sh BUILD_DIR}
zs=$build/zs
here=$(cd "$(dirname "$0")/.." && pwd)
trace=$here/data/mix-text-lz4.trace.xz
[ -x "$zs" ] || { echo "sweep_plot: $zs not built"; echo "0 passed, 1 failed"; exit 1; }
command -v python3 > /dev/null || { echo "SKIP sweep_plot: no python3"; exit 77; }
tmp=$(mktemp -d /tmp/zs-sweep-plot.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; shift; printf '%s\n' "$@" | head -20 | sed 's/^/    /'; }

if "$zs" replay --sweep --plot "$tmp/s.svg" "$trace" > "$tmp/table" 2> "$tmp/err" &&
   "$zs" replay --sweep --json "$trace" > "$tmp/rows.json" 2> /dev/null; then
	if python3 - "$tmp/s.svg" "$tmp/rows.json" > "$tmp/check" 2>&1 <<'PY'
import json, sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
rows = json.load(open(sys.argv[2]))
groups = [g for g in root.iter(ns + "g") if "point" in g.get("class", "").split()]
classes = [g.get("class").split() for g in groups]
npareto = sum("pareto" in c for c in classes)
nkernel = sum("kernel" in c for c in classes)
want_pareto = sum(1 for r in rows if r["pareto"])
want_kernel = sum(1 for r in rows if r["kernel_config"])
errs = []
if len(groups) != len(rows):
    errs.append("%d marks, %d configurations" % (len(groups), len(rows)))
if npareto != want_pareto:
    errs.append("%d Pareto marks, --json marks %d" % (npareto, want_pareto))
if nkernel != 1 or want_kernel != 1:
    errs.append("kernel marks %d (json %d), want 1" % (nkernel, want_kernel))
titles = sorted(g.find(ns + "title").text.split(":")[0] for g in groups if "pareto" in g.get("class"))
front = [r for r in rows if r["pareto"]]
names = sorted("zblock" if r["backend"] == "zblock" else
               "chain %d %s delta %d" % (r["chain"], r["chain_policy"], r["delta"]) for r in front)
if titles != names:
    errs.append("Pareto marks %s, --json %s" % (titles, names))
line = [p for p in root.iter(ns + "polyline") if p.get("class") == "front"]
pts = [tuple(map(float, p.split(","))) for p in line[0].get("points").split()] if line else []
if len(pts) != want_pareto:
    errs.append("front has %d points, want %d" % (len(pts), want_pareto))
if any(b[0] < a[0] for a, b in zip(pts, pts[1:])):
    errs.append("front not drawn left to right: %s" % pts)
print("\n".join(errs) if errs else "%d marks, %d on the front" % (len(groups), npareto))
sys.exit(1 if errs else 0)
PY
	then ok "plot: $(cat "$tmp/check")"
	else bad "plot" "$(cat "$tmp/check")"
	fi
else
	bad "sweep --plot exit" "$(cat "$tmp/err")"
fi

"$zs" replay --plot "$tmp/x.svg" "$trace" > /dev/null 2> "$tmp/err"
rc=$?
if [ "$rc" = 2 ] && grep -q -- "--plot draws a sweep" "$tmp/err" && [ ! -e "$tmp/x.svg" ]; then
	ok "--plot without --sweep refused"
else
	bad "--plot without --sweep: exit $rc" "$(cat "$tmp/err")"
fi
"$zs" replay --sweep --chain 8 --chain-policy exhaustive --delta 16 --backend zsmalloc \
	--plot "$tmp/no/such/dir/x.svg" "$trace" > /dev/null 2> "$tmp/err"
rc=$?
if [ "$rc" = 2 ] && grep -q -- "--plot $tmp/no/such/dir/x.svg: No such file" "$tmp/err"; then
	ok "unwritable plot file: exit 2 with the reason"
else
	bad "unwritable plot file: exit $rc" "$(cat "$tmp/err")"
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
