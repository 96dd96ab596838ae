// Checks the plugin linked directly (no db_bench): the registry finds it by
// each URI form and rejects bad options; the 7.8 admission rule (dummy on
// the first insert, data on the second, dummy again after advise_erase);
// blocks round-trip byte for byte; the capacity holds under eviction; a
// real DB behind a 256 KiB block cache reads every value back intact while
// most block reads are served by the plugin; SetCapacity shrinks and grows
// a cache in use; a trained dictionary (an option); codec zstd-huf against
// zstd at the same level; the ZS_ROCKSDB_TIMING line; training a dictionary
// leaves glibc's dynamic mmap threshold low.
// Random data is seeded; the seed is printed.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <malloc.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/table.h>

#include "malloc_probe.h" /* the tests' glibc malloc probes */
#include "zs_rocksdb.h"

using namespace rocksdb;

static int failures;
#define CHECK(cond)                                                                   \
	do {                                                                          \
		if (!(cond)) {                                                        \
			std::fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
			failures++;                                                   \
		}                                                                     \
	} while (0)

// Values are std::string*; the helper copies them out as RocksDB's block helper does.
static size_t size_cb(void *obj) { return static_cast<std::string *>(obj)->size(); }
static Status saveto_cb(void *from, size_t off, size_t len, void *out)
{
	std::memcpy(out, static_cast<std::string *>(from)->data() + off, len);
	return Status::OK();
}
static void del_cb(const Slice &, void *obj) { delete static_cast<std::string *>(obj); }
static const Cache::CacheItemHelper helper(size_cb, saveto_cb, del_cb);
static const Cache::CreateCallback create = [](const void *buf, size_t size, void **out,
					       size_t *charge) {
	*out = new std::string(static_cast<const char *>(buf), size);
	*charge = size;
	return Status::OK();
};

static std::string key16(unsigned i)
{
	char k[16] = {0};
	std::snprintf(k, sizeof(k), "blk%012u", i);
	return std::string(k, 16);
}

// A compressible block, as an SST data block is (~2:1 with lz4).
static std::string block(std::mt19937_64 &rng, size_t len)
{
	std::string s(len, '\0');
	for (size_t i = 0; i < len; i++)
		s[i] = (i % 8 < 4) ? static_cast<char>('a' + rng() % 26) : static_cast<char>('0' + i % 10);
	return s;
}

// Returns the block found for key (empty when none) and sets in_sec.
static std::string lookup(SecondaryCache *sc, const std::string &k, bool advise_erase, bool &in_sec)
{
	auto h = sc->Lookup(k, create, true, advise_erase, in_sec);
	if (!h)
		return "";
	CHECK(h->IsReady());
	auto *v = static_cast<std::string *>(h->Value());
	CHECK(h->Size() == v->size());
	std::string out = *v;
	delete v;
	return out;
}

static void uri_forms()
{
	ConfigOptions co;
	std::shared_ptr<SecondaryCache> sc;
	size_t cap = 0;
	CHECK(SecondaryCache::CreateFromString(co, "libzs://capacity:8M,codec:zstd,level:1", &sc).ok());
	CHECK(sc && std::strcmp(sc->Name(), "libzs") == 0);
	CHECK(sc && sc->GetCapacity(cap).ok() && cap == (8u << 20));
	sc.reset();
	CHECK(SecondaryCache::CreateFromString(co, "libzs://16M", &sc).ok());
	CHECK(sc && sc->GetCapacity(cap).ok() && cap == (16u << 20));
	sc.reset();
	CHECK(SecondaryCache::CreateFromString(co, "id=libzs;capacity=4194304;codec=lz4hc", &sc).ok());
	CHECK(sc && sc->GetCapacity(cap).ok() && cap == (4u << 20));
	sc.reset();
	CHECK(SecondaryCache::CreateFromString(co, "libzs", &sc).ok());
	CHECK(sc && sc->GetCapacity(cap).ok() && cap == (64u << 20));
	sc.reset();
	// Bad options are errors, not caches.
	CHECK(!SecondaryCache::CreateFromString(co, "libzs://codec:nope", &sc).ok());
	CHECK(!SecondaryCache::CreateFromString(co, "libzs://capacity:0", &sc).ok());
	CHECK(!SecondaryCache::CreateFromString(co, "libzs://num_shard_bits:13", &sc).ok());
	CHECK(!SecondaryCache::CreateFromString(co, "id=libzs;capacity=1M;bogus=1", &sc).ok());
	CHECK(!SecondaryCache::CreateFromString(co, "libzs://level:99,codec:zstd", &sc).ok());
}

