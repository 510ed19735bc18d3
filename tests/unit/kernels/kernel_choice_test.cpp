// The per-machine kernel choice (kernels/kernel_choice.h): a forced BF16 product or quantized
// tiling is used without measuring, a bad name is an error naming the variable, and a measurement
// is kept on disk under the machine's key and reused by the next choice with that key only.
#include "kernels/kernel_choice.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "kernels/bf16_panels.h"
#include "kernels/kernel_table.h"
#include "kernels/quant_matmul.h"

namespace radixserve::kernels {
namespace {

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("radix-kernel-choice-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

TEST(KernelChoiceTest, ProductNamesRoundTrip) {
  for (const Bf16Product product :
       {Bf16Product::kWidenFma, Bf16Product::kDotBf16, Bf16Product::kAmxTile}) {
    EXPECT_EQ(ParseBf16Product(Bf16ProductName(product)), product);
  }
  EXPECT_FALSE(ParseBf16Product("fma").has_value());
}

// Whether the active table runs one BF16 product (widen_fma): avx2, or avx512 without AVX512-BF16.
bool OneBf16Product() {
  const std::string_view table = ActiveKernels().name;
  return Bf16PanelsFor(table) && (table == "avx2" || !Bf16DotSupported());
}

TEST(KernelChoiceTest, ForcedProductIsUsedWithoutMeasuring) {
  TempDir dir;
  KernelChoiceInputs inputs{"dot_bf16", dir.str(), "test machine", "expand"};
  const KernelChoiceResult result = ChooseKernels(inputs);
  ASSERT_EQ(result.error, "");
  if (OneBf16Product()) {  // as in AvxTwoHasOneBf16Product
    EXPECT_EQ(result.choice.bf16_product, Bf16Product::kWidenFma);
    EXPECT_EQ(result.choice.bf16_source, "the only one here");
  } else {
    EXPECT_EQ(result.choice.bf16_product, Bf16Product::kDotBf16);
    EXPECT_EQ(result.choice.bf16_source, "forced");
  }
  EXPECT_FALSE(result.choice.bf16_timing.has_value());
  EXPECT_FALSE(std::filesystem::exists(dir.str()));
  EXPECT_EQ(result.choice.table, ActiveKernels().name);
  EXPECT_NE(DescribeKernelChoice(result.choice).find(ActiveKernels().name), std::string::npos);

  inputs.forced_bf16_product = "widen_fma";
  EXPECT_EQ(ChooseKernels(inputs).choice.bf16_product, Bf16Product::kWidenFma);
}

// The avx2 table runs BF16 panels with its one product, widen_fma, whatever RADIX_BF16_PRODUCT
// names (another name has no effect; the start-up line says so), and measures nothing. So does
// the avx512 table on a CPU without AVX512-BF16.
TEST(KernelChoiceTest, AvxTwoHasOneBf16Product) {
  const KernelTable* avx2 = Avx2Kernels();
  if (avx2 == nullptr) GTEST_SKIP() << "no AVX2 on this CPU";
  TempDir dir;
  for (const char* forced : {"", "widen_fma", "dot_bf16"}) {
    SCOPED_TRACE(forced);
    const KernelChoiceResult result = ChooseKernels({forced, dir.str(), "test machine", ""}, *avx2);
    ASSERT_EQ(result.error, "");
    EXPECT_EQ(result.choice.table, "avx2");
    EXPECT_TRUE(result.choice.bf16_panels);
    EXPECT_EQ(result.choice.bf16_product, Bf16Product::kWidenFma);
    EXPECT_EQ(result.choice.bf16_source,
              std::string(forced) == "widen_fma" ? "forced" : "the only one here");
    EXPECT_FALSE(result.choice.bf16_timing.has_value());
    EXPECT_NE(DescribeKernelChoice(result.choice).find("BF16 panels with widen_fma"),
              std::string::npos);
  }
  EXPECT_FALSE(std::filesystem::exists(dir.str()));
}

TEST(KernelChoiceTest, ForcedAmxNeedsTheHardware) {
  if (!Bf16PanelsSupported()) GTEST_SKIP() << "no AVX-512 panels on this CPU";
  TempDir dir;
  const KernelChoiceResult result = ChooseKernels({"amx_bf16", dir.str(), "test machine", ""});
  if (Bf16AmxSupported()) {
    ASSERT_EQ(result.error, "");
    EXPECT_EQ(result.choice.bf16_product, Bf16Product::kAmxTile);
    EXPECT_EQ(result.choice.bf16_source, "forced");
  } else {
    EXPECT_NE(result.error.find("RADIX_BF16_PRODUCT=amx_bf16: this machine has no usable AMX"),
              std::string::npos)
        << result.error;
  }
}

TEST(KernelChoiceTest, QuantTilesNamesRoundTrip) {
  for (const QuantTiles tiles : {QuantTiles::kExpand, QuantTiles::kCompact}) {
    EXPECT_EQ(ParseQuantTiles(QuantTilesName(tiles)), tiles);
  }
  EXPECT_FALSE(ParseQuantTiles("codes").has_value());
}

// Both families forced: nothing is measured and nothing is written. Without the avx512_vnni
// matmul there is no tiling to choose, and a forced one is not reported as chosen.
TEST(KernelChoiceTest, ForcedTilesAreUsedWithoutMeasuring) {
  TempDir dir;
  const bool vnni = QuantMatMulVariant(ActiveKernels()) == "avx512_vnni";
  for (const QuantTiles tiles : {QuantTiles::kExpand, QuantTiles::kCompact}) {
    const KernelChoiceResult result =
        ChooseKernels({"widen_fma", dir.str(), "test machine", std::string(QuantTilesName(tiles))});
    ASSERT_EQ(result.error, "");
    EXPECT_FALSE(result.choice.quant_tiles_timing.has_value());
    const bool described =
        DescribeKernelChoice(result.choice).find("forced by RADIX_QUANT_TILES") !=
        std::string::npos;
    EXPECT_EQ(described, vnni);
    if (vnni) {
      EXPECT_EQ(result.choice.quant_tiles, tiles);
      EXPECT_EQ(result.choice.quant_tiles_source, "forced");
    } else {
      EXPECT_EQ(result.choice.quant_tiles_source, "");
    }
  }
  EXPECT_FALSE(std::filesystem::exists(dir.str()));
}

TEST(KernelChoiceTest, UnknownForcedTilesNameTheVariable) {
  const KernelChoiceResult result = ChooseKernels({"", "", "test machine", "wide"});
  EXPECT_NE(result.error.find("RADIX_QUANT_TILES=wide"), std::string::npos) << result.error;
  EXPECT_NE(result.error.find("compact"), std::string::npos) << result.error;
}

// The tiles are measured where the avx512_vnni variant runs (and only there): the faster is
// chosen, kept beside the BF16 measurement, and a start that forced one family and measured the
// other leaves a file the next start completes.
TEST(KernelChoiceTest, TilesMeasurementIsKeptBesideTheBf16One) {
  TempDir dir;
  const bool vnni = QuantMatMulVariant(ActiveKernels()) == "avx512_vnni";
  const KernelChoiceResult first = ChooseKernels({"dot_bf16", dir.str(), "machine D", ""});
  ASSERT_EQ(first.error, "");
  if (!vnni) {
    EXPECT_EQ(first.choice.quant_tiles_source, "");
    EXPECT_FALSE(MeasureQuantTiles(ActiveKernels()).has_value());
    GTEST_SKIP() << "no avx512_vnni variant on this CPU: nothing to measure";
  }
  EXPECT_EQ(first.choice.quant_tiles_source, "measured");
  ASSERT_TRUE(first.choice.quant_tiles_timing.has_value());
  const QuantTilesTiming timing = *first.choice.quant_tiles_timing;
  EXPECT_GT(timing.expand, 0.0);
  EXPECT_GT(timing.compact, 0.0);
  EXPECT_EQ(first.choice.quant_tiles,
            timing.compact < timing.expand ? QuantTiles::kCompact : QuantTiles::kExpand);
  ASSERT_TRUE(std::filesystem::exists(first.choice.cache_file)) << first.choice.cache_file;

  const KernelChoiceResult second = ChooseKernels({"", dir.str(), "machine D", ""});
  EXPECT_EQ(second.choice.quant_tiles_source, "cached");
  EXPECT_EQ(second.choice.quant_tiles, first.choice.quant_tiles);
  const std::string one = OneBf16Product() ? "the only one here" : "";
  EXPECT_EQ(second.choice.bf16_source, Bf16DotSupported() ? "measured" : one);
  const KernelChoiceResult third = ChooseKernels({"", dir.str(), "machine D", ""});
  EXPECT_EQ(third.choice.quant_tiles_source, "cached");
  EXPECT_EQ(third.choice.bf16_source, Bf16DotSupported() ? "cached" : one);
  ASSERT_TRUE(third.choice.quant_tiles_timing.has_value());
  EXPECT_NEAR(third.choice.quant_tiles_timing->compact, timing.compact, 1e-9 * timing.compact);
}

TEST(KernelChoiceTest, UnknownForcedProductNamesTheVariable) {
  const KernelChoiceResult result = ChooseKernels({"fast", "", "test machine", ""});
  EXPECT_NE(result.error.find("RADIX_BF16_PRODUCT=fast"), std::string::npos) << result.error;
  EXPECT_NE(result.error.find("widen_fma"), std::string::npos) << result.error;
}

TEST(KernelChoiceTest, MeasurementIsKeptPerMachineKey) {
  if (ActiveKernels().name != "avx512" || !Bf16DotSupported()) {
    GTEST_SKIP() << "no AVX512-BF16 on this CPU: one BF16 product, nothing to measure";
  }
  TempDir dir;
  const KernelChoiceInputs inputs{"", dir.str() + "/kernels", "machine A", ""};
  const KernelChoiceResult first = ChooseKernels(inputs);
  ASSERT_EQ(first.error, "");
  EXPECT_EQ(first.choice.bf16_source, "measured");
  ASSERT_TRUE(first.choice.bf16_timing.has_value());
  const Bf16Timing timing = *first.choice.bf16_timing;
  EXPECT_GT(timing.widen_fma, 0.0);
  EXPECT_GT(timing.dot_bf16, 0.0);
  // AMX is measured exactly where it runs, and the fastest product is chosen.
  EXPECT_EQ(timing.amx_bf16 > 0.0, Bf16AmxSupported());
  Bf16Product fastest =
      timing.dot_bf16 < timing.widen_fma ? Bf16Product::kDotBf16 : Bf16Product::kWidenFma;
  if (timing.amx_bf16 > 0.0 && timing.amx_bf16 < std::min(timing.dot_bf16, timing.widen_fma)) {
    fastest = Bf16Product::kAmxTile;
  }
  EXPECT_EQ(first.choice.bf16_product, fastest);
  ASSERT_TRUE(std::filesystem::exists(first.choice.cache_file)) << first.choice.cache_file;

  const KernelChoiceResult second = ChooseKernels(inputs);
  EXPECT_EQ(second.choice.bf16_source, "cached");
  EXPECT_EQ(second.choice.bf16_product, first.choice.bf16_product);
  ASSERT_TRUE(second.choice.bf16_timing.has_value());
  EXPECT_NEAR(second.choice.bf16_timing->widen_fma, timing.widen_fma, 1e-9 * timing.widen_fma);
  EXPECT_NEAR(second.choice.bf16_timing->dot_bf16, timing.dot_bf16, 1e-9 * timing.dot_bf16);
  EXPECT_NEAR(second.choice.bf16_timing->amx_bf16, timing.amx_bf16, 1e-9 * timing.amx_bf16);

  // Another CPU or binary: its own file, measured again.
  const KernelChoiceResult other = ChooseKernels({"", dir.str() + "/kernels", "machine B", ""});
  EXPECT_EQ(other.choice.bf16_source, "measured");
  EXPECT_NE(other.choice.cache_file, first.choice.cache_file);

  // A file whose key does not match (a hash collision, a hand edit) is not trusted.
  std::filesystem::copy_file(first.choice.cache_file, other.choice.cache_file,
                             std::filesystem::copy_options::overwrite_existing);
  EXPECT_EQ(ChooseKernels({"", dir.str() + "/kernels", "machine B", ""}).choice.bf16_source,
            "measured");
}

TEST(KernelChoiceTest, UnwritableCacheStillChooses) {
  if (ActiveKernels().name != "avx512" || !Bf16DotSupported()) {
    GTEST_SKIP() << "no AVX512-BF16 on this CPU: one BF16 product, nothing to measure";
  }
  const KernelChoiceResult result = ChooseKernels({"", "/proc/radix-no-such-dir", "machine C", ""});
  EXPECT_EQ(result.choice.bf16_source, "measured");
  EXPECT_EQ(result.choice.cache_file, "");
}

}  // namespace
}  // namespace radixserve::kernels
