#!/usr/bin/env bash
# Owner: `zs zswap` (tools/cmd_zswap.c) and the capture format of
# scripts/zswap_capture.sh.  Pages mode on a small input: every row's fill,
# churn, compaction and drain add up (stored + zero = pages, ops = the plan,
# nothing left after the drain, 0 mismatches).  --sizes on the committed
# kernel-build capture (tests/data/zswap-build-sizes.txt.xz, docs/zswap.md):
# libzs's zsmalloc holds exactly the kernel's pool pages after the kernel's
# own compaction (fresh fill, and after the sampled churn plus compaction),
# stored and incompressible counts equal the kernel's, and the churn ends with
# the captured entries.  Bad input: one message, exit 2.  As root with zswap,
# --vs-kernel on a small input (about 2 s) must leave every kernel setting as it
# found it, at its end and when SIGINT or SIGTERM stops it mid-run.  With
# ZS_ZSWAP_CAPTURE_TEST=1 (root, zswap, cgroup v1) a 20-second capture of a
# small workload runs too and must be exact (it changes kernel settings for its
# duration, so it is off by default).
# Usage: bash tests/cli/test_zswap_cli.sh BUILD_DIR   (from the repository root)
set -euo pipefail
build=${1:?usage: tests/cli/test_zswap_cli.sh BUILD_DIR}
zs=$build/zs
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
command -v python3 >/dev/null || { echo "skip: no python3"; exit 77; }

ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }

# check NAME JSON PYTHON-EXPR...: each expression (over j = the document, r = rows by backend)
# must be true.
check() {
	local name=$1 json=$2
	shift 2
	if python3 - "$json" "$@" >"$tmp/py" 2>&1 <<'EOF'; then ok "$name"; else bad "$name"; sed 's/^/    /' "$tmp/py"; fi
import json, sys
j = json.load(open(sys.argv[1]))
r = {row["backend"]: row for row in j["rows"]}
bad = 0
for e in sys.argv[2:]:
    try:
        v = eval(e)
    except Exception as x:
        v = False
        print("error in", e, ":", x)
    if not v:
        bad += 1
        print("false:", e)
sys.exit(1 if bad else 0)
EOF
}

expect_fail() {
	local pat=$1
	shift
	local rc=0
	timeout 60 "$zs" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
	if [ "$rc" -eq 2 ] && grep -qE -- "$pat" "$tmp/err"; then
		ok "zs $* -> 2"
	else
		bad "zs $* -> $rc (want 2 and '$pat')"
		head -3 "$tmp/err" | sed 's/^/    /'
	fi
}

# ---- Pages mode ----
"$zs" zswap --json --max 1M --ops 2000 --seed 7 src include >"$tmp/pages.json"
check "pages: fill, churn, compaction and drain add up" "$tmp/pages.json" \
	'sorted(r) == ["zblock", "zsmalloc"]' \
	'all(x["stored_pages"] + x["swpout_zero"] == j["pages"] for x in r.values())' \
	'all(x["churn"]["stores"] + x["churn"]["loads"] + x["churn"]["invalidates"] == j["churn_ops"] == 2000 for x in r.values())' \
	'all(x["churn"]["zswpout"] == x["zswpout"] + x["churn"]["stores"] - x["churn"]["rejected"] - (x["churn"]["swpout_zero"] - x["swpout_zero"]) for x in r.values())' \
	'all(x["mismatches"] == 0 for x in r.values())' \
	'all(x["drain"]["stored_pages"] == 0 and x["drain"]["pool_total_size"] == 0 for x in r.values())' \
	'r["zsmalloc"]["compacted"]["pool_total_size"] <= r["zsmalloc"]["churn"]["pool_total_size"]' \
	'all(x["pool_total_size"] == 4096 * x["pool_pages"] == 1024 * x["Zswap_kB"] for x in r.values())' \
	'r["zsmalloc"]["stored_pages"] == r["zblock"]["stored_pages"]' \
	'all(len(x["series"]) == 50 for x in r.values())'
