#include "kv/memory_sizing.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "common/log.h"

namespace radixserve::kv {

namespace {

// v1 reports "no limit" as a huge page-rounded number; anything past 2^60 is treated as none.
constexpr uint64_t kUnlimitedThreshold = uint64_t{1} << 60;

std::string ReadSmallFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  return text;
}

// The value of a "Name:   123 kB" line of /proc/meminfo, in bytes.
std::optional<uint64_t> MeminfoField(std::string_view meminfo, std::string_view name) {
  size_t pos = 0;
  while (pos < meminfo.size()) {
    size_t end = meminfo.find('\n', pos);
    if (end == std::string_view::npos) end = meminfo.size();
    std::string_view line = meminfo.substr(pos, end - pos);
    pos = end + 1;
    if (line.size() <= name.size() || line.substr(0, name.size()) != name ||
        line[name.size()] != ':') {
      continue;
    }
    std::string_view rest = Trim(line.substr(name.size() + 1));
    uint64_t value = 0;
    auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
    if (ec != std::errc()) return std::nullopt;
    std::string_view unit = Trim(std::string_view(ptr, rest.data() + rest.size() - ptr));
    if (unit == "kB") return value * 1024;
    if (unit.empty()) return value;
    return std::nullopt;
  }
  return std::nullopt;
}

int32_t CountNumaNodes() {
  std::error_code ec;
  int32_t nodes = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/devices/system/node", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 4 && name.compare(0, 4, "node") == 0 &&
        name.find_first_not_of("0123456789", 4) == std::string::npos) {
      ++nodes;
    }
  }
  return std::max(nodes, 1);
}

}  // namespace

std::optional<uint64_t> ParseCgroupBytes(std::string_view text) {
  text = Trim(text);
  if (text.empty() || text == "max") return std::nullopt;
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  if (value >= kUnlimitedThreshold) return std::nullopt;
  return value;
}

Expected<HostMemory> ParseHostMemory(std::string_view meminfo, std::string_view cgroup_limit,
                                     std::string_view cgroup_usage, int32_t numa_nodes) {
  const std::optional<uint64_t> total = MeminfoField(meminfo, "MemTotal");
  std::optional<uint64_t> available = MeminfoField(meminfo, "MemAvailable");
  if (!total) return DataLoss("/proc/meminfo has no MemTotal line");
  if (!available) available = MeminfoField(meminfo, "MemFree");
  if (!available) return DataLoss("/proc/meminfo has neither MemAvailable nor MemFree");

  HostMemory memory{*total, std::min(*available, *total), std::max(numa_nodes, 1)};
  if (const std::optional<uint64_t> limit = ParseCgroupBytes(cgroup_limit)) {
    memory.total_bytes = std::min(memory.total_bytes, *limit);
    const uint64_t usage = ParseCgroupBytes(cgroup_usage).value_or(0);
    const uint64_t headroom = *limit > usage ? *limit - usage : 0;
    memory.available_bytes = std::min(memory.available_bytes, headroom);
  }
  return memory;
}

Expected<HostMemory> ReadHostMemory() {
  const std::string meminfo = ReadSmallFile("/proc/meminfo");
  if (meminfo.empty()) return NotFound("cannot read /proc/meminfo");
  std::string limit = ReadSmallFile("/sys/fs/cgroup/memory.max");
  std::string usage = ReadSmallFile("/sys/fs/cgroup/memory.current");
  if (limit.empty()) {
    limit = ReadSmallFile("/sys/fs/cgroup/memory/memory.limit_in_bytes");
    usage = ReadSmallFile("/sys/fs/cgroup/memory/memory.usage_in_bytes");
  }
  return ParseHostMemory(meminfo, limit, usage, CountNumaNodes());
}

Expected<HostMemory> StartupHostMemory() {
  static const Expected<HostMemory> reading = ReadHostMemory();
  return reading;
}

Expected<KvSizing> ComputeKvSizing(const KvSizingInput& input) {
  RADIX_CHECK(input.kv_bytes_per_token > 0 && input.page_size >= 1);
  const double fraction = input.mem_fraction_static.value_or(kCpuDefaultMemFractionStatic);
  if (!(fraction > 0.0 && fraction <= 1.0)) {
    return InvalidArgument("--mem-fraction-static must be in (0, 1], got " +
                           std::to_string(fraction));
  }
  if (input.max_total_tokens && *input.max_total_tokens <= 0) {
    return InvalidArgument("--max-total-tokens must be positive, got " +
                           std::to_string(*input.max_total_tokens));
  }

  KvSizing sizing;
  sizing.mem_fraction_static = fraction;
  sizing.available_bytes = input.memory.available_bytes / std::max(input.memory.numa_nodes, 1);
  const double static_budget = fraction * static_cast<double>(sizing.available_bytes);
  const double kv_budget = (static_budget - static_cast<double>(input.weights_bytes)) /
                           static_cast<double>(std::max(input.replicas, 1));
  sizing.kv_budget_bytes = kv_budget > 0 ? static_cast<uint64_t>(kv_budget) : 0;
  sizing.profiled_tokens = sizing.kv_budget_bytes / input.kv_bytes_per_token;

  // Slot indices are int32 and page 0 is reserved.
  const auto page = static_cast<size_t>(input.page_size);
  const size_t index_limit = static_cast<size_t>(std::numeric_limits<int32_t>::max()) - page;
  size_t tokens = std::min(sizing.profiled_tokens, index_limit);
  if (input.max_total_tokens) {
    const auto requested = static_cast<size_t>(*input.max_total_tokens);
    if (requested > tokens) {
      RADIX_LOG_WARN(
          "max_total_tokens={} is larger than the profiled value {}. Use the profiled value "
          "instead.",
          requested, tokens);
    } else {
      tokens = requested;
    }
  }
  tokens = tokens / page * page;
  if (tokens == 0) {
    return Status(StatusCode::kResourceExhausted,
                  "Not enough memory. Please try to increase --mem-fraction-static.");
  }
  sizing.max_total_num_tokens = tokens;
  return sizing;
}

}  // namespace radixserve::kv
