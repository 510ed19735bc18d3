// KvStorage: the per-layer K and V buffers of one KV pool. Each buffer is `num_rows` rows of
// [kv_heads, head_dim] elements in the KV dtype, contiguous per row (slot), so the K row of slot s
// in layer l starts at k_base(l) + s * row_bytes(). Row 0 (and, with pages, all of page 0) is the
// padding target SGLang reserves: the model may write padded tokens there.
//
// Memory comes from one anonymous mmap: zero-filled and committed lazily by the kernel, so an idle
// server with a large pool does not hold that much resident memory.
//
// Thread affinity: the engine thread owns the object; the model reads and writes rows through the
// raw pointers during a forward pass that the engine thread waits for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "common/status.h"
#include "kv/kv_dtype.h"

namespace radixserve::kv {

struct KvStorageSpec {
  int32_t num_layers = 0;
  int32_t kv_heads = 0;
  int32_t head_dim = 0;
  KvDtype dtype = KvDtype::kF32;
  size_t num_rows = 0;  // slots including the reserved padding rows
  KvScales scales;      // fp8 only; empty or num_layers entries each
  // The model's values are a prefix of its keys (MLA): one buffer per layer, V aliases K (and
  // its fp8 scale).
  bool values_in_keys = false;
};

// What the model needs to address one layer's cache.
struct KvLayerView {
  void* k = nullptr;
  void* v = nullptr;
  KvDtype dtype = KvDtype::kF32;
  size_t element_size = 4;
  int32_t kv_heads = 0;
  int32_t head_dim = 0;
  // The stride between slots, in elements: kv_heads * head_dim (int8: kv_heads * (head_dim + 4),
  // each head followed by its scale).
  size_t row_elements = 0;
  size_t num_rows = 0;
  float k_scale = 1.0f;  // fp8 dequantization factors (KvScales)
  float v_scale = 1.0f;
};

// Bytes one token occupies across all layers, K and V: layers * 2 * kv_heads * head_dim * size
// (K alone with values_in_keys).
size_t KvBytesPerToken(int32_t num_layers, int32_t kv_heads, int32_t head_dim, KvDtype dtype,
                       bool values_in_keys = false);

class KvStorage {
 public:
  // Maps the buffers. kResourceExhausted if the mapping fails. A spec with zero layers is valid
  // (no memory; useful for allocator-only tests).
  static Expected<KvStorage> Create(const KvStorageSpec& spec);

  KvStorage(KvStorage&&) noexcept = default;
  KvStorage& operator=(KvStorage&&) noexcept = default;

  const KvStorageSpec& spec() const { return spec_; }
  size_t row_elements() const;  // KvLayerView::row_elements
  size_t row_bytes() const;
  size_t row_values() const;  // kv_heads * head_dim: the f32 values one row stores
  // Bytes of all K buffers (equal to all V buffers, or the same bytes with values_in_keys).
  size_t k_bytes() const { return row_bytes() * spec_.num_rows * spec_.num_layers; }

  void* k_base(int32_t layer);
  void* v_base(int32_t layer);
  const void* k_base(int32_t layer) const { return buffer(layer, false); }
  const void* v_base(int32_t layer) const { return buffer(layer, true); }
  KvLayerView layer(int32_t layer);

  // Writes f32 rows k[i], v[i] (each row_values() floats, rows contiguous) into slots[i] of
  // `layer`, converting to the KV dtype.
  void StoreKv(int32_t layer, std::span<const int32_t> slots, const float* k, const float* v);
  // Reads one slot of `layer` back as f32 (row_values() floats each).
  void LoadKv(int32_t layer, int32_t slot, float* k_out, float* v_out) const;
  // Copies slot `from`'s K and V rows over slot `to`'s, in every layer, as stored.
  void CopySlot(int32_t from, int32_t to);

  // Gives every buffer page back to the OS (madvise MADV_DONTNEED: the pages read as zeros and
  // are committed again on the next write). Call only when no slot holds live data (a flushed
  // pool): the contents are lost.
  void ReleaseMemory();

 private:
  // A row as StoreRow / LoadRow convert it (kernels/kv_type.h).
  kernels::KvRowRuns Runs() const;
  struct Unmapper {
    size_t bytes;
    void operator()(std::byte* base) const;
  };

  KvStorage(const KvStorageSpec& spec, std::unique_ptr<std::byte, Unmapper> base, size_t stride);
  const std::byte* buffer(int32_t layer, bool is_v) const;

  KvStorageSpec spec_;
  std::unique_ptr<std::byte, Unmapper> base_;
  size_t buffer_stride_ = 0;  // bytes between consecutive buffers (page-rounded)
};

}  // namespace radixserve::kv
