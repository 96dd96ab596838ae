#!/usr/bin/env bash
# zswap_capture.sh: run a real workload (a kernel build, say) under the
# running kernel's zswap in a memory-limited cgroup-v1 memcg, sample zswap's
# counters over time, then freeze the group and capture exactly what zswap
# holds for it: the lzo1x_1_15 size of every swapped page of its processes
# (scripts/zswap_pages.c reads them through /proc/PID/pagemap and mem).  The
# capture feeds `zs zswap --sizes FILE` (docs/zswap.md, "Seed 003"): libzs's
# zsmalloc and zblock get the kernel's exact object multiset and its counters.
#
# It owns every kernel setting it touches and gives each back, on success,
# error, Ctrl-C and TERM (and, after a SIGKILL, at the start of the next
# run, from /run/libzs-zswap-capture.state): zswap's enabled, compressor,
# max_pool_percent, accept_threshold_percent and shrinker_enabled,
# vm.page-cluster, a swap file of its own (swapon, swapoff, removed),
# debugfs (mounted only if it was not), a v1 memory and freezer cgroup
# (processes killed, thawed, removed).  The whole run holds an exclusive
# flock on /run/libzs-kernel-zswap.lock, which every user of the kernel's
# zswap/swap in this project takes (`zs record --zswap`, `zs zswap
# --vs-kernel`), so no other run moves the global counters meanwhile.
set -euo pipefail

usage() {
	cat <<'EOF'
usage: scripts/zswap_capture.sh [options] -o OUT -- COMMAND [ARG...]
       scripts/zswap_capture.sh --restore   (put back what a SIGKILLed run left)
Runs COMMAND in a v1 memcg with zswap (lzo) on and a swap file, samples the
kernel's zswap counters, freezes the group after --freeze-after seconds (or
when COMMAND ends, with nothing left to read), and writes OUT: a header of
'# SECTION KEY VALUE' lines (the counters at start, freeze, after the
kernel's compaction, after the read, at the end) and one lzo1x_1_15 size per
line (4096: stored raw) for every page zswap held for the group.
OUT.samples.tsv gets the counters over time.  Root only.
  -o OUT                 the capture (sizes + header)
  --limit SIZE           memory.limit_in_bytes of the group (default 256M)
  --swap-mib N           swap file size in MiB, >= 1024 (default 1024)
  --swap-dir DIR         where the swap file goes; a real filesystem (default /var/tmp)
  --freeze-after SEC     freeze this many seconds after COMMAND starts (default 240)
  --freeze-stored N      freeze earlier, as soon as zswap's stored_pages >= N (0: off)
  --interval SEC         sampling interval (default 1)
  --page-cluster N       vm.page-cluster during the run (default 0: no swap readahead,
                         so every swapped pte at the freeze is a zswap entry or a zero page)
  --max-pool-percent P   zswap's pool limit during the run (default 20)
  --continue             after the capture, thaw and let COMMAND finish (the limit is
                         put back; its swap-ins then perturb the rest); default: kill it
  --no-compact           do not run the kernel's zsmalloc compaction at the freeze
                         (echo 2 > /proc/sys/vm/drop_caches, which also drops slab caches)
  --lock-wait SEC        wait this long for the kernel-zswap lock (default 3600)
  --workdir DIR          COMMAND's working directory (default: the current one)
  --note TEXT            a '# workload' line for the header
EOF
}

LOCK=/run/libzs-kernel-zswap.lock
STATE=/run/libzs-zswap-capture.state
P=/sys/module/zswap/parameters
DBG=/sys/kernel/debug
MEMCG_ROOT=/sys/fs/cgroup/memory
FRZ_ROOT=/sys/fs/cgroup/freezer
HERE=$(cd "$(dirname "$0")" && pwd)

