#include "sampling/grammar_vocabulary.h"

#include <algorithm>
#include <cctype>
#include <memory>
#include <optional>

#include "common/check.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace radixserve::sampling {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
constexpr char kSpecialMarker = '\xFF';

// "<0xAB>" (SentencePiece byte fallback) -> 0xAB.
std::optional<std::string> ByteFallbackBytes(std::string_view spelling) {
  if (spelling.size() != 6 || spelling.substr(0, 3) != "<0x" || spelling[5] != '>') {
    return std::nullopt;
  }
  int value = 0;
  for (char c : spelling.substr(3, 2)) {
    value <<= 4;
    if (c >= '0' && c <= '9') {
      value |= c - '0';
    } else if (c >= 'A' && c <= 'F') {
      value |= c - 'A' + 10;
    } else if (c >= 'a' && c <= 'f') {
      value |= c - 'a' + 10;
    } else {
      return std::nullopt;
    }
  }
  return std::string(1, static_cast<char>(value));
}

// A byte-level BPE spelling ("Ġ", "Ã") -> its bytes, if every character is in GPT-2's table.
std::optional<std::string> ByteLevelBytes(std::string_view spelling) {
  std::string bytes;
  size_t pos = 0;
  while (pos < spelling.size()) {
    char32_t cp = 0;
    if (!tokenizer::DecodeUtf8(spelling, pos, cp)) return std::nullopt;
    const auto byte = tokenizer::ByteFromByteLevelChar(cp);
    if (!byte) return std::nullopt;
    bytes.push_back(static_cast<char>(*byte));
  }
  return bytes;
}

// The first token that decodes, on its own, to one ASCII letter: left context for the others, so
// decoders that treat the first token of a text specially (SentencePiece drops its leading space)
// see every token in the middle of a text.
std::optional<tokenizer::TokenId> FindAnchor(const tokenizer::Tokenizer& tok,
                                             const tokenizer::DecodeOptions& options) {
  for (size_t id = 0; id < tok.vocab_size(); ++id) {
    const auto token = static_cast<tokenizer::TokenId>(id);
    if (tok.IsSpecial(token)) continue;
    const std::string text = tok.Decode(std::span(&token, 1), options);
    if (text.size() == 1 && std::isalpha(static_cast<unsigned char>(text[0]))) {
      return token;
    }
  }
  return std::nullopt;
}

std::string TokenBytes(const tokenizer::Tokenizer& tok, tokenizer::TokenId id,
                       std::optional<tokenizer::TokenId> anchor,
                       const tokenizer::DecodeOptions& options, const std::string& anchor_text) {
  const std::string* spelling = tok.IdToToken(id);
  if (spelling == nullptr) return {};
  if (tok.IsSpecial(id)) return kSpecialMarker + *spelling;

  std::string text;
  if (anchor) {
    const tokenizer::TokenId pair[2] = {*anchor, id};
    text = tok.Decode(pair, options);
    if (text.compare(0, anchor_text.size(), anchor_text) == 0) {
      text.erase(0, anchor_text.size());
    } else {
      text = tok.Decode(std::span(&id, 1), options);
    }
  } else {
    text = tok.Decode(std::span(&id, 1), options);
  }
  // Decode repairs a token that holds part of a UTF-8 character into U+FFFD; its spelling still
  // names the raw bytes.
  if (text.find(kReplacement) != std::string::npos) {
    if (auto bytes = ByteFallbackBytes(*spelling)) return *bytes;
    if (auto bytes = ByteLevelBytes(*spelling)) return *bytes;
  }
  return text;
}

// Tokenizes a fragment from the middle of a text. Tokenizers that prepend a space to the text
// they encode (SentencePiece's "▁" prefix) would spell a fragment "-" as "▁" "-"; for them the
// fragment is encoded after a guard ("\n") whose tokens are then dropped.
class FragmentTokenizer {
 public:
  FragmentTokenizer(const tokenizer::Tokenizer& tokenizer,
                    std::shared_ptr<const std::vector<std::string>> token_bytes)
      : tokenizer_(tokenizer), token_bytes_(std::move(token_bytes)) {
    guard_bytes_ = Concat(Encode(kGuard));
  }

  std::vector<int32_t> operator()(std::string_view text) const {
    std::vector<int32_t> ids = Encode(text);
    if (Concat(ids) == text) return ids;
    std::string guarded_text = kGuard;
    guarded_text.append(text);
    const std::vector<int32_t> guarded = Encode(guarded_text);
    std::string prefix;
    size_t skip = 0;
    while (skip < guarded.size() && prefix.size() < guard_bytes_.size()) {
      prefix += Bytes(guarded[skip++]);
    }
    if (prefix == guard_bytes_) {
      std::vector<int32_t> rest(guarded.begin() + static_cast<std::ptrdiff_t>(skip), guarded.end());
      if (Concat(rest) == text) return rest;
    }
    return ids;  // best effort: llguidance then forces a non-canonical spelling
  }

 private:
  static constexpr const char* kGuard = "\n";

  std::vector<int32_t> Encode(std::string_view text) const {
    // Text only: a JSON string that spells "<|im_end|>" must not become the special token.
    const tokenizer::EncodeOptions options{.add_special_tokens = false, .parse_special = false};
    const std::vector<tokenizer::TokenId> ids = tokenizer_.Encode(text, options);
    return std::vector<int32_t>(ids.begin(), ids.end());
  }
  const std::string& Bytes(int32_t id) const {
    static const std::string kNone;
    return id >= 0 && static_cast<size_t>(id) < token_bytes_->size()
               ? (*token_bytes_)[static_cast<size_t>(id)]
               : kNone;
  }
  std::string Concat(const std::vector<int32_t>& ids) const {
    std::string text;
    for (int32_t id : ids) text += Bytes(id);
    return text;
  }

  const tokenizer::Tokenizer& tokenizer_;
  std::shared_ptr<const std::vector<std::string>> token_bytes_;
  std::string guard_bytes_;
};

}  // namespace

GrammarVocabulary GrammarVocabularyFromTokenizer(const tokenizer::Tokenizer& tokenizer,
                                                 int32_t vocab_size,
                                                 std::span<const int32_t> eos_ids) {
  RADIX_CHECK(vocab_size > 0);
  const tokenizer::DecodeOptions options{.skip_special_tokens = false};
  const auto anchor = FindAnchor(tokenizer, options);
  std::string anchor_text;
  if (anchor) anchor_text = tokenizer.Decode(std::span(&*anchor, 1), options);

  GrammarVocabulary vocab;
  vocab.token_bytes.resize(static_cast<size_t>(vocab_size));
  const size_t known = std::min(tokenizer.vocab_size(), static_cast<size_t>(vocab_size));
  for (size_t id = 0; id < known; ++id) {
    vocab.token_bytes[id] =
        TokenBytes(tokenizer, static_cast<tokenizer::TokenId>(id), anchor, options, anchor_text);
  }
  vocab.eos_ids.assign(eos_ids.begin(), eos_ids.end());
  vocab.tokenize = FragmentTokenizer(
      tokenizer, std::make_shared<const std::vector<std::string>>(vocab.token_bytes));
  return vocab;
}

}  // namespace radixserve::sampling
