#include "tokenizer/decoders.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/utf8.h"

namespace radixserve::tokenizer {

namespace {

void ReplaceAll(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
}

}  // namespace

void ByteLevelDecoder::Decode(std::vector<std::string>& tokens) const {
  std::string bytes;
  for (const auto& t : tokens) {
    const size_t mark = bytes.size();
    size_t pos = 0;
    bool ok = true;
    while (pos < t.size()) {
      char32_t cp;
      DecodeUtf8(t, pos, cp);
      auto b = ByteFromByteLevelChar(cp);
      if (!b) {
        ok = false;
        break;
      }
      bytes.push_back(static_cast<char>(*b));
    }
    if (!ok) {
      bytes.resize(mark);
      bytes += t;
    }
  }
  tokens.assign(1, SanitizeUtf8(bytes));
}

void MetaspaceDecoder::Decode(std::vector<std::string>& tokens) const {
  for (size_t i = 0; i < tokens.size(); ++i) {
    const bool drop = i == 0 && scheme_ != PrependScheme::kNever;
    ReplaceAll(tokens[i], replacement_, drop ? "" : " ");
  }
}

void ByteFallbackDecoder::Decode(std::vector<std::string>& tokens) const {
  std::vector<std::string> out;
  out.reserve(tokens.size());
  std::string pending;
  size_t pending_count = 0;
  auto flush = [&] {
    if (pending_count == 0) return;
    if (IsValidUtf8(pending)) {
      out.push_back(pending);
    } else {
      for (size_t i = 0; i < pending_count; ++i) out.emplace_back("\xEF\xBF\xBD");
    }
    pending.clear();
    pending_count = 0;
  };
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (auto& t : tokens) {
    if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && hex(t[3]) >= 0 &&
        hex(t[4]) >= 0) {
      pending.push_back(static_cast<char>(hex(t[3]) * 16 + hex(t[4])));
      ++pending_count;
    } else {
      flush();
      out.push_back(std::move(t));
    }
  }
  flush();
  tokens = std::move(out);
}

void FuseDecoder::Decode(std::vector<std::string>& tokens) const {
  std::string all;
  for (const auto& t : tokens) all += t;
  tokens.assign(1, std::move(all));
}

void StripDecoder::Decode(std::vector<std::string>& tokens) const {
  if (content_.empty()) return;
  for (auto& t : tokens) {
    size_t begin = 0, end = t.size();
    for (size_t k = 0; k < start_ && t.compare(begin, content_.size(), content_) == 0; ++k) {
      begin += content_.size();
    }
    for (size_t k = 0; k < stop_ && end >= begin + content_.size() &&
                       t.compare(end - content_.size(), content_.size(), content_) == 0;
         ++k) {
      end -= content_.size();
    }
    t = t.substr(begin, end - begin);
  }
}

ReplaceDecoder::ReplaceDecoder(std::string literal, std::string content)
    : replace_(std::move(literal), std::move(content)) {}
ReplaceDecoder::ReplaceDecoder(Regex regex, std::string content)
    : replace_(std::move(regex), std::move(content)) {}

void ReplaceDecoder::Decode(std::vector<std::string>& tokens) const {
  for (auto& t : tokens) replace_.Normalize(t);
}

std::string CleanUpTokenization(std::string text) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."},   {" ?", "?"},     {" !", "!"},    {" ,", ","},
      {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
      {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (auto [from, to] : kRules) ReplaceAll(text, from, to);
  return text;
}

void WordPieceDecoder::Decode(std::vector<std::string>& tokens) const {
  for (size_t i = 0; i < tokens.size(); ++i) {
    auto& t = tokens[i];
    if (i != 0) {
      if (t.compare(0, prefix_.size(), prefix_) == 0) {
        t.erase(0, prefix_.size());
      } else {
        t = " " + t;
      }
    }
    if (cleanup_) t = CleanUpTokenization(std::move(t));
  }
}

void BpeSuffixDecoder::Decode(std::vector<std::string>& tokens) const {
  for (size_t i = 0; i < tokens.size(); ++i) {
    ReplaceAll(tokens[i], suffix_, i + 1 == tokens.size() ? "" : " ");
  }
}

void SequenceDecoder::Decode(std::vector<std::string>& tokens) const {
  for (const auto& step : steps_) step->Decode(tokens);
}

}  // namespace radixserve::tokenizer