static void admission(std::mt19937_64 &rng)
{
	libzs_rocksdb::SecondaryCacheOptions o;
	o.capacity = 8u << 20;
	auto sc = libzs_rocksdb::NewSecondaryCache(o);
	CHECK(sc->SupportForceErase());
	bool in_sec = true;
	std::string k = key16(1), v = block(rng, 4096);
	CHECK(lookup(sc.get(), k, false, in_sec).empty() && !in_sec);
	CHECK(sc->Insert(k, &v, &helper).ok()); // first eviction: dummy only
	CHECK(lookup(sc.get(), k, false, in_sec).empty() && !in_sec);
	CHECK(sc->Insert(k, &v, &helper).ok()); // second: the data
	CHECK(lookup(sc.get(), k, false, in_sec) == v && in_sec);
	CHECK(lookup(sc.get(), k, true, in_sec) == v && !in_sec); // advise_erase: data dropped
	CHECK(lookup(sc.get(), k, false, in_sec).empty());         // ... dummy kept
	CHECK(sc->Insert(k, &v, &helper).ok());                    // dummy there: data at once
	CHECK(lookup(sc.get(), k, false, in_sec) == v && in_sec);
	sc->Erase(k);
	CHECK(lookup(sc.get(), k, false, in_sec).empty());
	CHECK(sc->Insert(k, &v, &helper).ok()); // erased: a dummy again
	CHECK(lookup(sc.get(), k, false, in_sec).empty());
	CHECK(!sc->Insert(k, nullptr, &helper).ok());
	CHECK(!sc->Insert(std::string(65, 'k'), &v, &helper).ok());
	libzs_rocksdb::SecondaryCacheStats st;
	CHECK(libzs_rocksdb::GetStats(sc.get(), &st));
	CHECK(st.hits == 3 && st.advise_erase_drops == 1 && st.inserts_dummy == 2 && st.inserts_data == 2);
	CHECK(st.dummy_hits == 3 && st.misses == 2 && st.erases == 1);
	CHECK(sc->SetCapacity(8u << 20).ok()); // unchanged: nothing to do
	CHECK(sc->SetCapacity(100).IsInvalidArgument()); // under 512 bytes
	CHECK(lookup(sc.get(), k, false, in_sec).empty());
	CHECK(libzs_rocksdb::GetStats(sc.get(), &st) && st.capacity == (8u << 20) && st.resizes == 0);
}

static long rss_kib()
{
	long pages = 0, resident = 0;
	FILE *f = std::fopen("/proc/self/statm", "r");
	if (f) {
		if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2)
			resident = 0;
		std::fclose(f);
	}
	return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

// Inserts every block twice (dummy, then data); returns the hits of a pass of
// lookups, each of which must be the block's bytes or a miss.
static unsigned fill_and_check(SecondaryCache *sc, const std::vector<std::string> &vals)
{
	for (unsigned i = 0; i < vals.size(); i++) {
		CHECK(sc->Insert(key16(i), const_cast<std::string *>(&vals[i]), &helper).ok());
		CHECK(sc->Insert(key16(i), const_cast<std::string *>(&vals[i]), &helper).ok());
	}
	unsigned hits = 0;
	for (unsigned i = 0; i < vals.size(); i++) {
		bool in_sec;
		std::string got = lookup(sc, key16(i), false, in_sec);
		if (!got.empty()) {
			hits++;
			CHECK(got == vals[i]);
		}
	}
	return hits;
}

static unsigned check_all(SecondaryCache *sc, const std::vector<std::string> &vals)
{
	unsigned hits = 0;
	for (unsigned i = 0; i < vals.size(); i++) {
		bool in_sec;
		std::string got = lookup(sc, key16(i), false, in_sec);
		if (!got.empty()) {
			hits++;
			CHECK(got == vals[i]);
		}
	}
	return hits;
}

