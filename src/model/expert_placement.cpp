#include "model/expert_placement.h"

#include <algorithm>
#include <numeric>

#include "common/check.h"

namespace radixserve::model {

uint64_t MixBits(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

ExpertPlacement ExpertPlacement::Trivial(int64_t num_logical, int64_t num_physical,
                                         int64_t blocks) {
  RADIX_CHECK(num_logical > 0 && num_physical >= num_logical && num_physical % blocks == 0);
  ExpertPlacement p;
  p.blocks_ = blocks;
  p.physical_to_logical_.resize(static_cast<size_t>(num_physical));
  for (int64_t s = 0; s < num_physical; ++s) {
    p.physical_to_logical_[static_cast<size_t>(s)] = static_cast<int32_t>(s % num_logical);
  }
  p.replicas_.resize(static_cast<size_t>(num_logical));
  p.Derive();
  return p;
}

Expected<ExpertPlacement> ExpertPlacement::FromMap(std::vector<int32_t> physical_to_logical,
                                                   int64_t num_logical, int64_t num_physical,
                                                   int64_t blocks, const std::string& what) {
  RADIX_CHECK(num_logical > 0 && num_physical % blocks == 0);
  const auto invalid = [&](const std::string& why) { return InvalidArgument(what + ": " + why); };
  if (static_cast<int64_t>(physical_to_logical.size()) != num_physical) {
    return invalid("holds " + std::to_string(physical_to_logical.size()) + " slots, not the " +
                   std::to_string(num_physical) +
                   " physical experts (experts + --ep-num-redundant-experts)");
  }
  std::vector<bool> covered(static_cast<size_t>(num_logical), false);
  for (const int32_t l : physical_to_logical) {
    if (l < 0 || l >= num_logical) {
      return invalid("expert " + std::to_string(l) + " is not one of the model's " +
                     std::to_string(num_logical));
    }
    covered[static_cast<size_t>(l)] = true;
  }
  if (const auto gap = std::find(covered.begin(), covered.end(), false); gap != covered.end()) {
    return invalid("expert " + std::to_string(gap - covered.begin()) + " has no slot");
  }
  ExpertPlacement p;
  p.blocks_ = blocks;
  p.physical_to_logical_ = std::move(physical_to_logical);
  p.replicas_.resize(static_cast<size_t>(num_logical));
  p.Derive();
  return p;
}

ExpertPlacement ExpertPlacement::Balanced(const std::vector<double>& load, int64_t num_physical,
                                          int64_t blocks) {
  const auto E = static_cast<int64_t>(load.size());
  RADIX_CHECK(E > 0 && num_physical >= E && num_physical % blocks == 0);
  // Single precision throughout, as the reference algorithm computes in float32.
  std::vector<float> weight(load.begin(), load.end());
  // Replicas: slot i < E is expert i; each further slot goes to the expert with the highest load
  // per replica (the lowest index among equals).
  std::vector<int32_t> slot_expert(static_cast<size_t>(num_physical));
  std::vector<int64_t> count(static_cast<size_t>(E), 1);
  std::iota(slot_expert.begin(), slot_expert.begin() + E, 0);
  for (int64_t i = E; i < num_physical; ++i) {
    int64_t best = 0;
    for (int64_t j = 1; j < E; ++j) {
      if (weight[j] / static_cast<float>(count[j]) >
          weight[best] / static_cast<float>(count[best])) {
        best = j;
      }
    }
    slot_expert[static_cast<size_t>(i)] = static_cast<int32_t>(best);
    ++count[static_cast<size_t>(best)];
  }
  // Packing: heaviest replica first, into the least loaded block with room (the lowest index
  // among equals); a block's replicas keep the order they arrived in.
  const int64_t per = num_physical / blocks;
  std::vector<float> share(static_cast<size_t>(num_physical));
  for (int64_t i = 0; i < num_physical; ++i) {
    const int32_t j = slot_expert[static_cast<size_t>(i)];
    share[static_cast<size_t>(i)] = weight[j] / static_cast<float>(count[j]);
  }
  std::vector<int32_t> order(static_cast<size_t>(num_physical));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return share[static_cast<size_t>(a)] > share[static_cast<size_t>(b)];
  });
  ExpertPlacement p;
  p.blocks_ = blocks;
  p.physical_to_logical_.resize(static_cast<size_t>(num_physical));
  if (per == 1) {
    p.physical_to_logical_ = slot_expert;
  } else {
    std::vector<float> block_load(static_cast<size_t>(blocks), 0.0f);
    std::vector<int64_t> filled(static_cast<size_t>(blocks), 0);
    for (const int32_t i : order) {
      int64_t target = -1;
      for (int64_t b = 0; b < blocks; ++b) {
        if (filled[b] == per) continue;
        if (target < 0 || block_load[b] < block_load[target]) target = b;
      }
      p.physical_to_logical_[static_cast<size_t>(target * per + filled[target])] =
          slot_expert[static_cast<size_t>(i)];
      ++filled[target];
      block_load[target] += share[static_cast<size_t>(i)];
    }
  }
  p.replicas_.resize(static_cast<size_t>(E));
  p.Derive();
  return p;
}

