#!/usr/bin/env bash
# Owner: `--profile kernel|app` on the zs commands that build a pool.  It must
# be a name for what the flags already spell: --profile app gives the same
# output as --class-shards auto --free-mode class --fit-zspages, --profile
# kernel the same as no flag; flags beside it change single fields whatever
# the order; a bad word, and app on a kernel-only command, exit 2 with a
# message naming what is accepted.
# Outputs are compared with the timing and RSS fields removed (they differ
# from run to run); the runs are pinned to one CPU where taskset exists, so
# that the app profile's per-CPU class copies are the same copy each run.
# Usage: bash tests/cli/cli_profile.sh BUILD_DIR   (from the repository root)
set -u
build=${1:?usage: tests/cli/cli_profile.sh BUILD_DIR}
zs=$build/zs
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib/cli.sh"   # expect, expect_out, check, cli_done

pin=()
command -v taskset >/dev/null && taskset -c 0 true 2>/dev/null && pin=(taskset -c 0)
input=$build/zs   # any non-empty file: its pages are the workload

# run NAME ARGS...: zs's stdout, timing/RSS fields dropped, into $tmp/NAME.
run() {
	local name=$1
	shift
	"${pin[@]}" "$zs" "$@" 2>"$tmp/$name.err" |
		sed -E 's/"[A-Za-z_]*(_ops|_s|_ns|_MBps|rss_delta|rss_growth|seconds)": [-0-9.e+]+,? ?//g' \
			>"$tmp/$name"
	echo "${PIPESTATUS[0]}" >"$tmp/$name.rc"
}
# same A B WHAT: both runs exited 0 with identical, non-empty output.
same() {
	check "$3" bash -c "[ \"\$(cat '$tmp/$1.rc')\" = 0 ] && [ \"\$(cat '$tmp/$2.rc')\" = 0 ] \
		&& [ -s '$tmp/$1' ] && cmp -s '$tmp/$1' '$tmp/$2'"
}
# differ A B WHAT: both exited 0 and the outputs differ (the profile changed something).
differ() {
	check "$3" bash -c "[ \"\$(cat '$tmp/$1.rc')\" = 0 ] && [ \"\$(cat '$tmp/$2.rc')\" = 0 ] \
		&& ! cmp -s '$tmp/$1' '$tmp/$2'"
}
APP=(--class-shards auto --free-mode class --fit-zspages)

# compare: the mix workload, zsmalloc only; compaction shows --fit-zspages.
C=(compare --workloads mix --mix-n 3000 --backends zsmalloc --page-size 4096 --repeat 1 --json)
run c_none "${C[@]}"
run c_kern "${C[@]}" --profile kernel
run c_app "${C[@]}" --profile app
run c_flags "${C[@]}" "${APP[@]}"
run c_pre "${C[@]}" --fit-zspages --profile app --free-mode class --class-shards auto
same c_none c_kern "compare: --profile kernel = no flag"
same c_app c_flags "compare: --profile app = ${APP[*]}"
same c_app c_pre "compare: --profile app = the same flags around it"
differ c_none c_app "compare: --profile app changes the result"
# A flag overrides the profile's field, before or after it.
run c_app1 "${C[@]}" --profile app --class-shards 1
run c_app1b "${C[@]}" --class-shards 1 --profile app
run c_fl1 "${C[@]}" --free-mode class --fit-zspages
same c_app1 c_fl1 "compare: --profile app --class-shards 1 = --free-mode class --fit-zspages"
same c_app1b c_fl1 "compare: --class-shards 1 --profile app = the same"
run c_kapp "${C[@]}" --profile app --profile kernel
same c_none c_kapp "compare: the last --profile wins"

# zram: mm_stat of one file's pages.
Z=(zram --max 1M --json --quiet "$input")
run z_none "${Z[@]}"
run z_kern "${Z[@]}" --profile kernel
run z_app "${Z[@]}" --profile app
run z_flags "${Z[@]}" "${APP[@]}"
same z_none z_kern "zram: --profile kernel = no flag"
same z_app z_flags "zram: --profile app = ${APP[*]}"

# zswap: fill, churn, compaction, drain on zsmalloc.
W=(zswap --backends zsmalloc --max 1M --json --quiet "$input")
run w_none "${W[@]}"
run w_kern "${W[@]}" --profile kernel
run w_app "${W[@]}" --profile app
run w_flags "${W[@]}" "${APP[@]}"
same w_none w_kern "zswap: --profile kernel = no flag"
same w_app w_flags "zswap: --profile app = ${APP[*]}"

# soak: its first line states the pool's configuration.
S=(soak --seconds 0.2 --threads 1 --objects 256 --slots 64 --seed 7 --quiet)
for v in none kern app flags; do
	case $v in
	none) a=() ;; kern) a=(--profile kernel) ;; app) a=(--profile app) ;; flags) a=("${APP[@]}") ;;
	esac
	"$zs" "${S[@]}" "${a[@]}" >"$tmp/s_full_$v" 2>&1
	echo $? >"$tmp/s_$v.rc"
	head -1 "$tmp/s_full_$v" >"$tmp/s_$v"
done
same s_none s_kern "soak: --profile kernel = no flag"
same s_app s_flags "soak: --profile app = ${APP[*]}"
check "soak: --profile app is free mode class, fit zspages" grep -q "free mode 1, .*fit zspages" "$tmp/s_app"

# The kernel-only commands take kernel, and change nothing with it.
run k_none classes --json
run k_kern classes --json --profile kernel
same k_none k_kern "classes: --profile kernel = no flag"
run t_none testmod --count 2 --step 512 --json
run t_kern testmod --count 2 --step 512 --json --profile kernel
same t_none t_kern "testmod: --profile kernel = no flag"
trace=tests/data/usrlib-lz4.trace.xz
if [ -s "$trace" ]; then
	run r_kern replay "$trace" --json --profile kernel
	check "replay: --profile kernel replays page-exact (exit 0)" grep -qx 0 "$tmp/r_kern.rc"
fi

# Refused: a bad word names the accepted ones; app where only kernel is right.
for c in compare zram zswap classes testmod replay region; do
	expect 2 "--profile: 'kern' is not one of: kernel, app" "$c" --profile kern
done
expect 2 "--profile: 'apps' is not one of: kernel, app" soak --profile apps
expect 2 "option '--profile' requires an argument" compare --profile
for c in classes testmod; do
	expect 2 "--profile app: this command runs the kernel profile only.*accepted here: kernel" \
		"$c" --profile app
done
expect 2 "--profile app: this command runs the kernel profile only.*accepted here: kernel" \
	replay "$trace" --profile app
expect 2 "--profile app: --vs-kernel needs the kernel profile" \
	zram --vs-kernel --profile app "$input"
expect 2 "--profile does not apply to this command" report --profile kernel
# Help states the default and the rule.
for c in compare zram zswap region soak; do
	expect_out 0 "the profile sets the defaults" help "$c"
done
for c in classes testmod replay; do
	expect_out 0 "--profile app is refused" help "$c"
done
expect_out 0 "--profile" help

cli_done cli_profile
