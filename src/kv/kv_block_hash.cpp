#include "kv/kv_block_hash.h"

#include <cstring>

namespace radixserve::kv {
namespace {

constexpr uint64_t kMulA = 0xa0761d6478bd642fULL;
constexpr uint64_t kMulB = 0xe7037ed1a0b428dbULL;
constexpr uint64_t kMulC = 0x8ebc6af09c88c6e3ULL;

// 64 x 64 -> 128-bit multiply, folded: the mixing step of wyhash-style hashes.
uint64_t Mix(uint64_t a, uint64_t b) {
  const unsigned __int128 product =
      static_cast<unsigned __int128>(a ^ kMulA) * static_cast<unsigned __int128>(b ^ kMulB);
  return static_cast<uint64_t>(product) ^ static_cast<uint64_t>(product >> 64);
}

}  // namespace

uint64_t HashBytes(uint64_t seed, const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint64_t h = Mix(seed, static_cast<uint64_t>(size) * kMulC);
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes + i, 8);  // little-endian hosts only (x86-64)
    h = Mix(h, word);
  }
  if (i < size) {
    uint64_t tail = 0;
    std::memcpy(&tail, bytes + i, size - i);
    h = Mix(h, tail ^ (static_cast<uint64_t>(size - i) << 56));
  }
  return Mix(h, kMulC);
}

uint64_t BlockChainSeed(uint64_t model_tag, std::string_view extra_key) {
  return HashString(HashString(model_tag, "radixserve-kv-chain"), extra_key);
}

uint64_t BlockHash(uint64_t parent, std::span<const int32_t> tokens) {
  return HashBytes(parent, tokens.data(), tokens.size_bytes());
}

std::vector<uint64_t> BlockHashes(uint64_t seed, std::span<const int32_t> tokens,
                                  size_t block_tokens) {
  std::vector<uint64_t> out;
  if (block_tokens == 0) return out;
  out.reserve(tokens.size() / block_tokens);
  uint64_t h = seed;
  for (size_t start = 0; start + block_tokens <= tokens.size(); start += block_tokens) {
    h = BlockHash(h, tokens.subspan(start, block_tokens));
    out.push_back(h);
  }
  return out;
}

}  // namespace radixserve::kv
