#include "kv/disk_kv_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <utility>

#include "common/log.h"
#include "kv/kv_block_hash.h"

namespace radixserve::kv {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'R', 'X', 'K', 'V', 'B', 'L', 'K', '1'};
constexpr uint32_t kVersion = 1;
constexpr std::string_view kSuffix = ".rkv";
constexpr std::string_view kTempSuffix = ".tmp";

struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;  // this struct + tokens + extra_key: where the payload starts
  uint64_t model_tag;
  uint64_t hash;
  uint64_t parent_hash;
  uint64_t payload_bytes;
  uint64_t payload_checksum;
  uint32_t block_tokens;
  uint32_t extra_key_bytes;
};
static_assert(sizeof(FileHeader) == 64);

// Bytes before the payload: the header, the block's tokens and its namespace.
uint64_t HeaderBytes(uint64_t block_tokens, uint64_t extra_key_bytes) {
  return sizeof(FileHeader) + block_tokens * sizeof(int32_t) + extra_key_bytes;
}

uint64_t Checksum(const std::vector<std::byte>& payload) {
  return HashBytes(0x5eed, payload.data(), payload.size());
}

bool WriteAll(int fd, const void* data, size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// Reads exactly size bytes; false on an error or a short file (errno 0 then).
bool ReadAll(int fd, void* data, size_t size) {
  auto* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = ::read(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) {
      errno = 0;
      return false;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

std::string ErrnoText(const char* what) {
  return std::string(what) + ": " + (errno != 0 ? std::strerror(errno) : "file too short");
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

DiskKvStore::DiskKvStore(const DiskKvStoreOptions& options) : options_(options) {}

Expected<std::unique_ptr<DiskKvStore>> DiskKvStore::Open(const DiskKvStoreOptions& options) {
  if (options.directory.empty()) return InvalidArgument("the KV storage directory is empty");
  if (options.block_tokens == 0 || options.payload_bytes == 0) {
    return InvalidArgument("KV storage blocks must hold at least one token");
  }
  std::error_code ec;
  fs::create_directories(options.directory, ec);
  if (ec || !fs::is_directory(options.directory)) {
    return InvalidArgument("cannot create the KV storage directory " + options.directory + ": " +
                           (ec ? ec.message() : std::string("not a directory")));
  }
  if (::access(options.directory.c_str(), W_OK | X_OK) != 0) {
    return InvalidArgument("the KV storage directory " + options.directory +
                           " is not writable: " + std::strerror(errno));
  }
  // A file size limit (RLIMIT_FSIZE) must fail a write with EFBIG, not kill the server.
  std::signal(SIGXFSZ, SIG_IGN);
  std::unique_ptr<DiskKvStore> store(new DiskKvStore(options));
  store->Scan();
  store->thread_ = std::thread([raw = store.get()] { raw->IoThread(); });
  return store;
}

DiskKvStore::~DiskKvStore() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string DiskKvStore::PathOf(uint64_t hash) const {
  char name[24];
  std::snprintf(name, sizeof(name), "%016llx", static_cast<unsigned long long>(hash));
  return options_.directory + "/" + name + std::string(kSuffix);
}

void DiskKvStore::Scan() {
  struct Found {
    fs::file_time_type mtime;
    uint64_t hash;
    uint64_t bytes;
  };
  std::vector<Found> found;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(options_.directory, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string path = entry.path().string();
    std::error_code ignored;
    if (name.ends_with(kTempSuffix) && name.find(kSuffix) != std::string::npos) {
      RADIX_LOG_INFO("KV storage: removing {}, a write that did not finish", path);
      fs::remove(entry.path(), ignored);
      continue;
    }
    if (!name.ends_with(kSuffix) || !entry.is_regular_file(ignored)) continue;
    FileHeader header{};
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    const bool read_ok = ReadAll(fd, &header, sizeof(header));
    ::close(fd);
    const uint64_t size = entry.file_size(ignored);
    if (!read_ok || std::memcmp(header.magic, kMagic, sizeof(kMagic)) != 0 ||
        size != uint64_t{header.header_bytes} + header.payload_bytes) {
      RADIX_LOG_WARN("KV storage: deleting {}: not a complete block file", path);
      fs::remove(entry.path(), ignored);
      continue;
    }
    // Another model, KV dtype, geometry or format version: not ours to use or delete.
    if (header.version != kVersion || header.model_tag != options_.model_tag ||
        header.block_tokens != options_.block_tokens ||
        header.payload_bytes != options_.payload_bytes || PathOf(header.hash) != path) {
      continue;
    }
    found.push_back({entry.last_write_time(ignored), header.hash, size});
  }
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.mtime < b.mtime; });
  for (const Found& f : found) AddToIndex(f.hash, f.bytes);
  if (!found.empty()) {
    RADIX_LOG_INFO("KV storage: {} blocks ({:.1f} MB) of this model found in {}", found.size(),
                   static_cast<double>(owner_stats_.bytes) / 1e6, options_.directory);
  }
  EvictOverCapacity();
}

void DiskKvStore::AddToIndex(uint64_t hash, uint64_t bytes) {
  if (index_.count(hash) != 0) return;
  lru_.push_back(hash);
  index_[hash] = Entry{bytes, std::prev(lru_.end())};
  owner_stats_.bytes += bytes;
  ++owner_stats_.files;
}

void DiskKvStore::Forget(uint64_t hash) {
  auto it = index_.find(hash);
  if (it == index_.end()) return;
  owner_stats_.bytes -= it->second.bytes;
  --owner_stats_.files;
  lru_.erase(it->second.lru);
  index_.erase(it);
}

void DiskKvStore::set_notifier(std::function<void()> notifier) {
  std::lock_guard<std::mutex> lock(notify_mutex_);
  notifier_ = std::move(notifier);
}

void DiskKvStore::Touch(uint64_t hash) {
  auto it = index_.find(hash);
  if (it == index_.end()) return;
  lru_.splice(lru_.end(), lru_, it->second.lru);
}

void DiskKvStore::EvictOverCapacity() {
  while (owner_stats_.bytes > options_.capacity_bytes && !lru_.empty()) {
    const uint64_t victim = lru_.front();
    Forget(victim);
    ++owner_stats_.evicted_files;
    Post(Job(Job::Kind::kDelete, victim));
  }
}

bool DiskKvStore::Write(KvBlock block) {
  if (Has(block.hash)) return true;
  RADIX_CHECK(block.payload != nullptr && block.payload->size() == options_.payload_bytes);
  RADIX_CHECK(block.tokens.size() == options_.block_tokens);
  const uint64_t bytes = block.payload->size();
  if (!CanQueue(bytes)) {
    ++owner_stats_.dropped_writes;
    return false;
  }
  pending_write_bytes_ += bytes;
  pending_writes_.insert(block.hash);
  Job job(Job::Kind::kWrite, block.hash);
  job.block = std::move(block);
  Post(std::move(job));
  return true;
}

void DiskKvStore::Read(uint64_t hash) {
  Touch(hash);
  Post(Job(Job::Kind::kRead, hash));
}

void DiskKvStore::ForgetAll() {
  index_.clear();
  lru_.clear();
  owner_stats_.files = 0;
  owner_stats_.bytes = 0;
}

void DiskKvStore::Clear() {
  ForgetAll();
  Post(Job(Job::Kind::kClear));
}

void DiskKvStore::SetModelTag(uint64_t tag) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    options_.model_tag = tag;
  }
  ForgetAll();
}

