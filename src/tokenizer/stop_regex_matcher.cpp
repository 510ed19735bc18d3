#include "tokenizer/stop_regex_matcher.h"

#include <algorithm>

namespace radixserve::tokenizer {

Expected<StopRegex> CompileStopRegex(std::string pattern) {
  RADIX_ASSIGN_OR_RETURN(auto regex, Regex::Compile(pattern, "stop_regex"));
  return StopRegex{std::move(pattern), std::make_shared<const Regex>(std::move(regex))};
}

StopRegexMatcher::StopRegexMatcher(std::vector<StopRegex> patterns)
    : patterns_(std::move(patterns)), search_from_(patterns_.size(), 0) {}

StopRegexMatcher::Result StopRegexMatcher::Check(std::string_view text) {
  Result result;
  result.safe_end = text.size();
  for (size_t i = 0; i < patterns_.size(); ++i) {
    const Regex::SearchResult found = patterns_[i].regex->Search(text, search_from_[i]);
    switch (found.kind) {
      case Regex::SearchResult::Kind::kComplete:
        if (!result.match || found.begin < result.match->begin) {
          result.match = Match{found.begin, found.end, patterns_[i].pattern};
        }
        break;
      case Regex::SearchResult::Kind::kPartial:
        // A later match of this pattern starts here or later: the text before it was searched.
        search_from_[i] = found.begin;
        result.safe_end = std::min(result.safe_end, found.begin);
        break;
      case Regex::SearchResult::Kind::kNone:
        search_from_[i] = text.size();
        break;
    }
  }
  if (result.match) result.safe_end = std::min(result.safe_end, result.match->begin);
  return result;
}

}  // namespace radixserve::tokenizer
