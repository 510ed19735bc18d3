// Micro-benchmark of the float GEMM (BF16 weights, llama.cpp-rounded activations) and of paged
// decode attention at SmolLM2-135M's shape. Prints the best of several runs per configuration (the
// GEMMs also their mean: run_timing.h); the machine is shared, so compare runs taken back to
// back, never across sessions.
//
//   float_kernels_bench [gemm|gemm-1b [THREADS [KERNEL]]|bf16 ROWSxCOLS [N [THREADS [KERNEL]]]|
//                        attention|attention-1b [f16|bf16|fp8] [DEPTH...]|attention-tile
//                        [dHEAD_SIZE] [NQ...]]   (head size 64 unless d128 etc.; gemm-1b: 2
//                        threads and every kernel unless given, e.g. `taskset -c 0
//                        float_kernels_bench gemm-1b 1 avx2` for a kernel A/B; bf16: one matrix
//                        of any shape for N tokens (1 unless given), e.g. 16384x8192 (268 MB)
//                        streams from memory at one token, with its weights' GB/s)
//   (default: all)
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/attention.h"
#include "kernels/bf16_panels.h"
#include "kernels/float_matmul.h"
#include "kernels/half.h"
#include "kernels/kernel_choice.h"
#include "kernels/kernel_table.h"
#include "kernels/quant_matmul.h"
#include "model/kv_cache_view.h"
#include "model/paged_attention.h"
#include "run_timing.h"

namespace radixserve {
namespace {

void BenchGemmShape(ThreadPool& pool, kernels::WeightFormat format, int64_t rows, int64_t cols,
                    std::initializer_list<int64_t> ns) {
  const kernels::FloatGemmKernels& k = kernels::FloatKernelsFor(kernels::ActiveKernels());
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const bool f32 = format == kernels::WeightFormat::kF32;
  std::vector<uint16_t> w16(f32 ? 0 : static_cast<size_t>(rows * cols));
  std::vector<float> w32(f32 ? static_cast<size_t>(rows * cols) : 0);
  for (auto& v : w16) v = kernels::F32ToBf16(dist(rng));
  for (auto& v : w32) v = dist(rng);
  const kernels::WeightMatrix m{format, rows, cols,
                                f32 ? static_cast<const void*>(w32.data()) : w16.data()};
  for (int64_t n : ns) {
    std::vector<float> x(static_cast<size_t>(n * cols)), y(static_cast<size_t>(n * rows));
    for (auto& v : x) v = dist(rng);
    const double flops = 2.0 * static_cast<double>(rows * cols * n);
    const int reps = static_cast<int>(std::clamp(2e9 / flops, 3.0, 2000.0));
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      const bench::RunSeconds t = bench::TimeRuns(reps, [&] {
        kernels::FloatMatMul(k, p, x.data(), n, m, y.data(), kernels::ActivationMode::kGgmlRounded);
      });
      const double s = t.best;
      std::printf(
          "gemm %s %s %6ldx%ld n=%3ld threads=%d: %9.1f us %6.1f GB/s %6.1f GFLOP/s (mean of "
          "%d: %6.1f)\n",
          std::string(k.name).c_str(), f32 ? "f32 " : "bf16", static_cast<long>(rows),
          static_cast<long>(cols), static_cast<long>(n), p ? p->size() : 1, s * 1e6,
          static_cast<double>(m.row_bytes() * rows) / s / 1e9, flops / s / 1e9, reps,
          flops / t.mean / 1e9);
    }
    if (!f32) continue;
    std::vector<float> panels(static_cast<size_t>(kernels::F32PanelFloats(rows, cols)));
    kernels::PackF32Panels(w32.data(), cols, rows, cols, false, panels.data());
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      const double s = bench::TimeRuns(reps, [&] {
                         kernels::F32PanelMatMul(k, p, x.data(), cols, n, panels.data(), rows, cols,
                                                 y.data(), rows);
                       }).best;
      std::printf(
          "gemm %s f32 panels %6ldx%ld n=%3ld threads=%d: %9.1f us %6.1f GB/s %6.1f "
          "GFLOP/s\n",
          std::string(k.name).c_str(), static_cast<long>(rows), static_cast<long>(cols),
          static_cast<long>(n), p ? p->size() : 1, s * 1e6,
          static_cast<double>(m.row_bytes() * rows) / s / 1e9, flops / s / 1e9);
    }
  }
}

