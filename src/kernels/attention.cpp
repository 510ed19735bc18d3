#include "kernels/attention.h"

#include <cmath>
#include <cstring>

#include "common/check.h"

namespace radixserve::kernels {

void AttendOneHead(const KernelTable& table, const AttentionShape& shape, const float* q,
                   int kv_head, const float* k_cache, const float* v_cache, const int32_t* kv_slots,
                   int64_t first, int64_t last, float* scores, float* out) {
  RADIX_CHECK(first <= last && first >= 0);
  const int64_t slot_stride = static_cast<int64_t>(shape.num_kv_heads) * shape.head_dim;
  const int64_t head_offset = static_cast<int64_t>(kv_head) * shape.head_dim;
  const int64_t count = last - first + 1;
  for (int64_t j = 0; j < count; ++j) {
    const float* k = k_cache + kv_slots[first + j] * slot_stride + head_offset;
    float s = table.dot(q, k, shape.head_dim) * shape.scale;
    if (shape.softcap > 0.0f) s = shape.softcap * std::tanh(s / shape.softcap);
    scores[j] = s;
  }
  table.softmax(scores, count);
  std::memset(out, 0, sizeof(float) * static_cast<size_t>(shape.head_dim));
  for (int64_t j = 0; j < count; ++j) {
    const float* v = v_cache + kv_slots[first + j] * slot_stride + head_offset;
    table.axpy(scores[j], v, out, shape.head_dim);
  }
}

}  // namespace radixserve::kernels
