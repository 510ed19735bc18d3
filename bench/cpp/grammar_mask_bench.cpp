// Cost of grammar-constrained decoding on one core: building the grammar vocabulary, compiling,
// making a matcher, and per token FillNextTokenBitmask (the mask) and AcceptToken. Two drivers:
//   * document: a canonical tokenization of a schema-valid JSON document, fed token by token (what
//     a model that follows the schema produces; like llguidance's MaskBench);
//   * walk: tokens drawn uniformly from each mask (worst-case-ish: long whitespace runs, odd
//     strings).
//   * replay (--replay FILE): the token ids a server actually produced for real schemas (one JSON
//     object per line: {"schema": "<JSON schema text>", "ids": [...]}, as written by
//     bench/structured_output.py), each compiled with the server's default JSON whitespace
//     (--compact: --constrained-json-disable-any-whitespace) and fed token by token; prints one
//     JSON line with the distribution of mask and accept times over every token of every trace.
// Compare with llguidance's published figures: 128k-token llama3 vocabulary, JSONSchemaBench,
// mean ~50 us, p99 ~0.5 ms per mask.
//
//   grammar_mask_bench <tokenizer.json | model.gguf>
//   grammar_mask_bench <tokenizer.json | model.gguf> --replay traces.jsonl [--compact]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sampling/grammar_compiler.h"
#include "sampling/token_bitmask.h"
#include "tokenizer/tokenizer_loader.h"

namespace radixserve {
namespace {

using Clock = std::chrono::steady_clock;

double Us(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

struct Stats {
  std::vector<double> us;
  void Print(const char* what) {
    if (us.empty()) return;
    std::sort(us.begin(), us.end());
    double sum = 0;
    for (double v : us) sum += v;
    auto at = [&](double q) {
      return us[std::min(us.size() - 1, static_cast<size_t>(q * us.size()))];
    };
    std::printf("  %-18s n=%-6zu mean %7.1f us  p50 %7.1f  p90 %7.1f  p99 %7.1f  max %8.1f\n", what,
                us.size(), sum / us.size(), at(0.5), at(0.9), at(0.99), us.back());
  }
  nlohmann::json Json() {
    std::sort(us.begin(), us.end());
    double sum = 0;
    for (double v : us) sum += v;
    auto at = [&](double q) {
      return us.empty() ? 0.0 : us[std::min(us.size() - 1, static_cast<size_t>(q * us.size()))];
    };
    return {
        {"n", us.size()},     {"mean_us", us.empty() ? 0.0 : sum / static_cast<double>(us.size())},
        {"p50_us", at(0.5)},  {"p90_us", at(0.9)},
        {"p99_us", at(0.99)}, {"max_us", us.empty() ? 0.0 : us.back()}};
  }
};

constexpr const char* kSchema = R"({
  "type": "object",
  "properties": {
    "id": {"type": "integer"},
    "name": {"type": "string"},
    "email": {"type": "string", "format": "email"},
    "tags": {"type": "array", "items": {"type": "string"}},
    "address": {"type": "object", "properties": {
        "street": {"type": "string"}, "city": {"type": "string"},
        "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
      "required": ["street", "city", "zip"]},
    "status": {"enum": ["active", "inactive", "banned"]},
    "score": {"type": "number"}
  },
  "required": ["id", "name", "email", "tags", "address", "status", "score"],
  "additionalProperties": false
})";

constexpr const char* kDocument =
    R"({"id": 12345, "name": "Ada Lovelace", "email": "ada@example.com", "tags": ["math", )"
    R"("poetry", "engines"], "address": {"street": "12 St James's Square", "city": "London", )"
    R"("zip": "01234"}, "status": "active", "score": 98.5})";

constexpr const char* kRegex = "[A-Z][a-z]+ [A-Z][a-z]+, born [0-9]{4}-[0-9]{2}-[0-9]{2}\\.";
constexpr const char* kRegexDocument = "Ada Lovelace, born 1815-12-10.";

constexpr const char* kTag = R"({"structures": [{"begin": "<function=get_weather>",
    "schema": {"type": "object", "properties": {"city": {"type": "string"}},
               "required": ["city"]}, "end": "</function>"}],
    "triggers": ["<function="]})";
