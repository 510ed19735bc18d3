// QuantMatMul (the integer VNNI / AVX2 path) against the scalar reference path
// MatMul(RefKernels(), ..., kGgmlRounded), which dequantizes each weight row to float and dots it
// with the llama.cpp-rounded activations. Integer and float paths differ only in summation
// order, so each output must agree within 1e-4 of sum_i |x_i| * |w_i| for its row and token.
#include "kernels/quant_matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/float_matmul.h"
#include "kernels/half.h"
#include "kernels/ref/activation_quant.h"
#include "kernels/ref/dequantize.h"
#include "kernels/x86/quant_kernels.h"

namespace radixserve::kernels {
namespace {

// Every one packs into compact panels (quant_kernels.h).
constexpr WeightFormat kQuantFormats[] = {
    WeightFormat::kQ8_0, WeightFormat::kQ4_0, WeightFormat::kQ4_1,
    WeightFormat::kQ5_0, WeightFormat::kQ5_1, WeightFormat::kQ4_K,
    WeightFormat::kQ5_K, WeightFormat::kQ6_K, WeightFormat::kMXFP4};

// Random block bytes whose float16 scale fields hold small finite values.
// Blocks of random codes (or, with all_ones, every code and sub-block scale at its largest
// value) and small random half-precision block scales.
std::vector<uint8_t> RandomBlocks(WeightFormat format, int64_t rows, int64_t cols,
                                  std::mt19937& rng, bool all_ones = false) {
  std::vector<uint8_t> data(static_cast<size_t>(rows * *StorageBytes(format, cols)));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : data) b = all_ones ? 0xFF : static_cast<uint8_t>(byte(rng));
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  auto put_half = [&](uint8_t* p) {
    const uint16_t h = F32ToF16(scale(rng));
    std::memcpy(p, &h, 2);
  };
  const auto block_bytes = static_cast<size_t>(BlockBytes(format));
  for (size_t off = 0; off < data.size(); off += block_bytes) {
    uint8_t* b = data.data() + off;
    if (format == WeightFormat::kQ6_K) {
      put_half(b + 208);
      continue;
    }
    if (format == WeightFormat::kMXFP4) {  // exponent byte: scales 2^-10 .. 2^-4
      b[0] = static_cast<uint8_t>(118 + byte(rng) % 7);
      continue;
    }
    put_half(b);
    if (ref::UsesBlockSums(format) || BlockElements(format) == 256) put_half(b + 2);
  }
  return data;
}

std::vector<float> RandomActivations(int64_t n, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.5f);
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (auto& v : x) v = dist(rng);
  // An all-zero row (zero block scales) and a few outliers.
  if (n > 2) std::fill(x.begin() + cols, x.begin() + 2 * cols, 0.0f);
  for (int64_t i = 0; i < n * cols; i += 97) x[static_cast<size_t>(i)] *= 20.0f;
  return x;
}

void ExpectMatchesReference(const KernelTable& table, ThreadPool* pool, WeightFormat format,
                            int64_t n, int64_t rows, int64_t cols, std::mt19937& rng) {
  SCOPED_TRACE(std::string(FormatName(format)) + " n=" + std::to_string(n) +
               " rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) +
               (pool != nullptr ? " pool" : " serial"));
  const auto bytes = RandomBlocks(format, rows, cols, rng);
  const WeightMatrix w{format, rows, cols, bytes.data()};
  const auto x = RandomActivations(n, cols, rng);
  std::vector<float> expect(static_cast<size_t>(n * rows));
  MatMul(RefKernels(), nullptr, x.data(), n, w, expect.data(), ActivationMode::kGgmlRounded);
  std::vector<float> got(static_cast<size_t>(n * rows), std::nanf(""));
  ASSERT_TRUE(QuantMatMul(table, pool, x.data(), n, w, got.data()));
  // The load-time packed form must give the same numbers.
  const PackedWeight packed = Pack(table, pool, w);
  std::vector<float> got_packed(static_cast<size_t>(n * rows), std::nanf(""));
  MatMul(table, pool, x.data(), n, packed, got_packed.data(), ActivationMode::kGgmlRounded);

  std::vector<float> dense(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) DequantizeRow(w, r, dense.data() + r * cols);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      double scale = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        scale += std::fabs(double(x[t * cols + c]) * dense[r * cols + c]);
      }
      const size_t i = static_cast<size_t>(t * rows + r);
      ASSERT_NEAR(got[i], expect[i], 1e-4 * scale + 1e-30) << "token " << t << " row " << r;
      ASSERT_NEAR(got_packed[i], expect[i], 1e-4 * scale + 1e-30)
          << "packed " << packed.packed() << " token " << t << " row " << r;
    }
  }
}

