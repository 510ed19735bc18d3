// Blocked paged attention (AttendChunk + MergeChunks) on every CPU variant and KV element type
// against a double-precision softmax computed here from the values the cache actually holds;
// a query's result is bit-identical alone or inside a larger block; stores round like half.h and
// fp8.h, the scalar conversions that fp8_test.cpp checks against the formats' definitions, and
// int8 heads quantize as Int8Reference below (symmetric, max |x| / 127, round half to even).
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/float_matmul.h"
#include "kernels/fp8.h"
#include "kernels/half.h"

namespace radixserve::kernels {
namespace {

// What one element of `type` holds after storing f (fp8: f / scale encoded, read back times scale).
float RoundTrip(KvType type, float f, float scale) {
  switch (type) {
    case KvType::kF32:
      return f;
    case KvType::kBF16:
      return Bf16ToF32(F32ToBf16(f));
    case KvType::kF16:
      return F16ToF32(F32ToF16(f));
    case KvType::kFp8E4M3:
      return Fp8E4M3ToF32(F32ToFp8E4M3(f * (1.0f / scale))) * scale;
    case KvType::kFp8E5M2:
      return Fp8E5M2ToF32(F32ToFp8E5M2(f * (1.0f / scale))) * scale;
    case KvType::kInt8:
      break;  // per head: Int8Reference
  }
  return 0.0f;
}

// int8 per head, written here from its definition: the scale s = max |x| / 127 (0 for an
// all-zero head), codes round-half-even(x / s) (0 when s is 0), bytes = codes then s.
std::vector<uint8_t> Int8Reference(const float* x, int64_t d, std::vector<double>* values) {
  float amax = 0.0f;
  for (int64_t c = 0; c < d; ++c) amax = std::max(amax, std::fabs(x[c]));
  const float s = amax / 127.0f;
  std::vector<uint8_t> bytes(static_cast<size_t>(d) + 4);
  for (int64_t c = 0; c < d; ++c) {
    const float q = s > 0.0f ? std::nearbyint(x[c] * (1.0f / s)) : 0.0f;
    const auto code = static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f));
    std::memcpy(&bytes[static_cast<size_t>(c)], &code, 1);
    if (values != nullptr) values->push_back(static_cast<double>(static_cast<float>(code) * s));
  }
  std::memcpy(bytes.data() + d, &s, 4);
  return bytes;
}

constexpr KvType kAllTypes[] = {KvType::kF32,     KvType::kBF16,    KvType::kF16,
                                KvType::kFp8E4M3, KvType::kFp8E5M2, KvType::kInt8};

struct Cache {
  KvType type;
  float scale;  // fp8 dequantization factor
  std::vector<uint8_t> k, v;
  std::vector<double> k_values, v_values;  // what the cache holds, as doubles
};

