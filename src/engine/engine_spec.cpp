// EngineLoop's speculative decoding: drafts before planning (from the n-gram table, or from the
// draft model's greedy chain: spec/draft_runner.h), verification after the forward.
//
// Verification samples every row exactly as the one-token path samples it (SampleToken: same
// processed logits, same seed, same step index into the request's random stream) and keeps a
// draft only when that sample equals it. The output is therefore the one the request would have
// produced without speculation (bit for bit under --enable-deterministic-inference), for greedy
// and sampled requests alike, so the target distribution is preserved trivially. For a draft x
// the acceptance probability is p(x), the same as speculative rejection sampling's min(1, p/q)
// with a point-mass proposal (both drafters propose one token per position with certainty); on
// a rejection the row's own sample is the corrected token.
#include <algorithm>

#include "common/log.h"
#include "engine/engine_loop.h"

namespace radixserve::engine {

bool EngineLoop::Speculates(const RequestState& state) const {
  const GenerateRequest& request = state.request();
  return speculating() && !request.return_hidden_states;
}

void EngineLoop::ProposeDrafts() {
  std::vector<int32_t> fill;
  draft_jobs_.clear();
  draft_seqs_.clear();
  // A large decode batch is compute-bound: drafts would cost more than they save. The table
  // still records every speculating sequence, so drafting resumes with full knowledge.
  const bool drafting =
      config_.spec_disable_batch == 0 || scheduler_->running().size() < config_.spec_disable_batch;
  for (sched::Sequence* seq : scheduler_->running()) {
    seq->ClearDrafts();
    RequestState& state = StateOf(seq);
    if (!Speculates(state)) continue;
    if (ngram_) {
      fill = seq->FillIds(seq->fill_len());
      ngram_->Record(fill, state.ngram_recorded());
      state.set_ngram_recorded(fill.size());
    }
    // A step appends at most drafts + 1 tokens: drafts past max_new_tokens would be wasted.
    const int64_t room = seq->remaining_new_tokens() - 1;
    if (!drafting || room <= 0 || seq->decode_len() != 1) continue;
    const size_t budget = state.draft_budget() > 0 ? state.draft_budget() : config_.spec_num_drafts;
    const size_t wanted = std::min(budget, static_cast<size_t>(room));
    if (ngram_ && config_.spec_tree) {
      spec::DraftTree tree = ngram_->Tree(fill, wanted);
      seq->draft_ids = std::move(tree.tokens);
      // A chain needs no tree: each draft follows the one before it.
      bool chain = true;
      for (size_t i = 0; i < tree.parents.size(); ++i) {
        chain = chain && tree.parents[i] == static_cast<int32_t>(i) - 1;
      }
      if (!chain) seq->draft_parents = std::move(tree.parents);
      continue;
    }
    if (ngram_) {
      seq->draft_ids = ngram_->Draft(fill, wanted);
      continue;
    }
    if (draft_seqs_.size() == draft_->options().max_jobs) continue;
    draft_seqs_.push_back(seq);
    draft_jobs_.emplace_back().wanted = std::min(wanted, draft_->options().max_steps);
  }
  if (draft_seqs_.empty()) return;
  // The draft model: every job's tokens and the target's slots of the positions with K/V.
  draft_tokens_.resize(draft_seqs_.size());
  for (size_t j = 0; j < draft_seqs_.size(); ++j) {
    sched::Sequence* seq = draft_seqs_[j];
    draft_tokens_[j] = seq->FillIds(seq->fill_len());
    RADIX_CHECK(seq->kv_len + 1 == draft_tokens_[j].size());
    spec::DraftJob& job = draft_jobs_[j];
    job.tokens = draft_tokens_[j];
    job.slots = memory_->req_pool().Slice(seq->kv.req_pool_slot, 0, seq->kv_len);
  }
  if (Status run = draft_->Propose(draft_jobs_, pool_); !run.ok()) {
    // Drafts only decide how many tokens a step gains: the step goes on without them.
    RADIX_LOG_WARN("{}Draft model step failed, decoding without drafts: {}", log_prefix_,
                   run.message());
    return;
  }
  for (size_t j = 0; j < draft_seqs_.size(); ++j) {
    draft_seqs_[j]->draft_ids = std::move(draft_jobs_[j].drafts);
  }
}

size_t EngineLoop::VerifyEntry(const sched::StepEntry& entry, size_t first_row) {
  sched::Sequence* seq = entry.seq;
  RequestState& state = StateOf(seq);
  const std::vector<int32_t> drafts = seq->draft_ids;
  // A chain's drafts each follow the one before.
  std::vector<int32_t> parents = seq->draft_parents;
  if (parents.empty()) {
    for (size_t d = 0; d < drafts.size(); ++d) parents.push_back(static_cast<int32_t>(d) - 1);
  }
  RADIX_CHECK(drafts.size() == entry.num_drafts && parents.size() == drafts.size());
  const auto vocab = static_cast<size_t>(vocab_size_);
  state.CountSpecVerify();
  size_t appended = 0;
  std::vector<int32_t> path;  // the accepted drafts, root to leaf
  bool done = false;
  bool leaf = false;  // the walk reached a draft without children: every draft on it matched
  // Row 0 is the last fill token, row 1 + d draft d; each row's sample picks the child to follow.
  for (int32_t node = -1;;) {
    const size_t row = static_cast<size_t>(node + 1);
    std::span<float> logits(logits_.data() + (first_row + row) * vocab, vocab);
    if (!SampleToken(seq, state, logits)) return appended;  // finished: drafts freed on release
    const int32_t token = sample_out_.token_id;
    ++appended;
    int32_t next = -1;
    leaf = true;
    for (size_t d = static_cast<size_t>(node + 1); d < drafts.size(); ++d) {
      if (parents[d] != node) continue;
      leaf = false;
      if (drafts[d] == token) {
        next = static_cast<int32_t>(d);
        break;
      }
    }
    if (next >= 0) path.push_back(next);
    const bool last = next < 0;
    const Commit commit = CommitToken(seq, state, token, last);
    if (commit == Commit::kGone) return appended;
    done = commit == Commit::kDone;
    if (done || last) break;
    node = next;
  }
  const size_t matched = path.size();
  // The last appended token gets its K/V next step, like any sampled token; the drafts before
  // it were the model's own choices, so their K/V stays (moved next to the sequence's end when
  // they were a tree's branch).
  path.resize(appended - 1);
  scheduler_->AcceptDrafts(seq, std::span<const int32_t>(path));
  // Back-off: verifying a draft costs compute, so a sequence whose drafts fail proposes only as
  // many as were last accepted plus one, and doubles (up to the maximum) after a full accept.
  state.set_draft_budget(leaf && !done ? std::min(config_.spec_num_drafts, 2 * drafts.size())
                                       : matched + 1);
  spec_accepted_ += static_cast<int64_t>(matched);
  ++spec_steps_;
  spec_tokens_ += static_cast<int64_t>(appended);
  spec_drafted_ += static_cast<int64_t>(drafts.size());
  if (done) EndRequest(seq, /*cache_kv=*/true);
  return appended;
}

}  // namespace radixserve::engine
