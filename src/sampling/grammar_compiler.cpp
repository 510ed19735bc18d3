#include "sampling/grammar_compiler.h"

#include <llguidance.h>

#include "sampling/ebnf_to_lark.h"
#include "sampling/json_schema_options.h"
#include "sampling/structural_tag_to_lark.h"

namespace radixserve::sampling {

std::string_view GrammarKindName(GrammarKind kind) {
  switch (kind) {
    case GrammarKind::kJsonSchema:
      return "json_schema";
    case GrammarKind::kRegex:
      return "regex";
    case GrammarKind::kEbnf:
      return "ebnf";
    case GrammarKind::kStructuralTag:
      return "structural_tag";
    case GrammarKind::kLark:
      return "lark";
  }
  return "grammar";
}

GrammarCompiler::GrammarCompiler(const GrammarTokenizer& tokenizer, GrammarCompilerOptions options)
    : tokenizer_(tokenizer), options_(std::move(options)) {}

Expected<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::Compile(
    const GrammarSpec& spec) const {
  const std::string_view kind = GrammarKindName(spec.kind);
  if (spec.text.find('\0') != std::string::npos) {
    return InvalidArgument(std::string(kind) + " contains a NUL character");
  }
  std::string source;
  const char* llg_type = "lark";
  switch (spec.kind) {
    case GrammarKind::kJsonSchema: {
      RADIX_ASSIGN_OR_RETURN(source,
                             WithJsonWhitespaceOptions(spec.text, options_.json_any_whitespace,
                                                       options_.json_whitespace_pattern));
      llg_type = "json_schema";
      break;
    }
    case GrammarKind::kRegex:
      source = spec.text;
      llg_type = "regex";
      break;
    case GrammarKind::kEbnf: {
      RADIX_ASSIGN_OR_RETURN(source, ConvertEbnfToLark(spec.text));
      break;
    }
    case GrammarKind::kStructuralTag: {
      RADIX_ASSIGN_OR_RETURN(source,
                             ConvertStructuralTagToLark(spec.text, options_.json_any_whitespace,
                                                        options_.json_whitespace_pattern));
      break;
    }
    case GrammarKind::kLark:
      source = spec.text;
      break;
  }

  LlgConstraintInit init = {};
  llg_constraint_init_set_defaults(&init, tokenizer_.handle());
  init.log_buffer_level = 0;
  init.log_stderr_level = 0;
  LlgMatcher* matcher = llg_new_matcher(&init, llg_type, source.c_str());
  if (llg_matcher_is_error(matcher)) {
    const char* message = llg_matcher_get_error(matcher);
    Status error = InvalidArgument("invalid " + std::string(kind) + ": " +
                                   (message ? message : "rejected by the grammar engine"));
    llg_free_matcher(matcher);
    return error;
  }
  return std::shared_ptr<const CompiledGrammar>(
      std::make_shared<CompiledGrammar>(matcher, tokenizer_.bitmask_words(), std::move(source)));
}

}  // namespace radixserve::sampling
