// FloatMatMul for F32/BF16/F16 weights on every CPU variant against a double-precision product
// computed here from the same inputs (activations rounded to bf16/f16 first under kGgmlRounded,
// as llama.cpp does); results do not depend on the batch size or the thread count.
#include "kernels/float_matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/half.h"

namespace radixserve::kernels {
namespace {

struct Weights {
  WeightMatrix matrix;
  std::vector<uint8_t> bytes;
  std::vector<double> values;  // the decoded weights, [rows, cols]
};

Weights RandomWeights(WeightFormat format, int64_t rows, int64_t cols, std::mt19937& rng) {
  Weights w;
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int64_t size = format == WeightFormat::kF32 ? 4 : 2;
  w.bytes.resize(static_cast<size_t>(rows * cols * size));
  w.values.resize(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows * cols; ++i) {
    const float f = dist(rng);
    if (format == WeightFormat::kF32) {
      std::memcpy(w.bytes.data() + i * 4, &f, 4);
      w.values[static_cast<size_t>(i)] = f;
    } else {
      const uint16_t h = format == WeightFormat::kBF16 ? F32ToBf16(f) : F32ToF16(f);
      std::memcpy(w.bytes.data() + i * 2, &h, 2);
      w.values[static_cast<size_t>(i)] = format == WeightFormat::kBF16 ? Bf16ToF32(h) : F16ToF32(h);
    }
  }
  w.matrix = WeightMatrix{format, rows, cols, w.bytes.data()};
  return w;
}

double RoundedActivation(float x, WeightFormat format, ActivationMode mode) {
  if (mode == ActivationMode::kExact || format == WeightFormat::kF32) return x;
  return format == WeightFormat::kBF16 ? Bf16ToF32(F32ToBf16(x)) : F16ToF32(F32ToF16(x));
}

std::vector<float> Expected(const Weights& w, const std::vector<float>& x, int64_t n,
                            ActivationMode mode, std::vector<double>* magnitude) {
  const int64_t rows = w.matrix.rows, cols = w.matrix.cols;
  std::vector<float> y(static_cast<size_t>(n * rows));
  magnitude->assign(y.size(), 0.0);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0.0, mag = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        const double p =
            RoundedActivation(x[static_cast<size_t>(t * cols + c)], w.matrix.format, mode) *
            w.values[static_cast<size_t>(r * cols + c)];
        sum += p;
        mag += std::fabs(p);
      }
      y[static_cast<size_t>(t * rows + r)] = static_cast<float>(sum);
      (*magnitude)[static_cast<size_t>(t * rows + r)] = mag;
    }
  }
  return y;
}

std::vector<float> RandomActivations(int64_t count, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> x(static_cast<size_t>(count));
  for (float& v : x) v = dist(rng);
  return x;
}

constexpr WeightFormat kFormats[] = {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kF16};
constexpr ActivationMode kModes[] = {ActivationMode::kExact, ActivationMode::kGgmlRounded};

TEST(FloatMatMulTest, EveryVariantMatchesADoublePrecisionProductOnOddShapes) {
  std::mt19937 rng(7);
  const int64_t shapes[][3] = {{1, 1, 1},   {3, 5, 7},   {4, 4, 16},    {5, 9, 33},
                               {7, 13, 63}, {17, 6, 64}, {33, 21, 100}, {2, 70, 576}};
  for (const FloatGemmKernels* kernels : AvailableFloatKernels()) {
    for (WeightFormat format : kFormats) {
      for (const auto& shape : shapes) {
        const int64_t n = shape[0], rows = shape[1], cols = shape[2];
        const Weights w = RandomWeights(format, rows, cols, rng);
        const std::vector<float> x = RandomActivations(n * cols, rng);
        for (ActivationMode mode : kModes) {
          std::vector<double> magnitude;
          const std::vector<float> want = Expected(w, x, n, mode, &magnitude);
          std::vector<float> got(want.size(), NAN);
          FloatMatMul(*kernels, nullptr, x.data(), n, w.matrix, got.data(), mode);
          for (size_t i = 0; i < want.size(); ++i) {
            // f32 summation of `cols` exact products: error <= cols * eps * sum |p|.
            const double tol = 1e-6 * static_cast<double>(cols) * magnitude[i] + 1e-30;
            ASSERT_NEAR(got[i], want[i], tol)
                << kernels->name << " " << FormatName(format) << " n=" << n << " rows=" << rows
                << " cols=" << cols << " mode=" << static_cast<int>(mode) << " i=" << i;
          }
        }
      }
    }
  }
}

