#include "common/log.h"

#include <memory>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace radixserve {

bool InitLogging(std::string_view level) {
  spdlog::level::level_enum parsed;
  if (level == "debug") {
    parsed = spdlog::level::debug;
  } else if (level == "info") {
    parsed = spdlog::level::info;
  } else if (level == "warning" || level == "warn") {
    parsed = spdlog::level::warn;
  } else if (level == "error") {
    parsed = spdlog::level::err;
  } else if (level == "critical") {
    parsed = spdlog::level::critical;
  } else {
    return false;
  }
  auto logger = spdlog::stderr_color_mt("radixserve");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S] %^%v%$");
  spdlog::set_level(parsed);
  return true;
}

}  // namespace radixserve
