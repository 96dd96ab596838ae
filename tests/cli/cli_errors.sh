#!/usr/bin/env bash
# Owner: the zs tool's handling of bad input.  Every command must turn a bad
# option, value or path into one clear message and a non-zero exit status
# (2 for usage errors), never a crash, a traceback or a silent run that
# does nothing (a misspelt workload used to run nothing and exit 0).
# Usage: bash tests/cli/cli_errors.sh BUILD_DIR   (from the repository root)
set -u
build=${1:?usage: tests/cli/cli_errors.sh BUILD_DIR}
zs=$build/zs
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib/cli.sh"   # expect, expect_out, check, cli_done


expect 2 "unknown command 'bogus'" bogus
expect 2 "usage: zs COMMAND"
expect 2 "No such file or directory" replay /nonexistent/trace
expect 2 "not a zram-trace" replay /dev/null
expect 2 "--chain: '0' is not a whole number in 1..16" classes --chain 0
expect 2 "--chain: '17' is not a whole number in 1..16" testmod --chain 17
expect 2 "--free-mode: 'x' is not one of: pool, class, class-unlocked, page-deferred, percpu-deferred" testmod --free-mode x
expect 2 "--page-size: '3000' is not a size .* in 4096..65536" classes --page-size 3000
expect 2 "--delta: '7' is not a whole number in 8..65536" classes --delta 7
expect 2 "option '--chain' requires an argument" classes --chain
expect 2 "compressor 'bogus'" zram --comp bogus /usr/bin/ls
expect 2 "/nonexistent: No such file or directory" zram /nonexistent
expect 2 "backing file /dev/zero: is a character device" zram --backing /dev/zero --max 1M /usr/bin/ls
expect 2 "backing file /tmp: is a directory" zram --backing /tmp --max 1M /usr/bin/ls
expect 2 "--limit: 'abc' is not a size" zram --limit abc /usr/bin/ls
expect 2 "unknown workload 'hep'" compare --workloads mix,hep
expect 2 "unknown backend 'jemaloc'" compare --backends zsmalloc,jemaloc
expect 2 "empty workload list" compare --workloads ""
expect 2 "--page-size: '5' is not a size .* in 4096..65536" compare --page-size 5
expect 2 "--max-mib: '0' is not a whole number in 1..65536" compare --max-mib 0
expect 2 "--threads: '0' is not a whole number in 1..256" soak --threads 0
expect 2 "--seconds: 'x' is not a number above 0" soak --seconds x
expect 2 "cannot create the zram store" soak --comp bogus --seconds 1
: > "$tmp/empty.bin"
mkdir "$tmp/emptydir"
trace=tests/data/usrlib-lz4.trace.xz
mix=(--workloads mix --backends zsmalloc --mix-n 200 --page-size 4096 --repeat 1)

