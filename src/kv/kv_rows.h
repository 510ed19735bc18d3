// KvRows: the K/V rows of a token sequence taken out of a KV pool, to be put into another pool
// (prefill/decode disaggregation moves a prompt's rows from the prefill server to the decode
// server; the hierarchical cache stores blocks of them). Rows are laid out layer by layer, K rows
// then V rows of every token, each row in the pool's element type (KvStorage::row_bytes()).
//
// Thread affinity: GatherRows / ScatterRows / InsertRows touch the pool: engine thread only. A
// finished KvRows is immutable and may be shared across threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kv/kv_storage.h"
#include "kv/radix_cache.h"
#include "kv/token_to_kv_pool.h"

namespace radixserve::kv {

// What two pools must share for rows to move between them: geometry, element type and (fp8)
// scales. The fingerprint hashes all of it; the other fields make a mismatch readable.
struct KvRowsLayout {
  int32_t num_layers = 0;
  uint64_t row_bytes = 0;
  std::string dtype;
  uint64_t fingerprint = 0;

  bool operator==(const KvRowsLayout&) const = default;
  std::string Describe() const;
};

KvRowsLayout LayoutOf(const KvStorage& storage);

struct KvRows {
  KvRowsLayout layout;
  std::vector<int32_t> tokens;   // the tokens whose rows these are, from position 0
  std::vector<std::byte> bytes;  // layout.num_layers * 2 * tokens.size() * layout.row_bytes

  size_t ExpectedBytes() const {
    return static_cast<size_t>(layout.num_layers) * 2 * tokens.size() * layout.row_bytes;
  }
};

// Copies the rows of `slots` (every layer, K then V) to `out`, which holds
// num_layers * 2 * slots.size() * row_bytes bytes.
void GatherRows(const KvStorage& storage, std::span<const int32_t> slots, std::byte* out);
// The inverse for a payload of `total` tokens per buffer: its rows [first, first + slots.size())
// of each layer's K and V go into `slots`.
void ScatterRows(KvStorage& storage, const std::byte* in, size_t total, size_t first,
                 std::span<const int32_t> slots);

// What ExtendCachedPrefix did: `node` ends the whole key and is locked once for the caller
// (DecLockRef it when done), or is null when nothing was inserted; `matched` is the length the
// tree already held.
struct PrefixExtension {
  RadixNode* node = nullptr;
  size_t matched = 0;
};

// The step shared by InsertRows and the disk tier's loads: gives the part of `key` the radix tree
// lacks new slots (evicting as admission would), lets `fill(matched, slots)` write the rows of
// key positions [matched, key length) into them, and inserts them. A key the tree already holds
// whole returns its node locked, unchanged; a match shorter than `min_matched`, or a pool that
// cannot hold the rest, returns a null node with nothing changed. Engine thread only.
PrefixExtension ExtendCachedPrefix(
    RadixCache& cache, TokenToKVPool& pool, const CacheKey& key, size_t min_matched,
    const std::function<void(size_t matched, std::span<const int32_t> slots)>& fill);

// Puts the first `max_len` (page-aligned down) tokens of `rows` into the radix tree under
// `extra_key`: the part the tree lacks gets new slots (evicting as admission would) and its rows.
// Returns the node ending the inserted prefix, locked (DecLockRef it once the sequence that wants
// it is admitted or gone), or nullptr when nothing could be inserted (memory, nothing to add is
// not an error: the matched node is locked and returned then).
RadixNode* InsertRows(RadixCache& cache, TokenToKVPool& pool, const KvRows& rows,
                      std::string_view extra_key, size_t max_len);

}  // namespace radixserve::kv
