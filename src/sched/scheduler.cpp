#include "sched/scheduler.h"

#include <algorithm>
#include <set>
#include <span>
#include <utility>

#include "common/log.h"

namespace radixserve::sched {

Expected<std::unique_ptr<Scheduler>> Scheduler::Create(const SchedulerConfig& config,
                                                       kv::KvMemory* memory) {
  RADIX_CHECK(memory != nullptr);
  RADIX_ASSIGN_OR_RETURN(
      std::unique_ptr<SchedulePolicy> policy,
      MakeSchedulePolicy(config.schedule_policy, memory->cache().disabled(), config.random_seed));
  return std::unique_ptr<Scheduler>(new Scheduler(config, memory, std::move(policy)));
}

Scheduler::Scheduler(const SchedulerConfig& config, kv::KvMemory* memory,
                     std::unique_ptr<SchedulePolicy> policy)
    : config_(config),
      memory_(memory),
      policy_(std::move(policy)),
      new_token_ratio_(config.init_new_token_ratio()) {}

Status Scheduler::Enqueue(Sequence* seq, Sequence** displaced) {
  RADIX_CHECK_MSG(!seq->held, "queueing a sequence the scheduler already holds");
  if (config_.max_queued_requests &&
      static_cast<int64_t>(waiting_.size()) + 1 > *config_.max_queued_requests) {
    Sequence* victim = nullptr;
    if (config_.enable_priority_scheduling) {
      for (Sequence* w : waiting_) {
        if (victim == nullptr || config_.MoreImportant(victim->priority, w->priority) ||
            (victim->priority == w->priority && w->queue_order > victim->queue_order)) {
          victim = w;
        }
      }
      if (victim != nullptr && !config_.MoreImportant(seq->priority, victim->priority)) {
        victim = nullptr;
      }
    }
    if (victim == nullptr) {
      return Status(StatusCode::kResourceExhausted, "The request queue is full.");
    }
    RemoveFrom(waiting_, victim);
    victim->held = false;
    --num_held_;
    if (displaced != nullptr) *displaced = victim;
  }
  seq->queue_order = next_queue_order_++;
  seq->held = true;
  ++num_held_;
  waiting_.push_back(seq);
  return Status::Ok();
}

StepPlan Scheduler::PlanStep() {
  StepPlan plan;
  if (idle()) {
    new_token_ratio_ = config_.init_new_token_ratio();
    return plan;
  }
  plan.running_before = running_.size();
  const bool prefill_may_wait = !running_.empty() && chunked_ == nullptr &&
                                decodes_since_prefill_ < config_.prefill_wait_decode_steps;
  if (!prefill_may_wait) PlanPrefill(plan);
  if (!plan.empty()) {
    decodes_since_prefill_ = 0;
    plan.kind = StepKind::kExtend;
    const bool any_logprob =
        std::any_of(plan.entries.begin(), plan.entries.end(),
                    [](const StepEntry& e) { return e.seq->return_logprob; }) ||
        std::any_of(running_.begin(), running_.end(),
                    [](const Sequence* s) { return s->return_logprob; });
    if (config_.enable_mixed_chunk && config_.chunked_prefill_size && !running_.empty() &&
        !any_logprob) {
      PlanDecode(plan, /*allow_retract=*/false);
      if (plan.entries.back().is_decode) plan.kind = StepKind::kMixed;
    }
    return plan;
  }
  if (!running_.empty()) {
    PlanDecode(plan, /*allow_retract=*/true);
    if (!plan.empty()) {
      plan.kind = StepKind::kDecode;
      ++decodes_since_prefill_;
    }
  }
  return plan;
}

void Scheduler::PlanPrefill(StepPlan& plan) {
  if (waiting_.empty() && chunked_ == nullptr) return;
  const int64_t num_allocatable =
      config_.max_running_requests - static_cast<int64_t>(running_.size());
  if (num_allocatable <= 0 && chunked_ == nullptr && !config_.enable_priority_scheduling) return;

  PolicyContext context{&config_, &memory_->cache(), memory_->pool().page_size()};
  policy_->Order(waiting_, context);
  const bool mixed =
      config_.enable_mixed_chunk && config_.chunked_prefill_size && !running_.empty();
  PrefillAdder adder(config_, *memory_, running_, new_token_ratio_, mixed ? running_.size() : 0);
  Sequence* previous_chunked = chunked_;
  const bool chunk_planned = chunked_ != nullptr && adder.AddChunkedReq(chunked_);

  // --max-loras-per-batch counts the adapters of the running batch and of this pass's admissions.
  std::set<uint64_t> loras;
  for (const Sequence* r : running_) {
    if (r->lora_id != 0) loras.insert(r->lora_id);
  }
  if (chunked_ != nullptr && chunked_->lora_id != 0) loras.insert(chunked_->lora_id);
  // Preemption appends to waiting_; a held admission takes nobody new.
  const std::vector<Sequence*> order = admission_held_ ? std::vector<Sequence*>{} : waiting_;
  for (Sequence* seq : order) {
    const auto admitted = static_cast<int64_t>(adder.planned().size()) - (chunk_planned ? 1 : 0);
    const bool batch_full = admitted >= num_allocatable;
    if (seq->lora_id != 0 && loras.count(seq->lora_id) == 0 &&
        static_cast<int64_t>(loras.size()) >= config_.max_loras_per_batch) {
      continue;  // waits for a batch with room for its adapter (SGLang skips it the same way)
    }
    if (seq->prefetch_wait) continue;  // its prefix is still coming from storage
    MatchSequencePrefix(seq, memory_->cache());
    if (batch_full) {
      if (!config_.enable_priority_scheduling) break;
      PreemptFor(*seq, 0.0, /*need_slot=*/true, plan);
      break;
    }
    const AddResult result = adder.AddOneReq(seq);
    if (seq->lora_id != 0 && !adder.planned().empty() && adder.planned().back().seq == seq) {
      loras.insert(seq->lora_id);
    }
    if (result == AddResult::kNoToken && config_.enable_priority_scheduling &&
        (adder.planned().empty() || adder.planned().back().seq != seq)) {
      const double needed = static_cast<double>(seq->fill_len() - seq->match.matched_len()) +
                            static_cast<double>(adder.ClippedNewTokens(*seq)) -
                            adder.rem_total_tokens();
      PreemptFor(*seq, needed, /*need_slot=*/false, plan);
    }
    if (result != AddResult::kContinue) break;
  }

  const int32_t page = memory_->pool().page_size();
  for (const StepEntry& planned : adder.planned()) {
    StepEntry entry = planned;
    const bool continuing = entry.seq == previous_chunked;
    const bool ok = continuing ? AllocateSlots(entry) : AdmitAndAllocate(entry);
    if (!ok) {
      // Out of memory despite the budget (page rounding): leave the rest for a later pass.
      for (const StepEntry& rest : adder.planned()) {
        if (&rest > &planned && rest.seq != previous_chunked && !rest.seq->admitted) {
          memory_->cache().DecLockRef(rest.seq->match.last_node);
        }
      }
      break;
    }
    if (!continuing) {
      RemoveFrom(waiting_, entry.seq);
      ++plan.new_seqs;
      plan.cached_tokens += entry.prefix_len;
    }
    plan.new_tokens += (entry.extend_len + page - 1) / page * page;
    plan.entries.push_back(entry);
  }
  // The chunked request of the next pass: the one this pass truncated, if it was planned; a
  // chunked request that got no room this pass stays chunked.
  const auto in_plan = [&](const Sequence* seq) {
    return std::any_of(plan.entries.begin(), plan.entries.end(),
                       [&](const StepEntry& e) { return e.seq == seq; });
  };
  chunked_ = previous_chunked != nullptr && !in_plan(previous_chunked) ? previous_chunked : nullptr;
  for (const StepEntry& e : plan.entries) {
    if (!e.samples) chunked_ = e.seq;
  }
}

bool Scheduler::AdmitAndAllocate(StepEntry& entry) {
  Sequence* seq = entry.seq;
  Expected<int32_t> row = memory_->req_pool().Alloc();
  if (!row.ok()) {
    memory_->cache().DecLockRef(seq->match.last_node);
    return false;
  }
  seq->kv.req_pool_slot = *row;
  seq->kv.last_node = seq->match.last_node;
  seq->kv.prefix_indices = seq->match.device_indices;
  seq->kv.cache_protected_len = seq->match.matched_len();
  memory_->req_pool().Write(*row, 0, seq->kv.prefix_indices);
  seq->kv_len = entry.prefix_len;
  seq->admitted = true;
  if (seq->retraction_count == 0) seq->cached_tokens = entry.prefix_len;
  if (!AllocateSlots(entry)) {
    ReleaseKv(seq, /*cache_kv=*/false);
    return false;
  }
  return true;
}

bool Scheduler::AllocateSlots(StepEntry& entry) {
  Sequence* seq = entry.seq;
  RADIX_CHECK(seq->kv_len == entry.prefix_len);
  kv::ExtendSpec spec;
  spec.prefix_len = entry.prefix_len;
  spec.seq_len = entry.prefix_len + entry.extend_len;
  if (entry.prefix_len > 0) {
    spec.last_loc = memory_->req_pool().Row(seq->kv.req_pool_slot)[entry.prefix_len - 1];
  }
  Expected<std::vector<int32_t>> slots = memory_->AllocExtendEvicting(std::span(&spec, 1));
  if (!slots.ok()) return false;
  memory_->req_pool().Write(seq->kv.req_pool_slot, entry.prefix_len, *slots);
  return true;
}

std::vector<kv::ExtendSpec> Scheduler::DecodeSpecs(const std::vector<Sequence*>& seqs) const {
  std::vector<kv::ExtendSpec> specs;
  specs.reserve(seqs.size());
  for (const Sequence* seq : seqs) {
    kv::ExtendSpec spec;
    spec.prefix_len = seq->kv_len;
    spec.seq_len = seq->kv_len + seq->decode_len();
    spec.last_loc = memory_->req_pool().Row(seq->kv.req_pool_slot)[seq->kv_len - 1];
    specs.push_back(spec);
  }
  return specs;
}

bool Scheduler::DecodeFits(const std::vector<Sequence*>& seqs) {
  const std::vector<kv::ExtendSpec> specs = DecodeSpecs(seqs);
  const size_t needed =
      memory_->pool().PagesNeeded(specs) * static_cast<size_t>(memory_->pool().page_size());
  kv::TokenToKVPool& pool = memory_->pool();
  if (pool.available_size() < needed) memory_->cache().Evict(needed - pool.available_size());
  return pool.available_size() >= needed;
}

void Scheduler::PlanDecode(StepPlan& plan, bool allow_retract) {
  if (!DecodeFits(running_)) {
    // Speculation gives way first: drafts are dropped before anything is retracted.
    for (Sequence* seq : running_) seq->ClearDrafts();
  }
  if (!DecodeFits(running_)) {
    if (!allow_retract) return;
    RetractDecode(plan);
    if (!DecodeFits(running_)) {
      for (Sequence* seq : running_) plan.dropped.push_back({seq, DropReason::kOutOfMemory});
      return;
    }
  } else if (allow_retract) {
    new_token_ratio_ =
        std::max(new_token_ratio_ - config_.new_token_ratio_decay(), config_.min_new_token_ratio());
  }
  const std::vector<kv::ExtendSpec> specs = DecodeSpecs(running_);
  Expected<std::vector<int32_t>> slots = memory_->AllocExtendEvicting(specs);
  RADIX_CHECK_MSG(slots.ok(), "decode allocation failed after the memory check");
  size_t offset = 0;
  for (size_t i = 0; i < running_.size(); ++i) {
    Sequence* seq = running_[i];
    const size_t len = seq->decode_len();
    memory_->req_pool().Write(seq->kv.req_pool_slot, seq->kv_len,
                              std::span(slots->data() + offset, len));
    offset += len;
    StepEntry entry;
    entry.seq = seq;
    entry.prefix_len = seq->kv_len;
    entry.extend_len = len;
    entry.is_decode = true;
    entry.samples = true;
    entry.num_drafts = seq->draft_ids.size();
    plan.entries.push_back(entry);
  }
}

void Scheduler::CompleteStep(const StepPlan& plan) {
  for (const StepEntry& entry : plan.entries) {
    Sequence* seq = entry.seq;
    seq->kv_len = entry.prefix_len + entry.extend_len - entry.num_drafts;
    seq->draft_kv_len = entry.num_drafts;
    if (!entry.samples) {
      const std::vector<int32_t> ids = seq->FillIds(seq->kv_len);
      memory_->cache().CacheUnfinishedSeq(seq->kv, kv::CacheKey{ids, seq->extra_key});
    } else if (!entry.is_decode) {
      running_.push_back(seq);
    }
  }
}

void Scheduler::AcceptDrafts(Sequence* seq, size_t accepted) {
  RADIX_CHECK(accepted <= seq->draft_kv_len);
  seq->kv_len += accepted;
  const size_t end = seq->kv_len + seq->draft_kv_len - accepted;
  // Slots share pages with their neighbours: the page holding the last kept position stays (its
  // unused tail is what the next allocation continues into); later pages are wholly rejected.
  const auto page = static_cast<size_t>(memory_->pool().page_size());
  const size_t first_free = (seq->kv_len + page - 1) / page * page;
  if (first_free < end) {
    memory_->pool().Free(memory_->req_pool().Slice(seq->kv.req_pool_slot, first_free, end));
  }
  seq->draft_kv_len = 0;
  seq->ClearDrafts();
}

void Scheduler::AcceptDrafts(Sequence* seq, std::span<const int32_t> path) {
  RADIX_CHECK(path.size() <= seq->draft_kv_len);
  std::span<int32_t> row = memory_->req_pool().Row(seq->kv.req_pool_slot);
  const bool paged = memory_->pool().page_size() > 1;
  for (size_t m = 0; m < path.size(); ++m) {
    // Parents precede their children, so every later source lies past this destination.
    const size_t from = seq->kv_len + static_cast<size_t>(path[m]);
    const size_t to = seq->kv_len + m;
    RADIX_CHECK(from >= to && from < seq->kv_len + seq->draft_kv_len);
    if (m > 0) RADIX_CHECK(path[m] > path[m - 1]);
    if (from == to) continue;
    if (paged) {
      memory_->pool().storage().CopySlot(row[from], row[to]);
    } else {
      std::swap(row[from], row[to]);
    }
  }
  AcceptDrafts(seq, path.size());
}

void Scheduler::ReleaseKv(Sequence* seq, bool cache_kv) {
  seq->ClearDrafts();
  if (!seq->admitted) return;
  if (seq->draft_kv_len > 0) AcceptDrafts(seq, 0);
  const std::vector<int32_t> ids = seq->FillIds(seq->kv_len);
  memory_->cache().CacheFinishedSeq(seq->kv, kv::CacheKey{ids, seq->extra_key}, cache_kv);
  seq->kv = kv::SeqKvState{};
  seq->kv_len = 0;
  seq->admitted = false;
}

void Scheduler::Release(Sequence* seq, bool cache_kv) {
  RADIX_CHECK_MSG(seq->held, "releasing a sequence the scheduler does not hold");
  ReleaseKv(seq, cache_kv);
  RemoveFrom(waiting_, seq);
  RemoveFrom(running_, seq);
  if (chunked_ == seq) chunked_ = nullptr;
  seq->held = false;
  --num_held_;
}

std::vector<Sequence*> Scheduler::TakeWaiting(const std::function<bool(const Sequence&)>& pred) {
  std::vector<Sequence*> taken;
  std::vector<Sequence*> keep;
  for (Sequence* seq : waiting_) {
    if (pred(*seq)) {
      seq->held = false;
      --num_held_;
      taken.push_back(seq);
    } else {
      keep.push_back(seq);
    }
  }
  waiting_ = std::move(keep);
  return taken;
}

void Scheduler::Requeue(Sequence* seq) {
  ReleaseKv(seq, /*cache_kv=*/false);
  RemoveFrom(running_, seq);
  ++seq->retraction_count;
  seq->queue_order = next_queue_order_++;
  waiting_.push_back(seq);
}

void Scheduler::RemoveFrom(std::vector<Sequence*>& list, const Sequence* seq) {
  list.erase(std::remove(list.begin(), list.end(), seq), list.end());
}

}  // namespace radixserve::sched
