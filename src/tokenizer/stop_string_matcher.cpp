#include "tokenizer/stop_string_matcher.h"

namespace radixserve::tokenizer {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stop_strings) {
  for (auto& s : stop_strings) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

StopStringMatcher::Output StopStringMatcher::Feed(std::string_view delta) {
  Output out;
  if (stopped_) return out;
  held_.append(delta);
  // Earliest occurrence of any stop string in the held text.
  size_t best = std::string::npos;
  const std::string* best_stop = nullptr;
  for (const auto& s : stops_) {
    const size_t at = held_.find(s);
    if (at == std::string::npos) continue;
    if (at < best || (at == best && s.size() > best_stop->size())) {
      best = at;
      best_stop = &s;
    }
  }
  if (best_stop != nullptr) {
    out.text = held_.substr(0, best);
    out.matched = *best_stop;
    held_.clear();
    stopped_ = true;
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const auto& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, held_.size());
    for (size_t len = max_len; len > keep; --len) {
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        keep = len;
        break;
      }
    }
  }
  out.text = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopStringMatcher::Flush() {
  std::string rest = std::move(held_);
  held_.clear();
  return rest;
}

}  // namespace radixserve::tokenizer
