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
  if (options_.mtp) {
    hidden_size_ = static_cast<size_t>(model_->config().hidden_size);
    hidden_.assign(scratch_row * hidden_size_, 0.0f);
    hidden_written_.assign(scratch_row, 0);
  }
}

bool DraftRunner::IsCurrentIn(const std::vector<uint32_t>& written, int32_t slot) const {
  const auto s = static_cast<size_t>(slot);
  const uint32_t generation = pool_->page_generation(s / static_cast<size_t>(pool_->page_size()));
  return generation != 0 && written[s] == generation;
}

bool DraftRunner::IsCurrent(int32_t slot) const { return IsCurrentIn(written_, slot); }

void DraftRunner::StoreHidden(const model::ForwardBatch& batch, const float* hidden) {
  RADIX_CHECK(options_.mtp);
  const size_t H = hidden_size_;
  const auto page = static_cast<size_t>(pool_->page_size());
  size_t row = 0;
  for (const model::SequenceExtend& seq : batch.sequences) {
    for (int64_t i = 0; i < seq.extend_len; ++i, ++row) {
      const auto slot = static_cast<size_t>(seq.kv_slots[static_cast<size_t>(seq.prefix_len + i)]);
      std::copy(hidden + row * H, hidden + (row + 1) * H, hidden_.begin() + slot * H);
      hidden_written_[slot] = pool_->page_generation(slot / page);
    }
  }
}

void DraftRunner::AppendState(const DraftJob& job, size_t p) {
  const size_t H = hidden_size_;
  if (p == 0 || !IsCurrentIn(hidden_written_, job.slots[p - 1])) {
    h_in_.insert(h_in_.end(), H, 0.0f);
    return;
  }
  const auto from =
      hidden_.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(job.slots[p - 1]) * H);
  h_in_.insert(h_in_.end(), from, from + static_cast<ptrdiff_t>(H));
}

Status DraftRunner::RunDraft(const model::ForwardBatch& batch, ThreadPool* pool) {
  if (!options_.mtp) return model_->Forward(batch, view_, pool, logits_.data());
  RADIX_CHECK(h_in_.size() == static_cast<size_t>(batch.num_tokens()) * hidden_size_);
  h_out_.resize(batch.logit_indices.size() * hidden_size_);
  return model_->ForwardMtp(batch, h_in_.data(), view_, pool, logits_.data(), h_out_.data());
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
  h_in_.clear();
  for (size_t j = 0; j < jobs.size(); ++j) {
    DraftJob& job = jobs[j];
    job.drafts.clear();
    RADIX_CHECK(!job.tokens.empty() && job.slots.size() + 1 == job.tokens.size());
    RADIX_CHECK(job.wanted >= 1 && job.wanted <= options_.max_steps);
    const size_t last = job.slots.size();
    const size_t start = CurrentPrefix(job.slots);
    const size_t catch_up = last - start;
    if (catch_up > budget && budget == 0) continue;
    // Fed this call: positions [start, end); the last token too when the catch-up fits.
    const bool fits = catch_up <= budget;
    const size_t end = fits ? last + 1 : start + budget;
    if (options_.mtp) {
      for (size_t p = start; p < end; ++p) AppendState(job, p);
    }
    std::vector<int32_t>& table = tables_[j];
    table.assign(job.slots.begin(), job.slots.end());
    for (size_t i = 0; i < job.wanted; ++i) table.push_back(ScratchSlot(j, i));
    AddExtend(batch, job.tokens, table, start, end - start);
    if (!fits) {
      written.push_back({j, start, end});
      budget = 0;
      continue;
    }
    budget -= catch_up;
    batch.logit_indices.push_back(batch.num_tokens() - 1);
    written.push_back({j, start, last});
    drafting.push_back(j);
  }
  if (batch.token_ids.empty()) return Status::Ok();
  logits_.resize(drafting.size() * vocab_);
  RADIX_RETURN_IF_ERROR(RunDraft(batch, pool));
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
    h_in_.clear();
    for (size_t r = 0; r < drafting.size(); ++r) {
      if (jobs[drafting[r]].wanted <= step) continue;
      more.push_back(drafting[r]);
      // NEXTN: the block's own state out of the previous draft.
      const auto from = h_out_.begin() + static_cast<ptrdiff_t>(r * hidden_size_);
      h_in_.insert(h_in_.end(), from, from + static_cast<ptrdiff_t>(hidden_size_));
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
    if (Status status = RunDraft(batch, pool); !status.ok()) {
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
