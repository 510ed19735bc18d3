// Helpers of the scheduler tests: a tiny KV memory (no model), sequences built from token
// counts, and a fake engine step that appends a fixed token to every sampling entry.
#pragma once

#include <deque>
#include <memory>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "kv/kv_memory.h"
#include "sched/scheduler.h"

namespace radixserve::sched::testing {

inline std::unique_ptr<kv::KvMemory> MakeMemory(int64_t tokens, int32_t page_size = 1,
                                                bool radix = true) {
  kv::KvMemoryOptions options;
  options.num_layers = 1;
  options.kv_heads = 1;
  options.head_dim = 1;
  options.context_len = 4096;
  options.page_size = page_size;
  options.max_total_tokens = tokens;
  options.disable_radix_cache = !radix;
  options.memory = kv::HostMemory{uint64_t{1} << 34, uint64_t{1} << 34, 1};
  auto memory = kv::KvMemory::Create(options);
  RADIX_CHECK_MSG(memory.ok(), memory.status().message().c_str());
  return std::move(memory).value();
}

// Prompt tokens base, base + 1, ... (distinct bases give disjoint prompts).
inline std::unique_ptr<Sequence> MakeSeq(uint64_t id, size_t prompt_len, int64_t max_new,
                                         int32_t base = 1000) {
  auto seq = std::make_unique<Sequence>();
  seq->id = id;
  seq->rid = std::to_string(id);
  seq->input_ids.resize(prompt_len);
  std::iota(seq->input_ids.begin(), seq->input_ids.end(), base);
  seq->max_new_tokens = max_new;
  return seq;
}

// The scheduler borrows sequences; the tests own them here until the test binary exits (the
// engine's request records play this part in the server).
inline Sequence* Keep(std::unique_ptr<Sequence> seq) {
  static std::deque<std::unique_ptr<Sequence>> owned;
  owned.push_back(std::move(seq));
  return owned.back().get();
}

inline Sequence* Add(Scheduler& s, std::unique_ptr<Sequence> seq) {
  Sequence* raw = Keep(std::move(seq));
  EXPECT_TRUE(s.Enqueue(raw, nullptr).ok());
  return raw;
}

// Completes a planned step like the engine would: every sampling entry gets token 7; sequences
// reaching max_new_tokens are released into the cache.
// `released` (when given) collects the released sequences.
inline void FakeRun(Scheduler& s, const StepPlan& plan,
                    std::vector<Sequence*>* released = nullptr) {
  s.CompleteStep(plan);
  for (const StepEntry& e : plan.entries) {
    if (!e.samples) continue;
    e.seq->output_ids.push_back(7);
    if (static_cast<int64_t>(e.seq->output_ids.size()) >= e.seq->max_new_tokens) {
      s.Release(e.seq);
      if (released != nullptr) released->push_back(e.seq);
    }
  }
}

inline size_t ExtendOf(const StepPlan& plan, const Sequence* seq) {
  for (const StepEntry& e : plan.entries) {
    if (e.seq == seq) return e.extend_len;
  }
  return 0;
}

}  // namespace radixserve::sched::testing
