#include "kernels/quant_matmul.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "common/check.h"
#include "kernels/bf16_panels.h"
#include "kernels/calibrate.h"
#include "kernels/float_matmul.h"
#include "kernels/half.h"
#include "kernels/ref/activation_quant.h"
#include "kernels/x86/amx.h"
#include "kernels/x86/quant_kernels.h"

namespace radixserve::kernels {
namespace {

const x86::QuantVariant* VariantFor(const KernelTable& table) {
  if (table.name == "avx512") {
    if (const x86::QuantVariant* v = x86::Avx512VnniQuantVariant()) return v;
    return x86::Avx2QuantVariant();
  }
  if (table.name == "avx2") return x86::Avx2QuantVariant();
  return nullptr;
}

// Quantizing costs about as much as a few weight rows per token; below this many elements a
// pool hand-off costs more than it saves.
constexpr int64_t kParallelQuantizeElements = 32 * 1024;

}  // namespace

bool QuantAmxEnabled() {
  static const bool enabled = [] {
    const char* forced = std::getenv("RADIX_QUANT_AMX");
    return x86::AmxInt8Usable() && (forced == nullptr || std::string_view(forced) != "0");
  }();
  return enabled;
}

std::string QuantAmxEnvironmentError() {
  const char* forced = std::getenv("RADIX_QUANT_AMX");
  if (forced == nullptr || *forced == '\0' || std::string_view(forced) == "0") return "";
  if (std::string_view(forced) != "1") {
    return std::string("RADIX_QUANT_AMX=") + forced + " is not 0 or 1";
  }
  if (!x86::AmxInt8Usable()) {
    return "RADIX_QUANT_AMX=1: this machine has no usable AMX-INT8 (the CPU lacks it or the OS "
           "does not grant the tile state)";
  }
  return "";
}

std::string_view QuantMatMulVariant(const KernelTable& table) {
  const x86::QuantVariant* v = VariantFor(table);
  return v == nullptr ? std::string_view() : v->name;
}

namespace {

// a.tiles from a.q (ref::QuantizedActivations): each 16-row group's runs of `tile_cols` columns
// as contiguous tiles.
void LayOutAmxTiles(ThreadPool* pool, int64_t tile_cols, ref::QuantizedActivations& a) {
  const int64_t groups = a.n / 16, runs = a.cols / tile_cols, tile = 16 * tile_cols;
  a.tile_cols = tile_cols;
  a.tiles.resize(static_cast<size_t>(groups * runs * tile));
  auto lay_out = [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      for (int64_t j = 0; j < runs; ++j) {
        int8_t* dst = a.tiles.data() + (g * runs + j) * tile;
        const int8_t* src = a.q.data() + 16 * g * a.cols + j * tile_cols;
        for (int64_t i = 0; i < 16; ++i) {
          std::memcpy(dst + i * tile_cols, src + i * a.cols, static_cast<size_t>(tile_cols));
        }
      }
    }
  };
  if (pool != nullptr && pool->size() > 1 && groups > 1) {
    pool->ParallelFor(groups, 1, lay_out);
  } else {
    lay_out(0, groups);
  }
}

// Sizes `activations` for x[n, w.cols] and quantizes them for `variant` (over the pool when
// there are enough; pool may be null).
void QuantizeFor(const x86::QuantVariant& variant, ThreadPool* pool, const float* x, int64_t n,
                 const WeightMatrix& w, ref::QuantizedActivations& activations) {
  ref::ResizeQuantizedActivations(w.format, n, w.cols, &activations);
  const int32_t offset = x86::FormatInfo(w.format, variant.signed_q8).offset;
  if (pool != nullptr && pool->size() > 1 && n * w.cols >= kParallelQuantizeElements) {
    pool->RunOnAll([&](int index, int count) {
      variant.quantize(w.format, offset, x, n * index / count, n * (index + 1) / count,
                       &activations);
    });
  } else if (n > 0) {
    variant.quantize(w.format, offset, x, 0, n, &activations);
  }
  activations.tiles.clear();
  if (variant.name == "avx512_vnni" && n >= kQuantAmxMinTokens && QuantAmxEnabled()) {
    // The K-quants multiply 64 columns (a quarter of a super-block) per tile product, the other
    // formats a sub-block of 32.
    LayOutAmxTiles(pool, SumsSuperBlocks(w.format) ? 64 : activations.sub, activations);
  }
}

// The variant's panels over w's rows.
int64_t PanelCount(const x86::QuantVariant& variant, const WeightMatrix& w) {
  return (w.rows + variant.panel_rows - 1) / variant.panel_rows;
}

// Quantizes x for `variant`, then calls run(activations, panel_begin, panel_end) over the
// panels of w, one contiguous range per pool thread.
template <class RunPanels>
void RunQuantized(const x86::QuantVariant& variant, ThreadPool* pool, const float* x, int64_t n,
                  const WeightMatrix& w, const RunPanels& run) {
  // Named through a plain reference: inside the pool's lambdas a thread_local name would
  // resolve to the worker's own (empty) instance.
  thread_local ref::QuantizedActivations per_caller;
  ref::QuantizedActivations& activations = per_caller;
  QuantizeFor(variant, pool, x, n, w, activations);
  const bool parallel = pool != nullptr && pool->size() > 1;
  const int64_t panels = PanelCount(variant, w);
  if (!parallel || panels < 2) {
    run(activations, 0, panels);
    return;
  }
  pool->RunOnAll([&](int index, int count) {
    const int64_t parts = std::min<int64_t>(count, panels);
    if (index < parts) run(activations, panels * index / parts, panels * (index + 1) / parts);
  });
}

}  // namespace

