// KvCacheView: how the model sees the paged KV pool owned by src/kv. Per layer, one K and one V
// buffer of `dtype` elements laid out [num_slots, num_kv_heads, head_dim], contiguous per slot
// (int8: each head followed by its scale, kernels/kv_type.h). The model reads K/V of prefix slots
// and writes K/V of the slots given for new tokens (converting from f32, round to nearest even); it
// never allocates or frees slots.
#pragma once

#include <cstdint>
#include <vector>

#include "common/huge_pages.h"
#include "kernels/attention.h"

namespace radixserve::model {

struct KvCacheView {
  std::vector<kernels::KvBuffer> k;  // [num_layers]
  std::vector<kernels::KvBuffer> v;  // [num_layers]
  kernels::KvType dtype = kernels::KvType::kF32;
  int64_t num_slots = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
};

// Owning KV buffers in that layout, for tools and tests that run a model without src/kv.
class KvCacheBuffers {
 public:
  KvCacheBuffers(int64_t num_layers, int64_t num_slots, int64_t num_kv_heads, int64_t head_dim,
                 kernels::KvType dtype = kernels::KvType::kF32)
      : storage_(static_cast<size_t>(2 * num_layers * num_slots) *
                 kernels::KvRowBytes(dtype, num_kv_heads, head_dim)) {
    view_.dtype = dtype;
    view_.num_slots = num_slots;
    view_.num_kv_heads = num_kv_heads;
    view_.head_dim = head_dim;
    const size_t per_layer =
        static_cast<size_t>(num_slots) * kernels::KvRowBytes(dtype, num_kv_heads, head_dim);
    for (int64_t l = 0; l < num_layers; ++l) {
      view_.k.emplace_back(storage_.data() + (2 * l) * per_layer, dtype);
      view_.v.emplace_back(storage_.data() + (2 * l + 1) * per_layer, dtype);
    }
  }
  const KvCacheView& view() const { return view_; }

 private:
  LargeBuffer storage_;  // 2 MB and up on huge pages (common/huge_pages.h)
  KvCacheView view_;
};

}  // namespace radixserve::model
