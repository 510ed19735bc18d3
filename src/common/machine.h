// Facts about the machine this process runs on, read once at startup.
#pragma once

#include <cstdint>

namespace radixserve {

struct MachineInfo {
  uint64_t total_memory_bytes = 0;      // physical RAM, or the cgroup limit if lower; 0 = unknown
  uint64_t available_memory_bytes = 0;  // MemAvailable (capped by the cgroup); 0 = unknown
  int usable_cpus = 1;                  // CPUs in this process's affinity mask
};

// Reads /proc/meminfo, cgroup v2/v1 memory limits and the affinity mask.
MachineInfo ProbeMachine();

}  // namespace radixserve
