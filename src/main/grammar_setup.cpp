#include "main/grammar_setup.h"

#include <algorithm>
#include <chrono>

#include "common/log.h"
#include "sampling/grammar_vocabulary.h"

namespace radixserve {

sampling::GrammarCompilerOptions GrammarOptionsFromArgs(const args::ServerArgs& args) {
  sampling::GrammarCompilerOptions options;
  options.json_any_whitespace = !args.GetBool(args::key::kConstrainedJsonDisableAnyWhitespace);
  if (auto pattern = args.GetOptionalString(args::key::kConstrainedJsonWhitespacePattern)) {
    options.json_whitespace_pattern = *pattern;
  } else if (options.json_any_whitespace) {
    options.json_whitespace_pattern = sampling::kDefaultJsonWhitespacePattern;
  }
  return options;
}

Expected<GrammarSetup> CreateGrammarSetup(const args::ServerArgs& args, const ModelAssets& assets) {
  GrammarSetup setup;
  if (args.GetString(args::key::kGrammarBackend) == "none") {
    setup.disabled_reason =
        "constrained decoding is disabled on this server (--grammar-backend none)";
    return setup;
  }
  if (assets.model == nullptr) {
    setup.disabled_reason = "an embedding server (--is-embedding) does not generate text";
    return setup;
  }
  if (assets.tokenizer == nullptr) {
    setup.disabled_reason =
        "constrained decoding needs the tokenizer, which --skip-tokenizer-init turned off";
    return setup;
  }
  const auto start = std::chrono::steady_clock::now();
  const auto vocab_size = static_cast<int32_t>(assets.facts.vocab_size);
  // The ids the engine finishes on: model config eos ids and the tokenizer's.
  std::vector<int32_t> eos;
  for (int64_t id : assets.model->config().eos_token_ids) eos.push_back(static_cast<int32_t>(id));
  for (auto id : assets.tokenizer->eos_ids()) eos.push_back(static_cast<int32_t>(id));
  std::erase_if(eos, [&](int32_t id) { return id < 0 || id >= vocab_size; });
  std::sort(eos.begin(), eos.end());
  eos.erase(std::unique(eos.begin(), eos.end()), eos.end());
  if (eos.empty()) {
    setup.disabled_reason =
        "constrained decoding needs an end-of-sequence token, and this model "
        "declares none";
    RADIX_LOG_WARN("Grammar backend off: {}", setup.disabled_reason);
    return setup;
  }
  RADIX_ASSIGN_OR_RETURN(
      auto tokenizer, sampling::GrammarTokenizer::Create(sampling::GrammarVocabularyFromTokenizer(
                          *assets.tokenizer, vocab_size, eos)));
  setup.tokenizer = std::move(tokenizer);
  const sampling::GrammarCompilerOptions options = GrammarOptionsFromArgs(args);
  setup.compiler = std::make_unique<sampling::GrammarCompiler>(*setup.tokenizer, options);
  setup.cache = std::make_unique<sampling::GrammarCache>(*setup.compiler);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  RADIX_LOG_INFO(
      "Grammar backend: llguidance, vocabulary of {} tokens ready in {:.0f} ms; JSON "
      "whitespace: {}",
      vocab_size, ms,
      !options.json_whitespace_pattern.empty() ? options.json_whitespace_pattern
      : options.json_any_whitespace            ? std::string("any")
                                               : std::string("none"));
  return setup;
}

}  // namespace radixserve
