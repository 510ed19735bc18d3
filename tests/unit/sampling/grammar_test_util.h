// Shared fixtures of the grammar tests: real vocabularies (stories260K's 512-token SentencePiece
// vocabulary from ../shared; SmolLM2's 49,152-token byte-level BPE vocabulary from the model cache
// when present) turned into GrammarTokenizers, and a random walk that drives a matcher with
// tokens drawn only from its mask.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "sampling/grammar_compiler.h"
#include "sampling/grammar_tokenizer.h"
#include "sampling/token_bitmask.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer_loader.h"

namespace radixserve::sampling::test {

struct GrammarVocab {
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  std::unique_ptr<GrammarTokenizer> grammar;
  std::vector<int32_t> prompt;  // left context for detokenizing outputs
  std::vector<bool> closing;    // tokens that decode to one of ) ] } "
};

inline std::unique_ptr<GrammarVocab> LoadGrammarVocab(const std::string& path) {
  auto tok = tokenizer::LoadTokenizer(path);
  if (!tok.ok()) return nullptr;
  auto vocab = std::make_unique<GrammarVocab>();
  vocab->tokenizer = std::move(tok.value());
  const auto& eos = vocab->tokenizer->eos_ids();
  auto grammar = GrammarTokenizer::Create(GrammarVocabularyFromTokenizer(
      *vocab->tokenizer, static_cast<int32_t>(vocab->tokenizer->vocab_size()), eos));
  if (!grammar.ok()) {
    ADD_FAILURE() << grammar.status().message();
    return nullptr;
  }
  vocab->grammar = std::move(grammar.value());
  vocab->prompt = vocab->tokenizer->Encode("Answer:", {.add_special_tokens = false});
  vocab->closing.resize(vocab->tokenizer->vocab_size());
  for (size_t t = 0; t < vocab->closing.size(); ++t) {
    const auto id = static_cast<tokenizer::TokenId>(t);
    const std::string text = vocab->tokenizer->Decode(std::span(&id, 1));
    vocab->closing[t] = text == ")" || text == "]" || text == "}" || text == "\"";
  }
  return vocab;
}

// stories260K (always present in ../shared).
inline const GrammarVocab& Stories() {
  static const auto vocab =
      LoadGrammarVocab(std::string(RADIX_SHARED_DIR) + "/models/stories260K/hf");
  RADIX_CHECK(vocab != nullptr);
  return *vocab;
}

// SmolLM2-135M-Instruct's tokenizer from the model cache (scripts/setup), or null.
inline const GrammarVocab* SmolLM2() {
  static const auto vocab = []() -> std::unique_ptr<GrammarVocab> {
    const char* env = std::getenv("RADIX_MODELS");
    const char* home = std::getenv("HOME");
    const std::string dir = env ? env : std::string(home ? home : "") + "/.cache/radixserve/models";
    const std::string path = dir + "/smollm2-135m-instruct-q4_1.gguf";
    if (!std::filesystem::exists(path)) return nullptr;
    return LoadGrammarVocab(path);
  }();
  return vocab.get();
}

inline std::shared_ptr<const CompiledGrammar> MustCompile(const GrammarVocab& vocab,
                                                          GrammarKind kind, const std::string& text,
                                                          GrammarCompilerOptions options = {}) {
  GrammarCompiler compiler(*vocab.grammar, std::move(options));
  auto compiled = compiler.Compile({kind, text});
  EXPECT_TRUE(compiled.ok()) << compiled.status().message();
  return compiled.ok() ? compiled.value() : nullptr;
}

inline std::vector<int32_t> AllowedTokens(std::span<const uint32_t> mask, int32_t vocab_size) {
  std::vector<int32_t> allowed;
  for (int32_t t = 0; t < vocab_size; ++t) {
    if (IsTokenAllowed(mask, t)) allowed.push_back(t);
  }
  return allowed;
}

inline bool IsEos(const GrammarVocab& vocab, int32_t token) {
  const auto& eos = vocab.grammar->eos_ids();
  return std::find(eos.begin(), eos.end(), token) != eos.end();
}

struct Walk {
  std::vector<int32_t> ids;  // without the final EOS
  bool ended = false;        // EOS was accepted (or the grammar terminated)
};

// Draws tokens uniformly from the mask (seeded). When EOS is allowed it is taken with probability
// `stop_probability`. With probability `close_bias`, the draw is restricted to allowed tokens that
// are one closing character ) ] } " when there are any, so nested outputs finish in a reasonable
// number of steps. Every invariant of the contract is checked on the way.
inline Walk RandomWalk(const GrammarVocab& vocab, GrammarMatcher& matcher, uint32_t seed,
                       size_t max_steps, double stop_probability = 0.2, double close_bias = 0.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  const int32_t n = vocab.grammar->vocab_size();
  std::vector<uint32_t> mask(matcher.bitmask_words());
  Walk walk;
  for (size_t step = 0; step < max_steps; ++step) {
    if (matcher.IsTerminated()) {
      walk.ended = true;
      break;
    }
    EXPECT_TRUE(matcher.FillNextTokenBitmask(mask).ok());
    const std::vector<int32_t> allowed = AllowedTokens(mask, n);
    std::vector<int32_t> text_tokens, eos_tokens, closing;
    for (int32_t t : allowed) {
      if (IsEos(vocab, t)) {
        eos_tokens.push_back(t);
        continue;
      }
      text_tokens.push_back(t);
      if (static_cast<size_t>(t) < vocab.closing.size() && vocab.closing[static_cast<size_t>(t)]) {
        closing.push_back(t);
      }
    }
    // EOS is allowed exactly when the grammar accepts.
    EXPECT_EQ(!eos_tokens.empty(), matcher.IsAccepting()) << "step " << step;
    if (allowed.empty()) {
      ADD_FAILURE() << "empty mask at step " << step;
      break;
    }
    int32_t token;
    if (!eos_tokens.empty() && (text_tokens.empty() || coin(rng) < stop_probability)) {
      token = eos_tokens[rng() % eos_tokens.size()];
    } else if (!closing.empty() && coin(rng) < close_bias) {
      token = closing[rng() % closing.size()];
    } else {
      token = text_tokens[rng() % text_tokens.size()];
    }
    const Status accepted = matcher.AcceptToken(token);
    EXPECT_TRUE(accepted.ok()) << accepted.message();
    if (!accepted.ok()) break;
    if (IsEos(vocab, token)) {
      walk.ended = true;
      break;
    }
    walk.ids.push_back(token);
  }
  if (matcher.IsTerminated()) walk.ended = true;
  return walk;
}

// The text a client would see for `ids` generated after the fixture's prompt.
inline std::string Detokenize(const GrammarVocab& vocab, const std::vector<int32_t>& ids) {
  tokenizer::IncrementalDetokenizer detok(*vocab.tokenizer, vocab.prompt, {});
  std::string text = detok.Step(ids);
  text += detok.Finish();
  return text;
}

}  // namespace radixserve::sampling::test
