// Keys of the hierarchical cache's storage tier. A sequence is cut into blocks of block_tokens
// tokens from position 0; block i's key chains the key of block i - 1 with its tokens, so a key
// names the whole prefix up to the block's end (SGLang hashes pages the same way, with SHA-256).
// The chain starts from a seed that mixes the store's model tag with the cache namespace
// (extra_key), so namespaces and models never share keys. The model tag mixes everything that
// changes what K/V a token gets: the weights' identity, the KV dtype and the geometry.
//
// The hash is a stable 64-bit multiply-mix (the same on every build and machine: keys outlive the
// process). A stored block also records its tokens and its parent's key, and readers compare
// both, so serving a wrong block needs a collision of the chained parent keys.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace radixserve::kv {

// Stable 64-bit hash of bytes, continuing from `seed`.
uint64_t HashBytes(uint64_t seed, const void* data, size_t size);

inline uint64_t HashString(uint64_t seed, std::string_view text) {
  return HashBytes(seed, text.data(), text.size());
}

// The chain's start for a namespace.
uint64_t BlockChainSeed(uint64_t model_tag, std::string_view extra_key);

// Key of the block whose parent key is `parent` and whose tokens are `tokens`.
uint64_t BlockHash(uint64_t parent, std::span<const int32_t> tokens);

// Keys of the first tokens.size() / block_tokens blocks of `tokens`.
std::vector<uint64_t> BlockHashes(uint64_t seed, std::span<const int32_t> tokens,
                                  size_t block_tokens);

}  // namespace radixserve::kv
