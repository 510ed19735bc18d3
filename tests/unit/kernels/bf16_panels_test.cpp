// The packed BF16 matmuls (kernels/bf16_panels.h: the AVX-512 products and the AVX2 one) against a
// double-precision product of the same bf16-rounded activations and bf16 weights, on odd shapes,
// and widen_fma bit for bit against a scalar chain of fused multiply-adds; results do not depend
// on the batch size, the thread count, or whether they are reached through Pack + MatMul.
#include "kernels/bf16_panels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/half.h"
#include "kernels/kernel_choice.h"
#include "kernels/kernel_table.h"
#include "kernels/quant_matmul.h"

namespace radixserve::kernels {
namespace {

struct Case {
  std::vector<uint16_t> w;
  std::vector<float> x;
  WeightMatrix matrix;
  std::vector<uint8_t> panels;
};

Case MakeCase(int64_t rows, int64_t cols, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Case c;
  c.w.resize(static_cast<size_t>(rows * cols));
  for (auto& v : c.w) v = F32ToBf16(dist(rng));
  c.x.resize(static_cast<size_t>(n * cols));
  for (auto& v : c.x) v = dist(rng);
  c.matrix = WeightMatrix{WeightFormat::kBF16, rows, cols, c.w.data()};
  c.panels.resize(static_cast<size_t>(Bf16PanelBytes(c.matrix)));
  PackBf16Panels(c.matrix, nullptr, c.panels.data());
  return c;
}

// A panel kernel this machine runs: each AVX-512 product, and the AVX2 one.
struct PanelKernel {
  std::string name;
  std::function<void(ThreadPool*, const float*, int64_t, const WeightMatrix&, const uint8_t*,
                     float*)>
      run;
};

std::vector<PanelKernel> PanelKernels() {
  std::vector<PanelKernel> kernels;
  if (Bf16PanelsSupported()) {
    std::vector<Bf16Product> products = {Bf16Product::kWidenFma};
    if (Bf16DotSupported()) products.push_back(Bf16Product::kDotBf16);
    if (Bf16AmxSupported()) products.push_back(Bf16Product::kAmxTile);
    for (const Bf16Product product : products) {
      kernels.push_back({std::string(Bf16ProductName(product)),
                         [product](ThreadPool* pool, const float* x, int64_t n,
                                   const WeightMatrix& w, const uint8_t* panels, float* y) {
                           Bf16PanelMatMulWith(product, pool, x, n, w, panels, y);
                         }});
    }
  }
  if (Bf16PanelsFor("avx2")) kernels.push_back({"avx2", Bf16PanelMatMulAvx2});
  return kernels;
}

TEST(Bf16PanelsTest, MatchesDoubleProductOfRoundedInputs) {
  const std::vector<PanelKernel> kernels = PanelKernels();
  if (kernels.empty()) GTEST_SKIP() << "no BF16 panel kernel on this CPU";
  ThreadPool pool(2);
  for (const PanelKernel& kernel : kernels) {
    SCOPED_TRACE(kernel.name);
    for (int64_t rows : {1, 15, 16, 17, 70, 129}) {
      for (int64_t cols : {1, 2, 7, 33, 64, 101, 160}) {
        for (int64_t n : {1, 5, 6, 7, 13, 33}) {
          Case c = MakeCase(rows, cols, n, static_cast<uint32_t>(rows * 1000 + cols * 10 + n));
          std::vector<float> y(static_cast<size_t>(n * rows));
          kernel.run(&pool, c.x.data(), n, c.matrix, c.panels.data(), y.data());
          for (int64_t t = 0; t < n; ++t) {
            for (int64_t r = 0; r < rows; ++r) {
              double want = 0.0, scale = 0.0;
              for (int64_t k = 0; k < cols; ++k) {
                const double term = static_cast<double>(Bf16ToF32(
                                        F32ToBf16(c.x[static_cast<size_t>(t * cols + k)]))) *
                                    Bf16ToF32(c.w[static_cast<size_t>(r * cols + k)]);
                want += term;
                scale += std::fabs(term);
              }
              ASSERT_NEAR(y[static_cast<size_t>(t * rows + r)], want, 1e-6 * scale + 1e-30)
                  << "rows " << rows << " cols " << cols << " n " << n << " t " << t << " r " << r;
            }
          }
        }
      }
    }
  }
}

// widen_fma's contract, bit for bit: each result is one chain of fused multiply-adds from zero
// over its columns in order (std::fma here), activations rounded to bf16. The AVX2 kernel and
// the AVX-512 one both keep it, over shapes that reach every tile and block tail (7, 8, 15 and 31
// tokens: the AVX2 tiles' split tails, 4 + 3, 4 + 4, 6 + 5 + 4 and 4 x 6 + 4 + 3, multiplied in
// registers; 32 tokens and more through the widened chunks).
TEST(Bf16PanelsTest, WidenFmaIsOneFmaChainInColumnOrder) {
  std::vector<PanelKernel> kernels;
  for (PanelKernel& kernel : PanelKernels()) {
    if (kernel.name == "widen_fma" || kernel.name == "avx2") kernels.push_back(std::move(kernel));
  }
  if (kernels.empty()) GTEST_SKIP() << "no BF16 panel kernel on this CPU";
  ThreadPool pool(2);
  for (const PanelKernel& kernel : kernels) {
    SCOPED_TRACE(kernel.name);
    for (int64_t rows : {1, 8, 17, 49, 150}) {  // 150: more than a group of 8 panels
      for (int64_t cols : {1, 7, 64, 101, 577}) {
        for (int64_t n : {1, 2, 3, 6, 7, 8, 11, 15, 31, 32, 97, 130}) {
          Case c = MakeCase(rows, cols, n, static_cast<uint32_t>(rows * 7919 + cols * 31 + n));
          std::vector<float> y(static_cast<size_t>(n * rows));
          kernel.run(&pool, c.x.data(), n, c.matrix, c.panels.data(), y.data());
          for (int64_t t = 0; t < n; ++t) {
            for (int64_t r = 0; r < rows; ++r) {
              float want = 0.0f;
              for (int64_t k = 0; k < cols; ++k) {
                want = std::fma(Bf16ToF32(c.w[static_cast<size_t>(r * cols + k)]),
                                Bf16ToF32(F32ToBf16(c.x[static_cast<size_t>(t * cols + k)])), want);
              }
              ASSERT_EQ(y[static_cast<size_t>(t * rows + r)], want)
                  << "rows " << rows << " cols " << cols << " n " << n << " t " << t << " r " << r;
            }
          }
        }
      }
    }
  }
}

// Steps of fewer tokens than an AMX tile run the VNNI-style tiles with the tiles' arithmetic
// (Tile's kAmxTile): denormal activations and weights, and products whose sums fall below the
// normal range, are flushed alike at every batch size.
TEST(Bf16PanelsTest, DenormalsAreFlushedAlikeAtEveryBatchSize) {
  if (!Bf16AmxSupported()) GTEST_SKIP() << "no AMX-BF16";
  const int64_t rows = 40, cols = 96, n = 32;
  Case c = MakeCase(rows, cols, n, 13);
  // Token t % 3 == 0: every activation a bf16 denormal; t % 3 == 1: activations near 1e-30,
  // so against the rows scaled by 1e-9 (r % 2 == 0) products and sums fall below 1e-38.
  for (int64_t t = 0; t < n; ++t) {
    const float scale = t % 3 == 0 ? 1e-39f : t % 3 == 1 ? 1e-30f : 1.0f;
    for (int64_t k = 0; k < cols; ++k) c.x[static_cast<size_t>(t * cols + k)] *= scale;
  }
  for (int64_t r = 0; r < rows; r += 2) {
    for (int64_t k = 0; k < cols; ++k) {
      uint16_t& v = c.w[static_cast<size_t>(r * cols + k)];
      v = F32ToBf16(Bf16ToF32(v) * 1e-9f);
    }
  }
  PackBf16Panels(c.matrix, nullptr, c.panels.data());
  std::vector<float> all(static_cast<size_t>(n * rows));
  Bf16PanelMatMulWith(Bf16Product::kAmxTile, nullptr, c.x.data(), n, c.matrix, c.panels.data(),
                      all.data());
  for (int64_t t = 0; t < n; ++t) {
    std::vector<float> one(static_cast<size_t>(rows));
    Bf16PanelMatMulWith(Bf16Product::kAmxTile, nullptr, c.x.data() + t * cols, 1, c.matrix,
                        c.panels.data(), one.data());
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_EQ(one[static_cast<size_t>(r)], all[static_cast<size_t>(t * rows + r)])
          << t << " " << r;
    }
  }
}

TEST(Bf16PanelsTest, RowsDoNotDependOnBatchOrThreads) {
  const std::vector<PanelKernel> kernels = PanelKernels();
  if (kernels.empty()) GTEST_SKIP() << "no BF16 panel kernel on this CPU";
  const int64_t rows = 200, cols = 577, n = 137;  // more tokens than one activation block
  Case c = MakeCase(rows, cols, n, 7);
  ThreadPool pool(2);
  for (const PanelKernel& kernel : kernels) {
    SCOPED_TRACE(kernel.name);
    std::vector<float> all(static_cast<size_t>(n * rows)), threaded(all.size());
    kernel.run(nullptr, c.x.data(), n, c.matrix, c.panels.data(), all.data());
    kernel.run(&pool, c.x.data(), n, c.matrix, c.panels.data(), threaded.data());
    EXPECT_EQ(all, threaded);
    for (int64_t t : {0, 5, 36, 136}) {
      std::vector<float> one(static_cast<size_t>(rows));
      kernel.run(&pool, c.x.data() + t * cols, 1, c.matrix, c.panels.data(), one.data());
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_EQ(one[static_cast<size_t>(r)], all[static_cast<size_t>(t * rows + r)])
            << t << " " << r;
      }
    }
  }
}

