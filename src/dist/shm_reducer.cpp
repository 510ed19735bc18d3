#include "dist/shm_reducer.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/check.h"
#include "common/log.h"

namespace radixserve::dist {

namespace {

constexpr int kMaxRanks = 64;
constexpr size_t kLine = 64;

// False once the process has exited (gone, or a zombie its parent has not reaped).
bool Alive(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  const size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z' &&
         text[paren + 2] != 'X';
}

}  // namespace

struct ShmReducer::Header {
  struct alignas(kLine) Flag {
    std::atomic<uint32_t> generation;  // a futex word: the last call this rank's slot is in
    std::atomic<uint32_t> sleepers;    // ranks blocked in FUTEX_WAIT on it
    int32_t pid;
  };
  Flag flags[kMaxRanks];
};

namespace {

// Shared (not FUTEX_PRIVATE): the word lives in memory several processes map.
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::milliseconds timeout) {
  timespec ts{static_cast<time_t>(timeout.count() / 1000),
              static_cast<long>(timeout.count() % 1000) * 1000000L};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

// `generation` reached (wrap-around safe).
bool Reached(uint32_t flag, uint32_t generation) {
  return static_cast<int32_t>(flag - generation) >= 0;
}

}  // namespace

Expected<std::unique_ptr<ShmReducer>> ShmReducer::Attach(int rank, int size,
                                                         gloo::rendezvous::Store& store,
                                                         std::chrono::milliseconds timeout) {
  RADIX_CHECK(size >= 1 && size <= kMaxRanks);
  const size_t bytes = sizeof(Header) + 2 * static_cast<size_t>(size) * kSlotFloats * 4;
  std::string name;
  int fd = -1;
  try {
    if (rank == 0) {
      std::random_device random;
      name = "/radixserve-tp-" + std::to_string(getpid()) + "-" + std::to_string(random());
      fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
      if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
        const std::string why = std::strerror(errno);
        if (fd >= 0) close(fd), shm_unlink(name.c_str());
        return Unavailable("shared memory for the tensor-parallel all-reduce (" +
                           std::to_string(bytes >> 20) + " MiB in /dev/shm): " + why);
      }
      store.set("radixserve/shm", std::vector<char>(name.begin(), name.end()));
    } else {
      const std::vector<char> value = store.get("radixserve/shm");
      name.assign(value.begin(), value.end());
      fd = shm_open(name.c_str(), O_RDWR, 0600);
      if (fd < 0) {
        return Unavailable("cannot open the tensor-parallel shared memory " + name + ": " +
                           std::strerror(errno));
      }
    }
  } catch (const std::exception& e) {
    if (fd >= 0) close(fd);
    return Unavailable(std::string("tensor-parallel shared memory: ") + e.what());
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    return Unavailable(std::string("cannot map the tensor-parallel shared memory: ") +
                       std::strerror(errno));
  }
  return std::unique_ptr<ShmReducer>(new ShmReducer(rank, size, base, bytes, name, timeout));
}

ShmReducer::ShmReducer(int rank, int size, void* base, size_t bytes, std::string name,
                       std::chrono::milliseconds timeout)
    : rank_(rank),
      size_(size),
      base_(base),
      bytes_(bytes),
      name_(std::move(name)),
      timeout_(timeout),
      header_(static_cast<Header*>(base)) {
  header_->flags[rank_].pid = getpid();
}

ShmReducer::~ShmReducer() { munmap(base_, bytes_); }

void ShmReducer::Unlink() { shm_unlink(name_.c_str()); }

float* ShmReducer::slot(int set, int rank) const {
  auto* slots = reinterpret_cast<float*>(static_cast<uint8_t*>(base_) + sizeof(Header));
  return slots + (static_cast<size_t>(set) * size_ + rank) * kSlotFloats;
}

void StopRank(const std::string& line) {
  RADIX_LOG_ERROR("{}", line);
  spdlog::default_logger()->flush();
  std::_Exit(1);
}

void ShmReducer::Fail(const std::string& why) const {
  StopRank(fmt::format("tensor-parallel rank {} of {}: all-reduce failed ({}); stopping", rank_,
                       size_, why));
}

void ShmReducer::WaitForAll(uint32_t generation) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  for (int r = 0; r < size_; ++r) {
    Header::Flag& flag = header_->flags[r];
    // A short spin (the others are usually a few microseconds behind), then sleep on the flag
    // (spinning would slow a rank that shares this core, or its SMT sibling), waking every
    // 50 ms to check that the ranks are alive.
    for (int spins = 0; spins < 4096; ++spins) {
      if (Reached(flag.generation.load(std::memory_order_acquire), generation)) break;
      __builtin_ia32_pause();
    }
    while (true) {
      flag.sleepers.fetch_add(1, std::memory_order_seq_cst);
      const uint32_t seen = flag.generation.load(std::memory_order_seq_cst);
      if (!Reached(seen, generation)) FutexWait(&flag.generation, seen, kLivenessPeriod);
      flag.sleepers.fetch_sub(1, std::memory_order_seq_cst);
      if (Reached(flag.generation.load(std::memory_order_acquire), generation)) break;
      for (int other = 0; other < size_; ++other) {
        const int pid = header_->flags[other].pid;
        if (other != rank_ && pid > 0 && !Alive(pid)) {
          Fail("rank " + std::to_string(other) + " (pid " + std::to_string(pid) + ") exited");
        }
      }
      if (Clock::now() - start > timeout_) {
        Fail("rank " + std::to_string(r) + " did not arrive within --dist-timeout " +
             std::to_string(timeout_.count() / 1000) + " s");
      }
    }
  }
}

void ShmReducer::AllReduceSum(float* data, int64_t count) {
  for (int64_t done = 0; done < count; done += kSlotFloats) {
    const auto n = static_cast<size_t>(std::min(kSlotFloats, count - done));
    float* part = data + done;
    const uint32_t generation = ++generation_;
    const int set = static_cast<int>(generation % 2);
    std::memcpy(slot(set, rank_), part, n * sizeof(float));
    Header::Flag& mine = header_->flags[rank_];
    mine.generation.store(generation, std::memory_order_seq_cst);
    if (mine.sleepers.load(std::memory_order_seq_cst) > 0) FutexWakeAll(&mine.generation);
    WaitForAll(generation);
    std::memcpy(part, slot(set, 0), n * sizeof(float));
    for (int r = 1; r < size_; ++r) {
      const float* other = slot(set, r);
      for (size_t i = 0; i < n; ++i) part[i] += other[i];
    }
  }
}

}  // namespace radixserve::dist
