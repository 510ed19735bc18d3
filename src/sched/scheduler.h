// Scheduler: SGLang's scheduling loop without the model (reference/sglang-runtime.md 2). Owns the
// waiting queue, the running batch, the request being chunk-prefilled and new_token_ratio, and
// drives the KV memory (prefix matching, locking, request rows, slot allocation, release).
//
// One iteration, driven by the engine:
//   plan = PlanStep();            // admission (prefill has priority) or decode + retraction;
//                                 // KV slots of every entry are allocated and in the rows
//   ... run the model over plan.entries ...
//   CompleteStep(plan);           // positions become computed; chunks are cached; finished
//                                 // prefills join the running batch
//   ... append sampled tokens to entry.seq->output_ids ...
//   Release(seq) for every finished or aborted sequence (KV goes to the prefix cache)
//
// Ownership: the engine owns every Sequence (with the request's state, in one record); the
// scheduler borrows it from Enqueue until Release, TakeWaiting or a displacement hands it back.
// Sequence::held says which sequences it holds.
//
// Thread affinity: engine thread only; nothing here is synchronized.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/status.h"
#include "kv/kv_memory.h"
#include "sched/prefill_adder.h"
#include "sched/schedule_policy.h"
#include "sched/scheduler_config.h"
#include "sched/sequence.h"
#include "sched/step_plan.h"

namespace radixserve::sched {

class Scheduler {
 public:
  // memory is borrowed and must outlive the scheduler. kInvalidArgument for an unknown policy.
  static Expected<std::unique_ptr<Scheduler>> Create(const SchedulerConfig& config,
                                                     kv::KvMemory* memory);

  // Queues a new sequence. With a full queue (--max-queued-requests): without priority
  // scheduling the newcomer is refused (kResourceExhausted "The request queue is full."); with
  // it, if the newcomer is strictly more important than the least important queued sequence
  // (ties: the newest), that one is removed instead and handed back through *displaced (when
  // given). seq is borrowed until it is handed back; on refusal it never was.
  Status Enqueue(Sequence* seq, Sequence** displaced);

  StepPlan PlanStep();
  void CompleteStep(const StepPlan& plan);

  // Speculative decoding, after CompleteStep of a step that computed seq's drafts: the first
  // `accepted` draft positions keep their K/V (kv_len grows by that much), the slots of the
  // others are freed (whole pages past the kept length), and the drafts are cleared.
  void AcceptDrafts(Sequence* seq, size_t accepted);
  // The same for tree drafts: `path` lists the accepted drafts by index, each a child of the one
  // before (the first a child of the last fill token). Their K/V moves to the positions right after
  // kv_len: with pages of one slot the slots themselves change places in the sequence's row;
  // with larger pages (whose slots must stay in position order) the K/V rows are copied.
  void AcceptDrafts(Sequence* seq, std::span<const int32_t> path);

  // Removes a sequence from the scheduler wherever it is, returning its KV: inserted into the
  // prefix cache if `cache_kv`, else freed. The scheduler no longer refers to it afterwards.
  void Release(Sequence* seq, bool cache_kv = true);

  // Waiting (not admitted) sequences matching pred, removed and handed back (queue order).
  std::vector<Sequence*> TakeWaiting(const std::function<bool(const Sequence&)>& pred);

  // /pause_generation's retract mode (retraction.cpp): every running (decoding) sequence gives its
  // KV to the prefix cache and goes back to the waiting queue, to be prefilled again (from the
  // cache where it survives). A sequence in the middle of a chunked prefill keeps its KV, as
  // SGLang's retraction takes the running batch only. Returns how many moved.
  size_t RetractAll();

  // While held, PlanStep admits no waiting sequence (running ones keep decoding and a chunked
  // prefill in progress completes): how a weight update drains the batch before swapping models.
  void set_admission_held(bool held) { admission_held_ = held; }
  bool admission_held() const { return admission_held_; }

  const std::vector<Sequence*>& waiting() const { return waiting_; }
  const std::vector<Sequence*>& running() const { return running_; }
  Sequence* chunked() const { return chunked_; }
  bool idle() const { return waiting_.empty() && running_.empty() && chunked_ == nullptr; }
  // Every sequence the scheduler holds, including those of a planned step that has not completed
  // (a new sequence's first prefill is in neither waiting() nor running() until CompleteStep).
  size_t num_sequences() const { return num_held_; }
  double new_token_ratio() const { return new_token_ratio_; }
  int64_t num_retractions() const { return num_retractions_; }
  const SchedulerConfig& config() const { return config_; }
  kv::KvMemory& memory() { return *memory_; }

 private:
  Scheduler(const SchedulerConfig& config, kv::KvMemory* memory,
            std::unique_ptr<SchedulePolicy> policy);

  void PlanPrefill(StepPlan& plan);
  // Takes a request row, locks nothing new (the adder did), allocates the extend slots. False
  // (and the sequence left unadmitted) when memory runs out.
  bool AdmitAndAllocate(StepEntry& entry);
  bool AllocateSlots(StepEntry& entry);
  void PlanDecode(StepPlan& plan, bool allow_retract);
  std::vector<kv::ExtendSpec> DecodeSpecs(const std::vector<Sequence*>& seqs) const;
  bool DecodeFits(const std::vector<Sequence*>& seqs);
  // Retraction (retraction.cpp): drops running sequences until one decode step fits.
  void RetractDecode(StepPlan& plan);
  // Priority preemption (retraction.cpp): frees running sequences less important than `seq` by
  // more than the threshold. True if any was preempted.
  bool PreemptFor(const Sequence& seq, double tokens_needed, bool need_slot, StepPlan& plan);
  // Frees a sequence's KV without caching it and puts it back in the waiting queue.
  void Requeue(Sequence* seq);
  void ReleaseKv(Sequence* seq, bool cache_kv);
  void RemoveFrom(std::vector<Sequence*>& list, const Sequence* seq);

  SchedulerConfig config_;
  kv::KvMemory* memory_;
  std::unique_ptr<SchedulePolicy> policy_;
  size_t num_held_ = 0;  // sequences with `held` set
  std::vector<Sequence*> waiting_;
  std::vector<Sequence*> running_;
  Sequence* chunked_ = nullptr;
  bool admission_held_ = false;
  double new_token_ratio_;
  int64_t decodes_since_prefill_ = 0;  // SchedulerConfig::prefill_wait_decode_steps
  uint64_t next_queue_order_ = 0;
  int64_t num_retractions_ = 0;
};

}  // namespace radixserve::sched