# Command lines that once misbehaved (crashed, hung or passed silently), each
# with what it must do now.
# -- policy flags on every command where they change the result
expect_out 0 "chain 4, delta 16, chain policy heuristic" classes --chain 4 --chain-policy heuristic
# Objects larger than a page: one class per page count, below the page's own table.
expect_out 0 "logical classes 270, physical classes 134" classes --max-object 64K
expect_out 0 "  269 |    16 |  61441..65536  | 3.12%" classes --max-object 64K
expect_out 0 "logical classes 259, physical classes 123" classes --max-object 20000
expect 2 "--max-object: '3K' is not a size .* in 4096..1048576" classes --max-object 3K
expect 2 "cannot create a pool with this configuration: zs_pool_config.max_object_size 131072: must be 0 or page_size..65536" classes --max-object 128K
# A process's anonymous memory as the pages (the RFC's question on anonymous memory).
expect 2 "--pid: '0' is not a whole number in 1..4194304" zram --pid 0
expect 2 "--pid takes no FILE or DIR" zram --pid python /usr/bin
expect 2 "give --synth or --pid, not both" zram --pid python --synth int32-trend
expect_out 0 "^mm_stat" zram --pid python --max 4M --group 4
expect_out 0 "pool memory utilization" testmod --chain 4 --chain-policy heuristic --delta 16 --count 2
expect_out 0 "^mm_stat" zram --chain 4 --max 1M /usr/bin
expect_out 0 "^mm_stat" zram --chain-policy heuristic --delta 16 --free-mode class --deferred --max 1M /usr/bin
expect_out 0 "^mix +4K zsmalloc" compare --chain 4 "${mix[@]}"
expect_out 0 "^mix +4K zsmalloc" compare --chain-policy heuristic --delta 16 --deferred "${mix[@]}"
expect_out 0 "^mix +16K zsmalloc" compare --workloads mix --backends zsmalloc --mix-n 200 --repeat 1 --page-size 16K
expect_out 0 "records [0-9]+, [0-9]+ differ from the kernel's \(expected: not the kernel's policy: chain policy heuristic\)" replay "$trace" --chain-policy heuristic
expect_out 0 "usrlib-lz4.trace.xz: records [0-9]+ mismatches 0" replay "$trace" --delta 16
expect_out 0 "\"kernel_policy\": false, \"not_kernel_because\": \"chain policy heuristic\"" replay "$trace" --chain-policy heuristic --json
expect_out 1 "mismatches [1-9]" replay "$trace" --chain 4 --strict
expect 2 "--page-size: the trace fixes the page size" replay "$trace" --page-size 16K
expect 2 "--progress applies to --sweep only" replay "$trace" --progress
# docs/trace-format.md: a malformed line is reported with its line number and the replay
# exits 2 before comparing anything past it (nothing on stdout: no summary, no mismatch).
xzcat "$trace" | head -12 > "$tmp/bad.trace"
echo "w 3 oops n" >> "$tmp/bad.trace"
xzcat "$trace" | sed -n 13,40p >> "$tmp/bad.trace"
expect 2 "line 13: bad write 'w 3 oops n'" replay "$tmp/bad.trace"
check "replay of a malformed trace prints no comparison" test ! -s "$tmp/out"
{ xzcat "$trace" | head -8; echo "= 1 0 1 1350 0 0"; echo "= 1 0 1 1350 0 0"; } > "$tmp/bad2.trace"
expect 2 "line 9: '=' record without an operation before it" replay "$tmp/bad2.trace"
expect 2 "--backend does not apply to this command" classes --backend zblock
# -- testmod refuses a workload larger than memory
expect 2 "needs about [0-9.]+ GiB .* MemAvailable is .* pass --force" testmod --page-size 64K --count 100000000
# The issue's own command (about 175 GiB), where that is more than this machine has.
if [ "$(awk '/^MemAvailable/ {print int($2 / 1048576)}' /proc/meminfo)" -lt 150 ]; then
	expect 2 "needs about 17[0-9.]+ GiB .* pass --force" testmod --page-size 64K
fi
# -- zs compare input checks
expect 2 "--max-mib: '-1' is not a whole number in 1..65536" compare --max-mib -1
expect 2 "--files /nonexistent: No such file or directory" compare --files /nonexistent
expect 2 "--files .*empty.bin: empty file" compare --files "$tmp/empty.bin"
expect 2 "--files .*emptydir: empty directory" compare --files "$tmp/emptydir"
expect 2 "--mix-n: '-5' is not a whole number in 1..100000000" compare --mix-n -5
expect 2 "--mix-n: '99999999999999' is not a whole number in 1..100000000" compare --mix-n 99999999999999
expect 2 "--heap .*empty.bin: empty file" compare --heap "$tmp/empty.bin"
expect 2 "--pid: 'abc' is not a whole number" compare --pid abc
expect 2 "--rounds: 'abc' is not a whole number in 0..1000" compare --rounds abc
# -- zs zram input checks
expect 2 "--max: '-1' is not a size .* in 4096\.\." zram --max -1 /usr/bin/ls
expect 2 "--max: '0' is not a size .* in 4096\.\." zram --max 0 /usr/bin/ls
expect 2 "--limit: '-5' is not a size" zram --limit -5 /usr/bin/ls
expect 2 "--backend: 'foo' is not one of: zsmalloc zblock" zram --backend foo /usr/bin/ls
expect 2 "FILE .*empty.bin: empty file" zram "$tmp/empty.bin"
"$zs" zram --max 64K /usr/bin/ls > /dev/null 2> "$tmp/progress"
check "zram: no progress (no carriage return) when stderr is not a terminal" \
	bash -c "! grep -q \$'\\r' '$tmp/progress' && ! grep -q 'pages' '$tmp/progress'"
