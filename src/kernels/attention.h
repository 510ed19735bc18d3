// Attention over keys and values held in a paged KV pool, in blocks: a group of queries that share
// one KV head (GQA: the query heads of a group, for one or more tokens of a sequence) walks that
// head's keys in tiles of kKeyTile positions, loading each K/V row once for all of them, with an
// online softmax (running max and sum per query, rescaled once per tile), so no per-head buffer
// grows with the context.
//
// KV layout (shared with src/kv): per layer one K and one V buffer of `KvType` elements,
// [slots, kv_heads, head_dim], contiguous per slot. A sequence's key at position j lives in slot
// kv_slots[j]. FP8 buffers hold value / scale (one scale per buffer: per layer, K and V apart);
// int8 buffers hold per-token, per-head scales inside each row (kernels/kv_type.h); each tile of
// kKeyTile rows is dequantized into a small f32 tile as it is read, never the whole cache.
//
// Work is split into chunks of kKeyChunk key positions (AttendChunk) whose partial results are
// merged in chunk order (MergeChunks). Tiles and chunks are aligned to absolute key positions and
// every query's reduction runs over them in the same order whatever other queries share its block,
// so a query's output depends only on its own inputs, never on batch composition or thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>
#include <vector>

#include "common/check.h"
#include "kernels/kernel_table.h"
#include "kernels/kv_type.h"

namespace radixserve::kernels {

// One layer's K or V buffer with its element type. Converts from float* so callers holding a
// float32 cache need no change.
struct KvBuffer {
  void* data = nullptr;
  KvType type = KvType::kF32;
  // Dequantization factor of an fp8 buffer: stored code c means value decode(c) * scale. 1 for
  // the other types (they ignore it).
  float scale = 1.0f;

  KvBuffer() = default;
  KvBuffer(float* f32) : data(f32) {}  // NOLINT(google-explicit-constructor)
  KvBuffer(void* d, KvType t, float s = 1.0f) : data(d), type(t), scale(s) {}

  // Transitional, for model code that still hands a layer's cache around as float*: allowed for
  // f32 caches only, so a bf16/f16 pool can never be read as floats by mistake.
  operator float*() const {  // NOLINT(google-explicit-constructor)
    RADIX_CHECK_MSG(type == KvType::kF32,
                    "a bf16/f16/fp8 KV cache must reach PagedAttention as a kernels::KvBuffer");
    return static_cast<float*>(data);
  }
};

struct AttentionShape {
  int num_heads = 0;
  int num_kv_heads = 0;  // divides num_heads (GQA)
  int head_dim = 0;
  float scale = 1.0f;    // multiplies q.k
  float softcap = 0.0f;  // > 0: scores = softcap * tanh(scores / softcap)
};

inline constexpr int64_t kKeyTile = 64;
inline constexpr int64_t kKeyChunk = 256;  // a multiple of kKeyTile

// Per-instruction-set primitives of the blocked attention. Pure functions, thread-safe.
struct AttentionKernels {
  std::string_view name;
  // dst[i * d + c] = row(slots[i])[offset + c] as f32, row(s) = base + s * slot_stride elements;
  // fp8 elements are multiplied by `scale` (the other types ignore it); int8 codes by the f32
  // stored right after the head's d codes (offset and slot_stride count KvHeadElements).
  void (*gather)(const void* base, KvType type, float scale, const int32_t* slots, int64_t count,
                 int64_t slot_stride, int64_t offset, int64_t d, float* dst);
  // x[i] = exp(x[i] - max) for i < kKeyTile (exactly 0 where x[i] is -inf); returns the sum of
  // the results, always added in the same order.
  float (*exp_tile)(float* x, float max);
  // acc[q * d + c] = acc[q * d + c] * rescale[q]
  //                  + sum_{j < nk} p[q * kKeyTile + j] * v[j * ldv + c]:
  // the product by rescale[q] rounded on its own, then the keys added j ascending; a null rescale
  // starts every sum from zero instead (acc is only written). The online softmax's rescale of a
  // tile rides on the pass that reads and writes the sums anyway.
  void (*accumulate)(const float* p, int64_t nq, const float* v, int64_t ldv, int64_t nk, int64_t d,
                     const float* rescale, float* acc);
  // Converts `count` f32 values to `type` at dst; fp8 stores encode(src[i] * (1 / scale)); int8
  // stores one head: count codes round(src[i] / s), then s = max |src| / 127 (0 codes, s = 0 for
  // an all-zero head).
  void (*store)(const float* src, int64_t count, KvType type, float scale, void* dst);