// values[(slot * heads + head) * d + c] is what the cache holds; the bytes follow the layout of
// kernels/kv_type.h (KvRowBytes per slot).
Cache RandomCache(KvType type, int64_t slots, int64_t heads, int64_t d, std::mt19937& rng) {
  // A non-trivial fp8 scale, so that the test also covers scaling on both sides.
  Cache c{type, IsFp8(type) ? 0.375f : 1.0f, {}, {}, {}, {}};
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const int64_t width = heads * d;
  for (auto* pair : {&c.k, &c.v}) {
    pair->resize(static_cast<size_t>(slots) * KvRowBytes(type, heads, d));
  }
  if (type == KvType::kInt8) {
    for (int which = 0; which < 2; ++which) {
      std::vector<uint8_t>& bytes = which == 0 ? c.k : c.v;
      std::vector<double>& values = which == 0 ? c.k_values : c.v_values;
      std::vector<float> head(static_cast<size_t>(d));
      for (int64_t h = 0; h < slots * heads; ++h) {
        for (float& x : head) x = dist(rng);
        const std::vector<uint8_t> coded = Int8Reference(head.data(), d, &values);
        std::copy(coded.begin(), coded.end(), bytes.begin() + h * (d + 4));
      }
    }
    return c;
  }
  c.k_values.resize(static_cast<size_t>(slots * width));
  c.v_values.resize(c.k_values.size());
  for (int which = 0; which < 2; ++which) {
    std::vector<uint8_t>& bytes = which == 0 ? c.k : c.v;
    std::vector<double>& values = which == 0 ? c.k_values : c.v_values;
    for (int64_t i = 0; i < slots * width; ++i) {
      const float f = dist(rng);
      if (type == KvType::kF32) {
        std::memcpy(bytes.data() + i * 4, &f, 4);
      } else if (IsFp8(type)) {
        const float x = f * (1.0f / c.scale);
        bytes[static_cast<size_t>(i)] =
            type == KvType::kFp8E4M3 ? F32ToFp8E4M3(x) : F32ToFp8E5M2(x);
      } else {
        const uint16_t h = type == KvType::kBF16 ? F32ToBf16(f) : F32ToF16(f);
        std::memcpy(bytes.data() + i * 2, &h, 2);
      }
      values[static_cast<size_t>(i)] = RoundTrip(type, f, c.scale);
    }
  }
  return c;
}

// Runs one block over all chunks up to max(last) and merges, as PagedAttention does.
std::vector<float> Attend(const KernelTable& table, const AttentionShape& shape,
                          const QueryBlock& b, Cache& cache, const int32_t* slots) {
  const int64_t d = shape.head_dim;
  const int64_t end = *std::max_element(b.last, b.last + b.nq) + 1;
  const int64_t begin = *std::min_element(b.first, b.first + b.nq) / kKeyChunk * kKeyChunk;
  const int64_t chunks = (end - begin + kKeyChunk - 1) / kKeyChunk;
  const int64_t stride = b.nq * (d + 2);
  // Not cleared: AttendChunk writes every partial (NaN here would show through otherwise).
  std::vector<float> partial(static_cast<size_t>(chunks * stride),
                             std::numeric_limits<float>::quiet_NaN());
  for (int64_t c = 0; c < chunks; ++c) {
    float* p = partial.data() + c * stride;
    const int64_t kb = begin + c * kKeyChunk;
    AttendChunk(table, shape, b, KvBuffer(cache.k.data(), cache.type, cache.scale),
                KvBuffer(cache.v.data(), cache.type, cache.scale), slots, kb,
                std::min(end, kb + kKeyChunk), p, p + b.nq, p + 2 * b.nq);
  }
  std::vector<float> out(static_cast<size_t>(b.nq * d));
  for (int64_t i = 0; i < b.nq; ++i) {
    MergeChunks(partial.data() + i, partial.data() + b.nq + i, stride,
                partial.data() + 2 * b.nq + i * d, stride, chunks, d, out.data() + i * d);
  }
  return out;
}

struct Case {
  int64_t head_dim;
  int num_kv_heads;
  int64_t context;
  int64_t window;  // 0: none
  float softcap;
};