void BenchGemm(ThreadPool& pool) {
  // SmolLM2-135M's projections and LM head (BF16 weights), then MiniLM-L6's (F32, encoder batches).
  for (const auto& shape : {std::pair<int64_t, int64_t>{576, 576}, {1536, 576}, {49152, 576}}) {
    BenchGemmShape(pool, kernels::WeightFormat::kBF16, shape.first, shape.second, {1, 32, 512});
  }
  for (const auto& shape : {std::pair<int64_t, int64_t>{384, 384}, {1536, 384}, {384, 1536}}) {
    BenchGemmShape(pool, kernels::WeightFormat::kF32, shape.first, shape.second, {1, 512});
  }
  // MiniLM's attention for one 512-token sequence and head: scores = Q K^T, then P V.
  for (const auto& shape : {std::pair<int64_t, int64_t>{512, 32}, {32, 512}}) {
    BenchGemmShape(pool, kernels::WeightFormat::kF32, shape.first, shape.second, {512});
  }
}

// The packed BF16 panels (what serving runs) at Llama-3.2-1B's projections, fused as the model
// fuses them (Q/K/V 3072 x 2048, O 2048 x 2048, gate/up 16384 x 2048, down 2048 x 8192), for one
// decode row, 32 decode rows and a 512-token prefill chunk: every AVX-512 product the CPU runs,
// the AVX2 panels, and each table's float GEMM over the unpacked rows (what the avx2 table ran
// before it had panels, and what the avx512 one runs without AVX512-BF16). `only`: just the run
// of that name (all when empty).
using Bf16Run = std::function<void(const float*, int64_t, const kernels::WeightMatrix&,
                                   const uint8_t*, float*)>;

// The BF16 products this CPU runs, by name (only the one named `only`, unless empty); prints why
// and returns none when there is nothing to run.
std::vector<std::pair<std::string, Bf16Run>> Bf16Runs(ThreadPool& pool, std::string_view only) {
  std::vector<std::pair<std::string, Bf16Run>> runs;
  if (kernels::Bf16PanelsSupported()) {
    std::vector<kernels::Bf16Product> products = {kernels::Bf16Product::kWidenFma};
    if (kernels::Bf16DotSupported()) products.push_back(kernels::Bf16Product::kDotBf16);
    if (kernels::Bf16AmxSupported()) products.push_back(kernels::Bf16Product::kAmxTile);
    for (const kernels::Bf16Product product : products) {
      runs.emplace_back(std::string(kernels::Bf16ProductName(product)),
                        [&pool, product](const float* x, int64_t n, const kernels::WeightMatrix& m,
                                         const uint8_t* panels, float* y) {
                          kernels::Bf16PanelMatMulWith(product, &pool, x, n, m, panels, y);
                        });
    }
  }
  if (kernels::Bf16PanelsFor("avx2")) {
    runs.emplace_back("avx2", [&pool](const float* x, int64_t n, const kernels::WeightMatrix& m,
                                      const uint8_t* panels, float* y) {
      kernels::Bf16PanelMatMulAvx2(&pool, x, n, m, panels, y);
    });
  }
  for (const kernels::KernelTable* table : {kernels::Avx2Kernels(), kernels::Avx512Kernels()}) {
    if (table == nullptr) continue;
    runs.emplace_back(std::string(table->name) + "_rows",
                      [&pool, table](const float* x, int64_t n, const kernels::WeightMatrix& m,
                                     const uint8_t*, float* y) {
                        kernels::MatMul(*table, &pool, x, n, m, y,
                                        kernels::ActivationMode::kGgmlRounded);
                      });
  }
  if (!only.empty()) {
    std::erase_if(runs, [only](const auto& run) { return run.first != only; });
  }
  if (runs.empty()) {
    if (only.empty()) {
      std::printf("no BF16 kernels but the reference on this CPU\n");
    } else {
      std::printf("no BF16 kernel %s on this CPU\n", std::string(only).c_str());
    }
  }
  return runs;
}

