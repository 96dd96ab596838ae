#!/usr/bin/env bash
# Owner: `zs replay --events` (tools/replay/replay_events.c, docs/trace-format.md
# "Events").  Replays committed zram-traces with --events and checks the
# event lines against the trace itself, not against the replay's own totals:
#  - at every record, the zspage+ pages minus the zspage- pages so far equal
#    both the event's own '=' PAGES and the kernel's MEM_USED_PAGES in the
#    trace's '=' record of the same number (so the per-class zspage events
#    account for every pool page the kernel had, record by record);
#  - the pages the zspage- lines free during each compaction ('c') equal the
#    rise of the kernel's PAGES_COMPACTED at that record;
#  - one alloc line per compressed or huge write, one free line per object
#    dropped (discard, overwrite, same-filled overwrite), a move line for
#    compactions that freed pages, span lines, and no resync comment.
# Usage: bash tests/cli/replay_events.sh BUILD_DIR
set -u
build=${1:?usage: tests/cli/replay_events.sh BUILD_DIR}
zs=$build/zs
[ -x "$zs" ] || { echo "replay_events: $zs not built"; echo "0 passed, 1 failed"; exit 1; }
tmp=$(mktemp -d /tmp/zs-replay-events.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; shift; printf '%s\n' "$@" | head -20 | sed 's/^/    /'; }

check() {
	local t=$1
	if ! "$zs" replay "$t" --events "$tmp/ev" > "$tmp/out" 2>&1 ||
		! grep -q 'mismatches 0' "$tmp/out"; then
		bad "$t: replay --events" "$(cat "$tmp/out")"
		return
	fi
	xz -dcf "$t" | grep -v '^#' > "$tmp/trace"
	# The trace's records (MEM_USED, PAGES_COMPACTED) and its write/drop counts,
	# then the events, in one awk.
	if awk '
		FNR == NR {
			if ($1 == "=") { nk++; kmem[nk] = $2; kcomp[nk] = $3 }
			else if ($1 == "w" && $4 != "s") writes++
			next
		}
		/^# resync/ { print "resync comment: " $0; bad = 1 }
		/^#/ { next }
		$1 == "op" { incompact = ($3 == "c"); if (incompact) freed = 0; next }
		$1 == "alloc" { allocs++; next }
		$1 == "free" { frees++; next }
		$1 == "span" { spans++; next }
		$1 == "move" { moves++; next }
		$1 == "zspage+" { pages += $3; next }
		$1 == "zspage-" { pages -= $3; if (incompact) freed += $3; next }
		$1 == "=" {
			n++
			if ($2 != n) { print "record number " $2 " at the " n "th record"; bad = 1; exit }
			if (pages != $3 || pages != kmem[n]) {
				printf "record %d: events sum %d pages, event line %d, kernel %d\n",
					n, pages, $3, kmem[n]
				bad = 1; exit
			}
			rise = kcomp[n] - (n > 1 ? kcomp[n - 1] : 0)
			if (incompact && freed != rise) {
				printf "record %d: compaction freed %d pages in events, kernel %d\n",
					n, freed, rise
				bad = 1; exit
			}
			if (incompact && rise > 0) compacted_records++
			next
		}
		{ print "unknown line: " $0; bad = 1; exit }
		END {
			if (!bad && n != nk) { printf "%d event records, %d in the trace\n", n, nk; bad = 1 }
			if (!bad && allocs != writes) {
				printf "%d alloc lines, %d compressed or huge writes\n", allocs, writes
				bad = 1
			}
			if (!bad && (spans == 0 || frees == 0)) { print "no span or free lines"; bad = 1 }
			if (!bad && compacted_records > 0 && moves == 0) {
				print "compactions freed pages but no move line"; bad = 1
			}
			if (!bad)
				printf "%d records, %d allocs, %d frees, %d spans, %d moves, %d compactions freeing pages\n",
					n, allocs, frees, spans, moves, compacted_records
			exit bad
		}' "$tmp/trace" "$tmp/ev" > "$tmp/check"; then
		ok "$t: $(cat "$tmp/check")"
	else
		bad "$t: events do not add up" "$(cat "$tmp/check")"
	fi
}

for t in tests/data/heap-lzorle.trace.xz tests/data/mix-heap-lzorle.trace.xz \
	tests/data/mix-text-lz4.trace.xz; do
	check "$t"
done

# Refused where the events would not be the pool's own decisions.
for a in "--sweep" "--store" "--backend zblock" "--deferred"; do
	# shellcheck disable=SC2086
	if "$zs" replay tests/data/heap-lzorle.trace.xz --events "$tmp/x" $a > "$tmp/out" 2>&1; then
		bad "--events with $a accepted" "$(head -3 "$tmp/out")"
	elif [ "$?" = 2 ] && grep -q -- '--events' "$tmp/out"; then
		ok "--events with $a: refused (exit 2)"
	else
		bad "--events with $a: no clear refusal" "$(head -3 "$tmp/out")"
	fi
done
if "$zs" replay tests/data/zswap-small.trace --events "$tmp/x" > "$tmp/out" 2>&1; then
	bad "--events on a zswap-trace accepted"
else
	grep -q 'zswap-trace' "$tmp/out" && ok "--events on a zswap-trace: refused" ||
		bad "--events on a zswap-trace" "$(cat "$tmp/out")"
fi
if "$zs" replay tests/data/heap-lzorle.trace.xz --events /nonexistent-dir/ev > "$tmp/out" 2>&1; then
	bad "--events to an unwritable path accepted"
else
	grep -q 'cannot write' "$tmp/out" && ok "--events to an unwritable path: refused" ||
		bad "--events to an unwritable path" "$(cat "$tmp/out")"
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
