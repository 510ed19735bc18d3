// ShmReducer: the all-reduce of tensor-parallel ranks that share one machine, through a shared
// memory segment instead of sockets (SGLang's CPU backend does the same between the ranks of a
// node). Every rank copies its part into its slot, raises its flag, waits for the others' flags
// and adds the slots up in rank order, so every rank gets the same bits. Slots alternate between
// two sets: writing set (k mod 2) in call k is safe once every rank has raised its flag in call
// k - 1, since each finished reading call k - 2's set before that. Buffers larger than a slot go
// through in slot-sized pieces.
//
// Waiting spins a few microseconds, then sleeps on the flag (a futex in the segment, woken by the
// rank that raises it); every 50 ms it checks that the other ranks' processes are alive (their
// pids are in the segment), and gives up after the group's timeout. Either failure
// ends the process the way TpGroup's collectives do: one log line, exit status 1.
//
// The segment is created by rank 0 under a unique name it shares through the rendezvous store,
// and unlinked once every rank has mapped it, so nothing is left in /dev/shm whatever happens.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <gloo/rendezvous/store.h>

#include "common/status.h"

namespace radixserve::dist {

// How a rank leaves when its group fails (here and in TpGroup): `line` as an error, the log
// flushed, exit status 1 at once (no destructors: the other ranks see the connections close).
[[noreturn]] void StopRank(const std::string& line);

class ShmReducer {
 public:
  // Floats per slot: 1 MiB slots, so 4 ranks map 8 MiB.
  static constexpr int64_t kSlotFloats = 256 * 1024;

  // Rank 0 creates the segment and publishes its name in `store`; the others map it. The caller
  // must make all ranks pass a barrier after this (then Unlink on rank 0).
  static Expected<std::unique_ptr<ShmReducer>> Attach(int rank, int size,
                                                      gloo::rendezvous::Store& store,
                                                      std::chrono::milliseconds timeout);
  ~ShmReducer();
  ShmReducer(const ShmReducer&) = delete;
  ShmReducer& operator=(const ShmReducer&) = delete;

  // Removes the segment's name (rank 0, once every rank has mapped it).
  void Unlink();

  void AllReduceSum(float* data, int64_t count);

 private:
  struct Header;
  ShmReducer(int rank, int size, void* base, size_t bytes, std::string name,
             std::chrono::milliseconds timeout);
  float* slot(int set, int rank) const;
  // Waits until every rank's flag reached `generation`.
  void WaitForAll(uint32_t generation);
  static constexpr std::chrono::milliseconds kLivenessPeriod{50};
  [[noreturn]] void Fail(const std::string& why) const;

  int rank_;
  int size_;
  void* base_;
  size_t bytes_;
  std::string name_;
  std::chrono::milliseconds timeout_;
  Header* header_;
  uint32_t generation_ = 0;
};

}  // namespace radixserve::dist
