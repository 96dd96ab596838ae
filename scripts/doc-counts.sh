#!/usr/bin/env bash
# doc-counts.sh: the exact counts that README.md and docs/*.md quote, measured
# afresh and written back into the docs, so that a change to the code cannot
# leave a stale number behind.  Each quoted figure sits
# between two markers,
#     <!-- doc-counts:begin NAME -->...<!-- doc-counts:end -->
# on one line (a figure inside a sentence or a table cell) or on lines of
# their own (a whole table); the script owns what is between them and nothing
# else, so history and commentary around a figure stay hand-written.
#
# Groups, by the prefix of NAME:
#   api-*    scripts/bench-api-callgrind.sh (docs/benchmarks.md section 3):
#            callgrind instructions of the new object API vs legacy map/unmap.
#   alloc-*  `zs testmod --chain 8` under callgrind: instructions per call of
#            zs_malloc, zs_free and the page provider's calls.
#   checks-* the number of checks tests/cli/cli_errors.sh,
#            test_regress_config_limits and test_regress_end_unpin run
#            (docs/reliability.md, "Bad inputs").
#   dict-*   the bytes tests/unit/test_comp_dict.c's records compress to, with and
#            without a dictionary, at the test's default seed (docs/zram.md).
#   layout-* scripts/layout-callgrind.sh (docs/benchmarks.md section 5):
#            instructions per allocate + write + free of bench_layout's rows,
#            and of the app row with the owners fenced (ZS_OWNED_FENCED=1).
# Callgrind counts depend on the compiler and its flags, so the script uses a
# Release build (default build-bench, configured and built when missing) and
# the figures name the compiler and valgrind they came from; the check counts
# do not depend on the build.
#
# Usage: scripts/doc-counts.sh [--check] [--only GROUPS] [--build DIR]
#                              [--results FILE] [--save FILE] [--root DIR]
#   (none)          measure, then rewrite every marked figure in place
#   --check         measure, print a diff and exit 1 if any figure differs
#   --only GROUPS   comma list of api, alloc, checks, dict, layout (default all)
#   --build DIR     Release build directory (default build-bench)
#   --no-build      use DIR's programs as they are (tests/package/doc_counts.sh)
#   --results FILE  take the measurements from FILE (key=value lines, as
#                   --save writes them) instead of running anything
#   --save FILE     write the measurements to FILE
#   --root DIR      the tree whose README.md and docs/*.md are rewritten
#                   (default: this repository); the measuring always uses
#                   this repository's scripts and tests
# Takes about 2 minutes in all (alloc ~40 s, layout ~60 s, api ~3 s, checks ~3 s, dict ~1 s,
# plus the build).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
root=$here build=build-bench only=api,alloc,checks,dict,layout check=0 results='' save='' nobuild=0
while [[ $# -gt 0 ]]; do
	case $1 in
	--check) check=1 ;;
	--only) only=${2:?--only needs a value}; shift ;;
	--build) build=${2:?--build needs a value}; shift ;;
	--no-build) nobuild=1 ;;
	--results) results=${2:?--results needs a value}; shift ;;
	--save) save=${2:?--save needs a value}; shift ;;
	--root) root=${2:?--root needs a value}; shift ;;
	-h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "doc-counts.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
	esac
	shift
done
for g in ${only//,/ }; do
	case $g in api|alloc|checks|dict|layout) ;; *) echo "doc-counts.sh: unknown group '$g' (api, alloc, checks, dict, layout)" >&2; exit 2 ;; esac
