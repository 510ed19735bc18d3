// EngineLoop's side of the hierarchical cache's storage tier (kv/hicache.h).
#include <string>

#include "common/log.h"
#include "engine/engine_loop.h"

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

void EngineLoop::ReleasePrefetch(sched::Sequence* seq, RequestState* state) {
  if (seq->prefetch_op == 0) return;
  const size_t loaded =
      memory_->hicache()->Release(seq->prefetch_op, seq->admitted ? seq->cached_tokens : 0);
  if (state != nullptr) state->set_storage_cached_tokens(static_cast<int64_t>(loaded));
  seq->prefetch_op = 0;
  seq->prefetch_wait = false;
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