bool QuantMatMul(const KernelTable& table, ThreadPool* pool, const float* x, int64_t n,
                 const WeightMatrix& w, float* y) {
  if (!ref::QuantizesActivations(w.format)) return false;
  const x86::QuantVariant* variant = VariantFor(table);
  if (variant == nullptr) return false;
  if (n <= 0 || w.rows <= 0) return true;
  RunQuantized(*variant, pool, x, n, w,
               [&](const ref::QuantizedActivations& a, int64_t begin, int64_t end) {
                 variant->run(w, a, begin, end, y);
               });
  return true;
}

// PackedWeight::variant of BF16 matrices in kernels/bf16_panels.h form.
constexpr std::string_view kBf16PanelsVariant = "bf16_panels";
// PackedWeight::variant of F32 matrices in float_matmul.h's F32 panels.
constexpr std::string_view kF32PanelsVariant = "f32_panels";

// Whether Pack packs w into F32 panels (every table has a kernel for them).
bool PacksF32Panels(const WeightMatrix& w) { return w.format == WeightFormat::kF32 && w.rows > 0; }

PackedWeight Pack(const KernelTable& table, ThreadPool* pool, const WeightMatrix& w) {
  PackedWeight out{w, {}, {}};
  if (w.format == WeightFormat::kBF16 && Bf16PanelsFor(table.name) && w.rows > 0) {
    out.variant = kBf16PanelsVariant;
    out.panels.resize(static_cast<size_t>(Bf16PanelBytes(w)));
    PackBf16Panels(w, pool, out.panels.data());
    return out;
  }
  if (PacksF32Panels(w)) {
    out.variant = kF32PanelsVariant;
    out.panels.resize(static_cast<size_t>(F32PanelFloats(w.rows, w.cols)) * sizeof(float));
    PackF32Panels(static_cast<const float*>(w.data), w.row_bytes() / 4, w.rows, w.cols, false,
                  reinterpret_cast<float*>(out.panels.data()));
    return out;
  }
  const x86::QuantVariant* variant = VariantFor(table);
  if (variant == nullptr || variant->packed_bytes == nullptr || w.rows <= 0) return out;
  if (BlockElements(w.format) == 1) return out;  // float formats run through float_matmul
  const int64_t bytes = variant->packed_bytes(w);
  if (bytes == 0) return out;
  out.variant = variant->name;
  out.panels.resize(static_cast<size_t>(bytes));
  const int64_t panels = (w.rows + variant->panel_rows - 1) / variant->panel_rows;
  auto pack = [&](int64_t begin, int64_t end) { variant->pack(w, begin, end, out.panels.data()); };
  if (pool == nullptr) {
    pack(0, panels);
  } else {
    pool->ParallelFor(panels, 64, pack);
  }
  return out;
}

int64_t PackedBytes(const KernelTable& table, const WeightMatrix& w) {
  if (w.rows <= 0) return 0;
  if (w.format == WeightFormat::kBF16 && Bf16PanelsFor(table.name)) {
    return Bf16PanelBytes(w);
  }
  if (PacksF32Panels(w)) {
    return F32PanelFloats(w.rows, w.cols) * static_cast<int64_t>(sizeof(float));
  }
  const x86::QuantVariant* variant = VariantFor(table);
  if (variant == nullptr || variant->packed_bytes == nullptr) return 0;
  if (BlockElements(w.format) == 1) return 0;
  return variant->packed_bytes(w);
}

