// CompiledGrammar: one request constraint compiled by llguidance for one vocabulary -- a matcher in
// its start state that NewMatcher copies for each sequence. Made by GrammarCompiler; immutable and
// safe to share (a compiled-grammar cache keyed by the constraint text may hand one to many
// requests, and n > 1 requests take one matcher per sample).
// Thread affinity: NewMatcher may be called from any thread at once.
// Lifetime: the GrammarTokenizer it was compiled with must outlive it and its matchers.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>

#include "sampling/grammar_matcher.h"

struct LlgMatcher;

namespace radixserve::sampling {

class CompiledGrammar {
 public:
  // Takes ownership of `start` (a fresh llguidance matcher, not in an error state).
  // `source`: the grammar text handed to llguidance (after EBNF / JSON-option rewriting).
  CompiledGrammar(LlgMatcher* start, size_t bitmask_words, std::string source);
  ~CompiledGrammar();
  CompiledGrammar(const CompiledGrammar&) = delete;
  CompiledGrammar& operator=(const CompiledGrammar&) = delete;

  // A matcher at the start of the grammar. Cost: a copy of the parser state (microseconds for a
  // fresh grammar).
  GrammarMatcher NewMatcher() const;

  const std::string& source() const { return source_; }
  size_t bitmask_words() const { return bitmask_words_; }

 private:
  mutable std::mutex mutex_;  // llguidance's clone is not documented as safe to run concurrently
  LlgMatcher* start_;
  size_t bitmask_words_;
  std::string source_;
};

}  // namespace radixserve::sampling