TEST(AttentionTest, EveryVariantAndKvTypeMatchesADoublePrecisionSoftmax) {
  std::mt19937 rng(5);
  const Case cases[] = {{64, 3, 1, 0, 0.0f},   {64, 3, 700, 0, 0.0f}, {128, 2, 200, 0, 0.0f},
                        {32, 2, 70, 0, 0.0f},  {20, 2, 130, 0, 0.0f}, {256, 1, 300, 100, 0.0f},
                        {48, 2, 257, 0, 30.0f}};
  for (const Case& tc : cases) {
    for (KvType type : kAllTypes) {
      const int64_t d = tc.head_dim, width = tc.num_kv_heads * d;
      const int64_t slots_total = tc.context + 5;
      Cache cache = RandomCache(type, slots_total, tc.num_kv_heads, d, rng);
      std::vector<int32_t> slots(static_cast<size_t>(slots_total));
      std::iota(slots.begin(), slots.end(), 0);
      std::shuffle(slots.begin(), slots.end(), rng);
      AttentionShape shape{tc.num_kv_heads * 2, tc.num_kv_heads, static_cast<int>(d),
                           1.0f / std::sqrt(static_cast<float>(d)), tc.softcap};
      // Queries at the last few positions (a prefill block), all on kv head 1 % heads.
      const int64_t nq = std::min<int64_t>(6, tc.context);
      std::vector<float> q(static_cast<size_t>(nq * d));
      std::normal_distribution<float> dist(0.0f, 1.0f);
      for (float& x : q) x = dist(rng);
      std::vector<int64_t> first(static_cast<size_t>(nq)), last(first.size());
      for (int64_t i = 0; i < nq; ++i) {
        last[static_cast<size_t>(i)] = tc.context - nq + i;
        first[static_cast<size_t>(i)] =
            tc.window > 0 ? std::max<int64_t>(0, last[static_cast<size_t>(i)] - tc.window + 1) : 0;
      }
      const int kv_head = 1 % tc.num_kv_heads;
      QueryBlock block{q.data(), nq, first.data(), last.data(), kv_head};
      for (const KernelTable* table : AvailableKernels()) {
        const std::vector<float> got = Attend(*table, shape, block, cache, slots.data());
        for (int64_t i = 0; i < nq; ++i) {
          std::vector<double> s;
          double max = -1e300;
          for (int64_t j = first[static_cast<size_t>(i)]; j <= last[static_cast<size_t>(i)]; ++j) {
            const int64_t at = slots[static_cast<size_t>(j)] * width + kv_head * d;
            double dot = 0.0;
            for (int64_t c = 0; c < d; ++c)
              dot +=
                  q[static_cast<size_t>(i * d + c)] * cache.k_values[static_cast<size_t>(at + c)];
            dot *= shape.scale;
            if (tc.softcap > 0.0f) dot = tc.softcap * std::tanh(dot / tc.softcap);
            s.push_back(dot);
            max = std::max(max, dot);
          }
          double sum = 0.0;
          for (double& x : s) sum += (x = std::exp(x - max));
          for (int64_t c = 0; c < d; ++c) {
            double want = 0.0;
            for (size_t j = 0; j < s.size(); ++j) {
              const int64_t slot = slots[static_cast<size_t>(first[static_cast<size_t>(i)]) + j];
              want +=
                  s[j] / sum * cache.v_values[static_cast<size_t>(slot * width + kv_head * d + c)];
            }
            ASSERT_NEAR(got[static_cast<size_t>(i * d + c)], want, 2e-5)
                << table->name << " type=" << static_cast<int>(type) << " d=" << d
                << " context=" << tc.context << " query " << i << " c=" << c;
          }
        }
      }
    }
  }
}

// A query's attention is the same bits alone as inside a block of 21 queries.
void ExpectSameBitsAloneAsInsideABlock(bool scattered) {
  std::mt19937 rng(9);
  const int64_t d = 64, context = 600;
  Cache cache = RandomCache(KvType::kBF16, context, 3, d, rng);
  std::vector<int32_t> slots(static_cast<size_t>(context));
  std::iota(slots.begin(), slots.end(), 0);
  if (scattered) std::shuffle(slots.begin(), slots.end(), rng);
  AttentionShape shape{9, 3, static_cast<int>(d), 0.125f, 0.0f};
  const int64_t nq = 21;
  std::vector<float> q(static_cast<size_t>(nq * d));
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& x : q) x = dist(rng);
  std::vector<int64_t> first(static_cast<size_t>(nq), 0), last(static_cast<size_t>(nq));
  for (int64_t i = 0; i < nq; ++i) last[static_cast<size_t>(i)] = context - 1 - (i / 3) * 37;
  for (const KernelTable* table : AvailableKernels()) {
    QueryBlock block{q.data(), nq, first.data(), last.data(), 2};
    const std::vector<float> together = Attend(*table, shape, block, cache, slots.data());
    for (int64_t i = 0; i < nq; ++i) {
      QueryBlock one{q.data() + i * d, 1, first.data() + i, last.data() + i, 2};
      const std::vector<float> alone = Attend(*table, shape, one, cache, slots.data());
      ASSERT_EQ(0, std::memcmp(alone.data(), together.data() + i * d, sizeof(float) * d))
          << table->name << " query " << i;
    }
  }
}

