// StopRegexMatcher: SGLang's `stop_regex` -- generation stops once any of the patterns is found
// (Python re.search semantics, through PCRE2) in the output text -- over a text that grows as
// tokens are detokenized. Besides the match it tells how much of the text can no longer become
// part of a match, so a streaming caller holds back only text a match may still claim (the way
// stop strings are held back).
//
// Syntax: PCRE2 (Perl/Python compatible: classes, \d \w \s with Unicode properties, groups,
// lookaround, lazy and possessive repeats). Owned by the engine thread with its sequence; not
// thread-safe. The compiled patterns are immutable and shared (compiled once on an HTTP thread).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "tokenizer/regex.h"

namespace radixserve::tokenizer {

struct StopRegex {
  std::string pattern;                 // as the request sent it (reported as the matched stop)
  std::shared_ptr<const Regex> regex;  // never null
};

// Errors (kInvalidArgument): "bad stop_regex at offset N: <PCRE2's message>".
Expected<StopRegex> CompileStopRegex(std::string pattern);

class StopRegexMatcher {
 public:
  explicit StopRegexMatcher(std::vector<StopRegex> patterns);

  struct Match {
    size_t begin = 0;  // byte range of the match in the text
    size_t end = 0;
    std::string pattern;
  };
  struct Result {
    // text[0, safe_end) cannot be part of any future match (everything when no pattern has a
    // partial match running into the end of the text).
    size_t safe_end = 0;
    std::optional<Match> match;  // the leftmost complete match (ties: the first pattern)
  };

  // `text` is the whole output so far: each call's text extends the previous call's.
  Result Check(std::string_view text);

  bool empty() const { return patterns_.empty(); }

 private:
  std::vector<StopRegex> patterns_;
  std::vector<size_t> search_from_;  // per pattern: no match can start before this byte
};

}  // namespace radixserve::tokenizer
