#include "tokenizer/bpe_model.h"

#include <cstdio>
#include <queue>

#include "tokenizer/utf8.h"

namespace radixserve::tokenizer {

namespace {

uint64_t PairKey(TokenId a, TokenId b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

// One symbol of the word being merged: a byte range of the piece and its token (or -1).
struct Symbol {
  int prev, next;
  uint32_t begin, len;
  TokenId id;
};

// A candidate merge of symbols[left] and symbols[right]; stale once either length changed.
struct Candidate {
  double priority;  // lower merges first
  int left, right;
  uint32_t left_len, right_len;
  TokenId merged;
  bool operator>(const Candidate& o) const {
    return priority != o.priority ? priority > o.priority : left > o.left;
  }
};

}  // namespace

BpeModel::BpeModel(Vocab vocab, BpeOptions options)
    : vocab_(std::move(vocab)), options_(options), byte_tokens_(256, -1) {
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    if (auto id = vocab_.Find(name)) byte_tokens_[b] = *id;
  }
}

Expected<BpeModel> BpeModel::FromMerges(
    Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges,
    BpeOptions options) {
  BpeModel model(std::move(vocab), options);
  model.merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    auto ia = model.vocab_.Find(a), ib = model.vocab_.Find(b), im = model.vocab_.Find(a + b);
    if (!ia || !ib || !im) {
      return DataLoss("BPE merge #" + std::to_string(rank) + " '" + a + " " + b +
                      "' refers to a token missing from the vocabulary");
    }
    model.merges_.emplace(PairKey(*ia, *ib), std::make_pair(static_cast<int32_t>(rank), *im));
  }
  return model;
}

BpeModel BpeModel::FromScores(Vocab vocab, std::vector<float> scores, BpeOptions options) {
  BpeModel model(std::move(vocab), options);
  scores.resize(model.vocab_.size(), 0.0f);
  model.scores_ = std::move(scores);
  return model;
}

void BpeModel::EmitUnknown(std::string_view text, bool& last_was_unk,
                           std::vector<TokenId>& out) const {
  if (options_.byte_fallback) {
    bool all = true;
    for (unsigned char b : text) all &= byte_tokens_[b] >= 0;
    if (all) {
      for (unsigned char b : text) out.push_back(byte_tokens_[b]);
      last_was_unk = false;
      return;
    }
  }
  if (!options_.unk_id) return;
  if (options_.fuse_unk && last_was_unk) return;
  out.push_back(*options_.unk_id);
  last_was_unk = true;
}

void BpeModel::Tokenize(std::string_view piece, std::vector<TokenId>& out) const {
  if (piece.empty()) return;
  if (options_.ignore_merges) {
    if (auto id = vocab_.Find(piece)) {
      out.push_back(*id);
      return;
    }
  }
  thread_local std::vector<Symbol> symbols;
  symbols.clear();
  size_t pos = 0;
  while (pos < piece.size()) {
    const size_t start = pos;
    pos = std::min(piece.size(), pos + Utf8Length(static_cast<unsigned char>(piece[pos])));
    const auto id = vocab_.Find(piece.substr(start, pos - start));
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({index - 1, index + 1, static_cast<uint32_t>(start),
                       static_cast<uint32_t>(pos - start), id ? *id : -1});
  }
  symbols.back().next = -1;

  const bool by_scores = !scores_.empty();
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto consider = [&](int left) {
    if (left < 0) return;
    const int right = symbols[left].next;
    if (right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    if (by_scores) {
      auto id = vocab_.Find(piece.substr(l.begin, l.len + r.len));
      if (!id) return;
      queue.push({-static_cast<double>(scores_[*id]), left, right, l.len, r.len, *id});
    } else {
      if (l.id < 0 || r.id < 0) return;
      auto it = merges_.find(PairKey(l.id, r.id));
      if (it == merges_.end()) return;
      queue.push(
          {static_cast<double>(it->second.first), left, right, l.len, r.len, it->second.second});
    }
  };
  for (int i = 0; i + 1 < static_cast<int>(symbols.size()); ++i) consider(i);

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& l = symbols[c.left];
    if (l.len != c.left_len || l.next != c.right) continue;
    Symbol& r = symbols[c.right];
    if (r.len != c.right_len) continue;
    l.len += r.len;
    l.id = c.merged;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = c.left;
    r.len = 0;
    consider(l.prev);
    consider(c.left);
  }

  bool last_was_unk = false;
  for (int i = 0; i >= 0; i = symbols[i].next) {
    const Symbol& s = symbols[i];
    if (s.id >= 0) {
      out.push_back(s.id);
      last_was_unk = false;
    } else {
      EmitUnknown(piece.substr(s.begin, s.len), last_was_unk, out);
    }
  }
}

}  // namespace radixserve::tokenizer
