// radix_chat_render: renders one conversation through ChatTemplate, for the oracle tests in
// tests/oracle/chat/. Reads a JSON request on stdin, writes the prompt to stdout unchanged (no
// trailing newline added); on error prints the message to stderr and exits 1.
// Request fields:
//   template | template_file | chat_template_arg | tokenizer_config (+ template_name) |
//   completion_template (with prompt, suffix: prints the FIM prompt instead)
//   messages, tools, documents, add_generation_prompt, continue_final_message,
//   chat_template_kwargs, bos_token / eos_token / unk_token / pad_token (override the config),
//   prepare_messages (apply SGLang's per-message preparation first)
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "chat/chat_template.h"
#include "chat/chat_template_loader.h"
#include "chat/completion_template.h"

namespace chat = radixserve::chat;

namespace {

int Fail(const std::string& message) {
  std::cerr << message << '\n';
  return 1;
}

std::string StringField(const chat::Json& request, const char* key) {
  auto it = request.find(key);
  return it != request.end() && it->is_string() ? it->get<std::string>() : std::string();
}

int RenderCompletion(const chat::Json& request) {
  auto fim = chat::CompletionTemplate::Load(StringField(request, "completion_template"));
  if (!fim.ok()) return Fail(fim.status().message());
  std::cout << fim->Apply(StringField(request, "prompt"), StringField(request, "suffix"));
  return 0;
}

}  // namespace

int main() {
  std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  chat::Json request = chat::Json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (request.is_discarded() || !request.is_object()) return Fail("input is not a JSON object");
  if (request.contains("completion_template")) return RenderCompletion(request);

  chat::Json config = chat::Json::object();
  std::string config_path = StringField(request, "tokenizer_config");
  if (!config_path.empty()) {
    auto read = chat::ReadTokenizerConfig(config_path);
    if (!read.ok()) return Fail(read.status().message());
    config = std::move(read.value());
  }
  chat::SpecialTokens tokens = chat::SpecialTokensFromConfig(config);
  for (auto [key, field] :
       {std::pair{"bos_token", &tokens.bos_token}, std::pair{"eos_token", &tokens.eos_token},
        std::pair{"unk_token", &tokens.unk_token}, std::pair{"pad_token", &tokens.pad_token}}) {
    if (request.contains(key)) *field = StringField(request, key);
  }

  std::string source;
  if (request.contains("template")) {
    source = StringField(request, "template");
  } else if (request.contains("template_file") || request.contains("chat_template_arg")) {
    std::string arg = StringField(
        request, request.contains("template_file") ? "template_file" : "chat_template_arg");
    auto resolved = chat::ResolveChatTemplateArg(arg);
    if (!resolved.ok()) return Fail(resolved.status().message());
    source = std::move(resolved.value());
  } else {
    auto selected = chat::SelectChatTemplate(config.value("chat_template", chat::Json()),
                                             StringField(request, "template_name"));
    if (!selected.ok()) return Fail(selected.status().message());
    source = std::move(selected.value());
  }
  auto compiled = chat::ChatTemplate::Compile(std::move(source), std::move(tokens));
  if (!compiled.ok()) return Fail(compiled.status().message());

  chat::ChatRenderInput input_spec;
  input_spec.messages = request.value("messages", chat::Json::array());
  if (request.value("prepare_messages", false) && input_spec.messages.is_array()) {
    for (auto& message : input_spec.messages) {
      message = chat::PrepareMessage(message, compiled->content_format());
    }
  }
  input_spec.tools = request.value("tools", chat::Json());
  input_spec.documents = request.value("documents", chat::Json());
  input_spec.add_generation_prompt = request.value("add_generation_prompt", false);
  input_spec.continue_final_message = request.value("continue_final_message", false);
  input_spec.template_kwargs = request.value("chat_template_kwargs", chat::Json::object());
  auto prompt = compiled->Render(input_spec);
  if (!prompt.ok()) return Fail(prompt.status().message());
  std::cout << prompt.value();
  return 0;
}
