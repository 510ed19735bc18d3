// GrammarTokenizer: the model vocabulary as llguidance sees it (an LlgTokenizer), built once per
// model and shared by every grammar compiled for it. Data flow:
//   GrammarVocabulary -> GrammarTokenizer -> GrammarCompiler -> CompiledGrammar -> GrammarMatcher
//
// llguidance works on bytes: it needs, for every token id below the logits width, the exact bytes
// the token adds to the text. GrammarVocabularyFromTokenizer derives them from our Tokenizer
// (byte-level BPE, SentencePiece with byte fallback, added tokens); ids without text (unused
// logits rows past the tokenizer's vocabulary) get no bytes and are never allowed by a grammar.
// Special tokens are spelled with llguidance's marker byte 0xFF before their name, so text never
// produces them and a Lark grammar may name them (`<|im_end|>`).
//
// Thread affinity: immutable after Create; every method and the handle may be used from any
// thread at once (llguidance's tokenizer is shared read-only by all its matchers). It must
// outlive every CompiledGrammar and GrammarMatcher made with it (they call back into it).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "sampling/grammar_vocabulary.h"

struct LlgTokenizer;

namespace radixserve::sampling {

class GrammarTokenizer {
 public:
  // Errors (kInvalidArgument): empty vocabulary, no eos id, an eos id outside the vocabulary, or
  // a vocabulary llguidance rejects.
  static Expected<std::unique_ptr<GrammarTokenizer>> Create(GrammarVocabulary vocabulary);
  ~GrammarTokenizer();
  GrammarTokenizer(const GrammarTokenizer&) = delete;
  GrammarTokenizer& operator=(const GrammarTokenizer&) = delete;

  // Mask width in tokens (the logits row width).
  int32_t vocab_size() const { return vocab_size_; }
  // uint32 words of a token bitmask: ceil(vocab_size / 32).
  size_t bitmask_words() const { return (static_cast<size_t>(vocab_size_) + 31) / 32; }
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  const LlgTokenizer* handle() const { return handle_; }

 private:
  GrammarTokenizer() = default;
  static size_t Tokenize(const void* self, const uint8_t* bytes, size_t len, uint32_t* out,
                         size_t out_len);

  LlgTokenizer* handle_ = nullptr;
  int32_t vocab_size_ = 0;
  std::vector<int32_t> eos_ids_;
  GrammarTokenizeFn tokenize_;
};

}  // namespace radixserve::sampling
