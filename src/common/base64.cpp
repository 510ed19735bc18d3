#include "common/base64.h"

#include <cstdint>

namespace radixserve {

std::string Base64Encode(std::string_view bytes, Base64Alphabet alphabet) {
  static constexpr char kStandard[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  static constexpr char kUrlSafe[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  const char* table = alphabet == Base64Alphabet::kUrlSafe ? kUrlSafe : kStandard;
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t chunk = static_cast<uint32_t>(static_cast<uint8_t>(bytes[i])) << 16;
    if (i + 1 < bytes.size())
      chunk |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) chunk |= static_cast<uint8_t>(bytes[i + 2]);
    out += table[(chunk >> 18) & 63];
    out += table[(chunk >> 12) & 63];
    out += i + 1 < bytes.size() ? table[(chunk >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? table[chunk & 63] : '=';
  }
  return out;
}

}  // namespace radixserve
