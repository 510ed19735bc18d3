// The packed BF16 matmul (kernels/bf16_panels.h) against a double-precision product of the same
// bf16-rounded activations and bf16 weights, on odd shapes; its results do not depend on the
// batch size, the thread count, or whether it is reached through Pack + MatMul.
#include "kernels/bf16_panels.h"

#include <gtest/gtest.h>

#include <cmath>
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

// Every product this machine runs.
std::vector<Bf16Product> Products() {
  std::vector<Bf16Product> products = {Bf16Product::kWidenFma, Bf16Product::kDotBf16};
  if (Bf16AmxSupported()) products.push_back(Bf16Product::kAmxTile);
  return products;
}

TEST(Bf16PanelsTest, MatchesDoubleProductOfRoundedInputs) {
  if (!Bf16PanelsSupported()) GTEST_SKIP() << "no AVX512-BF16";
  ThreadPool pool(2);
  for (const Bf16Product product : Products()) {
    SCOPED_TRACE(std::string(Bf16ProductName(product)));
    for (int64_t rows : {1, 15, 16, 17, 70, 129}) {
      for (int64_t cols : {1, 2, 7, 33, 64, 101, 160}) {
        for (int64_t n : {1, 5, 6, 7, 13, 33}) {
          Case c = MakeCase(rows, cols, n, static_cast<uint32_t>(rows * 1000 + cols * 10 + n));
          std::vector<float> y(static_cast<size_t>(n * rows));
          Bf16PanelMatMulWith(product, &pool, c.x.data(), n, c.matrix, c.panels.data(), y.data());
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
  if (!Bf16PanelsSupported()) GTEST_SKIP() << "no AVX512-BF16";
  const int64_t rows = 200, cols = 577, n = 137;  // more tokens than one activation block
  Case c = MakeCase(rows, cols, n, 7);
  ThreadPool pool(2);
  for (const Bf16Product product : Products()) {
    SCOPED_TRACE(std::string(Bf16ProductName(product)));
    std::vector<float> all(static_cast<size_t>(n * rows)), threaded(all.size());
    Bf16PanelMatMulWith(product, nullptr, c.x.data(), n, c.matrix, c.panels.data(), all.data());
    Bf16PanelMatMulWith(product, &pool, c.x.data(), n, c.matrix, c.panels.data(), threaded.data());
    EXPECT_EQ(all, threaded);
    for (int64_t t : {0, 5, 36, 136}) {
      std::vector<float> one(static_cast<size_t>(rows));
      Bf16PanelMatMulWith(product, &pool, c.x.data() + t * cols, 1, c.matrix, c.panels.data(),
                          one.data());
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_EQ(one[static_cast<size_t>(r)], all[static_cast<size_t>(t * rows + r)])
            << t << " " << r;
      }
    }
  }
}

TEST(Bf16PanelsTest, PackAndMatMulUseThePanelsUnderLlamaCppNumerics) {
  if (!Bf16PanelsSupported() || ActiveKernels().name != "avx512") GTEST_SKIP() << "no AVX512-BF16";
  const int64_t rows = 48, cols = 96, n = 9;
  Case c = MakeCase(rows, cols, n, 11);
  const PackedWeight packed = Pack(ActiveKernels(), nullptr, c.matrix);
  ASSERT_TRUE(packed.packed());
  std::vector<float> via_pack(static_cast<size_t>(n * rows)), direct(via_pack.size());
  MatMul(ActiveKernels(), nullptr, c.x.data(), n, packed, via_pack.data(),
         ActivationMode::kGgmlRounded);
  Bf16PanelMatMul(nullptr, c.x.data(), n, c.matrix, c.panels.data(), direct.data());
  EXPECT_EQ(via_pack, direct);
  // kExact keeps f32 activations: the unpacked float path, not the panels.
  std::vector<float> exact(via_pack.size()), unpacked(via_pack.size());
  MatMul(ActiveKernels(), nullptr, c.x.data(), n, packed, exact.data(), ActivationMode::kExact);
  MatMul(ActiveKernels(), nullptr, c.x.data(), n, c.matrix, unpacked.data(),
         ActivationMode::kExact);
  EXPECT_EQ(exact, unpacked);
}

}  // namespace
}  // namespace radixserve::kernels