// With the slots scattered (rows gathered) and in order (rows read in place; from 16 queries on
// the AVX2 and AVX-512 scores transpose the keys).
TEST(AttentionTest, AQueryGivesTheSameBitsAloneAsInsideABlock) {
  for (bool scattered : {true, false}) {
    SCOPED_TRACE(scattered ? "scattered slots" : "slots in order");
    ExpectSameBitsAloneAsInsideABlock(scattered);
  }
}

// The online softmax's rescale rides on the value pass: accumulate with factors r gives the bits
// of multiplying each query's sums by its factor first (one rounded product) and accumulating with
// factors of 1 (x * 1 is x: the pass as it was before the fold), and no factors give the bits of
// accumulating onto zeros, whatever acc held (NaN here). Every variant, head sizes with and
// without a remainder of the vectors, query counts around each variant's groups.
TEST(AttentionTest, AccumulateRescalesTheSumsThenAddsTheKeys) {
  std::mt19937 rng(33);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const AttentionKernels* k : AvailableAttentionKernels()) {
    for (int64_t d :
         {int64_t{20}, int64_t{32}, int64_t{48}, int64_t{64}, int64_t{80}, int64_t{128}}) {
      for (int64_t nq :
           {int64_t{1}, int64_t{2}, int64_t{4}, int64_t{5}, int64_t{7}, int64_t{13}, int64_t{17}}) {
        for (int64_t nk : {int64_t{1}, int64_t{9}, kKeyTile}) {
          const int64_t ldv = d + 16;  // rows of a wider gather, as with several heads
          std::vector<float> v(static_cast<size_t>(nk * ldv)),
              p(static_cast<size_t>(nq * kKeyTile));
          for (float& x : v) x = dist(rng);
          for (float& x : p) x = std::fabs(dist(rng));
          std::vector<float> r(static_cast<size_t>(nq)), ones(r.size(), 1.0f);
          for (float& x : r) x = std::fabs(dist(rng));
          r[0] = 0.0f;
          if (nq > 1) r[1] = 1.0f;
          std::vector<float> acc(static_cast<size_t>(nq * d));
          for (float& x : acc) x = dist(rng);
          std::vector<float> got = acc, want = acc;
          for (int64_t i = 0; i < nq; ++i)
            for (int64_t c = 0; c < d; ++c)
              want[static_cast<size_t>(i * d + c)] *= r[static_cast<size_t>(i)];
          k->accumulate(p.data(), nq, v.data(), ldv, nk, d, r.data(), got.data());
          k->accumulate(p.data(), nq, v.data(), ldv, nk, d, ones.data(), want.data());
          ASSERT_EQ(0, std::memcmp(got.data(), want.data(), sizeof(float) * got.size()))
              << k->name << " d=" << d << " nq=" << nq << " nk=" << nk << " rescaled";
          std::fill(got.begin(), got.end(), nan);
          std::fill(want.begin(), want.end(), 0.0f);
          k->accumulate(p.data(), nq, v.data(), ldv, nk, d, nullptr, got.data());
          k->accumulate(p.data(), nq, v.data(), ldv, nk, d, ones.data(), want.data());
          ASSERT_EQ(0, std::memcmp(got.data(), want.data(), sizeof(float) * got.size()))
              << k->name << " d=" << d << " nq=" << nq << " nk=" << nk << " from zero";
        }
      }
    }
  }
}