OUT="" LIMIT=256M SWAP_MIB=1024 SWAP_DIR=/var/tmp FREEZE_AFTER=240 FREEZE_STORED=0 INTERVAL=1
PAGE_CLUSTER=0 MAX_POOL=20 CONTINUE=0 COMPACT=1 LOCK_WAIT=3600 WORKDIR=$PWD NOTE="" RESTORE=0
while [ $# -gt 0 ]; do
	case "$1" in
	-o) OUT=$2; shift 2 ;;
	--limit) LIMIT=$2; shift 2 ;;
	--swap-mib) SWAP_MIB=$2; shift 2 ;;
	--swap-dir) SWAP_DIR=$2; shift 2 ;;
	--freeze-after) FREEZE_AFTER=$2; shift 2 ;;
	--freeze-stored) FREEZE_STORED=$2; shift 2 ;;
	--interval) INTERVAL=$2; shift 2 ;;
	--page-cluster) PAGE_CLUSTER=$2; shift 2 ;;
	--max-pool-percent) MAX_POOL=$2; shift 2 ;;
	--continue) CONTINUE=1; shift ;;
	--no-compact) COMPACT=0; shift ;;
	--lock-wait) LOCK_WAIT=$2; shift 2 ;;
	--workdir) WORKDIR=$2; shift 2 ;;
	--note) NOTE=$2; shift 2 ;;
	--restore) RESTORE=1; shift ;;
	-h | --help) usage; exit 0 ;;
	--) shift; break ;;
	*) echo "zswap_capture: unknown option '$1'" >&2; usage >&2; exit 2 ;;
	esac
