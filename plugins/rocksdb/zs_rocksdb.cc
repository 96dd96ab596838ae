// The RocksDB secondary cache on libzs's key-value cache: the SecondaryCache
// class, its options and admission rules, and its registration with
// RocksDB's ObjectLibrary at load time.  C++ stays in this folder: the
// library is C and reached only through its public headers.
#include "zs_rocksdb.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>
#include <mutex>
#include <shared_mutex>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>
#include <ctime>
#include <vector>

#include <rocksdb/convenience.h>
#include <rocksdb/utilities/options_type.h>

#include "zs/cache.h"
#include "zs/compress.h"

using rocksdb::Cache;
using rocksdb::ConfigOptions;
using rocksdb::OptionType;
using rocksdb::OptionTypeFlags;
using rocksdb::OptionTypeInfo;
using rocksdb::OptionVerificationType;
using rocksdb::SecondaryCache;
using rocksdb::SecondaryCacheResultHandle;
using rocksdb::Slice;
using rocksdb::Status;

namespace libzs_rocksdb {

const char *const kName = "libzs";

namespace {

// Block-cache keys are 16 bytes; a little room for other users of the interface.
constexpr size_t kMaxKey = 64;

const std::unordered_map<std::string, OptionTypeInfo> kOptionsInfo = {
	{"capacity", {offsetof(SecondaryCacheOptions, capacity), OptionType::kSizeT,
		      OptionVerificationType::kNormal, OptionTypeFlags::kNone}},
	{"codec", {offsetof(SecondaryCacheOptions, codec), OptionType::kString,
		   OptionVerificationType::kNormal, OptionTypeFlags::kNone}},
	{"level", {offsetof(SecondaryCacheOptions, level), OptionType::kInt,
		   OptionVerificationType::kNormal, OptionTypeFlags::kNone}},
	{"num_shard_bits", {offsetof(SecondaryCacheOptions, num_shard_bits), OptionType::kInt,
			    OptionVerificationType::kNormal, OptionTypeFlags::kNone}},
	{"dict_kib", {offsetof(SecondaryCacheOptions, dict_kib), OptionType::kInt,
		      OptionVerificationType::kNormal, OptionTypeFlags::kNone}},
};

// ZS_ROCKSDB_TIMING: where a hit and an insert spend their time, per call.
// The clock is CLOCK_MONOTONIC (vDSO, tens of ns here) rather than the
// thread's CPU clock, a system call of about 1 us on this VM that would
// swamp calls of a few us; an interval over 100 us is taken as the thread
// descheduled mid-call on a loaded machine, counted apart and left out of
// the means.  Compression and decompression happen inside libzs's calls;
// to split them out, a timed run also compresses and decompresses each
// stored block once more with a private context of the same codec, level
// and dictionary: those two figures cost the timed run that much extra and
// are what the codec alone takes on these blocks.
enum TimerId {
	T_HIT,	       // zs_cache_lookup_cb that found a block: index, decompress, create
	T_CREATE,      // of T_HIT: RocksDB's create callback (copy and parse the block)
	T_DUMMY_HIT,   // a lookup that found a dummy
	T_MISS,	       // a lookup that found nothing: the index probe alone
	T_ADVISE,      // advise_erase: the block replaced by a dummy
	T_HANDLE,      // the result handle's allocation
	T_PROBE,       // Insert's zs_cache_value_size: an index probe
	T_INS_DUMMY,   // zs_cache_insert of a dummy: index and pool, no codec
	T_SAVETO,      // RocksDB's saveto_cb into the scratch buffer
	T_STORE,       // zs_cache_insert of a block: compress, pool, index, evictions
	T_COMPRESS,    // the extra compression of the same block (not part of T_STORE's count)
	T_DECOMPRESS,  // the extra decompression of it
	T_COUNT
};
const char *const kTimerNames[T_COUNT] = {"hit", "create", "dummy_hit", "miss", "advise",
					  "handle", "probe", "ins_dummy", "saveto", "store",
					  "compress", "decompress"};

// The dictionary's samples (6.4 MB for 64 KiB) in a mapping of their own.
// From malloc a buffer that size is an mmapped chunk, and freeing it raises
// glibc's dynamic mmap threshold to its size and the trim threshold to twice
// that for the rest of the process: the heap then keeps up to twice that
// resident and takes blocks up to that size that would have been mapped and
// given back (zs_blob_dict_train keeps zstd's trainer under it likewise).
// In db_bench a std::vector of samples left the threshold at 6.4 MB.
class SampleBuf {
public:
	SampleBuf() = default;
	SampleBuf(const SampleBuf &) = delete;
	SampleBuf &operator=(const SampleBuf &) = delete;
	~SampleBuf() { Release(); }
	// Maps cap bytes unless mapped already; false when the mapping fails.
	bool Reserve(size_t cap)
	{
		if (p_ != nullptr)
			return true;
		void *m = mmap(nullptr, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			return false;
		p_ = static_cast<char *>(m);
		cap_ = cap;
		len_ = 0;
		return true;
	}
	// The caller checks that n bytes fit.
	void Append(const char *d, size_t n)
	{
		memcpy(p_ + len_, d, n);
		len_ += n;
	}
	void Swap(SampleBuf &o)
	{
		std::swap(p_, o.p_);
		std::swap(len_, o.len_);
		std::swap(cap_, o.cap_);
	}
	void Release()
	{
		if (p_ != nullptr)
			munmap(p_, cap_);
		p_ = nullptr;
		len_ = cap_ = 0;
	}
	const char *data() const { return p_; }
	size_t size() const { return len_; }
	size_t capacity() const { return cap_; }

private:
	char *p_ = nullptr;
	size_t len_ = 0, cap_ = 0;
};

inline uint64_t thread_ns()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

inline uint64_t cpu_ns()
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

struct Timers {
	// n counts every call; ns and the mean leave out the slow ones.
	std::atomic<uint64_t> ns[T_COUNT]{}, n[T_COUNT]{}, slow[T_COUNT]{};
	uint64_t clock_ns = 0; // one clock read's own cost, taken off each interval when printed
	void Add(TimerId id, uint64_t t0, uint64_t t1)
	{
		n[id].fetch_add(1, std::memory_order_relaxed);
		if (t1 - t0 > 100000)
			slow[id].fetch_add(1, std::memory_order_relaxed);
		else
			ns[id].fetch_add(t1 - t0, std::memory_order_relaxed);
	}
	void Calibrate()
	{
		uint64_t t0 = thread_ns(), t = t0;
		for (int i = 0; i < 1000; i++)
			t = thread_ns();
		clock_ns = (t - t0) / 1000;
	}
};

// The block is already created when Lookup returns, so a handle is always ready.
class ReadyHandle : public SecondaryCacheResultHandle {
public:
	ReadyHandle(void *value, size_t charge) : value_(value), charge_(charge) {}
	bool IsReady() override { return true; }
	void Wait() override {}
	void *Value() override { return value_; }
	size_t Size() override { return charge_; }

private:
	void *value_;
	size_t charge_;
};

struct CreateCtx {
	const Cache::CreateCallback *cb;
	Timers *timers = nullptr;
	void *obj = nullptr;
	size_t charge = 0;
	bool dummy = false;
};

// Runs under the shard's read lock (zs/cache.h): builds the block straight
// from libzs's buffer, no second copy.  Exceptions must not cross the C
// library's frames.
int create_from_value(const void *data, size_t len, void *arg)
{
	auto *ctx = static_cast<CreateCtx *>(arg);
	if (len == 0) {
		ctx->dummy = true;
		return 0;
	}
	try {
		uint64_t t0 = ctx->timers ? thread_ns() : 0;
		Status s = (*ctx->cb)(data, len, &ctx->obj, &ctx->charge);
		if (ctx->timers)
			ctx->timers->Add(T_CREATE, t0, thread_ns());
		return s.ok() ? 0 : -EIO;
	} catch (...) {
		return -ENOMEM;
	}
}

class ZsSecondaryCache : public SecondaryCache {
public:
	explicit ZsSecondaryCache(const SecondaryCacheOptions &opts) : opts_(opts)
	{
		RegisterOptions(kName, &opts_, &kOptionsInfo);
		if (std::getenv("ZS_ROCKSDB_TIMING")) {
			timers_.reset(new Timers());
			timers_->Calibrate();
		}
	}