std::vector<const KernelTable*> FastTables() {
  std::vector<const KernelTable*> out;
  for (const KernelTable* table : AvailableKernels()) {
    if (!QuantMatMulVariant(*table).empty()) out.push_back(table);
  }
  return out;
}

TEST(QuantMatMulTest, RefTableDeclines) {
  EXPECT_EQ(QuantMatMulVariant(RefKernels()), "");
  std::vector<uint8_t> bytes(static_cast<size_t>(*StorageBytes(WeightFormat::kQ4_1, 32)));
  const WeightMatrix w{WeightFormat::kQ4_1, 1, 32, bytes.data()};
  float x[32] = {}, y = 0.0f;
  EXPECT_FALSE(QuantMatMul(RefKernels(), nullptr, x, 1, w, &y));
}

TEST(QuantMatMulTest, FloatWeightsDecline) {
  for (const KernelTable* table : FastTables()) {
    std::vector<float> weights(32, 1.0f);
    const WeightMatrix w{WeightFormat::kF32, 1, 32, weights.data()};
    float x[32] = {}, y = 0.0f;
    EXPECT_FALSE(QuantMatMul(*table, nullptr, x, 1, w, &y));
  }
}

TEST(QuantMatMulTest, EveryVariantAvailableOnX86) {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    EXPECT_EQ(QuantMatMulVariant(*Avx2Kernels()), "avx2");
  }
  if (Avx512Kernels() != nullptr && __builtin_cpu_supports("avx512vnni") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) {
    EXPECT_EQ(QuantMatMulVariant(*Avx512Kernels()), "avx512_vnni");
  }
}

TEST(QuantMatMulTest, PackedWeightFallsBackOutsideItsVariant) {
  std::mt19937 rng(5);
  const int64_t rows = 19, cols = 64, n = 3;
  const auto bytes = RandomBlocks(WeightFormat::kQ4_1, rows, cols, rng);
  const WeightMatrix w{WeightFormat::kQ4_1, rows, cols, bytes.data()};
  const auto x = RandomActivations(n, cols, rng);
  for (const KernelTable* packed_for : AvailableKernels()) {
    const PackedWeight packed = Pack(*packed_for, nullptr, w);
    EXPECT_EQ(packed.variant, packed.packed() ? QuantMatMulVariant(*packed_for) : "");
    for (const KernelTable* table : AvailableKernels()) {
      for (ActivationMode mode : {ActivationMode::kExact, ActivationMode::kGgmlRounded}) {
        if (packed.packed() && table == packed_for && mode == ActivationMode::kGgmlRounded) {
          continue;
        }
        std::vector<float> want(static_cast<size_t>(n * rows)), got(want.size());
        MatMul(*table, nullptr, x.data(), n, w, want.data(), mode);
        MatMul(*table, nullptr, x.data(), n, packed, got.data(), mode);
        EXPECT_EQ(got, want) << packed_for->name << " -> " << table->name;
      }
    }
  }
}