// One BF16 matrix of any shape (one beyond the caches included) for n tokens: GFLOP/s and the
// bytes of the BF16 weights read per second, best and mean of `reps` runs, for each product.
void BenchBf16Shape(ThreadPool& pool, int64_t rows, int64_t cols, int64_t n,
                    std::string_view only) {
  const auto runs = Bf16Runs(pool, only);
  if (runs.empty()) return;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<uint16_t> w16(static_cast<size_t>(rows * cols));
  for (auto& v : w16) v = kernels::F32ToBf16(dist(rng));
  const kernels::WeightMatrix m{kernels::WeightFormat::kBF16, rows, cols, w16.data()};
  std::vector<uint8_t> panels(static_cast<size_t>(kernels::Bf16PanelBytes(m)));
  kernels::PackBf16Panels(m, &pool, panels.data());
  std::vector<float> x(static_cast<size_t>(n * cols)), y(static_cast<size_t>(n * rows));
  for (auto& v : x) v = dist(rng);
  const double flops = 2.0 * static_cast<double>(rows * cols * n);
  const double bytes = 2.0 * static_cast<double>(rows * cols);
  const int reps = static_cast<int>(std::clamp(4e9 / bytes, 5.0, 200.0));
  for (const auto& [name, run] : runs) {
    const bench::RunSeconds t =
        bench::TimeRuns(reps, [&] { run(x.data(), n, m, panels.data(), y.data()); });
    std::printf(
        "bf16 %-9s %6ldx%ld n=%3ld threads=%d: %9.1f us %6.1f GFLOP/s %6.1f GB/s (mean of %d: "
        "%6.1f GFLOP/s %6.1f GB/s)\n",
        name.c_str(), static_cast<long>(rows), static_cast<long>(cols), static_cast<long>(n),
        pool.size(), t.best * 1e6, flops / t.best / 1e9, bytes / t.best / 1e9, reps,
        flops / t.mean / 1e9, bytes / t.mean / 1e9);
  }
}

void BenchBf16Panels1b(ThreadPool& pool, std::string_view only) {
  const auto runs = Bf16Runs(pool, only);
  if (runs.empty()) return;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int64_t ns[] = {1, 32, 512};
  std::vector<std::array<double, 3>> total(runs.size());  // [run][n index] seconds per layer
  for (const auto& [rows, cols] :
       {std::pair<int64_t, int64_t>{3072, 2048}, {2048, 2048}, {16384, 2048}, {2048, 8192}}) {
    std::vector<uint16_t> w16(static_cast<size_t>(rows * cols));
    for (auto& v : w16) v = kernels::F32ToBf16(dist(rng));
    const kernels::WeightMatrix m{kernels::WeightFormat::kBF16, rows, cols, w16.data()};
    std::vector<uint8_t> panels(static_cast<size_t>(kernels::Bf16PanelBytes(m)));
    kernels::PackBf16Panels(m, &pool, panels.data());
    for (size_t ni = 0; ni < 3; ++ni) {
      const int64_t n = ns[ni];
      std::vector<float> x(static_cast<size_t>(n * cols)), y(static_cast<size_t>(n * rows));
      for (auto& v : x) v = dist(rng);
      const double flops = 2.0 * static_cast<double>(rows * cols * n);
      for (size_t ri = 0; ri < runs.size(); ++ri) {
        const bench::RunSeconds t =
            bench::TimeRuns(5, [&] { runs[ri].second(x.data(), n, m, panels.data(), y.data()); });
        const double s = t.best;
        total[ri][ni] += s;
        std::printf(
            "gemm-1b bf16 %-9s %5ldx%ld n=%3ld threads=%d: %9.1f us %6.1f GFLOP/s (mean of 5: "
            "%6.1f)\n",
            runs[ri].first.c_str(), static_cast<long>(rows), static_cast<long>(cols),
            static_cast<long>(n), pool.size(), s * 1e6, flops / s / 1e9, flops / t.mean / 1e9);
      }
    }
  }
  const double layer = 2.0 * (3072.0 * 2048 + 2048.0 * 2048 + 16384.0 * 2048 + 2048.0 * 8192);
  for (size_t ni = 0; ni < 3; ++ni) {
    std::printf("gemm-1b layer n=%3ld:", static_cast<long>(ns[ni]));
    for (size_t ri = 0; ri < runs.size(); ++ri) {
      std::printf(" %s %6.1f GFLOP/s", runs[ri].first.c_str(),
                  layer * static_cast<double>(ns[ni]) / total[ri][ni] / 1e9);
    }
    std::printf("\n");
  }
}

