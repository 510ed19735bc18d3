// EngineLoop's speculative decoding: n-gram drafts before planning, greedy verification after
// the forward.
#include <algorithm>

#include "engine/engine_loop.h"

namespace radixserve::engine {

bool EngineLoop::Speculates(const RequestState& state) const {
  const GenerateRequest& request = state.request();
  return ngram_ != nullptr && request.sampling.IsGreedy() && !request.return_logprob &&
         !request.return_hidden_states && !state.constrained();
}

void EngineLoop::ProposeDrafts() {
  std::vector<int32_t> fill;
  for (sched::Sequence* seq : scheduler_->running()) {
    seq->draft_ids.clear();
    auto it = states_.find(seq);
    if (it == states_.end() || !Speculates(*it->second)) continue;
    RequestState& state = *it->second;
    fill = seq->FillIds(seq->fill_len());
    ngram_->Record(fill, state.ngram_recorded());
    state.set_ngram_recorded(fill.size());
    // A step appends at most drafts + 1 tokens: drafts past max_new_tokens would be wasted.
    const int64_t room = seq->remaining_new_tokens() - 1;
    if (room <= 0 || seq->decode_len() != 1) continue;
    const size_t budget = state.draft_budget() > 0 ? state.draft_budget() : config_.spec_num_drafts;
    const size_t wanted = std::min(budget, static_cast<size_t>(room));
    seq->draft_ids = ngram_->Draft(fill, wanted);
  }
}

size_t EngineLoop::VerifyEntry(const sched::StepEntry& entry, size_t first_row) {
  sched::Sequence* seq = entry.seq;
  RequestState& state = *states_.at(seq);
  const GenerateRequest& request = state.request();
  const std::vector<int32_t> drafts = seq->draft_ids;
  RADIX_CHECK(drafts.size() == entry.num_drafts);
  const auto vocab = static_cast<size_t>(vocab_size_);
  const auto cached = static_cast<int64_t>(seq->cached_tokens);
  state.CountSpecVerify();
  size_t appended = 0;
  size_t matched = 0;
  bool done = false;
  for (size_t d = 0; d <= drafts.size(); ++d) {
    std::span<float> logits(logits_.data() + (first_row + d) * vocab, vocab);
    sampling::LogitsRowContext context;
    context.params = &request.sampling;
    context.output_ids = seq->output_ids;
    context.eos_token_ids = eos_ids_;
    logits_processor_.ProcessRow(logits, context);
    sampling::SampleRowParams params =
        sampling::SampleRowParams::From(request.sampling, state.seed(), seq->output_ids.size());
    params.return_logprob = false;
    params.top_logprobs_num = 0;
    sampler_.SampleRow(logits, params, sample_out_);
    const int32_t token = sample_out_.token_id;
    seq->output_ids.push_back(token);
    ++appended;
    const bool rejected = d < drafts.size() && token != drafts[d];
    if (d < drafts.size() && !rejected) ++matched;
    const bool last = d == drafts.size() || rejected;
    done = state.OnToken(token, sample_out_, static_cast<int64_t>(seq->output_ids.size()),
                         eos_ids_, vocab_size_, cached, /*emit=*/last);
    if (done || last) break;
  }
  // The last appended token gets its K/V next step, like any sampled token; the drafts before
  // it were the model's own choices, so their K/V stays.
  scheduler_->AcceptDrafts(seq, appended - 1);
  // Back-off: verifying a draft costs compute, so a sequence whose drafts fail proposes only as
  // many as were last accepted plus one, and doubles (up to the maximum) after a full accept.
  state.set_draft_budget(matched == drafts.size()
                             ? std::min(config_.spec_num_drafts, 2 * drafts.size())
                             : matched + 1);
  spec_accepted_ += static_cast<int64_t>(matched);
  ++spec_steps_;
  spec_tokens_ += static_cast<int64_t>(appended);
  spec_drafted_ += static_cast<int64_t>(drafts.size());
  if (done) {
    states_.erase(seq);
    scheduler_->Release(seq, /*cache_kv=*/true);
  }
  return appended;
}

}  // namespace radixserve::engine