void MatMul(const KernelTable& table, ThreadPool* pool, const float* x, int64_t n,
            const PackedWeight& w, float* y, ActivationMode mode) {
  MatMulWithTiles(ActiveQuantTiles(), table, pool, x, n, w, y, mode);
}

void MatMulWithTiles(QuantTiles tiles, const KernelTable& table, ThreadPool* pool, const float* x,
                     int64_t n, const PackedWeight& w, float* y, ActivationMode mode) {
  if (w.variant == kBf16PanelsVariant && w.packed() && mode == ActivationMode::kGgmlRounded &&
      Bf16PanelsFor(table.name)) {
    Bf16PanelMatMulFor(table.name, pool, x, n, w.source, w.panels.data(), y);
    return;
  }
  if (w.variant == kF32PanelsVariant && w.packed()) {  // F32 weights ignore the mode
    F32PanelMatMul(FloatKernelsFor(table), pool, x, w.source.cols, n,
                   reinterpret_cast<const float*>(w.panels.data()), w.source.rows, w.source.cols, y,
                   w.source.rows);
    return;
  }
  const x86::QuantVariant* variant = VariantFor(table);
  if (mode != ActivationMode::kGgmlRounded || !w.packed() || variant == nullptr ||
      variant->name != w.variant) {
    // A model frees the source copy of some packed matrices (model/decoder_stack.cpp), and runs
    // them only as packed: one table, one activation mode per process.
    RADIX_CHECK_MSG(w.source.data != nullptr, "a packed matrix without source bytes ran unpacked");
    MatMul(table, pool, x, n, w.source, y, mode);
    return;
  }
  if (n <= 0) return;
  RunQuantized(*variant, pool, x, n, w.source,
               [&](const ref::QuantizedActivations& a, int64_t begin, int64_t end) {
                 variant->run_packed(w.source, w.panels.data(), a, begin, end, y, tiles);
               });
}

void GroupedMatMul(const KernelTable& table, ThreadPool* pool, std::span<const MatMulJob> jobs,
                   ActivationMode mode) {
  const x86::QuantVariant* variant = VariantFor(table);
  bool grouped = mode == ActivationMode::kGgmlRounded && variant != nullptr &&
                 variant->run_packed != nullptr && pool != nullptr && pool->size() > 1 &&
                 jobs.size() > 1;
  for (const MatMulJob& job : jobs) {
    grouped =
        grouped && job.w->packed() && job.w->variant == variant->name && job.n <= kGroupedMaxTokens;
  }
  if (!grouped) {
    for (const MatMulJob& job : jobs) MatMul(table, pool, job.x, job.n, *job.w, job.y, mode);
    return;
  }
  // Named through plain references: inside the pool's lambdas a thread_local name would resolve
  // to the worker's own (empty) instance.
  thread_local std::vector<ref::QuantizedActivations> per_caller;
  thread_local std::vector<size_t> owner_of_caller;
  thread_local std::vector<int64_t> first_of_caller;
  std::vector<ref::QuantizedActivations>& activations = per_caller;
  // owner[i]: the job whose quantized activations job i reads (a job reading the same rows as
  // the one before it for a matrix of the same format and width, as a MoE expert's up
  // projection after its gate, shares them).
  std::vector<size_t>& owner = owner_of_caller;
  // first[i]: the cost (below) of the panels before job i's in the whole group.
  std::vector<int64_t>& first = first_of_caller;
  if (activations.size() < jobs.size()) activations.resize(jobs.size());
  owner.resize(jobs.size());
  int64_t quantized = 0;  // elements to quantize
  for (size_t i = 0; i < jobs.size(); ++i) {
    const WeightMatrix& w = jobs[i].w->source;
    owner[i] = i;
    if (i > 0) {
      const MatMulJob& before = jobs[i - 1];
      const WeightMatrix& v = before.w->source;
      if (before.x == jobs[i].x && before.n == jobs[i].n && v.format == w.format &&
          v.cols == w.cols) {
        owner[i] = owner[i - 1];
      }
    }
    if (owner[i] == i) quantized += jobs[i].n * w.cols;
  }
  const auto quantize = [&](int64_t begin, int64_t end) {
    for (auto i = static_cast<size_t>(begin); i < static_cast<size_t>(end); ++i) {
      if (owner[i] == i) {
        QuantizeFor(*variant, nullptr, jobs[i].x, jobs[i].n, jobs[i].w->source, activations[i]);
      }
    }
  };
  if (quantized >= kParallelQuantizeElements) {
    pool->ParallelFor(static_cast<int64_t>(jobs.size()), 1, quantize);
  } else {
    quantize(0, static_cast<int64_t>(jobs.size()));
  }
  // A panel costs about as much as kPanelTokens more tokens would (reading and decoding its
  // weights), so a job's panels weigh n + kPanelTokens each, and each thread takes one contiguous
  // range of that cost (not of panels): the threads finish together although the experts' token
  // counts differ, and each streams its panels in order.
  constexpr int64_t kPanelTokens = 2;
  first.assign(jobs.size() + 1, 0);
  for (size_t i = 0; i < jobs.size(); ++i) {
    const int64_t panels = jobs[i].n > 0 ? PanelCount(*variant, jobs[i].w->source) : 0;
    first[i + 1] = first[i] + panels * (jobs[i].n + kPanelTokens);
  }
  const int64_t total = first.back();
  const QuantTiles tiles = ActiveQuantTiles();
  pool->RunOnAll([&](int index, int count) {
    const int64_t begin = total * index / count, end = total * (index + 1) / count;
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (end <= first[i] || begin >= first[i + 1]) continue;
      // Panel p of job i is in [begin, end) when its cost offset first[i] + p * cost is.
      const int64_t cost = jobs[i].n + kPanelTokens;
      const int64_t lo = (std::max<int64_t>(0, begin - first[i]) + cost - 1) / cost;
      const int64_t hi = (std::min(end, first[i + 1]) - first[i] + cost - 1) / cost;
      if (lo >= hi) continue;
      const PackedWeight& w = *jobs[i].w;
      variant->run_packed(w.source, w.panels.data(), activations[owner[i]], lo, hi, jobs[i].y,
                          tiles);
    }
  });
}

