// GrammarCompiler: turns a request's constraint (SGLang's sampling_params json_schema / regex /
// ebnf / structural_tag) into a CompiledGrammar for one vocabulary, with llguidance.
//   json_schema     JSON Schema text (llguidance's supported subset; unsupported keywords are
//                   errors, never ignored). response_format {"type": "json_object"} is the
//                   schema {"type": "object"}. The compiler options below choose the whitespace
//                   allowed between JSON tokens; a schema's own "x-guidance" object (llguidance's
//                   JSON options) takes precedence.
//   regex           Rust `regex` syntax (as SGLang's llguidance backend): no lookaround or
//                   backreferences. The whole output must match.
//   ebnf            GBNF (ebnf_to_lark.h), or Lark text, which is passed through.
//   structural_tag  SGLang's {"structures": [...], "triggers": [...]} (structural_tag_to_lark.h).
//   lark            llguidance's Lark dialect (docs: llguidance/docs/syntax.md).
// Errors are kInvalidArgument values naming the constraint kind and llguidance's explanation (the
// API layer answers them with HTTP 400).
// Thread affinity: Compile may run on any thread, concurrently; it is meant for a compile thread
// pool, never the engine thread. Cost: ~1 ms for a small schema or regex, up to seconds for
// very large schemas. The GrammarTokenizer must outlive the compiler and its grammars.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "sampling/compiled_grammar.h"
#include "sampling/grammar_tokenizer.h"

namespace radixserve::sampling {

enum class GrammarKind { kJsonSchema, kRegex, kEbnf, kStructuralTag, kLark };

// SGLang's field name for the kind: "json_schema", "regex", "ebnf", "structural_tag", "lark".
std::string_view GrammarKindName(GrammarKind kind);

struct GrammarSpec {
  GrammarKind kind = GrammarKind::kJsonSchema;
  std::string text;
};

// The server's JSON whitespace when neither --constrained-json-whitespace-pattern nor
// --constrained-json-disable-any-whitespace is given. Between two JSON tokens: nothing, up to 4
// spaces or tabs, or one line break followed by up to 20 spaces or tabs of indentation. Compact,
// spaced and indented (json.dumps(indent=2|4), a few levels deep) output all fit, and a model
// cannot spend its budget on whitespace: llguidance's own default and xgrammar's any_whitespace
// allow unbounded runs (xgrammar bounds them only with max_whitespace_cnt), and small models take
// them (stories260K fills 64 tokens with newlines inside a two-key object).
inline constexpr const char* kDefaultJsonWhitespacePattern = "(?:\\r?\\n[ \\t]{0,20}|[ \\t]{1,4})";

struct GrammarCompilerOptions {
  // false: --constrained-json-disable-any-whitespace (compact JSON, no whitespace between tokens).
  bool json_any_whitespace = true;
  // --constrained-json-whitespace-pattern: a regex for the whitespace allowed between JSON
  // tokens; non-empty overrides json_any_whitespace.
  std::string json_whitespace_pattern;
};

class GrammarCompiler {
 public:
  GrammarCompiler(const GrammarTokenizer& tokenizer, GrammarCompilerOptions options);

  Expected<std::shared_ptr<const CompiledGrammar>> Compile(const GrammarSpec& spec) const;

  const GrammarCompilerOptions& options() const { return options_; }

 private:
  const GrammarTokenizer& tokenizer_;
  GrammarCompilerOptions options_;
};

}  // namespace radixserve::sampling