void DiskKvStore::Post(Job job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    (job.kind == Job::Kind::kRead ? reads_ : others_).push_back(std::move(job));
  }
  wake_.notify_one();
}

void DiskKvStore::Drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] { return reads_.empty() && others_.empty() && !busy_; });
}

std::vector<DiskKvStore::Completed> DiskKvStore::TakeCompleted() {
  std::vector<Completed> done;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done.swap(completed_);
  }
  for (const Completed& c : done) {
    if (c.is_write) {
      pending_writes_.erase(c.block.hash);
      pending_write_bytes_ -= options_.payload_bytes;
      if (c.ok) {
        AddToIndex(c.block.hash, HeaderBytes(c.block.tokens.size(), c.block.extra_key.size()) +
                                     options_.payload_bytes);
      } else if (owner_stats_.bytes > 0 && options_.capacity_bytes > owner_stats_.bytes) {
        // The disk (or a size limit) said no: what is stored now is the most there is room for,
        // so later writes make room by evicting the oldest blocks.
        options_.capacity_bytes = owner_stats_.bytes;
        RADIX_LOG_WARN("KV storage: capacity lowered to {:.1f} MB after a failed write",
                       static_cast<double>(options_.capacity_bytes) / 1e6);
      }
    } else if (!c.ok) {
      Forget(c.block.hash);
    }
  }
  EvictOverCapacity();
  return done;
}