// SetCapacity after first use: a shrink gives memory back down to the new
// capacity (the process's RSS falls too) and the blocks kept still read back
// byte for byte; the cache keeps working at the new size; a grow holds more
// again; and lookups and inserts running in another thread meanwhile see
// right bytes or misses.
static void resize(std::mt19937_64 &rng)
{
	const size_t big = 32u << 20, small = 4u << 20, mid = 16u << 20;
	libzs_rocksdb::SecondaryCacheOptions o;
	o.capacity = big;
	auto sc = libzs_rocksdb::NewSecondaryCache(o);
	std::vector<std::string> vals;
	for (unsigned i = 0; i < 16000; i++)
		vals.push_back(block(rng, 2048 + rng() % 4096));
	unsigned hits_big = fill_and_check(sc.get(), vals);
	libzs_rocksdb::SecondaryCacheStats st;
	CHECK(libzs_rocksdb::GetStats(sc.get(), &st));
	uint64_t held_big = st.real_bytes - st.cached_bytes;
	long rss_big = rss_kib();
	CHECK(held_big > big / 2 && held_big <= big + big / 8);

	auto t0 = std::chrono::steady_clock::now();
	CHECK(sc->SetCapacity(small).ok());
	double shrink_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
	CHECK(libzs_rocksdb::GetStats(sc.get(), &st));
	uint64_t held_small = st.real_bytes - st.cached_bytes;
	long rss_small = rss_kib();
	size_t cap = 0;
	CHECK(sc->GetCapacity(cap).ok() && cap == small && st.capacity == small && st.resizes == 1);
	CHECK(held_small <= small + small / 8 && held_small > small / 2);
	// The old store's pages went back to the OS, not just out of the count.
	CHECK(rss_big - rss_small > static_cast<long>((big - small) / 2 / 1024));
	unsigned hits_small = check_all(sc.get(), vals);
	std::printf("resize: 32 MiB: %u of %zu blocks, held %llu B, RSS %ld KiB; SetCapacity(4 MiB): "
		    "%u blocks, held %llu B, RSS %ld KiB\n", hits_big, vals.size(),
		    (unsigned long long)held_big, rss_big, hits_small, (unsigned long long)held_small,
		    rss_small);
	CHECK(hits_small > 0 && hits_small < hits_big / 4);

	// In use at the new size: eviction keeps it within the small capacity.
	fill_and_check(sc.get(), vals);
	CHECK(libzs_rocksdb::GetStats(sc.get(), &st));
	CHECK(st.real_bytes - st.cached_bytes <= small + small / 8);

	// Grow: holds more than the small capacity allowed.
	t0 = std::chrono::steady_clock::now();
	CHECK(sc->SetCapacity(mid).ok());
	double grow_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
	unsigned hits_mid = fill_and_check(sc.get(), vals);
	CHECK(libzs_rocksdb::GetStats(sc.get(), &st));
	uint64_t held_mid = st.real_bytes - st.cached_bytes;
	std::printf("resize: SetCapacity(16 MiB): %u blocks, held %llu B; the shrink took %.1f ms, "
		    "the grow %.1f ms\n", hits_mid, (unsigned long long)held_mid, shrink_ms, grow_ms);
	CHECK(held_mid > small + small / 8 && held_mid <= mid + mid / 8);
	CHECK(hits_mid > 2 * hits_small);

	// Resizes while another thread reads and inserts.
	std::atomic<bool> stop{false};
	std::atomic<unsigned> wrong{0}, got{0};
	std::thread t([&] {
		std::mt19937_64 r(rng());
		while (!stop.load()) {
			unsigned i = static_cast<unsigned>(r() % vals.size());
			bool in_sec;
			auto h = sc->Lookup(key16(i), create, true, false, in_sec);
			if (h) {
				auto *v = static_cast<std::string *>(h->Value());
				wrong += *v != vals[i];
				got++;
				delete v;
			} else {
				sc->Insert(key16(i), const_cast<std::string *>(&vals[i]), &helper)
					.PermitUncheckedError();
			}
		}
	});
	for (int k = 0; k < 6; k++)
		CHECK(sc->SetCapacity(k % 2 ? mid : small).ok());
	stop = true;
	t.join();
	std::printf("resize under load: %u hits, %u wrong\n", got.load(), wrong.load());
	CHECK(wrong == 0);
	CHECK(libzs_rocksdb::GetStats(sc.get(), &st) && st.resizes == 8);
}