"$zs" zram --max 64K --progress /usr/bin/ls > /dev/null 2> "$tmp/progress"
check "zram --progress: progress lines (no carriage returns) when stderr is not a terminal" \
	bash -c "grep -q 'write' '$tmp/progress' && ! grep -q \$'\\r' '$tmp/progress'"
# -- everywhere
expect 2 "--chain: '4abc' is not a whole number in 1..16" classes --chain 4abc
expect 2 "--delta: '16xyz' is not a whole number in 8..65536" replay "$trace" --delta 16xyz
expect 2 "--chain: '4abc' is not a whole number" zram --chain 4abc /usr/bin/ls
expect 2 "--delta: '16xyz' is not a whole number" compare --delta 16xyz
expect_out 0 "^zs \(libzs\) [0-9]+\.[0-9]+" --version
expect_out 0 "usage: zs classes" help classes
expect_out 0 "usage: zs replay TRACE" help replay
expect 2 "unknown command 'nope'" help nope
expect 2 "unrecognized option '--bogus'" classes --bogus
expect 2 "--verify reads slots back through the store: it needs --store" replay "$trace" --verify
# -- zs record: usage errors are found before anything touches the kernel
expect 2 "-o TRACE is required" record /usr/bin/ls
expect 2 "--pages: '-1' is not a whole number in 1\\.\\." record -o "$tmp/t" --pages -1 /usr/bin/ls
expect 2 "--workload: 'x' is not one of: fill, mix" record -o "$tmp/t" --workload x /usr/bin/ls
expect 2 "--p-compact: '2' is not a number in 0..1" record -o "$tmp/t" --p-compact 2 /usr/bin/ls
expect 2 "FILE /nonexistent: No such file or directory" record -o "$tmp/t" /nonexistent

# zs report needs Python with matplotlib, as the report itself does.
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
	expect 1 "cannot write to --out /proc/nope" report --quick --out /proc/nope
else
	expect 2 "no Python 3 with matplotlib" report --quick --out /proc/nope
