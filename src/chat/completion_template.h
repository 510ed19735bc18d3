// CompletionTemplate: SGLang's `--completion-template` for fill-in-the-middle code completion on
// /v1/completions. A request with a non-empty `suffix` is turned into one FIM prompt; without a
// suffix the prompt is used unchanged.
//   kMiddle: begin + prompt + middle + suffix + end   (deepseek_coder)
//   kEnd:    begin + prompt + end + suffix + middle   (star_coder, qwen_coder)
// Builtins: deepseek_coder, star_coder, qwen_coder. A file is a JSON object with "name",
// "fim_begin_token", "fim_middle_token", "fim_end_token" and "fim_position" ("MIDDLE"|"END").
// Immutable value type; safe to share across threads.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace radixserve::chat {

enum class FimPosition { kMiddle, kEnd };

struct CompletionTemplate {
  std::string name;
  std::string fim_begin_token;
  std::string fim_middle_token;
  std::string fim_end_token;
  FimPosition fim_position = FimPosition::kMiddle;

  // Resolves `--completion-template`: a builtin name or a JSON file path.
  static Expected<CompletionTemplate> Load(const std::string& arg);

  // The prompt sent to the model for `prompt` and `suffix`.
  std::string Apply(std::string_view prompt, std::string_view suffix) const;
};

}  // namespace radixserve::chat
