#include "spec/kv_view.h"

namespace radixserve::spec {

model::KvCacheView KvViewOf(kv::KvStorage& storage) {
  model::KvCacheView view;
  const kv::KvStorageSpec& spec = storage.spec();
  for (int32_t l = 0; l < spec.num_layers; ++l) {
    kv::KvLayerView layer = storage.layer(l);
    view.k.emplace_back(layer.k, layer.dtype, layer.k_scale);
    view.v.emplace_back(layer.v, layer.dtype, layer.v_scale);
  }
  view.dtype = spec.dtype;
  view.num_slots = static_cast<int64_t>(spec.num_rows);
  view.num_kv_heads = spec.kv_heads;
  view.head_dim = spec.head_dim;
  return view;
}

}  // namespace radixserve::spec
