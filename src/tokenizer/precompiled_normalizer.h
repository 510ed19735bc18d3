// SentencePiece's precompiled character map (HF tokenizers' `Precompiled` normalizer; the
// nmt_nfkc map XLM-RoBERTa and T5 ship): a darts-clone double-array trie of UTF-8 keys whose
// values index NUL-terminated replacements. As HF applies it: text is split into extended
// grapheme clusters (ICU's character break rules); a cluster shorter than 6 bytes that starts with
// a key is replaced whole by the shortest such key's replacement; otherwise each character that
// is a key is replaced by its own. Blob layout: <trie bytes (u32 LE)><trie units><strings>.
// Immutable after construction; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "tokenizer/normalizers.h"

namespace radixserve::tokenizer {

class PrecompiledNormalizer final : public Normalizer {
 public:
  // `blob` is the decoded precompiled_charsmap; kDataLoss when malformed.
  static Expected<std::unique_ptr<PrecompiledNormalizer>> Create(std::string blob);

  void Normalize(std::string& text) const override;

 private:
  PrecompiledNormalizer(std::vector<uint32_t> units, std::string strings)
      : units_(std::move(units)), strings_(std::move(strings)) {}
  // The replacement of the shortest key that is a prefix of `text`, if any.
  std::optional<std::string_view> Transform(std::string_view text) const;

  std::vector<uint32_t> units_;  // the double array
  std::string strings_;          // replacements, NUL-terminated
};

}  // namespace radixserve::tokenizer
