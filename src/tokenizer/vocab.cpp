#include "tokenizer/vocab.h"

namespace radixserve::tokenizer {

Vocab::Vocab(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {
  index_.reserve(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) {
    index_.emplace(tokens_[i], static_cast<TokenId>(i));
  }
}

}  // namespace radixserve::tokenizer
