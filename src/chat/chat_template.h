// ChatTemplate: a compiled Jinja chat template rendered exactly as Hugging Face transformers'
// `apply_chat_template` renders it (same Jinja environment: trim_blocks, lstrip_blocks, loop
// controls, Python string/dict methods, `tojson`, `raise_exception`, `strftime_now`), through
// the minijinja crate in rust/chat_template.
//
// Thread safety: a ChatTemplate is immutable after Compile; Render may run concurrently from any
// thread (HTTP I/O threads render before Engine::submit).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

struct RadixChatTemplate;

namespace radixserve::chat {

// Insertion-ordered JSON: templates iterate objects and `tojson` prints them, and both must see
// the client's key order (as Python dicts keep it).
using Json = nlohmann::ordered_json;

// How a template expects message `content`: as a plain string, or as a list of OpenAI-style
// parts ({"type": "text", "text": ...}). Mirrors SGLang's detection: templates mentioning media
// or looping over `message.content` take parts; all others take strings.
enum class ContentFormat { kString, kOpenAI };

// The special tokens HF passes to every template (its `special_tokens_map`); an empty field is
// left undefined in the template, as HF does for a token the tokenizer lacks.
struct SpecialTokens {
  std::string bos_token;
  std::string eos_token;
  std::string unk_token;
  std::string pad_token;
  // Other named tokens HF exposes (mask/cls/sep, `extra_special_tokens` such as boi_token).
  std::vector<std::pair<std::string, std::string>> extra;
};

// One conversation to render. JSON-shaped because templates read arbitrary message fields
// (`tool_calls`, `tool_call_id`, `name`, `reasoning_content`, ...).
struct ChatRenderInput {
  Json messages = Json::array();  // [{"role": ..., "content": ...}, ...]
  Json tools;                     // null, or a list of tool JSON schemas
  Json documents;                 // null, or a list of {"title", "text"} objects
  bool add_generation_prompt = false;
  bool continue_final_message = false;    // end the prompt inside the last message (prefill)
  Json template_kwargs = Json::object();  // e.g. {"enable_thinking": false}
};

class ChatTemplate {
 public:
  // Compiles `source`; a Jinja syntax error becomes kInvalidArgument with the engine's message.
  static Expected<ChatTemplate> Compile(std::string source, SpecialTokens special_tokens = {});

  // Renders `input` into a prompt. Template errors (including `raise_exception`) and invalid
  // inputs become kInvalidArgument with a message suitable for a 400 response.
  Expected<std::string> Render(const ChatRenderInput& input) const;

  const std::string& source() const { return source_; }
  ContentFormat content_format() const { return content_format_; }
  const SpecialTokens& special_tokens() const { return special_tokens_; }

 private:
  struct HandleDeleter {
    void operator()(RadixChatTemplate* handle) const;
  };

  ChatTemplate(std::string source, SpecialTokens special_tokens, RadixChatTemplate* handle);

  // The template's raw output for one context object.
  Expected<std::string> RenderContext(const Json& context) const;

  std::string source_;
  SpecialTokens special_tokens_;
  ContentFormat content_format_ = ContentFormat::kString;
  std::unique_ptr<RadixChatTemplate, HandleDeleter> handle_;
};

// SGLang's content-format detection over the template source (see ContentFormat).
ContentFormat DetectContentFormat(std::string_view source);

// SGLang's per-message preparation: drops null-valued fields; for kString templates joins the
// text parts of a list `content` with single spaces (other parts are dropped); for kOpenAI
// templates keeps the list, reducing each part to {"type", "text"} or {"type": "image"|...}.
Json PrepareMessage(const Json& message, ContentFormat format);

}  // namespace radixserve::chat
