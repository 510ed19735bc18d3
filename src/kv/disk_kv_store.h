// DiskKvStore: the `file` storage backend of the hierarchical cache (SGLang's HiCacheFile). Stores
// blocks of KV (a fixed number of tokens, every layer's K and V rows) as one file each under a
// directory, named by the block's chain hash (kv_block_hash.h), with a size bound and LRU
// eviction of whole files.
//
// File layout (little-endian): a fixed header (magic, version, the store's model tag, the block's
// hash and its parent's, token count, namespace length, payload size and checksum), the block's
// tokens, its namespace (extra_key) bytes, then the payload. A file is written to a temporary name
// and renamed into place, so a crash mid-write leaves no file under a block's name (the temporary
// is deleted at the next start). At start the directory is scanned: files of another model tag or
// geometry are ignored and left alone (another server may own them); a file with a bad magic or a
// size that disagrees with its header is deleted with a log line. A read checks the header and
// the payload checksum; a file that fails (truncated, corrupt, gone) is deleted and reported as a
// failed read, never as data.
//
// Threads: every method is for one owner thread (the engine thread). File I/O runs on the store's
// own thread; finished reads and writes come back through TakeCompleted, and the notifier is
// called on the I/O thread after each, to wake the owner.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/status.h"

namespace radixserve::kv {

struct DiskKvStoreOptions {
  std::string directory;
  uint64_t capacity_bytes = 0;  // bound on the files' total size (LRU eviction beyond it)
  uint64_t model_tag = 0;       // model, KV dtype and geometry (kv_block_hash.h)
  size_t block_tokens = 0;
  size_t payload_bytes = 0;  // one block's KV bytes
  // Writes queued and not yet on disk are bounded by this many bytes; Write refuses beyond it.
  uint64_t max_pending_write_bytes = 256ull << 20;
};

// One block's identity and contents.
struct KvBlock {
  uint64_t hash = 0;
  uint64_t parent_hash = 0;
  std::vector<int32_t> tokens;
  std::string extra_key;
  std::shared_ptr<const std::vector<std::byte>> payload;
};

struct DiskKvStoreStats {
  uint64_t files = 0;
  uint64_t bytes = 0;
  uint64_t written_blocks = 0;
  uint64_t read_blocks = 0;
  uint64_t failed_writes = 0;
  uint64_t failed_reads = 0;
  uint64_t dropped_writes = 0;  // refused because too many bytes were pending
  uint64_t evicted_files = 0;
};

class DiskKvStore {
 public:
  // Creates the directory if needed, scans it and starts the I/O thread. kInvalidArgument when
  // the directory cannot be created or written (the message names it).
  static Expected<std::unique_ptr<DiskKvStore>> Open(const DiskKvStoreOptions& options);
  // Finishes the queued writes, then stops the I/O thread.
  ~DiskKvStore();

  DiskKvStore(const DiskKvStore&) = delete;
  DiskKvStore& operator=(const DiskKvStore&) = delete;

  // A block with this hash is on disk (as far as the store knows).
  bool Contains(uint64_t hash) const { return index_.count(hash) != 0; }
  // On disk, or queued for writing.
  bool Has(uint64_t hash) const { return Contains(hash) || pending_writes_.count(hash) != 0; }
  // Marks the block most recently used.
  void Touch(uint64_t hash);

  // Queues a write (skipped when the block is already there or queued). False when refused
  // because the pending bytes are at their bound.
  bool Write(KvBlock block);
  // Counts blocks a caller did not offer because CanQueue said no.
  void CountDropped(uint64_t blocks) { owner_stats_.dropped_writes += blocks; }
  // Whether writes of this many more bytes would be accepted now.
  bool CanQueue(uint64_t bytes) const {
    return pending_write_bytes_ + bytes <= options_.max_pending_write_bytes;
  }
  // Queues a read of a block the store contains; the result arrives through TakeCompleted.
  void Read(uint64_t hash);

  struct Completed {
    bool is_write = false;
    bool ok = false;
    KvBlock block;         // for reads: what the file holds (payload set when ok)
    double seconds = 0.0;  // the I/O thread's time on it
  };
  // Finished reads and writes since the last call; updates the index (a written block becomes
  // Contains, a failed read's block is forgotten) and evicts beyond the capacity.
  std::vector<Completed> TakeCompleted();
  // Any thread; once it returns, the previous notifier is not running and is never called again.
  void set_notifier(std::function<void()> notifier);

  // Deletes every block file in the directory (this model's and others') and forgets them.
  // Queued writes still land afterwards.
  void Clear();
  // The model tag of new writes and of what Contains reports: blocks of the old tag are
  // forgotten (their files stay until evicted or cleared).
  void SetModelTag(uint64_t tag);

  // Blocks until the I/O queue is empty (tests, shutdown).
  void Drain();

  const DiskKvStoreOptions& options() const { return options_; }
  DiskKvStoreStats stats() const;

 private:
  explicit DiskKvStore(const DiskKvStoreOptions& options);
  struct Job {
    enum class Kind { kWrite, kRead, kDelete, kClear };
    Job() = default;
    explicit Job(Kind k, uint64_t h = 0) : kind(k), hash(h) {}
    Kind kind = Kind::kRead;
    uint64_t hash = 0;
    KvBlock block;  // writes
  };
  struct Entry {
    uint64_t bytes = 0;
    std::list<uint64_t>::iterator lru;
  };
  void Scan();
  void IoThread();
  void RunJob(Job& job);
  bool WriteFile(const KvBlock& block, std::string* error);
  bool ReadFile(uint64_t hash, KvBlock* block, std::string* error);
  std::string PathOf(uint64_t hash) const;
  void Post(Job job);
  void AddToIndex(uint64_t hash, uint64_t bytes);
  void Forget(uint64_t hash);
  void ForgetAll();
  void EvictOverCapacity();

  DiskKvStoreOptions options_;
  uint64_t file_bytes_ = 0;  // one block file's size

  // Owner-thread state.
  std::unordered_map<uint64_t, Entry> index_;
  std::list<uint64_t> lru_;  // front: least recently used
  std::unordered_set<uint64_t> pending_writes_;
  uint64_t pending_write_bytes_ = 0;
  std::mutex notify_mutex_;  // held while the notifier runs
  std::function<void()> notifier_;
  DiskKvStoreStats owner_stats_;

  // Shared with the I/O thread.
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<Job> reads_;   // served before writes
  std::deque<Job> others_;  // writes, deletes, clears in order
  std::vector<Completed> completed_;
  bool busy_ = false;
  bool stopping_ = false;
  DiskKvStoreStats io_stats_;  // the I/O thread's counters
  std::string last_write_error_;
  std::thread thread_;
};

}  // namespace radixserve::kv
