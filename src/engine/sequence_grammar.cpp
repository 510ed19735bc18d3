#include "engine/sequence_grammar.h"

#include <algorithm>

namespace radixserve::engine {

SequenceGrammar::SequenceGrammar(const sampling::CompiledGrammar& grammar,
                                 std::optional<int32_t> start_token)
    : matcher_(grammar.NewMatcher()), start_token_(start_token) {}

Status SequenceGrammar::Resync(std::span<const int32_t> output_ids) {
  ++resyncs_;
  const auto diverge =
      std::mismatch(accepted_.begin(), accepted_.end(), output_ids.begin(), output_ids.end());
  const size_t common = static_cast<size_t>(diverge.first - accepted_.begin());
  Status rolled = matcher_.Rollback(accepted_.size() - common);
  if (rolled.ok()) {
    accepted_.resize(common);
  } else {
    RADIX_RETURN_IF_ERROR(matcher_.Reset());
    accepted_.clear();
  }
  for (size_t i = accepted_.size(); i < output_ids.size(); ++i) {
    RADIX_RETURN_IF_ERROR(Accept(output_ids[i]));
  }
  return Status::Ok();
}

Status SequenceGrammar::FillMask(std::span<const int32_t> output_ids, std::span<uint32_t> mask) {
  if (start_token_) {
    // The matcher sees only what follows the first start token; before it, anything goes.
    auto start = std::find(output_ids.begin(), output_ids.end(), *start_token_);
    started_ = start != output_ids.end();
    if (!started_) {
      std::fill(mask.begin(), mask.end(), ~uint32_t{0});
      return Status::Ok();
    }
    output_ids = output_ids.subspan(static_cast<size_t>(start - output_ids.begin()) + 1);
  }
  if (!std::equal(accepted_.begin(), accepted_.end(), output_ids.begin(), output_ids.end())) {
    RADIX_RETURN_IF_ERROR(Resync(output_ids));
  }
  RADIX_RETURN_IF_ERROR(matcher_.FillNextTokenBitmask(mask));
  if (std::all_of(mask.begin(), mask.end(), [](uint32_t word) { return word == 0; })) {
    return InvalidArgument("the grammar allows no token after " +
                           std::to_string(output_ids.size()) + " output tokens");
  }
  return Status::Ok();
}

Status SequenceGrammar::Accept(int32_t token) {
  if (!active()) {
    started_ = token == *start_token_;
    return Status::Ok();
  }
  RADIX_RETURN_IF_ERROR(matcher_.AcceptToken(token));
  accepted_.push_back(token);
  return Status::Ok();
}

std::vector<int32_t> SequenceGrammar::ForcedTokens(size_t max_tokens) {
  if (!active() || matcher_.IsTerminated()) return {};
  auto forced = matcher_.ForcedTokens(max_tokens);
  if (!forced.ok()) return {};
  return std::move(forced).value();
}

}  // namespace radixserve::engine
