// FusedWeights: a stacked matrix multiplies like its parts one after another (same rows, same
// bytes), and parts of different formats or widths are not stacked.
#include "model/fused_weights.h"

#include <gtest/gtest.h>

#include <random>

#include "kernels/half.h"

namespace radixserve::model {
namespace {

std::vector<uint16_t> RandomF16(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint16_t> out(static_cast<size_t>(n));
  for (auto& v : out) v = kernels::F32ToF16(dist(rng));
  return out;
}

TEST(FusedWeightsTest, StackedMatrixMultipliesLikeItsParts) {
  const int64_t cols = 64;
  const std::vector<int64_t> rows{9, 3, 3};
  std::vector<std::vector<uint16_t>> data;
  std::vector<kernels::WeightMatrix> parts;
  for (size_t i = 0; i < rows.size(); ++i) {
    data.push_back(RandomF16(rows[i] * cols, static_cast<uint32_t>(i + 1)));
    parts.push_back({kernels::WeightFormat::kF16, rows[i], cols, data.back().data()});
  }
  FusedWeights fused;
  auto stacked = fused.Stack(parts);
  ASSERT_TRUE(stacked.has_value());
  EXPECT_EQ(stacked->rows, 15);
  EXPECT_EQ(stacked->cols, cols);
  EXPECT_EQ(fused.bytes(), 15 * cols * 2);

  const int64_t n = 3;
  std::vector<float> x(static_cast<size_t>(n * cols));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : x) v = dist(rng);
  const kernels::KernelTable& kt = kernels::RefKernels();
  std::vector<float> y(static_cast<size_t>(n * 15));
  kernels::MatMul(kt, nullptr, x.data(), n, *stacked, y.data());
  int64_t offset = 0;
  for (const kernels::WeightMatrix& p : parts) {
    std::vector<float> part(static_cast<size_t>(n * p.rows));
    kernels::MatMul(kt, nullptr, x.data(), n, p, part.data());
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t r = 0; r < p.rows; ++r) {
        EXPECT_EQ(y[static_cast<size_t>(t * 15 + offset + r)],
                  part[static_cast<size_t>(t * p.rows + r)]);
      }
    }
    offset += p.rows;
  }
}

TEST(FusedWeightsTest, MismatchedPartsAreNotStacked) {
  std::vector<float> a(4 * 32), b(4 * 64);
  std::vector<uint16_t> c(4 * 32);
  FusedWeights fused;
  EXPECT_FALSE(fused.Stack({{kernels::WeightFormat::kF32, 4, 32, a.data()},
                            {kernels::WeightFormat::kF32, 4, 64, b.data()}}));
  EXPECT_FALSE(fused.Stack({{kernels::WeightFormat::kF32, 4, 32, a.data()},
                            {kernels::WeightFormat::kF16, 4, 32, c.data()}}));
  EXPECT_EQ(fused.bytes(), 0);
}

TEST(FusedWeightsTest, ReleaseFreesOnlyItsOwnCopies) {
  std::vector<float> a(4 * 32, 1.0f), b(2 * 32, 2.0f);
  const kernels::WeightMatrix pa{kernels::WeightFormat::kF32, 4, 32, a.data()};
  const kernels::WeightMatrix pb{kernels::WeightFormat::kF32, 2, 32, b.data()};
  FusedWeights fused;
  const auto first = fused.Stack({pa, pb});
  const auto second = fused.Stack({pb, pa});
  ASSERT_TRUE(first && second);
  EXPECT_EQ(fused.bytes(), 2 * 6 * 32 * 4);
  EXPECT_FALSE(fused.Release(pa));  // a part, not a copy
  EXPECT_TRUE(fused.Release(*first));
  EXPECT_EQ(fused.bytes(), 6 * 32 * 4);
  EXPECT_FALSE(fused.Release(*first));  // already freed
  // The other copy is untouched.
  const auto* rows = static_cast<const float*>(second->data);
  EXPECT_EQ(rows[0], 2.0f);
  EXPECT_EQ(rows[2 * 32], 1.0f);
}

}  // namespace
}  // namespace radixserve::model
