// Chat templates built into the server, selectable with `--chat-template NAME` (SGLang lets the
// flag name a built-in conversation format instead of a file). Each is a Jinja source rendered
// like any model template; special tokens are written literally, so a builtin works whatever
// tokenizer is loaded. Names (SGLang spellings accepted as aliases):
//   chatml                           <|im_start|>role\n...<|im_end|>\n (SmolLM2, Qwen, Hermes)
//   llama-2      (llama-2-chat)      <s>[INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] ... </s>
//   llama-3      (llama-3-instruct)  <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>
//   gemma-it     (gemma)             <start_of_turn>user\n...<end_of_turn>\n, system folded into
//                                    the first user turn, assistant shown as "model"
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace radixserve::chat {

// The Jinja source of builtin `name` (or an alias), or nullopt when there is no such builtin.
std::optional<std::string_view> FindBuiltinChatTemplate(std::string_view name);

// Canonical builtin names, for error messages and --help.
std::vector<std::string_view> BuiltinChatTemplateNames();

}  // namespace radixserve::chat
