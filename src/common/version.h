#pragma once

namespace radixserve {
inline constexpr const char* kVersion = "0.1.0";
}  // namespace radixserve