// Every block format packs into compact panels (near the block size) whose kernels compute the
// same floats as the per-call path:
// packed and unpacked results are equal bit for bit, over token counts that exercise every tile
// width and a row count that is not a panel multiple.
TEST(QuantMatMulTest, CompactPanelsEqualCodePanelsBitForBit) {
  std::mt19937 rng(13);
  for (const KernelTable* table : FastTables()) {
    for (WeightFormat format : kQuantFormats) {
      SCOPED_TRACE(std::string(QuantMatMulVariant(*table)) + " " + std::string(FormatName(format)));
      const int64_t rows = 21, cols = 3 * 256;
      const auto bytes = RandomBlocks(format, rows, cols, rng);
      const WeightMatrix w{format, rows, cols, bytes.data()};
      const PackedWeight packed = Pack(*table, nullptr, w);
      ASSERT_TRUE(packed.packed());
      // At most ~1.1 bytes per weight (Q8_0: 1.06): near the block sizes, not 1.25-1.5.
      EXPECT_LE(static_cast<double>(packed.panels.size()),
                1.1 * static_cast<double>((rows + 15) / 16 * 16 * cols));
      // Every tile width of both variants, two tiles, the count above which the AVX-512
      // variant's kExpand tiles expand a compact panel into codes once, the one above which its
      // kCompact tiles expand Q6_K, and more than one block of 256 tokens; with both tilings.
      for (int64_t n : {1, 2, 3, 4, 7, 9, 20, 131, 300}) {
        const auto x = RandomActivations(n, cols, rng);
        std::vector<float> want(static_cast<size_t>(n * rows)), got(want.size());
        ASSERT_TRUE(QuantMatMul(*table, nullptr, x.data(), n, w, want.data()));
        for (const QuantTiles tiles : {QuantTiles::kExpand, QuantTiles::kCompact}) {
          std::fill(got.begin(), got.end(), 0.0f);
          MatMulWithTiles(tiles, *table, nullptr, x.data(), n, packed, got.data(),
                          ActivationMode::kGgmlRounded);
          EXPECT_EQ(got, want) << "n=" << n << " tiles " << QuantTilesName(tiles);
        }
      }
    }
  }
}

// A token's row does not depend on the batch: alone it runs the VNNI / AVX2 tiles, in a batch of
// 48 (on a CPU with AMX-INT8) the tile groups of 16, whose results must be the same bits. 13
// blocks of 32 leave Q8_0's AMX groups a last chunk of one block.
TEST(QuantMatMulTest, RowsDoNotDependOnTheBatch) {
  std::mt19937 rng(29);
  for (const KernelTable* table : FastTables()) {
    for (auto [format, cols] : [] {
           std::vector<std::pair<WeightFormat, int64_t>> cases;
           for (WeightFormat format : kQuantFormats) cases.emplace_back(format, 2 * 256);
           cases.emplace_back(WeightFormat::kQ8_0, 13 * 32);
           return cases;
         }()) {
      SCOPED_TRACE(std::string(QuantMatMulVariant(*table)) + " " + std::string(FormatName(format)) +
                   " cols=" + std::to_string(cols));
      const int64_t rows = 37, n = 53;
      const auto bytes = RandomBlocks(format, rows, cols, rng);
      const WeightMatrix w{format, rows, cols, bytes.data()};
      const PackedWeight packed = Pack(*table, nullptr, w);
      const auto x = RandomActivations(n, cols, rng);
      std::vector<float> batch(static_cast<size_t>(n * rows)), one(static_cast<size_t>(rows));
      MatMul(*table, nullptr, x.data(), n, packed, batch.data(), ActivationMode::kGgmlRounded);
      for (int64_t t : {0, 1, 15, 16, 31, 47, 48, 52}) {
        MatMul(*table, nullptr, x.data() + t * cols, 1, packed, one.data(),
               ActivationMode::kGgmlRounded);
        for (int64_t r = 0; r < rows; ++r) {
          ASSERT_EQ(one[static_cast<size_t>(r)], batch[static_cast<size_t>(t * rows + r)])
              << "token " << t << " row " << r;
        }
      }
    }
  }
}

// The K-quants sum in integers over each super-block on every variant, with the same float step
// per super-block, so the avx2 and avx512_vnni variants (and AMX groups) give the same bits.
TEST(QuantMatMulTest, KQuantsGiveTheSameBitsOnEveryVariant) {
  std::mt19937 rng(31);
  const std::vector<const KernelTable*> tables = FastTables();
  ASSERT_FALSE(tables.empty());
  for (WeightFormat format : {WeightFormat::kQ4_K, WeightFormat::kQ5_K, WeightFormat::kQ6_K}) {
    const int64_t rows = 19, cols = 2 * 256;
    const auto bytes = RandomBlocks(format, rows, cols, rng);
    const WeightMatrix w{format, rows, cols, bytes.data()};
    for (int64_t n : {1, 5, 40}) {
      const auto x = RandomActivations(n, cols, rng);
      std::vector<float> first(static_cast<size_t>(n * rows)), got(first.size());
      for (const KernelTable* table : tables) {
        SCOPED_TRACE(std::string(QuantMatMulVariant(*table)) + " " +
                     std::string(FormatName(format)) + " n=" + std::to_string(n));
        const PackedWeight packed = Pack(*table, nullptr, w);
        std::vector<float>& out = table == tables.front() ? first : got;
        MatMul(*table, nullptr, x.data(), n, packed, out.data(), ActivationMode::kGgmlRounded);
        if (table != tables.front()) {
          EXPECT_EQ(got, first);
        }
      }
    }
  }
}

