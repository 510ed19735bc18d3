// Unigram language-model tokenization (SentencePiece unigram; HF tokenizers' `Unigram` model, as
// XLM-RoBERTa, T5 and ALBERT ship it): a piece is split into the vocabulary tokens whose summed
// log-probabilities (the vocabulary scores) are highest, by a Viterbi pass over the piece's
// bytes. A character no token starts with costs the lowest score minus 10 and becomes the unknown
// token (consecutive ones fused into one), or its <0xXX> byte tokens with byte_fallback when all
// exist. Ties keep the first path found, shorter tokens first, as HF's encode_optimized.
// Immutable after construction; Tokenize may be called concurrently.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/model.h"

namespace radixserve::tokenizer {

class UnigramModel final : public Model {
 public:
  // `pieces[i]` is token i's spelling and score; every piece is a candidate.
  UnigramModel(std::vector<std::pair<std::string, double>> pieces, std::optional<TokenId> unk_id,
               bool byte_fallback);

  void Tokenize(std::string_view piece, std::vector<TokenId>& out) const override;
  const Vocab& vocab() const override { return vocab_; }

 private:
  // The ids of the tokens that are prefixes of text, shortest first, with their lengths.
  void PrefixTokens(std::string_view text, std::vector<std::pair<TokenId, size_t>>& out) const;
  void EmitUnknown(std::string_view text, std::vector<TokenId>& out) const;

  Vocab vocab_;
  std::vector<double> scores_;
  std::optional<TokenId> unk_id_;
  bool byte_fallback_;
  double unk_score_;
  // A byte trie of the spellings: (node << 8 | byte) -> child node; token_at_[node] is the id
  // spelled by the path to node, or -1.
  std::unordered_map<uint64_t, uint32_t> children_;
  std::vector<TokenId> token_at_;
};

}  // namespace radixserve::tokenizer
