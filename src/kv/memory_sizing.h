// Sizing the KV pool: how many token slots (max_total_num_tokens) this server gets.
//
// The CPU rule. On CPU the "device memory" is system RAM, shared with every other process on the
// machine (the test suite runs several servers at once), so:
//   * available memory A = min(MemAvailable, cgroup limit - cgroup usage) / NUMA nodes, measured
//     once at startup, before the weights load (StartupHostMemory; SGLang divides by NUMA nodes
//     too: one replica per socket);
//   * the static memory of this server (weights + KV pool) may take mem_fraction_static of A:
//       kv_budget = mem_fraction_static * A - weights_bytes
//     where weights_bytes is what the loaded weights hold resident (the engine passes it, rather
//     than re-measuring, because other processes make MemAvailable move under us);
//   * when --mem-fraction-static is not given the CPU default kCpuDefaultMemFractionStatic
//     (0.25) applies: three quarters of what is available stays for other processes, activations
//     and the HTTP side. (SGLang's GPU-derived default, around 0.85, would let a handful of
//     servers on one host exhaust it.)
//   * with --dp-size N the N replicas share the weights and split the KV budget evenly: each
//     sizes its pool from kv_budget / N (and from --max-total-tokens / N, which the engine
//     factory passes per replica);
//   * max_total_num_tokens = kv_budget / kv_bytes_per_token, lowered to --max-total-tokens if
//     given (a warning is logged if that exceeds what memory allows; as in SGLang, the user value
//     can only lower the profiled size), then rounded down to a page multiple; a result of 0 is
//     SGLang's "Not enough memory" error.
// The KV buffers are mapped lazily (KvStorage), so an idle pool costs little resident memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "common/status.h"

namespace radixserve::kv {

inline constexpr double kCpuDefaultMemFractionStatic = 0.25;

struct HostMemory {
  uint64_t total_bytes = 0;      // min(MemTotal, cgroup limit)
  uint64_t available_bytes = 0;  // min(MemAvailable, cgroup limit - usage)
  int32_t numa_nodes = 1;
};

// Reads /proc/meminfo, the cgroup memory limit and usage (v2 memory.max / memory.current, else
// v1 memory.limit_in_bytes / memory.usage_in_bytes) and the NUMA node count.
Expected<HostMemory> ReadHostMemory();

// ReadHostMemory as it read at this process's start: the first call reads it and every later call
// returns that reading. The server calls it before it loads the weights, so that A in the rule
// above still holds the memory the weights then take: the sizing subtracts weights_bytes itself,
// and a reading taken after loading would count the weights' anonymous memory (repacked panels,
// converted matrices) twice, leaving no KV budget for a model of more than
// mem_fraction_static / (1 + mem_fraction_static) of the memory.
Expected<HostMemory> StartupHostMemory();

// The parsing behind ReadHostMemory. meminfo is /proc/meminfo's text; cgroup_limit and
// cgroup_usage are the raw cgroup file contents (empty when absent).
Expected<HostMemory> ParseHostMemory(std::string_view meminfo, std::string_view cgroup_limit,
                                     std::string_view cgroup_usage, int32_t numa_nodes);

// A cgroup memory value in bytes; nullopt for "max", empty text or v1's "unlimited" sentinel.
std::optional<uint64_t> ParseCgroupBytes(std::string_view text);

struct KvSizingInput {
  size_t kv_bytes_per_token = 0;              // KvBytesPerToken(...)
  HostMemory memory;                          // ReadHostMemory() at startup
  uint64_t weights_bytes = 0;                 // resident bytes of the loaded weights
  std::optional<double> mem_fraction_static;  // --mem-fraction-static
  std::optional<int64_t> max_total_tokens;    // --max-total-tokens
  int32_t page_size = 1;
  int32_t replicas = 1;  // --dp-size: replicas splitting kv_budget
};

struct KvSizing {
  size_t max_total_num_tokens = 0;
  size_t profiled_tokens = 0;        // what memory alone allows (before the user cap)
  double mem_fraction_static = 0.0;  // the fraction used
  uint64_t available_bytes = 0;      // A in the rule above
  uint64_t kv_budget_bytes = 0;      // this replica's share
};

// Applies the CPU rule. kInvalidArgument for a fraction outside (0, 1] or a non-positive
// --max-total-tokens; kResourceExhausted with SGLang's message when no page fits.
Expected<KvSizing> ComputeKvSizing(const KvSizingInput& input);

}  // namespace radixserve::kv