// Direct reads (AttentionKernels::scores and accumulate_rows): the scores against dot products
// in double precision of what the cache holds, and both bit for bit against the variant's float
// GEMM and accumulate over gathered rows, for every head size they take and blocks of any size.
TEST(AttentionTest, DirectReadsGiveTheGatheredRowsBits) {
  std::mt19937 rng(12);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  int variants = 0;
  for (const KernelTable* table : AvailableKernels()) {
    const AttentionKernels* k = &AttentionKernelsFor(*table);
    if (k->reads_direct == nullptr) continue;
    ++variants;
    EXPECT_FALSE(k->reads_direct(KvType::kInt8, 64));
    EXPECT_FALSE(k->reads_direct(KvType::kBF16, 48));
    const FloatGemmKernels& gk = FloatKernelsFor(*table);
    for (KvType type :
         {KvType::kF32, KvType::kBF16, KvType::kF16, KvType::kFp8E4M3, KvType::kFp8E5M2}) {
      for (int64_t d : {int64_t{32}, int64_t{64}, int64_t{128}, int64_t{256}}) {
        ASSERT_TRUE(k->reads_direct(type, d)) << k->name << " d=" << d;
        const int heads = 3;
        const int64_t slots_total = 80;
        Cache cache = RandomCache(type, slots_total, heads, d, rng);
        std::vector<int32_t> slots(static_cast<size_t>(slots_total));
        std::iota(slots.begin(), slots.end(), 0);
        std::shuffle(slots.begin(), slots.end(), rng);
        const int64_t stride = heads * d;
        // 16 queries and more take the transposed keys (the remainders of the AVX2 tiles of 3
        // queries x 4 vectors of 8 keys and of the AVX-512 tiles of 4 queries x 4 vectors of 16:
        // 16 to 23 queries; 7, 14, 20, 33 and 49 keys) and the value sums over widened rows
        // (groups of up to 4 or 6 queries of near-equal size).
        for (int64_t nq : {int64_t{1}, int64_t{3}, int64_t{4}, int64_t{9}, int64_t{16}, int64_t{17},
                           int64_t{18}, int64_t{19}, int64_t{20}, int64_t{21}, int64_t{23}}) {
          for (int64_t nk : {int64_t{1}, int64_t{7}, int64_t{14}, int64_t{20}, int64_t{33},
                             int64_t{49}, kKeyTile}) {
            // Heads 1 and 2 of each row; the next rows fetched ahead are the slots after nk.
            const int used = 2;
            const int64_t offset = d;
            std::vector<float> q(static_cast<size_t>(used * nq * d));
            for (float& x : q) x = dist(rng);
            std::vector<float> s(static_cast<size_t>(used * nq * kKeyTile), -1.0f);
            k->scores(q.data(), used, nq, cache.k.data(), type, cache.scale, slots.data(), nk,
                      stride, offset, d, slots.data() + nk, slots_total - nk, s.data());
            std::vector<float> rows(static_cast<size_t>(nk * d));
            for (int h = 0; h < used; ++h) {
              k->gather(cache.k.data(), type, cache.scale, slots.data(), nk, stride, offset + h * d,
                        d, rows.data());
              std::vector<float> gemm(static_cast<size_t>(nq * kKeyTile));
              gk.gemm(q.data() + h * nq * d, d, nq, rows.data(), WeightFormat::kF32, d * 4, d, 0,
                      nk, gemm.data(), kKeyTile);
              for (int64_t i = 0; i < nq; ++i) {
                for (int64_t j = 0; j < nk; ++j) {
                  const float got = s[static_cast<size_t>((h * nq + i) * kKeyTile + j)];
                  ASSERT_EQ(0, std::memcmp(&got, &gemm[static_cast<size_t>(i * kKeyTile + j)], 4))
                      << k->name << " type=" << static_cast<int>(type) << " d=" << d << " nq=" << nq
                      << " nk=" << nk << " head " << h << " q " << i;
                  const int64_t at = slots[static_cast<size_t>(j)] * stride + offset + h * d;
                  double dot = 0.0, size = 0.0;
                  for (int64_t c = 0; c < d; ++c) {
                    const double a = q[static_cast<size_t>((h * nq + i) * d + c)];
                    const double b = cache.k_values[static_cast<size_t>(at + c)];
                    dot += a * b;
                    size += std::fabs(a * b);
                  }
                  ASSERT_NEAR(got, dot, 1e-6 * size + 1e-30);
                }
              }
            }
            // Value sums onto non-zero accumulators, rescaled, and from zero.
            std::vector<float> p(static_cast<size_t>(used * nq * kKeyTile));
            for (float& x : p) x = std::fabs(dist(rng));
            std::vector<float> rescale(static_cast<size_t>(used * nq));
            for (float& x : rescale) x = std::fabs(dist(rng));
            for (const float* r :
                 {static_cast<const float*>(rescale.data()), static_cast<const float*>(nullptr)}) {
              std::vector<float> acc(static_cast<size_t>(used * nq * d));
              for (float& x : acc) x = dist(rng);
              std::vector<float> want = acc;
              for (int h = 0; h < used; ++h) {
                k->gather(cache.v.data(), type, cache.scale, slots.data(), nk, stride,
                          offset + h * d, d, rows.data());
                k->accumulate(p.data() + h * nq * kKeyTile, nq, rows.data(), d, nk, d,
                              r != nullptr ? r + h * nq : nullptr, want.data() + h * nq * d);
              }
              float* const accs[] = {acc.data(), acc.data() + nq * d};
              k->accumulate_rows(p.data(), used, nq, cache.v.data(), type, cache.scale,
                                 slots.data(), nk, stride, offset, d, slots.data() + nk,
                                 slots_total - nk, r, accs);
              ASSERT_EQ(0, std::memcmp(acc.data(), want.data(), sizeof(float) * acc.size()))
                  << k->name << " type=" << static_cast<int>(type) << " d=" << d << " nq=" << nq
                  << " nk=" << nk << (r != nullptr ? " rescaled" : " from zero");
            }
          }
        }
      }
    }
  }
  // The AVX2 and AVX-512 variants both read in place (and were checked above) where the CPU
  // runs them.
  EXPECT_EQ(variants, (Avx2AttentionKernels() != nullptr ? 1 : 0) +
                          (Avx512AttentionKernels() != nullptr ? 1 : 0));
}

