#!/usr/bin/env bash
# Owner: the RocksDB plugin (plugins/rocksdb) loaded into RocksDB's own
# db_bench with LD_PRELOAD, as a user would run it.  A 30,000-key DB (1 KB
# values, lz4) is read at random through a 1 MiB block cache, so most blocks
# come back from the secondary cache; it must find every key, serve hits
# (RocksDB's PERF_CONTEXT and the plugin's own counters agree there were
# some), apply 7.8's admission rules (dummy inserts, data inserts,
# advise_erase drops), and accept both URI forms; a bad option must be
# refused.  Byte-exact values are checked by test_rocksdb_plugin (a real DB
# read through the plugin), which db_bench cannot do.  Skips (77) without
# db_bench or the plugin (librocksdb-dev absent, or a sanitizer build).
# Usage: bash tests/package/rocksdb_cache.sh BUILD_DIR   (from the repository root)
set -u
build=${1:?usage: tests/package/rocksdb_cache.sh BUILD_DIR}
plugin=$build/plugins/rocksdb/libzs_rocksdb.so
db_bench=${DB_BENCH:-$(command -v db_bench || true)}
[ -n "$db_bench" ] || { echo "skip: no db_bench (apt-get install rocksdb-tools)"; exit 77; }
[ -f "$plugin" ] || { echo "skip: $plugin not built (needs librocksdb-dev)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

n=30000
"$db_bench" --db="$tmp/db" --benchmarks=fillseq --num=$n --key_size=16 --value_size=1024 \
	--compression_ratio=0.5 --compression_type=lz4 --disable_wal=1 >"$tmp/fill.log" 2>&1 ||
	{ cat "$tmp/fill.log"; echo "FAIL: fillseq"; exit 1; }

# read URI: one readrandom pass through the plugin; output in $tmp/read.log
read_with() {
	ZS_ROCKSDB_STATS=1 LD_PRELOAD="$plugin" "$db_bench" --db="$tmp/db" --use_existing_db=1 \
		--benchmarks=readrandom --num=$n --reads=$((2 * n)) --key_size=16 --value_size=1024 \
		--cache_size=1048576 --secondary_cache_uri="$1" --verify_checksum=1 --threads=1 \
		--seed=1 --perf_level=2 --statistics=1 >"$tmp/read.log" 2>&1
}
field() { grep -o "$1=[0-9]*" "$tmp/read.log" | head -1 | cut -d= -f2; }
perf() { grep -o "$1 = [0-9]*" "$tmp/read.log" | head -1 | awk '{print $3}'; }

for uri in "libzs://capacity:32M" "id=libzs;capacity=32M;codec=zstd"; do
	if ! read_with "$uri"; then
		tail -5 "$tmp/read.log"; bad "db_bench with $uri"; continue
	fi
	found=$(grep -o '([0-9]* of [0-9]* found)' "$tmp/read.log")
	[ "$found" = "($((2 * n)) of $((2 * n)) found)" ] || bad "$uri: '$found', want every key found"
	hits=$(field hits) dummy=$(field inserts_dummy) data=$(field inserts_data)
	drops=$(field advise_erase_drops) failures=$(field insert_failures)
	sec=$(perf secondary_cache_hit_count) reads=$(perf block_read_count)
	echo "$uri: $found; plugin hits=$hits inserts_dummy=$dummy inserts_data=$data" \
		"advise_erase_drops=$drops; PERF_CONTEXT secondary_cache_hit_count=$sec block_read_count=$reads"
	[ -n "$hits" ] || { bad "$uri: no statistics line from the plugin"; continue; }
	[ "$hits" -gt 0 ] || bad "$uri: no secondary-cache hits"
	[ "$hits" = "$sec" ] || bad "$uri: plugin hits $hits != RocksDB's secondary_cache_hit_count $sec"
	[ "$dummy" -gt 0 ] && [ "$data" -gt 0 ] && [ "$drops" -gt 0 ] ||
		bad "$uri: admission counters (dummy, data, drops) should all be above 0"
	[ "$failures" = 0 ] || bad "$uri: $failures insert failures"
	# Most reads come from the secondary cache: a 1 MiB block cache holds ~3% of the DB.
	[ "$hits" -gt "$reads" ] || bad "$uri: $hits secondary hits vs $reads SST block reads"
done

# A bad option is refused by name, not turned into a cache.
read_with "libzs://codec:nope"
grep -q "unknown codec 'nope'" "$tmp/read.log" || bad "a bad codec should be refused by name"

[ $fail = 0 ] && echo "rocksdb_cache: ok"
exit $fail
