#include "sampling/compiled_grammar.h"

#include <llguidance.h>

#include "common/check.h"

namespace radixserve::sampling {

CompiledGrammar::CompiledGrammar(LlgMatcher* start, size_t bitmask_words, std::string source)
    : start_(start), bitmask_words_(bitmask_words), source_(std::move(source)) {
  RADIX_CHECK(start_ != nullptr && !llg_matcher_is_error(start_));
}

CompiledGrammar::~CompiledGrammar() { llg_free_matcher(start_); }

GrammarMatcher CompiledGrammar::NewMatcher() const {
  LlgMatcher* copy = nullptr;
  {
    std::lock_guard lock(mutex_);
    copy = llg_clone_matcher(start_);
  }
  return GrammarMatcher(copy, bitmask_words_);
}

}  // namespace radixserve::sampling