// The same keys and values give the same bits whether their slots lie in order (rows read in
// place) or scattered through the pool (rows gathered).
TEST(AttentionTest, ResultsDoNotDependOnWhereTheRowsLie) {
  std::mt19937 rng(21);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (KvType type : {KvType::kF32, KvType::kBF16, KvType::kF16}) {
    for (int64_t d : {int64_t{64}, int64_t{128}}) {
      const int heads = 2;
      const int64_t context = 600, nq = 4;
      Cache in_order = RandomCache(type, context, heads, d, rng);
      Cache scattered = in_order;
      std::vector<int32_t> order(static_cast<size_t>(context)), perm(order.size());
      std::iota(order.begin(), order.end(), 0);
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      const size_t row = KvRowBytes(type, heads, d);
      for (int64_t j = 0; j < context; ++j) {
        const size_t to = static_cast<size_t>(perm[static_cast<size_t>(j)]) * row;
        for (auto [src, dst] :
             {std::pair{&in_order.k, &scattered.k}, {&in_order.v, &scattered.v}}) {
          std::copy(src->begin() + j * row, src->begin() + (j + 1) * row, dst->begin() + to);
        }
      }
      AttentionShape shape{heads * 4, heads, static_cast<int>(d), 0.125f, 0.0f};
      std::vector<float> q(static_cast<size_t>(nq * d));
      for (float& x : q) x = dist(rng);
      std::vector<int64_t> first(static_cast<size_t>(nq), 0), last(static_cast<size_t>(nq));
      for (int64_t i = 0; i < nq; ++i) last[static_cast<size_t>(i)] = context - 1 - 50 * i;
      QueryBlock block{q.data(), nq, first.data(), last.data(), 1};
      for (const KernelTable* table : AvailableKernels()) {
        const std::vector<float> a = Attend(*table, shape, block, in_order, order.data());
        const std::vector<float> b = Attend(*table, shape, block, scattered, perm.data());
        ASSERT_EQ(0, std::memcmp(a.data(), b.data(), sizeof(float) * a.size()))
            << table->name << " type=" << static_cast<int>(type) << " d=" << d;
      }
    }
  }
}