// A group of jobs of mixed formats, token counts and row counts (a MoE layer's experts, the
// Q4_K_M mix of Q4_K and Q6_K) computes what each job's own MatMul does, bit for bit, with the
// pool splitting the group's panels; jobs over the grouped token limit and unpacked weights take
// the per-job path.
TEST(QuantMatMulTest, GroupedJobsEqualTheirOwnMatMuls) {
  std::mt19937 rng(29);
  ThreadPool pool(3);
  for (const KernelTable* table : FastTables()) {
    SCOPED_TRACE(std::string(QuantMatMulVariant(*table)));
    const WeightFormat formats[] = {WeightFormat::kQ4_K, WeightFormat::kQ6_K, WeightFormat::kQ8_0,
                                    WeightFormat::kQ4_0};
    const int64_t cols = 512;
    std::vector<std::vector<uint8_t>> bytes;
    std::vector<PackedWeight> weights;
    std::vector<std::vector<float>> inputs;
    std::vector<int64_t> tokens;
    for (int i = 0; i < 9; ++i) {
      const WeightFormat format = formats[i % 4];
      const int64_t rows = 16 * (1 + i % 3) + (i % 2 ? 5 : 0);
      bytes.push_back(RandomBlocks(format, rows, cols, rng));
      const WeightMatrix w{format, rows, cols, bytes.back().data()};
      // One job left unpacked: the whole group then runs job by job.
      weights.push_back(i == 8 ? PackedWeight{w, {}, {}} : Pack(*table, nullptr, w));
      tokens.push_back(i == 4 ? kGroupedMaxTokens + 1 : 1 + i % 3);
      inputs.push_back(RandomActivations(tokens.back(), cols, rng));
    }
    for (const size_t count : {size_t{8}, size_t{9}}) {  // grouped; with the unpacked job
      for (const bool over_limit : {false, true}) {
        std::vector<MatMulJob> jobs;
        std::vector<std::vector<float>> want, got;
        for (size_t i = 0; i < count; ++i) {
          if (i == 4 && !over_limit) continue;
          const int64_t n = tokens[i], rows = weights[i].source.rows;
          want.emplace_back(static_cast<size_t>(n * rows));
          got.emplace_back(static_cast<size_t>(n * rows), -1.0f);
          MatMul(*table, nullptr, inputs[i].data(), n, weights[i], want.back().data(),
                 ActivationMode::kGgmlRounded);
        }
        size_t j = 0;
        for (size_t i = 0; i < count; ++i) {
          if (i == 4 && !over_limit) continue;
          jobs.push_back({inputs[i].data(), tokens[i], &weights[i], got[j++].data()});
        }
        GroupedMatMul(*table, &pool, jobs, ActivationMode::kGgmlRounded);
        EXPECT_EQ(got, want) << count << " jobs, over the limit " << over_limit;
      }
    }
  }
}