DiskKvStoreStats DiskKvStore::stats() const {
  DiskKvStoreStats out = owner_stats_;
  std::lock_guard<std::mutex> lock(mutex_);
  out.written_blocks = io_stats_.written_blocks;
  out.read_blocks = io_stats_.read_blocks;
  out.failed_writes = io_stats_.failed_writes;
  out.failed_reads = io_stats_.failed_reads;
  return out;
}

void DiskKvStore::IoThread() {
  while (true) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !reads_.empty() || !others_.empty(); });
      if (reads_.empty() && others_.empty()) break;  // stopping, nothing left
      std::deque<Job>& queue = !reads_.empty() ? reads_ : others_;
      job = std::move(queue.front());
      queue.pop_front();
      busy_ = true;
    }
    RunJob(job);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      busy_ = false;
      if (reads_.empty() && others_.empty()) idle_.notify_all();
    }
    if (job.kind == Job::Kind::kRead || job.kind == Job::Kind::kWrite) {
      std::lock_guard<std::mutex> lock(notify_mutex_);
      if (notifier_) notifier_();
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  idle_.notify_all();
}

void DiskKvStore::RunJob(Job& job) {
  std::error_code ignored;
  switch (job.kind) {
    case Job::Kind::kDelete:
      fs::remove(PathOf(job.hash), ignored);
      return;
    case Job::Kind::kClear: {
      std::error_code ec;
      for (const fs::directory_entry& entry : fs::directory_iterator(options_.directory, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.find(kSuffix) != std::string::npos) fs::remove(entry.path(), ignored);
      }
      return;
    }
    case Job::Kind::kWrite: {
      const auto start = std::chrono::steady_clock::now();
      std::string error;
      const bool ok = WriteFile(job.block, &error);
      const double seconds = SecondsSince(start);
      std::lock_guard<std::mutex> lock(mutex_);
      if (ok) {
        ++io_stats_.written_blocks;
        last_write_error_.clear();
      } else {
        ++io_stats_.failed_writes;
        if (error != last_write_error_) {
          RADIX_LOG_WARN("KV storage: write failed, the block is dropped: {}", error);
          last_write_error_ = error;
        }
      }
      Completed done{true, ok, std::move(job.block), seconds};
      done.block.payload.reset();
      completed_.push_back(std::move(done));
      return;
    }
    case Job::Kind::kRead: {
      const auto start = std::chrono::steady_clock::now();
      Completed done{false, false, {}, 0.0};
      done.block.hash = job.hash;
      std::string error;
      done.ok = ReadFile(job.hash, &done.block, &error);
      done.seconds = SecondsSince(start);
      if (!done.ok) {
        RADIX_LOG_WARN("KV storage: {}; the block is recomputed", error);
        done.block.payload.reset();
      }
      std::lock_guard<std::mutex> lock(mutex_);
      ++(done.ok ? io_stats_.read_blocks : io_stats_.failed_reads);
      completed_.push_back(std::move(done));
      return;
    }
  }
}

