#include "tokenizer/precompiled_normalizer.h"

#include <unicode/ubrk.h>
#include <unicode/utext.h>

#include <cstring>
#include <memory>

#include "tokenizer/utf8.h"

namespace radixserve::tokenizer {
namespace {

// darts-clone's DoubleArrayUnit fields.
bool HasLeaf(uint32_t unit) { return (unit >> 8) & 1; }
uint32_t Value(uint32_t unit) { return unit & ((1u << 31) - 1); }
uint32_t Label(uint32_t unit) { return unit & ((1u << 31) | 0xFF); }
uint32_t Offset(uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); }

// Calls f(begin, end) for each extended grapheme cluster of well-formed UTF-8 `text`.
template <class F>
void ForEachGrapheme(std::string_view text, F f) {
  UErrorCode status = U_ZERO_ERROR;
  UText* ut = utext_openUTF8(nullptr, text.data(), static_cast<int64_t>(text.size()), &status);
  std::unique_ptr<UText, decltype(&utext_close)> ut_owner(ut, &utext_close);
  UBreakIterator* it = ubrk_open(UBRK_CHARACTER, "", nullptr, 0, &status);
  std::unique_ptr<UBreakIterator, decltype(&ubrk_close)> it_owner(it, &ubrk_close);
  if (U_SUCCESS(status)) ubrk_setUText(it, ut, &status);
  if (U_FAILURE(status)) {  // no break rules: one character at a time
    for (size_t pos = 0; pos < text.size();) {
      const size_t next =
          pos + std::min(Utf8Length(static_cast<unsigned char>(text[pos])), text.size() - pos);
      f(pos, next);
      pos = next;
    }
    return;
  }
  int32_t begin = ubrk_first(it);
  for (int32_t end = ubrk_next(it); end != UBRK_DONE; begin = end, end = ubrk_next(it)) {
    f(static_cast<size_t>(begin), static_cast<size_t>(end));
  }
}

}  // namespace

Expected<std::unique_ptr<PrecompiledNormalizer>> PrecompiledNormalizer::Create(std::string blob) {
  if (blob.size() < 4) return DataLoss("precompiled_charsmap is too short");
  uint32_t trie_bytes = 0;
  for (int i = 3; i >= 0; --i) trie_bytes = trie_bytes << 8 | static_cast<uint8_t>(blob[i]);
  if (trie_bytes % 4 != 0 || trie_bytes == 0 || trie_bytes > blob.size() - 4) {
    return DataLoss("precompiled_charsmap has a malformed trie size");
  }
  std::vector<uint32_t> units(trie_bytes / 4);
  for (size_t i = 0; i < units.size(); ++i) {
    uint32_t u = 0;
    for (int b = 3; b >= 0; --b) u = u << 8 | static_cast<uint8_t>(blob[4 + i * 4 + b]);
    units[i] = u;
  }
  return std::unique_ptr<PrecompiledNormalizer>(
      new PrecompiledNormalizer(std::move(units), blob.substr(4 + trie_bytes)));
}

std::optional<std::string_view> PrecompiledNormalizer::Transform(std::string_view text) const {
  // darts-clone commonPrefixSearch, stopping at the first (shortest) result.
  uint32_t pos = Offset(units_[0]);
  for (unsigned char byte : text) {
    if (byte == 0) return std::nullopt;
    pos ^= byte;
    if (pos >= units_.size()) return std::nullopt;
    const uint32_t unit = units_[pos];
    if (Label(unit) != byte) return std::nullopt;
    pos ^= Offset(unit);
    if (pos >= units_.size()) return std::nullopt;
    if (HasLeaf(unit)) {
      const uint32_t at = Value(units_[pos]);
      if (at >= strings_.size()) return std::nullopt;
      const size_t end = strings_.find('\0', at);
      return std::string_view(strings_).substr(at, end == std::string::npos ? end : end - at);
    }
  }
  return std::nullopt;
}

void PrecompiledNormalizer::Normalize(std::string& text) const {
  std::string out;
  out.reserve(text.size());
  const std::string_view all(text);
  ForEachGrapheme(all, [&](size_t begin, size_t end) {
    const std::string_view grapheme = all.substr(begin, end - begin);
    if (grapheme.size() < 6) {
      if (auto replaced = Transform(grapheme)) {
        out += *replaced;
        return;
      }
    }
    for (size_t pos = 0; pos < grapheme.size();) {
      const size_t len =
          std::min(Utf8Length(static_cast<unsigned char>(grapheme[pos])), grapheme.size() - pos);
      const std::string_view ch = grapheme.substr(pos, len);
      if (auto replaced = Transform(ch)) {
        out += *replaced;
      } else {
        out += ch;
      }
      pos += len;
    }
  });
  text = std::move(out);
}

}  // namespace radixserve::tokenizer