fi
# JSON output escapes user strings (a quote in a path used to break it).
quoted_heap() {
	local f="$tmp/he\"ap.bin"
	head -c 20000 /usr/bin/ls > "$f" || return 1
	"$zs" compare --json --heap "$f" --workloads heap --backends zsmalloc --repeat 1 2>/dev/null |
		python3 -c 'import json, sys; d = json.load(sys.stdin); assert d["results"][0]["source"].endswith("he\"ap.bin")'
}
check "compare --json --heap 'he\"ap.bin' parses" quoted_heap
# A zsmalloc row carries its waste by cause, and in JSON the causes add
# up to mem_bytes - live_bytes (the test of the computation itself is test_pool_waste).
expect_out 0 "^  mix +4K zsmalloc waste after compaction .*rounding .*zspage tails .*free slots .*handles .*other" compare "${mix[@]}" --class-shards auto --free-mode class
waste_sums() {
	"$zs" compare --json "${mix[@]}" 2>/dev/null | python3 -c '
import json, sys
for r in json.load(sys.stdin)["results"]:
    for ph in ("fill", "churn", "compact"):
        p = r[ph]; w = p["waste"]
        assert sum(w.values()) == p["mem_bytes"] - p["live_bytes"], (ph, w)
        assert abs(w["other"]) < r["page_size"], (ph, w)'
}
check "compare --json waste parts add up to mem_bytes - live_bytes" waste_sums
# Fitted zspages (--fit-zspages, the app profile's): the parts still add up, and after
# compaction the pool is no larger than without the flag, with no read-back error.
fit_fewer() {
	local a b
	a=$("$zs" compare --json "${mix[@]}" --class-shards 1 --free-mode class 2>/dev/null) || return 1
	b=$("$zs" compare --json "${mix[@]}" --class-shards 1 --free-mode class --fit-zspages 2>/dev/null) || return 1
	python3 -c '
import json, sys
a = json.loads(sys.argv[1])["results"][0]; b = json.loads(sys.argv[2])["results"][0]
p = b["compact"]
assert sum(p["waste"].values()) == p["mem_bytes"] - p["live_bytes"], p
assert b["errors"] == 0 and p["mem_bytes"] <= a["compact"]["mem_bytes"], (a["compact"], p)' "$a" "$b"
}
check "compare --fit-zspages: parts add up, no more pages than without" fit_fewer
expect 2 "--fit-zspages does not apply to this command" classes --fit-zspages
# One checked number parser everywhere (each of these ran, or ran forever, before).
expect 2 "--report: 'nan' is not a number, 0 or more" soak --report nan --seconds 0.3 --quiet
expect 2 "--seconds: 'inf' is not a number above 0" soak --seconds inf --quiet
expect 2 "--threads: ' 2' is not a whole number in 1..256" soak --threads " 2" --seconds 0.3 --quiet
expect 2 "--seed: '-1' is not a whole number" soak --seed -1 --seconds 0.3 --quiet
expect 2 "--max: '4x' is not a size" dict train -o "$tmp/d" --max 4x /usr/bin/ls
expect 2 "--samples: '8x' is not a whole number in 8\.\." dict train -o "$tmp/d" --samples 8x /usr/bin/ls
expect 2 "--group: '17' is not a whole number in 0\.\.16" zram --group 17 /usr/bin/ls
expect 2 "--p-compact: 'nan' is not a number in 0\.\.1" record -o "$tmp/t" --workload mix --p-compact nan /usr/bin/ls
expect 2 "--chain: '8x' is not a whole number in 1..16" classes --chain 8x
expect 2 "--chain: '8x' is not a whole number in 1..16" replay "$trace" --chain 8x
# class shards: checked range or auto; refused where they cannot change the result
expect 2 "--class-shards: '99' is not a whole number in 0..64" zram --class-shards 99 "$trace"
expect 2 "--class-shards does not apply to this command" classes --class-shards 2
# ... and one --free-mode parser: soak takes the same names (and messages) as every command.
expect_out 0 "^usage: zs compare" compare --help
expect 2 "--free-mode: 'bogus' is not one of: pool, class" soak --free-mode bogus --quiet
check "soak --free-mode class-unlocked (the library's name, which bench_release prints too) is accepted" \
	bash -c "'$zs' soak --free-mode class-unlocked --seconds 0.2 --threads 1 --objects 512 --slots 64 --quiet >/dev/null 2>&1"
# Every promise in `zs help CMD`: unknown options and stray arguments are refused on every
# command, each documented range has its message, and every --json parses with the fields
# the help and docs/ name.
for c in record replay classes testmod zram zswap compare pages soak region; do
	expect 2 "unrecognized option '--nope'" "$c" --nope
done
expect 2 "unrecognized arguments: --nope" report --nope
expect 2 "unrecognized option '--nope'" dict train -o "$tmp/d" --nope /usr/bin/ls
for c in classes testmod compare soak; do
	expect 2 "unexpected argument 'stray'" "$c" stray
