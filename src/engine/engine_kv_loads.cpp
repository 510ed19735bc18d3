// EngineLoop's side of the hierarchical cache's storage tier (kv/hicache.h) and of the K/V rows
// that prefill/decode disaggregation moves between servers (kv/kv_rows.h).
#include <memory>
#include <string>

#include <fmt/format.h>

#include "common/log.h"
#include "engine/engine_loop.h"
#include "kv/kv_rows.h"

namespace radixserve::engine {

void EngineLoop::StartPrefetch(sched::Sequence* seq) {
  kv::HiCache* hicache = memory_->hicache();
  if (hicache == nullptr || seq->no_prefix_match) return;
  const std::vector<int32_t> ids =
      seq->FillIds(kv::MaxPrefixMatchLen(seq->fill_len(), seq->logprob_start_len));
  seq->prefetch_op = hicache->Prefetch(ids, seq->extra_key);
  seq->prefetch_wait = seq->prefetch_op != 0;
}

void EngineLoop::PollPrefetches() {
  kv::HiCache* hicache = memory_->hicache();
  if (hicache == nullptr) return;
  hicache->Poll();
  const auto now = kv::HiCache::Clock::now();
  for (sched::Sequence* seq : scheduler_->waiting()) {
    if (seq->prefetch_op != 0) seq->prefetch_wait = !hicache->Ready(seq->prefetch_op, now);
  }
}

void EngineLoop::ReleaseTransferredPrefix(sched::Sequence* seq) {
  if (seq->transferred_prefix == nullptr) return;
  memory_->radix_cache()->DecLockRef(seq->transferred_prefix);
  seq->transferred_prefix = nullptr;
}

void EngineLoop::ReleasePrefixHolds(sched::Sequence* seq, RequestState* state) {
  ReleaseTransferredPrefix(seq);
  if (seq->prefetch_op == 0) return;
  const size_t loaded =
      memory_->hicache()->Release(seq->prefetch_op, seq->admitted ? seq->cached_tokens : 0);
  if (state != nullptr) state->set_storage_cached_tokens(static_cast<int64_t>(loaded));
  seq->prefetch_op = 0;
  seq->prefetch_wait = false;
}

bool EngineLoop::InsertPrefilledKv(sched::Sequence* seq, RequestState& state) {
  const kv::KvRows& rows = *state.request().prefilled_kv;
  if (rows.layout != kv_layout_) {
    const std::string message = fmt::format(
        "The prefill server's KV cache layout ({}) differs from this server's ({}): run both "
        "with the same model and --kv-cache-dtype.",
        rows.layout.Describe(), kv_layout_.Describe());
    RADIX_LOG_ERROR("{}{}", log_prefix_, message);
    FinishSequence(seq, AbortFinish(message, 500), /*cache_kv=*/false);
    return false;
  }
  kv::RadixCache* cache = memory_->radix_cache();
  if (cache == nullptr || seq->no_prefix_match) return true;  // computed here instead
  const size_t max_len = kv::MaxPrefixMatchLen(seq->fill_len(), seq->logprob_start_len);
  seq->transferred_prefix = kv::InsertRows(*cache, memory_->pool(), rows, seq->extra_key, max_len);
  leak_check_stale_ = true;
  if (seq->transferred_prefix == nullptr) {
    RADIX_LOG_WARN("{}No KV memory for the {} prefilled tokens of request {}: computing them here.",
                   log_prefix_, rows.tokens.size(), seq->rid);
  }
  return true;
}

void EngineLoop::ExportPromptKv(const sched::Sequence* seq, RequestState& state) {
  if (!state.request().export_kv) return;
  const size_t len = seq->input_ids.size();
  if (seq->kv_len < len || seq->kv.req_pool_slot < 0) return;
  const kv::KvStorage& storage = memory_->pool().storage();
  auto rows = std::make_shared<kv::KvRows>();
  rows->layout = kv_layout_;
  rows->tokens = seq->input_ids;
  rows->bytes.resize(rows->ExpectedBytes());
  kv::GatherRows(storage, memory_->req_pool().Slice(seq->kv.req_pool_slot, 0, len),
                 rows->bytes.data());
  state.set_kv_rows(std::move(rows));
}

void EngineLoop::ClearStorageAsync(std::function<void(Status)> done) {
  PostCommand([this, done = std::move(done)] {
    kv::HiCache* hicache = memory_->hicache();
    if (hicache == nullptr) {
      done(InvalidArgument("Hierarchical cache storage backend is not enabled."));
      return;
    }
    hicache->ClearStorage();
    RADIX_LOG_INFO("{}Hierarchical cache storage backend cleared.", log_prefix_);
    done(Status::Ok());
  });
}

}  // namespace radixserve::engine
