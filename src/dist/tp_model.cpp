#include "dist/tp_model.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <vector>

#include "common/log.h"
#include "kv/kv_storage.h"
#include "spec/kv_view.h"

namespace radixserve::dist {
namespace {

enum StepKind : int64_t { kKeepAlive = 0, kStep = 1, kStop = 2 };

// The header's fields, as int64 words. The payload: positions, each sequence's (prefix length,
// extend length, slot list id, slots kept, draft tree size), logit and hidden indices as int64 (the
// last pipeline stage sends those rows back), then token ids and each sequence's new slots and
// draft tree parents as int32.
enum HeaderField {
  kKind,
  kPayloadBytes,
  kNumSlots,
  kKvDtype,
  kNumTokens,
  kNumSequences,
  kNumLogits,
  kNumHidden,
  kWords
};
using Header = std::array<int64_t, kWords>;
inline constexpr size_t kSequenceFields = 5;

template <typename T>
void Append(std::vector<uint8_t>& out, const T* data, size_t n) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(data);
  out.insert(out.end(), bytes, bytes + n * sizeof(T));
}

// Reads n values of T at `offset` (advanced; aligned for T: SendStep writes the 8-byte fields
// first into a buffer malloc aligned).
template <typename T>
const T* Take(const std::vector<uint8_t>& in, size_t& offset, size_t n) {
  RADIX_CHECK(offset + n * sizeof(T) <= in.size());
  const auto* p = reinterpret_cast<const T*>(in.data() + offset);
  offset += n * sizeof(T);
  return p;
}

// Often enough that an idle leader notices a follower gone within seconds (the send fails).
std::chrono::milliseconds KeepAlivePeriod(std::chrono::milliseconds timeout) {
  return std::clamp(timeout / 4, std::chrono::milliseconds(50), std::chrono::milliseconds(2000));
}

}  // namespace

TensorParallelLeader::TensorParallelLeader(std::shared_ptr<const model::CausalLM> shard,
                                           TpGroup* group)
    : shard_(std::move(shard)),
      group_(group),
      last_sent_(std::chrono::steady_clock::now()),
      keep_alive_([this] { KeepAlive(); }) {}

TensorParallelLeader::~TensorParallelLeader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    Header header{};
    header[kKind] = kStop;
    group_->Broadcast(header.data(), sizeof(header));
  }
  stop_cv_.notify_all();
  keep_alive_.join();
}

void TensorParallelLeader::KeepAlive() {
  const auto period = KeepAlivePeriod(group_->timeout());
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    stop_cv_.wait_for(lock, period);
    if (stopping_) break;
    if (std::chrono::steady_clock::now() - last_sent_ < period) continue;
    Header header{};
    header[kKind] = kKeepAlive;
    group_->Broadcast(header.data(), sizeof(header));
    last_sent_ = std::chrono::steady_clock::now();
  }
}

SlotTables::Change SlotTables::Update(std::span<const int32_t> slots, uint64_t step) {
  auto found = id_of_.find(slots.data());
  int32_t id = -1;
  if (found != id_of_.end() && used_[static_cast<size_t>(found->second)] != step) {
    id = found->second;
  } else {
    // The least recently used id, unless there is room for one more or this step used them all
    // (a batch of more sequences than the capacity: the tables grow).
    const auto oldest =
        lists_.size() < capacity_ ? used_.end() : std::min_element(used_.begin(), used_.end());
    if (oldest != used_.end() && *oldest != step) {
      id = static_cast<int32_t>(oldest - used_.begin());
    } else {
      id = static_cast<int32_t>(lists_.size());
      lists_.emplace_back();
      owner_.push_back(nullptr);
      used_.push_back(0);
    }
  }
  const auto at = static_cast<size_t>(id);
  if (owner_[at] != slots.data()) {
    if (owner_[at] != nullptr) id_of_.erase(owner_[at]);
    id_of_[slots.data()] = id;  // a second sequence at the same address takes the id over
    owner_[at] = slots.data();
    lists_[at].clear();
  }
  std::vector<int32_t>& held = lists_[at];
  const size_t n = std::min(held.size(), slots.size());
  const size_t keep = static_cast<size_t>(
      std::mismatch(held.begin(), held.begin() + n, slots.begin()).first - held.begin());
  held.assign(slots.begin(), slots.end());
  used_[at] = step;
  return {id, static_cast<int64_t>(keep)};
}

