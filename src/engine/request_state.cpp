#include "engine/request_state.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include <fmt/format.h>

#include "common/log.h"

namespace radixserve::engine {

RequestState::RequestState(GenerateRequest request, EventSink sink,
                           const tokenizer::Tokenizer* tokenizer, uint64_t seed,
                           int64_t stream_interval)
    : request_(std::move(request)),
      sink_(std::move(sink)),
      seed_(seed),
      stream_interval_(request_.sampling.stream_interval.value_or(stream_interval)) {
  if (stream_interval_ < 1) stream_interval_ = 1;
  if (request_.detokenize && tokenizer != nullptr) {
    tokenizer::DecodeOptions options;
    options.skip_special_tokens = request_.sampling.skip_special_tokens;
    options.spaces_between_special_tokens = request_.sampling.spaces_between_special_tokens;
    detokenizer_ = std::make_unique<tokenizer::IncrementalDetokenizer>(*tokenizer,
                                                                       request_.input_ids, options);
    stop_matcher_ = std::make_unique<tokenizer::StopStringMatcher>(request_.sampling.stop);
    if (!request_.stop_regex.empty()) {
      stop_regex_ = std::make_unique<tokenizer::StopRegexMatcher>(request_.stop_regex);
    }
  }
  // A prefill-only request (max_new_tokens 0) samples nothing and needs no matcher.
  if (request_.grammar && request_.sampling.max_new_tokens.value_or(1) > 0) {
    grammar_.emplace(*request_.grammar, request_.grammar_start_token);
  }
  if (request_.return_logprob && request_.logprob_start_len >= 0) {
    input_logprob_start_ = static_cast<size_t>(request_.logprob_start_len);
    const size_t n = request_.input_ids.size() > input_logprob_start_
                         ? request_.input_ids.size() - input_logprob_start_
                         : 0;
    pending_.input_logprobs.resize(n);
    for (size_t i = 0; i < n; ++i) {
      pending_.input_logprobs[i].token_id = request_.input_ids[input_logprob_start_ + i];
      pending_.input_logprobs[i].logprob = std::numeric_limits<float>::quiet_NaN();
    }
  }
}

void RequestState::AddInputLogprob(size_t pos, TokenLogprobInfo info) {
  if (pos < input_logprob_start_ || pos - input_logprob_start_ >= pending_.input_logprobs.size()) {
    return;
  }
  // The first entry stays without a value, as in SGLang.
  if (pos == input_logprob_start_) return;
  pending_.input_logprobs[pos - input_logprob_start_] = std::move(info);
}

TokenLogprobInfo MakeLogprobInfo(int32_t token, const sampling::SampleOutput& sample) {
  TokenLogprobInfo info;
  info.token_id = token;
  info.logprob = sample.logprob;
  for (const sampling::TokenLogprob& t : sample.top_logprobs)
    info.top.emplace_back(t.token_id, t.logprob);
  info.token_ids_logprobs = sample.token_ids_logprobs;
  return info;
}

void RequestState::AddHiddenRow(size_t pos, std::span<const float> row) {
  if (pos < hidden_sent_) return;
  const size_t i = pos - hidden_sent_;
  if (hidden_.size() <= i) hidden_.resize(i + 1);
  hidden_[i].assign(row.begin(), row.end());
}

void RequestState::RecordLogits(std::span<const float> row, int64_t output_len) {
  pending_.logits.assign(row.begin(), row.end());
  if (output_len == request_.logits_index) indexed_logits_.assign(row.begin(), row.end());
}

bool RequestState::OnToken(int32_t token, const sampling::SampleOutput& sample, int64_t output_len,
                           std::span<const int32_t> eos_ids, int64_t vocab_size,
                           int64_t cached_tokens, bool emit) {
  pending_.new_token_ids.push_back(token);
  if (request_.return_logprob) pending_.output_logprobs.push_back(MakeLogprobInfo(token, sample));
  if (request_.return_entropy) pending_.output_entropy.push_back(sample.entropy);
  const std::optional<FinishReason> check =
      sampling::CheckTokenFinish(request_.sampling, output_len, token, eos_ids, vocab_size);
  // Whether the token's text is dropped: a stop token (EOS or stop_token_ids) that ends the
  // request, unless no_stop_trim.
  bool trim_token = check && check->matched_token.has_value();
  if (check && check->kind == FinishKind::kLength) {
    finish_ = *check;
  } else if (grammar_ && grammar_->terminated()) {
    // SGLang reports grammar termination as a stop on the last token. That token is text the
    // grammar matched (kept) unless it is an EOS / stop id (EOS while the grammar accepts).
    finish_ = StopTokenFinish(token);
    trim_token = std::find(eos_ids.begin(), eos_ids.end(), token) != eos_ids.end() ||
                 std::binary_search(request_.sampling.stop_token_ids.begin(),
                                    request_.sampling.stop_token_ids.end(), token);
  } else if (check) {
    finish_ = *check;
  }

  if (detokenizer_) {
    const bool drop = trim_token && finish_ && !request_.sampling.no_stop_trim;
    std::string delta = drop ? std::string() : detokenizer_->Step(std::span(&token, 1));
    if (finish_) delta += detokenizer_->Finish();
    AddText(delta, finish_.has_value());
  }

  if (finish_) {
    Emit(/*final=*/true, output_len, cached_tokens);
    return true;
  }
  // A step that appends several tokens (jump-forward) reports them together; with an interval
  // k > 1 it emits when it reaches or passes the next 1, k+1, 2k+1, ... output length.
  const bool cadence = stream_interval_ == 1 || output_len % stream_interval_ == 1 ||
                       output_len - last_emit_len_ >= stream_interval_;
  if (request_.stream && emit && cadence) {
    Emit(/*final=*/false, output_len, cached_tokens);
    last_emit_len_ = output_len;
  }
  return false;
}

void RequestState::AddText(std::string_view delta, bool finishing) {
  if (text_stopped_) return;
  text_ += delta;
  const bool keep_stop = request_.sampling.no_stop_trim;
  size_t end = text_.size();  // text_[0, end) may be released now
  std::optional<std::string> matched;
  tokenizer::StopStringMatcher::Output out = stop_matcher_->Feed(delta);
  if (out.matched) {
    const size_t cut = string_safe_end_ + out.text.size();
    end = keep_stop ? cut + out.matched->size() : cut;
    matched = std::move(out.matched);
  } else {
    string_safe_end_ += out.text.size();
    if (!finishing) end = std::min(end, string_safe_end_);
  }
  // Stop strings first, then stop regexes, as SGLang checks them. Unlike SGLang (which trims
  // only when the pattern happens to occur literally in the text), the text is cut at the start
  // of the regex match, as it is at a stop string.
  if (!matched && stop_regex_) {
    tokenizer::StopRegexMatcher::Result found = stop_regex_->Check(text_);
    if (found.match) {
      end = keep_stop ? found.match->end : found.match->begin;
      matched = std::move(found.match->pattern);
    } else if (!finishing) {
      end = std::min(end, found.safe_end);
    }
  }
  if (matched) {
    text_stopped_ = true;
    if (!finish_) finish_ = StopTextFinish(std::move(*matched));
  }
  if (end > text_released_) {
    pending_.text_delta.append(text_, text_released_, end - text_released_);
    text_released_ = end;
  }
}

void RequestState::Finish(FinishReason reason, int64_t output_len, int64_t cached_tokens) {
  if (finished_) return;
  finish_ = std::move(reason);
  Emit(/*final=*/true, output_len, cached_tokens);
}

void RequestState::Emit(bool final, int64_t output_len, int64_t cached_tokens) {
  RequestEvent event = std::move(pending_);
  pending_ = RequestEvent{};
  input_logprobs_sent_ = true;
  if (request_.return_hidden_states) {
    // Positions fed so far: the prompt and every output token but the last.
    const size_t fed =
        request_.input_ids.size() + static_cast<size_t>(std::max<int64_t>(output_len - 1, 0));
    size_t rows = 0;
    while (hidden_sent_ + rows < fed && rows < hidden_.size() && !hidden_[rows].empty()) ++rows;
    const auto end = hidden_.begin() + static_cast<std::ptrdiff_t>(rows);
    event.hidden_states_from = static_cast<int64_t>(hidden_sent_);
    event.hidden_states.assign(std::make_move_iterator(hidden_.begin()),
                               std::make_move_iterator(end));
    hidden_.erase(hidden_.begin(), end);
    hidden_sent_ += rows;
  }
  event.prompt_tokens = static_cast<int64_t>(request_.input_ids.size());
  event.completion_tokens = output_len;
  event.cached_tokens = cached_tokens;
  event.storage_cached_tokens = storage_cached_tokens_;
  event.spec_verify_ct = spec_verify_ct_;
  event.e2e_latency_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - request_.arrival).count();
  if (final) {
    if (time_stats_prefix_) LogTimeStats(output_len, cached_tokens);
    event.finished = true;
    event.finish_reason = finish_;
    event.kv_rows = std::move(kv_rows_);
    if (!indexed_logits_.empty()) event.logits = std::move(indexed_logits_);
    finished_ = true;
  }
  sink_(std::move(event));
}

void RequestState::LogTimeStats(int64_t output_len, int64_t cached_tokens) const {
  // SGLang's Req.log_time_stats line: queueing until the first step, then the steps until now.
  using Clock = std::chrono::steady_clock;
  const Clock::time_point now = Clock::now();
  const Clock::time_point forward = forward_entry_.value_or(now);
  const auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d); };
  const double entry_wall =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() -
      std::chrono::duration<double>(now - request_.arrival).count();
  const char* type = request_.export_kv                 ? "prefill"
                     : request_.prefilled_kv != nullptr ? "decode"
                                                        : "unified";
  std::string bootstrap;
  if (request_.bootstrap) bootstrap = fmt::format(", bootstrap_room={}", request_.bootstrap->room);
  RADIX_LOG_INFO(
      "{}ReqTimeStats(rid={}{}, input_len={}, cached_input_len={}, output_len={}, attempts=1, "
      "type={}): queue_duration={:.2f}ms, forward_duration={:.2f}ms, entry_time={:.3f}",
      *time_stats_prefix_, request_.rid, bootstrap, request_.input_ids.size(), cached_tokens,
      output_len, type, ms(forward - request_.arrival).count(), ms(now - forward).count(),
      entry_wall);
}

}  // namespace radixserve::engine