// Many blocks through a small cache: every hit is byte-exact, memory stays
// near the capacity, and eviction makes room.
static void capacity(std::mt19937_64 &rng)
{
	libzs_rocksdb::SecondaryCacheOptions o;
	o.capacity = 8u << 20;
	auto sc = libzs_rocksdb::NewSecondaryCache(o);
	const unsigned n = 6000;
	std::vector<std::string> vals;
	for (unsigned i = 0; i < n; i++)
		vals.push_back(block(rng, 2048 + rng() % 4096));
	for (unsigned i = 0; i < n; i++) {
		CHECK(sc->Insert(key16(i), &vals[i], &helper).ok());
		CHECK(sc->Insert(key16(i), &vals[i], &helper).ok());
	}
	unsigned hits = 0;
	for (unsigned i = 0; i < n; i++) {
		bool in_sec;
		std::string got = lookup(sc.get(), key16(i), false, in_sec);
		if (!got.empty()) {
			hits++;
			CHECK(got == vals[i]);
		}
	}
	libzs_rocksdb::SecondaryCacheStats st;
	CHECK(libzs_rocksdb::GetStats(sc.get(), &st));
	std::printf("capacity 8 MiB: %u of %u blocks kept, %llu evictions, mem %llu B (%llu cached), stored %llu B "
		    "for %llu B of values\n", hits, n, (unsigned long long)st.evictions,
		    (unsigned long long)st.mem_bytes, (unsigned long long)st.cached_bytes,
		    (unsigned long long)st.stored_bytes,
		    (unsigned long long)st.value_bytes);
	CHECK(hits > n / 10 && hits < n);
	CHECK(st.evictions > 0);
	// The limit counts what is held less the pages cached for reuse (zs/blob.h).
	CHECK(st.mem_bytes - st.cached_bytes < o.capacity + o.capacity / 8);
	CHECK(st.stored_bytes < st.value_bytes); // compressed
}

// A value that only its key determines, half compressible like db_bench's.
static std::string db_value(unsigned i)
{
	std::mt19937_64 r(i * 0x9e3779b97f4a7c15ull + 1);
	std::string v(1000, '\0');
	for (size_t j = 0; j < v.size(); j++)
		v[j] = j < v.size() / 2 ? static_cast<char>(r()) : static_cast<char>('a' + j % 7);
	return v;
}

static void real_db(std::mt19937_64 &rng)
{
	char dir[] = "/tmp/zs_rocksdb_test.XXXXXX";
	if (!mkdtemp(dir)) {
		CHECK(!"mkdtemp");
		return;
	}
	std::string path = std::string(dir) + "/db";
	libzs_rocksdb::SecondaryCacheOptions o;
	o.capacity = 32u << 20;
	auto sc = libzs_rocksdb::NewSecondaryCache(o);
	LRUCacheOptions lo;
	lo.capacity = 256u << 10;
	lo.num_shard_bits = 0;
	lo.secondary_cache = sc;
	BlockBasedTableOptions t;
	t.block_cache = NewLRUCache(lo);
	Options opt;
	opt.create_if_missing = true;
	opt.compression = kLZ4Compression;
	opt.table_factory.reset(NewBlockBasedTableFactory(t));
	const unsigned n = 20000;
	DB *db = nullptr;
	CHECK(DB::Open(opt, path, &db).ok());
	if (!db)
		return;
	WriteOptions wo;
	wo.disableWAL = true;
	for (unsigned i = 0; i < n; i++)
		CHECK(db->Put(wo, key16(i), db_value(i)).ok());
	CHECK(db->Flush(FlushOptions()).ok());
	unsigned found = 0, bad = 0;
	ReadOptions ro;
	ro.verify_checksums = true;
	for (unsigned pass = 0; pass < 4 * n; pass++) {
		unsigned i = static_cast<unsigned>(rng() % n);
		std::string v;
		if (db->Get(ro, key16(i), &v).ok()) {
			found++;
			bad += v != db_value(i);
		}
	}
	delete db;
	DestroyDB(path, opt).PermitUncheckedError();
	rmdir(dir);
	libzs_rocksdb::SecondaryCacheStats st;
	CHECK(libzs_rocksdb::GetStats(sc.get(), &st));
	std::printf("real DB: %u of %u reads found, %u wrong values; plugin hits %llu, dummy inserts "
		    "%llu, data inserts %llu, advise_erase drops %llu\n", found, 4 * n, bad,
		    (unsigned long long)st.hits, (unsigned long long)st.inserts_dummy,
		    (unsigned long long)st.inserts_data, (unsigned long long)st.advise_erase_drops);
	CHECK(found == 4 * n && bad == 0);
	CHECK(st.hits > n && st.inserts_dummy > 0 && st.inserts_data > 0 && st.advise_erase_drops > 0);
}