  // Direct reads: a tile's scores and value sums read the cache rows in place, widening each in
  // registers (fp8 codes times `scale`, as gather), instead of from a gathered f32 copy, with the
  // same products and sums as a float GEMM and accumulate over gathered rows (so the same bits).
  // nullptr in a variant without them; AttendChunkHeads uses them where reads_direct(type, d)
  // holds and the chunk's slots lie in runs.
  bool (*reads_direct)(KvType type, int64_t d);
  // For `heads` KV heads side by side from `offset` (head h at offset + h * d), with queries
  // q + h * nq * d: s[(h * nq + i) * kKeyTile + j] = q_i . row(slots[j]) for i < nq, j < nk
  // (rows addressed as in gather), summed as FloatGemmKernels::gemm sums a row against a token;
  // entries j in [nk, kKeyTile) may be written too.
  // Both also fetch the same heads of the rows of slots ahead[0, ahead_count) into the cache (the
  // next tile's), spread over their work.
  void (*scores)(const float* q, int heads, int64_t nq, const void* base, KvType type, float scale,
                 const int32_t* slots, int64_t nk, int64_t slot_stride, int64_t offset, int64_t d,
                 const int32_t* ahead, int64_t ahead_count, float* s);
  // acc[h][i * d + c] = acc[h][i * d + c] * rescale[h * nq + i]
  //                     + sum_{j < nk} p[(h * nq + i) * kKeyTile + j] * row(slots[j])[c],
  // j ascending (from zero when rescale is null): the same products and sums as accumulate over
  // gathered rows.
  void (*accumulate_rows)(const float* p, int heads, int64_t nq, const void* base, KvType type,
                          float scale, const int32_t* slots, int64_t nk, int64_t slot_stride,
                          int64_t offset, int64_t d, const int32_t* ahead, int64_t ahead_count,
                          const float* rescale, float* const* acc);
  // x[i] *= scale for i < kKeyTile, returning the largest result: the scores' scaling and the
  // tile's maximum in one pass (scale > 0, so -inf entries stay -inf and never win). nullptr in
  // a variant without it (AttendChunkHeads then does both in scalar code, with the same results).
  float (*scale_max)(float* x, float scale);
};

// The factors of the queries from i on, for accumulate / accumulate_rows: null stays null (sums
// from zero).
inline const float* RescaleFrom(const float* rescale, int64_t i) {
  return rescale != nullptr ? rescale + i : nullptr;
}

const AttentionKernels& RefAttentionKernels();
const AttentionKernels* Avx2AttentionKernels();    // nullptr without AVX2+FMA+F16C
const AttentionKernels* Avx512AttentionKernels();  // nullptr without AVX-512 F/BW/VL+F16C
std::vector<const AttentionKernels*> AvailableAttentionKernels();
// The variant matching a KernelTable's instruction set.
const AttentionKernels& AttentionKernelsFor(const KernelTable& table);

// The queries of one block: nq rows of head_dim floats at q (row stride head_dim), all attending
// to KV head kv_head; query i sees key positions [first[i], last[i]].
struct QueryBlock {
  const float* q = nullptr;
  int64_t nq = 0;
  const int64_t* first = nullptr;
  const int64_t* last = nullptr;
  int kv_head = 0;
};

// Unnormalized partial attention of each query over key positions [key_begin, key_end) (tile
// aligned) clipped to its own range: m[i] = max score (-inf if it saw no key), l[i] = sum of
// exp(score - m[i]), acc[i * head_dim + c] = sum of exp(score - m[i]) * v[c].
void AttendChunk(const KernelTable& table, const AttentionShape& shape, const QueryBlock& block,
                 KvBuffer k_cache, KvBuffer v_cache, const int32_t* kv_slots, int64_t key_begin,
                 int64_t key_end, float* m, float* l, float* acc);

// The same for `heads` blocks of KV heads kv_head, kv_head + 1, ... over the same tokens (equal
// nq, first and last; blocks[h].kv_head == blocks[0].kv_head + h), partials of head h at m[h],
// l[h], acc[h]. Each tile's keys (then values) are gathered for several heads in one pass over
// the slots' rows - as many as keep the gathered floats within L1 (32 KB: two heads of 64) - which
// reads each row's bytes in longer runs than one head at a time; every head's results are
// bit-identical to AttendChunk's (the same products and sums, only the staging differs).
void AttendChunkHeads(const KernelTable& table, const AttentionShape& shape,
                      const QueryBlock* blocks, int heads, KvBuffer k_cache, KvBuffer v_cache,
                      const int32_t* kv_slots, int64_t key_begin, int64_t key_end, float* const* m,
                      float* const* l, float* const* acc);

// out[head_dim] = softmax-weighted sum from `count` partials of one query, merged in index order;
// partial c is (m[c * stride], l[c * stride], acc + c * acc_stride). Zero if no partial saw a key.
// A finite `sink` is an attention sink (gpt-oss): one more score in the softmax's denominator
// with no value behind it, so the weights of the real keys sum to less than 1.
void MergeChunks(const float* m, const float* l, int64_t stride, const float* acc,
                 int64_t acc_stride, int64_t count, int64_t head_dim, float* out,
                 float sink = -std::numeric_limits<float>::infinity());

}  // namespace radixserve::kernels