# The same seed gives the same pool; another seed another churn.
"$zs" zswap --json --max 1M --ops 2000 --seed 7 --backends zsmalloc src include >"$tmp/again.json"
check "pages: a seed replays" "$tmp/again.json" \
	"r['zsmalloc']['churn']['pool_total_size'] == $(python3 -c "import json; print([x for x in json.load(open('$tmp/pages.json'))['rows'] if x['backend'] == 'zsmalloc'][0]['churn']['pool_total_size'])")"

# Pool limit and writeback: a 1% limit of 32M (81 pages) bites, the shrinker writes back to a file,
# and every page still comes back intact (from the pool or the file).
: >"$tmp/swap.bin"
"$zs" zswap --json --max 2M --ops 2000 --max-pool-percent 1 --total-ram 32M \
	--backing "$tmp/swap.bin" --shrinker src include >"$tmp/wb.json"
check "pages: pool limit and writeback, nothing lost" "$tmp/wb.json" \
	'all(x["churn"]["pool_limit_hit"] > 0 for x in r.values())' \
	'all(x["churn"]["written_back_pages"] > 0 for x in r.values())' \
	'all(x["churn"]["disk_loads"] > 0 for x in r.values())' \
	'all(x["mismatches"] == 0 for x in r.values())' \
	'all(x["churn"]["pool_pages"] <= 8192 // 100 + 64 for x in r.values())'
expect_fail "--shrinker needs --backing" zswap --shrinker src

# ---- --sizes on the committed kernel-build captures ----
# zswap-build-sizes: frozen at 21,227 stored pages (36 s, every entry read: exact);
# zswap-build-300s-sizes: frozen at 300 s (800k stores; 1 entry on no pte: bounded).
for data in tests/data/zswap-build-sizes.txt.xz tests/data/zswap-build-300s-sizes.txt.xz; do
	name=$(basename "$data" .txt.xz)
	if [ ! -f "$data" ]; then
		bad "missing $data"
		continue
	fi
	"$zs" zswap --json --sizes "$data" >"$tmp/sizes.json"
	hdr() { xz -dc "$data" | awk -v s="$1" -v k="$2" '$2 == s && $3 == k { print $4 }'; }
	kc=$(hdr compacted pool_total_size)
	kst=$(hdr freeze stored_pages)
	kinc=$(hdr freeze stored_incompressible_pages)
	res=$(hdr after_read stored_pages)
	n=$(xz -dc "$data" | grep -vc '^#')
	n4k=$(xz -dc "$data" | grep -cx '4096')
	check "$name: libzs zsmalloc = the kernel's pool ($kc bytes; $res entries unread), counts = the kernel's" \
		"$tmp/sizes.json" \
		"j['pages'] == $n == $kst - $res" \
		"r['kernel']['compacted']['measured'] and r['kernel']['compacted']['pool_total_size'] == $kc" \
		"r['kernel']['residual_entries'] == $res" \
		"r['zsmalloc']['pool_total_size'] <= $kc <= r['zsmalloc']['pool_total_size'] + r['kernel']['residual_pool_total_size']" \
		"$res > 0 or r['zsmalloc']['pool_total_size'] == $kc" \
		"r['zsmalloc']['compacted']['pool_total_size'] <= $kc + r['kernel']['residual_pool_total_size']" \
		"all(r[b]['stored_pages'] == $n and r[b]['stored_incompressible_pages'] == $n4k for b in ('zsmalloc', 'zblock'))" \
		"r['kernel']['stored_pages'] == $kst and r['kernel']['stored_incompressible_pages'] == $kinc" \
		"j['sampled_churn'] and j['churn_survivors'] == $kst and j['churn_captured_live'] == $n" \
		"all(r[b]['churn']['stored_pages'] == $kst for b in ('zsmalloc', 'zblock'))" \
		"all(r[b]['churn']['zswpout'] == r['kernel']['zswpout'] and r[b]['churn']['zswpin'] == r['kernel']['zswpin'] for b in ('zsmalloc', 'zblock'))" \
		"r['zsmalloc']['churn']['pool_total_size'] >= r['zsmalloc']['compacted']['pool_total_size']" \
		"r['zblock']['pool_total_size'] > 0 and len(r['kernel']['series']) >= 2" \
		"all(len(r[b]['series']) >= 2 for b in ('zsmalloc', 'zblock'))"
	if [ "$res" = 0 ]; then
		"$zs" zswap --sizes "$data" --backends zsmalloc >"$tmp/sizes.txt" 2>/dev/null
		if grep -q "fresh fill (kernel: its pool after its own compaction)" "$tmp/sizes.txt" &&
			grep -qE "^  pool_total_size +$kc +$kc\$" "$tmp/sizes.txt"; then
			ok "$name: the text table shows the kernel's and libzs's pool side by side"
		else
			bad "$name: text table"
			head -20 "$tmp/sizes.txt" | sed 's/^/    /'
		fi
	fi
