#include "tokenizer/gguf_special_tokens.h"

#include <algorithm>
#include <array>

namespace radixserve::tokenizer {

namespace {

constexpr std::array<std::string_view, 21> kEndOfGeneration = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<\xEF\xBD\x9C"
    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"};  // DeepSeek

constexpr std::array<std::string_view, 24> kFim = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "<|code_prefix|>", "<|prefix|>",
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>", "<|code_suffix|>", "<|suffix|>",
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>", "<|code_middle|>", "<|middle|>",
    "<|fim_pad|>",    "<fim-pad>",    "<fim_pad>",    "<PAD>", "[PAD]",           "<|file_sep|>"};

constexpr std::array<std::string_view, 10> kFimEnd = {
    "<|fim_pad|>",  "<fim-pad>",     "<fim_pad>",  "<PAD>",  "[PAD]",
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};

template <size_t N>
bool Contains(const std::array<std::string_view, N>& list, std::string_view text) {
  return std::find(list.begin(), list.end(), text) != list.end();
}

}  // namespace

bool IsEndOfGenerationToken(std::string_view text) { return Contains(kEndOfGeneration, text); }

bool IsFimEndToken(std::string_view text) {
  return Contains(kFimEnd, text) || text == "<|file_sep|>";
}

bool IsControlLookingToken(std::string_view text) {
  return Contains(kEndOfGeneration, text) || Contains(kFim, text) || Contains(kFimEnd, text);
}

}  // namespace radixserve::tokenizer
