// Helpers shared by the kv unit tests: pools, token sequences built from page-sized units, and
// the sequence lifecycle the scheduler drives (admit -> chunks -> finish).
#pragma once

#include <cstdint>
#include <vector>

#include "kv/prefix_cache.h"
#include "kv/req_to_token_pool.h"
#include "kv/token_to_kv_pool.h"

namespace radixserve::kv::testing {

inline TokenToKVPool MakePool(size_t size, int32_t page_size) {
  TokenToKVPoolOptions options;
  options.size = size;
  options.page_size = page_size;
  Expected<TokenToKVPool> pool = TokenToKVPool::Create(options);
  RADIX_CHECK(pool.ok());
  return std::move(pool).value();
}

// Each unit becomes one page of distinct tokens (unit * 1000 + offset), so sequences that share
// units share whole pages.
inline std::vector<int32_t> Units(const std::vector<int32_t>& units, int32_t page_size) {
  std::vector<int32_t> tokens;
  for (int32_t unit : units) {
    for (int32_t i = 0; i < page_size; ++i) tokens.push_back(unit * 1000 + i);
  }
  return tokens;
}

inline std::vector<int32_t> Slice(std::span<const int32_t> s, size_t begin, size_t end) {
  return std::vector<int32_t>(s.begin() + begin, s.begin() + end);
}

// Admits a sequence the way the scheduler does: match tokens[:len-1], lock, take a request row,
// write the prefix, allocate and write slots up to `computed`. Returns false if out of memory.
inline bool Admit(PrefixCache& cache, TokenToKVPool& pool, ReqToTokenPool& req_pool,
                  std::span<const int32_t> tokens, size_t computed, SeqKvState* state) {
  const size_t max_prefix = MaxPrefixMatchLen(tokens.size());
  MatchResult match = cache.MatchPrefix(CacheKey{tokens.first(max_prefix)});
  const size_t prefix = match.matched_len();
  if (computed < prefix) computed = prefix;
  const int32_t last_loc = prefix > 0 ? match.device_indices.back() : -1;
  const ExtendSpec spec{prefix, computed, last_loc};
  Expected<std::vector<int32_t>> slots = pool.AllocExtend({&spec, 1});
  if (!slots.ok()) return false;
  Expected<int32_t> row = req_pool.Alloc();
  RADIX_CHECK(row.ok());
  cache.IncLockRef(match.last_node);
  state->req_pool_slot = *row;
  state->last_node = match.last_node;
  state->cache_protected_len = prefix;
  state->prefix_indices = match.device_indices;
  req_pool.Write(*row, 0, match.device_indices);
  req_pool.Write(*row, prefix, *slots);
  return true;
}

// Allocates and writes slots for positions [from, to) of a sequence that holds a row.
inline bool Extend(TokenToKVPool& pool, ReqToTokenPool& req_pool, const SeqKvState& state,
                   size_t from, size_t to) {
  const int32_t last_loc = from > 0 ? req_pool.Row(state.req_pool_slot)[from - 1] : -1;
  const ExtendSpec spec{from, to, last_loc};
  Expected<std::vector<int32_t>> slots = pool.AllocExtend({&spec, 1});
  if (!slots.ok()) return false;
  req_pool.Write(state.req_pool_slot, from, *slots);
  return true;
}

}  // namespace radixserve::kv::testing
