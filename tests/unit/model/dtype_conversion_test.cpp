// --dtype for checkpoint weights: WeightStore converts unquantized matrices to the requested
// float storage at load. The expected roundings come from the CPU's F16C conversion and a bf16
// round-to-nearest-even written out here, not from kernels/half.h.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cstring>
#include <string>

#include "kernels/half.h"
#include "model/gguf_file.h"
#include "model/weight_store.h"

namespace radixserve::model {
namespace {

const std::string kStoriesGguf =
    std::string(RADIX_SHARED_DIR) + "/models/stories260K/gguf/stories260K.gguf";
const std::string kMatrix = "blk.0.attn_q.weight";

std::unique_ptr<WeightStore> OpenStories() {
  auto gguf = GgufFile::Open(kStoriesGguf, true);
  EXPECT_TRUE(gguf.ok()) << gguf.status().message();
  auto store = WeightStore::FromGguf(std::move(gguf).value());
  EXPECT_TRUE(store.ok()) << store.status().message();
  return std::move(store).value();
}

uint16_t Bf16Bits(float f) {  // nearest, ties to even (finite inputs)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t lsb = (u >> 16) & 1u;
  return static_cast<uint16_t>((u + 0x7FFFu + lsb) >> 16);
}

// The CPU's own conversion (F16C, nearest even). Not _Float16: clang 14 (the sanitizer build)
// has no _Float16 on x86 without AVX512-FP16.
__attribute__((target("f16c"))) uint16_t F16Bits(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

TEST(DtypeConversionTest, MatricesAreConvertedWithNearestEvenRounding) {
  if (!kernels::CpuHasF16c()) GTEST_SKIP() << "the reference conversion needs F16C";
  for (auto format : {kernels::WeightFormat::kBF16, kernels::WeightFormat::kF16}) {
    auto reference = OpenStories();
    auto store = OpenStories();
    const WeightTensor* t = reference->Find(kMatrix);
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->format, kernels::WeightFormat::kF32);
    const int64_t rows = t->shape[0], cols = t->shape[1];
    store->set_matrix_storage(format);
    auto m = store->RequireMatrix(kMatrix, rows, cols);
    ASSERT_TRUE(m.ok()) << m.status().message();
    EXPECT_EQ(m->format, format);
    const auto* source = static_cast<const float*>(t->data);
    const auto* converted = static_cast<const uint16_t*>(m->data);
    for (int64_t i = 0; i < rows * cols; ++i) {
      const uint16_t want =
          format == kernels::WeightFormat::kBF16 ? Bf16Bits(source[i]) : F16Bits(source[i]);
      ASSERT_EQ(converted[i], want) << i;
    }
    // Asked again, the same converted buffer; counted once, at two bytes per element.
    auto again = store->RequireMatrix(kMatrix, rows, cols);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->data, m->data);
    EXPECT_EQ(store->used_bytes(), rows * cols * 2);
    EXPECT_EQ(store->converted_matrices(), 1);
  }
}

TEST(DtypeConversionTest, AutoAndSameFormatKeepTheStoredTensor) {
  auto store = OpenStories();
  const WeightTensor* t = store->Find(kMatrix);
  ASSERT_NE(t, nullptr);
  auto kept = store->RequireMatrix(kMatrix, t->shape[0], t->shape[1]);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->data, t->data);

  auto f32 = OpenStories();
  f32->set_matrix_storage(kernels::WeightFormat::kF32);
  auto same = f32->RequireMatrix(kMatrix, t->shape[0], t->shape[1]);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->format, kernels::WeightFormat::kF32);
  EXPECT_EQ(f32->converted_matrices(), 0);
}

TEST(DtypeConversionTest, VectorsStayFloat32) {
  auto store = OpenStories();
  store->set_matrix_storage(kernels::WeightFormat::kBF16);
  const WeightTensor* norm = store->Find("blk.0.attn_norm.weight");
  ASSERT_NE(norm, nullptr);
  auto v = store->RequireVector("blk.0.attn_norm.weight", norm->shape[0]);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(std::memcmp(v->data(), norm->data, v->size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace radixserve::model