done
expect 2 "--count: '0' is not a whole number in 1..100000000" testmod --count 0
expect 2 "--step: '65537' is not a whole number in 1..65536" testmod --step 65537
expect 2 "size range 32..5000 outside 1..4096" testmod --max 5000
expect 2 "size range 4096..4080 is empty \(--min above --max\)" testmod --min 4096
expect 2 "--testmod-n: '0' is not a whole number in 1..1000000" compare --testmod-n 0
expect 2 "--repeat: '101' is not a whole number in 1..100" compare --repeat 101
expect 2 "--context: '65' is not a whole number in 0..64" replay "$trace" --context 65
expect 2 "--max-report: '1001' is not a whole number in 0..1000" replay "$trace" --max-report 1001
expect 2 "--backend malloc: the replay compares pool pages: zsmalloc or zblock" replay "$trace" --backend malloc
expect 2 "one trace at a time" replay "$trace" "$trace"
# replay's report options: --fail-fast stops at the first mismatch (exit 1), --max-report N
# details N (default 3; 0 off the kernel's policy unless --strict), --verbose prints the
# trace header and pool
expect_out 1 "records 2 mismatches 1$" replay "$trace" --chain 4 --strict --fail-fast
details() { "$zs" replay "$trace" --chain 4 "$@" 2>/dev/null | grep -c "^differ\|^mismatch at record"; }
check "replay --max-report: 2 given, 3 by default with --strict, 0 without it off the kernel's policy" \
	test "$(details --strict --max-report 2)/$(details --strict)/$(details)" = 2/3/0
expect_out 0 "^pool: page_size 4096, chain 8, free_mode pool" replay "$trace" --verbose
expect 0 "^zs replay --sweep: 2/[0-9]+ chain" replay "$trace" --sweep --chain 8 --progress
# an input for a workload that does not run is refused (it was ignored, exit 0)
expect 2 "--files is the files workload's input" compare --workloads mix --files /usr/bin/ls
expect 2 "--heap is the heap workload's input" compare --workloads mix,files --heap /usr/bin/ls
expect 2 "--pid is the heap workload's input" compare --workloads testmod --pid 1
# zs region: argument checks only (they come before any userfaultfd or page loading)
expect 2 "--mib: '0' is not a whole number in 1..1048576" region --mib 0
expect 2 "--fault-around: '257' is not a whole number in 0..256" region --fault-around 257
expect 2 "--handlers: '0' is not a whole number in 1..64" region --handlers 0
expect 2 "--handlers: '65' is not a whole number in 1..64" region --handlers 65
expect 2 "PATH /nonexistent: No such file or directory" region /nonexistent
expect 2 "--page-size does not apply to this command" region --page-size 16K
# a misspelt compressor is named, before 64 MiB of pages are loaded (was "store config rejected")
expect 2 "compressor 'bogus'" region --comp bogus
many=(); for i in $(seq 65); do many+=(/usr/bin/ls); done
expect 2 "at most 64 PATHs" region "${many[@]}"
# one small run of the documented options, where userfaultfd is permitted (exit 0, nothing differs)
"$zs" region --mib 1 --fault-around 0 --handlers 2 --comp zstd:3 /usr/bin/ls >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc = 2 ] && grep -qi "userfaultfd\|not permitted\|Operation not permitted" "$tmp/err"; then
	echo "skip zs region run: $(head -1 "$tmp/err")"
else
	check "region --fault-around 0 --handlers 2 --comp zstd:3: exit 0, 0 pages differ" \
		bash -c "[ $rc = 0 ] && grep -q 'zstd:3 on zsmalloc, fault-around 0' '$tmp/out' && grep -q '^check: 0 pages differ' '$tmp/out'"
fi
# documented behaviour of a few options no test ran
expect_out 0 "^page size 16384, chain 8, delta 64" classes --page-size 16K
expect_out 0 "pool pages used" testmod --page-size 16K --count 1
expect 0 "^  size 32/4080" testmod --count 1 --progress
check "testmod without --progress: nothing on stderr (not a terminal)" \
	bash -c "[ -z \"\$('$zs' testmod --count 1 2>&1 >/dev/null)\" ]"