bool DiskKvStore::WriteFile(const KvBlock& block, std::string* error) {
  const std::string path = PathOf(block.hash);
  // Unique per process and store: data-parallel replicas share a directory.
  static std::atomic<uint64_t> next_temp{0};
  const std::string temp = path + "." + std::to_string(::getpid()) + "-" +
                           std::to_string(next_temp.fetch_add(1)) + std::string(kTempSuffix);
  FileHeader header{};
  std::memcpy(header.magic, kMagic, sizeof(kMagic));
  header.version = kVersion;
  header.header_bytes =
      static_cast<uint32_t>(HeaderBytes(block.tokens.size(), block.extra_key.size()));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    header.model_tag = options_.model_tag;
  }
  header.hash = block.hash;
  header.parent_hash = block.parent_hash;
  header.payload_bytes = block.payload->size();
  header.payload_checksum = Checksum(*block.payload);
  header.block_tokens = static_cast<uint32_t>(block.tokens.size());
  header.extra_key_bytes = static_cast<uint32_t>(block.extra_key.size());

  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    *error = ErrnoText(("open " + temp).c_str());
    return false;
  }
  bool ok = WriteAll(fd, &header, sizeof(header)) &&
            WriteAll(fd, block.tokens.data(), block.tokens.size() * sizeof(int32_t)) &&
            WriteAll(fd, block.extra_key.data(), block.extra_key.size()) &&
            WriteAll(fd, block.payload->data(), block.payload->size());
  if (!ok) *error = ErrnoText(("write " + temp).c_str());
  if (::close(fd) != 0 && ok) {
    ok = false;
    *error = ErrnoText(("close " + temp).c_str());
  }
  if (ok && ::rename(temp.c_str(), path.c_str()) != 0) {
    ok = false;
    *error = ErrnoText(("rename " + temp).c_str());
  }
  if (!ok) ::unlink(temp.c_str());
  return ok;
}

bool DiskKvStore::ReadFile(uint64_t hash, KvBlock* block, std::string* error) {
  const std::string path = PathOf(hash);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = ErrnoText(("open " + path).c_str());
    return false;
  }
  FileHeader header{};
  uint64_t model_tag;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    model_tag = options_.model_tag;
  }
  bool ok = ReadAll(fd, &header, sizeof(header));
  bool ours = true;  // a file of another model (the tag changed meanwhile) is left alone
  if (!ok) {
    *error = ErrnoText(("read " + path).c_str());
  } else if (header.model_tag != model_tag) {
    ok = false;
    ours = false;
    *error = path + " belongs to another model";
  } else if (std::memcmp(header.magic, kMagic, sizeof(kMagic)) != 0 || header.version != kVersion ||
             header.hash != hash || header.block_tokens != options_.block_tokens ||
             header.payload_bytes != options_.payload_bytes ||
             header.header_bytes != HeaderBytes(header.block_tokens, header.extra_key_bytes) ||
             header.extra_key_bytes > (1u << 20)) {
    ok = false;
    *error = path + " has a header that does not match its name, model or geometry";
  }
  auto payload = std::make_shared<std::vector<std::byte>>();
  if (ok) {
    block->parent_hash = header.parent_hash;
    block->tokens.resize(header.block_tokens);
    block->extra_key.resize(header.extra_key_bytes);
    payload->resize(header.payload_bytes);
    ok = ReadAll(fd, block->tokens.data(), block->tokens.size() * sizeof(int32_t)) &&
         ReadAll(fd, block->extra_key.data(), block->extra_key.size()) &&
         ReadAll(fd, payload->data(), payload->size());
    if (!ok) *error = ErrnoText(("read " + path).c_str());
    char extra;
    if (ok && ::read(fd, &extra, 1) != 0) {
      ok = false;
      *error = path + " is longer than its header says";
    }
    if (ok && Checksum(*payload) != header.payload_checksum) {
      ok = false;
      *error = path + " fails its checksum";
    }
  }
  ::close(fd);
  if (!ok && ours) {
    std::error_code ignored;
    fs::remove(path, ignored);
    *error += " (deleted)";
  }
  if (ok) block->payload = std::move(payload);
  return ok;
}

}  // namespace radixserve::kv
