#include "spec/draft_runner.h"

#include <algorithm>

#include "common/check.h"
#include "spec/kv_view.h"

namespace radixserve::spec {
namespace {

// Appends one sequence's extend of `tokens` positions [prefix_len, prefix_len + extend_len) over
// `table` (the slots of positions [0, prefix_len + extend_len)).
void AddExtend(model::ForwardBatch& batch, std::span<const int32_t> tokens,
               std::span<const int32_t> table, size_t prefix_len, size_t extend_len) {
  for (size_t p = prefix_len; p < prefix_len + extend_len; ++p) {
    batch.token_ids.push_back(tokens[p]);
    batch.positions.push_back(static_cast<int64_t>(p));
  }
  model::SequenceExtend extend;
  extend.prefix_len = static_cast<int64_t>(prefix_len);
  extend.extend_len = static_cast<int64_t>(extend_len);
  extend.kv_slots = table.first(prefix_len + extend_len);
  batch.sequences.push_back(extend);
}

}  // namespace

DraftRunner::DraftRunner(std::shared_ptr<const model::CausalLM> model, kv::KvStorage* storage,
                         const kv::TokenToKVPool* pool, size_t scratch_row,
                         DraftRunnerOptions options)
    : model_(std::move(model)),
      pool_(pool),
      scratch_row_(scratch_row),
      options_(options),
      vocab_(static_cast<size_t>(model_->config().vocab_size)),
      written_(scratch_row, 0) {
  RADIX_CHECK(storage->spec().num_rows >= scratch_row + options_.max_jobs * options_.max_steps);
  view_ = KvViewOf(*storage);
}

bool DraftRunner::IsCurrent(int32_t slot) const {
  const auto s = static_cast<size_t>(slot);
  const uint32_t generation = pool_->page_generation(s / static_cast<size_t>(pool_->page_size()));
  return generation != 0 && written_[s] == generation;
}

void DraftRunner::MarkCurrent(int32_t slot) {
  const auto s = static_cast<size_t>(slot);
  written_[s] = pool_->page_generation(s / static_cast<size_t>(pool_->page_size()));
}

size_t DraftRunner::CurrentPrefix(std::span<const int32_t> slots) const {
  for (size_t p = 0; p < slots.size(); ++p) {
    if (!IsCurrent(slots[p])) return p;
  }
  return slots.size();
}

int32_t DraftRunner::ScratchSlot(size_t job, size_t step) const {
  return static_cast<int32_t>(scratch_row_ + job * options_.max_steps + step);
}

int32_t DraftRunner::ArgMax(const float* row) const {
  return static_cast<int32_t>(std::max_element(row, row + vocab_) - row);
}

Status DraftRunner::Propose(std::span<DraftJob> jobs, ThreadPool* pool) {
  RADIX_CHECK(jobs.size() <= options_.max_jobs);
  tables_.resize(jobs.size());
  // Step 0: each job's stale positions and its last token; a job whose catch-up does not fit
  // the budget only catches up (as far as the budget goes).
  model::ForwardBatch batch;
  std::vector<size_t> drafting;  // jobs with a logits row this step, in row order
  struct Written {
    size_t job, start, end;  // the job's real rows of positions [start, end) were written
  };
  std::vector<Written> written;
  size_t budget = options_.max_catch_up_tokens;
  for (size_t j = 0; j < jobs.size(); ++j) {
    DraftJob& job = jobs[j];
    job.drafts.clear();
    RADIX_CHECK(!job.tokens.empty() && job.slots.size() + 1 == job.tokens.size());
    RADIX_CHECK(job.wanted >= 1 && job.wanted <= options_.max_steps);
    const size_t last = job.slots.size();
    const size_t start = CurrentPrefix(job.slots);
    std::vector<int32_t>& table = tables_[j];
    table.assign(job.slots.begin(), job.slots.end());
    for (size_t i = 0; i < job.wanted; ++i) table.push_back(ScratchSlot(j, i));
    const size_t catch_up = last - start;
    if (catch_up > budget) {
      if (budget == 0) continue;
      AddExtend(batch, job.tokens, table, start, budget);
      written.push_back({j, start, start + budget});
      budget = 0;
      continue;
    }
    budget -= catch_up;
    AddExtend(batch, job.tokens, table, start, catch_up + 1);
    batch.logit_indices.push_back(batch.num_tokens() - 1);
    written.push_back({j, start, last});
    drafting.push_back(j);
  }
  if (batch.token_ids.empty()) return Status::Ok();
  logits_.resize(drafting.size() * vocab_);
  RADIX_RETURN_IF_ERROR(model_->Forward(batch, view_, pool, logits_.data()));
  for (const Written& w : written) {
    for (size_t p = w.start; p < w.end; ++p) MarkCurrent(jobs[w.job].slots[p]);
  }
  for (size_t r = 0; r < drafting.size(); ++r) {
    jobs[drafting[r]].drafts.push_back(ArgMax(logits_.data() + r * vocab_));
  }
  // Steps 1 ..: the previous draft of each job that wants more, in its scratch row.
  for (size_t step = 1; step < options_.max_steps; ++step) {
    batch = model::ForwardBatch();
    std::vector<size_t> more;
    std::vector<int32_t> fed;
    fed.reserve(drafting.size());
    for (const size_t j : drafting) {
      if (jobs[j].wanted > step) more.push_back(j);
    }
    if (more.empty()) break;
    for (const size_t j : more) {
      const size_t position = jobs[j].slots.size() + step;
      fed.push_back(jobs[j].drafts.back());
      batch.token_ids.push_back(fed.back());
      batch.positions.push_back(static_cast<int64_t>(position));
      model::SequenceExtend extend;
      extend.prefix_len = static_cast<int64_t>(position);
      extend.extend_len = 1;
      extend.kv_slots = std::span<const int32_t>(tables_[j]).first(position + 1);
      batch.sequences.push_back(extend);
      batch.logit_indices.push_back(batch.num_tokens() - 1);
    }
    logits_.resize(more.size() * vocab_);
    if (Status status = model_->Forward(batch, view_, pool, logits_.data()); !status.ok()) {
      for (DraftJob& job : jobs) job.drafts.clear();
      return status;
    }
    for (size_t r = 0; r < more.size(); ++r) {
      jobs[more[r]].drafts.push_back(ArgMax(logits_.data() + r * vocab_));
    }
    drafting = std::move(more);
  }
  return Status::Ok();
}

}  // namespace radixserve::spec
