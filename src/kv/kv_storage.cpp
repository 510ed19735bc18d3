#include "kv/kv_storage.h"

#include <sys/mman.h>

#include <cstring>

#include <string>

namespace radixserve::kv {

namespace {
constexpr size_t kBufferAlign = 4096;
// Buffers (one layer's K or V) from this size on are put on transparent huge pages.
constexpr size_t kHugePoolBufferBytes = size_t{32} << 20;
}  // namespace

size_t KvBytesPerToken(int32_t num_layers, int32_t kv_heads, int32_t head_dim, KvDtype dtype,
                       bool values_in_keys) {
  return static_cast<size_t>(num_layers) * (values_in_keys ? 1 : 2) *
         kernels::KvRowBytes(dtype, kv_heads, head_dim);
}

void KvStorage::Unmapper::operator()(std::byte* base) const {
  if (base != nullptr) munmap(base, bytes);
}

void KvStorage::ReleaseMemory() {
  if (base_ == nullptr || base_.get_deleter().bytes == 0) return;
  madvise(base_.get(), base_.get_deleter().bytes, MADV_DONTNEED);
}

Expected<KvStorage> KvStorage::Create(const KvStorageSpec& spec) {
  RADIX_CHECK(spec.num_layers >= 0 && spec.kv_heads >= 0 && spec.head_dim >= 0);
  for (const std::vector<float>* s : {&spec.scales.k, &spec.scales.v}) {
    RADIX_CHECK(s->empty() || s->size() == static_cast<size_t>(spec.num_layers));
  }
  const size_t row = kernels::KvRowBytes(spec.dtype, spec.kv_heads, spec.head_dim);
  const size_t stride = (row * spec.num_rows + kBufferAlign - 1) / kBufferAlign * kBufferAlign;
  const size_t total =
      stride * (spec.values_in_keys ? 1 : 2) * static_cast<size_t>(spec.num_layers);
  if (total == 0) {
    return KvStorage(spec, std::unique_ptr<std::byte, Unmapper>(nullptr, Unmapper{0}), stride);
  }
  void* mapped = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) {
    return Status(StatusCode::kResourceExhausted,
                  "cannot map " + std::to_string(total) + " bytes for the KV cache");
  }
  // Decode at depth streams each sequence's K and V rows: on 2 MB pages that is one TLB entry per
  // 2 MB and the hardware prefetchers are not stopped every 4 KB (the weights' reason too, see
  // common/huge_pages.h; 18 % more KV bytes per second at depth 8192 on the AMX Xeon). Pages are
  // still backed only when first written, but 2 MB at a time, so only where every layer's buffer
  // spans many of them (a small pool would be resident whole). A hint: without transparent huge
  // pages it changes nothing.
  if (stride >= kHugePoolBufferBytes) madvise(mapped, total, MADV_HUGEPAGE);
  return KvStorage(
      spec, std::unique_ptr<std::byte, Unmapper>(static_cast<std::byte*>(mapped), Unmapper{total}),
      stride);
}

KvStorage::KvStorage(const KvStorageSpec& spec, std::unique_ptr<std::byte, Unmapper> base,
                     size_t stride)
    : spec_(spec), base_(std::move(base)), buffer_stride_(stride) {}

size_t KvStorage::row_elements() const {
  return static_cast<size_t>(spec_.kv_heads) *
         static_cast<size_t>(kernels::KvHeadElements(spec_.dtype, spec_.head_dim));
}

size_t KvStorage::row_bytes() const { return row_elements() * KvDtypeSize(spec_.dtype); }

kernels::KvRowRuns KvStorage::Runs() const {
  return kernels::KvRowRunsOf(spec_.dtype, spec_.kv_heads, spec_.head_dim);
}

size_t KvStorage::row_values() const {
  return static_cast<size_t>(spec_.kv_heads) * static_cast<size_t>(spec_.head_dim);
}

const std::byte* KvStorage::buffer(int32_t layer, bool is_v) const {
  RADIX_CHECK(layer >= 0 && layer < spec_.num_layers);
  if (spec_.values_in_keys) return base_.get() + buffer_stride_ * static_cast<size_t>(layer);
  return base_.get() + buffer_stride_ * (2 * static_cast<size_t>(layer) + (is_v ? 1 : 0));
}

void* KvStorage::k_base(int32_t layer) { return const_cast<std::byte*>(buffer(layer, false)); }
void* KvStorage::v_base(int32_t layer) { return const_cast<std::byte*>(buffer(layer, true)); }

KvLayerView KvStorage::layer(int32_t layer) {
  return KvLayerView{k_base(layer),
                     v_base(layer),
                     spec_.dtype,
                     KvDtypeSize(spec_.dtype),
                     spec_.kv_heads,
                     spec_.head_dim,
                     row_elements(),
                     spec_.num_rows,
                     spec_.scales.k_at(layer),
                     spec_.values_in_keys ? spec_.scales.k_at(layer) : spec_.scales.v_at(layer)};
}

void KvStorage::StoreKv(int32_t layer, std::span<const int32_t> slots, const float* k,
                        const float* v) {
  auto* k_dst = static_cast<std::byte*>(k_base(layer));
  auto* v_dst = static_cast<std::byte*>(v_base(layer));
  const size_t n = row_values();
  const kernels::KvRowRuns runs = Runs();
  const auto run = static_cast<size_t>(runs.values);
  for (size_t i = 0; i < slots.size(); ++i) {
    const auto slot = static_cast<size_t>(slots[i]);
    RADIX_CHECK(slot < spec_.num_rows);
    for (size_t r = 0; r < static_cast<size_t>(runs.count); ++r) {
      const size_t at = slot * row_bytes() + r * runs.bytes;
      StoreRow(k + i * n + r * run, run, spec_.dtype, k_dst + at, spec_.scales.k_at(layer));
      if (!spec_.values_in_keys) {
        StoreRow(v + i * n + r * run, run, spec_.dtype, v_dst + at, spec_.scales.v_at(layer));
      }
    }
  }
}

void KvStorage::CopySlot(int32_t from, int32_t to) {
  RADIX_CHECK(from >= 0 && static_cast<size_t>(from) < spec_.num_rows);
  RADIX_CHECK(to >= 0 && static_cast<size_t>(to) < spec_.num_rows);
  const size_t bytes = row_bytes();
  for (int32_t layer = 0; layer < spec_.num_layers; ++layer) {
    for (const bool is_v : {false, true}) {
      if (is_v && spec_.values_in_keys) continue;
      auto* base = static_cast<std::byte*>(is_v ? v_base(layer) : k_base(layer));
      std::memcpy(base + static_cast<size_t>(to) * bytes, base + static_cast<size_t>(from) * bytes,
                  bytes);
    }
  }
}

void KvStorage::LoadKv(int32_t layer, int32_t slot, float* k_out, float* v_out) const {
  RADIX_CHECK(slot >= 0 && static_cast<size_t>(slot) < spec_.num_rows);
  const kernels::KvRowRuns runs = Runs();
  const auto run = static_cast<size_t>(runs.values);
  for (size_t r = 0; r < static_cast<size_t>(runs.count); ++r) {
    const size_t offset = static_cast<size_t>(slot) * row_bytes() + r * runs.bytes;
    LoadRow(buffer(layer, false) + offset, run, spec_.dtype, k_out + r * run,
            spec_.scales.k_at(layer));
    LoadRow(buffer(layer, true) + offset, run, spec_.dtype, v_out + r * run,
            spec_.values_in_keys ? spec_.scales.k_at(layer) : spec_.scales.v_at(layer));
  }
}

}  // namespace radixserve::kv