expect_out 0 "dictionary from 8 of 16 pages \\(1 files\\)" dict train -o "$tmp/d" --samples 8 --size 1K --max 64K /usr/bin/ls
expect 2 "--threads: '65' is not a whole number in 1..64" zram --threads 65 /usr/bin/ls
expect_out 0 "^mismatches +0" zram --threads 2 --max 256K /usr/bin
expect_out 0 "^failed writes: [1-9][0-9]* \(memory limit\)" zram --limit 64K --max 1M /usr/bin
# zs report: the pool flags report.py takes, checked before Python runs; the three it does
# not take are refused, not listed in the help (they were, and argparse then refused them)
expect 2 "--chain: '0' is not a whole number in 1..16" report --chain 0 --out "$tmp/rep"
for f in "--class-shards 2" "--max-object 8K" --fit-zspages; do
	expect 2 "${f%% *} does not apply to this command" report $f --out "$tmp/rep"
	check "zs help report does not list ${f%% *}" bash -c "! '$zs' help report | grep -q -- '${f%% *}'"
done
check "refused report runs leave no --out directory" test ! -e "$tmp/rep"
# zs soak: the ranges its help gives, and -h as on every command
expect_out 0 "^usage: zs soak" soak -h
expect 2 "--threads: '257' is not a whole number in 1..256" soak --threads 257 --seconds 0.2 --quiet
expect 2 "--objects: '67108865' is not a whole number in 1..67108864" soak --objects 67108865 --seconds 0.2 --quiet
expect 2 "--slots: '16777217' is not a whole number in 1..16777216" soak --slots 16777217 --seconds 0.2 --quiet
expect 2 "--page-size: '128K' is not a size .* in 4096..65536" soak --page-size 128K --seconds 0.2 --quiet
# --quiet means nothing on stderr (zram: even with --progress; zswap: no notes); soak --quiet
# drops the progress lines
quiet() { [ -z "$("$zs" "$@" 2>&1 >/dev/null)" ]; }
check "zram --quiet --progress: nothing on stderr" quiet zram --quiet --progress --max 64K /usr/bin/ls
check "zswap --quiet: nothing on stderr" quiet zswap --quiet --max 64K /usr/bin/ls
check "soak --quiet: no progress lines (--report 0.1)" bash -c "! '$zs' soak --quiet --report 0.1 \
	--seconds 0.3 --threads 1 --objects 512 --slots 64 2>&1 | grep -q '^  t='"
json_fields() {  # json_fields PYTHON-ASSERTION ARGS...: zs ARGS prints JSON the assertion holds on
	local cond=$1
	shift
	"$zs" "$@" 2>/dev/null | python3 -c "import json, sys; j = json.load(sys.stdin); assert $cond, j"
}
check "classes --json: a row per size 32..4096 step 16, the help's columns" json_fields \
	'len(j["rows"]) == 255 and all(set(("log", "phys", "chain", "objs", "tail_waste", "merge_waste", "span")) <= set(r) for r in j["rows"])' \
	classes --json
check "testmod --json parses" json_fields 'j["verify_errors"] == 0 and j["write_objects"] > 0' testmod --json --count 2
check "zram --json: store mm_stat fields (docs/zram.md, policies.md)" json_fields \
	'j["store"]["compr_data_size"] > 0 and j["store"]["mem_used_total"] > 0' zram --json --max 64K /usr/bin/ls
check "zram --matrix --json: pages, page_size, files, rows (docs/zram.md)" json_fields \
	'all(k in j for k in ("pages", "page_size", "files", "rows")) and len(j["rows"]) > 0' \
	zram --matrix --json --max 64K /usr/bin/ls
check "compare --json: rss_delta and backend_mem_bytes per phase, pool and malloc kinds (docs/compare.md)" \
	json_fields 'len(j["results"]) == 2 and all(r["errors"] == 0 and all(k in r[ph] for ph in ("fill", "churn", "compact") for k in ("rss_delta", "backend_mem_bytes", "mem_bytes")) for r in j["results"])' \
	compare --json --workloads mix --backends zsmalloc,malloc --mix-n 200 --repeat 1 --page-size 4096
check "replay --json parses, no mismatch on the kernel's policy" json_fields \
	'j["mismatches"] == 0' replay "$trace" --json
cli_done
