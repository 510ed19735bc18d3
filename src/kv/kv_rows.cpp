#include "kv/kv_rows.h"

#include <cstring>

#include <fmt/format.h>

#include "common/check.h"
#include "kv/kv_block_hash.h"
#include "kv/kv_dtype.h"

namespace radixserve::kv {

std::string KvRowsLayout::Describe() const {
  return fmt::format("{} layers, {} bytes per row, {}", num_layers, row_bytes, dtype);
}

KvRowsLayout LayoutOf(const KvStorage& storage) {
  const KvStorageSpec& spec = storage.spec();
  KvRowsLayout layout;
  layout.num_layers = spec.num_layers;
  layout.row_bytes = storage.row_bytes();
  layout.dtype = std::string(KvDtypeName(spec.dtype));
  uint64_t hash = HashString(
      0, fmt::format("{}|{}|{}|{}", spec.num_layers, spec.kv_heads, spec.head_dim, layout.dtype));
  for (const std::vector<float>* scales : {&spec.scales.k, &spec.scales.v}) {
    hash = HashBytes(hash, scales->data(), scales->size() * sizeof(float));
  }
  layout.fingerprint = hash;
  return layout;
}

void GatherRows(const KvStorage& storage, std::span<const int32_t> slots, std::byte* out) {
  const size_t row = storage.row_bytes();
  for (int32_t layer = 0; layer < storage.spec().num_layers; ++layer) {
    for (const void* base : {storage.k_base(layer), storage.v_base(layer)}) {
      const auto* bytes = static_cast<const std::byte*>(base);
      for (const int32_t slot : slots) {
        std::memcpy(out, bytes + static_cast<size_t>(slot) * row, row);
        out += row;
      }
    }
  }
}

void ScatterRows(KvStorage& storage, const std::byte* in, size_t total, size_t first,
                 std::span<const int32_t> slots) {
  RADIX_CHECK(first + slots.size() <= total);
  const size_t row = storage.row_bytes();
  for (int32_t layer = 0; layer < storage.spec().num_layers; ++layer) {
    for (void* base : {storage.k_base(layer), storage.v_base(layer)}) {
      auto* bytes = static_cast<std::byte*>(base);
      const std::byte* src = in + first * row;
      for (const int32_t slot : slots) {
        std::memcpy(bytes + static_cast<size_t>(slot) * row, src, row);
        src += row;
      }
      in += total * row;
    }
  }
}

PrefixExtension ExtendCachedPrefix(
    RadixCache& cache, TokenToKVPool& pool, const CacheKey& key, size_t min_matched,
    const std::function<void(size_t matched, std::span<const int32_t> slots)>& fill) {
  MatchResult match = cache.MatchPrefix(key);
  const size_t matched = match.matched_len();
  const size_t end = key.tokens.size();
  if (matched >= end) {
    cache.IncLockRef(match.last_node);
    return {match.last_node, matched};
  }
  if (matched < min_matched) return {nullptr, matched};
  const size_t need = end - matched;
  cache.IncLockRef(match.last_node);  // keeps the matched part through the eviction below
  if (pool.available_size() < need) cache.Evict(need - pool.available_size());
  Expected<std::vector<int32_t>> slots = pool.Alloc(need);
  if (!slots.ok()) {
    cache.DecLockRef(match.last_node);
    return {nullptr, matched};
  }
  fill(matched, *slots);
  std::vector<int32_t> value = std::move(match.device_indices);
  value.insert(value.end(), slots->begin(), slots->end());
  const size_t already = cache.Insert(key, value);
  RADIX_CHECK_MSG(already == matched, "the radix tree changed under a KV insert");
  MatchResult inserted = cache.MatchPrefix(key);
  RADIX_CHECK(inserted.matched_len() == end);
  cache.IncLockRef(inserted.last_node);
  cache.DecLockRef(match.last_node);
  return {inserted.last_node, matched};
}

RadixNode* InsertRows(RadixCache& cache, TokenToKVPool& pool, const KvRows& rows,
                      std::string_view extra_key, size_t max_len) {
  RADIX_CHECK(rows.bytes.size() == rows.ExpectedBytes());
  const auto page = static_cast<size_t>(cache.page_size());
  const size_t end = std::min(max_len, rows.tokens.size()) / page * page;
  const CacheKey key{std::span(rows.tokens).first(end), extra_key};
  return ExtendCachedPrefix(cache, pool, key, 0,
                            [&](size_t matched, std::span<const int32_t> slots) {
                              ScatterRows(pool.storage(), rows.bytes.data(), rows.tokens.size(),
                                          matched, slots);
                            })
      .node;
}

}  // namespace radixserve::kv
