// The tokenization model: turns one pre-tokenized piece into token ids (HF tokenizers' `model`).
// Implementations: BpeModel (merges or SentencePiece scores), WordPieceModel. Immutable after
// construction; Tokenize may be called concurrently from several threads.
#pragma once

#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace radixserve::tokenizer {

class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of `piece` to `out`.
  virtual void Tokenize(std::string_view piece, std::vector<TokenId>& out) const = 0;
  virtual const Vocab& vocab() const = 0;
};

}  // namespace radixserve::tokenizer
