// Defaults, constructor normalization and every verify() message, against SGLang 0.5.x's
// sampling_params.py as transcribed in /work/shared/reference/sglang-runtime.md §4.1-4.3.
#include "sampling/sampling_params.h"

#include <gtest/gtest.h>

#include <fstream>

namespace radixserve::sampling {
namespace {

using nlohmann::json;

SamplingParams Parse(const json& j, SamplingJsonOptions options = {}) {
  auto p = SamplingParams::FromJson(j, options);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? p.value() : SamplingParams{};
}

// The verify() message for a sampling_params object (empty string if it passes).
std::string VerifyMessage(const json& j, int64_t vocab = 1000, SamplingJsonOptions options = {}) {
  Status s = Parse(j, options).Verify(vocab);
  if (!s.ok()) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  }
  return s.message();
}

TEST(SamplingParamsTest, Defaults) {
  const SamplingParams p = Parse(json::object());
  EXPECT_EQ(p.max_new_tokens, 128);
  EXPECT_TRUE(p.stop.empty());
  EXPECT_TRUE(p.stop_token_ids.empty());
  EXPECT_TRUE(p.stop_regex.empty());
  EXPECT_EQ(p.temperature, 1.0);
  EXPECT_EQ(p.top_p, 1.0);
  EXPECT_EQ(p.top_k, kTopKAll);
  EXPECT_EQ(p.min_p, 0.0);
  EXPECT_EQ(p.frequency_penalty, 0.0);
  EXPECT_EQ(p.presence_penalty, 0.0);
  EXPECT_EQ(p.repetition_penalty, 1.0);
  EXPECT_EQ(p.min_new_tokens, 0);
  EXPECT_EQ(p.n, 1);
  EXPECT_FALSE(p.json_schema || p.regex || p.ebnf || p.structural_tag);
  EXPECT_FALSE(p.ignore_eos);
  EXPECT_TRUE(p.skip_special_tokens);
  EXPECT_TRUE(p.spaces_between_special_tokens);
  EXPECT_FALSE(p.no_stop_trim);
  EXPECT_TRUE(p.custom_params.is_null());
  EXPECT_FALSE(p.stream_interval);
  EXPECT_TRUE(p.logit_bias.empty());
  EXPECT_FALSE(p.sampling_seed);
  EXPECT_FALSE(p.IsGreedy());
  EXPECT_TRUE(p.Verify(1000).ok());
}

TEST(SamplingParamsTest, ParsesEveryField) {
  const SamplingParams p = Parse(json::parse(R"({
    "max_new_tokens": 7, "stop": "END", "stop_token_ids": [5, 2, 5, null], "stop_regex": ["a+"],
    "temperature": 0.7, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "frequency_penalty": 0.5,
    "presence_penalty": -0.5, "repetition_penalty": 1.2, "min_new_tokens": 3, "n": 2,
    "regex": "[0-9]+", "structural_tag": "{}", "ignore_eos": true, "skip_special_tokens": false,
    "spaces_between_special_tokens": false, "no_stop_trim": true, "custom_params": {"k": 1},
    "stream_interval": 4, "logit_bias": {"10": 2.5, "3": -100}, "sampling_seed": 1234})"));
  EXPECT_EQ(p.max_new_tokens, 7);
  EXPECT_EQ(p.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(p.stop_token_ids, (std::vector<int32_t>{2, 5}));
  EXPECT_EQ(p.stop_regex, std::vector<std::string>{"a+"});
  EXPECT_EQ(p.temperature, 0.7);
  EXPECT_EQ(p.top_p, 0.9);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_EQ(p.min_p, 0.05);
  EXPECT_EQ(p.frequency_penalty, 0.5);
  EXPECT_EQ(p.presence_penalty, -0.5);
  EXPECT_EQ(p.repetition_penalty, 1.2);
  EXPECT_EQ(p.min_new_tokens, 3);
  EXPECT_EQ(p.n, 2);
  EXPECT_EQ(p.regex, "[0-9]+");
  EXPECT_EQ(p.structural_tag, "{}");
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_FALSE(p.skip_special_tokens);
  EXPECT_FALSE(p.spaces_between_special_tokens);
  EXPECT_TRUE(p.no_stop_trim);
  EXPECT_EQ(p.custom_params, json({{"k", 1}}));
  EXPECT_EQ(p.stream_interval, 4);
  ASSERT_EQ(p.logit_bias.size(), 2u);
  EXPECT_EQ(p.sampling_seed, 1234u);
  EXPECT_TRUE(p.Verify(1000).ok());
}

TEST(SamplingParamsTest, NullMeansDefault) {
  const SamplingParams p = Parse(
      json::parse(R"({"temperature": null, "top_k": null, "max_new_tokens": null, "stop": null})"));
  EXPECT_EQ(p.temperature, 1.0);
  EXPECT_EQ(p.top_k, kTopKAll);
  EXPECT_FALSE(p.max_new_tokens);  // None: limited by the context only
  EXPECT_TRUE(p.stop.empty());
}

TEST(SamplingParamsTest, GreedyNormalization) {
  for (double t : {0.0, 1e-7, 9.99e-7}) {
    const SamplingParams p = Parse({{"temperature", t}, {"top_k", 50}});
    EXPECT_EQ(p.temperature, 1.0) << t;
    EXPECT_EQ(p.top_k, 1) << t;
    EXPECT_TRUE(p.IsGreedy());
  }
  const SamplingParams not_greedy = Parse({{"temperature", 1e-6}});
  EXPECT_EQ(not_greedy.temperature, 1e-6);
  EXPECT_EQ(not_greedy.top_k, kTopKAll);
  // Greedy overrides even an invalid top_k, as SGLang's constructor does.
  EXPECT_EQ(VerifyMessage({{"temperature", 0}, {"top_k", 0}}), "");
  EXPECT_EQ(Parse({{"top_k", -1}}).top_k, kTopKAll);
}

TEST(SamplingParamsTest, VerifyMessages) {
  EXPECT_EQ(VerifyMessage({{"temperature", -1}}), "temperature must be non-negative, got -1.");
  EXPECT_EQ(VerifyMessage({{"temperature", -0.5}}), "temperature must be non-negative, got -0.5.");
  EXPECT_EQ(VerifyMessage({{"top_p", 0}}), "top_p must be in (0, 1], got 0.");
  EXPECT_EQ(VerifyMessage({{"top_p", 1.5}}), "top_p must be in (0, 1], got 1.5.");
  EXPECT_EQ(VerifyMessage({{"top_p", 1}}), "");
  EXPECT_EQ(VerifyMessage({{"min_p", -0.1}}), "min_p must be in [0, 1], got -0.1.");
  EXPECT_EQ(VerifyMessage({{"min_p", 2}}), "min_p must be in [0, 1], got 2.");
  EXPECT_EQ(VerifyMessage({{"min_p", 0}}), "");
  EXPECT_EQ(VerifyMessage({{"min_p", 1}}), "");
  EXPECT_EQ(VerifyMessage({{"top_k", 0}}), "top_k must be -1 (disable) or at least 1, got 0.");
  EXPECT_EQ(VerifyMessage({{"top_k", -2}}), "top_k must be -1 (disable) or at least 1, got -2.");
  EXPECT_EQ(VerifyMessage({{"frequency_penalty", 2.5}}),
            "frequency_penalty must be in [-2, 2], got 2.5.");
  EXPECT_EQ(VerifyMessage({{"frequency_penalty", -3}}),
            "frequency_penalty must be in [-2, 2], got -3.");
  EXPECT_EQ(VerifyMessage({{"frequency_penalty", -2}}), "");
  EXPECT_EQ(VerifyMessage({{"presence_penalty", 2.01}}),
            "presence_penalty must be in [-2, 2], got 2.01.");
  EXPECT_EQ(VerifyMessage({{"presence_penalty", 2}}), "");
  EXPECT_EQ(VerifyMessage({{"repetition_penalty", -0.1}}),
            "repetition_penalty must be in [0, 2], got -0.1.");
  EXPECT_EQ(VerifyMessage({{"repetition_penalty", 3}}),
            "repetition_penalty must be in [0, 2], got 3.");
  EXPECT_EQ(VerifyMessage({{"repetition_penalty", 0}}), "");
  EXPECT_EQ(VerifyMessage({{"min_new_tokens", -1}}),
            "min_new_tokens must be in [0, max_new_tokens], got -1.");
  EXPECT_EQ(VerifyMessage({{"max_new_tokens", -1}}), "max_new_tokens must be at least 0, got -1.");
  EXPECT_EQ(VerifyMessage({{"min_new_tokens", 9}, {"max_new_tokens", 8}}),
            "min_new_tokens must be in [0, max_new_tokens(8)], got 9.");
  EXPECT_EQ(VerifyMessage({{"min_new_tokens", 8}, {"max_new_tokens", 8}}), "");
  EXPECT_EQ(VerifyMessage({{"min_new_tokens", 500}, {"max_new_tokens", nullptr}}), "");
  EXPECT_EQ(VerifyMessage({{"max_new_tokens", 0}}), "");
  EXPECT_EQ(VerifyMessage(json::parse(R"({"sampling_seed": null})")),
            "sampling_seed should not be None");
  EXPECT_EQ(VerifyMessage({{"regex", "a"}, {"json_schema", "{}"}}),
            "Only one of regex, json_schema, or ebnf can be set.");
  EXPECT_EQ(VerifyMessage({{"regex", "a"}, {"ebnf", "root ::= \"a\""}}),
            "Only one of regex, json_schema, or ebnf can be set.");
  EXPECT_EQ(VerifyMessage({{"regex", "a"}, {"structural_tag", "{}"}}), "");
  EXPECT_EQ(VerifyMessage({{"n", 0}}), "n must be at least 1, got 0.");
}

TEST(SamplingParamsTest, VerifyOrderFollowsSglang) {
  // temperature is checked before top_p, top_p before min_p, ...
  EXPECT_EQ(VerifyMessage({{"temperature", -1}, {"top_p", 0}}),
            "temperature must be non-negative, got -1.");
  EXPECT_EQ(VerifyMessage({{"min_p", 5}, {"top_k", 0}}), "min_p must be in [0, 1], got 5.");
  EXPECT_EQ(VerifyMessage(json::parse(R"({"logit_bias": {"x": 1}, "top_p": 0})")),
            "top_p must be in (0, 1], got 0.");
}

TEST(SamplingParamsTest, OpenAiRoutesPrintFloats) {
  SamplingJsonOptions openai;
  openai.float_fields_are_floats = true;
  EXPECT_EQ(VerifyMessage({{"temperature", -1}}, 1000, openai),
            "temperature must be non-negative, got -1.0.");
  EXPECT_EQ(VerifyMessage({{"top_p", 0}}, 1000, openai), "top_p must be in (0, 1], got 0.0.");
}

TEST(SamplingParamsTest, LogitBiasKeys) {
  // Boundaries of [0, vocab).
  EXPECT_EQ(VerifyMessage(json::parse(R"({"logit_bias": {"0": 1, "999": -1}})")), "");
  EXPECT_EQ(VerifyMessage(json::parse(R"({"logit_bias": {"1000": 1}})")),
            "logit_bias must has keys in [0, 999], got 1000.");
  EXPECT_EQ(VerifyMessage(json::parse(R"({"logit_bias": {"-1": 1}})")),
            "logit_bias must has keys in [0, 999], got -1.");
  // Python's int() rules: whitespace, sign and digit underscores are fine; the key prints as sent.
  const SamplingParams p = Parse(json::parse(R"({"logit_bias": {" 1_0 ": 1, "+7": 2}})"));
  ASSERT_EQ(p.logit_bias.size(), 2u);
  EXPECT_EQ(p.logit_bias[0].token_id, 10);
  EXPECT_EQ(p.logit_bias[1].token_id, 7);
  EXPECT_EQ(VerifyMessage(json::parse(R"({"logit_bias": {"abc": 1}})")),
            "invalid literal for int() with base 10: 'abc'");
  EXPECT_EQ(VerifyMessage(json::parse(R"({"logit_bias": {"1.5": 1}})")),
            "invalid literal for int() with base 10: '1.5'");
}

TEST(SamplingParamsTest, UnknownKeysAndBadTypes) {
  auto unknown = SamplingParams::FromJson({{"temprature", 1}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(),
            "SamplingParams.__init__() got an unexpected keyword argument 'temprature'");
  // OpenAI's `seed` is mapped to sampling_seed by the API layer, not accepted here.
  EXPECT_FALSE(SamplingParams::FromJson({{"seed", 1}}).ok());
  EXPECT_FALSE(SamplingParams::FromJson({{"temperature", "hot"}}).ok());
  EXPECT_FALSE(SamplingParams::FromJson({{"top_k", 2.5}}).ok());
  EXPECT_FALSE(SamplingParams::FromJson({{"stop", 5}}).ok());
  EXPECT_FALSE(SamplingParams::FromJson({{"stop", json::array({"a", 1})}}).ok());
  EXPECT_FALSE(SamplingParams::FromJson({{"stop_token_ids", "2"}}).ok());
  EXPECT_FALSE(SamplingParams::FromJson({{"ignore_eos", 1}}).ok());
  EXPECT_FALSE(SamplingParams::FromJson(json::array()).ok());
  EXPECT_EQ(Parse({{"stop", json::array({"a", "b"})}}).stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(Parse({{"top_k", 3.0}}).top_k, 3);
}

// Golden cases produced by SGLang 0.5.6.post2's own SamplingParams (constructor + verify) by
// data/gen_sglang_verify_cases.py: same errors with the same messages, same normalized fields.
TEST(SamplingParamsTest, MatchesSglangOracleCases) {
  std::ifstream file(RADIX_SOURCE_DIR "/tests/unit/sampling/data/sglang_verify_cases.json");
  ASSERT_TRUE(file.good());
  const json doc = json::parse(file);
  const int64_t vocab = doc.at("vocab_size").get<int64_t>();
  ASSERT_GE(doc.at("cases").size(), 60u);
  for (const json& c : doc.at("cases")) {
    SCOPED_TRACE(c.at("input").dump());
    auto parsed = SamplingParams::FromJson(c.at("input"));
    if (c.value("error_type", "") == "TypeError") {
      ASSERT_FALSE(parsed.ok());
      EXPECT_EQ(parsed.status().message(), c.at("message").get<std::string>());
      continue;
    }
    ASSERT_TRUE(parsed.ok()) << parsed.status().message();
    const Status verified = parsed->Verify(vocab);
    if (c.contains("message")) {
      EXPECT_EQ(verified.message(), c.at("message").get<std::string>());
      continue;
    }
    ASSERT_TRUE(verified.ok()) << verified.message();
    const json& ok = c.at("ok");
    const SamplingParams& p = parsed.value();
    if (ok.at("max_new_tokens").is_null()) {
      EXPECT_FALSE(p.max_new_tokens);
    } else {
      EXPECT_EQ(p.max_new_tokens, ok.at("max_new_tokens").get<int64_t>());
    }
    EXPECT_EQ(p.temperature, ok.at("temperature").get<double>());
    EXPECT_EQ(p.top_p, ok.at("top_p").get<double>());
    EXPECT_EQ(p.top_k, ok.at("top_k").get<int64_t>());
    EXPECT_EQ(p.min_p, ok.at("min_p").get<double>());
    EXPECT_EQ(p.frequency_penalty, ok.at("frequency_penalty").get<double>());
    EXPECT_EQ(p.presence_penalty, ok.at("presence_penalty").get<double>());
    EXPECT_EQ(p.repetition_penalty, ok.at("repetition_penalty").get<double>());
    EXPECT_EQ(p.min_new_tokens, ok.at("min_new_tokens").get<int64_t>());
    EXPECT_EQ(p.n, ok.at("n").get<int64_t>());
    EXPECT_EQ(p.ignore_eos, ok.at("ignore_eos").get<bool>());
    EXPECT_EQ(p.skip_special_tokens, ok.at("skip_special_tokens").get<bool>());
    EXPECT_EQ(p.spaces_between_special_tokens, ok.at("spaces_between_special_tokens").get<bool>());
    EXPECT_EQ(p.no_stop_trim, ok.at("no_stop_trim").get<bool>());
  }
}

}  // namespace
}  // namespace radixserve::sampling