// Blocks cut from a fixed set of 64-byte pieces, as db_bench's values are
// slices of one generated buffer: a dictionary of those pieces shrinks them.
static std::string pieced_block(std::mt19937_64 &rng, const std::vector<std::string> &pieces, size_t len)
{
	std::string s;
	while (s.size() < len)
		s += pieces[rng() % pieces.size()];
	s.resize(len);
	return s;
}

static uint64_t thread_cpu_ns()
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// The dictionary is trained on a thread of the cache's own: wait for it
// (up to 20 s) before checking what it changed.
static bool wait_dict(SecondaryCache *c)
{
	libzs_rocksdb::SecondaryCacheStats st;
	for (int i = 0; i < 2000; i++) {
		if (libzs_rocksdb::GetStats(c, &st) && st.dict_bytes > 0)
			return true;
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
	}
	return false;
}

// dict_kib: the cache trains a dictionary from the first blocks stored (2 MiB
// for 16 KiB, 6.4 MB for the default 64 KiB with lz4), rebuilds itself with
// it (dummies included), and every block reads back byte for byte; the same
// blocks take less room than without one.
static void dict(std::mt19937_64 &rng)
{
	ConfigOptions co;
	std::shared_ptr<SecondaryCache> sc;
	CHECK(SecondaryCache::CreateFromString(co, "libzs://codec:lz4,dict_kib:64", &sc).ok());
	CHECK(!SecondaryCache::CreateFromString(co, "libzs://codec:lz4hc,dict_kib:16", &sc).ok());
	CHECK(!SecondaryCache::CreateFromString(co, "libzs://dict_kib:2048", &sc).ok());
	CHECK(!SecondaryCache::CreateFromString(co, "libzs://dict_kib:-2", &sc).ok());
	// The default (-1) is the codec's: lz4hc, which takes none, is not refused.
	CHECK(SecondaryCache::CreateFromString(co, "libzs://codec:lz4hc", &sc).ok());
	CHECK(SecondaryCache::CreateFromString(co, "libzs://codec:lz4hc,dict_kib:-1", &sc).ok());

	std::vector<std::string> pieces(512);
	for (auto &p : pieces)
		p = block(rng, 64);
	const unsigned n = 1700; // 6.96 MB: past the 6.4 MB a 64 KiB dictionary samples
	std::vector<std::string> blocks(n);
	for (auto &b : blocks)
		b = pieced_block(rng, pieces, 4096);
	uint64_t stored[3] = {0, 0, 0};
	// 0: dict_kib 0 (none); 1: 16 KiB; 2: the defaults (lz4, a 64 KiB dictionary).
	for (int with = 0; with < 3; with++) {
		libzs_rocksdb::SecondaryCacheOptions o;
		o.capacity = 32u << 20;
		if (with < 2)
			o.dict_kib = with ? 16 : 0;
		auto c = libzs_rocksdb::NewSecondaryCache(o);
		// Key n + 1 gets its dummy before the dictionary exists and its
		// data after: the rebuild must keep the dummy.
		std::string late = key16(n + 1);
		CHECK(c->Insert(late, &blocks[0], &helper).ok());
		// The CPU time of the slowest Insert of this thread: the training
		// (0.3-0.7 s for 64 KiB) runs on the cache's own thread, not in the
		// Insert that completes the samples.
		uint64_t slowest = 0;
		for (unsigned i = 0; i < n; i++) {
			CHECK(c->Insert(key16(i), &blocks[i], &helper).ok());
			uint64_t t0 = thread_cpu_ns();
			CHECK(c->Insert(key16(i), &blocks[i], &helper).ok());
			uint64_t t = thread_cpu_ns() - t0;
			slowest = t > slowest ? t : slowest;
		}
		std::printf("dict: dict_kib %d: the slowest data Insert took %.1f ms of its thread's CPU\n",
			    o.dict_kib, (double)slowest / 1e6);
		CHECK(slowest < 100000000u);
		libzs_rocksdb::SecondaryCacheStats st;
		if (with)
			CHECK(wait_dict(c.get()));
		CHECK(libzs_rocksdb::GetStats(c.get(), &st));
		CHECK(with ? st.dict_bytes > 0 : st.dict_bytes == 0);
		CHECK(c->Insert(late, &blocks[0], &helper).ok());
		bool in_sec = false;
		CHECK(lookup(c.get(), late, false, in_sec) == blocks[0] && in_sec);
		unsigned good = 0;
		for (unsigned i = 0; i < n; i++)
			good += lookup(c.get(), key16(i), false, in_sec) == blocks[i];
		CHECK(good == n);
		CHECK(libzs_rocksdb::GetStats(c.get(), &st) && st.entries == n + 1);
		stored[with] = st.stored_bytes;
	}
	std::printf("dict: %u blocks stored in %llu bytes without a dictionary, %llu with a 16 KiB "
		    "one, %llu with the defaults'\n", n, (unsigned long long)stored[0],
		    (unsigned long long)stored[1], (unsigned long long)stored[2]);
	CHECK(stored[1] < stored[0] * 9 / 10);
	CHECK(stored[2] < stored[0] * 9 / 10);
}