// One decode token per layer for one sequence, 30 layers, KV slots in shuffled order.
// One decode token's attention over `layers` layers at each depth. Slots shuffled (a pool after
// much churn) or in order (a fresh pool: what a single long sequence usually holds).
void BenchAttention(ThreadPool& pool, const kernels::AttentionShape& shape, int64_t layers,
                    const std::vector<kernels::KvType>& types, const std::vector<int64_t>& depths,
                    bool shuffled) {
  const kernels::KernelTable& table = kernels::ActiveKernels();
  const int64_t width = int64_t{shape.num_kv_heads} * shape.head_dim;
  const int64_t q_width = int64_t{shape.num_heads} * shape.head_dim;
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (kernels::KvType type : types) {
    for (int64_t depth : depths) {
      const int64_t slots_total = depth + 2;
      model::KvCacheBuffers kv(layers, slots_total, shape.num_kv_heads, shape.head_dim, type);
      const kernels::AttentionKernels& ak = kernels::AttentionKernelsFor(table);
      std::vector<float> row(static_cast<size_t>(width));
      const size_t row_bytes = static_cast<size_t>(width) * kernels::KvTypeSize(type);
      for (int64_t l = 0; l < layers; ++l) {
        for (int64_t s = 0; s < slots_total; ++s) {
          for (const kernels::KvBuffer& buf :
               {kv.view().k[static_cast<size_t>(l)], kv.view().v[static_cast<size_t>(l)]}) {
            for (float& x : row) x = dist(rng);
            ak.store(row.data(), width, type, 1.0f,
                     static_cast<uint8_t*>(buf.data) + s * row_bytes);
          }
        }
      }
      std::vector<int32_t> slots(static_cast<size_t>(depth + 1));
      std::iota(slots.begin(), slots.end(), 1);
      if (shuffled) std::shuffle(slots.begin(), slots.end(), rng);
      model::ForwardBatch batch;
      batch.token_ids = {0};
      batch.positions = {depth};
      batch.sequences.push_back({depth, 1, std::span<const int32_t>(slots)});
      const model::BatchLayout layout = model::BatchLayout::Build(batch, slots_total);
      std::vector<float> q(static_cast<size_t>(q_width)), k(static_cast<size_t>(width)),
          v(static_cast<size_t>(width)), out(static_cast<size_t>(q_width));
      for (auto* vec : {&q, &k, &v})
        for (float& x : *vec) x = dist(rng);
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        const double s =
            bench::TimeRuns(20, [&] {
              for (int64_t l = 0; l < layers; ++l) {
                model::PagedAttention(table, p, batch, layout, shape, 0, q.data(), k.data(),
                                      v.data(), kv.view().k[static_cast<size_t>(l)],
                                      kv.view().v[static_cast<size_t>(l)], out.data());
              }
            }).best;
        const double bytes = 2.0 * static_cast<double>((depth + 1) * row_bytes * layers);
        std::printf(
            "attention %s heads=%d/%d kv=%s depth=%4ld slots=%s threads=%d: %8.1f us per token "
            "(%ld layers), %5.1f GB/s of KV\n",
            std::string(ak.name).c_str(), shape.num_heads, shape.num_kv_heads,
            type == kernels::KvType::kF32    ? "f32 "
            : type == kernels::KvType::kBF16 ? "bf16"
            : type == kernels::KvType::kF16  ? "f16 "
                                             : "fp8 ",
            static_cast<long>(depth), shuffled ? "shuffled" : "in order", p ? p->size() : 1,
            s * 1e6, static_cast<long>(layers), bytes / s / 1e9);
      }
    }
  }
}