TEST(FloatMatMulTest, ResultsDoNotDependOnBatchSizeOrThreads) {
  std::mt19937 rng(11);
  ThreadPool pool(2);
  const int64_t rows = 37, cols = 150, n = 23;
  for (const FloatGemmKernels* kernels : AvailableFloatKernels()) {
    for (WeightFormat format : kFormats) {
      const Weights w = RandomWeights(format, rows, cols, rng);
      const std::vector<float> x = RandomActivations(n * cols, rng);
      for (ActivationMode mode : kModes) {
        std::vector<float> batched(static_cast<size_t>(n * rows));
        FloatMatMul(*kernels, &pool, x.data(), n, w.matrix, batched.data(), mode);
        for (int64_t t = 0; t < n; ++t) {
          std::vector<float> alone(static_cast<size_t>(rows));
          FloatMatMul(*kernels, nullptr, x.data() + t * cols, 1, w.matrix, alone.data(), mode);
          ASSERT_EQ(0, std::memcmp(alone.data(), batched.data() + t * rows,
                                   sizeof(float) * static_cast<size_t>(rows)))
              << kernels->name << " " << FormatName(format) << " token " << t;
        }
      }
    }
  }
}

// F32 panels: every variant's kernel equals, bit for bit, the scalar fma chain over the columns
// in order (float_matmul.h), for token counts across the tile shapes and their tails, rows that
// leave partial panels, strided inputs and outputs, and either packing direction; alone and
// batched, one thread or two.
TEST(FloatMatMulTest, F32PanelsEqualTheScalarFmaChainBitForBit) {
  std::mt19937 rng(5);
  ThreadPool pool(2);
  const int64_t shapes[][2] = {{1, 1}, {5, 7}, {16, 32}, {37, 33}, {64, 100}, {100, 150}};
  const int64_t token_counts[] = {1, 2, 5, 6, 7, 8, 11, 12, 13, 25, 70};
  for (const FloatGemmKernels* kernels : AvailableFloatKernels()) {
    for (const auto& shape : shapes) {
      const int64_t rows = shape[0], cols = shape[1];
      const Weights w = RandomWeights(WeightFormat::kF32, rows, cols, rng);
      const auto* wf = reinterpret_cast<const float*>(w.bytes.data());
      std::vector<float> panels(static_cast<size_t>(F32PanelFloats(rows, cols)), NAN);
      PackF32Panels(wf, cols, rows, cols, false, panels.data());
      // The transposed source (W^T, row stride rows + 3) packs to the same panels.
      std::vector<float> wt(static_cast<size_t>(cols * (rows + 3)), NAN);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) wt[c * (rows + 3) + r] = wf[r * cols + c];
      }
      std::vector<float> from_t(panels.size(), NAN);
      PackF32Panels(wt.data(), rows + 3, rows, cols, true, from_t.data());
      ASSERT_EQ(0, std::memcmp(panels.data(), from_t.data(), sizeof(float) * panels.size()));
      for (int64_t n : token_counts) {
        const int64_t ldx = cols + 2, ldy = rows + 5;
        const std::vector<float> x = RandomActivations(n * ldx, rng);
        for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
          std::vector<float> y(static_cast<size_t>(n * ldy), -7.0f);
          F32PanelMatMul(*kernels, p, x.data(), ldx, n, panels.data(), rows, cols, y.data(), ldy);
          for (int64_t t = 0; t < n; ++t) {
            for (int64_t r = 0; r < ldy; ++r) {
              float want = -7.0f;  // the padding between rows stays untouched
              if (r < rows) {
                want = 0.0f;
                for (int64_t c = 0; c < cols; ++c) {
                  want = std::fma(wf[r * cols + c], x[static_cast<size_t>(t * ldx + c)], want);
                }
              }
              const float got = y[static_cast<size_t>(t * ldy + r)];
              ASSERT_EQ(0, std::memcmp(&got, &want, sizeof(float)))
                  << kernels->name << " rows=" << rows << " cols=" << cols << " n=" << n
                  << " t=" << t << " r=" << r << ": " << got << " vs " << want;
            }
          }
        }
      }
    }
  }
}

TEST(FloatMatMulTest, RoundingHelpersMatchTheScalarConversions) {
  std::mt19937 rng(3);
  std::vector<float> x = RandomActivations(1000, rng);
  x[0] = 0.0f;
  x[1] = -0.0f;
  x[2] = 1e-41f;  // subnormal
  x[3] = 3.0e38f;
  x[4] = 1.00390625f;  // exactly halfway between two bf16 values: ties to even
  for (const FloatGemmKernels* kernels : AvailableFloatKernels()) {
    std::vector<float> b(x.size()), h(x.size());
    std::vector<uint16_t> bits(x.size());
    kernels->round_bf16(x.data(), b.data(), static_cast<int64_t>(x.size()));
    kernels->round_f16(x.data(), h.data(), static_cast<int64_t>(x.size()));
    kernels->to_bf16(x.data(), bits.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(b[i], Bf16ToF32(F32ToBf16(x[i]))) << kernels->name << " i=" << i;
      ASSERT_EQ(h[i], F16ToF32(F32ToF16(x[i]))) << kernels->name << " i=" << i;
      ASSERT_EQ(bits[i], F32ToBf16(x[i])) << kernels->name << " i=" << i;
    }
  }
}

}  // namespace
}  // namespace radixserve::kernels
