#include "chat/builtin_chat_templates.h"

#include <array>

namespace radixserve::chat {
namespace {

struct Builtin {
  std::string_view name;
  std::string_view alias;
  std::string_view source;
};

constexpr std::string_view kChatml = R"JINJA({% for message in messages %}
{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' -}}
{% endfor %}
{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %})JINJA";

// Meta's Llama 2 chat format: the system prompt sits inside the first [INST] block.
constexpr std::string_view kLlama2 = R"JINJA({% if messages and messages[0]['role'] == 'system' %}
{% set system = messages[0]['content'] %}{% set turns = messages[1:] %}
{% else %}{% set system = none %}{% set turns = messages %}{% endif %}
{% for message in turns %}
{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
{{ raise_exception('llama-2 expects user and assistant turns to alternate, starting with user') -}}
{% endif %}
{% if message['role'] == 'user' %}
{% set text = message['content'] %}
{% if loop.first and system is not none %}
{% set text = '<<SYS>>\n' + system + '\n<</SYS>>\n\n' + text %}
{% endif %}
{{ '<s>[INST] ' + text | trim + ' [/INST]' -}}
{% else %}
{{ ' ' + message['content'] | trim + ' </s>' -}}
{% endif %}
{% endfor %})JINJA";

constexpr std::string_view kLlama3 = R"JINJA({% for message in messages %}
{% if loop.first %}{{ '<|begin_of_text|>' }}{% endif %}
{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'
   + message['content'] | trim + '<|eot_id|>' -}}
{% endfor %}
{% if add_generation_prompt %}
{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
{% endif %})JINJA";

// Gemma has no system role: the system text opens the first user turn.
constexpr std::string_view kGemmaIt = R"JINJA({{ '<bos>' -}}
{% if messages and messages[0]['role'] == 'system' %}
{% set prefix = messages[0]['content'] + '\n\n' %}{% set turns = messages[1:] %}
{% else %}{% set prefix = '' %}{% set turns = messages %}{% endif %}
{% for message in turns %}
{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
{{ raise_exception('gemma-it expects user and assistant turns to alternate, starting with user') -}}
{% endif %}
{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}
{{ '<start_of_turn>' + role + '\n' + (prefix if loop.first else '')
   + message['content'] | trim + '<end_of_turn>\n' -}}
{% endfor %}
{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %})JINJA";

constexpr std::array<Builtin, 4> kBuiltins = {{
    {"chatml", "chatml", kChatml},
    {"llama-2", "llama-2-chat", kLlama2},
    {"llama-3", "llama-3-instruct", kLlama3},
    {"gemma-it", "gemma", kGemmaIt},
}};

}  // namespace

std::optional<std::string_view> FindBuiltinChatTemplate(std::string_view name) {
  for (const Builtin& builtin : kBuiltins) {
    if (name == builtin.name || name == builtin.alias) return builtin.source;
  }
  return std::nullopt;
}

std::vector<std::string_view> BuiltinChatTemplateNames() {
  std::vector<std::string_view> names;
  for (const Builtin& builtin : kBuiltins) names.push_back(builtin.name);
  return names;
}

}  // namespace radixserve::chat
