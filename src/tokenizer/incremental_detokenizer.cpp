#include "tokenizer/incremental_detokenizer.h"

#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace radixserve::tokenizer {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
// How far the context window may grow past kContextTokens to find a usable start.
constexpr size_t kMaxExtraContextTokens = 16;

// Length of the common prefix of `a` and `b`, backed off to a character boundary.
size_t CommonPrefix(std::string_view a, std::string_view b) {
  size_t n = 0;
  const size_t limit = std::min(a.size(), b.size());
  while (n < limit && a[n] == b[n]) ++n;
  while (n > 0 && n < b.size() && (static_cast<unsigned char>(b[n]) & 0xC0) == 0x80) --n;
  return n;
}

bool EndsWithReplacement(std::string_view s) {
  return s.size() >= kReplacement.size() &&
         s.substr(s.size() - kReplacement.size()) == kReplacement;
}

// Start byte of the last character of non-empty well-formed `s` ending at `end`.
size_t LastCharStart(std::string_view s, size_t end) {
  size_t p = end - 1;
  while (p > 0 && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80) --p;
  return p;
}

char32_t CharAt(std::string_view s, size_t pos) {
  char32_t cp;
  DecodeUtf8(s, pos, cp);
  return cp;
}

}  // namespace

std::string_view PrintablePrefix(std::string_view text) {
  if (text.empty()) return text;
  if (text.back() == '\n') return text;
  const size_t last = LastCharStart(text, text.size());
  if (IsChineseChar(CharAt(text, last))) return text;
  if (last > 0) {
    const size_t penultimate = LastCharStart(text, last);
    if (IsChineseChar(CharAt(text, penultimate))) return text.substr(0, last);
  }
  const size_t space = text.rfind(' ');
  if (space == std::string_view::npos) return text.substr(0, 0);
  return text.substr(0, space + 1);
}

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer,
                                               std::span<const TokenId> prompt_ids,
                                               DecodeOptions options)
    : tokenizer_(tokenizer), options_(options) {
  size_t n = std::min(prompt_ids.size(), kContextTokens);
  // Widen the window while it gives no usable context: when it starts inside a character (it
  // decodes to U+FFFD there, and byte-fallback decoding then spoils the whole byte run it
  // belongs to) or decodes to nothing (only skipped special tokens).
  while (n < prompt_ids.size() && n < kContextTokens + kMaxExtraContextTokens) {
    const std::string text = tokenizer_.Decode(prompt_ids.subspan(prompt_ids.size() - n), options_);
    if (!text.empty() && !text.starts_with(kReplacement)) break;
    ++n;
  }
  ids_.assign(prompt_ids.end() - n, prompt_ids.end());
  read_offset_ = n;
}

std::string IncrementalDetokenizer::Decode(size_t begin, size_t end) const {
  return tokenizer_.Decode(std::span<const TokenId>(ids_).subspan(begin, end - begin), options_);
}

std::string IncrementalDetokenizer::Step(std::span<const TokenId> new_ids) {
  if (finished_) return {};
  ids_.insert(ids_.end(), new_ids.begin(), new_ids.end());
  const std::string surr_text = Decode(surr_offset_, read_offset_);
  const std::string read_text = Decode(surr_offset_, ids_.size());
  // The context's text normally prefixes the window's; where it does not (the context ended
  // inside a character that the new ids complete), the new text starts where they diverge.
  const std::string_view new_text =
      std::string_view(read_text).substr(CommonPrefix(surr_text, read_text));
  std::string candidate;
  if (!new_text.empty() && !EndsWithReplacement(new_text)) {
    decoded_text_ += new_text;
    surr_offset_ = read_offset_;
    read_offset_ = ids_.size();
    candidate = decoded_text_;
  } else {
    candidate = decoded_text_;
    candidate += PrintablePrefix(new_text);
  }
  if (candidate.size() <= emitted_.size() || candidate.compare(0, emitted_.size(), emitted_) != 0) {
    return {};
  }
  std::string delta = candidate.substr(emitted_.size());
  emitted_ = std::move(candidate);
  return delta;
}

std::string IncrementalDetokenizer::Finish() {
  if (finished_) return {};
  finished_ = true;
  const std::string surr_text = Decode(surr_offset_, read_offset_);
  const std::string read_text = Decode(surr_offset_, ids_.size());
  std::string full = decoded_text_;
  full += std::string_view(read_text).substr(CommonPrefix(surr_text, read_text));
  if (full.size() <= emitted_.size() || full.compare(0, emitted_.size(), emitted_) != 0) {
    return {};
  }
  std::string delta = full.substr(emitted_.size());
  emitted_ = std::move(full);
  return delta;
}

}  // namespace radixserve::tokenizer
