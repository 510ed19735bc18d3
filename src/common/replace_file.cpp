#include "common/replace_file.h"

#include <unistd.h>

#include <fstream>
#include <string>
#include <system_error>

namespace radixserve {

bool ReplaceFile(const std::filesystem::path& path, std::string_view contents) {
  std::error_code error;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), error);
  if (error) return false;
  std::filesystem::path temp = path;
  temp += ".";
  temp += std::to_string(::getpid());
  temp += ".tmp";
  bool written = false;
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    written = out && out.write(contents.data(), static_cast<std::streamsize>(contents.size())) &&
              out.flush();
  }
  if (written) std::filesystem::rename(temp, path, error);
  if (!written || error) {
    std::filesystem::remove(temp, error);
    return false;
  }
  return true;
}

}  // namespace radixserve