// The blocked attention's own cost, without memory: one thread, 8 KV heads of `dim` (64: the 1B
// shape's; 128: Qwen2.5-3B's and the 8B's) at 512 keys in order (1 MB of f16 K and V at 64, in
// L2/L3), each query count NQ (4: decode with four
// query heads per KV head; more: prefill). Times AttentionKernels::scores and accumulate_rows
// over the tiles, and AttendChunkHeads over the chunks (the two plus the online softmax), per key
// of one layer (all 8 heads).
void BenchAttentionTile(int64_t dim, const std::vector<int64_t>& query_counts) {
  const kernels::KernelTable& table = kernels::ActiveKernels();
  const kernels::AttentionKernels& ak = kernels::AttentionKernelsFor(table);
  constexpr int kHeads = 8;
  constexpr int64_t kDepth = 512;
  const int64_t stride = kHeads * dim;
  const kernels::KvType type = kernels::KvType::kF16;
  if (ak.reads_direct == nullptr || !ak.reads_direct(type, dim)) {
    std::printf("attention-tile: the %s kernels do not read rows in place\n",
                std::string(ak.name).c_str());
    return;
  }
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint16_t> k(static_cast<size_t>(kDepth * stride)), v(k.size());
  std::vector<float> row(static_cast<size_t>(stride));
  for (int64_t s = 0; s < kDepth; ++s) {
    for (std::vector<uint16_t>* cache : {&k, &v}) {
      for (float& x : row) x = dist(rng);
      ak.store(row.data(), stride, type, 1.0f, cache->data() + s * stride);
    }
  }
  std::vector<int32_t> slots(static_cast<size_t>(kDepth));
  std::iota(slots.begin(), slots.end(), 0);
  const kernels::AttentionShape shape{kHeads * 4, kHeads, static_cast<int>(dim), 0.125f, 0.0f};
  for (int64_t nq : query_counts) {
    std::vector<float> q(static_cast<size_t>(kHeads * nq * dim));
    std::vector<float> scores(static_cast<size_t>(kHeads * nq * kernels::kKeyTile));
    std::vector<float> acc(q.size()), m(static_cast<size_t>(kHeads * nq)), l(m.size());
    for (float& x : q) x = dist(rng);
    for (float& x : scores) x = 0.01f * dist(rng);
    std::vector<int64_t> first(static_cast<size_t>(nq), 0), last(first.size(), kDepth - 1);
    std::vector<kernels::QueryBlock> blocks;
    std::vector<float*> ms, ls, accs;
    // The value pass of a tile after the first: each query's sums rescaled as they are loaded.
    const std::vector<float> rescale(static_cast<size_t>(kHeads * nq), 1.0f);
    for (int h = 0; h < kHeads; ++h) {
      blocks.push_back({q.data() + h * nq * dim, nq, first.data(), last.data(), h});
      ms.push_back(m.data() + h * nq);
      ls.push_back(l.data() + h * nq);
      accs.push_back(acc.data() + h * nq * dim);
    }
    auto tiles = [&](bool values) {
      for (int64_t j0 = 0; j0 < kDepth; j0 += kernels::kKeyTile) {
        const int64_t ahead =
            std::max<int64_t>(0, std::min(kernels::kKeyTile, kDepth - j0 - kernels::kKeyTile));
        const int32_t* next = slots.data() + std::min(j0 + kernels::kKeyTile, kDepth - 1);
        if (values) {
          ak.accumulate_rows(scores.data(), kHeads, nq, v.data(), type, 1.0f, slots.data() + j0,
                             kernels::kKeyTile, stride, 0, dim, next, ahead, rescale.data(),
                             accs.data());
        } else {
          ak.scores(q.data(), kHeads, nq, k.data(), type, 1.0f, slots.data() + j0,
                    kernels::kKeyTile, stride, 0, dim, next, ahead, scores.data());
        }
      }
    };
    const double ns = 1e9 / kDepth;
    const double s_scores = bench::TimeRuns(200, [&] { tiles(false); }).best * ns;
    const double s_values = bench::TimeRuns(200, [&] { tiles(true); }).best * ns;
    const double s_chunks =
        bench::TimeRuns(200,
                        [&] {
                          for (int64_t c = 0; c < kDepth; c += kernels::kKeyChunk) {
                            kernels::AttendChunkHeads(table, shape, blocks.data(), kHeads,
                                                      kernels::KvBuffer(k.data(), type),
                                                      kernels::KvBuffer(v.data(), type),
                                                      slots.data(), c, c + kernels::kKeyChunk,
                                                      ms.data(), ls.data(), accs.data());
                          }
                        })
            .best *
        ns;
    // Multiply-adds per key: each of the heads' nq queries against the key's 64 values, twice.
    const double macs = 2.0 * kHeads * static_cast<double>(nq) * dim;
    std::printf(
        "attention-tile %s f16 heads=%d d=%ld nq=%3ld: ns per key of a layer: scores %6.1f, "
        "values %6.1f, chunk (with softmax) %6.1f = %5.1f G multiply-adds/s\n",
        std::string(ak.name).c_str(), kHeads, static_cast<long>(dim), static_cast<long>(nq),
        s_scores, s_values, s_chunks, macs / s_chunks);
  }
}

}  // namespace
}  // namespace radixserve