done
wants() { [[ ",$only," == *",$1,"* ]]; }
[[ $build = /* ]] || build=$here/$build
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
declare -A v  # the measurements: key -> value

# ---- measuring ----------------------------------------------------------------

# A Release build for the instruction counts: a debug or RelWithDebInfo build
# would quote other counts (the check counts take any build).
need_build() {
	if [[ ! -f $build/CMakeCache.txt && $nobuild == 0 ]]; then
		cmake -B "$build" -S "$here" -DCMAKE_BUILD_TYPE=Release >/dev/null
	fi
	local type targets=()
	type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt")
	if [[ $type != Release ]] && { wants api || wants alloc || wants layout; }; then
		echo "doc-counts.sh: $build is a '$type' build; the docs quote a Release build" >&2
		exit 2
	fi
	wants api && targets+=(bench_api)
	wants alloc || wants checks && targets+=(zs)
	wants checks && targets+=(test_regress_config_limits test_regress_end_unpin)
	wants dict && targets+=(test_comp_dict)
	wants layout && targets+=(bench_layout)
	if [[ $nobuild == 0 ]]; then
		cmake --build "$build" -j"$(nproc)" --target "${targets[@]}" >"$tmp/build.log" 2>&1 ||
			{ tail -20 "$tmp/build.log" >&2; exit 1; }
	fi
	local id ver
	id=$(sed -n 's/^set(CMAKE_C_COMPILER_ID "\(.*\)")/\1/p' "$build"/CMakeFiles/*/CMakeCCompiler.cmake | head -1)
	ver=$(sed -n 's/^set(CMAKE_C_COMPILER_VERSION "\(.*\)")/\1/p' "$build"/CMakeFiles/*/CMakeCCompiler.cmake | head -1)
	case $id in GNU) id=gcc ;; Clang) id=clang ;; esac
	v[toolchain]="$id $ver, $(valgrind --version 2>/dev/null || echo 'no valgrind')"
}

# json KEY FILE: a number from a flat JSON object.
json() { sed -n "s/.*\"$1\": *\\([-0-9.]*\\).*/\\1/p" "$2"; }

measure_api() {
	local it
	for it in 10 20 0; do
		bash "$here/scripts/bench-api-callgrind.sh" --json "$build" "$it" >"$tmp/api.$it"
	done
	v[api_objects]=$(json objects "$tmp/api.10")
	v[api_legacy]=$(json legacy_instructions "$tmp/api.10")
	v[api_new]=$(json new_instructions "$tmp/api.10")
	v[api_new_20]=$(json new_instructions "$tmp/api.20")
	v[api_new_0]=$(json new_instructions "$tmp/api.0")
	v[api_legacy_0]=$(json legacy_instructions "$tmp/api.0")
}

# Callgrind of `zs testmod --chain 8`.  Pinned to one CPU with the page
# cache's time decay off: otherwise sched_getcpu() picks the per-CPU page
# cache and the clock decides when cached pages go back, so the page paths
# (and zs_malloc / zs_free, which include them) move by up to ~1% between
# runs (docs/benchmarks.md section 3, "Allocation and free paths").
ALLOC_FNS="zs_malloc zs_free pages_alloc_bulk pages_free_bulk"
measure_alloc() {
	local out=$tmp/cg.testmod pin=()
	command -v taskset >/dev/null && pin=(taskset -c "$(taskset -pc $$ | sed 's/.*: *//; s/[-,].*//')")
	ZS_PAGES_DECAY_MS=-1 "${pin[@]}" valgrind --tool=callgrind --callgrind-out-file="$out" \
		"$build/zs" testmod --chain 8 >"$tmp/testmod.log" 2>&1 ||
		{ tail -20 "$tmp/testmod.log" >&2; exit 1; }
	v[alloc_objects]=$(sed -n 's/.*num write objects: \([0-9]*\).*/\1/p' "$tmp/testmod.log")
	# Calls and inclusive cost per function, straight from callgrind's file
	# (callgrind_annotate prints no call counts): "fn=" opens a function's
	# block, a cost line after "calls=" is the cost of that call (inclusive
	# = own lines + such calls, as callgrind_annotate --inclusive counts it).
	local f calls incl self
	while read -r f calls incl self; do
		v[alloc_${f}_calls]=$calls v[alloc_${f}_incl]=$incl v[alloc_${f}_self]=$self
	done < <(awk -v want="${ALLOC_FNS// /,}" '
		function nm(s,   id, rest) {
			id = s; sub(/\).*/, "", id); sub(/^\(/, "", id)
			rest = s; sub(/^\([0-9]+\) ?/, "", rest)
			if (rest != "") names[id] = rest
			return names[id]
		}
		BEGIN { n = split(want, w, ","); for (i = 1; i <= n; i++) wanted[w[i]] = 1 }
		/^fn=/ { cur = nm(substr($0, 4)); incall = 0; next }
		/^cfn=/ { callee = nm(substr($0, 5)); next }
		/^calls=/ { sub(/^calls=/, ""); calls[callee] += $1; incall = 1; next }
		/^[0-9+*-]/ { if (incall) { incl[cur] += $2; incall = 0 } else self[cur] += $2; next }
		END { for (f in wanted) printf "%s %d %d %d\n", f, calls[f], self[f] + incl[f], self[f] }
	' "$out")
	for f in $ALLOC_FNS; do
		[[ ${v[alloc_${f}_calls]:-0} -gt 0 ]] || { echo "doc-counts.sh: no calls of $f in $out" >&2; exit 1; }
	done
}

# scripts/layout-callgrind.sh on the rows docs/benchmarks.md quotes, pinned to
# the first CPU this process may use (the script's own reasons for pinning).
# The docs quote whole instructions: the counts move by a few thousandths of
# an instruction an op between runs, so a tenth could flip at a rounding edge
# and make --check flaky; the rounding is done here, from the raw counts.
measure_layout() {
	local cpu=0 row n
	command -v taskset >/dev/null && cpu=$(taskset -pc $$ | sed 's/.*: *//; s/[-,].*//')
	# "app  596.6 instructions an op ((79493773 - 31769572) / 80000)" -> app 597
	rows() { sed -n 's/^\([a-z]*\) .*((\([0-9]*\) - \([0-9]*\)) \/ 80000)$/\1 \2 \3/p' |
		awk '{ printf "%s %.0f\n", $1, ($2 - $3) / 80000 }'; }
	while read -r row n; do v[layout_$row]=$n; done < <(
		bash "$here/scripts/layout-callgrind.sh" --cpu "$cpu" "$build" app pair bound mimalloc | rows)
	while read -r row n; do v[layout_fenced]=$n; done < <(
		ZS_OWNED_FENCED=1 bash "$here/scripts/layout-callgrind.sh" --cpu "$cpu" "$build" app | rows)
	for row in app pair bound mimalloc fenced; do
		[[ -n ${v[layout_$row]:-} ]] || { echo "doc-counts.sh: no layout count for $row" >&2; exit 1; }
	done
}

# checks KEY CMD...: how many checks CMD ran, from its last "N passed, M
# failed" line (failed ones count: the figure is how many checks there are).
count_checks() {
	local key=$1 line
	shift
	(cd "$here" && "$@") >"$tmp/checks.log" 2>&1 || true
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$tmp/checks.log" | tail -1)
	[[ -n $line ]] || { tail -5 "$tmp/checks.log" >&2; echo "doc-counts.sh: '$*' printed no count" >&2; exit 1; }
	set -- $line
	v[$key]=$(($1 + $3))
}
measure_checks() {
	count_checks checks_cli bash tests/cli/cli_errors.sh "$build"
	count_checks checks_limits "$build/test_regress_config_limits"
	count_checks checks_unpin "$build/test_regress_end_unpin"
}

# The seed is the test's default (ZS_SEED unset), the one docs/zram.md names.
measure_dict() {
	local out=$tmp/dict.log
	env -u ZS_SEED "$build/test_comp_dict" >"$out" 2>&1 || { tail -5 "$out" >&2; exit 1; }
	v[dict_seed]=$(sed -n 's/^test_comp_dict: seed \([0-9]*\).*/\1/p' "$out")
	# "zstd   level   3 dict  16384: 223476 bytes (zstd:3+dict)" -> key dict_zstd:3+dict
	local name bytes
	while read -r name bytes; do v[dict_$name]=$bytes; done < <(
		sed -n 's/.*dict *\([0-9]*\): \([0-9]*\) bytes (\([^)]*\)).*/\3@\1 \2/p' "$out" |
		sed 's/@16384 / /; s/@0 / /; /@/d')
}

if [[ -n $results ]]; then
	while IFS='=' read -r k val; do
		[[ -z $k || $k == \#* ]] && continue
		v[$k]=$val
	done <"$results"
else
	need_build
	wants api && measure_api
	wants alloc && measure_alloc
	wants checks && measure_checks
	wants dict && measure_dict
	wants layout && measure_layout
	true
fi
if [[ -n $save ]]; then
	for k in "${!v[@]}"; do printf '%s=%s\n' "$k" "${v[$k]}"; done | sort >"$save"
fi

# ---- rendering: one function per marker name ----------------------------------

val() { [[ -n ${v[$1]:-} ]] || { echo "doc-counts.sh: no measurement '$1'" >&2; exit 1; }; printf '%s' "${v[$1]}"; }
# thousands separators, as the docs write counts
th() { printf '%s' "$1" | sed -e ':a' -e 's/\([0-9]\)\([0-9]\{3\}\)\($\|,\)/\1,\2\3/; ta'; }
per() { awk -v a="$1" -v n="$2" 'BEGIN { printf "%.1f", a / n }'; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { p = 100 * (b - a) / a; s = sprintf("%.'"$3"'f", p); sub(/^-/, "−", s); printf "%s%%", s }'; }
mega() { awk -v a="$1" 'BEGIN { printf "%.1fM", a / 1e6 }'; }

api_per() { per "$(val "api_$1")" "$(($(val api_objects) * 10))"; }

render_api-table() {
	echo "| | instructions (10 iterations) | per object (read+write) |"
	echo "|---|---|---|"
	echo "| legacy | $(th "$(val api_legacy)") | $(api_per legacy) |"
	echo "| new | $(th "$(val api_new)") | $(api_per new) |"
	echo "| **new vs legacy** | **$(pct "$(val api_legacy)" "$(val api_new)" 2)** | (seed 004: −27.97% ± 0.01%) |"
	echo
	echo "Release build, $(val toolchain); $(th "$(val api_objects)") objects."
}

render_api-linear() {
	local n10 n20 d
	n10=$(val api_new) n20=$(val api_new_20)
	d=$((n20 - 2 * n10)); d=${d#-}
	echo "with 0 iterations the count is $(val api_new_0) instructions (legacy $(val api_legacy_0)), and it scales linearly (new: 10 → 20 iterations gives $(th "$n10") → $(th "$n20"), twice the count within $d instructions)"
}

render_api-summary() {
	echo "**$(pct "$(val api_legacy)" "$(val api_new)" 1)** instructions per object ($(api_per legacy) → $(api_per new); Release, $(val toolchain))"
}

alloc_per() { per "$(val "alloc_$1_incl")" "$(val "alloc_$1_calls")"; }

render_alloc-table() {
	echo "| function | calls | inclusive instructions | per call | own instructions per call |"
	echo "|---|---|---|---|---|"
	local f
	for f in $ALLOC_FNS; do
		echo "| $f | $(th "$(val "alloc_${f}_calls")") | $(mega "$(val "alloc_${f}_incl")") | $(alloc_per "$f") | $(per "$(val "alloc_${f}_self")" "$(val "alloc_${f}_calls")") |"
	done
	echo
	echo "Release build, $(val toolchain); one CPU, \`ZS_PAGES_DECAY_MS=-1\`."
}

render_alloc-summary() {
	echo "zs_malloc $(alloc_per zs_malloc), zs_free $(alloc_per zs_free) instructions per call, page allocation and free included (Release, $(val toolchain); one CPU, page-cache decay off)"
}

render_dict-bytes() {
	echo "zstd:3 $(val dict_zstd:3) -> $(val dict_zstd:3+dict) bytes and lz4 $(val dict_lz4) -> $(val dict_lz4+dict)"
}

render_layout-table() {
	echo "| row | instructions an op |"
	echo "|---|---|"
	echo "| \`app\` (\`zs_malloc_write\` + \`zs_free\`, application profile) | **$(val layout_app)** |"
	echo "| \`pair\` (\`zs_malloc\` + \`zs_obj_write\` + \`zs_free\`) | $(val layout_pair) |"
	echo "| bound (zsmalloc's layout, no locks or atomics) | $(val layout_bound) |"
	echo "| mimalloc (\`malloc\` + \`memcpy\` + \`free\`) | $(val layout_mimalloc) |"
}
render_layout-app() { val layout_app; }
render_layout-fenced() { val layout_fenced; }
render_layout-pair-extra() { echo $(($(val layout_pair) - $(val layout_app))); }

render_checks-cli() { th "$(val checks_cli)"; }
render_checks-limits() { th "$(val checks_limits)"; }
render_checks-unpin() { th "$(val checks_unpin)"; }

# ---- rewriting ----------------------------------------------------------------

group_of() { echo "${1%%-*}"; }
status=0
files=("$root/README.md" "$root"/docs/*.md)
for f in "${files[@]}"; do
	[[ -f $f ]] || continue
	grep -q 'doc-counts:begin' "$f" || continue
	# Every begin needs an end before the next begin.
	if ! awk '{ s = $0; while ((i = match(s, /doc-counts:(begin|end)/))) {
			t = substr(s, i + 11, 3); s = substr(s, i + 14)
			if (t == "beg") { if (open) exit 1; open = 1 } else { if (!open) exit 1; open = 0 } } }
		END { exit open }' "$f"; then
		echo "doc-counts.sh: ${f#$root/}: unbalanced doc-counts markers" >&2
		exit 2
	fi
	cp "$f" "$tmp/new"
	for name in $(grep -o 'doc-counts:begin [a-z0-9-]*' "$f" | awk '{ print $2 }' | sort -u); do
		# Unknown names fail whatever --only says: a misspelt one would never be rewritten.
		declare -F "render_$name" >/dev/null ||
			{ echo "doc-counts.sh: ${f#$root/}: unknown figure '$name'" >&2; exit 2; }
		wants "$(group_of "$name")" || continue
		"render_$name" >"$tmp/text"
		# On one line: the figure inline; on lines of their own: a block.
		NAME=$name TEXT="$tmp/text" perl -0777 -i -pe '
			BEGIN { open my $t, "<", $ENV{TEXT} or die; local $/; $text = <$t>; $text =~ s/\n\z// }
			s{(<!-- doc-counts:begin \Q$ENV{NAME}\E -->)(\n?)(.*?)(<!-- doc-counts:end -->)}
			 {$1 . $2 . ($2 ? "$text\n" : $text) . $4}gse' "$tmp/new"
	done
	if ! cmp -s "$f" "$tmp/new"; then
		if [[ $check == 1 ]]; then
			diff -u --label "${f#$root/} (docs)" --label "${f#$root/} (measured)" "$f" "$tmp/new" || true
			status=1
		else
			cp "$tmp/new" "$f"
			echo "doc-counts.sh: rewrote ${f#$root/}"
		fi
	fi
done
if [[ $check == 1 ]]; then
	[[ $status == 0 ]] && echo "doc-counts.sh: the docs' figures ($only) match the measurement" ||
		echo "doc-counts.sh: figures differ; run scripts/doc-counts.sh${only:+ --only $only} to rewrite them" >&2
fi
exit $status
