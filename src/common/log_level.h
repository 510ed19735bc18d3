// SGLang's log level names as spdlog levels (--log-level, --log-level-http, /configure_logging).
#pragma once

#include <optional>
#include <string_view>

#include <spdlog/common.h>

namespace radixserve {

// debug, info, warning (or warn), error, critical; nullopt for any other name.
std::optional<spdlog::level::level_enum> ParseLogLevel(std::string_view level);

}  // namespace radixserve