	~ZsSecondaryCache() override
	{
		// The trainer rebuilds cache_: it finishes before the cache goes.  In
		// a child forked while it ran there is no such thread, and dict_mu_
		// may stay held by it for ever: the handle is left alone, never joined.
		if (getpid() == owner_pid_) {
			{
				std::lock_guard<std::mutex> g(dict_mu_);
				trainer_stop_ = true;
			}
			if (trainer_.joinable())
				trainer_.join();
		} else if (trainer_.joinable()) {
			new std::thread(std::move(trainer_)); // not joinable here; kept, not destroyed
		}
		if (std::getenv("ZS_ROCKSDB_STATS")) {
			SecondaryCacheStats st;
			GetStats(&st);
			std::fprintf(stderr,
				     "libzs_rocksdb: capacity=%llu codec=%s lookups=%llu hits=%llu "
				     "dummy_hits=%llu misses=%llu advise_erase_drops=%llu "
				     "inserts_dummy=%llu inserts_data=%llu insert_failures=%llu "
				     "erases=%llu entries=%llu evictions=%llu value_bytes=%llu "
				     "stored_bytes=%llu mem_bytes=%llu cached_bytes=%llu "
				     "real_bytes=%llu resizes=%llu raw_entries=%llu "
				     "dict_bytes=%llu index_bytes=%llu pool_bytes=%llu freed_bytes=%llu "
				     "key_bytes=%llu real_per_value=%.4f train_cpu_ns=%llu "
				     "rebuild_cpu_ns=%llu\n",
				     (unsigned long long)st.capacity, opts_.codec.c_str(),
				     (unsigned long long)st.lookups, (unsigned long long)st.hits,
				     (unsigned long long)st.dummy_hits, (unsigned long long)st.misses,
				     (unsigned long long)st.advise_erase_drops,
				     (unsigned long long)st.inserts_dummy,
				     (unsigned long long)st.inserts_data,
				     (unsigned long long)st.insert_failures, (unsigned long long)st.erases,
				     (unsigned long long)st.entries, (unsigned long long)st.evictions,
				     (unsigned long long)st.value_bytes,
				     (unsigned long long)st.stored_bytes,
				     (unsigned long long)st.mem_bytes, (unsigned long long)st.cached_bytes,
				     (unsigned long long)st.real_bytes, (unsigned long long)st.resizes,
				     (unsigned long long)st.raw_entries, (unsigned long long)st.dict_bytes,
				     (unsigned long long)st.index_bytes, (unsigned long long)st.pool_bytes,
				     (unsigned long long)st.freed_bytes, (unsigned long long)st.key_bytes,
				     st.value_bytes ? (double)st.real_bytes / (double)st.value_bytes : 0.0,
				     (unsigned long long)train_cpu_ns_.load(),
				     (unsigned long long)rebuild_cpu_ns_.load());
		}
		if (timers_)
			PrintTimers();
		zs_cache_destroy(cache_);
	}