// Every table with panels (Bf16PanelsFor) packs BF16 matrices into them and multiplies with them
// under llama.cpp's numerics; kExact keeps f32 activations and the unpacked float path.
TEST(Bf16PanelsTest, PackAndMatMulUseThePanelsUnderLlamaCppNumerics) {
  const int64_t rows = 48, cols = 96, n = 9;
  Case c = MakeCase(rows, cols, n, 11);
  int tables = 0;
  for (const KernelTable* table : AvailableKernels()) {
    if (!Bf16PanelsFor(table->name)) continue;
    SCOPED_TRACE(std::string(table->name));
    ++tables;
    const PackedWeight packed = Pack(*table, nullptr, c.matrix);
    ASSERT_TRUE(packed.packed());
    std::vector<float> via_pack(static_cast<size_t>(n * rows)), direct(via_pack.size());
    MatMul(*table, nullptr, c.x.data(), n, packed, via_pack.data(), ActivationMode::kGgmlRounded);
    Bf16PanelMatMulFor(table->name, nullptr, c.x.data(), n, c.matrix, c.panels.data(),
                       direct.data());
    EXPECT_EQ(via_pack, direct);
    std::vector<float> exact(via_pack.size()), unpacked(via_pack.size());
    MatMul(*table, nullptr, c.x.data(), n, packed, exact.data(), ActivationMode::kExact);
    MatMul(*table, nullptr, c.x.data(), n, c.matrix, unpacked.data(), ActivationMode::kExact);
    EXPECT_EQ(exact, unpacked);
  }
  if (tables == 0) GTEST_SKIP() << "no BF16 panel kernel on this CPU";
}

}  // namespace
}  // namespace radixserve::kernels
