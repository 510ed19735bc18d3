#include "common/log.h"

#include "common/log_level.h"

#include <memory>
#include <optional>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace radixserve {

std::optional<spdlog::level::level_enum> ParseLogLevel(std::string_view level) {
  if (level == "debug") return spdlog::level::debug;
  if (level == "info") return spdlog::level::info;
  if (level == "warning" || level == "warn") return spdlog::level::warn;
  if (level == "error") return spdlog::level::err;
  if (level == "critical") return spdlog::level::critical;
  return std::nullopt;
}

bool SetLogLevel(std::string_view level) {
  std::optional<spdlog::level::level_enum> parsed = ParseLogLevel(level);
  if (!parsed) return false;
  spdlog::set_level(*parsed);
  return true;
}

bool InitLogging(std::string_view level) {
  std::optional<spdlog::level::level_enum> parsed = ParseLogLevel(level);
  if (!parsed) return false;
  auto logger = spdlog::stderr_color_mt("radixserve");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S] %^%v%$");
  spdlog::set_level(*parsed);
  return true;
}

}  // namespace radixserve
