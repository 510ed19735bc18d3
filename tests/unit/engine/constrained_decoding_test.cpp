// Constrained decoding in the engine on stories260K: SequenceGrammar re-derives its matcher from
// the output ids; constrained requests (greedy and sampled, streaming, mixed in batches with free
// ones, under retraction) produce text that an independent validator (std::regex, nlohmann JSON)
// accepts and finish as SGLang reports grammar termination; free requests in the same batches are
// unchanged (ReferenceGreedy); stop_regex stops at the first match and cuts the text there.
// GCC 12 reports a false -Wrestrict inside std::string operator+ at -O3 (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"

#include <gtest/gtest.h>

#include <regex>

#include <nlohmann/json.hpp>

#include "engine/sequence_grammar.h"
#include "engine_test_util.h"
#include "sampling/grammar_compiler.h"
#include "sampling/grammar_tokenizer.h"
#include "sampling/grammar_vocabulary.h"
#include "sampling/token_bitmask.h"

namespace radixserve::engine {
namespace {

using testing::Collector;

// llguidance's view of stories260K, as main builds it (model eos ids and the tokenizer's).
const sampling::GrammarTokenizer& StoriesGrammar() {
  static const auto grammar = [] {
    const auto& stories = testing::LoadStories();
    const auto vocab = static_cast<int32_t>(stories.model->config().vocab_size);
    std::vector<int32_t> eos;
    for (int64_t id : stories.model->config().eos_token_ids) {
      eos.push_back(static_cast<int32_t>(id));
    }
    for (auto id : stories.tokenizer->eos_ids()) eos.push_back(static_cast<int32_t>(id));
    std::sort(eos.begin(), eos.end());
    eos.erase(std::unique(eos.begin(), eos.end()), eos.end());
    auto created = sampling::GrammarTokenizer::Create(
        sampling::GrammarVocabularyFromTokenizer(*stories.tokenizer, vocab, eos));
    RADIX_CHECK_MSG(created.ok(), created.status().message().c_str());
    return std::move(created).value();
  }();
  return *grammar;
}

std::shared_ptr<const sampling::CompiledGrammar> Compile(sampling::GrammarKind kind,
                                                         const std::string& text) {
  sampling::GrammarCompilerOptions options;
  options.json_any_whitespace = false;
  sampling::GrammarCompiler compiler(StoriesGrammar(), options);
  auto compiled = compiler.Compile({kind, text});
  RADIX_CHECK_MSG(compiled.ok(), compiled.status().message().c_str());
  return compiled.value();
}

std::vector<int32_t> Encode(const std::string& text) {
  std::vector<int32_t> ids;
  for (auto id : testing::LoadStories().tokenizer->Encode(text)) {
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

bool IsEos(int32_t token) {
  const auto& eos = StoriesGrammar().eos_ids();
  return std::find(eos.begin(), eos.end(), token) != eos.end();
}

// Drives a SequenceGrammar with the lowest allowed non-EOS token at each step.
std::vector<int32_t> LowestWalk(SequenceGrammar& grammar, size_t steps) {
  std::vector<int32_t> out;
  std::vector<uint32_t> mask(grammar.bitmask_words());
  for (size_t i = 0; i < steps && !grammar.terminated(); ++i) {
    EXPECT_TRUE(grammar.FillMask(out, mask).ok());
    int32_t pick = -1;
    for (int32_t t = 0; t < StoriesGrammar().vocab_size() && pick < 0; ++t) {
      if (sampling::IsTokenAllowed(mask, t) && !IsEos(t)) pick = t;
    }
    if (pick < 0) break;
    EXPECT_TRUE(grammar.Accept(pick).ok());
    out.push_back(pick);
  }
  return out;
}

std::vector<uint32_t> MaskAfter(SequenceGrammar& grammar, const std::vector<int32_t>& ids) {
  std::vector<uint32_t> mask(grammar.bitmask_words());
  const Status filled = grammar.FillMask(ids, mask);
  EXPECT_TRUE(filled.ok()) << filled.message();
  return mask;
}

const char* const kWordsRegex = "[a-z]{1,6}( [a-z]{1,6}){2}\\.";

TEST(SequenceGrammarTest, RederivesTheMatcherFromTheOutputIds) {
  auto compiled = Compile(sampling::GrammarKind::kRegex, kWordsRegex);
  SequenceGrammar walker(*compiled);
  const std::vector<int32_t> walk = LowestWalk(walker, 6);
  ASSERT_GE(walk.size(), 4u);
  const std::vector<uint32_t> expected = MaskAfter(walker, walk);

  // A fresh matcher (a sequence whose state was lost) replays the output ids.
  SequenceGrammar fresh(*compiled);
  EXPECT_EQ(MaskAfter(fresh, walk), expected);
  EXPECT_EQ(fresh.resyncs(), 1);
  EXPECT_EQ(MaskAfter(fresh, walk), expected);  // in step again: no further resync
  EXPECT_EQ(fresh.resyncs(), 1);

  // A matcher that consumed a different tail rolls back to the common prefix.
  SequenceGrammar diverged(*compiled);
  std::vector<int32_t> other(walk.begin(), walk.begin() + 2);
  std::vector<uint32_t> mask(diverged.bitmask_words());
  ASSERT_TRUE(diverged.FillMask({}, mask).ok());
  for (int32_t t : other) ASSERT_TRUE(diverged.Accept(t).ok());
  ASSERT_TRUE(diverged.FillMask(other, mask).ok());
  int32_t alternative = -1;
  for (int32_t t = StoriesGrammar().vocab_size() - 1; t >= 0; --t) {
    if (sampling::IsTokenAllowed(mask, t) && !IsEos(t) && t != walk[2]) {
      alternative = t;
      break;
    }
  }
  ASSERT_GE(alternative, 0);
  ASSERT_TRUE(diverged.Accept(alternative).ok());
  EXPECT_EQ(MaskAfter(diverged, walk), expected);
  EXPECT_EQ(diverged.resyncs(), 1);
}

TEST(SequenceGrammarTest, OutputTheGrammarRejectsIsAnError) {
  auto compiled = Compile(sampling::GrammarKind::kRegex, "[0-9]+");
  SequenceGrammar grammar(*compiled);
  std::vector<uint32_t> mask(grammar.bitmask_words());
  const Status status = grammar.FillMask(Encode("hello"), mask);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(status.message().empty());
  // The rejected token is reported by Accept too.
  SequenceGrammar again(*compiled);
  ASSERT_TRUE(again.FillMask({}, mask).ok());
  const Status rejected = again.Accept(Encode("hello")[0]);
  EXPECT_EQ(rejected.code(), StatusCode::kInvalidArgument);
}

TEST(SequenceGrammarTest, StartTokenLeavesEverythingBeforeItFree) {
  auto compiled = Compile(sampling::GrammarKind::kRegex, "[0-9]+");
  const std::vector<int32_t> thinking = Encode("hello there");
  const int32_t start = Encode(".").back();  // stands in for a reasoning model's </think>
  ASSERT_TRUE(std::find(thinking.begin(), thinking.end(), start) == thinking.end());
  SequenceGrammar gated(*compiled, start);
  std::vector<uint32_t> mask(gated.bitmask_words());
  std::vector<int32_t> out;
  for (int32_t token : thinking) {
    // Before the start token every token is allowed, nothing is forced or finished.
    ASSERT_TRUE(gated.FillMask(out, mask).ok());
    EXPECT_TRUE(sampling::IsTokenAllowed(mask, token));
    EXPECT_TRUE(gated.ForcedTokens(8).empty());
    ASSERT_TRUE(gated.Accept(token).ok());
    EXPECT_FALSE(gated.terminated());
    out.push_back(token);
  }
  ASSERT_TRUE(gated.FillMask(out, mask).ok());
  ASSERT_TRUE(gated.Accept(start).ok());
  out.push_back(start);
  // After it, the mask is the grammar's from its start: the same as an ungated matcher's.
  SequenceGrammar plain(*compiled);
  const std::vector<uint32_t> expected = MaskAfter(plain, {});
  EXPECT_EQ(MaskAfter(gated, out), expected);
  EXPECT_FALSE(sampling::IsTokenAllowed(MaskAfter(gated, out), Encode("hello")[0]));
  // A fresh gated matcher (a retracted sequence) finds the start token in the output ids.
  SequenceGrammar fresh(*compiled, start);
  EXPECT_EQ(MaskAfter(fresh, out), expected);
}

// The text of `output` after `prompt`, decoded as the engine does.
std::string Text(const Collector::Result& r) { return r.text; }

GenerateRequest Constrained(std::string rid, std::vector<int32_t> prompt, int64_t max_new,
                            std::shared_ptr<const sampling::CompiledGrammar> grammar,
                            bool sampled) {
  GenerateRequest request = testing::GreedyRequest(std::move(rid), std::move(prompt), max_new);
  request.sampling.ignore_eos = false;
  if (sampled) {
    request.sampling.top_k = sampling::kTopKAll;
    request.sampling.temperature = 1.0;
    request.sampling.sampling_seed = 7;
  }
  request.grammar = std::move(grammar);
  return request;
}

const std::vector<std::string>& Prompts() {
  static const std::vector<std::string> prompts = {
      "Once upon a time, there was a little girl named Lily.",
      "One day, a big dog went to the park with his friend.", "Tom had a red ball.",
      "The sun was hot and the bird sang"};
  return prompts;
}

void ExpectGrammarStop(const Collector::Result& r) {
  ASSERT_TRUE(r.finish.has_value());
  EXPECT_EQ(r.finish->kind, FinishKind::kStop);
  ASSERT_TRUE(r.finish->matched_token.has_value());
  ASSERT_FALSE(r.tokens.empty());
  EXPECT_EQ(*r.finish->matched_token, r.tokens.back());
}

TEST(ConstrainedDecodingTest, MixedBatchOfConstrainedAndFreeRequests) {
  auto regex = Compile(sampling::GrammarKind::kRegex, kWordsRegex);
  const std::regex validator(kWordsRegex);
  auto json = Compile(sampling::GrammarKind::kJsonSchema,
                      R"({"type": "object", "properties": {"age": {"type": "integer",
                          "minimum": 0, "maximum": 99}, "ok": {"type": "boolean"}},
                          "required": ["age", "ok"], "additionalProperties": false})");
  auto engine = testing::MakeEngine(testing::BaseArgs());
  const size_t n = 16;
  Collector collector(n);
  std::vector<std::vector<int32_t>> refs(n);
  for (size_t i = 0; i < n; ++i) {
    auto prompt = Encode(Prompts()[i % Prompts().size()]);
    GenerateRequest request;
    switch (i % 4) {
      case 0:  // free greedy: unchanged by its constrained neighbours
        refs[i] = testing::ReferenceGreedy(prompt, 24);
        request = testing::GreedyRequest("free" + std::to_string(i), prompt, 24);
        break;
      case 1:
        request = Constrained("re" + std::to_string(i), prompt, 64, regex, /*sampled=*/i % 8 == 5);
        break;
      case 2:
        request = Constrained("js" + std::to_string(i), prompt, 64, json, /*sampled=*/i % 8 == 6);
        break;
      case 3:
        request = Constrained("st" + std::to_string(i), prompt, 64, regex, /*sampled=*/true);
        request.stream = true;
        request.return_logprob = true;
        request.top_logprobs_num = 3;
        break;
    }
    ASSERT_TRUE(engine->Submit(std::move(request), collector.Sink(i)).ok());
  }
  collector.Wait(n);
  for (size_t i = 0; i < n; ++i) {
    const Collector::Result& r = collector[i];
    switch (i % 4) {
      case 0:
        EXPECT_EQ(r.tokens, refs[i]) << i;
        break;
      case 1:
      case 3:
        ExpectGrammarStop(r);
        EXPECT_TRUE(std::regex_match(Text(r), validator)) << i << ": '" << Text(r) << "'";
        break;
      case 2: {
        ExpectGrammarStop(r);
        const auto parsed = nlohmann::json::parse(Text(r), nullptr, false);
        ASSERT_TRUE(parsed.is_object()) << Text(r);
        ASSERT_TRUE(parsed.contains("age") && parsed["age"].is_number_integer()) << Text(r);
        EXPECT_GE(parsed["age"].get<int>(), 0);
        EXPECT_LE(parsed["age"].get<int>(), 99);
        EXPECT_TRUE(parsed["ok"].is_boolean()) << Text(r);
        EXPECT_EQ(parsed.size(), 2u);
        break;
      }
    }
  }
  // Streamed logprobs: every output token has one, and no alternative is a masked token.
  const Collector::Result& streamed = collector[3];
  size_t logprobs = 0;
  for (const RequestEvent& e : streamed.events) logprobs += e.output_logprobs.size();
  EXPECT_EQ(logprobs, streamed.tokens.size());
  EXPECT_GT(streamed.events.size(), 1u);
  EXPECT_TRUE(engine->CheckLeaks().ok());
}

TEST(ConstrainedDecodingTest, OutputsStayValidUnderRetraction) {
  auto regex = Compile(sampling::GrammarKind::kRegex, "[a-z]{4,8}( [a-z]{4,8}){5}\\.");
  const std::regex validator("[a-z]{4,8}( [a-z]{4,8}){5}\\.");
  args::ServerArgs args = testing::BaseArgs();
  args.Set("max-total-tokens", 640);
  args.Set("chunked-prefill-size", 64);
  args.Set("schedule-conservativeness", 0.05);
  auto engine = testing::MakeEngine(args);
  const size_t n = 24;
  Collector collector(n);
  for (size_t i = 0; i < n; ++i) {
    std::string text = Prompts()[i % Prompts().size()];
    for (size_t k = 0; k < i % 5; ++k) text += " and then they played";
    ASSERT_TRUE(engine
                    ->Submit(Constrained("r" + std::to_string(i), Encode(text), 80, regex,
                                         /*sampled=*/i % 2 == 1),
                             collector.Sink(i))
                    .ok());
  }
  collector.Wait(n);
  for (size_t i = 0; i < n; ++i) {
    ExpectGrammarStop(collector[i]);
    EXPECT_TRUE(std::regex_match(Text(collector[i]), validator)) << Text(collector[i]);
  }
  EXPECT_GT(engine->Stats().num_retractions, 0);
  EXPECT_TRUE(engine->CheckLeaks().ok());
}

TEST(ConstrainedDecodingTest, StopRegexEndsTheRequestAndCutsTheText) {
  const auto prompt = Encode(Prompts()[0]);
  auto engine = testing::MakeEngine(testing::BaseArgs());
  // The free continuation, then a pattern matching its second word.
  Collector free(1);
  ASSERT_TRUE(engine->Submit(testing::GreedyRequest("f", prompt, 24), free.Sink(0)).ok());
  free.Wait(1);
  const std::string full = free[0].text;
  const std::regex word("[A-Za-z]+");
  std::sregex_iterator it(full.begin(), full.end(), word);
  ASSERT_NE(it, std::sregex_iterator());
  ++it;
  ASSERT_NE(it, std::sregex_iterator());
  const std::string second = it->str();
  const size_t at = static_cast<size_t>(it->position());
  const std::string pattern =
      second.substr(0, 1) + "[a-z]{" + std::to_string(second.size() - 1) + "}\\b";

  Collector collector(1);
  GenerateRequest request = testing::GreedyRequest("s", prompt, 24);
  request.sampling.stop_regex = {pattern};
  auto compiled = tokenizer::CompileStopRegex(pattern);
  ASSERT_TRUE(compiled.ok());
  request.stop_regex.push_back(std::move(compiled).value());
  request.stream = true;
  ASSERT_TRUE(engine->Submit(std::move(request), collector.Sink(0)).ok());
  collector.Wait(1);
  const Collector::Result& r = collector[0];
  ASSERT_TRUE(r.finish.has_value());
  EXPECT_EQ(r.finish->kind, FinishKind::kStop);
  EXPECT_EQ(r.finish->matched_str, pattern);
  // The first match of the pattern in the free text starts at or before the second word.
  const std::regex ecma(pattern);
  std::smatch first;
  ASSERT_TRUE(std::regex_search(full, first, ecma));
  EXPECT_LE(static_cast<size_t>(first.position()), at);
  EXPECT_EQ(r.text, full.substr(0, static_cast<size_t>(first.position())));
  EXPECT_LT(r.tokens.size(), free[0].tokens.size());
  EXPECT_TRUE(engine->CheckLeaks().ok());
}

// A regex that is mostly literal text: jump-forward appends the literal spans without sampling, so
// a streamed request sees fewer events (one per forward step) than tokens, with the same
// validity; --disable-grammar-jump-forward samples every token.
TEST(ConstrainedDecodingTest, JumpForwardAppendsForcedTokensWithoutSampling) {
  const std::string pattern = "The answer is (yes|no)\\. Thank you for asking the little dog\\.";
  auto regex = Compile(sampling::GrammarKind::kRegex, pattern);
  const std::regex validator(pattern);
  for (const bool jump : {true, false}) {
    args::ServerArgs args = testing::BaseArgs();
    args.Set("disable-grammar-jump-forward", !jump);
    auto engine = testing::MakeEngine(args);
    Collector collector(2);
    GenerateRequest request = Constrained("j", Encode(Prompts()[0]), 64, regex, false);
    request.stream = true;
    ASSERT_TRUE(engine->Submit(request, collector.Sink(0)).ok());
    // Logprob requests sample every token even with jump-forward on.
    request.rid = "lp";
    request.return_logprob = true;
    ASSERT_TRUE(engine->Submit(std::move(request), collector.Sink(1)).ok());
    collector.Wait(2);
    for (size_t i = 0; i < 2; ++i) {
      const Collector::Result& r = collector[i];
      ExpectGrammarStop(r);
      EXPECT_TRUE(std::regex_match(Text(r), validator)) << Text(r);
      if (jump && i == 0) {
        EXPECT_LT(r.events.size() * 3, r.tokens.size()) << r.events.size() << " events";
      } else {
        EXPECT_EQ(r.events.size(), r.tokens.size());
      }
    }
    const int64_t forced = engine->Stats().jump_forward_tokens;
    if (jump) {
      EXPECT_GE(forced,
                static_cast<int64_t>(collector[0].tokens.size() - collector[0].events.size()));
    } else {
      EXPECT_EQ(forced, 0);
    }
    EXPECT_TRUE(engine->CheckLeaks().ok());
  }
}

}  // namespace
}  // namespace radixserve::engine