// AttendChunkHeads over several KV heads gives each head AttendChunk's bits, whether the rows
// are read in place (bf16 at d = 64, slots in runs) or gathered (scattered slots; fp8; bf16 at
// d = 48), with the heads' queries apart in memory.
TEST(AttentionTest, AttendChunkHeadsGivesEachHeadAttendChunksBits) {
  std::mt19937 rng(15);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const struct {
    KvType type;
    int64_t d;
  } cases[] = {{KvType::kBF16, 64}, {KvType::kFp8E4M3, 64}, {KvType::kBF16, 48}};
  for (const auto& tc : cases) {
    const int heads = 3;
    const int64_t d = tc.d, context = 400, nq = 5;
    Cache cache = RandomCache(tc.type, context, heads, d, rng);
    // Slots in runs of 16 for the first chunk (read in place where the type allows), scattered
    // after it (gathered).
    std::vector<int32_t> slots(static_cast<size_t>(context));
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin() + kKeyChunk, slots.end(), rng);
    for (int64_t r = 0; r + 16 <= kKeyChunk; r += 32) {
      std::swap_ranges(slots.begin() + r, slots.begin() + r + 16, slots.begin() + r + 16);
    }
    AttentionShape shape{heads * 2, heads, static_cast<int>(d), 0.125f, 0.0f};
    std::vector<int64_t> first(static_cast<size_t>(nq), 0), last(static_cast<size_t>(nq));
    for (int64_t i = 0; i < nq; ++i) last[static_cast<size_t>(i)] = context - 1 - 40 * i;
    // Queries of head h at q + (2 h + 1) * nq * d: not side by side.
    std::vector<float> q(static_cast<size_t>(2 * heads * nq * d));
    for (float& x : q) x = dist(rng);
    std::vector<QueryBlock> blocks;
    for (int h = 0; h < heads; ++h) {
      blocks.push_back(
          QueryBlock{q.data() + (2 * h + 1) * nq * d, nq, first.data(), last.data(), h});
    }
    const KvBuffer kb(cache.k.data(), tc.type, cache.scale),
        vb(cache.v.data(), tc.type, cache.scale);
    for (const KernelTable* table : AvailableKernels()) {
      for (int64_t begin = 0; begin < context; begin += kKeyChunk) {
        const int64_t end = std::min(context, begin + kKeyChunk);
        std::vector<float> together(static_cast<size_t>(heads * nq * (d + 2)));
        std::vector<float*> m, l, acc;
        for (int h = 0; h < heads; ++h) {
          float* part = together.data() + h * nq * (d + 2);
          m.push_back(part);
          l.push_back(part + nq);
          acc.push_back(part + 2 * nq);
        }
        AttendChunkHeads(*table, shape, blocks.data(), heads, kb, vb, slots.data(), begin, end,
                         m.data(), l.data(), acc.data());
        for (int h = 0; h < heads; ++h) {
          std::vector<float> alone(static_cast<size_t>(nq * (d + 2)));
          AttendChunk(*table, shape, blocks[static_cast<size_t>(h)], kb, vb, slots.data(), begin,
                      end, alone.data(), alone.data() + nq, alone.data() + 2 * nq);
          ASSERT_EQ(0, std::memcmp(alone.data(), together.data() + h * nq * (d + 2),
                                   sizeof(float) * alone.size()))
              << table->name << " type=" << static_cast<int>(tc.type) << " d=" << d << " head " << h
              << " chunk at " << begin;
        }
      }
    }
  }
}