// Experts as a MoE layer groups them: each expert's gate and up jobs read the same rows (sharing
// one quantization when format and width match; here one up projection is Q6_K, which must not
// share the Q4_K gate's), token counts from 1 to the limit (enough rows that the group quantizes
// over the pool, and threads claim ranges weighed by those counts). Every job equals its own
// MatMul, bit for bit.
TEST(QuantMatMulTest, GroupedExpertsShareQuantizedRowsAndEqualTheirOwnMatMuls) {
  std::mt19937 rng(31);
  for (const int threads : {2, 3}) {
    ThreadPool pool(threads);
    for (const KernelTable* table : FastTables()) {
      SCOPED_TRACE(std::string(QuantMatMulVariant(*table)) + " threads " + std::to_string(threads));
      const int64_t cols = 1024, experts = 8;
      std::vector<std::vector<uint8_t>> bytes;
      std::vector<PackedWeight> weights;
      std::vector<std::vector<float>> inputs;
      std::vector<MatMulJob> jobs;
      std::vector<std::vector<float>> want, got;
      want.reserve(2 * experts);
      got.reserve(2 * experts);
      for (int64_t e = 0; e < experts; ++e) {
        inputs.push_back(RandomActivations(1 + (e * 5) % kGroupedMaxTokens, cols, rng));
      }
      for (int64_t e = 0; e < experts; ++e) {
        for (const bool up : {false, true}) {
          const WeightFormat format = up && e == 3 ? WeightFormat::kQ6_K : WeightFormat::kQ4_K;
          const int64_t rows = 32 + 16 * (e % 2) + (up ? 3 : 0);
          bytes.push_back(RandomBlocks(format, rows, cols, rng));
          weights.push_back(
              Pack(*table, nullptr, WeightMatrix{format, rows, cols, bytes.back().data()}));
        }
      }
      for (int64_t e = 0; e < experts; ++e) {
        const int64_t n = 1 + (e * 5) % kGroupedMaxTokens;
        for (int64_t k = 0; k < 2; ++k) {
          const PackedWeight& w = weights[static_cast<size_t>(2 * e + k)];
          want.emplace_back(static_cast<size_t>(n * w.source.rows));
          got.emplace_back(static_cast<size_t>(n * w.source.rows), -1.0f);
          MatMul(*table, nullptr, inputs[static_cast<size_t>(e)].data(), n, w, want.back().data(),
                 ActivationMode::kGgmlRounded);
          jobs.push_back({inputs[static_cast<size_t>(e)].data(), n, &w, got.back().data()});
        }
      }
      GroupedMatMul(*table, &pool, jobs, ActivationMode::kGgmlRounded);
      EXPECT_EQ(got, want);
    }
  }
}

// The largest codes times activations that all quantize to +-127: the AVX2 compact kernels sum
// up to eight registers of 16-bit products before widening, which must stay exact there too.
TEST(QuantMatMulTest, CompactPanelsAreExactAtTheLargestCodesAndActivations) {
  std::mt19937 rng(17);
  for (const KernelTable* table : FastTables()) {
    for (WeightFormat format : kQuantFormats) {
      SCOPED_TRACE(std::string(QuantMatMulVariant(*table)) + " " + std::string(FormatName(format)));
      const int64_t rows = 8, cols = 2 * 256;
      const auto bytes = RandomBlocks(format, rows, cols, rng, /*all_ones=*/true);
      const WeightMatrix w{format, rows, cols, bytes.data()};
      const PackedWeight packed = Pack(*table, nullptr, w);
      // 48 tokens: on a CPU with AMX-INT8, Q4_K's and Q5_K's largest u * sc in their high bytes.
      for (const auto& [value, n] : {std::pair{1.0f, int64_t{4}}, std::pair{-1.0f, int64_t{4}},
                                     std::pair{-1.0f, int64_t{48}}}) {
        const std::vector<float> x(static_cast<size_t>(n * cols), value);
        std::vector<float> want(static_cast<size_t>(n * rows)), got(want.size());
        ASSERT_TRUE(QuantMatMul(*table, nullptr, x.data(), n, w, want.data()));
        MatMul(*table, nullptr, x.data(), n, packed, got.data(), ActivationMode::kGgmlRounded);
        EXPECT_EQ(got, want) << value << " n=" << n;
        // And against the dequantized weights (the products are exact integers here).
        std::vector<float> reference(want.size());
        MatMul(RefKernels(), nullptr, x.data(), n, w, reference.data(),
               ActivationMode::kGgmlRounded);
        for (size_t i = 0; i < got.size(); ++i) {
          EXPECT_NEAR(got[i], reference[i], 1e-3f * std::max(1.0f, std::fabs(reference[i])));
        }
      }
    }
  }
}

