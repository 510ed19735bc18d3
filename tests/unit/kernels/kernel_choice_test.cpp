// The per-machine kernel choice (kernels/kernel_choice.h): a forced BF16 product is used without
// measuring, a bad name is an error naming the variable, and a measurement is kept on disk under
// the machine's key and reused by the next choice with that key only.
#include "kernels/kernel_choice.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "kernels/bf16_panels.h"
#include "kernels/kernel_table.h"

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
  for (const Bf16Product product : {Bf16Product::kWidenFma, Bf16Product::kDotBf16}) {
    EXPECT_EQ(ParseBf16Product(Bf16ProductName(product)), product);
  }
  EXPECT_FALSE(ParseBf16Product("fma").has_value());
}

TEST(KernelChoiceTest, ForcedProductIsUsedWithoutMeasuring) {
  TempDir dir;
  KernelChoiceInputs inputs{"dot_bf16", dir.str(), "test machine"};
  const KernelChoiceResult result = ChooseKernels(inputs);
  ASSERT_EQ(result.error, "");
  EXPECT_EQ(result.choice.bf16_product, Bf16Product::kDotBf16);
  EXPECT_EQ(result.choice.bf16_source, "forced");
  EXPECT_FALSE(result.choice.bf16_timing.has_value());
  EXPECT_FALSE(std::filesystem::exists(dir.str()));
  EXPECT_EQ(result.choice.table, ActiveKernels().name);
  EXPECT_NE(DescribeKernelChoice(result.choice).find(ActiveKernels().name), std::string::npos);

  inputs.forced_bf16_product = "widen_fma";
  EXPECT_EQ(ChooseKernels(inputs).choice.bf16_product, Bf16Product::kWidenFma);
}

TEST(KernelChoiceTest, UnknownForcedProductNamesTheVariable) {
  const KernelChoiceResult result = ChooseKernels({"fast", "", "test machine"});
  EXPECT_NE(result.error.find("RADIX_BF16_PRODUCT=fast"), std::string::npos) << result.error;
  EXPECT_NE(result.error.find("widen_fma"), std::string::npos) << result.error;
}

TEST(KernelChoiceTest, MeasurementIsKeptPerMachineKey) {
  if (ActiveKernels().name != "avx512" || !Bf16PanelsSupported()) {
    GTEST_SKIP() << "no AVX512-BF16 panels on this CPU: nothing to measure";
  }
  TempDir dir;
  const KernelChoiceInputs inputs{"", dir.str() + "/kernels", "machine A"};
  const KernelChoiceResult first = ChooseKernels(inputs);
  ASSERT_EQ(first.error, "");
  EXPECT_EQ(first.choice.bf16_source, "measured");
  ASSERT_TRUE(first.choice.bf16_timing.has_value());
  const Bf16Timing timing = *first.choice.bf16_timing;
  EXPECT_GT(timing.widen_fma, 0.0);
  EXPECT_GT(timing.dot_bf16, 0.0);
  // The faster one is chosen.
  EXPECT_EQ(first.choice.bf16_product,
            timing.dot_bf16 < timing.widen_fma ? Bf16Product::kDotBf16 : Bf16Product::kWidenFma);
  ASSERT_TRUE(std::filesystem::exists(first.choice.cache_file)) << first.choice.cache_file;

  const KernelChoiceResult second = ChooseKernels(inputs);
  EXPECT_EQ(second.choice.bf16_source, "cached");
  EXPECT_EQ(second.choice.bf16_product, first.choice.bf16_product);
  ASSERT_TRUE(second.choice.bf16_timing.has_value());
  EXPECT_NEAR(second.choice.bf16_timing->widen_fma, timing.widen_fma, 1e-9 * timing.widen_fma);
  EXPECT_NEAR(second.choice.bf16_timing->dot_bf16, timing.dot_bf16, 1e-9 * timing.dot_bf16);

  // Another CPU or binary: its own file, measured again.
  const KernelChoiceResult other = ChooseKernels({"", dir.str() + "/kernels", "machine B"});
  EXPECT_EQ(other.choice.bf16_source, "measured");
  EXPECT_NE(other.choice.cache_file, first.choice.cache_file);

  // A file whose key does not match (a hash collision, a hand edit) is not trusted.
  std::filesystem::copy_file(first.choice.cache_file, other.choice.cache_file,
                             std::filesystem::copy_options::overwrite_existing);
  EXPECT_EQ(ChooseKernels({"", dir.str() + "/kernels", "machine B"}).choice.bf16_source,
            "measured");
}

TEST(KernelChoiceTest, UnwritableCacheStillChooses) {
  if (ActiveKernels().name != "avx512" || !Bf16PanelsSupported()) {
    GTEST_SKIP() << "no AVX512-BF16 panels on this CPU: nothing to measure";
  }
  const KernelChoiceResult result = ChooseKernels({"", "/proc/radix-no-such-dir", "machine C"});
  EXPECT_EQ(result.choice.bf16_source, "measured");
  EXPECT_EQ(result.choice.cache_file, "");
}

}  // namespace
}  // namespace radixserve::kernels
