// WordPiece (BERT): greedy longest-match-first over a word, continuation pieces spelled with a
// prefix ("##"); a word with any unmatched remainder, or longer than max_input_chars_per_word
// characters, becomes the unknown token. Thread-safe after construction.
#pragma once

#include <string>

#include "tokenizer/model.h"

namespace radixserve::tokenizer {

class WordPieceModel final : public Model {
 public:
  WordPieceModel(Vocab vocab, TokenId unk_id, std::string continuing_prefix,
                 size_t max_input_chars_per_word)
      : vocab_(std::move(vocab)),
        unk_id_(unk_id),
        prefix_(std::move(continuing_prefix)),
        max_chars_(max_input_chars_per_word) {}

  void Tokenize(std::string_view piece, std::vector<TokenId>& out) const override;
  const Vocab& vocab() const override { return vocab_; }
  const std::string& continuing_prefix() const { return prefix_; }

 private:
  Vocab vocab_;
  TokenId unk_id_;
  std::string prefix_;
  size_t max_chars_;
};

}  // namespace radixserve::tokenizer
