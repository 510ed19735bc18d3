#include "tokenizer/normalizers.h"

#include "tokenizer/utf8.h"

namespace radixserve::tokenizer {

namespace {

// Rebuilds `text` keeping or rewriting each code point through `fn(cp, out)`.
template <typename Fn>
void MapCodePoints(std::string& text, Fn&& fn) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    char32_t cp;
    DecodeUtf8(text, pos, cp);
    fn(cp, out);
  }
  text = std::move(out);
}

}  // namespace

void UnicodeNormalizer::Normalize(std::string& text) const { text = NormalizeUnicode(text, form_); }

void LowercaseNormalizer::Normalize(std::string& text) const { text = ToLowerUnicode(text); }

void PrependNormalizer::Normalize(std::string& text) const {
  if (!text.empty()) text.insert(0, prefix_);
}

void ReplaceNormalizer::Normalize(std::string& text) const {
  std::string out;
  if (regex_) {
    size_t last = 0;
    for (auto [b, e] : regex_->FindAll(text)) {
      out.append(text, last, b - last);
      out += content_;
      last = e;
    }
    out.append(text, last);
  } else {
    if (literal_.empty() || text.find(literal_) == std::string::npos) return;
    size_t last = 0, hit;
    while ((hit = text.find(literal_, last)) != std::string::npos) {
      out.append(text, last, hit - last);
      out += content_;
      last = hit + literal_.size();
    }
    out.append(text, last);
  }
  text = std::move(out);
}

void StripNormalizer::Normalize(std::string& text) const {
  size_t begin = 0, end = text.size();
  if (left_) {
    while (begin < end) {
      size_t pos = begin;
      char32_t cp;
      DecodeUtf8(text, pos, cp);
      if (!IsWhitespace(cp)) break;
      begin = pos;
    }
  }
  if (right_) {
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
      size_t pos = start;
      char32_t cp;
      DecodeUtf8(text, pos, cp);
      if (!IsWhitespace(cp)) break;
      end = start;
    }
  }
  text = text.substr(begin, end - begin);
}

void StripAccentsNormalizer::Normalize(std::string& text) const {
  MapCodePoints(text, [](char32_t cp, std::string& out) {
    if (!IsNonspacingMark(cp)) AppendUtf8(out, cp);
  });
}

void BertNormalizer::Normalize(std::string& text) const {
  if (clean_text_) {
    MapCodePoints(text, [](char32_t cp, std::string& out) {
      if (cp == 0 || cp == kReplacementChar || IsControl(cp)) return;
      AppendUtf8(out, IsWhitespace(cp) ? U' ' : cp);
    });
  }
  if (handle_chinese_chars_) {
    MapCodePoints(text, [](char32_t cp, std::string& out) {
      if (IsChineseChar(cp)) {
        out.push_back(' ');
        AppendUtf8(out, cp);
        out.push_back(' ');
      } else {
        AppendUtf8(out, cp);
      }
    });
  }
  if (strip_accents_) {
    text = NormalizeUnicode(text, NormalForm::kNfd);
    StripAccentsNormalizer().Normalize(text);
  }
  if (lowercase_) text = ToLowerUnicode(text);
}

void SequenceNormalizer::Normalize(std::string& text) const {
  for (const auto& step : steps_) step->Normalize(text);
}

}  // namespace radixserve::tokenizer