// db_bench's values: random printable strings, each followed by a copy.
static std::string printable_block(std::mt19937_64 &rng, size_t len)
{
	std::string b;
	while (b.size() < len) {
		std::string piece(50, ' ');
		for (auto &ch : piece)
			ch = static_cast<char>(' ' + rng() % 95);
		b += piece + piece;
	}
	b.resize(len);
	return b;
}

// A cache with lz4 and a 64 KiB dictionary trains it from 6.4 MB of
// db_bench-like blocks; afterwards a 1 MiB malloc is still mapped.  glibc
// raises its mmap threshold to the size of any mapped chunk freed (up to 32
// MiB) for the rest of the process, and the heap then keeps blocks that size
// resident: samples kept in a std::vector (6.4 MB freed) or zstd's default
// trainer (4 MiB tables freed) leave it at 4-6.4 MB and the 1 MiB block comes
// from the heap.  Runs first, before anything else frees a large block.
static void dict_mmap_threshold(std::mt19937_64 &rng)
{
	if (!tu_glibc_malloc()) {
		std::printf("dict_mmap_threshold: malloc is not glibc's, not checked\n");
		return;
	}
	libzs_rocksdb::SecondaryCacheOptions o;
	o.capacity = 32u << 20;
	o.dict_kib = 64;
	auto c = libzs_rocksdb::NewSecondaryCache(o);
	std::vector<std::string> blocks(1700);
	for (auto &b : blocks)
		b = printable_block(rng, 4096);
	libzs_rocksdb::SecondaryCacheStats st;
	for (unsigned i = 0; i < blocks.size(); i++) {
		CHECK(c->Insert(key16(i), &blocks[i], &helper).ok());
		CHECK(c->Insert(key16(i), &blocks[i], &helper).ok());
	}
	CHECK(wait_dict(c.get()));
	CHECK(libzs_rocksdb::GetStats(c.get(), &st) && st.dict_bytes > 0);
	bool m = tu_malloc_mapped(1u << 20, 1);
	std::printf("dict_mmap_threshold: %llu B dictionary trained; then a 1 MiB malloc is %s\n",
		    (unsigned long long)st.dict_bytes, m ? "mapped" : "from the heap");
	CHECK(m);
}

