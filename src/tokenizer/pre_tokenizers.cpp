#include "tokenizer/pre_tokenizers.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace radixserve::tokenizer {

const char* const kGpt2SplitPattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

namespace {

// A byte range of a piece and whether it is a delimiter.
struct Segment {
  size_t begin, end;
  bool delimiter;
};

// Cuts [0, size) at `matches`: each match one segment flagged `match_is_delimiter`, each gap
// between matches one segment with the opposite flag.
std::vector<Segment> Segments(const std::vector<std::pair<size_t, size_t>>& matches, size_t size,
                              bool match_is_delimiter) {
  std::vector<Segment> segs;
  size_t last = 0;
  for (auto [b, e] : matches) {
    if (b > last) segs.push_back({last, b, !match_is_delimiter});
    segs.push_back({b, e, match_is_delimiter});
    last = e;
  }
  if (last < size) segs.push_back({last, size, !match_is_delimiter});
  return segs;
}

void SplitSegments(const Piece& piece, const std::vector<Segment>& segs, SplitBehavior behavior,
                   std::vector<Piece>& out) {
  std::vector<std::pair<size_t, size_t>> ranges;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const auto& s : segs) {
        if (!s.delimiter) ranges.emplace_back(s.begin, s.end);
      }
      break;
    case SplitBehavior::kIsolated:
      for (const auto& s : segs) ranges.emplace_back(s.begin, s.end);
      break;
    case SplitBehavior::kContiguous: {
      bool prev_delim = false;
      for (const auto& s : segs) {
        if (s.delimiter && prev_delim) {
          ranges.back().second = s.end;
        } else {
          ranges.emplace_back(s.begin, s.end);
        }
        prev_delim = s.delimiter;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      bool prev_text = false;
      for (const auto& s : segs) {
        if (s.delimiter && prev_text) {
          ranges.back().second = s.end;
        } else {
          ranges.emplace_back(s.begin, s.end);
        }
        prev_text = !s.delimiter;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool prev_delim = false;
      for (const auto& s : segs) {
        if (!s.delimiter && prev_delim) {
          ranges.back().second = s.end;
        } else {
          ranges.emplace_back(s.begin, s.end);
        }
        prev_delim = s.delimiter;
      }
      break;
    }
  }
  for (auto [b, e] : ranges) {
    if (e > b) out.push_back({piece.text.substr(b, e - b), piece.at_start && b == 0});
  }
}

}  // namespace

void SplitByRanges(const Piece& piece, const std::vector<std::pair<size_t, size_t>>& delimiters,
                   SplitBehavior behavior, std::vector<Piece>& out) {
  SplitSegments(piece, Segments(delimiters, piece.text.size(), true), behavior, out);
}

ByteLevelPreTokenizer::ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
    : add_prefix_space_(add_prefix_space) {
  if (use_regex) {
    auto re = Regex::Compile(kGpt2SplitPattern);
    RADIX_CHECK(re.ok());
    regex_ = std::make_unique<Regex>(std::move(re).value());
  }
}

void ByteLevelPreTokenizer::PreTokenize(std::vector<Piece>& pieces) const {
  std::vector<Piece> split;
  split.reserve(pieces.size());
  for (auto& p : pieces) {
    if (add_prefix_space_ && (p.text.empty() || p.text[0] != ' ')) p.text = " " + p.text;
    if (regex_) {
      SplitByRanges(p, regex_->FindAll(p.text), SplitBehavior::kIsolated, split);
    } else if (!p.text.empty()) {
      split.push_back(std::move(p));
    }
  }
  for (auto& p : split) {
    std::string mapped;
    mapped.reserve(p.text.size() * 2);
    AppendByteLevel(mapped, p.text);
    p.text = std::move(mapped);
  }
  pieces = std::move(split);
}

void MetaspacePreTokenizer::PreTokenize(std::vector<Piece>& pieces) const {
  std::vector<Piece> out;
  for (auto& p : pieces) {
    std::string text;
    for (char c : p.text) {
      if (c == ' ') {
        text += replacement_;
      } else {
        text.push_back(c);
      }
    }
    const bool starts = text.compare(0, replacement_.size(), replacement_) == 0;
    if (!starts &&
        (scheme_ == PrependScheme::kAlways || (scheme_ == PrependScheme::kFirst && p.at_start))) {
      text.insert(0, replacement_);
    }
    Piece q{std::move(text), p.at_start};
    if (split_) {
      std::vector<std::pair<size_t, size_t>> delims;
      for (size_t pos = q.text.find(replacement_); pos != std::string::npos;
           pos = q.text.find(replacement_, pos + replacement_.size())) {
        delims.emplace_back(pos, pos + replacement_.size());
      }
      SplitByRanges(q, delims, SplitBehavior::kMergedWithNext, out);
    } else if (!q.text.empty()) {
      out.push_back(std::move(q));
    }
  }
  pieces = std::move(out);
}

void SplitPreTokenizer::PreTokenize(std::vector<Piece>& pieces) const {
  std::vector<Piece> out;
  for (const auto& p : pieces) {
    std::vector<std::pair<size_t, size_t>> matches;
    if (regex_) {
      matches = regex_->FindAll(p.text);
    } else if (!literal_.empty()) {
      for (size_t pos = p.text.find(literal_); pos != std::string::npos;
           pos = p.text.find(literal_, pos + literal_.size())) {
        matches.emplace_back(pos, pos + literal_.size());
      }
    }
    SplitSegments(p, Segments(matches, p.text.size(), !invert_), behavior_, out);
  }
  pieces = std::move(out);
}

void CharSplitPreTokenizer::PreTokenize(std::vector<Piece>& pieces) const {
  std::vector<Piece> out;
  for (const auto& p : pieces) {
    std::vector<std::pair<size_t, size_t>> delims;
    size_t pos = 0;
    while (pos < p.text.size()) {
      const size_t start = pos;
      char32_t cp;
      DecodeUtf8(p.text, pos, cp);
      if (is_delimiter_(cp)) delims.emplace_back(start, pos);
    }
    SplitByRanges(p, delims, behavior_, out);
  }
  pieces = std::move(out);
}

void SequencePreTokenizer::PreTokenize(std::vector<Piece>& pieces) const {
  for (const auto& step : steps_) step->PreTokenize(pieces);
}

}  // namespace radixserve::tokenizer
