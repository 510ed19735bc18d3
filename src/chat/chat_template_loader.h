// Where a model's chat template comes from, in SGLang's order of precedence:
//   1. `--chat-template ARG`: a builtin name (builtin_chat_templates.h) or a Jinja file path;
//   2. `tokenizer_config.json` `chat_template`: a string, or a list of {"name", "template"}
//      from which "default" (or a requested name) is taken;
//   3. a GGUF file's `tokenizer.chat_template` string (the caller reads the GGUF metadata).
// Special tokens for the template come from tokenizer_config.json in every case.
// All functions are pure or read files; call them at startup, from any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "chat/chat_template.h"
#include "common/status.h"

namespace radixserve::chat {

// Picks the template source out of a tokenizer_config `chat_template` value. `name` empty means
// "default" for a named list. kNotFound if the value is absent/null or the name is missing.
Expected<std::string> SelectChatTemplate(const Json& chat_template, std::string_view name = {});

// bos/eos/unk/pad tokens of a parsed tokenizer_config.json; each may be a string or an
// AddedToken object {"content": ...}; absent or null tokens stay empty.
SpecialTokens SpecialTokensFromConfig(const Json& tokenizer_config);

// Reads and parses tokenizer_config.json (kNotFound / kDataLoss on failure).
Expected<Json> ReadTokenizerConfig(const std::string& path);

// Resolves `--chat-template`: a builtin name gives its source; otherwise the file is read the
// way SGLang reads a .jinja file (surrounding newlines stripped, literal "\n" pairs turned into
// newlines). JSON conversation-format files are kUnsupported; a missing file is kNotFound.
Expected<std::string> ResolveChatTemplateArg(const std::string& arg);

// The full startup path: `chat_template_arg` when given, else the tokenizer_config template
// (optionally by `template_name`), else `gguf_chat_template`. Special tokens come from
// `tokenizer_config_path` when it is non-empty. kNotFound when no source has a template.
Expected<ChatTemplate> LoadChatTemplate(const std::string& chat_template_arg,
                                        const std::string& tokenizer_config_path,
                                        std::string_view template_name = {},
                                        std::optional<std::string> gguf_chat_template = {});

}  // namespace radixserve::chat
