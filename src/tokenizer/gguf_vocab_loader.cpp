// GGUF tokenizer.ggml.* -> Tokenizer, reproducing llama.cpp's tokenization of the `llama`
// (SentencePiece) and `gpt2` (byte-level BPE) vocabulary families.
#include <algorithm>

#include "tokenizer/bpe_model.h"
#include "tokenizer/gguf_metadata.h"
#include "tokenizer/gguf_special_tokens.h"
#include "tokenizer/tokenizer_loader.h"
#include "tokenizer/unicode.h"

namespace radixserve::tokenizer {

namespace {

constexpr const char* kSpaceMark = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// llama.cpp token types.
enum GgufTokenType { kUnknown = 2, kControl = 3, kUserDefined = 4 };

constexpr const char* kLlama3Pattern =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Pattern =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// o200k (GPT-4o, gpt-oss): cased words keep their leading capitals, contractions attach to the
// word, digits go in threes, punctuation runs keep trailing newlines and slashes.
constexpr const char* kGpt4oPattern =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kDeepseekV3Patterns[] = {
    "\\p{N}{1,3}", "[\xE4\xB8\x80-\xE9\xBE\xA5\xE3\x81\x80-\xE3\x82\x9F\xE3\x82\xA0-\xE3\x83\xBF]+",
    // One pattern over two lines (parenthesized: clang's -Wstring-concatenation).
    ("[!\"#$%&'()*+,\\-./"
     ":;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
     " ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")};

// llama.cpp's deepseek-llm (DeepSeek-V2 / V2-Lite) splitting: newlines, Latin-like letter
// runs, ASCII and full-width punctuation runs, trailing spaces, CJK / Hangul runs, digit runs.
constexpr const char* kDeepseekLlmPatterns[] = {
    ("[\r\n]"),
    ("\\s?(?:(?!\\s)[A-Za-z\xC2\xB5\xC3\x80-\xC3\x96\xC3\x98-\xC3\xB6\xC3\xB8-\xC6\xBA\xC6\xBC-\xC6"
     "\xBF\xC7\x84-\xCA\x93\xCA\x95-\xCA\xAF\xCD\xB0-\xCD\xB3\xCD\xB6\xCD\xB7\xCD\xBB-\xCD"
     "\xBD\xCD\xBF\xCE\x86\xCE\x88-\xCE\x8A\xCE\x8C\xCE\x8E-\xCE\xA1\xCE\xA3-\xCF\xB5\xCF"
     "\xB7-\xD2\x81\xD2\x8A-\xD4\xAF\xD4\xB1-\xD5\x96\xE1\x82\xA0-\xE1\x83\x85\xE1\x8E\xA0-"
     "\xE1\x8F\xB5\xE1\x8F\xB8-\xE1\x8F\xBD\xE1\xB2\x90-\xE1\xB2\xBA\xE1\xB2\xBD-\xE1\xB2"
     "\xBF\xE1\xB4\x80-\xE1\xB4\xAB\xE1\xB5\xAB-\xE1\xB5\xB7\xE1\xB5\xB9-\xE1\xB6\x9A\xE1"
     "\xB8\x80-\xE1\xBC\x95\xE1\xBC\x98-\xE1\xBC\x9D\xE1\xBC\xA0-\xE1\xBD\x85\xE1\xBD\x88-"
     "\xE1\xBD\x8D\xE1\xBD\x90-\xE1\xBD\x97\xE1\xBD\x99\xE1\xBD\x9B\xE1\xBD\x9D\xE1\xBD"
     "\x9F-\xE1\xBD\xBD\xE1\xBE\x80-\xE1\xBE\xB4\xE1\xBE\xB6-\xE1\xBE\xBC\xE1\xBE\xBE\xE1"
     "\xBF\x82-\xE1\xBF\x84\xE1\xBF\x86-\xE1\xBF\x8C\xE1\xBF\x90-\xE1\xBF\x93\xE1\xBF\x96-"
     "\xE1\xBF\x9B\xE1\xBF\xA0-\xE1\xBF\xAC\xE1\xBF\xB2-\xE1\xBF\xB4\xE1\xBF\xB6-\xE1\xBF"
     "\xBC\xE2\x84\x82\xE2\x84\x87\xE2\x84\x8A-\xE2\x84\x93\xE2\x84\x95\xE2\x84\x99-\xE2"
     "\x84\x9D\xE2\x84\xA4\xE2\x84\xA6\xE2\x84\xA8\xE2\x84\xAA-\xE2\x84\xAD\xE2\x84\xAF-"
     "\xE2\x84\xB4\xE2\x84\xB9\xE2\x84\xBC-\xE2\x84\xBF\xE2\x85\x85-\xE2\x85\x89\xE2\x85"
     "\x8E\xE2\x86\x83\xE2\x86\x84\xE2\xB0\x80-\xE2\xB1\xBB\xE2\xB1\xBE-\xE2\xB3\xA4\xE2"
     "\xB3\xAB-\xE2\xB3\xAE\xE2\xB3\xB2\xE2\xB3\xB3\xEA\x99\x80-\xEA\x99\xAD\xEA\x9A\x80-"
     "\xEA\x9A\x9B\xEA\x9C\xA2-\xEA\x9D\xAF\xEA\x9D\xB1-\xEA\x9E\x87\xEA\x9E\x8B-\xEA\x9E"
     "\x8E\xEA\xAD\xB0-\xEA\xAE\xBF\xEF\xAC\x80-\xEF\xAC\x86\xEF\xAC\x93-\xEF\xAC\x97\xEF"
     "\xBC\xA1-\xEF\xBC\xBA\xEF\xBD\x81-\xEF\xBD\x9A\xF0\x90\x90\x80-\xF0\x90\x91\x8F\xF0"
     "\x90\x92\xB0-\xF0\x90\x93\x93\xF0\x90\x93\x98-\xF0\x90\x93\xBB\xF0\x90\xB2\x80-\xF0"
     "\x90\xB2\xB2\xF0\x90\xB3\x80-\xF0\x90\xB3\xB2\xF0\x91\xA2\xA0-\xF0\x91\xA3\x9F\xF0"
     "\x9E\xA4\x80-\xF0\x9E\xA5\x83])+"),
    ("\\s?(?:(?!\\s)[!-/:-~\xEF\xBC\x81-\xEF\xBC\x8F\xEF\xBC\x9A-\xEF\xBD\x9E\xE2\x80\x98-\xE2\x80"
     "\x9F\xE3\x80\x80-\xE3\x80\x82])+"),
    ("\\s+$"),
    ("(?:(?!\\s)[\xE4\xB8\x80-\xE9\xBE\xA5\xE0\xA0\x80-\xE4\xB8\x80\xEA\xB0\x80-\xED\x9F\xBF])+"),
    ("\\p{N}+"),
};
// llama.cpp's deepseek-coder splitting.
constexpr const char* kDeepseekCoderPatterns[] = {
    ("[\r\n]"),
    ("\\s?\\p{L}+"),
    ("\\s?\\p{P}+"),
    ("(?:(?!\\s)[\xE4\xB8\x80-\xE9\xBE\xA5\xE0\xA0\x80-\xE4\xB8\x80\xEA\xB0\x80-\xED\x9F\xBF])+"),
    ("\\p{N}"),
};

Expected<std::unique_ptr<PreTokenizer>> SplitThenBytes(std::vector<const char*> patterns) {
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  for (const char* p : patterns) {
    RADIX_ASSIGN_OR_RETURN(auto re, Regex::Compile(p));
    steps.push_back(
        std::make_unique<SplitPreTokenizer>(std::move(re), SplitBehavior::kIsolated, false));
  }
  steps.push_back(std::make_unique<ByteLevelPreTokenizer>(false, false));
  return std::unique_ptr<PreTokenizer>(new SequencePreTokenizer(std::move(steps)));
}

// The pre-tokenizer llama.cpp uses for a `gpt2` vocabulary's tokenizer.ggml.pre value.
Expected<std::unique_ptr<PreTokenizer>> Gpt2PreTokenizer(const std::string& pre,
                                                         bool& ignore_merges) {
  ignore_merges = false;
  if (pre.empty() || pre == "default" || pre == "gpt-2" || pre == "gpt2" || pre == "olmo" ||
      pre == "jais" || pre == "poro-chat" || pre == "viking") {
    return std::unique_ptr<PreTokenizer>(new ByteLevelPreTokenizer(false, true));
  }
  if (pre == "llama-bpe" || pre == "llama3" || pre == "falcon3" || pre == "pixtral" ||
      pre == "dbrx" || pre == "smaug-bpe") {
    ignore_merges = pre == "llama-bpe" || pre == "llama3";
    return SplitThenBytes({kLlama3Pattern});
  }
  if (pre == "qwen2" || pre == "deepseek-r1-qwen" || pre == "stablelm2" || pre == "hunyuan") {
    return SplitThenBytes({kQwen2Pattern});
  }
  if (pre == "gpt-4o") return SplitThenBytes({kGpt4oPattern});
  if (pre == "deepseek-llm") {
    return SplitThenBytes(
        std::vector<const char*>(std::begin(kDeepseekLlmPatterns), std::end(kDeepseekLlmPatterns)));
  }
  if (pre == "deepseek-coder") {
    return SplitThenBytes(std::vector<const char*>(std::begin(kDeepseekCoderPatterns),
                                                   std::end(kDeepseekCoderPatterns)));
  }
  if (pre == "deepseek-v3") {
    return SplitThenBytes({kDeepseekV3Patterns[0], kDeepseekV3Patterns[1], kDeepseekV3Patterns[2]});
  }
  if (pre == "smollm" || pre == "starcoder" || pre == "refact" || pre == "command-r" ||
      pre == "codeshell" || pre == "exaone" || pre == "minerva") {
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    steps.push_back(std::make_unique<CharSplitPreTokenizer>(IsNumeric, SplitBehavior::kIsolated));
    steps.push_back(std::make_unique<ByteLevelPreTokenizer>(false, true));
    return std::unique_ptr<PreTokenizer>(new SequencePreTokenizer(std::move(steps)));
  }
  return Unsupported("GGUF tokenizer.ggml.pre '" + pre + "' is not supported");
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> LoadGgufTokenizer(const std::string& gguf_path) {
  RADIX_ASSIGN_OR_RETURN(auto meta_or, GgufMetadata::Read(gguf_path));
  const GgufMetadata& meta = meta_or;
  const std::string family = meta.GetString("tokenizer.ggml.model").value_or("");
  const auto* tokens = meta.GetStrings("tokenizer.ggml.tokens");
  if (tokens == nullptr) return DataLoss(gguf_path + " has no tokenizer.ggml.tokens");
  const auto* types = meta.GetNumbers("tokenizer.ggml.token_type");
  if (types != nullptr && types->size() != tokens->size()) {
    return DataLoss("tokenizer.ggml.token_type length differs from tokenizer.ggml.tokens");
  }

  Tokenizer::Parts parts;
  // llama.cpp's gemma4 / paddleocr rule: with "<|tool_response>" present, "</s>" is plain text.
  const bool s_is_text =
      std::find(tokens->begin(), tokens->end(), "<|tool_response>") != tokens->end();
  // llama.cpp's gpt-oss (harmony) rules: the message-structure markers are always rendered and
  // parsed (user-defined), and with both "<|return|>" and "<|call|>" ending generation, "<|end|>"
  // (the end of one message) does not, and is rendered too.
  const auto has = [&](std::string_view t) {
    return std::find(tokens->begin(), tokens->end(), t) != tokens->end();
  };
  const bool harmony_end = has("<|return|>") && has("<|call|>");
  const auto rendered_marker = [&](std::string_view t) {
    return t == "<|channel|>" || t == "<|message|>" || t == "<|start|>" || t == "<|constrain|>" ||
           (harmony_end && t == "<|end|>");
  };
  std::vector<AddedToken> added;
  std::vector<TokenId> end_of_generation;
  for (size_t i = 0; i < tokens->size(); ++i) {
    const std::string& text = (*tokens)[i];
    const bool marker = rendered_marker(text);
    const int type = marker ? kUserDefined : types != nullptr ? static_cast<int>((*types)[i]) : 1;
    const bool plain_s = s_is_text && text == "</s>";
    const bool control = !marker && (type == kControl || (IsControlLookingToken(text) && !plain_s));
    if ((IsEndOfGenerationToken(text) || IsFimEndToken(text)) && !plain_s && !marker) {
      end_of_generation.push_back(static_cast<TokenId>(i));
    }
    if (!control && type != kUserDefined && type != kUnknown) continue;
    AddedToken t;
    t.id = static_cast<TokenId>(i);
    t.content = text;
    t.special = control || type == kUnknown;
    // llama.cpp leaves control and unknown tokens as text without parse_special; user-defined
    // tokens are always matched.
    t.special_parse_only = t.special;
    added.push_back(std::move(t));
  }
  parts.added = AddedVocabulary(std::move(added));

  auto token_id = [&](const char* key) -> std::optional<TokenId> {
    auto v = meta.GetInt(key);
    if (!v || *v < 0 || static_cast<size_t>(*v) >= tokens->size()) return std::nullopt;
    return static_cast<TokenId>(*v);
  };
  parts.bos_id = token_id("tokenizer.ggml.bos_token_id");
  // End of generation: eos / eot / eom from metadata, then llama.cpp's text-detected markers.
  std::vector<TokenId> from_metadata;
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    if (auto id = token_id(key)) from_metadata.push_back(*id);
  }
  end_of_generation.insert(end_of_generation.begin(), from_metadata.begin(), from_metadata.end());
  for (TokenId id : end_of_generation) {
    const bool harmony_message_end = harmony_end && (*tokens)[static_cast<size_t>(id)] == "<|end|>";
    if (!harmony_message_end &&
        std::find(parts.eos_ids.begin(), parts.eos_ids.end(), id) == parts.eos_ids.end()) {
      parts.eos_ids.push_back(id);
    }
  }

  BpeOptions opts;
  opts.unk_id = token_id("tokenizer.ggml.unknown_token_id");
  bool add_bos_default = false;
  if (family == "llama") {
    const auto* scores = meta.GetNumbers("tokenizer.ggml.scores");
    std::vector<float> s;
    if (scores != nullptr) s.assign(scores->begin(), scores->end());
    opts.byte_fallback = true;
    opts.fuse_unk = true;
    parts.model =
        std::make_unique<BpeModel>(BpeModel::FromScores(Vocab(*tokens), std::move(s), opts));
    const bool space_prefix = meta.GetBool("tokenizer.ggml.add_space_prefix").value_or(true);
    std::vector<std::unique_ptr<Normalizer>> norm;
    if (space_prefix) norm.push_back(std::make_unique<PrependNormalizer>(kSpaceMark));
    norm.push_back(std::make_unique<ReplaceNormalizer>(" ", kSpaceMark));
    parts.normalizer = std::make_unique<SequenceNormalizer>(std::move(norm));
    std::vector<std::unique_ptr<Decoder>> dec;
    dec.push_back(std::make_unique<ReplaceDecoder>(kSpaceMark, " "));
    dec.push_back(std::make_unique<ByteFallbackDecoder>());
    dec.push_back(std::make_unique<FuseDecoder>());
    if (space_prefix) dec.push_back(std::make_unique<StripDecoder>(" ", 1, 0));
    parts.decoder = std::make_unique<SequenceDecoder>(std::move(dec));
    add_bos_default = true;
  } else if (family == "gpt2") {
    const auto* merges_text = meta.GetStrings("tokenizer.ggml.merges");
    if (merges_text == nullptr) return DataLoss(gguf_path + " has no tokenizer.ggml.merges");
    std::vector<std::pair<std::string, std::string>> merges;
    merges.reserve(merges_text->size());
    for (const auto& m : *merges_text) {
      const size_t space = m.find(' ', 1);
      if (space == std::string::npos) return DataLoss("malformed GGUF merge '" + m + "'");
      merges.emplace_back(m.substr(0, space), m.substr(space + 1));
    }
    RADIX_ASSIGN_OR_RETURN(
        parts.pre_tokenizer,
        Gpt2PreTokenizer(meta.GetString("tokenizer.ggml.pre").value_or(""), opts.ignore_merges));
    RADIX_ASSIGN_OR_RETURN(auto model, BpeModel::FromMerges(Vocab(*tokens), merges, opts));
    parts.model = std::make_unique<BpeModel>(std::move(model));
    parts.decoder = std::make_unique<ByteLevelDecoder>();
  } else {
    return Unsupported("GGUF tokenizer model '" + family + "' is not supported");
  }

  if (meta.GetBool("tokenizer.ggml.add_bos_token").value_or(add_bos_default) && parts.bos_id) {
    parts.post_processor.prefix.push_back(*parts.bos_id);
  }
  if (meta.GetBool("tokenizer.ggml.add_eos_token").value_or(false)) {
    if (auto eos = token_id("tokenizer.ggml.eos_token_id"))
      parts.post_processor.suffix.push_back(*eos);
  }
  return std::make_unique<Tokenizer>(std::move(parts));
}

}  // namespace radixserve::tokenizer
