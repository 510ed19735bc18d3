#include "tokenizer/unigram_model.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "tokenizer/utf8.h"

namespace radixserve::tokenizer {
namespace {

// HF tokenizers' K_UNK_PENALTY.
constexpr double kUnknownPenalty = 10.0;

std::vector<std::string> Spellings(const std::vector<std::pair<std::string, double>>& pieces) {
  std::vector<std::string> out;
  out.reserve(pieces.size());
  for (const auto& [text, score] : pieces) out.push_back(text);
  return out;
}

}  // namespace

UnigramModel::UnigramModel(std::vector<std::pair<std::string, double>> pieces,
                           std::optional<TokenId> unk_id, bool byte_fallback)
    : vocab_(Spellings(pieces)), unk_id_(unk_id), byte_fallback_(byte_fallback) {
  double min_score = std::numeric_limits<double>::infinity();
  scores_.reserve(pieces.size());
  token_at_.push_back(-1);  // the root
  for (size_t id = 0; id < pieces.size(); ++id) {
    const auto& [text, score] = pieces[id];
    scores_.push_back(score);
    min_score = std::min(min_score, score);
    uint32_t node = 0;
    for (unsigned char byte : text) {
      const uint64_t key = static_cast<uint64_t>(node) << 8 | byte;
      auto [it, added] = children_.emplace(key, static_cast<uint32_t>(token_at_.size()));
      if (added) token_at_.push_back(-1);
      node = it->second;
    }
    // A later duplicate spelling wins, as HF's token_to_ids map.
    if (!text.empty()) token_at_[node] = static_cast<TokenId>(id);
  }
  unk_score_ = (pieces.empty() ? 0.0 : min_score) - kUnknownPenalty;
}

void UnigramModel::PrefixTokens(std::string_view text,
                                std::vector<std::pair<TokenId, size_t>>& out) const {
  out.clear();
  uint32_t node = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    auto it =
        children_.find(static_cast<uint64_t>(node) << 8 | static_cast<unsigned char>(text[i]));
    if (it == children_.end()) return;
    node = it->second;
    if (token_at_[node] >= 0) out.emplace_back(token_at_[node], i + 1);
  }
}

void UnigramModel::EmitUnknown(std::string_view text, std::vector<TokenId>& out) const {
  if (byte_fallback_) {
    std::vector<TokenId> bytes;
    for (unsigned char byte : text) {
      auto id = vocab_.Find(fmt::format("<0x{:02X}>", byte));
      if (!id) break;
      bytes.push_back(*id);
    }
    if (bytes.size() == text.size()) {
      out.insert(out.end(), bytes.begin(), bytes.end());
      return;
    }
  }
  if (unk_id_) out.push_back(*unk_id_);
}

void UnigramModel::Tokenize(std::string_view piece, std::vector<TokenId>& out) const {
  if (piece.empty()) return;
  struct Best {
    TokenId id = -1;  // -1 with a start: the unknown token
    double score = 0;
    size_t start = std::string_view::npos;  // npos: not reached
  };
  const size_t size = piece.size();
  std::vector<Best> best(size + 1);
  best[0].start = 0;
  std::vector<std::pair<TokenId, size_t>> prefixes;
  for (size_t at = 0; at < size;) {
    const double here = best[at].score;
    const size_t char_len = std::min(Utf8Length(static_cast<unsigned char>(piece[at])), size - at);
    bool single_char_token = false;
    PrefixTokens(piece.substr(at), prefixes);
    for (const auto& [id, length] : prefixes) {
      Best& target = best[at + length];
      const double score = here + scores_[static_cast<size_t>(id)];
      if (target.start == std::string_view::npos || score > target.score) {
        target = Best{id, score, at};
      }
      single_char_token = single_char_token || length == char_len;
    }
    if (!single_char_token) {
      Best& target = best[at + char_len];
      const double score = here + unk_score_;
      if (target.start == std::string_view::npos || score > target.score) {
        target = Best{-1, score, at};
      }
    }
    at += char_len;
  }
  // Walk back; runs of unknown characters fuse into one unknown piece.
  std::vector<std::pair<size_t, size_t>> spans;  // [start, end) per token, back to front
  std::vector<bool> unknown;
  for (size_t end = size; end > 0;) {
    const Best& node = best[end];
    const bool unk = node.id < 0 || (unk_id_ && node.id == *unk_id_);
    if (unk && !unknown.empty() && unknown.back()) {
      spans.back().first = node.start;
    } else {
      spans.emplace_back(node.start, end);
      unknown.push_back(unk);
    }
    end = node.start;
  }
  // Each piece is looked up by its spelling, as HF does (a fused run of unknown characters
  // included).
  for (size_t i = spans.size(); i-- > 0;) {
    const std::string_view text = piece.substr(spans[i].first, spans[i].second - spans[i].first);
    if (auto id = vocab_.Find(text)) {
      out.push_back(*id);
    } else {
      EmitUnknown(text, out);
    }
  }
}

}  // namespace radixserve::tokenizer
