// EngineLoop's model step: forward, input logprobs, sampling, token commit, step logs, stats.
#include <algorithm>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>

#include "common/log.h"
#include "engine/engine_loop.h"

namespace radixserve::engine {

void EngineLoop::RunStep(sched::StepPlan& plan) {
  const InputLogprobStart input_start =
      [this](const sched::Sequence& seq) -> std::optional<size_t> {
    if (!StateOf(&seq).needs_input_logprobs()) return std::nullopt;
    return seq.logprob_start_len;
  };
  model::ForwardBatch batch =
      BuildForwardBatch(plan, memory_->req_pool(), input_start, &logit_rows_);
  hidden_positions_.clear();
  // NEXTN drafts from the target's hidden state of every token (DraftRunner::StoreHidden): then
  // every token's row comes out, and a return_hidden_states request reads its own among them.
  const bool all_hidden = draft_ != nullptr && draft_->options().mtp;
  if (all_hidden) {
    for (int64_t t = 0; t < batch.num_tokens(); ++t) batch.hidden_indices.push_back(t);
  }
  size_t base = 0;
  for (size_t e = 0; e < plan.entries.size(); ++e) {
    const sched::StepEntry& entry = plan.entries[e];
    RequestState& state = StateOf(entry.seq);
    state.MarkForwardEntry();
    const GenerateRequest& request = state.request();
    if (request.lora) batch.sequences[e].lora = request.lora->adapter.get();
    if (request.return_hidden_states) {
      // Such requests never speculate: every extend token is a fill position.
      for (size_t i = 0; i < entry.extend_len; ++i) {
        if (!all_hidden) batch.hidden_indices.push_back(static_cast<int64_t>(base + i));
        hidden_positions_.push_back({e, entry.prefix_len + i, all_hidden ? base + i : 0});
      }
    }
    base += entry.extend_len;
  }
  logits_.resize(logit_rows_.size() * static_cast<size_t>(vocab_size_));
  const auto hidden_size = static_cast<size_t>(model_->config().hidden_size);
  hidden_.resize(batch.hidden_indices.size() * hidden_size);
  progress_.SetPhase("forward");
  if (config_.test_step_delay_ms > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(config_.test_step_delay_ms));
  }
  if (expert_recorder_) expert_recorder_->Begin(batch);
  const Status status =
      batch.hidden_indices.empty()
          ? model_->Forward(batch, kv_view_, pool_, logits_.data())
          : model_->ForwardWithHidden(batch, kv_view_, pool_, logits_.data(), hidden_.data());
  if (expert_recorder_ && status.ok()) {
    // SGLang numbers the passes from 1.
    expert_recorder_->End(forward_ct_ + 1, batch, plan.kind == sched::StepKind::kDecode,
                          log_prefix_);
  }
  scheduler_->CompleteStep(plan);
  if (plan.kind != sched::StepKind::kDecode) LogPrefill(plan);
  if (!status.ok()) {
    RADIX_LOG_ERROR("Forward failed: {}", status.message());
    for (const sched::StepEntry& entry : plan.entries) {
      FinishSequence(entry.seq, AbortFinish(status.message(), 500),
                     /*cache_kv=*/false);
    }
    return;
  }
  if (all_hidden) draft_->StoreHidden(batch, hidden_.data());
  for (size_t i = 0; i < hidden_positions_.size(); ++i) {
    const auto [entry, position, token] = hidden_positions_[i];
    const size_t r = all_hidden ? token : i;
    StateOf(plan.entries[entry].seq)
        .AddHiddenRow(position,
                      std::span<const float>(hidden_.data() + r * hidden_size, hidden_size));
  }
  progress_.SetPhase("sample");
  const auto vocab = static_cast<size_t>(vocab_size_);
  for (size_t r = 0; r < logit_rows_.size(); ++r) {
    if (logit_rows_[r].sample) continue;
    ScoreInput(plan.entries[logit_rows_[r].entry], logit_rows_[r].input_position,
               std::span<const float>(logits_.data() + r * vocab, vocab));
  }
  int64_t decoded = 0;
  for (size_t r = 0; r < logit_rows_.size(); ++r) {
    if (!logit_rows_[r].sample) continue;
    const sched::StepEntry& entry = plan.entries[logit_rows_[r].entry];
    if (entry.num_drafts > 0) {
      decoded += static_cast<int64_t>(VerifyEntry(entry, r));
      r += entry.num_drafts;
      continue;
    }
    if (entry.is_decode) {
      ++decoded;
      if (speculating()) {
        // A speculative sequence without a draft this step verifies nothing but still counts.
        RequestState& state = StateOf(entry.seq);
        if (Speculates(state)) {
          state.CountSpecVerify();
          ++spec_steps_;
          ++spec_tokens_;
        }
      }
    }
    SampleEntry(entry, std::span<float>(logits_.data() + r * vocab, vocab));
  }
  if (decoded > 0) {
    tokens_since_log_ += decoded;
    if (++decode_steps_ % config_.decode_log_interval == 0) LogDecode();
  }
  if (config_.throughput_log_interval_s > 0) {
    interval_output_tokens_ += decoded;
    if (plan.kind != sched::StepKind::kDecode) {
      interval_prompt_tokens_ += static_cast<int64_t>(plan.new_tokens);
    }
    LogThroughput();
  }
}

