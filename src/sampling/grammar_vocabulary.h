// GrammarVocabulary: what llguidance needs to know about a model's vocabulary -- the bytes each
// token id adds to the text, the ids that end generation, and how to tokenize a fragment -- and
// GrammarVocabularyFromTokenizer, which derives it from our Tokenizer (byte-level BPE,
// SentencePiece with byte fallback, added tokens). Plain data; GrammarTokenizer consumes it.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace radixserve::sampling {

// Canonical tokenization of a text fragment from the middle of a text, without BOS/EOS and without
// a tokenizer's prefix space (llguidance turns bytes the grammar forces into these tokens, and
// then allows only them). Must be thread-safe.
using GrammarTokenizeFn = std::function<std::vector<int32_t>(std::string_view text)>;

struct GrammarVocabulary {
  // token_bytes[id]: the bytes token `id` adds to the text; size() is the mask width (the logits
  // row width, which may exceed the tokenizer's vocabulary). Special tokens: "\xFF" + name.
  std::vector<std::string> token_bytes;
  // Ids that end generation (EOS, EOT, ...); at least one. A grammar allows them exactly when it
  // accepts the text so far.
  std::vector<int32_t> eos_ids;
  // Empty: llguidance's approximate greedy tokenization over the vocabulary; forced bytes are then
  // left to the model's choice of tokens and ForcedTokens() is always empty.
  GrammarTokenizeFn tokenize;
};

// Derives the vocabulary from `tokenizer`. `vocab_size` is the logits row width (>= the
// tokenizer's vocab_size()); `eos_ids` as the engine finishes on them (model config eos ids ∪
// tokenizer eos ∪ additional stop ids). The returned `tokenize` references `tokenizer`, which
// must outlive the GrammarTokenizer built from it. Cost: two short decodes per token (~0.1 s for
// 150k tokens); call once per model at startup.
GrammarVocabulary GrammarVocabularyFromTokenizer(const tokenizer::Tokenizer& tokenizer,
                                                 int32_t vocab_size,
                                                 std::span<const int32_t> eos_ids);

}  // namespace radixserve::sampling
