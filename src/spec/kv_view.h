// How a model sees a KV pool the kv stage owns: one helper for every forward pass that runs
// over a kv::KvStorage (the engine's target pool, the draft runner's pool, a tensor-parallel
// follower's pool).
#pragma once

#include "kv/kv_storage.h"
#include "model/kv_cache_view.h"

namespace radixserve::spec {

// Every layer's K and V buffers of `storage` (with their fp8 scales), its dtype, rows, heads and
// head size. The view points into `storage`, which must outlive it.
model::KvCacheView KvViewOf(kv::KvStorage& storage);

}  // namespace radixserve::spec