// Both sides sweep at the same step numbers (they count the same steps), so a dropped list is
// empty on both: the next sequence given its id keeps nothing.
void SlotTables::Sweep(uint64_t step) {
  if (step % kSweepSteps != 0) return;
  for (size_t id = 0; id < lists_.size(); ++id) {
    if (owner_[id] == nullptr || used_[id] + kSweepSteps > step) continue;
    id_of_.erase(owner_[id]);
    owner_[id] = nullptr;
    std::vector<int32_t>().swap(lists_[id]);
  }
}

std::span<const int32_t> FollowerSlotTables::Apply(size_t id, size_t keep,
                                                   std::span<const int32_t> added, uint64_t step) {
  if (id >= lists_.size()) {
    lists_.resize(id + 1);
    used_.resize(id + 1);
  }
  std::vector<int32_t>& list = lists_[id];
  RADIX_CHECK(keep <= list.size());
  list.resize(keep);
  list.insert(list.end(), added.begin(), added.end());
  used_[id] = step;
  return list;
}

void FollowerSlotTables::Sweep(uint64_t step) {
  if (step % SlotTables::kSweepSteps != 0) return;
  for (size_t id = 0; id < lists_.size(); ++id) {
    if (used_[id] + SlotTables::kSweepSteps <= step) std::vector<int32_t>().swap(lists_[id]);
  }
}

void TensorParallelLeader::SendStep(const model::ForwardBatch& batch,
                                    const model::KvCacheView& kv) const {
  // The 8-byte fields first, so that every field is aligned in the receiver's buffer.
  const uint64_t step = ++steps_;
  tables_.Sweep(step);
  std::vector<uint8_t>& payload = payload_;
  payload.clear();
  Append(payload, batch.positions.data(), batch.positions.size());
  std::vector<SlotTables::Change> changes;
  changes.reserve(batch.sequences.size());
  for (const model::SequenceExtend& seq : batch.sequences) {
    const auto slots = seq.kv_slots.first(static_cast<size_t>(seq.prefix_len + seq.extend_len));
    changes.push_back(tables_.Update(slots, step));
    const int64_t fields[kSequenceFields] = {seq.prefix_len, seq.extend_len, changes.back().id,
                                             changes.back().keep,
                                             static_cast<int64_t>(seq.tree_parents.size())};
    Append(payload, fields, kSequenceFields);
  }
  Append(payload, batch.logit_indices.data(), batch.logit_indices.size());
  Append(payload, batch.hidden_indices.data(), batch.hidden_indices.size());
  Append(payload, batch.token_ids.data(), batch.token_ids.size());
  for (size_t s = 0; s < batch.sequences.size(); ++s) {
    const model::SequenceExtend& seq = batch.sequences[s];
    const auto keep = static_cast<size_t>(changes[s].keep);
    Append(payload, seq.kv_slots.data() + keep,
           static_cast<size_t>(seq.prefix_len + seq.extend_len) - keep);
    Append(payload, seq.tree_parents.data(), seq.tree_parents.size());
  }
  Header header{};
  header[kKind] = kStep;
  header[kPayloadBytes] = static_cast<int64_t>(payload.size());
  header[kNumSlots] = kv.num_slots;
  header[kKvDtype] = static_cast<int64_t>(kv.dtype);
  header[kNumTokens] = batch.num_tokens();
  header[kNumSequences] = static_cast<int64_t>(batch.sequences.size());
  header[kNumLogits] = static_cast<int64_t>(batch.logit_indices.size());
  header[kNumHidden] = static_cast<int64_t>(batch.hidden_indices.size());
  group_->Broadcast(header.data(), sizeof(header));
  group_->Broadcast(payload.data(), payload.size());
  last_sent_ = std::chrono::steady_clock::now();
}

Status TensorParallelLeader::Forward(const model::ForwardBatch& batch, const model::KvCacheView& kv,
                                     ThreadPool* pool, float* logits) const {
  std::lock_guard<std::mutex> lock(mu_);
  SendStep(batch, kv);
  return shard_->Forward(batch, kv, pool, logits);
}

Status TensorParallelLeader::ForwardWithHidden(const model::ForwardBatch& batch,
                                               const model::KvCacheView& kv, ThreadPool* pool,
                                               float* logits, float* hidden) const {
  std::lock_guard<std::mutex> lock(mu_);
  SendStep(batch, kv);
  return shard_->ForwardWithHidden(batch, kv, pool, logits, hidden);
}