	static const char *kClassName() { return kName; }
	const char *Name() const override { return kName; }

	Status PrepareOptions(const ConfigOptions &co) override
	{
		Status s = SecondaryCache::PrepareOptions(co);
		if (!s.ok())
			return s;
		std::unique_lock<std::shared_mutex> u(mu_);
		return BuildLocked();
	}

	Status Insert(const Slice &key, void *value, const Cache::CacheItemHelper *helper) override
	{
		if (value == nullptr || helper == nullptr || key.size() == 0 || key.size() > kMaxKey)
			return Status::InvalidArgument("libzs: null value or helper, or bad key length");
		std::shared_lock<std::shared_mutex> l;
		zs_cache *c = Acquire(l);
		if (c == nullptr)
			return Status::InvalidArgument("libzs: bad options (PrepareOptions says which)");
		Timers *tm = timers_.get();
		uint64_t t0 = tm ? thread_ns() : 0, t1;
		long have = zs_cache_value_size(c, key.data(), key.size());
		if (tm) {
			t1 = thread_ns();
			tm->Add(T_PROBE, t0, t1);
			t0 = t1;
		}
		if (have == -ENOENT) {
			// First eviction of this block: remember the key only.
			int rc = zs_cache_insert(c, key.data(), key.size(), nullptr, 0);
			if (tm)
				tm->Add(T_INS_DUMMY, t0, thread_ns());
			if (rc < 0)
				return Failed(rc);
			inserts_dummy_.fetch_add(1, std::memory_order_relaxed);
			return Status::OK();
		}
		size_t size = helper->size_cb(value);
		if (size == 0)
			return Status::OK(); // nothing to keep
		thread_local std::vector<char> scratch;
		if (scratch.size() < size)
			scratch.resize(size);
		if (tm)
			t0 = thread_ns();
		Status s = helper->saveto_cb(value, 0, size, scratch.data());
		if (tm) {
			t1 = thread_ns();
			tm->Add(T_SAVETO, t0, t1);
			t0 = t1;
		}
		if (!s.ok()) {
			insert_failures_.fetch_add(1, std::memory_order_relaxed);
			return Status::Corruption("libzs: saveto callback: " + s.ToString());
		}
		int rc = zs_cache_insert(c, key.data(), key.size(), scratch.data(), size);
		if (tm) {
			tm->Add(T_STORE, t0, thread_ns());
			TimeCodec(scratch.data(), size);
		}
		if (rc < 0)
			return Failed(rc);
		inserts_data_.fetch_add(1, std::memory_order_relaxed);
		if (!dict_done_.load(std::memory_order_relaxed) && Sample(scratch.data(), size)) {
			l.unlock();
			StartTrainer();
		}
		return Status::OK();
	}

