// The server's grammar engine (--grammar-backend): llguidance's view of the model vocabulary, the
// compiler with the JSON whitespace options (--constrained-json-whitespace-pattern,
// --constrained-json-disable-any-whitespace) and the compiled-grammar cache through which the API
// layer compiles every request's json_schema / regex / ebnf / structural_tag. Built once by main,
// after the model and before the engine; it must outlive the engine (requests hold grammars whose
// matchers call back into the vocabulary).
#pragma once

#include <memory>
#include <string>

#include "args/server_args.h"
#include "common/status.h"
#include "main/model_assets.h"
#include "sampling/grammar_cache.h"
#include "sampling/grammar_compiler.h"
#include "sampling/grammar_tokenizer.h"

namespace radixserve {

struct GrammarSetup {
  std::unique_ptr<sampling::GrammarTokenizer> tokenizer;
  std::unique_ptr<sampling::GrammarCompiler> compiler;
  std::unique_ptr<sampling::GrammarCache> cache;  // null: constrained decoding is off
  std::string disabled_reason;                    // why, when cache is null
};

// The compiler options the arguments ask for.
sampling::GrammarCompilerOptions GrammarOptionsFromArgs(const args::ServerArgs& args);

// Off (with a reason) for --grammar-backend none and --skip-tokenizer-init. Errors: a vocabulary
// llguidance rejects.
Expected<GrammarSetup> CreateGrammarSetup(const args::ServerArgs& args, const ModelAssets& assets);

}  // namespace radixserve