constexpr const char* kTagDocument =
    "Let me look that up for you. <function=get_weather>{\"city\": \"Paris\"}</function> "
    "It is sunny in Paris today.";

int BenchGrammar(const sampling::GrammarCompiler& compiler, const sampling::GrammarSpec& spec,
                 const std::vector<int32_t>& ids, const sampling::GrammarTokenizer& grammar_tok) {
  auto t0 = Clock::now();
  auto compiled = compiler.Compile(spec);
  if (!compiled.ok()) {
    std::fprintf(stderr, "%s\n", compiled.status().message().c_str());
    return 1;
  }
  std::printf("  compiled in %.1f ms\n", Us(t0) / 1000);
  Stats new_matcher;
  for (int i = 0; i < 20; ++i) {
    t0 = Clock::now();
    auto m = (*compiled)->NewMatcher();
    new_matcher.us.push_back(Us(t0));
  }
  new_matcher.Print("NewMatcher");

  const int32_t n = grammar_tok.vocab_size();
  std::vector<uint32_t> mask(grammar_tok.bitmask_words());
  std::printf("  document (%zu tokens), 20 passes:\n", ids.size());
  {
    Stats fill, accept, first;
    for (int pass = 0; pass < 20; ++pass) {
      auto matcher = (*compiled)->NewMatcher();
      for (size_t i = 0; i < ids.size(); ++i) {
        t0 = Clock::now();
        if (!matcher.FillNextTokenBitmask(mask).ok()) return 1;
        (pass == 0 ? first : fill).us.push_back(Us(t0));
        if (!sampling::IsTokenAllowed(mask, ids[i])) {
          std::fprintf(stderr, "document token %zu not allowed\n", i);
          return 1;
        }
        t0 = Clock::now();
        if (!matcher.AcceptToken(ids[i]).ok()) return 1;
        accept.us.push_back(Us(t0));
      }
    }
    first.Print("mask, 1st pass");
    fill.Print("mask, later");
    accept.Print("AcceptToken");
  }
  std::printf("  random walks over the mask, 20 x <= 200 tokens:\n");
  {
    std::mt19937 rng(1);
    Stats fill;
    const auto& eos = grammar_tok.eos_ids();
    for (int walk = 0; walk < 20; ++walk) {
      auto matcher = (*compiled)->NewMatcher();
      for (int step = 0; step < 200 && !matcher.IsTerminated(); ++step) {
        t0 = Clock::now();
        if (!matcher.FillNextTokenBitmask(mask).ok()) return 1;
        fill.us.push_back(Us(t0));
        std::vector<int32_t> allowed;
        for (int32_t t = 0; t < n; ++t) {
          if (sampling::IsTokenAllowed(mask, t) &&
              std::find(eos.begin(), eos.end(), t) == eos.end()) {
            allowed.push_back(t);
          }
        }
        if (allowed.empty()) break;
        if (!matcher.AcceptToken(allowed[rng() % allowed.size()]).ok()) return 1;
      }
    }
    fill.Print("mask");
  }
  return 0;
}