	std::unique_ptr<SecondaryCacheResultHandle> Lookup(const Slice &key,
							   const Cache::CreateCallback &create_cb,
							   bool /*wait*/, bool advise_erase,
							   bool &is_in_sec_cache) override
	{
		is_in_sec_cache = false;
		lookups_.fetch_add(1, std::memory_order_relaxed);
		std::shared_lock<std::shared_mutex> l;
		zs_cache *c = Acquire(l);
		if (c == nullptr || key.size() == 0 || key.size() > kMaxKey) {
			misses_.fetch_add(1, std::memory_order_relaxed);
			return nullptr;
		}
		CreateCtx ctx;
		ctx.cb = &create_cb;
		ctx.timers = timers_.get();
		Timers *tm = ctx.timers;
		uint64_t t0 = tm ? thread_ns() : 0;
		int rc = zs_cache_lookup_cb(c, key.data(), key.size(), create_from_value, &ctx);
		if (tm)
			tm->Add(rc < 0 ? T_MISS : ctx.dummy ? T_DUMMY_HIT : T_HIT, t0, thread_ns());
		if (rc < 0 || ctx.dummy) {
			(ctx.dummy ? dummy_hits_ : misses_).fetch_add(1, std::memory_order_relaxed);
			return nullptr;
		}
		hits_.fetch_add(1, std::memory_order_relaxed);
		if (advise_erase) {
			// The primary keeps the block now: drop the bytes, keep a dummy.
			if (tm)
				t0 = thread_ns();
			if (zs_cache_insert(c, key.data(), key.size(), nullptr, 0) < 0)
				zs_cache_erase(c, key.data(), key.size());
			if (tm)
				tm->Add(T_ADVISE, t0, thread_ns());
			advise_erase_drops_.fetch_add(1, std::memory_order_relaxed);
		} else {
			is_in_sec_cache = true;
		}
		if (tm)
			t0 = thread_ns();
		std::unique_ptr<SecondaryCacheResultHandle> h(new ReadyHandle(ctx.obj, ctx.charge));
		if (tm)
			tm->Add(T_HANDLE, t0, thread_ns());
		return h;
	}

	bool SupportForceErase() const override { return true; }

	void Erase(const Slice &key) override
	{
		if (key.size() == 0 || key.size() > kMaxKey)
			return;
		std::shared_lock<std::shared_mutex> l(mu_);
		if (cache_ == nullptr)
			return;
		if (zs_cache_erase(cache_, key.data(), key.size()) == 0)
			erases_.fetch_add(1, std::memory_order_relaxed);
	}

	void WaitAll(std::vector<SecondaryCacheResultHandle *> /*handles*/) override {}

	// Before first use this only sets the capacity.  After, it builds a libzs
	// cache of the new capacity, moves the entries over until that one is
	// full (a shrink keeps what fits, in the index's order, not by
	// recency), and frees the old one: memory goes down to the new capacity
	// when the call returns.  Lookups and inserts wait meanwhile, and the
	// dummies are not copied (each block is admitted on its next two evictions).
	Status SetCapacity(size_t capacity) override
	{
		std::unique_lock<std::shared_mutex> u(mu_);
		if (cache_ == nullptr) {
			opts_.capacity = capacity;
			build_failed_ = false;
			return Status::OK();
		}
		if (capacity == opts_.capacity)
			return Status::OK();
		zs_cache *n = nullptr;
		std::string why = Make(capacity, &n);
		if (!why.empty())
			return Status::InvalidArgument("libzs: " + why);
		Move(cache_, n);
		zs_cache_destroy(cache_);
		cache_ = n;
		opts_.capacity = capacity;
		resizes_++;
		return Status::OK();
	}

	Status GetCapacity(size_t &capacity) override
	{
		std::shared_lock<std::shared_mutex> l(mu_);
		capacity = opts_.capacity;
		return Status::OK();
	}

