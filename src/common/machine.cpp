#include "common/machine.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

namespace radixserve {
namespace {

uint64_t MeminfoBytes(const std::string& field) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      std::istringstream fields(line.substr(field.size() + 1));
      uint64_t kib = 0;
      fields >> kib;
      return kib * 1024;
    }
  }
  return 0;
}

// The cgroup memory limit, or 0 when there is none.
uint64_t CgroupLimitBytes() {
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(path);
    std::string text;
    if (in >> text && text != "max") {
      try {
        uint64_t limit = std::stoull(text);
        // cgroup v1 reports "no limit" as a huge page-aligned number.
        if (limit < (uint64_t{1} << 60)) return limit;
      } catch (...) {
      }
    }
  }
  return 0;
}

}  // namespace

MachineInfo ProbeMachine() {
  MachineInfo info;
  info.total_memory_bytes = MeminfoBytes("MemTotal");
  info.available_memory_bytes = MeminfoBytes("MemAvailable");
  if (uint64_t limit = CgroupLimitBytes(); limit != 0) {
    if (info.total_memory_bytes == 0 || limit < info.total_memory_bytes) {
      info.total_memory_bytes = limit;
    }
    info.available_memory_bytes = std::min(info.available_memory_bytes, limit);
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) info.usable_cpus = std::max(1, CPU_COUNT(&set));
  return info;
}

}  // namespace radixserve
