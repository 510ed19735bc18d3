// DraftRunner: the draft model of --speculative-algorithm STANDALONE. For each speculating
// sequence it proposes a chain of draft tokens by running the draft model autoregressively
// (greedy: the draft's argmax at each step), and keeps the draft model's KV cache consistent with
// the target's.
//
// KV layout. The draft's K/V of a token lives in the draft storage at the slot the target holds
// for the same position (kv::KvMemory::draft_storage), so the radix cache, chunked prefill and
// retraction keep both caches in step without knowing about the draft: whatever slots a sequence
// holds or shares carry the draft's K/V as well as the target's. A draft row is current when it
// was written during the slot's present allocation (TokenToKVPool::page_generation); rows the
// target filled without the draft (a prefill, a verified step, a prefix another request left in
// the cache, blocks loaded from disk) are computed lazily: the first draft step of a sequence
// feeds every position from its first stale row on (bounded per step by max_catch_up_tokens;
// the rest follows in later steps before any draft is proposed).
//
// Draft steps. The sequence's last token (sampled, no K/V yet) and the drafts after it have no
// target slots before the step is planned: they run in scratch rows after the pool's, `max_steps`
// per job, reused every call. Step 0 feeds the catch-up positions and the last token at once;
// step i > 0 feeds draft i. Drafts of tokens the target later accepts are recomputed into their
// real slots by the next call's catch-up, so a draft row is only ever written for a committed
// token (the verification decides the output; the draft only decides how many tokens a step
// gains).
//
// NEXTN (options.mtp): the draft is the target's own multi-token-prediction block
// (CausalLM::ForwardMtp), one layer whose K/V lives in the draft storage as above. Its entry for
// position p pairs token p with the target's final hidden state of position p - 1, so the runner
// keeps those states per slot (StoreHidden, after every target forward; current under the same
// page-generation rule). A catch-up pairs each position with the stored state of the one before;
// where the target did not write that state during the slot's present allocation (blocks loaded
// back from the hierarchical cache's tiers, which keep K/V only) it pairs zeros, as position 0
// does, so such a sequence still drafts, from a block cache that lacks those states. The last
// token pairs with the state of the position before it; draft i > 0 with the block's own output
// state of draft i - 1.
//
// Thread affinity: the engine thread; Propose runs the draft model on `pool`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/status.h"
#include "common/thread_pool.h"
#include "kv/kv_storage.h"
#include "kv/token_to_kv_pool.h"
#include "model/causal_lm.h"
#include "model/kv_cache_view.h"

namespace radixserve::spec {

struct DraftRunnerOptions {
  size_t max_jobs = 0;   // sequences drafting in one call (scratch rows / max_steps)
  size_t max_steps = 0;  // drafts per sequence (--speculative-num-steps)
  // Catch-up positions fed to the draft model per call, over all jobs.
  size_t max_catch_up_tokens = 4096;
  // NEXTN: `model` is the target itself, drafting with its multi-token-prediction block.
  bool mtp = false;
};

struct DraftJob {
  // The sequence's tokens: prompt and output; every one but the last has target K/V.
  std::span<const int32_t> tokens;
  // The target's slot of each position [0, tokens.size() - 1).
  std::span<const int32_t> slots;
  size_t wanted = 0;  // drafts to propose, 1 .. max_steps
  // Out: the drafts (empty when the catch-up did not finish this call).
  std::vector<int32_t> drafts;
};

class DraftRunner {
 public:
  // `storage` rows [0, scratch_row) mirror the pool's slots; rows [scratch_row, scratch_row +
  // max_jobs * max_steps) are scratch. `model` must share the target's vocabulary.
  DraftRunner(std::shared_ptr<const model::CausalLM> model, kv::KvStorage* storage,
              const kv::TokenToKVPool* pool, size_t scratch_row, DraftRunnerOptions options);

  const DraftRunnerOptions& options() const { return options_; }
  const model::CausalLM& model() const { return *model_; }

  // Fills each job's drafts (at most max_jobs jobs). A forward failure is returned; the jobs'
  // drafts are then empty.
  Status Propose(std::span<DraftJob> jobs, ThreadPool* pool);

  // Positions of `slots` whose draft row is current, counted from the start: the first stale
  // position (slots.size() when all are current).
  size_t CurrentPrefix(std::span<const int32_t> slots) const;

  // NEXTN: keeps the target's final hidden states of a forward, `hidden` [batch.num_tokens(),
  // hidden_size] (every token's, in token order), at the tokens' slots.
  void StoreHidden(const model::ForwardBatch& batch, const float* hidden);

 private:
  bool IsCurrent(int32_t slot) const;
  void MarkCurrent(int32_t slot);
  bool IsCurrentIn(const std::vector<uint32_t>& written, int32_t slot) const;
  // NEXTN: appends the state paired with position p of `job` to h_in_: the stored one of position
  // p - 1, or zeros at 0 and where it is not current.
  void AppendState(const DraftJob& job, size_t p);
  // The draft forward: Forward, or ForwardMtp over h_in_ (output states into h_out_).
  Status RunDraft(const model::ForwardBatch& batch, ThreadPool* pool);
  int32_t ScratchSlot(size_t job, size_t step) const;
  int32_t ArgMax(const float* row) const;

  std::shared_ptr<const model::CausalLM> model_;
  const kv::TokenToKVPool* pool_;
  size_t scratch_row_;
  DraftRunnerOptions options_;
  model::KvCacheView view_;
  size_t vocab_ = 0;
  // Per pool slot: the page generation its draft row was written in (0: never).
  std::vector<uint32_t> written_;
  // NEXTN: the target's hidden state per pool slot [scratch_row, hidden] and the page generation
  // it was written in.
  size_t hidden_size_ = 0;
  std::vector<float> hidden_;
  std::vector<uint32_t> hidden_written_;
  std::vector<float> h_in_, h_out_;  // per call: the batch's states in and the drafts' out
  // Per-call buffers.
  std::vector<std::vector<int32_t>> tables_;  // each job's slot table (real + scratch)
  std::vector<float> logits_;
};

}  // namespace radixserve::spec