	std::string GetPrintableOptions() const override
	{
		char buf[224];
		std::snprintf(buf, sizeof(buf), "    capacity: %zu\n    codec: %s\n    level: %d\n"
			      "    num_shard_bits: %d\n    dict_kib: %d\n", opts_.capacity,
			      opts_.codec.c_str(), opts_.level, opts_.num_shard_bits, DictKib());
		return buf;
	}

	void GetStats(SecondaryCacheStats *st)
	{
		std::memset(st, 0, sizeof(*st));
		st->lookups = lookups_.load();
		st->hits = hits_.load();
		st->dummy_hits = dummy_hits_.load();
		st->misses = misses_.load();
		st->advise_erase_drops = advise_erase_drops_.load();
		st->inserts_dummy = inserts_dummy_.load();
		st->inserts_data = inserts_data_.load();
		st->insert_failures = insert_failures_.load();
		st->erases = erases_.load();
		std::shared_lock<std::shared_mutex> l(mu_);
		st->capacity = opts_.capacity;
		st->resizes = resizes_;
		if (cache_ != nullptr) {
			struct zs_cache_stats zst;
			zs_cache_stats(cache_, &zst, sizeof(zst));
			st->entries = zst.entries;
			st->evictions = zst.evictions;
			st->value_bytes = zst.blob.value_bytes;
			st->stored_bytes = zst.blob.stored_bytes;
			st->mem_bytes = zst.mem_bytes;
			st->cached_bytes = zst.blob.cached_bytes;
			st->real_bytes = st->mem_bytes;
			st->raw_entries = zst.blob.raw_objects;
			st->dict_bytes = dict_.size();
			st->index_bytes = zst.index_bytes;
			st->pool_bytes = zst.blob.pool_pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
			st->freed_bytes = zst.blob.freed_bytes;
			st->key_bytes = zst.key_bytes;
		}
	}

private:
	// One line: per timer, calls and mean ns per call (the clock's own cost
	// taken off), then the clock's cost.
	void PrintTimers()
	{
		std::string line = "libzs_rocksdb_timing:";
		char buf[96];
		uint64_t slow = 0;
		for (int i = 0; i < T_COUNT; i++) {
			uint64_t n = timers_->n[i].load(), ns = timers_->ns[i].load(), sl = timers_->slow[i].load();
			slow += sl;
			double mean = n > sl ? (double)ns / (double)(n - sl) - (double)timers_->clock_ns : 0.0;
			std::snprintf(buf, sizeof(buf), " %s=%llu:%.0f", kTimerNames[i],
				      (unsigned long long)n, mean < 0 ? 0.0 : mean);
			line += buf;
		}
		std::snprintf(buf, sizeof(buf), " clock_ns=%llu slow=%llu\n",
			      (unsigned long long)timers_->clock_ns, (unsigned long long)slow);
		line += buf;
		std::fputs(line.c_str(), stderr);
	}

	// Timed runs only: the same block compressed and decompressed once more
	// by a context like the store's (codec, level, dictionary), one per
	// thread, remade when the dictionary changes.
	void TimeCodec(const char *data, size_t size)
	{
		struct Ctx {
			zs_comp *c = nullptr;
			uint64_t gen = 0;
			const void *owner = nullptr;
			std::vector<char> out, back;
			~Ctx() { zs_comp_destroy(c); }
		};
		thread_local Ctx t;
		const char *name = CompName();
		if (name == nullptr || size > kTimedMax)
			return;
		uint64_t gen = dict_gen_.load(std::memory_order_acquire);
		if (t.c == nullptr || t.gen != gen || t.owner != this) {
			zs_comp_destroy(t.c);
			t.c = nullptr;
			struct zs_comp_config cc;
			zs_comp_config_init(&cc);
			cc.name = name;
			cc.max_src = kTimedMax;
			cc.level = opts_.level;
			std::shared_lock<std::shared_mutex> l(mu_, std::try_to_lock);
			if (!l.owns_lock())
				return;
			if (!dict_.empty()) {
				cc.dict = dict_.data();
				cc.dict_len = dict_.size();
			}
			if (zs_comp_create(&cc, &t.c, nullptr, 0) < 0)
				return;
			t.gen = gen;
			t.owner = this;
			t.out.resize(zs_comp_bound(t.c, kTimedMax));
			t.back.resize(kTimedMax);
		}
		uint64_t t0 = thread_ns();
		int n = zs_compress(t.c, data, size, t.out.data(), t.out.size());
		uint64_t t1 = thread_ns();
		if (n <= 0)
			return;
		timers_->Add(T_COMPRESS, t0, t1);
		int m = zs_decompress(t.c, t.out.data(), static_cast<size_t>(n), t.back.data(), size);
		timers_->Add(T_DECOMPRESS, t1, thread_ns());
		(void)m;
	}

