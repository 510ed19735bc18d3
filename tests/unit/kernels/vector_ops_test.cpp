// Every SIMD KernelTable variant against the scalar reference on random inputs with odd sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/half.h"
#include "kernels/kernel_table.h"

namespace radixserve::kernels {
namespace {

std::vector<float> Random(int64_t n, std::mt19937& rng, float lo = -3.0f, float hi = 3.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

void ExpectClose(const std::vector<float>& a, const std::vector<float>& b, float rel,
                 const char* what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], b[i], rel * (1.0f + std::fabs(b[i]))) << what << " at " << i;
  }
}

constexpr int64_t kSizes[] = {0, 1, 3, 7, 8, 15, 16, 17, 31, 33, 64, 100, 257, 1000};

// dot_f16 / dot_bf16 / axpy_f16 / axpy_bf16 sum as dot / axpy do over the converted floats: the
// same results (16-bit LoRA matrices give what their float32 copies give), in every variant.
TEST(VectorOpsTest, HalfOperandsSumAsTheirFloatCopies) {
  std::mt19937 rng(99);
  for (const KernelTable* table : AvailableKernels()) {
    SCOPED_TRACE(std::string(table->name));
    for (int64_t n : kSizes) {
      SCOPED_TRACE(n);
      const std::vector<float> x = Random(n, rng), y = Random(n, rng);
      std::vector<uint16_t> f16(x.size()), bf16(x.size());
      std::vector<float> from_f16(x.size()), from_bf16(x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        f16[i] = F32ToF16(x[i]);
        bf16[i] = F32ToBf16(x[i]);
        from_f16[i] = F16ToF32(f16[i]);
        from_bf16[i] = Bf16ToF32(bf16[i]);
      }
      const float tol = 1e-6f * (1.0f + static_cast<float>(n));
      EXPECT_NEAR(table->dot_f16(f16.data(), y.data(), n), table->dot(from_f16.data(), y.data(), n),
                  tol);
      EXPECT_NEAR(table->dot_bf16(bf16.data(), y.data(), n),
                  table->dot(from_bf16.data(), y.data(), n), tol);
      for (const bool brain : {false, true}) {
        auto got = y, want = y;
        if (brain) {
          table->axpy_bf16(-1.3f, bf16.data(), got.data(), n);
          table->axpy(-1.3f, from_bf16.data(), want.data(), n);
        } else {
          table->axpy_f16(-1.3f, f16.data(), got.data(), n);
          table->axpy(-1.3f, from_f16.data(), want.data(), n);
        }
        EXPECT_EQ(got, want) << (brain ? "axpy_bf16" : "axpy_f16");
      }
    }
  }
}

TEST(VectorOpsTest, VariantsAreListed) {
  auto all = AvailableKernels();
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.front()->name, "ref");
  EXPECT_NE(ActiveKernels().dot, nullptr);
}

TEST(VectorOpsTest, EveryVariantMatchesReference) {
  const KernelTable& ref = RefKernels();
  std::mt19937 rng(1234);
  for (const KernelTable* table : AvailableKernels()) {
    SCOPED_TRACE(std::string(table->name));
    for (int64_t n : kSizes) {
      SCOPED_TRACE(n);
      auto a = Random(n, rng), b = Random(n, rng), w = Random(n, rng);
      EXPECT_NEAR(table->dot(a.data(), b.data(), n), ref.dot(a.data(), b.data(), n),
                  1e-5f * (1.0f + static_cast<float>(n)));

      auto y1 = b, y2 = b;
      table->axpy(0.7f, a.data(), y1.data(), n);
      ref.axpy(0.7f, a.data(), y2.data(), n);
      ExpectClose(y1, y2, 1e-6f, "axpy");

      std::vector<float> n1(a.size()), n2(a.size());
      if (n > 0) {
        table->rms_norm(a.data(), w.data(), 1.0f, 1e-6f, n1.data(), n);
        ref.rms_norm(a.data(), w.data(), 1.0f, 1e-6f, n2.data(), n);
        ExpectClose(n1, n2, 1e-5f, "rms_norm");
      }

      auto s1 = Random(n, rng, -30.0f, 30.0f);
      auto s2 = s1;
      table->softmax(s1.data(), n);
      ref.softmax(s2.data(), n);
      ExpectClose(s1, s2, 1e-6f, "softmax");

      std::vector<float> g1(a.size()), g2(a.size());
      table->silu_mul(a.data(), b.data(), g1.data(), n);
      ref.silu_mul(a.data(), b.data(), g2.data(), n);
      ExpectClose(g1, g2, 1e-5f, "silu_mul");
      table->gelu_tanh_mul(a.data(), b.data(), g1.data(), n);
      ref.gelu_tanh_mul(a.data(), b.data(), g2.data(), n);
      ExpectClose(g1, g2, 1e-5f, "gelu_tanh_mul");
    }
  }
}