done
data=tests/data/zswap-build-sizes.txt.xz

# ---- Refusals ----
expect_fail "unknown backend 'zbud'" zswap --backends zsmalloc,zbud src
expect_fail "takes no FILE" zswap --sizes "$data" src
expect_fail "not a capture" zswap --sizes tests/data/zswap-small.trace
expect_fail "No such file" zswap --sizes /nonexistent/capture
expect_fail "no FILE or DIR" zswap
expect_fail "--max-pool-percent: '101'" zswap --max-pool-percent 101 src
expect_fail "--max-pool-percent: 'x' is not a whole number in 0..100" zswap --max-pool-percent x src
expect_fail "--total-ram: '0' is not a size" zswap --total-ram 0 src
expect_fail "--ops: 'x' is not a whole number" zswap --ops x src
expect_fail "--seed: '-1' is not a whole number" zswap --seed -1 src
expect_fail "--max: '0' is not a size" zswap --max 0 src
expect_fail "--backends: empty" zswap --backends "" src
expect_fail "compressor 'bogus'" zswap --comp bogus src
expect_fail "--class-shards: '65' is not a whole number in 0..64" zswap --class-shards 65 src
expect_fail "--page-size does not apply" zswap --page-size 16K src
expect_fail "unrecognized option '--bogus'" zswap --bogus src
expect_fail "FILE /nonexistent: No such file" zswap /nonexistent
# A bad --backing is refused before any output (it used to print the header and run
# every backend, each failing with its own message).
: >"$tmp/ro.swap"
chmod 444 "$tmp/ro.swap"
for b in /nonexistent/swap /tmp /dev/zero "$tmp/ro.swap"; do
	expect_fail "--backing $b: (No such file|not a regular file or a block device|read-only)" \
		zswap --backing "$b" src
	if [ -s "$tmp/out" ]; then bad "zswap --backing $b: output before the refusal"; else ok "zswap --backing $b: no output"; fi
done
expect_fail "--comp must be lzo" zswap --comp zstd --sizes "$data"
expect_fail "needs pages" zswap --vs-kernel --sizes "$data"