	const char *CompName() const
	{
		const std::string &k = opts_.codec;
		return k == "lz4" || k == "lz4hc" || k == "zstd" || k == "zstd-huf" ? k.c_str() : nullptr;
	}

	static constexpr size_t kTimedMax = 64 << 10;

	Status Failed(int rc)
	{
		insert_failures_.fetch_add(1, std::memory_order_relaxed);
		if (rc == -ENOMEM && opts_.capacity != 0)
			return Status::Incomplete("libzs: the block does not fit in the capacity");
		if (rc == -ENOSPC)
			return Status::Incomplete("libzs: block larger than the store's largest object");
		if (rc == -ENOMEM)
			return Status::MemoryLimit("libzs: out of memory");
		return Status::IOError("libzs: insert failed: " + std::string(std::strerror(-rc)));
	}

	// Returns with l holding mu_ shared and the cache built on first use, or nullptr.
	zs_cache *Acquire(std::shared_lock<std::shared_mutex> &l)
	{
		l = std::shared_lock<std::shared_mutex>(mu_);
		if (cache_ != nullptr || build_failed_)
			return cache_;
		l.unlock();
		{
			std::unique_lock<std::shared_mutex> u(mu_);
			BuildLocked().PermitUncheckedError();
		}
		l.lock();
		return cache_;
	}

	// mu_ held exclusive.
	Status BuildLocked()
	{
		if (cache_ != nullptr)
			return Status::OK();
		std::string why = Make(opts_.capacity, &cache_);
		build_failed_ = !why.empty();
		if (DictKib() <= 0)
			dict_done_.store(true);
		return why.empty() ? Status::OK() : Status::InvalidArgument("libzs: " + why);
	}

	// A libzs cache for capacity and opts_; "" or why not.
	std::string Make(size_t capacity, zs_cache **out)
	{
		zs_cache_config cfg;
		zs_cache_config_init(&cfg);
		const std::string &k = opts_.codec;
		if (k == "none")
			cfg.blob.codec = ZS_BLOB_NONE;
		else if (k == "lz4")
			cfg.blob.codec = ZS_BLOB_LZ4;
		else if (k == "lz4hc")
			cfg.blob.codec = ZS_BLOB_LZ4HC;
		else if (k == "zstd")
			cfg.blob.codec = ZS_BLOB_ZSTD;
		else if (k == "zstd-huf")
			cfg.blob.codec = ZS_BLOB_ZSTD_HUF;
		else
			return "unknown codec '" + k + "' (none, lz4, lz4hc, zstd, zstd-huf)";
		cfg.blob.level = opts_.level;
		if (opts_.dict_kib < -1 || opts_.dict_kib > 1024 ||
		    (opts_.dict_kib > 0 && k != "lz4" && k != "zstd" && k != "zstd-huf"))
			return "dict_kib must be -1 (the codec's default), 0 (none) or 1..1024, and "
			       "1..1024 only with lz4, zstd or zstd-huf";
		if (!dict_.empty()) {
			cfg.blob.dict = dict_.data();
			cfg.blob.dict_len = dict_.size();
		}
		// The cache's handles never leave it and are read only under the
		// index shard's lock that keeps them live, so checked mode's
		// validation of each one (about 5% of a db_bench lookup's CPU) buys
		// nothing here.
		cfg.blob.pool.checked = 0;
		// Smaller holds not one block with libzs's own structures.
		if (capacity < 512)
			return "capacity must be at least 512 bytes";
		cfg.blob.mem_limit = capacity;
		if (opts_.num_shard_bits < -1 || opts_.num_shard_bits > 12)
			return "num_shard_bits must be -1 (automatic) or 0..12";
		cfg.shards = opts_.num_shard_bits < 0 ? 0 : 1u << opts_.num_shard_bits;
		cfg.max_key = kMaxKey;
		char why[256];
		int rc = zs_cache_create(&cfg, out, why, sizeof(why));
		if (rc < 0)
			return why;
		return "";
	}