void EngineLoop::LogThroughput() {
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - last_throughput_log_).count();
  if (elapsed <= config_.throughput_log_interval_s) return;
  const auto rate = [elapsed](int64_t tokens) { return static_cast<double>(tokens) / elapsed; };
  RADIX_LOG_INFO("{}Avg tokens(prompt+generate) throughput: {:8.3f} tokens/s", log_prefix_,
                 rate(interval_prompt_tokens_ + interval_output_tokens_));
  RADIX_LOG_INFO("{}Avg prompt tokens throughput:           {:8.3f} tokens/s", log_prefix_,
                 rate(interval_prompt_tokens_));
  RADIX_LOG_INFO("{}Avg generate tokens throughput:         {:8.3f} tokens/s", log_prefix_,
                 rate(interval_output_tokens_));
  interval_prompt_tokens_ = interval_output_tokens_ = 0;
  last_throughput_log_ = now;
}

void EngineLoop::ScoreInput(const sched::StepEntry& entry, size_t position,
                            std::span<const float> logits) {
  RequestState& state = StateOf(entry.seq);
  const GenerateRequest& request = state.request();
  sampling::SampleRowParams params;
  params.temperature = 1.0;
  params.top_logprobs_num = request.top_logprobs_num;
  params.token_ids_logprob = request.token_ids_logprob;
  const int32_t token = entry.seq->input_ids[position];
  CheckNan(entry.seq->rid, logits);
  sampler_.ScoreRow(logits, token, params, sample_out_);
  state.AddInputLogprob(position, MakeLogprobInfo(token, sample_out_));
}

void EngineLoop::SampleEntry(const sched::StepEntry& entry, std::span<float> logits) {
  sched::Sequence* seq = entry.seq;
  RequestState& state = StateOf(seq);
  if (seq->output_ids.empty()) ExportPromptKv(seq, state);
  if (seq->max_new_tokens <= 0) {
    // Prefill only (max_new_tokens 0, e.g. scoring a prompt's logprobs): nothing is sampled.
    state.Finish(LengthFinish(), 0, static_cast<int64_t>(seq->cached_tokens));
    EndRequest(seq, /*cache_kv=*/true);
    return;
  }
  if (!SampleToken(seq, state, logits)) return;
  if (CommitToken(seq, state, sample_out_.token_id, /*last=*/true) == Commit::kDone) {
    EndRequest(seq, /*cache_kv=*/true);
  }
}

EngineLoop::Commit EngineLoop::CommitToken(sched::Sequence* seq, RequestState& state, int32_t token,
                                           bool last) {
  const GenerateRequest& request = state.request();
  SequenceGrammar* grammar = state.grammar();
  seq->output_ids.push_back(token);
  // Jump-forward: text the grammar forces after the step's last token is appended now, without
  // sampling; the next decode step computes its K/V together with this token's. Requests that
  // return logprobs, entropies or logits sample every token (a forced token has no distribution
  // to report), and so do those returning hidden states (every output token's row is reported by
  // the step that feeds it).
  std::vector<int32_t> forced;
  if (last && grammar != nullptr && config_.grammar_jump_forward && !request.return_logprob &&
      !request.return_entropy && !request.return_hidden_states && !request.return_logits) {
    const int64_t room = seq->max_new_tokens - static_cast<int64_t>(seq->output_ids.size());
    if (room > 0) {
      forced = grammar->ForcedTokens(static_cast<size_t>(std::min(room, kMaxJumpForwardTokens)));
    }
  }
  const auto cached = static_cast<int64_t>(seq->cached_tokens);
  bool done = state.OnToken(token, sample_out_, static_cast<int64_t>(seq->output_ids.size()),
                            eos_ids_, vocab_size_, cached, /*emit=*/last && forced.empty());
  for (size_t i = 0; i < forced.size() && !done; ++i) {
    if (Status accepted = grammar->Accept(forced[i]); !accepted.ok()) {
      FinishGrammarError(seq, accepted);
      return Commit::kGone;
    }
    seq->output_ids.push_back(forced[i]);
    ++jump_forward_tokens_;
    done = state.OnToken(forced[i], sample_out_, static_cast<int64_t>(seq->output_ids.size()),
                         eos_ids_, vocab_size_, cached, /*emit=*/i + 1 == forced.size());
  }
  return done ? Commit::kDone : Commit::kMore;
}