TEST(QuantMatMulTest, QuantizedActivationsMatchRoundTrip) {
  std::mt19937 rng(3);
  for (WeightFormat format : kQuantFormats) {
    SCOPED_TRACE(std::string(FormatName(format)));
    const int64_t n = 3, cols = 512;
    const auto x = RandomActivations(n, cols, rng);
    std::vector<float> rounded(x.size());
    std::vector<float> correction(static_cast<size_t>(n * cols / 32));
    ref::RoundActivations(format, x.data(), rounded.data(), n * cols, correction.data());
    ref::QuantizedActivations a;
    ref::ResizeQuantizedActivations(format, n, cols, &a);
    ref::QuantizeActivationRows(format, 5, x.data(), 0, n, &a);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t g = 0; g < a.subs; ++g) {
        const size_t k = static_cast<size_t>(t * a.subs + g);
        int32_t sum = 0;
        double rounded_sum = 0.0;
        for (int64_t e = g * a.sub; e < (g + 1) * a.sub; ++e) {
          const size_t i = static_cast<size_t>(t * cols + e);
          ASSERT_EQ(a.d[k] * static_cast<float>(a.q[i]), rounded[i]);
          sum += a.q[i];
          rounded_sum += rounded[i];
        }
        EXPECT_EQ(a.bias[k], -5 * sum);
        if (ref::UsesBlockSums(format)) {
          // Q8_1's s is what RoundActivations' correction adds back to the rounded sum.
          EXPECT_NEAR(a.s[k], rounded_sum + correction[static_cast<size_t>(t * cols / 32 + g)],
                      1e-6 * (1.0 + std::fabs(a.s[k])));
        }
      }
    }
  }
}

TEST(QuantMatMulTest, SimdActivationQuantizationIsBitIdentical) {
  using Quantize =
      void (*)(WeightFormat, int32_t, const float*, int64_t, int64_t, ref::QuantizedActivations*);
  std::vector<std::pair<std::string, Quantize>> variants;
  if (x86::Avx2QuantVariant() != nullptr)
    variants.emplace_back("avx2", x86::QuantizeActivationRowsAvx2);
  if (x86::Avx512VnniQuantVariant() != nullptr)
    variants.emplace_back("avx512", x86::QuantizeActivationRowsAvx512);
  if (variants.empty()) GTEST_SKIP() << "no AVX2";
  std::mt19937 rng(9);
  // 768 columns: three 256-blocks (24 sub-blocks of 32); 4,608: the blocks' scales in two runs
  // of up to 16, and 144 sub-blocks of 32 in runs of 16.
  for (const auto& [name, quantize] : variants) {
    for (WeightFormat format : kQuantFormats) {
      for (const int64_t cols : {768, 4608}) {
        SCOPED_TRACE(name + " " + std::string(FormatName(format)) + " " + std::to_string(cols));
        const int64_t n = 5;
        auto x = RandomActivations(n, cols, rng);
        const auto at = [&](int64_t t, int64_t c) -> float& {
          return x[static_cast<size_t>(t * cols + c)];
        };
        // Ties: halves of the grid land exactly between two codes after scaling by 127 / 127.
        for (int64_t i = 0; i < 32; ++i) at(3, i) = (i == 0) ? 127.0f : i + 0.5f;
        // A row of zeros; one whose largest magnitude is reached by both signs, the negative
        // first in one block and the positive first in the last; a block of zeros in a row.
        std::fill(x.begin() + cols, x.begin() + 2 * cols, 0.0f);
        at(4, 40) = -500.0f;
        at(4, 90) = 500.0f;
        at(4, cols - 200) = 500.0f;
        at(4, cols - 100) = -500.0f;
        std::fill(x.begin() + 256, x.begin() + 512, 0.0f);
        // Scales in float16's subnormal range, and block sums past its largest value.
        for (int64_t i = 0; i < cols; ++i) at(2, i) *= i < cols / 2 ? 3e-5f : 1e4f;
        ref::QuantizedActivations want, got;
        ref::ResizeQuantizedActivations(format, n, cols, &want);
        ref::ResizeQuantizedActivations(format, n, cols, &got);
        ref::QuantizeActivationRows(format, 7, x.data(), 0, n, &want);
        quantize(format, 7, x.data(), 0, n, &got);
        EXPECT_EQ(got.q, want.q);
        EXPECT_EQ(got.d, want.d);
        EXPECT_EQ(got.s, want.s);
        EXPECT_EQ(got.bias, want.bias);
        EXPECT_EQ(got.sums, want.sums);
      }
    }
  }
}

