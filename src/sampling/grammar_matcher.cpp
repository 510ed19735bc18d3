#include "sampling/grammar_matcher.h"

#include <llguidance.h>

#include <algorithm>
#include <utility>

#include "common/check.h"

namespace radixserve::sampling {

GrammarMatcher::GrammarMatcher(LlgMatcher* matcher, size_t bitmask_words)
    : matcher_(matcher), bitmask_words_(bitmask_words) {
  RADIX_CHECK(matcher_ != nullptr);
  RADIX_CHECK(llg_matcher_get_mask_byte_size(matcher_) == bitmask_words_ * sizeof(uint32_t));
}

GrammarMatcher::~GrammarMatcher() { llg_free_matcher(matcher_); }

GrammarMatcher::GrammarMatcher(GrammarMatcher&& other) noexcept
    : matcher_(std::exchange(other.matcher_, nullptr)), bitmask_words_(other.bitmask_words_) {}

GrammarMatcher& GrammarMatcher::operator=(GrammarMatcher&& other) noexcept {
  if (this != &other) {
    llg_free_matcher(matcher_);
    matcher_ = std::exchange(other.matcher_, nullptr);
    bitmask_words_ = other.bitmask_words_;
  }
  return *this;
}

Status GrammarMatcher::LastError(const std::string& what) const {
  const char* message = llg_matcher_get_error(matcher_);
  return InvalidArgument(what + ": " + (message ? message : "unknown grammar error"));
}

Status GrammarMatcher::FillNextTokenBitmask(std::span<uint32_t> bitmask) {
  RADIX_CHECK(bitmask.size() == bitmask_words_);
  if (llg_matcher_compute_mask_into(matcher_, bitmask.data(), bitmask.size_bytes()) != 0) {
    std::fill(bitmask.begin(), bitmask.end(), 0u);
    return LastError("grammar mask");
  }
  return Status::Ok();
}

Status GrammarMatcher::AcceptToken(int32_t token) {
  if (token < 0 || llg_matcher_consume_token(matcher_, static_cast<uint32_t>(token)) != 0) {
    return LastError("grammar rejected token " + std::to_string(token));
  }
  return Status::Ok();
}

Status GrammarMatcher::AcceptTokens(std::span<const int32_t> tokens) {
  for (int32_t token : tokens) RADIX_RETURN_IF_ERROR(AcceptToken(token));
  return Status::Ok();
}

Expected<size_t> GrammarMatcher::ValidateTokens(std::span<const int32_t> tokens) {
  const auto negative = std::find_if(tokens.begin(), tokens.end(), [](int32_t t) { return t < 0; });
  const size_t checkable = static_cast<size_t>(negative - tokens.begin());
  static_assert(sizeof(int32_t) == sizeof(uint32_t));
  const int32_t n = llg_matcher_validate_tokens(
      matcher_, reinterpret_cast<const uint32_t*>(tokens.data()), checkable);
  if (n < 0) return LastError("grammar validation");
  return static_cast<size_t>(n);
}

Status GrammarMatcher::Rollback(size_t num_tokens) {
  if (llg_matcher_rollback(matcher_, num_tokens) != 0) return LastError("grammar rollback");
  return Status::Ok();
}

Status GrammarMatcher::Reset() {
  if (llg_matcher_reset(matcher_) != 0) return LastError("grammar reset");
  return Status::Ok();
}

Expected<std::vector<int32_t>> GrammarMatcher::ForcedTokens(size_t max_tokens) {
  if (max_tokens == 0) return std::vector<int32_t>{};
  std::vector<uint32_t> out(max_tokens);
  const int32_t n = llg_matcher_compute_ff_tokens(matcher_, out.data(), out.size());
  if (n < 0) return LastError("grammar forced tokens");
  return std::vector<int32_t>(out.begin(), out.begin() + n);
}

bool GrammarMatcher::IsAccepting() { return llg_matcher_is_accepting(matcher_); }

bool GrammarMatcher::IsTerminated() const { return llg_matcher_is_stopped(matcher_); }

bool GrammarMatcher::IsError() const { return llg_matcher_is_error(matcher_); }

std::string GrammarMatcher::error() const {
  if (!IsError()) return {};
  const char* message = llg_matcher_get_error(matcher_);
  return message ? message : "";
}

}  // namespace radixserve::sampling