bool EngineLoop::SampleToken(sched::Sequence* seq, RequestState& state, std::span<float> logits) {
  const GenerateRequest& request = state.request();
  CheckNan(seq->rid, logits);
  if (request.return_logits) {
    state.RecordLogits(logits, static_cast<int64_t>(seq->output_ids.size()) + 1);
  }
  sampling::LogitsRowContext context;
  context.params = &request.sampling;
  context.output_ids = seq->output_ids;
  context.eos_token_ids = eos_ids_;
  SequenceGrammar* grammar = state.grammar();
  if (grammar != nullptr) {
    grammar_mask_.resize(grammar->bitmask_words());
    if (Status filled = grammar->FillMask(seq->output_ids, grammar_mask_); !filled.ok()) {
      FinishGrammarError(seq, filled);
      return false;
    }
    context.allowed_tokens = grammar_mask_;
  }
  if (!first_token_mask_.empty() && seq->output_ids.empty()) {
    if (grammar == nullptr) {
      context.allowed_tokens = first_token_mask_;
    } else {  // both apply
      for (size_t w = 0; w < grammar_mask_.size() && w < first_token_mask_.size(); ++w) {
        grammar_mask_[w] &= first_token_mask_[w];
      }
    }
  }
  logits_processor_.ProcessRow(logits, context);
  sampling::SampleRowParams params =
      sampling::SampleRowParams::From(request.sampling, state.seed(), seq->output_ids.size());
  params.return_logprob = request.return_logprob;
  params.return_entropy = request.return_entropy;
  params.top_logprobs_num = request.return_logprob ? request.top_logprobs_num : 0;
  params.token_ids_logprob = request.return_logprob
                                 ? std::span<const int32_t>(request.token_ids_logprob)
                                 : std::span<const int32_t>();
  sampler_.SampleRow(logits, params, sample_out_);
  if (grammar != nullptr) {
    if (Status accepted = grammar->Accept(sample_out_.token_id); !accepted.ok()) {
      FinishGrammarError(seq, accepted);
      return false;
    }
  }
  return true;
}

void EngineLoop::FinishGrammarError(sched::Sequence* seq, const Status& error) {
  RADIX_LOG_WARN("{}Request {} ends: constrained decoding failed: {}", log_prefix_, seq->rid,
                 error.message());
  FinishSequence(seq, AbortFinish("Constrained decoding failed: " + error.message(), 400),
                 /*cache_kv=*/true);
}

void EngineLoop::CheckNan(const std::string& rid, std::span<const float> logits) const {
  if (!config_.nan_detection && !config_.crash_on_nan) return;
  const auto nans = std::count_if(logits.begin(), logits.end(), [](float x) { return x != x; });
  if (nans == 0) return;
  if (!config_.crash_on_nan) {
    RADIX_LOG_WARN("{}Detected errors during sampling! NaN in the logits ({} of {} in request {}).",
                   log_prefix_, nans, logits.size(), rid);
    return;
  }
  RADIX_LOG_ERROR(
      "{}Detected errors during sampling! NaN in the logits ({} of {} in request {}); "
      "--crash-on-nan stops the server.",
      log_prefix_, nans, logits.size(), rid);
  spdlog::default_logger()->flush();
  std::abort();
}

std::string EngineLoop::DescribePlan(const sched::StepPlan& plan) const {
  static constexpr const char* kKinds[] = {"idle", "extend", "decode", "mixed"};
  std::string out =
      fmt::format("{} batch of {} sequences, {} tokens [", kKinds[static_cast<int>(plan.kind)],
                  plan.entries.size(), plan.num_tokens());
  // The first few requests name the batch; the rest only count.
  constexpr size_t kListed = 8;
  for (size_t i = 0; i < plan.entries.size() && i < kListed; ++i) {
    const sched::StepEntry& e = plan.entries[i];
    out += fmt::format("{}rid={} prefix={} extend={}", i ? ", " : "", e.seq->rid, e.prefix_len,
                       e.extend_len);
  }
  if (plan.entries.size() > kListed) {
    out += fmt::format(", ... {} more", plan.entries.size() - kListed);
  }
  return out + "]";
}

std::string EngineLoop::DescribeState() const {
  const EngineStats stats = Stats();
  return fmt::format(
      "#running-req: {}, #queue-req: {}, #token: {}, #cached-token: {}, token usage: {:.2f}, "
      "max_total_num_tokens: {}",
      stats.num_running_reqs, stats.num_queued_reqs, stats.used_tokens, stats.cached_tokens,
      stats.token_usage, stats.max_total_num_tokens);
}