TEST(AttentionTest, StoreAndGatherRoundLikeTheScalarConversions) {
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  const int64_t d = 37;
  std::vector<float> row(static_cast<size_t>(d));
  for (float& x : row) x = dist(rng);
  row[0] = 1.00390625f;  // a bf16 tie
  row[1] = 1.0625f;      // an fp8 e4m3 tie (between 1 and 1.125: stays 1)
  row[2] = 1e6f;         // saturates in both fp8 formats
  row[3] = -std::numeric_limits<float>::infinity();
  row[4] = 3e-4f;  // fp8 subnormal range
  for (const AttentionKernels* k : AvailableAttentionKernels()) {
    for (KvType type : kAllTypes) {
      if (type == KvType::kInt8) continue;  // StoresInt8HeadsAsTheirDefinition
      for (float scale : {1.0f, 0.0625f, 3.0f}) {
        if (!IsFp8(type) && scale != 1.0f) continue;
        std::vector<uint8_t> buf(static_cast<size_t>(2 * d) * KvTypeSize(type));
        k->store(row.data(), d, type, scale,
                 buf.data() + static_cast<size_t>(d) * KvTypeSize(type));
        std::vector<float> back(static_cast<size_t>(d));
        const int32_t slot = 1;
        k->gather(buf.data(), type, scale, &slot, 1, d, 0, d, back.data());
        for (int64_t c = 0; c < d; ++c) {
          const float want = RoundTrip(type, row[static_cast<size_t>(c)], scale);
          ASSERT_EQ(back[static_cast<size_t>(c)], want)
              << k->name << " type=" << static_cast<int>(type) << " scale=" << scale << " c=" << c;
        }
      }
    }
  }
}

TEST(AttentionTest, StoresInt8HeadsAsTheirDefinition) {
  std::mt19937 rng(4);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (int64_t d : {int64_t{37}, int64_t{64}, int64_t{128}}) {
    std::vector<float> head(static_cast<size_t>(d));
    for (float& x : head) x = dist(rng);
    head[0] = 127.0f * 0.5f;  // with amax 127 below: a tie, rounds to even
    head[1] = -127.0f;
    head[2] = 0.0f;
    head[3] = 2.5f;
    const std::vector<float> zeros(static_cast<size_t>(d), 0.0f);
    const std::vector<float>* const sources[] = {&head, &zeros};
    for (const std::vector<float>* src : sources) {
      std::vector<double> want;
      const std::vector<uint8_t> bytes = Int8Reference(src->data(), d, &want);
      for (const AttentionKernels* k : AvailableAttentionKernels()) {
        // Slot 1 of a one-head buffer.
        std::vector<uint8_t> buf(2 * bytes.size(), 0xAB);
        k->store(src->data(), d, KvType::kInt8, 1.0f, buf.data() + bytes.size());
        ASSERT_EQ(0, std::memcmp(buf.data() + bytes.size(), bytes.data(), bytes.size()))
            << k->name << " d=" << d;
        std::vector<float> back(static_cast<size_t>(d));
        const int32_t slot = 1;
        k->gather(buf.data(), KvType::kInt8, 1.0f, &slot, 1, d + 4, 0, d, back.data());
        for (int64_t c = 0; c < d; ++c) {
          ASSERT_EQ(back[static_cast<size_t>(c)], static_cast<float>(want[static_cast<size_t>(c)]))
              << k->name << " d=" << d << " c=" << c;
        }
      }
    }
  }
}

}  // namespace
}  // namespace radixserve::kernels