# ---- --vs-kernel puts every setting back (docs/zswap.md §2), also on Ctrl-C and TERM ----
# Root and a zswap kernel only.  Each snapshot is taken holding the project's zswap lock,
# which every user of the kernel's zswap takes (the tool too), so no run is half-way then.
vs_snapshot() {
	for f in /sys/module/zswap/parameters/*; do echo "$f=$(cat "$f")"; done
	echo "vm.page-cluster=$(cat /proc/sys/vm/page-cluster)"
	echo "swaps:"; tail -n +2 /proc/swaps
	echo "debugfs mounts: $(grep -c ' /sys/kernel/debug debugfs ' /proc/mounts || true)"
	echo "swap files left: $(ls /var/tmp/libzs-zs-zswap.*.swap 2>/dev/null || true)"
}
locked_snapshot() { ( flock -w 600 9 || exit 1; vs_snapshot ) 9>/run/libzs-kernel-zswap.lock; }
# A failed case must not leave the machine changed: put the snapshot's values back.
vs_restore() {
	local f
	for f in /var/tmp/libzs-zs-zswap.*.swap; do
		[ -e "$f" ] && { swapoff "$f" 2>/dev/null || true; rm -f "$f"; }
	done
	grep '^/sys/module/zswap/parameters/[a-z_]*=' <<<"$1" | grep -v '/enabled=' |
		while IFS== read -r f v; do echo "$v" > "$f" 2>/dev/null || true; done
	grep '^/sys/module/zswap/parameters/enabled=' <<<"$1" |
		while IFS== read -r f v; do echo "$v" > "$f" 2>/dev/null || true; done
	sed -n 's/^vm.page-cluster=//p' <<<"$1" > /proc/sys/vm/page-cluster 2>/dev/null || true
}
vs_libs=/usr/lib/x86_64-linux-gnu
[ -d "$vs_libs" ] || vs_libs=/usr/lib
if [ "$(id -u)" != 0 ] || [ ! -w /sys/module/zswap/parameters/enabled ]; then
	echo "skip --vs-kernel restore: needs root and zswap"
elif ls /run/libzs-*.state >/dev/null 2>&1; then
	echo "skip --vs-kernel restore: a killed run left its state in /run"
elif ! env --default-signal=INT true 2>/dev/null; then
	echo "skip --vs-kernel restore: env has no --default-signal"
elif ! before=$(locked_snapshot); then
	echo "skip --vs-kernel restore: the zswap lock stayed busy"
else
	for how in end INT TERM; do
		rc=0 note=""
		if [ "$how" = end ]; then
			"$zs" zswap --vs-kernel --max 1M --backends zsmalloc --quiet /usr/bin \
				>"$tmp/vs.out" 2>&1 || rc=$?
			want=0
		else
			# A background job of a script ignores SIGINT: give it the default back.
			env --default-signal=INT "$zs" zswap --vs-kernel --max 32M --backends zsmalloc \
				--quiet "$vs_libs" >"$tmp/vs.out" 2>&1 &
			pid=$!
			# Mid-run: once its swap file is on (polled; it may first wait for the lock).
			for ((i = 0; i < 60000; i++)); do
				grep -q "libzs-zs-zswap\.$pid\." /proc/swaps && break
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.01
			done
			if kill -"$how" "$pid" 2>/dev/null; then
				want=$((128 + $(kill -l "$how")))
			else
				want=0 note=" (it ended before the signal)"
			fi
			wait "$pid" || rc=$?
		fi
		now=$(locked_snapshot || true)
		if [ "$rc" -eq "$want" ] && [ "$now" = "$before" ]; then
			ok "zs zswap --vs-kernel, $how: exit $rc, every setting as before$note"
		else
			bad "zs zswap --vs-kernel, $how: exit $rc (want $want), settings:"
			diff <(echo "$before") <(echo "$now") | sed 's/^/    /' || true
			tail -3 "$tmp/vs.out" | sed 's/^/    /'
			vs_restore "$before"
		fi
	done
fi

# ---- Optional: a real capture (root; changes kernel settings while it runs) ----
if [ "${ZS_ZSWAP_CAPTURE_TEST:-0}" = 1 ]; then
	cat >"$tmp/fill.py" <<'EOF'
import os, time
keep, total = [], 0
for root, _, files in os.walk('/usr/lib'):
    for f in files:
        p = os.path.join(root, f)
        if os.path.islink(p):
            continue
        try:
            keep.append(bytearray(open(p, 'rb').read())); total += len(keep[-1][:0]) + os.path.getsize(p)
        except OSError:
            pass
        if total > 96 << 20:
            break
    if total > 96 << 20:
        break
keep.append(bytearray(4 << 20))
time.sleep(300)
EOF
	if bash scripts/zswap_capture.sh -o "$tmp/cap" --limit 32M --freeze-after 20 \
		-- python3 "$tmp/fill.py" 2>"$tmp/caperr"; then
		"$zs" zswap --json --sizes "$tmp/cap" --backends zsmalloc >"$tmp/cap.json"
		kc=$(awk '$2 == "compacted" && $3 == "pool_total_size" { print $4 }' "$tmp/cap")
		check "capture: exact (stored_pages fell by the pages read; zsmalloc = kernel pool)" \
			"$tmp/cap.json" "j['pages'] > 1000" "r['zsmalloc']['pool_total_size'] == $kc"
		grep -q WARNING "$tmp/caperr" && bad "capture warned: $(grep WARNING "$tmp/caperr")"
	else
		bad "capture failed"
		tail -5 "$tmp/caperr" | sed 's/^/    /'
	fi
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
