#include "sampling/grammar_tokenizer.h"

#include <llguidance.h>

#include <algorithm>
#include <string>

namespace radixserve::sampling {

Expected<std::unique_ptr<GrammarTokenizer>> GrammarTokenizer::Create(GrammarVocabulary vocabulary) {
  const size_t n = vocabulary.token_bytes.size();
  if (n == 0 || n > 0x7fffffff) return InvalidArgument("grammar vocabulary: bad vocabulary size");
  if (vocabulary.eos_ids.empty()) return InvalidArgument("grammar vocabulary: no eos token");
  for (int32_t id : vocabulary.eos_ids) {
    if (id < 0 || static_cast<size_t>(id) >= n) {
      return InvalidArgument("grammar vocabulary: eos token " + std::to_string(id) +
                             " is outside the vocabulary");
    }
  }

  std::vector<uint32_t> lens(n);
  std::string bytes;
  for (size_t i = 0; i < n; ++i) {
    lens[i] = static_cast<uint32_t>(vocabulary.token_bytes[i].size());
    bytes += vocabulary.token_bytes[i];
  }
  std::vector<uint32_t> extra_eos(vocabulary.eos_ids.begin() + 1, vocabulary.eos_ids.end());

  std::unique_ptr<GrammarTokenizer> self(new GrammarTokenizer());
  self->vocab_size_ = static_cast<int32_t>(n);
  self->eos_ids_ = vocabulary.eos_ids;
  self->tokenize_ = std::move(vocabulary.tokenize);

  LlgTokenizerInitV2 init = {};
  init.struct_size = sizeof(init);
  init.vocab_size = static_cast<uint32_t>(n);
  init.tok_eos = static_cast<uint32_t>(vocabulary.eos_ids.front());
  init.tok_eos_extra = extra_eos.empty() ? nullptr : extra_eos.data();
  init.tok_eos_extra_count = static_cast<uint32_t>(extra_eos.size());
  init.token_lens = lens.data();
  init.token_bytes = reinterpret_cast<const uint8_t*>(bytes.data());
  if (self->tokenize_) {
    init.tokenize_fn = &GrammarTokenizer::Tokenize;
    init.tokenize_user_data = self.get();
    // Our Encode reads ill-formed UTF-8 as U+FFFD, so llguidance must only hand it valid text.
    init.tokenize_assumes_string = true;
  } else {
    init.use_approximate_greedy_tokenize_fn = true;
  }

  char error[1024] = {};
  self->handle_ = llg_new_tokenizer_v2(&init, error, sizeof(error));
  if (self->handle_ == nullptr) {
    return InvalidArgument(std::string("grammar vocabulary rejected by llguidance: ") + error);
  }
  return self;
}

GrammarTokenizer::~GrammarTokenizer() { llg_free_tokenizer(handle_); }

size_t GrammarTokenizer::Tokenize(const void* self, const uint8_t* bytes, size_t len, uint32_t* out,
                                  size_t out_len) {
  const auto& tokenizer = *static_cast<const GrammarTokenizer*>(self);
  const std::vector<int32_t> ids =
      tokenizer.tokenize_(std::string_view(reinterpret_cast<const char*>(bytes), len));
  const size_t copied = std::min(out_len, ids.size());
  for (size_t i = 0; i < copied; ++i) out[i] = static_cast<uint32_t>(ids[i]);
  return ids.size();
}

}  // namespace radixserve::sampling
