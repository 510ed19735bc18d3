// The idle-time memory check (SGLang's self_check_during_idle): when no sequence is running or
// waiting, every KV slot must be either free in the pool or held by the prefix cache, exactly once,
// nothing may be locked, and (if given) every request row must be free.
//
// Call from the engine thread while idle; tests call it after every run.
#pragma once

#include "common/status.h"
#include "kv/prefix_cache.h"
#include "kv/req_to_token_pool.h"
#include "kv/token_to_kv_pool.h"

namespace radixserve::kv {

// Ok, or kInternal with a message giving the counts (available, evictable, protected, total) and
// the first offending pages: leaked (neither free nor cached), cached twice, or cached and free.
Status CheckKvLeak(const TokenToKVPool& pool, const PrefixCache& cache,
                   const ReqToTokenPool* req_pool = nullptr);

}  // namespace radixserve::kv
