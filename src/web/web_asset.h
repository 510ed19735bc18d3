// WebAsset: one static file of the chat page (src/web/static/), compiled into the binary at build
// time by embed_assets.cmake. The table is immutable, lives for the whole program and may be read
// from any thread.
#pragma once

#include <span>
#include <string_view>

namespace radixserve::web {

struct WebAsset {
  std::string_view name;   // file name under src/web/static/, e.g. "chat.js"
  std::string_view bytes;  // the file's exact contents
};

// Every embedded file, sorted by name (the generated table's order).
std::span<const WebAsset> EmbeddedAssets();

// The asset named `name` (no leading slash, no folders), or nullptr.
const WebAsset* FindAsset(std::string_view name);

// Content-Type for a file name by its extension ("text/javascript; charset=utf-8" for ".js");
// "application/octet-stream" for an unknown extension.
std::string_view ContentTypeFor(std::string_view name);

}  // namespace radixserve::web