std::string_view QuantTilesName(QuantTiles tiles) {
  return tiles == QuantTiles::kCompact ? "compact" : "expand";
}

std::optional<QuantTiles> ParseQuantTiles(std::string_view name) {
  if (name == "compact") return QuantTiles::kCompact;
  if (name == "expand") return QuantTiles::kExpand;
  return std::nullopt;
}

std::optional<QuantTilesTiming> MeasureQuantTiles(const KernelTable& table) {
  const x86::QuantVariant* variant = VariantFor(table);
  if (variant == nullptr || variant->name != "avx512_vnni") return std::nullopt;
  // 128 panels of Q4_K over 2048 columns (2.4 MB: more than a core's L2 on the CPUs measured so
  // far, so the panels stream from L3 as a model's weights stream from memory) and 32 tokens:
  // the shape of a batched decode step's matrices, where the two tilings differ most. An
  // in-L2 problem hides what decoding per tile saves (fewer bytes in flight per tile) and its
  // result flipped between runs on Zen 5; this one chose the same in every run.
  constexpr int64_t kRowsN = 2048, kColsN = 2048, kTokens = 32;
  WeightMatrix w{WeightFormat::kQ4_K, kRowsN, kColsN, nullptr};
  const int64_t block_bytes = *StorageBytes(w.format, 256);
  std::vector<uint8_t> bytes(static_cast<size_t>(kRowsN * *StorageBytes(w.format, kColsN)));
  // The speed does not depend on the codes: a cheap hash fills them.
  for (size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  }
  for (size_t at = 0; at < bytes.size(); at += static_cast<size_t>(block_bytes)) {
    // Normal half-precision d and dmin (arbitrary bytes could make infinities or subnormals).
    const uint16_t scale = F32ToF16(0.01f);
    std::memcpy(bytes.data() + at, &scale, sizeof(scale));
    std::memcpy(bytes.data() + at + 2, &scale, sizeof(scale));
  }
  w.data = bytes.data();
  std::vector<uint8_t> panels(static_cast<size_t>(variant->packed_bytes(w)));
  const int64_t panel_count = PanelCount(*variant, w);
  variant->pack(w, 0, panel_count, panels.data());
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(kTokens * kColsN));
  for (float& v : x) v = dist(rng);
  ref::QuantizedActivations activations;
  QuantizeFor(*variant, nullptr, x.data(), kTokens, w, activations);
  // The tilings are what the VNNI tiles run (steps of fewer than kQuantAmxMinTokens tokens): AMX
  // groups lay out every panel whatever the tiling, and would make the two timings a coin toss.
  activations.tiles.clear();
  std::vector<float> y(static_cast<size_t>(kTokens * kRowsN));

  const auto run = [&](QuantTiles tiles) {
    variant->run_packed(w, panels.data(), activations, 0, panel_count, y.data(), tiles);
  };
  const auto [expand, compact] = BestOfAlternatingRounds([&] { run(QuantTiles::kExpand); },
                                                         [&] { run(QuantTiles::kCompact); });
  return QuantTilesTiming{expand, compact};
}

}  // namespace radixserve::kernels
