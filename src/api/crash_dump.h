// CrashDump (--crash-dump-folder): keeps the requests of the last five minutes, as SGLang does,
// and writes them to <folder>/<HOSTNAME>/crash_dump_<YYYY-MM-DD_HH-MM-SS>.pkl when the server
// crashes or shuts down on SIGTERM. The file is a Python pickle (protocol 2) of
//   {"server_args": {...}, "requests": [(obj, out, created_time, finish_time), ...]}
// with SGLang's tuple shape: `obj` the request (GenerateReqInput fields), `out` its output
// ({} while unfinished), times in seconds since the epoch (an unfinished request's finish_time
// is the dump time). Finished requests older than 300 s are left out; so are requests beyond the
// newest `capacity` (bounded memory). Nothing is written when there is nothing to dump, and at
// most one dump is written per process.
//
// Crash path: InstallSignalHandlers() catches SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT (also what
// a failed RADIX_CHECK raises) and SIGQUIT. The handler only uses async-signal-safe calls
// (clock_gettime, mkdir, open, write, close, sigaction, raise) on entries that were serialized
// when they were recorded, then restores the default action and re-raises the signal.
//
// Thread safety: Record* may be called from any thread (one mutex). Entries replaced while a
// crash handler could be reading them are freed only after `capacity` further replacements, and
// never once a dump has started.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace radixserve::api {

class CrashDump {
 public:
  // `folder`: --crash-dump-folder. `server_args`: the resolved arguments, stored in the dump.
  CrashDump(std::string folder, const nlohmann::json& server_args, std::size_t capacity = 1024);
  ~CrashDump();
  CrashDump(const CrashDump&) = delete;
  CrashDump& operator=(const CrashDump&) = delete;

  // A request was received; returns the ticket for RecordFinished. `created_time`: epoch seconds.
  uint64_t RecordReceived(const nlohmann::ordered_json& obj, double created_time);
  // The request of `ticket` finished with `out`.
  void RecordFinished(uint64_t ticket, const nlohmann::ordered_json& obj,
                      const nlohmann::ordered_json& out, double created_time, double finish_time);

  // Process-wide: makes this object the one the fatal-signal handlers dump. Call once, from
  // the main thread, before serving; the object must then live until the process exits.
  void InstallSignalHandlers();

  // The SIGTERM path: writes the dump from a normal thread. Returns the file written, or an empty
  // string when there was nothing to dump or a dump was already written.
  std::string WriteNow();

  // Async-signal-safe body of the dump: returns the number of requests written (0: no file).
  // `path_out` receives the file name (NUL-terminated, truncated to `path_cap`).
  int DumpFromSignal(char* path_out, std::size_t path_cap);

  static double NowEpochSeconds();

 private:
  struct Entry;
  struct Slot {
    std::atomic<uint64_t> ticket{0};
    std::atomic<Entry*> entry{nullptr};
  };

  void Store(uint64_t ticket, Entry* entry);  // requires mu_
  void Retire(Entry* entry);                  // requires mu_

  std::string folder_;
  std::string dir_;     // folder_/<hostname>
  std::string header_;  // PROTO, dict start, server_args, "requests", empty list
  long utc_offset_s_ = 0;
  std::size_t capacity_;
  std::unique_ptr<Slot[]> slots_;
  std::atomic<uint64_t> next_ticket_{1};
  std::mutex mu_;
  std::vector<Entry*> retired_;
  std::size_t retire_pos_ = 0;
  std::atomic<bool> dumped_{false};
};

}  // namespace radixserve::api