done
[ $RESTORE = 1 ] || { [ -n "$OUT" ] && [ $# -gt 0 ]; } || { usage >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "zswap_capture: needs root" >&2; exit 77; }
[ -d /sys/module/zswap ] || { echo "zswap_capture: no zswap in this kernel" >&2; exit 77; }
[ -f $MEMCG_ROOT/memory.limit_in_bytes ] && [ -f $FRZ_ROOT/cgroup.procs ] ||
	{ echo "zswap_capture: needs cgroup v1 memory and freezer" >&2; exit 77; }
for v in "$SWAP_MIB" "$FREEZE_AFTER" "$FREEZE_STORED" "$PAGE_CLUSTER" "$MAX_POOL" "$LOCK_WAIT"; do
	[[ "$v" =~ ^[0-9]+$ ]] || { echo "zswap_capture: '$v' is not a number" >&2; exit 2; }
done
[[ "$INTERVAL" =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "zswap_capture: bad --interval" >&2; exit 2; }
[ "$SWAP_MIB" -ge 1024 ] || { echo "zswap_capture: --swap-mib must be >= 1024" >&2; exit 2; }
[ "$MAX_POOL" -le 100 ] || { echo "zswap_capture: --max-pool-percent 0..100" >&2; exit 2; }
case "$(stat -f -c %T "$SWAP_DIR")" in
tmpfs | ramfs) echo "zswap_capture: $SWAP_DIR is not a real filesystem" >&2; exit 2 ;;
esac

# The page reader, built here from its source (liblzo2 is a libzs dependency).
READER=$(mktemp /tmp/zswap_pages.XXXXXX)
[ $RESTORE = 1 ] || cc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -o "$READER" "$HERE/zswap_pages.c" -llzo2

# ---- Saved settings and their restoration ----
NAME=libzs-zcap.$$
SWAPFILE="$SWAP_DIR/libzs-zswap-capture.$$.swap"
SAMPLER=""
CMD_PID=""
declare -A SAVED=()

save_settings() {
	for k in enabled compressor max_pool_percent accept_threshold_percent shrinker_enabled; do
		SAVED[$k]=$(cat $P/$k)
	done
	SAVED[page_cluster]=$(cat /proc/sys/vm/page-cluster)
	if mountpoint -q $DBG; then SAVED[debugfs_ours]=0; else SAVED[debugfs_ours]=1; fi
	{
		for k in "${!SAVED[@]}"; do echo "$k=${SAVED[$k]}"; done
		echo "swapfile=$SWAPFILE"
		echo "memcg=$MEMCG_ROOT/$NAME"
		echo "freezer=$FRZ_ROOT/$NAME"
	} >"$STATE"
}

# Kill what is left in a freezer/memcg pair and remove both.
drop_group() {
	local frz=$1 mcg=$2 i
	if [ -d "$frz" ]; then
		echo THAWED >"$frz/freezer.state" 2>/dev/null || true
	fi
	for i in $(seq 1 100); do
		local pids=""
		[ -f "$mcg/cgroup.procs" ] && pids=$(cat "$mcg/cgroup.procs")
		[ -f "$frz/cgroup.procs" ] && pids="$pids $(cat "$frz/cgroup.procs")"
		[ -z "${pids// /}" ] && break
		# shellcheck disable=SC2086
		kill -KILL $pids 2>/dev/null || true
		sleep 0.1
	done
	[ -d "$mcg" ] && { rmdir "$mcg" 2>/dev/null || echo "zswap_capture: could not remove $mcg" >&2; }
	[ -d "$frz" ] && { rmdir "$frz" 2>/dev/null || echo "zswap_capture: could not remove $frz" >&2; }
	return 0
}

# Put back the settings named in a state file's lines (k=v).
restore_from() {
	local file=$1 k v swapfile="" memcg="" freezer="" ours=0
	declare -A s=()
	while IFS='=' read -r k v; do s[$k]=$v; done <"$file"
	swapfile=${s[swapfile]:-}; memcg=${s[memcg]:-}; freezer=${s[freezer]:-}
	[ -n "$memcg$freezer" ] && drop_group "$freezer" "$memcg"
	if [ -n "$swapfile" ]; then
		if grep -q "^$swapfile " /proc/swaps; then
			swapoff "$swapfile" || echo "zswap_capture: swapoff $swapfile failed" >&2
		fi
		rm -f "$swapfile"
	fi
	for k in compressor max_pool_percent accept_threshold_percent shrinker_enabled enabled; do
		[ -n "${s[$k]:-}" ] && { echo "${s[$k]}" >$P/$k || echo "zswap_capture: $k not restored" >&2; }
	done
	[ -n "${s[page_cluster]:-}" ] && echo "${s[page_cluster]}" >/proc/sys/vm/page-cluster
	ours=${s[debugfs_ours]:-0}
	if [ "$ours" = 1 ] && mountpoint -q $DBG; then
		umount $DBG 2>/dev/null || echo "zswap_capture: debugfs busy, left mounted" >&2
	fi
	rm -f "$file"
}

cleanup() {
	local rc=$?
	set +e # restore everything, whatever fails on the way
	trap - EXIT INT TERM HUP
	if [ -n "$SAMPLER" ]; then
		kill "$SAMPLER" 2>/dev/null
		wait "$SAMPLER" 2>/dev/null
	fi
	[ -f "$STATE" ] && restore_from "$STATE"
	rm -f "$READER" "${TMPS:-/nonexistent}" "${TMPS:-/nonexistent}".*
	exit "$rc"
}
on_signal() {
	echo "zswap_capture: interrupted; restoring" >&2
	exit 130
}

# ---- The lock, then the settings ----
exec 9>"$LOCK"
echo "zswap_capture: waiting for $LOCK..." >&2
flock -w "$LOCK_WAIT" 9 || { echo "zswap_capture: $LOCK busy for ${LOCK_WAIT}s" >&2; exit 2; }
trap cleanup EXIT
trap on_signal INT TERM HUP
if [ -f "$STATE" ]; then
	echo "zswap_capture: a killed run left $STATE; restoring its settings first" >&2
	restore_from "$STATE"
fi
if [ -f /run/libzs-kernel-zswap.state ]; then
	# zs record --zswap was killed: what we would save as "before" is its run's settings.
	echo "zswap_capture: /run/libzs-kernel-zswap.state: a killed 'zs record --zswap' left" \
		"settings to restore; run it again first" >&2
	exit 2
fi
if [ $RESTORE = 1 ]; then
	echo "zswap_capture: the kernel's zswap, swap and cgroups are as they were" >&2
	exit 0
fi
TMPS=$(mktemp /tmp/zswap_capture.XXXXXX)
save_settings

mountpoint -q $DBG || mount -t debugfs none $DBG
echo "$PAGE_CLUSTER" >/proc/sys/vm/page-cluster
echo lzo >$P/compressor
echo "$MAX_POOL" >$P/max_pool_percent
echo N >$P/shrinker_enabled
echo Y >$P/enabled
if ! fallocate -l "${SWAP_MIB}M" "$SWAPFILE" 2>/dev/null; then
	dd if=/dev/zero of="$SWAPFILE" bs=1M count="$SWAP_MIB" status=none
fi
chmod 600 "$SWAPFILE"
mkswap "$SWAPFILE" >/dev/null
swapon -p 32767 "$SWAPFILE"
mkdir "$MEMCG_ROOT/$NAME" "$FRZ_ROOT/$NAME"
echo "$LIMIT" >"$MEMCG_ROOT/$NAME/memory.limit_in_bytes"
MCG=$MEMCG_ROOT/$NAME FRZ=$FRZ_ROOT/$NAME

# ---- Counters ----
Z=$DBG/zswap
ZKEYS="stored_pages stored_incompressible_pages pool_total_size written_back_pages pool_limit_hit
reject_reclaim_fail reject_alloc_fail reject_kmemcache_fail reject_compress_fail
reject_compress_poor decompress_fail"
VKEYS="zswpout zswpin zswpwb swpout_zero swpin_zero pswpout pswpin"
# One line of values, in the order of counter_names: one awk per sample (the
# machine may be loaded; a fork per counter made 1 s samples take 4 s).
counter_names() {
	echo "t_s $ZKEYS $VKEYS Zswap_kB Zswapped_kB memcg_usage memcg_swap" | tr '\n' ' ' | tr -s ' ' |
		sed 's/ $//'
	echo
}
counters() {
	awk -v t="$1" -v z="$Z" -v zk="$ZKEYS" -v vk="$VKEYS" -v m="$MCG" '
	function rd(f,   v) { v = 0; if ((getline v < f) <= 0) v = 0; close(f); return v + 0 }
	BEGIN {
		line = t
		n = split(zk, a, /[ \n]+/)
		for (i = 1; i <= n; i++) if (a[i] != "") line = line " " rd(z "/" a[i])
		while ((getline l < "/proc/vmstat") > 0) { split(l, f, " "); vm[f[1]] = f[2] }
		close("/proc/vmstat")
		n = split(vk, a, /[ \n]+/)
		for (i = 1; i <= n; i++) if (a[i] != "") line = line " " (vm[a[i]] + 0)
		while ((getline l < "/proc/meminfo") > 0) { split(l, f, /[ :]+/); mi[f[1]] = f[2] }
		close("/proc/meminfo")
		line = line " " (mi["Zswap"] + 0) " " (mi["Zswapped"] + 0)
		sw = 0
		while ((getline l < (m "/memory.stat")) > 0) { split(l, f, " "); if (f[1] == "swap") sw = f[2] }
		close(m "/memory.stat")
		print line " " rd(m "/memory.usage_in_bytes") " " sw
	}'
}
# Header lines "# SECTION KEY VALUE" from one counters line.
section() {
	local sec=$1 vals=$2
	paste -d' ' <(counter_names | tr ' ' '\n' | sed '/^$/d') <(echo "$vals" | tr ' ' '\n' | sed '/^$/d') |
		awk -v s="$sec" '{ print "# " s " " $1 " " $2 }'
}
now() { date +%s.%N; }

# ---- Run ----
START_VALS=$(counters 0)
T0=$(now)
SAMPLES="$OUT.samples.tsv"
counter_names | tr ' ' '\t' >"$SAMPLES"
(
	while kill -0 $$ 2>/dev/null; do # ends with the script, even after a SIGKILL
		counters "$(echo "$(now) - $T0" | bc)" | tr ' ' '\t' >>"$SAMPLES"
		sleep "$INTERVAL"
	done
) 9>&- &
SAMPLER=$!
(
	cd "$WORKDIR"
	echo $BASHPID >"$MCG/cgroup.procs"
	echo $BASHPID >"$FRZ/cgroup.procs"
	exec "$@"
) >"$OUT.log" 2>&1 9>&- &
CMD_PID=$!
echo "zswap_capture: running '$*' in $NAME (limit $LIMIT), freezing after ${FREEZE_AFTER}s" >&2

ENDED=0
while :; do
	if ! kill -0 "$CMD_PID" 2>/dev/null; then ENDED=1; break; fi
	el=$(echo "$(now) - $T0" | bc)
	if [ "$(echo "$el >= $FREEZE_AFTER" | bc)" = 1 ]; then break; fi
	if [ "$FREEZE_STORED" -gt 0 ] && [ "$(cat $Z/stored_pages)" -ge "$FREEZE_STORED" ]; then break; fi
	sleep 0.5
done
CMD_RC=""
if [ $ENDED = 1 ]; then
	CMD_RC=0
	wait "$CMD_PID" || CMD_RC=$?
	echo "zswap_capture: COMMAND ended (rc $CMD_RC) before the freeze" >&2
fi
echo FROZEN >"$FRZ/freezer.state"
for i in $(seq 1 200); do
	[ "$(cat "$FRZ/freezer.state")" = FROZEN ] && break
	sleep 0.05
done
[ "$(cat "$FRZ/freezer.state")" = FROZEN ] || { echo "zswap_capture: the group did not freeze" >&2; exit 2; }
T_FREEZE=$(echo "$(now) - $T0" | bc)
FREEZE_VALS=$(counters "$T_FREEZE")
echo "zswap_capture: frozen at ${T_FREEZE}s: stored_pages $(cat $Z/stored_pages), pool pages $(($(cat $Z/pool_total_size) / 4096))" >&2
kill "$SAMPLER" 2>/dev/null; wait "$SAMPLER" 2>/dev/null || true; SAMPLER=""

# Reading the pages swaps them in, charged to the group: lift its limit first
# so that the read does not reclaim (and swap out) the group's other pages.
echo -1 >"$MCG/memory.limit_in_bytes"
COMPACT_VALS=""
if [ $COMPACT = 1 ]; then
	sync
	echo 2 >/proc/sys/vm/drop_caches # runs the shrinkers: zsmalloc's compacts zswap's pool
	COMPACT_VALS=$(counters "$(echo "$(now) - $T0" | bc)")
fi
PIDS=$(cat "$FRZ/cgroup.procs" | tr '\n' ' ')
NPROCS=$(echo "$PIDS" | wc -w)
SWAP_SUM=0
for pid in $PIDS; do
	s=$(awk '$1 == "Swap:" { print $2 }' "/proc/$pid/smaps_rollup" 2>/dev/null || echo 0)
	SWAP_SUM=$((SWAP_SUM + ${s:-0}))
done
READ_RC=0
# shellcheck disable=SC2086
"$READER" $PIDS >"$TMPS.sizes" 2>"$TMPS.sum" || READ_RC=$?
READ_VALS=$(counters "$(echo "$(now) - $T0" | bc)")
# Entries left after the read belong to no pte of the group (a process that
# exited while its page was being stored leaves it in the swap cache): their
# pool after compaction bounds how far the kernel's compacted pool may be
# above a fresh fill of the sizes read (docs/zswap.md).
RESID_VALS=""
if [ $COMPACT = 1 ]; then
	echo 2 >/proc/sys/vm/drop_caches
	RESID_VALS=$(counters "$(echo "$(now) - $T0" | bc)")
fi
grep -v '^[a-z_]* [0-9]*$' "$TMPS.sum" >&2 || true

END_VALS=""
if [ $CONTINUE = 1 ] && [ $ENDED = 0 ]; then
	echo "$LIMIT" >"$MCG/memory.limit_in_bytes" 2>/dev/null || true
	echo THAWED >"$FRZ/freezer.state"
	CMD_RC=0
	wait "$CMD_PID" || CMD_RC=$?
	END_VALS=$(counters "$(echo "$(now) - $T0" | bc)")
	echo "zswap_capture: COMMAND ended (rc $CMD_RC) at $(echo "$END_VALS" | cut -d' ' -f1)s" >&2
fi

{
	echo "# zswap-sizes 1"
	echo "# kernel $(uname -r)"
	echo "# comp lzo"
	echo "# page_size 4096"
	echo "# chain_size $( (zcat /proc/config.gz 2>/dev/null || cat "/boot/config-$(uname -r)" 2>/dev/null) |
		sed -n 's/^CONFIG_ZSMALLOC_CHAIN_SIZE=//p' | head -1 | grep . || echo '?')"
	echo "# totalram_pages $(($(awk '$1 == "MemTotal:" { print $2 }' /proc/meminfo) / 4))"
	echo "# max_pool_percent $MAX_POOL"
	echo "# page_cluster $PAGE_CLUSTER"
	echo "# memcg_limit $LIMIT"
	echo "# command $*"
	[ -n "$NOTE" ] && echo "# workload $NOTE"
	echo "# freeze_after_s $FREEZE_AFTER"
	echo "# freeze_stored $FREEZE_STORED"
	echo "# command_ended_before_freeze $ENDED"
	echo "# processes $NPROCS"
	echo "# smaps_swap_kB $SWAP_SUM"
	sed 's/^/# read /' "$TMPS.sum" | grep -E '^# read [a-z_]+ [0-9]+$' || true
	section start "$START_VALS"
	section freeze "$FREEZE_VALS"
	[ -n "$COMPACT_VALS" ] && section compacted "$COMPACT_VALS"
	section after_read "$READ_VALS"
	[ -n "$RESID_VALS" ] && section residual_compacted "$RESID_VALS"
	[ -n "$END_VALS" ] && section end "$END_VALS"
	[ -n "$CMD_RC" ] && echo "# command_rc $CMD_RC"
	# The samples up to the freeze, for `zs zswap --sizes`'s churn:
	# t_s stored_pages pool_pages zswpout zswpin.
	awk -F'\t' -v tf="$T_FREEZE" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
		$1 <= tf { print "# sample " $c["t_s"] " " $c["stored_pages"] " " \
			int($c["pool_total_size"] / 4096) " " $c["zswpout"] " " $c["zswpin"] }' "$SAMPLES"
	echo "# sample $(echo "$FREEZE_VALS" | awk -v n="$(counter_names)" '{ split(n, k, " ")
		for (i = 1; i <= NF; i++) v[k[i]] = $i
		print v["t_s"], v["stored_pages"], int(v["pool_total_size"] / 4096), v["zswpout"], v["zswpin"] }')"
	cat "$TMPS.sizes"
} >"$OUT"

