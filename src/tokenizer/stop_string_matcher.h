// Stop strings over a stream of text deltas. Text that could still turn into a stop string is
// held back; once a stop string appears, the stream is cut just before its first occurrence
// (earliest start; the longest stop string wins a tie) and the matcher is done.
// Owned by the engine thread with its sequence; not thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace radixserve::tokenizer {

class StopStringMatcher {
 public:
  struct Output {
    std::string text;                    // safe to release now
    std::optional<std::string> matched;  // set once a stop string was found
  };

  // Empty stop strings are ignored.
  explicit StopStringMatcher(std::vector<std::string> stop_strings);

  // Feeds the next delta. After a match every call returns empty text.
  Output Feed(std::string_view delta);
  // The stream ended without a match: releases the held-back tail.
  std::string Flush();

  bool stopped() const { return stopped_; }
  const std::string& held() const { return held_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace radixserve::tokenizer