TEST(QuantMatMulTest, MatchesReferenceOnOddShapes) {
  std::mt19937 rng(11);
  ThreadPool pool(2);
  const auto tables = FastTables();
  ASSERT_FALSE(tables.empty());
  for (const KernelTable* table : tables) {
    SCOPED_TRACE(std::string(QuantMatMulVariant(*table)));
    for (WeightFormat format : kQuantFormats) {
      const int64_t block = BlockElements(format);
      for (int64_t n : {1, 3, 17, 64, 130}) {
        ExpectMatchesReference(*table, &pool, format, n, 37, block, rng);
        ExpectMatchesReference(*table, n == 17 ? nullptr : &pool, format, n, 21,
                               block == 256 ? 3 * block : 5 * block, rng);
      }
      ExpectMatchesReference(*table, &pool, format, 2, 1, block, rng);
      ExpectMatchesReference(*table, &pool, format, 9, 64, 2 * block, rng);
    }
  }
}

// RADIX_KERNELS=ref makes the process-wide table the scalar one, and the fast path declines it,
// so MatMul keeps the reference code. Runs in a fresh process (ActiveKernels() is chosen once).
TEST(QuantMatMulDeathTest, ForcedRefEnvironmentKeepsReferencePath) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("RADIX_KERNELS", "ref", 1);
        const bool ok =
            ActiveKernels().name == "ref" && QuantMatMulVariant(ActiveKernels()).empty();
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(QuantMatMulTest, PackedBytesIsWhatPackAllocates) {
  std::mt19937 rng(7);
  for (const KernelTable* table : AvailableKernels()) {
    for (WeightFormat format : kQuantFormats) {
      const int64_t cols = BlockElements(format) * 2;
      const auto bytes = RandomBlocks(format, 21, cols, rng);
      const WeightMatrix w{format, 21, cols, bytes.data()};
      const auto packed = static_cast<int64_t>(Pack(*table, nullptr, w).panels.size());
      EXPECT_EQ(PackedBytes(*table, w), packed) << table->name << " " << FormatName(format);
    }
    // F32 matrices pack into float_matmul.h's panels: whole 16-row panels.
    std::vector<float> floats(64, 1.0f);
    const WeightMatrix f32{WeightFormat::kF32, 2, 32, floats.data()};
    EXPECT_EQ(PackedBytes(*table, f32), 16 * 32 * 4) << table->name;
    EXPECT_EQ(static_cast<int64_t>(Pack(*table, nullptr, f32).panels.size()), 16 * 32 * 4);
  }
}

// A packed F32 matrix multiplies through its panels in either activation mode, with the panels'
// numerics (float_matmul.h), and needs no source bytes.
TEST(QuantMatMulTest, PackedF32MatricesRunTheirPanels) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int64_t rows = 37, cols = 70, n = 9;
  std::vector<float> w(static_cast<size_t>(rows * cols)), x(static_cast<size_t>(n * cols));
  for (float& v : w) v = dist(rng);
  for (float& v : x) v = dist(rng);
  for (const KernelTable* table : AvailableKernels()) {
    PackedWeight packed = Pack(*table, nullptr, {WeightFormat::kF32, rows, cols, w.data()});
    ASSERT_TRUE(packed.packed()) << table->name;
    packed.source.data = nullptr;
    std::vector<float> panels(static_cast<size_t>(F32PanelFloats(rows, cols)));
    PackF32Panels(w.data(), cols, rows, cols, false, panels.data());
    std::vector<float> want(static_cast<size_t>(n * rows));
    F32PanelMatMul(FloatKernelsFor(*table), nullptr, x.data(), cols, n, panels.data(), rows, cols,
                   want.data(), rows);
    for (ActivationMode mode : {ActivationMode::kExact, ActivationMode::kGgmlRounded}) {
      std::vector<float> got(want.size(), NAN);
      MatMul(*table, nullptr, x.data(), n, packed, got.data(), mode);
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), sizeof(float) * want.size()))
          << table->name;
    }
  }
}

}  // namespace
}  // namespace radixserve::kernels