# The checks that make the capture exact (docs/zswap.md): every zswap entry
# the kernel held was one of the group's swapped pages, read once.
fz() { section freeze "$FREEZE_VALS" | awk -v k="$1" '$3 == k { print $4 }'; }
ST=$(fz stored_pages) NREAD=$(wc -l <"$TMPS.sizes")
RES=$(section after_read "$READ_VALS" | awk '$3 == "stored_pages" { print $4 }')
echo "zswap_capture: kernel stored_pages $ST at the freeze, $RES after the read; pages read $NREAD; pool pages $(($(fz pool_total_size) / 4096))${COMPACT_VALS:+, $(($(section compacted "$COMPACT_VALS" | awk '$3 == "pool_total_size" { print $4 }') / 4096)) after compaction}" >&2
[ "$(fz written_back_pages)" = "$(section start "$START_VALS" | awk '$3 == "written_back_pages" { print $4 }')" ] ||
	echo "zswap_capture: WARNING: writeback ran: some swapped pages were on disk, not in zswap" >&2
[ "$(fz pool_limit_hit)" = "$(section start "$START_VALS" | awk '$3 == "pool_limit_hit" { print $4 }')" ] ||
	echo "zswap_capture: WARNING: the pool limit was hit: some swapped pages went to disk" >&2
[ $((ST - RES)) = "$NREAD" ] ||
	echo "zswap_capture: WARNING: stored_pages fell by $((ST - RES)) but $NREAD pages were read" >&2
echo "zswap_capture: wrote $OUT ($NREAD sizes) and $SAMPLES" >&2
exit "$READ_RC"