// codec:zstd-huf stores such blocks in well under zstd's bytes at level -1,
// and reads them back byte for byte; with ZS_ROCKSDB_TIMING the timed run
// gives the same bytes and its destructor prints one timing line whose
// call counts are the cache's own.
static void zstd_huf_and_timing(std::mt19937_64 &rng)
{
	const unsigned n = 400;
	std::vector<std::string> blocks(n);
	for (auto &b : blocks)
		b = printable_block(rng, 4096);
	uint64_t stored[2] = {0, 0};
	const char *codecs[2] = {"zstd", "zstd-huf"};
	for (int k = 0; k < 2; k++) {
		libzs_rocksdb::SecondaryCacheOptions o;
		o.capacity = 32u << 20;
		o.codec = codecs[k];
		o.level = -1;
		auto c = libzs_rocksdb::NewSecondaryCache(o);
		for (unsigned i = 0; i < n; i++) {
			CHECK(c->Insert(key16(i), &blocks[i], &helper).ok());
			CHECK(c->Insert(key16(i), &blocks[i], &helper).ok());
		}
		bool in_sec = false;
		unsigned good = 0;
		for (unsigned i = 0; i < n; i++)
			good += lookup(c.get(), key16(i), false, in_sec) == blocks[i];
		CHECK(good == n);
		libzs_rocksdb::SecondaryCacheStats st;
		CHECK(libzs_rocksdb::GetStats(c.get(), &st));
		stored[k] = st.stored_bytes;
	}
	std::printf("zstd-huf: %u blocks in %llu bytes at level -1, zstd %llu\n", n,
		    (unsigned long long)stored[1], (unsigned long long)stored[0]);
	CHECK(stored[1] < stored[0] * 95 / 100);

	// The timing line goes to stderr when the cache is destroyed: catch it in a file.
	setenv("ZS_ROCKSDB_TIMING", "1", 1);
	libzs_rocksdb::SecondaryCacheOptions o;
	o.codec = "zstd-huf";
	auto c = libzs_rocksdb::NewSecondaryCache(o);
	unsetenv("ZS_ROCKSDB_TIMING");
	for (unsigned i = 0; i < 100; i++) {
		CHECK(c->Insert(key16(i), &blocks[i], &helper).ok());
		CHECK(c->Insert(key16(i), &blocks[i], &helper).ok());
	}
	bool in_sec = false;
	unsigned good = 0;
	for (unsigned i = 0; i < 150; i++)
		good += lookup(c.get(), key16(i), false, in_sec) == (i < 100 ? blocks[i] : "");
	CHECK(good == 150);
	char path[] = "/tmp/zs_rocksdb_timing.XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	std::fflush(stderr);
	int saved = dup(2);
	dup2(fd, 2);
	c.reset();
	std::fflush(stderr);
	dup2(saved, 2);
	close(saved);
	std::string text(4096, '\0');
	ssize_t got = pread(fd, &text[0], text.size(), 0);
	close(fd);
	unlink(path);
	text.resize(got > 0 ? static_cast<size_t>(got) : 0);
	std::printf("timing line: %s", text.c_str());
	CHECK(text.find("libzs_rocksdb_timing:") != std::string::npos);
	// 100 hits, 50 misses, 200 probes (one per Insert), 100 dummies and 100 blocks stored.
	for (const char *f : {" hit=100:", " miss=50:", " probe=200:", " ins_dummy=100:", " store=100:",
			      " compress=100:", " decompress=100:"})
		CHECK(text.find(f) != std::string::npos);
}

// A child forked while the cache trains its dictionary has no training
// thread: destroying the cache there must neither wait for it nor take the
// lock it may have held at the fork.  The child destroys its copy and
// exits; the parent's cache finishes its training as usual.
static void fork_while_training(std::mt19937_64 &rng)
{
	libzs_rocksdb::SecondaryCacheOptions o;
	o.capacity = 32u << 20;
	auto c = libzs_rocksdb::NewSecondaryCache(o);
	std::vector<std::string> blocks(1700);
	for (auto &b : blocks)
		b = printable_block(rng, 4096);
	for (unsigned i = 0; i < blocks.size(); i++) {
		CHECK(c->Insert(key16(i), &blocks[i], &helper).ok());
		CHECK(c->Insert(key16(i), &blocks[i], &helper).ok());
	}
	libzs_rocksdb::SecondaryCacheStats st;
	bool training = libzs_rocksdb::GetStats(c.get(), &st) && st.dict_bytes == 0;
	pid_t pid = fork();
	if (pid == 0) {
		alarm(20);
		c.reset();
		_exit(0);
	}
	CHECK(pid > 0);
	int status = -1;
	for (int i = 0; i < 1000 && pid > 0; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
	}
	std::printf("fork while training (%s at the fork): the child %s\n",
		    training ? "training" : "trained",
		    WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "destroyed its cache and exited"
								   : "did not exit in 10 s");
	if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		CHECK(false);
	}
	CHECK(wait_dict(c.get()));
}

int main()
{
	unsigned long seed = std::getenv("SEED") ? std::strtoul(std::getenv("SEED"), nullptr, 0) : 20261204;
	std::printf("seed %lu\n", seed);
	std::mt19937_64 rng(seed);
	dict_mmap_threshold(rng);
	uri_forms();
	admission(rng);
	capacity(rng);
	resize(rng);
	real_db(rng);
	dict(rng);
	fork_while_training(rng);
	zstd_huf_and_timing(rng);
	if (failures) {
		std::fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	std::printf("ok\n");
	return 0;
}