ExpertPlacement ExpertPlacement::KeepingSlotsOf(const ExpertPlacement& now) const {
  RADIX_CHECK(now.num_physical() == num_physical() && now.blocks_ == blocks_);
  ExpertPlacement out = *this;
  const int64_t per = slots_per_block();
  for (int64_t b = 0; b < blocks_; ++b) {
    const auto first = out.physical_to_logical_.begin() + b * per;
    std::vector<int32_t> pending(first, first + per);
    std::vector<int32_t> row(static_cast<size_t>(per), -1);
    for (int64_t i = 0; i < per; ++i) {
      const int32_t held = now.physical_to_logical_[static_cast<size_t>(b * per + i)];
      const auto at = std::find(pending.begin(), pending.end(), held);
      if (at == pending.end()) continue;
      row[static_cast<size_t>(i)] = held;
      pending.erase(at);
    }
    auto next = pending.begin();
    for (int32_t& e : row) {
      if (e < 0) e = *next++;
    }
    std::copy(row.begin(), row.end(), first);
  }
  out.Derive();
  return out;
}

void ExpertPlacement::Derive() {
  const int64_t E = num_logical(), P = num_physical();
  for (auto& r : replicas_) r.clear();
  for (int64_t s = 0; s < P; ++s) {
    replicas_[static_cast<size_t>(physical_to_logical_[static_cast<size_t>(s)])].push_back(
        static_cast<int32_t>(s));
  }
  static_.assign(static_cast<size_t>(blocks_ * E), -1);
  for (int64_t j = 0; j < E; ++j) {
    const std::vector<int32_t>& r = replicas_[static_cast<size_t>(j)];
    RADIX_CHECK(!r.empty());
    int64_t without = 0;  // blocks so far with no replica of j
    for (int64_t b = 0; b < blocks_; ++b) {
      const auto own = std::find_if(r.begin(), r.end(), [&](int32_t s) { return BlockOf(s) == b; });
      static_[static_cast<size_t>(b * E + j)] =
          own != r.end() ? *own
                         : r[static_cast<size_t>((without++ + j) % static_cast<int64_t>(r.size()))];
    }
  }
}

int32_t ExpertPlacement::Dispatch(ExpertDispatch dispatch, int32_t logical, int64_t t, int64_t k,
                                  int64_t pass, uint64_t salt) const {
  const std::vector<int32_t>& r = replicas_[static_cast<size_t>(logical)];
  if (r.size() == 1) return r[0];
  if (dispatch == ExpertDispatch::kStatic) {
    return static_[static_cast<size_t>((t % blocks_) * num_logical() + logical)];
  }
  const uint64_t draw =
      MixBits(salt ^ MixBits(static_cast<uint64_t>(pass) * 0x100000001b3ULL +
                             static_cast<uint64_t>(t) * 64 + static_cast<uint64_t>(k)));
  return r[draw % r.size()];
}

double ExpertPlacement::Balancedness(const std::vector<double>& load) const {
  RADIX_CHECK(static_cast<int64_t>(load.size()) == num_logical());
  std::vector<double> block_load(static_cast<size_t>(blocks_), 0.0);
  for (int64_t s = 0; s < num_physical(); ++s) {
    const int32_t j = physical_to_logical_[static_cast<size_t>(s)];
    block_load[static_cast<size_t>(BlockOf(static_cast<int32_t>(s)))] +=
        load[static_cast<size_t>(j)] /
        static_cast<double>(replicas_[static_cast<size_t>(j)].size());
  }
  return BlockBalancedness(block_load);
}

double BlockBalancedness(const std::vector<double>& block_load) {
  RADIX_CHECK(!block_load.empty());
  const double max = *std::max_element(block_load.begin(), block_load.end());
  if (max <= 0) return 1.0;
  return std::accumulate(block_load.begin(), block_load.end(), 0.0) /
         static_cast<double>(block_load.size()) / max;
}

}  // namespace radixserve::model
