// libzs's RocksDB plugin: a rocksdb::SecondaryCache (RocksDB 7.8 interface)
// that keeps evicted block-cache blocks compressed in a libzs key-value
// cache (zs/cache.h).  This header is for programs that link the plugin;
// db_bench and other unmodified programs load it with LD_PRELOAD and name it
// in a URI instead (docs/rocksdb.md).
//
// Names the plugin registers with rocksdb::ObjectLibrary::Default() when the
// library is loaded (a static initializer):
//   "libzs"                          defaults (64 MiB, lz4)
//   "libzs://ARGS"                   ARGS: a bare capacity ("libzs://64M") or
//                                    name:value pairs joined by ','
//                                    ("libzs://capacity:64M,codec:zstd,level:1");
//                                    no '=' may appear (RocksDB would parse the
//                                    whole URI as an option map)
//   "id=libzs;capacity=64M;..."      the option-map form (the options below are
//                                    registered with RegisterOptions)
// Options: capacity (bytes, K/M/G suffixes; the cache's limit in real memory:
// compressed bytes, pool pages, index), codec (none, lz4, lz4hc, zstd,
// zstd-huf: zstd with Huffman-coded literals at every level, zs/compress.h),
// level (the codec's level, 0: its default), num_shard_bits (-1: libzs's
// automatic count, else 0..12: 2^bits index shards), dict_kib (-1, the
// default: 64 with lz4, none with the other codecs; 0: none; 1..1024, lz4,
// zstd and zstd-huf only: the cache keeps a copy of the first blocks stored, about
// 100 times the dictionary and at least 2 MiB, trains a dictionary of that
// many KiB from them (zstd's trainer; lz4 uses the last 64 KiB) on a thread
// of its own, started by the Insert that completes the samples, then
// rebuilds itself with it, entries and dummies moved; destroying the cache
// waits for that thread, except in a child forked meanwhile, which has none).
//
// Admission (RocksDB 7.8's compressed secondary cache rules, so that the two
// caches differ only in how they store bytes): the first Insert of a key
// stores a dummy entry (no data, counted in memory as a small object); the
// second stores the block.  A Lookup that finds data returns it and keeps
// it (is_in_sec_cache true) unless advise_erase is true, when the data is
// dropped and a dummy kept.  A dummy is never a hit.
//
// Errors: Insert returns InvalidArgument (null value, key over 64 bytes),
// Incomplete (the block alone is over the cache's capacity or the store's
// largest object), MemoryLimit (out of memory), Corruption (the block's
// saveto callback failed); Lookup returns nullptr for a miss and for any
// failure.  The capacity must be at least 512 bytes (InvalidArgument).
//
// SetCapacity before first use sets the capacity.  After, it builds a libzs
// cache of the new capacity, copies entries into it until it is full (a
// shrink keeps the entries that fit, in index order, not the most recent)
// and frees the old one, so when it returns the memory held is within the
// new capacity; calls from other threads wait meanwhile (for as long as
// the entries moved take), the memory of both is held during the copy,
// and the dummies are not copied.  A capacity under 512 bytes or a failure
// to build is InvalidArgument and leaves the cache as it was.
//
// Statistics: with ZS_ROCKSDB_STATS set in the environment, the cache
// prints one line of counters to stderr when it is destroyed.  With
// ZS_ROCKSDB_TIMING set it also times each call's parts (CLOCK_MONOTONIC;
// calls over 100 us, a descheduled thread, left out) and prints one
// "libzs_rocksdb_timing:" line of NAME=calls:mean_ns fields: hit (a lookup
// that found a block), create (of hit: RocksDB's create callback),
// dummy_hit, miss, advise (an advise_erase drop), handle (the result
// handle), probe (Insert's index probe), ins_dummy, saveto (RocksDB's copy
// out), store (the block's zs_cache_insert), compress and decompress (the
// same block once more through a private context of the same codec: extra
// work that only timed runs do), then clock_ns (one clock read, taken off
// each mean) and slow (calls left out).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include <rocksdb/secondary_cache.h>
#include <rocksdb/utilities/object_registry.h>

namespace libzs_rocksdb {

struct SecondaryCacheOptions {
	size_t capacity = 64u << 20;
	std::string codec = "lz4";
	int level = 0;
	int num_shard_bits = -1;
	int dict_kib = -1; // the codec's default: 64 with lz4, 0 (none) with the others
};

// Counters since creation (Stats()).
struct SecondaryCacheStats {
	uint64_t lookups, hits, dummy_hits, misses, advise_erase_drops;
	uint64_t inserts_dummy, inserts_data, insert_failures, erases;
	uint64_t entries, evictions, value_bytes, stored_bytes;
	uint64_t mem_bytes;    // zs_cache_stats mem_bytes: what the cache holds, index included
	uint64_t cached_bytes; // of mem_bytes, pool pages kept for reuse (outside the capacity's count)
	uint64_t capacity;     // the current capacity
	uint64_t real_bytes;   // all the memory the cache holds (mem_bytes today)
	uint64_t resizes;      // SetCapacity calls that rebuilt the cache
	uint64_t raw_entries;  // of entries, those stored uncompressed: the dummies, and any
	                       // block compression would not shrink by a sixteenth
	uint64_t dict_bytes;   // the trained dictionary's length, 0 while there is none
	uint64_t index_bytes;  // of mem_bytes, the index's tables
	uint64_t pool_bytes;   // the pool's pages, in bytes
	uint64_t freed_bytes;  // bytes freed since the last completed compaction pass (holes)
	uint64_t key_bytes;    // the keys' bytes (inside the objects)
};

// The plugin's name ("libzs") and its registered options' name.
extern const char *const kName;

// A new cache, not yet built (it is built by PrepareOptions or on first use).
std::shared_ptr<rocksdb::SecondaryCache> NewSecondaryCache(const SecondaryCacheOptions &opts);
// The counters of a cache made by this plugin; false for any other cache.
bool GetStats(rocksdb::SecondaryCache *cache, SecondaryCacheStats *out);
// Registers the factories above in lib (done for ObjectLibrary::Default() at
// load time; for ObjectRegistry::AddLibrary).  Returns the number registered.
int RegisterFactories(rocksdb::ObjectLibrary &lib, const std::string &arg);

} // namespace libzs_rocksdb