void EngineLoop::LogPrefill(const sched::StepPlan& plan) {
  cached_tokens_total_ += static_cast<int64_t>(plan.cached_tokens);
  RADIX_LOG_INFO(
      "{}Prefill batch, #new-seq: {}, #new-token: {}, #cached-token: {}, token usage: {:.2f}, "
      "#running-req: {}, #queue-req: {}, ",
      log_prefix_, plan.new_seqs, plan.new_tokens, plan.cached_tokens, memory_->token_usage(),
      plan.running_before, scheduler_->waiting().size());
}

void EngineLoop::LogDecode() {
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - last_decode_log_).count();
  last_gen_throughput_ = elapsed > 0 ? static_cast<double>(tokens_since_log_) / elapsed : 0.0;
  tokens_since_log_ = 0;
  last_decode_log_ = now;
  std::string spec;
  if (speculating()) {
    // SGLang's speculative decode line: accept length in place of the graph flag.
    last_accept_length_ = spec_steps_ > 0
                              ? static_cast<double>(spec_tokens_) / static_cast<double>(spec_steps_)
                              : 0.0;
    last_accept_rate_ =
        spec_drafted_ > 0 ? static_cast<double>(spec_accepted_) / static_cast<double>(spec_drafted_)
                          : 0.0;
    spec_steps_ = spec_tokens_ = spec_drafted_ = spec_accepted_ = 0;
    spec = fmt::format("accept len: {:.2f}, accept rate: {:.2f}, ", last_accept_length_,
                       last_accept_rate_);
  }
  if (!config_.log_decode_stats) return;
  RADIX_LOG_INFO(
      "{}Decode batch, #running-req: {}, #token: {}, token usage: {:.2f}, {}cpu graph: False, gen "
      "throughput (token/s): {:.2f}, #queue-req: {}, ",
      log_prefix_, scheduler_->running().size(), memory_->used_tokens(), memory_->token_usage(),
      spec, last_gen_throughput_, scheduler_->waiting().size());
}

void EngineLoop::PublishStats() {
  EngineStats stats;
  stats.dp_rank = config_.dp_rank;
  // Running = every held sequence not waiting: this also counts the new sequences of a planned
  // prefill step, which join running() only when the step completes.
  stats.num_queued_reqs = static_cast<int64_t>(scheduler_->waiting().size());
  stats.num_running_reqs =
      static_cast<int64_t>(scheduler_->num_sequences()) - stats.num_queued_reqs;
  stats.max_total_num_tokens = static_cast<int64_t>(memory_->max_total_num_tokens());
  stats.max_running_requests = config_.sched.max_running_requests;
  stats.context_len = config_.context_len;
  stats.used_tokens =
      static_cast<int64_t>(memory_->pool().used_size() - memory_->cache().TotalSize());
  stats.cached_tokens = static_cast<int64_t>(memory_->cache().TotalSize());
  stats.token_usage = memory_->token_usage();
  stats.peak_tokens = stats.used_tokens;
  RADIX_CHECK(requests_.size() == scheduler_->num_sequences());
  for (const auto& [id, record] : requests_) {
    const sched::Sequence& seq = record->seq;
    stats.peak_tokens += seq.remaining_new_tokens();
    if (!seq.admitted) stats.peak_tokens += static_cast<int64_t>(seq.input_ids.size());
  }
  stats.cache_hit_rate = prompt_tokens_total_ > 0 ? static_cast<double>(cached_tokens_total_) /
                                                        static_cast<double>(prompt_tokens_total_)
                                                  : 0.0;
  stats.gen_throughput = last_gen_throughput_;
  stats.num_retractions = scheduler_->num_retractions();
  stats.jump_forward_tokens = jump_forward_tokens_;
  stats.spec_accept_length = last_accept_length_;
  stats.spec_accept_rate = last_accept_rate_;
  stats.prompt_tokens_total = prompt_tokens_total_;
  stats.cached_prompt_tokens_total = cached_tokens_total_;
  if (const kv::HiCache* hicache = memory_->hicache(); hicache != nullptr) {
    stats.storage_tier = true;
    stats.storage = hicache->stats();
  }
  stats.paused = paused_;
  stats.released = released_;
  const bool idle = scheduler_->num_sequences() == 0;
  if (!idle) {
    leak_check_stale_ = true;  // busy-but-consistent reads "ok"; idle gets a fresh check
  } else if (leak_check_stale_) {
    Status leaks = memory_->CheckIdle();
    leak_check_ = leaks.ok() ? std::string("ok") : leaks.message();
    leak_check_stale_ = false;
  }
  stats.kv_leak_check = idle ? leak_check_ : std::string("ok");
  waiting_count_.store(stats.num_queued_reqs);
  std::lock_guard<std::mutex> lock(mutex_);
  stats_ = stats;
}

}  // namespace radixserve::engine