// Replays recorded traces; two passes over all of them, the first one a warm-up (llguidance
// builds its lexer states lazily, as a server does on a schema's first request).
int Replay(const sampling::GrammarTokenizer& grammar_tok, const std::string& file, bool compact) {
  sampling::GrammarCompilerOptions options;
  options.json_any_whitespace = !compact;
  if (!compact) options.json_whitespace_pattern = sampling::kDefaultJsonWhitespacePattern;
  sampling::GrammarCompiler compiler(grammar_tok, options);
  struct Trace {
    std::shared_ptr<const sampling::CompiledGrammar> grammar;
    std::vector<int32_t> ids;
  };
  std::vector<Trace> traces;
  std::ifstream in(file);
  Stats compile;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    const auto t0 = Clock::now();
    auto compiled = compiler.Compile({sampling::GrammarKind::kJsonSchema, j.at("schema")});
    if (!compiled.ok()) {
      std::fprintf(stderr, "%s\n", compiled.status().message().c_str());
      return 1;
    }
    compile.us.push_back(Us(t0));
    traces.push_back({*compiled, j.at("ids").get<std::vector<int32_t>>()});
  }
  std::vector<uint32_t> mask(grammar_tok.bitmask_words());
  Stats fill, accept, first;
  for (int pass = 0; pass < 2; ++pass) {
    for (const Trace& trace : traces) {
      auto matcher = trace.grammar->NewMatcher();
      for (size_t i = 0; i < trace.ids.size(); ++i) {
        auto t0 = Clock::now();
        if (!matcher.FillNextTokenBitmask(mask).ok()) return 1;
        (pass == 0 ? first : fill).us.push_back(Us(t0));
        if (!sampling::IsTokenAllowed(mask, trace.ids[i])) {
          std::fprintf(stderr, "trace token %zu (%d) not allowed\n", i, trace.ids[i]);
          return 1;
        }
        t0 = Clock::now();
        if (!matcher.AcceptToken(trace.ids[i]).ok()) return 1;
        if (pass == 1) accept.us.push_back(Us(t0));
      }
    }
  }
  const nlohmann::json out = {{"vocab_size", grammar_tok.vocab_size()},
                              {"traces", traces.size()},
                              {"compile", compile.Json()},
                              {"mask_first_pass", first.Json()},
                              {"mask", fill.Json()},
                              {"accept", accept.Json()}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

int Run(const std::string& path, const std::string& replay, bool compact) {
  auto t0 = Clock::now();
  auto tok = tokenizer::LoadTokenizer(path);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().message().c_str());
    return 1;
  }
  std::printf("tokenizer: %s (%zu tokens) loaded in %.1f ms\n", path.c_str(), (*tok)->vocab_size(),
              Us(t0) / 1000);
  t0 = Clock::now();
  auto vocabulary = sampling::GrammarVocabularyFromTokenizer(
      **tok, static_cast<int32_t>((*tok)->vocab_size()), (*tok)->eos_ids());
  std::printf("grammar vocabulary built in %.1f ms\n", Us(t0) / 1000);
  const sampling::GrammarTokenizeFn tokenize = vocabulary.tokenize;
  t0 = Clock::now();
  auto grammar_tok = sampling::GrammarTokenizer::Create(std::move(vocabulary));
  if (!grammar_tok.ok()) {
    std::fprintf(stderr, "%s\n", grammar_tok.status().message().c_str());
    return 1;
  }
  std::printf("llguidance tokenizer created in %.1f ms\n", Us(t0) / 1000);
  if (!replay.empty()) return Replay(**grammar_tok, replay, compact);

  sampling::GrammarCompiler compiler(**grammar_tok, {});
  const struct {
    const char* name;
    sampling::GrammarSpec spec;
    const char* document;
  } cases[] = {
      {"json_schema", {sampling::GrammarKind::kJsonSchema, kSchema}, kDocument},
      {"regex", {sampling::GrammarKind::kRegex, kRegex}, kRegexDocument},
      {"structural_tag", {sampling::GrammarKind::kStructuralTag, kTag}, kTagDocument},
  };
  for (const auto& c : cases) {
    std::printf("== %s\n", c.name);
    if (BenchGrammar(compiler, c.spec, tokenize(c.document), **grammar_tok) != 0) return 1;
  }
  return 0;
}

}  // namespace
}  // namespace radixserve

int main(int argc, char** argv) {
  std::string replay;
  bool compact = false;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--replay" && i + 1 < argc) {
      replay = argv[++i];
    } else if (arg == "--compact") {
      compact = true;
    } else {
      argc = 0;  // usage
    }
  }
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s <tokenizer.json | model.gguf> [--replay traces.jsonl [--compact]]\n",
                 argv[0]);
    return 2;
  }
  return radixserve::Run(argv[1], replay, compact);
}