int RunTensorParallelFollower(const model::CausalLM& shard, TpGroup& group, ThreadPool* pool) {
  const model::ModelConfig& c = shard.config();
  std::unique_ptr<kv::KvStorage> storage;  // lazily committed, as the leader's pool
  model::KvCacheView kv;
  std::vector<uint8_t> payload;
  model::ForwardBatch batch;
  FollowerSlotTables tables;
  int64_t steps = 0;
  while (true) {
    Header header{};
    group.Broadcast(header.data(), sizeof(header));
    if (header[kKind] == kStop) {
      RADIX_LOG_INFO("tensor-parallel rank {}: the leader stopped after {} steps", group.rank(),
                     steps);
      return 0;
    }
    if (header[kKind] != kStep) continue;
    payload.resize(static_cast<size_t>(header[kPayloadBytes]));
    group.Broadcast(payload.data(), payload.size());
    const auto dtype = static_cast<kernels::KvType>(header[kKvDtype]);
    if (!storage || kv.num_slots != header[kNumSlots] || kv.dtype != dtype) {
      storage.reset();
      kv::KvStorageSpec spec;
      spec.num_layers = static_cast<int32_t>(c.num_layers);
      spec.kv_heads = static_cast<int32_t>(c.num_kv_heads);
      spec.head_dim = static_cast<int32_t>(c.head_dim);
      spec.dtype = dtype;
      spec.num_rows = static_cast<size_t>(header[kNumSlots]);
      spec.values_in_keys = c.kv_values_in_keys();
      Expected<kv::KvStorage> created = kv::KvStorage::Create(spec);
      if (!created.ok()) {
        RADIX_LOG_ERROR("tensor-parallel rank {}: {}", group.rank(), created.status().message());
        return 1;  // the leader's next collective fails on the closed connections
      }
      storage = std::make_unique<kv::KvStorage>(std::move(created).value());
      kv = spec::KvViewOf(*storage);
      RADIX_LOG_INFO("tensor-parallel rank {}: KV pool of {} slots ({} layers, {} KV heads each)",
                     group.rank(), header[kNumSlots], c.num_layers, c.num_kv_heads);
    }
    tables.Sweep(static_cast<uint64_t>(steps) + 1);
    const auto tokens = static_cast<size_t>(header[kNumTokens]);
    const auto sequences = static_cast<size_t>(header[kNumSequences]);
    size_t offset = 0;
    const int64_t* positions = Take<int64_t>(payload, offset, tokens);
    const int64_t* fields = Take<int64_t>(payload, offset, kSequenceFields * sequences);
    const auto n_logits = static_cast<size_t>(header[kNumLogits]);
    const int64_t* logit_indices = Take<int64_t>(payload, offset, n_logits);
    const auto n_hidden = static_cast<size_t>(header[kNumHidden]);
    const int64_t* hidden_indices = Take<int64_t>(payload, offset, n_hidden);
    batch.logit_indices.assign(logit_indices, logit_indices + n_logits);
    batch.hidden_indices.assign(hidden_indices, hidden_indices + n_hidden);
    const int32_t* ids = Take<int32_t>(payload, offset, tokens);
    batch.token_ids.assign(ids, ids + tokens);
    batch.positions.assign(positions, positions + tokens);
    batch.sequences.assign(sequences, model::SequenceExtend{});
    for (size_t s = 0; s < sequences; ++s) {
      model::SequenceExtend& seq = batch.sequences[s];
      const int64_t* f = fields + kSequenceFields * s;
      seq.prefix_len = f[0];
      seq.extend_len = f[1];
      const auto keep = static_cast<size_t>(f[3]);
      const auto n = static_cast<size_t>(seq.prefix_len + seq.extend_len);
      RADIX_CHECK(keep <= n);
      const int32_t* added = Take<int32_t>(payload, offset, n - keep);
      seq.kv_slots = tables.Apply(static_cast<size_t>(f[2]), keep, {added, n - keep},
                                  static_cast<uint64_t>(steps) + 1);
      const auto tree = static_cast<size_t>(f[4]);
      RADIX_CHECK(tree <= static_cast<size_t>(seq.extend_len));
      if (tree > 0) seq.tree_parents = {Take<int32_t>(payload, offset, tree), tree};
    }
    if (Status status = shard.Forward(batch, kv, pool, nullptr); !status.ok()) {
      RADIX_LOG_WARN("tensor-parallel rank {}: step refused: {}", group.rank(), status.message());
    }
    ++steps;
  }
}

}  // namespace radixserve::dist
