// Writing a whole file so that readers never see part of it.
#pragma once

#include <filesystem>
#include <string_view>

namespace radixserve {

// Writes `contents` to `path`, creating its directory: first to a file beside it named for this
// process, then renamed over `path`, so a reader (or a concurrent writer's reader) sees the old
// file or the whole new one. Returns false, leaving no temporary file, when any step fails.
bool ReplaceFile(const std::filesystem::path& path, std::string_view contents);

}  // namespace radixserve
