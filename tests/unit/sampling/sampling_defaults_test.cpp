#include "sampling/sampling_defaults.h"

#include <gtest/gtest.h>

namespace radixserve::sampling {
namespace {

using nlohmann::json;

TEST(SamplingDefaultsTest, ParsesSource) {
  EXPECT_EQ(ParseSamplingDefaultsSource("model").value(), SamplingDefaultsSource::kModel);
  EXPECT_EQ(ParseSamplingDefaultsSource("openai").value(), SamplingDefaultsSource::kOpenAI);
  EXPECT_FALSE(ParseSamplingDefaultsSource("hf").ok());
}

TEST(SamplingDefaultsTest, ModelDefaultsTakeTheFiveKeysPresent) {
  // A Qwen-style generation_config.json.
  const json config = json::parse(R"({"bos_token_id": 151643, "do_sample": true,
      "eos_token_id": [151645, 151643], "pad_token_id": 151643, "temperature": 0.7,
      "top_k": 20, "top_p": 0.8, "repetition_penalty": 1.05, "min_p": null,
      "transformers_version": "4.37.0"})");
  auto defaults = ModelSamplingDefaults(config, SamplingDefaultsSource::kModel);
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(*defaults,
            json::parse(
                R"({"temperature": 0.7, "top_k": 20, "top_p": 0.8, "repetition_penalty": 1.05})"));
  EXPECT_EQ(*ModelSamplingDefaults(config, SamplingDefaultsSource::kOpenAI), json::object());
  EXPECT_EQ(*ModelSamplingDefaults(json(), SamplingDefaultsSource::kModel), json::object());
  EXPECT_FALSE(ModelSamplingDefaults(json::parse(R"({"temperature": "hot"})"),
                                     SamplingDefaultsSource::kModel)
                   .ok());
}

TEST(SamplingDefaultsTest, PreferredParamsMergeUnderTheRequest) {
  auto preferred = ParsePreferredSamplingParams(R"({"temperature": 0.3, "top_k": 5})");
  ASSERT_TRUE(preferred.ok());
  const json request = json::parse(R"({"temperature": 0.9, "top_p": null, "top_k": null})");
  EXPECT_EQ(MergeSamplingDefaults(*preferred, request),
            json::parse(R"({"temperature": 0.9, "top_k": 5, "top_p": null})"));
  EXPECT_EQ(MergeSamplingDefaults(*preferred, json::object()), *preferred);
  EXPECT_EQ(*ParsePreferredSamplingParams(""), json::object());
  EXPECT_FALSE(ParsePreferredSamplingParams("[1]").ok());
  EXPECT_FALSE(ParsePreferredSamplingParams("{bad").ok());
}

}  // namespace
}  // namespace radixserve::sampling