// The sampler's primitives against the reference over rows of several blocks with a short last
// block: argmax exactly (ties to the lowest index, NaN skipped), exponentials and their block
// sums and maxima to float rounding, masked (-inf) and NaN logits exactly 0, the threshold sums'
// counts and gathered ids exactly.
TEST(VectorOpsTest, SamplerPrimitivesMatchReference) {
  const KernelTable& ref = RefKernels();
  std::mt19937 rng(77);
  constexpr float kInf = std::numeric_limits<float>::infinity();
  for (const KernelTable* table : AvailableKernels()) {
    SCOPED_TRACE(std::string(table->name));
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{17}, int64_t{256}, int64_t{257},
                      int64_t{1000}, int64_t{3 * 256 + 13}}) {
      SCOPED_TRACE(n);
      auto x = Random(n, rng, -40.0f, 10.0f);
      if (n > 5) {
        x[2] = -kInf;
        x[3] = std::numeric_limits<float>::quiet_NaN();
        x[static_cast<size_t>(n) - 1] = 12.0f;  // the largest, twice: the first one wins
        x[static_cast<size_t>(n) / 2] = 12.0f;
      }
      EXPECT_EQ(table->argmax(x.data(), n), ref.argmax(x.data(), n));

      const int64_t blocks = (n + kExpBlock - 1) / kExpBlock;
      std::vector<float> e1(x.size()), e2(x.size());
      std::vector<float> sum1(static_cast<size_t>(blocks)), sum2(sum1.size());
      std::vector<float> max1(sum1.size()), max2(sum1.size());
      table->exp_blocks(x.data(), 0.8f, 9.6f, e1.data(), sum1.data(), max1.data(), n);
      ref.exp_blocks(x.data(), 0.8f, 9.6f, e2.data(), sum2.data(), max2.data(), n);
      ExpectClose(e1, e2, 1e-6f, "exp_blocks");
      for (size_t i = 0; i < e1.size(); ++i) {
        if (!(x[i] * 0.8f - 9.6f >= -87.0f)) {
          EXPECT_EQ(e1[i], 0.0f) << "at " << i;
        }
      }
      for (size_t b = 0; b < sum1.size(); ++b) {
        // A fused multiply-add in x * scale - shift moves exp's argument by up to an ulp of the
        // product (~2e-6 at 24): relative differences of a few 1e-6.
        EXPECT_NEAR(sum1[b], sum2[b], 1e-5f * sum2[b]) << "block " << b;
        EXPECT_NEAR(max1[b], max2[b], 1e-5f * max2[b]) << "block " << b;
      }

      for (float tau : {1e-30f, 1e-3f, 0.5f, 2.0f}) {
        int64_t c1 = -1, c2 = -1;
        const float s1 = table->sum_at_least(e2.data(), n, tau, &c1);
        const float s2 = ref.sum_at_least(e2.data(), n, tau, &c2);
        EXPECT_EQ(c1, c2) << "tau " << tau;
        EXPECT_NEAR(s1, s2, 1e-5f * s2) << "tau " << tau;
        std::vector<int32_t> ids1(x.size() + 1, -1), ids2(x.size() + 1, -1);
        EXPECT_EQ(table->gather_at_least(e2.data(), n, tau, 5, ids1.data()), c2);
        ref.gather_at_least(e2.data(), n, tau, 5, ids2.data());
        EXPECT_EQ(ids1, ids2) << "tau " << tau;
      }
    }
    const std::vector<float> nans(40, std::numeric_limits<float>::quiet_NaN());
    EXPECT_EQ(table->argmax(nans.data(), 40), -1);
    EXPECT_EQ(table->argmax(nans.data(), 0), -1);
  }
}

// The exact GELU against erf in double over the range activations take, including the far
// negative tail where gelu(x) -> 0 and the positive side where it -> x; in place too.
TEST(VectorOpsTest, GeluErfMatchesErfInDouble) {
  std::vector<float> x;
  for (float v = -12.0f; v <= 12.0f; v += 0.001953125f) x.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 40.0f, -40.0f, 1e6f, -1e6f}) x.push_back(v);
  for (const KernelTable* table : AvailableKernels()) {
    SCOPED_TRACE(std::string(table->name));
    std::vector<float> y = x;
    table->gelu_erf(y.data(), y.data(), static_cast<int64_t>(y.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = 0.5 * x[i] * (1.0 + std::erf(x[i] / std::sqrt(2.0)));
      EXPECT_NEAR(y[i], want, 2e-7 * (1.0 + std::fabs(x[i])) + 1e-7 * std::fabs(want))
          << "x = " << x[i];
    }
  }
}

TEST(VectorOpsTest, ReferenceValues) {
  const KernelTable& ref = RefKernels();
  std::vector<float> x{1.0f, 2.0f, 3.0f};
  ref.softmax(x.data(), 3);
  const double denom = std::exp(-2.0) + std::exp(-1.0) + 1.0;
  EXPECT_NEAR(x[2], 1.0 / denom, 1e-7);
  float g = 1.5f, u = 2.0f, out;
  ref.silu_mul(&g, &u, &out, 1);
  EXPECT_NEAR(out, 1.5 / (1.0 + std::exp(-1.5)) * 2.0, 1e-6);
  std::vector<float> v{3.0f, 4.0f}, w{1.0f, 1.0f}, y(2);
  ref.rms_norm(v.data(), w.data(), 0.0f, 0.0f, y.data(), 2);
  EXPECT_NEAR(y[0], 3.0 / std::sqrt(12.5), 1e-6);
}

}  // namespace
}  // namespace radixserve::kernels