int main(int argc, char** argv) {
  const bool all = argc < 2;
  const bool gemm_1b = !all && std::strcmp(argv[1], "gemm-1b") == 0;
  if (!all && std::strcmp(argv[1], "bf16") == 0) {
    long long rows = 0, cols = 0;
    if (argc < 3 || std::sscanf(argv[2], "%lldx%lld", &rows, &cols) != 2 || rows <= 0 ||
        cols <= 0) {
      std::fprintf(stderr, "float_kernels_bench: bf16 needs a shape ROWSxCOLS\n");
      return 2;
    }
    const int64_t n = argc > 3 ? std::max(1, std::atoi(argv[3])) : 1;
    radixserve::ThreadPool pool(argc > 4 ? std::max(1, std::atoi(argv[4])) : 2);
    radixserve::BenchBf16Shape(pool, rows, cols, n, argc > 5 ? argv[5] : "");
    return 0;
  }
  radixserve::ThreadPool pool(gemm_1b && argc > 2 ? std::max(1, std::atoi(argv[2])) : 2);
  if (all || std::strcmp(argv[1], "gemm") == 0) radixserve::BenchGemm(pool);
  if (all || gemm_1b) radixserve::BenchBf16Panels1b(pool, gemm_1b && argc > 3 ? argv[3] : "");
  using radixserve::kernels::KvType;
  if (all || std::strcmp(argv[1], "attention") == 0) {
    // SmolLM2-135M's attention (9 / 3 heads, 30 layers).
    radixserve::BenchAttention(pool, {9, 3, 64, 0.125f, 0.0f}, 30,
                               {KvType::kF32, KvType::kBF16, KvType::kFp8E4M3}, {128, 2048},
                               /*shuffled=*/true);
  }
  if (all || std::strcmp(argv[1], "attention-1b") == 0) {
    // Llama-3.2-1B's (32 / 8 heads, 16 layers) at the depths of issue 18's targets, or at the
    // type and depths given: attention-1b [f16|bf16|fp8] [DEPTH...].
    std::vector<KvType> types{KvType::kF16, KvType::kBF16};
    std::vector<int64_t> depths{256, 2048, 8192};
    int arg = 2;
    if (argc > arg && std::strcmp(argv[arg], "f16") == 0) types = {KvType::kF16}, ++arg;
    if (argc > arg && std::strcmp(argv[arg], "bf16") == 0) types = {KvType::kBF16}, ++arg;
    if (argc > arg && std::strcmp(argv[arg], "fp8") == 0) types = {KvType::kFp8E4M3}, ++arg;
    if (argc > arg) depths.clear();
    for (; arg < argc; ++arg) depths.push_back(std::atol(argv[arg]));
    radixserve::BenchAttention(pool, {32, 8, 64, 0.125f, 0.0f}, 16, types, depths,
                               /*shuffled=*/false);
  }
  if (all || std::strcmp(argv[1], "attention-tile") == 0) {
    int arg = 2;
    int64_t dim = 64;
    if (argc > arg && argv[arg][0] == 'd') dim = std::atol(argv[arg++] + 1);
    std::vector<int64_t> query_counts{4, 64};
    if (argc > arg) query_counts.clear();
    for (; arg < argc; ++arg) query_counts.push_back(std::atol(argv[arg]));
    radixserve::BenchAttentionTile(dim, query_counts);
  }
  return 0;
}
