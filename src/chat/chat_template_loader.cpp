#include "chat/chat_template_loader.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "chat/builtin_chat_templates.h"

namespace radixserve::chat {
namespace {

Expected<std::string> ReadFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return NotFound("no such file: " + path);
  std::ifstream file(path, std::ios::binary);
  if (!file) return NotFound("cannot open " + path);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string TokenText(const Json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return {};
}

std::string BuiltinNameList() {
  std::string names;
  for (std::string_view name : BuiltinChatTemplateNames()) {
    if (!names.empty()) names += ", ";
    names += name;
  }
  return names;
}

}  // namespace

Expected<std::string> SelectChatTemplate(const Json& chat_template, std::string_view name) {
  if (chat_template.is_string()) return chat_template.get<std::string>();
  if (!chat_template.is_array()) return NotFound("the tokenizer config has no chat template");
  std::string wanted = name.empty() ? "default" : std::string(name);
  std::string available;
  for (const auto& entry : chat_template) {
    if (!entry.is_object() || !entry.contains("name") || !entry.contains("template")) continue;
    if (!entry["name"].is_string() || !entry["template"].is_string()) continue;
    std::string entry_name = entry["name"].get<std::string>();
    if (entry_name == wanted) return entry["template"].get<std::string>();
    available += (available.empty() ? "" : ", ") + entry_name;
  }
  return NotFound("no chat template named '" + wanted + "' (available: " + available + ")");
}

SpecialTokens SpecialTokensFromConfig(const Json& tokenizer_config) {
  SpecialTokens tokens;
  if (!tokenizer_config.is_object()) return tokens;
  tokens.bos_token = TokenText(tokenizer_config, "bos_token");
  tokens.eos_token = TokenText(tokenizer_config, "eos_token");
  tokens.unk_token = TokenText(tokenizer_config, "unk_token");
  tokens.pad_token = TokenText(tokenizer_config, "pad_token");
  for (const char* key : {"mask_token", "cls_token", "sep_token"}) {
    std::string token = TokenText(tokenizer_config, key);
    if (!token.empty()) tokens.extra.emplace_back(key, token);
  }
  auto extra = tokenizer_config.find("extra_special_tokens");
  if (extra != tokenizer_config.end() && extra->is_object()) {
    for (const auto& item : extra->items()) {
      std::string token = TokenText(*extra, item.key().c_str());
      if (!token.empty()) tokens.extra.emplace_back(item.key(), token);
    }
  }
  return tokens;
}

Expected<Json> ReadTokenizerConfig(const std::string& path) {
  RADIX_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  Json config = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) {
    return DataLoss(path + " is not a JSON object");
  }
  return config;
}

Expected<std::string> ResolveChatTemplateArg(const std::string& arg) {
  if (std::optional<std::string_view> builtin = FindBuiltinChatTemplate(arg)) {
    return std::string(*builtin);
  }
  std::error_code ec;
  if (!std::filesystem::exists(arg, ec)) {
    return NotFound("chat template '" + arg + "' is neither a builtin name (" + BuiltinNameList() +
                    ") nor a file");
  }
  if (std::filesystem::path(arg).extension() == ".json") {
    return Unsupported("chat template '" + arg +
                       "': JSON conversation-format files are not supported; use a .jinja file");
  }
  RADIX_ASSIGN_OR_RETURN(std::string text, ReadFile(arg));
  std::string source = std::move(text);
  size_t begin = source.find_first_not_of('\n');
  size_t end = source.find_last_not_of('\n');
  source = begin == std::string::npos ? std::string() : source.substr(begin, end - begin + 1);
  std::string unescaped;
  unescaped.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\\' && i + 1 < source.size() && source[i + 1] == 'n') {
      unescaped += '\n';
      ++i;
    } else {
      unescaped += source[i];
    }
  }
  return unescaped;
}

Expected<ChatTemplate> LoadChatTemplate(const std::string& chat_template_arg,
                                        const std::string& tokenizer_config_path,
                                        std::string_view template_name,
                                        std::optional<std::string> gguf_chat_template) {
  Json config = Json::object();
  if (!tokenizer_config_path.empty()) {
    RADIX_ASSIGN_OR_RETURN(config, ReadTokenizerConfig(tokenizer_config_path));
  }
  SpecialTokens tokens = SpecialTokensFromConfig(config);

  if (!chat_template_arg.empty()) {
    RADIX_ASSIGN_OR_RETURN(std::string source, ResolveChatTemplateArg(chat_template_arg));
    return ChatTemplate::Compile(std::move(source), std::move(tokens));
  }
  auto it = config.find("chat_template");
  if (it != config.end() && !it->is_null()) {
    RADIX_ASSIGN_OR_RETURN(std::string source, SelectChatTemplate(*it, template_name));
    return ChatTemplate::Compile(std::move(source), std::move(tokens));
  }
  if (gguf_chat_template.has_value()) {
    return ChatTemplate::Compile(std::move(*gguf_chat_template), std::move(tokens));
  }
  return NotFound("the model has no chat template; pass --chat-template");
}

}  // namespace radixserve::chat