	// Copies from's entries into to until to is full (its first eviction);
	// the dummies too with dummies true.
	static void Move(zs_cache *from, zs_cache *to, bool dummies = false)
	{
		std::vector<char> buf;
		char key[kMaxKey];
		size_t klen;
		uint64_t cursor = 0;
		for (unsigned n = 1; zs_cache_next(from, &cursor, key, sizeof(key), &klen) == 0; n++) {
			long len = zs_cache_value_size(from, key, klen);
			if (len == 0 && dummies) {
				zs_cache_insert(to, key, klen, nullptr, 0);
				continue;
			}
			if (len <= 0)
				continue;
			if (buf.size() < static_cast<size_t>(len))
				buf.resize(len);
			len = zs_cache_lookup(from, key, klen, buf.data(), buf.size());
			if (len <= 0 || zs_cache_insert(to, key, klen, buf.data(), len) < 0)
				continue;
			if (n % 64 == 0) {
				struct zs_cache_stats st;
				zs_cache_stats(to, &st, sizeof(st));
				if (st.evictions)
					break;
			}
		}
	}

	// Keeps a copy of the first blocks stored while a dictionary is wanted;
	// true when there are enough to train one.
	bool Sample(const char *data, size_t size)
	{
		std::lock_guard<std::mutex> g(dict_mu_);
		if (dict_done_.load(std::memory_order_relaxed) || DictKib() <= 0)
			return false;
		if (!samples_.Reserve(SampleTarget())) {
			dict_done_.store(true);
			return false;
		}
		if (samples_.size() + size > samples_.capacity())
			return true;
		samples_.Append(data, size);
		sample_sizes_.push_back(size);
		return samples_.size() >= SampleTarget();
	}

	// dict_kib -1 (the default) is the codec's: 64 KiB for lz4, whose
	// dictionary window is 64 KiB.  On db_bench's blocks it stores them in
	// 5-6% fewer bytes, which at a capacity is about 1 point more secondary
	// hits (docs/rocksdb.md, "lz4 with a dictionary"), for a one-off
	// training of 0.6 CPU s and ~0.4 us more a read.  The other codecs
	// train none unless asked: zstd's levels already trade CPU for density.
	int DictKib() const
	{
		if (opts_.dict_kib >= 0)
			return opts_.dict_kib;
		return opts_.codec == "lz4" ? 64 : 0;
	}

	// zstd's trainer wants about 100 times the dictionary in samples; 2 MiB
	// at least (a few hundred blocks) so a small dictionary still sees many.
	size_t SampleTarget() const
	{
		size_t want = static_cast<size_t>(DictKib()) * 1024 * 100;
		return want < (2u << 20) ? (2u << 20) : want > (64u << 20) ? (64u << 20) : want;
	}

	// The training (0.6-0.7 CPU s for 64 KiB) runs on a thread of its own,
	// so that the read whose Insert completed the samples does not wait for
	// it; the cache goes on without a dictionary meanwhile, and only the
	// rebuild (tens of ms) holds the cache exclusive.  Where no thread can
	// be started it runs here, as it would have to.
	void StartTrainer()
	{
		{
			std::lock_guard<std::mutex> g(dict_mu_);
			if (trainer_started_ || trainer_stop_ || dict_done_.load())
				return;
			trainer_started_ = true;
			try {
				trainer_ = std::thread([this] { TrainAndRebuild(); });
				return;
			} catch (const std::system_error &) {
			}
		}
		TrainAndRebuild();
	}

	// Trains the dictionary from the samples (once) and moves the entries
	// into a cache built with it; on any failure the cache stays as it is,
	// without one.  lz4 uses the dictionary's last 64 KiB, which is where
	// zstd's trainer puts the content (its tables come first), so it is
	// trained 8 KiB larger than that for lz4.
	void TrainAndRebuild()
	{
		SampleBuf samples;
		std::vector<size_t> sizes;
		{
			std::lock_guard<std::mutex> g(dict_mu_);
			if (dict_done_.exchange(true))
				return;
			samples.Swap(samples_);
			sizes.swap(sample_sizes_);
		}
		size_t cap = static_cast<size_t>(DictKib()) * 1024;
		if (opts_.codec == "lz4" && cap > 65536)
			cap = 65536;
		if (opts_.codec == "lz4")
			cap += 8192;
		std::vector<char> dict(cap);
		uint64_t c0 = cpu_ns();
		long n = zs_blob_dict_train(samples.data(), sizes.data(), sizes.size(), dict.data(), cap);
		uint64_t c1 = cpu_ns();
		train_cpu_ns_ = c1 - c0;
		samples.Release();
		if (n <= 0)
			return;
		{
			std::lock_guard<std::mutex> g(dict_mu_);
			if (trainer_stop_) // the cache is being destroyed: no rebuild
				return;
		}
		dict.resize(static_cast<size_t>(n));
		std::unique_lock<std::shared_mutex> u(mu_);
		if (cache_ == nullptr)
			return;
		dict_.swap(dict);
		dict_gen_.fetch_add(1, std::memory_order_release);
		zs_cache *nc = nullptr;
		if (!Make(opts_.capacity, &nc).empty()) {
			dict_.clear();
			return;
		}
		// The dummies too: each is a block's admission half done.
		Move(cache_, nc, true);
		zs_cache_destroy(cache_);
		cache_ = nc;
		rebuild_cpu_ns_ = cpu_ns() - c1;
	}

