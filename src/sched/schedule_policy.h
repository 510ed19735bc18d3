// SchedulePolicy: orders the waiting queue before each admission pass (SGLang's calc_priority;
// reference/sglang-runtime.md 2.6). One policy per file:
//   fcfs        arrival order (under priority scheduling: priority, then queue order);
//   lof         longest max_new_tokens first (priority first under priority scheduling);
//   lpm         longest cached prefix first, with in-batch prefix caching; fcfs above 128 waiting;
//   dfs-weight  depth-first over the radix tree by the number of waiting requests under a node;
//   random      a fresh shuffle every pass.
// Cache-aware policies (lpm, dfs-weight) become fcfs when the prefix cache is disabled.
// Policies that match prefixes leave each sequence's MatchResult in seq->match (unlocked).
//
// Thread affinity: engine thread only.
#pragma once

#include <memory>
#include <random>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "kv/prefix_cache.h"
#include "sched/scheduler_config.h"
#include "sched/sequence.h"

namespace radixserve::sched {

struct PolicyContext {
  const SchedulerConfig* config = nullptr;
  kv::PrefixCache* cache = nullptr;
  int32_t page_size = 1;
};

class SchedulePolicy {
 public:
  virtual ~SchedulePolicy() = default;
  virtual std::string_view name() const = 0;
  // Reorders `waiting` in place (stable where the policy has ties).
  virtual void Order(std::vector<Sequence*>& waiting, const PolicyContext& context) = 0;
};

// kInvalidArgument for an unknown name (SGLang: "Unknown schedule_policy").
Expected<std::unique_ptr<SchedulePolicy>> MakeSchedulePolicy(std::string_view name,
                                                             bool cache_disabled,
                                                             uint64_t random_seed);

// Matches seq's fill ids (all but what must be recomputed) against the cache into seq->match.
void MatchSequencePrefix(Sequence* seq, kv::PrefixCache& cache);

// Stable sort by priority (most important first), then queue order.
void SortByPriority(std::vector<Sequence*>& waiting, const SchedulerConfig& config);

class FcfsPolicy final : public SchedulePolicy {
 public:
  std::string_view name() const override { return "fcfs"; }
  void Order(std::vector<Sequence*>& waiting, const PolicyContext& context) override;
};

class LofPolicy final : public SchedulePolicy {
 public:
  std::string_view name() const override { return "lof"; }
  void Order(std::vector<Sequence*>& waiting, const PolicyContext& context) override;
};

class LpmPolicy final : public SchedulePolicy {
 public:
  std::string_view name() const override { return "lpm"; }
  void Order(std::vector<Sequence*>& waiting, const PolicyContext& context) override;
};

class DfsWeightPolicy final : public SchedulePolicy {
 public:
  std::string_view name() const override { return "dfs-weight"; }
  void Order(std::vector<Sequence*>& waiting, const PolicyContext& context) override;
};

class RandomPolicy final : public SchedulePolicy {
 public:
  explicit RandomPolicy(uint64_t seed) : rng_(seed) {}
  std::string_view name() const override { return "random"; }
  void Order(std::vector<Sequence*>& waiting, const PolicyContext& context) override;

 private:
  std::mt19937_64 rng_;
};

}  // namespace radixserve::sched
