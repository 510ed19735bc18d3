// Process-wide logging on spdlog. Lines look like SGLang's: "[2026-01-01 12:00:00] message".
// Thread-safe; call InitLogging once from main before other threads start.
#pragma once

#include <string_view>

#include <spdlog/spdlog.h>

namespace radixserve {

// level: one of debug, info, warning, error, critical (SGLang's --log-level choices).
// Returns false if the level name is unknown.
bool InitLogging(std::string_view level);

// Changes the level of the logger InitLogging made (/configure_logging's log_level); same names.
// Returns false if the level name is unknown.
bool SetLogLevel(std::string_view level);

}  // namespace radixserve

#define RADIX_LOG_DEBUG(...) ::spdlog::debug(__VA_ARGS__)
#define RADIX_LOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define RADIX_LOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define RADIX_LOG_ERROR(...) ::spdlog::error(__VA_ARGS__)
