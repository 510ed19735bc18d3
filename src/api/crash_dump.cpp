#include "api/crash_dump.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>

#include "api/pickle_writer.h"
#include "common/log.h"

namespace radixserve::api {

// Serialized request: MARK, pickled obj, pickled out, BINFLOAT created_time. The dump appends
// the finish time, TUPLE and APPEND.
struct CrashDump::Entry {
  bool finished = false;
  double finish_time = 0.0;
  std::size_t size = 0;
  const char* data() const { return reinterpret_cast<const char*>(this + 1); }

  static Entry* Make(const std::string& bytes, bool finished, double finish_time) {
    void* raw = ::operator new(sizeof(Entry) + bytes.size());
    auto* entry = new (raw) Entry;
    entry->finished = finished;
    entry->finish_time = finish_time;
    entry->size = bytes.size();
    std::memcpy(reinterpret_cast<char*>(entry + 1), bytes.data(), bytes.size());
    return entry;
  }
  static void Free(Entry* entry) {
    if (entry == nullptr) return;
    entry->~Entry();
    ::operator delete(entry);
  }
};

namespace {

constexpr double kKeepSeconds = 300.0;  // SGLang keeps finished requests for five minutes
std::atomic<CrashDump*> g_crash_dump{nullptr};
constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGQUIT};

// --- async-signal-safe helpers: no allocation, no locks, no stdio ---

void WriteAll(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

void WriteText(int fd, const char* text) { WriteAll(fd, text, std::strlen(text)); }

// Appends text to a fixed buffer, always NUL-terminated.
struct FixedString {
  char* buf;
  std::size_t cap;
  std::size_t len = 0;
  void Add(const char* s, std::size_t n) {
    for (std::size_t i = 0; i < n && len + 1 < cap; ++i) buf[len++] = s[i];
    buf[len] = '\0';
  }
  void Add(const char* s) { Add(s, std::strlen(s)); }
  void AddNumber(uint64_t v, int min_digits = 1) {
    char digits[24];
    int n = 0;
    do {
      digits[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v > 0 || n < min_digits);
    while (n > 0) Add(&digits[--n], 1);
  }
};

// Days since 1970-01-01 to a civil date (H. Hinnant's algorithm).
void CivilFromDays(int64_t z, int64_t& y, unsigned& m, unsigned& d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  y = static_cast<int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  if (m <= 2) ++y;
}

// "YYYY-MM-DD_HH-MM-SS" of local time, as datetime.now().strftime("%Y-%m-%d_%H-%M-%S").
void AddTimestamp(FixedString& out, int64_t epoch_s) {
  int64_t days = epoch_s / 86400;
  int64_t secs = epoch_s % 86400;
  if (secs < 0) {
    secs += 86400;
    --days;
  }
  int64_t y;
  unsigned m, d;
  CivilFromDays(days, y, m, d);
  out.AddNumber(static_cast<uint64_t>(y), 4);
  out.Add("-");
  out.AddNumber(m, 2);
  out.Add("-");
  out.AddNumber(d, 2);
  out.Add("_");
  out.AddNumber(static_cast<uint64_t>(secs / 3600), 2);
  out.Add("-");
  out.AddNumber(static_cast<uint64_t>(secs / 60 % 60), 2);
  out.Add("-");
  out.AddNumber(static_cast<uint64_t>(secs % 60), 2);
}

// mkdir -p on a copy of `path` (async-signal-safe).
void MakeDirs(const std::string& path) {
  char buf[4096];
  if (path.size() + 1 > sizeof buf) return;
  std::memcpy(buf, path.c_str(), path.size() + 1);
  for (std::size_t i = 1; i <= path.size(); ++i) {
    if (buf[i] == '/' || buf[i] == '\0') {
      const char saved = buf[i];
      buf[i] = '\0';
      ::mkdir(buf, 0755);
      buf[i] = saved;
    }
  }
}

void OnFatalSignal(int sig) {
  if (CrashDump* dump = g_crash_dump.load(std::memory_order_acquire)) {
    char path[1024];
    dump->DumpFromSignal(path, sizeof path);
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
}

std::string HostName() {
  if (const char* env = std::getenv("HOSTNAME"); env != nullptr && *env != '\0') return env;
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) == 0 && buf[0] != '\0') return buf;
  return "localhost";
}

}  // namespace

CrashDump::CrashDump(std::string folder, const nlohmann::json& server_args, std::size_t capacity)
    : folder_(std::move(folder)),
      capacity_(capacity == 0 ? 1 : capacity),
      slots_(new Slot[capacity_]),
      retired_(capacity_, nullptr) {
  dir_ = folder_ + "/" + HostName();
  header_.assign(pickle::kProto2, 2);
  header_ += pickle::kEmptyDict;
  header_ += pickle::kMark;
  pickle::AppendString("server_args", header_);
  pickle::AppendValue(nlohmann::ordered_json::parse(server_args.dump()), header_);
  pickle::AppendString("requests", header_);
  header_ += pickle::kEmptyList;
  std::time_t now = std::time(nullptr);
  std::tm local{};
  if (::localtime_r(&now, &local) != nullptr) utc_offset_s_ = local.tm_gmtoff;
}

CrashDump::~CrashDump() {
  CrashDump* self = this;
  g_crash_dump.compare_exchange_strong(self, nullptr);
  for (std::size_t i = 0; i < capacity_; ++i) Entry::Free(slots_[i].entry.load());
  for (Entry* entry : retired_) Entry::Free(entry);
}

double CrashDump::NowEpochSeconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

uint64_t CrashDump::RecordReceived(const nlohmann::ordered_json& obj, double created_time) {
  std::string bytes(1, pickle::kMark);
  pickle::AppendValue(obj, bytes);
  bytes += pickle::kEmptyDict;
  pickle::AppendFloat(created_time, bytes);
  Entry* entry = Entry::Make(bytes, false, 0.0);
  std::lock_guard lock(mu_);
  const uint64_t ticket = next_ticket_.fetch_add(1);
  Store(ticket, entry);
  return ticket;
}

void CrashDump::RecordFinished(uint64_t ticket, const nlohmann::ordered_json& obj,
                               const nlohmann::ordered_json& out, double created_time,
                               double finish_time) {
  std::string bytes(1, pickle::kMark);
  pickle::AppendValue(obj, bytes);
  pickle::AppendValue(out, bytes);
  pickle::AppendFloat(created_time, bytes);
  Entry* entry = Entry::Make(bytes, true, finish_time);
  std::lock_guard lock(mu_);
  // A ticket whose slot was reused by newer requests gets a fresh one (it is the newest now).
  if (ticket == 0 || slots_[ticket % capacity_].ticket.load() != ticket) {
    ticket = next_ticket_.fetch_add(1);
  }
  Store(ticket, entry);
}

void CrashDump::Store(uint64_t ticket, Entry* entry) {
  Slot& slot = slots_[ticket % capacity_];
  // Readers check the ticket after loading the entry: clear it first so a half-updated slot is
  // skipped rather than misattributed.
  slot.ticket.store(0, std::memory_order_release);
  Entry* old = slot.entry.exchange(entry, std::memory_order_acq_rel);
  slot.ticket.store(ticket, std::memory_order_release);
  Retire(old);
}

void CrashDump::Retire(Entry* entry) {
  if (entry == nullptr) return;
  if (dumped_.load(std::memory_order_acquire)) return;  // a dump may be reading it: leak
  Entry::Free(retired_[retire_pos_]);
  retired_[retire_pos_] = entry;
  retire_pos_ = (retire_pos_ + 1) % retired_.size();
}

void CrashDump::InstallSignalHandlers() {
  g_crash_dump.store(this, std::memory_order_release);
  struct sigaction action {};
  action.sa_handler = OnFatalSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;
  for (int sig : kFatalSignals) ::sigaction(sig, &action, nullptr);
}

int CrashDump::DumpFromSignal(char* path_out, std::size_t path_cap) {
  FixedString path{path_out, path_cap};
  path.Add("");
  if (dumped_.exchange(true, std::memory_order_acq_rel)) {
    WriteText(2,
              "SIGTERM/SIGQUIT/Exception triggered, but crash dump already performed, "
              "skipping.\n");
    return 0;
  }
  const double now = NowEpochSeconds();
  const uint64_t end = next_ticket_.load(std::memory_order_acquire);
  const uint64_t begin = end > capacity_ ? end - capacity_ : 1;
  uint64_t finished = 0, unfinished = 0;
  for (uint64_t t = begin; t < end; ++t) {
    const Slot& slot = slots_[t % capacity_];
    const Entry* entry = slot.entry.load(std::memory_order_acquire);
    if (entry == nullptr || slot.ticket.load(std::memory_order_acquire) != t) continue;
    if (!entry->finished) {
      ++unfinished;
    } else if (now - entry->finish_time < kKeepSeconds) {
      ++finished;
    }
  }
  WriteText(2, "Dumping requests before crash. self.crash_dump_folder='");
  WriteText(2, folder_.c_str());
  WriteText(2, "'\n");
  if (finished + unfinished == 0) return 0;

  MakeDirs(dir_);
  path.Add(dir_.c_str());
  path.Add("/crash_dump_");
  AddTimestamp(path, static_cast<int64_t>(now) + utc_offset_s_);
  path.Add(".pkl");
  const int fd = ::open(path_out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    WriteText(2, "Crash dump: cannot open ");
    WriteText(2, path_out);
    WriteText(2, "\n");
    return 0;
  }
  WriteAll(fd, header_.data(), header_.size());
  char tail[9 + 2];
  for (uint64_t t = begin; t < end; ++t) {
    const Slot& slot = slots_[t % capacity_];
    const Entry* entry = slot.entry.load(std::memory_order_acquire);
    if (entry == nullptr || slot.ticket.load(std::memory_order_acquire) != t) continue;
    if (entry->finished && now - entry->finish_time >= kKeepSeconds) continue;
    WriteAll(fd, entry->data(), entry->size);
    pickle::EncodeFloat(entry->finished ? entry->finish_time : now, tail);
    tail[9] = pickle::kTuple;
    tail[10] = pickle::kAppend;
    WriteAll(fd, tail, sizeof tail);
  }
  const char footer[2] = {pickle::kSetItems, pickle::kStop};
  WriteAll(fd, footer, sizeof footer);
  ::close(fd);

  char line[1400];
  FixedString msg{line, sizeof line};
  msg.Add("Dumped ");
  msg.AddNumber(finished);
  msg.Add(" finished and ");
  msg.AddNumber(unfinished);
  msg.Add(" unfinished requests before crash to ");
  msg.Add(path_out);
  msg.Add("\n");
  WriteText(2, line);
  return static_cast<int>(finished + unfinished);
}

std::string CrashDump::WriteNow() {
  char path[1024];
  if (DumpFromSignal(path, sizeof path) == 0) return "";
  return path;
}

}  // namespace radixserve::api