	SecondaryCacheOptions opts_;
	std::mutex dict_mu_;
	std::atomic<bool> dict_done_{false}; // trained, failed, or not wanted
	bool trainer_started_ = false, trainer_stop_ = false; // under dict_mu_
	std::thread trainer_;
	const pid_t owner_pid_ = getpid(); // the process the trainer runs in
	SampleBuf samples_;
	std::vector<char> dict_;
	std::vector<size_t> sample_sizes_;
	// Shared by every call; exclusive to build the cache or change its capacity.
	std::shared_mutex mu_;
	bool build_failed_ = false; // bad options: first use does not retry
	zs_cache *cache_ = nullptr;
	uint64_t resizes_ = 0;
	std::atomic<uint64_t> lookups_{0}, hits_{0}, dummy_hits_{0}, misses_{0};
	std::atomic<uint64_t> advise_erase_drops_{0}, inserts_dummy_{0}, inserts_data_{0};
	std::atomic<uint64_t> insert_failures_{0}, erases_{0};
	std::unique_ptr<Timers> timers_; // ZS_ROCKSDB_TIMING only
	// The dictionary's one-off cost in the training thread's CPU time,
	// printed so that a run's CPU per read can be given without it.
	std::atomic<uint64_t> train_cpu_ns_{0}, rebuild_cpu_ns_{0};
	std::atomic<uint64_t> dict_gen_{0};
};

// "libzs://64M" or "libzs://capacity:64M,codec:zstd" -> "capacity=64M;codec=zstd".
std::string uri_args_to_options(const std::string &args)
{
	std::string out;
	size_t pos = 0;
	while (pos <= args.size()) {
		size_t end = args.find(',', pos);
		if (end == std::string::npos)
			end = args.size();
		std::string item = args.substr(pos, end - pos);
		if (!item.empty()) {
			size_t colon = item.find(':');
			if (!out.empty())
				out += ';';
			out += colon == std::string::npos ? "capacity=" + item
							  : item.substr(0, colon) + "=" + item.substr(colon + 1);
		}
		pos = end + 1;
	}
	return out;
}

SecondaryCache *factory(const std::string &uri, std::unique_ptr<SecondaryCache> *guard,
			std::string *errmsg)
{
	auto *cache = new ZsSecondaryCache(SecondaryCacheOptions());
	guard->reset(cache);
	const std::string prefix = std::string(kName) + "://";
	if (uri.compare(0, prefix.size(), prefix) == 0) {
		ConfigOptions co;
		co.ignore_unknown_options = false;
		Status s = cache->ConfigureFromString(co, uri_args_to_options(uri.substr(prefix.size())));
		if (!s.ok()) {
			*errmsg = s.ToString();
			guard->reset();
			return nullptr;
		}
	}
	return cache;
}

// Registration at load time: LD_PRELOAD'ing the library is enough.
struct AutoRegister {
	AutoRegister() { RegisterFactories(*rocksdb::ObjectLibrary::Default(), ""); }
} auto_register;

} // namespace

int RegisterFactories(rocksdb::ObjectLibrary &lib, const std::string & /*arg*/)
{
	lib.AddFactory<SecondaryCache>(rocksdb::ObjectLibrary::PatternEntry(kName, true).AddSeparator("://"),
				       factory);
	return 1;
}

std::shared_ptr<SecondaryCache> NewSecondaryCache(const SecondaryCacheOptions &opts)
{
	return std::make_shared<ZsSecondaryCache>(opts);
}

bool GetStats(SecondaryCache *cache, SecondaryCacheStats *out)
{
	auto *z = dynamic_cast<ZsSecondaryCache *>(cache);
	if (z == nullptr)
		return false;
	z->GetStats(out);
	return true;
}

} // namespace libzs_rocksdb
