#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace radixserve::tokenizer {

namespace {

struct ByteTable {
  std::array<char32_t, 256> byte_to_cp{};
  std::array<std::string, 256> byte_to_utf8;
  ByteTable() {
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      byte_to_cp[b] = printable ? static_cast<char32_t>(b) : next++;
      AppendUtf8(byte_to_utf8[b], byte_to_cp[b]);
    }
  }
};

const ByteTable& Table() {
  static const ByteTable table;
  return table;
}

}  // namespace

void AppendByteLevel(std::string& out, std::string_view bytes) {
  const ByteTable& t = Table();
  for (unsigned char b : bytes) out += t.byte_to_utf8[b];
}

std::optional<unsigned char> ByteFromByteLevelChar(char32_t cp) {
  if (cp < 256) {
    const bool printable = (cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || cp >= 0xAE;
    if (printable) return static_cast<unsigned char>(cp);
    return std::nullopt;
  }
  if (cp >= 256 + 68) return std::nullopt;
  const ByteTable& t = Table();
  for (int b = 0; b < 256; ++b) {
    if (t.byte_to_cp[b] == cp) return static_cast<unsigned char>(b);
  }
  return std::nullopt;
}

}  // namespace radixserve::tokenizer
