#include "chat/completion_template.h"

#include <array>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

namespace radixserve::chat {
namespace {

const std::array<CompletionTemplate, 3>& Builtins() {
  static const std::array<CompletionTemplate, 3> kBuiltins = {{
      {"deepseek_coder", "<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>",
       FimPosition::kMiddle},
      {"star_coder", "<fim_prefix>", "<fim_middle>", "<fim_suffix>", FimPosition::kEnd},
      {"qwen_coder", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", FimPosition::kEnd},
  }};
  return kBuiltins;
}

}  // namespace

Expected<CompletionTemplate> CompletionTemplate::Load(const std::string& arg) {
  for (const CompletionTemplate& builtin : Builtins()) {
    if (builtin.name == arg) return builtin;
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(arg, ec)) {
    return NotFound("completion template '" + arg +
                    "' is neither a builtin name (deepseek_coder, star_coder, qwen_coder) nor "
                    "a file");
  }
  std::ifstream file(arg, std::ios::binary);
  nlohmann::json spec = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
  if (spec.is_discarded() || !spec.is_object()) {
    return InvalidArgument("completion template file " + arg + " is not a JSON object");
  }
  CompletionTemplate result;
  for (auto [key, field] :
       {std::pair{"name", &result.name}, std::pair{"fim_begin_token", &result.fim_begin_token},
        std::pair{"fim_middle_token", &result.fim_middle_token},
        std::pair{"fim_end_token", &result.fim_end_token}}) {
    if (!spec.contains(key) || !spec[key].is_string()) {
      return InvalidArgument("completion template file " + arg + " needs string field '" + key +
                             "'");
    }
    *field = spec[key].get<std::string>();
  }
  std::string position;
  if (spec.contains("fim_position") && spec["fim_position"].is_string()) {
    position = spec["fim_position"].get<std::string>();
  }
  if (position == "MIDDLE") {
    result.fim_position = FimPosition::kMiddle;
  } else if (position == "END") {
    result.fim_position = FimPosition::kEnd;
  } else {
    return InvalidArgument("completion template file " + arg + ": unknown fim_position '" +
                           position + "' (MIDDLE or END)");
  }
  return result;
}

std::string CompletionTemplate::Apply(std::string_view prompt, std::string_view suffix) const {
  if (suffix.empty()) return std::string(prompt);
  std::string out = fim_begin_token;
  out += prompt;
  if (fim_position == FimPosition::kMiddle) {
    out += fim_middle_token;
    out += suffix;
    out += fim_end_token;
  } else {
    out += fim_end_token;
    out += suffix;
    out += fim_middle_token;
  }
  return out;
}

}  // namespace radixserve::chat
