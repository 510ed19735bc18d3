#include "web/web_asset.h"

#include <algorithm>
#include <array>
#include <utility>

namespace radixserve::web {

// Defined in the build-time generated web_assets_data.cpp.
std::span<const WebAsset> GeneratedAssets();

std::span<const WebAsset> EmbeddedAssets() { return GeneratedAssets(); }

const WebAsset* FindAsset(std::string_view name) {
  for (const WebAsset& asset : EmbeddedAssets()) {
    if (asset.name == name) return &asset;
  }
  return nullptr;
}

std::string_view ContentTypeFor(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kTypes{{
      {".html", "text/html; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".svg", "image/svg+xml"},
      {".json", "application/json"},
      {".txt", "text/plain; charset=utf-8"},
  }};
  auto found = std::find_if(kTypes.begin(), kTypes.end(),
                            [name](const auto& entry) { return name.ends_with(entry.first); });
  return found == kTypes.end() ? std::string_view("application/octet-stream") : found->second;
}

}  // namespace radixserve::web
