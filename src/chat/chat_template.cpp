#include "chat/chat_template.h"

#include <regex>
#include <utility>

#include "chat/radix_chat_template.h"

namespace radixserve::chat {
namespace {

// transformers appends this marker to the message being continued, renders, and cuts there.
constexpr std::string_view kContinueTag = "CONTINUE_FINAL_MESSAGE_TAG ";
constexpr std::string_view kContinueTagStripped = "CONTINUE_FINAL_MESSAGE_TAG";

// Older and newer names of a message's reasoning text; templates read the first.
constexpr const char* kReasoningFields[] = {"reasoning_content", "thinking", "reasoning"};

std::string TakeString(RadixChatString s) {
  std::string text = s.len == 0 ? std::string() : std::string(s.data, s.len);
  radix_chat_string_free(s);
  return text;
}

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string_view Strip(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// HF fills `thinking` and `reasoning_content` from whichever reasoning field a message carries.
Json AliasReasoningFields(const Json& message) {
  if (!message.is_object()) return message;
  const Json* reasoning = nullptr;
  for (const char* key : kReasoningFields) {
    auto it = message.find(key);
    if (it != message.end() && !it->is_null()) {
      reasoning = &*it;
      break;
    }
  }
  if (reasoning == nullptr) return message;
  Json aliased = Json::object();
  if (!message.contains("thinking")) aliased["thinking"] = *reasoning;
  for (const auto& [key, value] : message.items()) aliased[key] = value;
  aliased["reasoning_content"] = *reasoning;
  return aliased;
}

void AddToken(Json& context, const char* name, const std::string& token) {
  if (!token.empty()) context[name] = token;
}

}  // namespace

void ChatTemplate::HandleDeleter::operator()(RadixChatTemplate* handle) const {
  radix_chat_template_free(handle);
}

ChatTemplate::ChatTemplate(std::string source, SpecialTokens special_tokens,
                           RadixChatTemplate* handle)
    : source_(std::move(source)),
      special_tokens_(std::move(special_tokens)),
      content_format_(DetectContentFormat(source_)),
      handle_(handle) {}

Expected<ChatTemplate> ChatTemplate::Compile(std::string source, SpecialTokens special_tokens) {
  RadixChatString error{nullptr, 0};
  RadixChatTemplate* handle = radix_chat_template_new(source.data(), source.size(), &error);
  std::string message = TakeString(error);
  if (handle == nullptr) return InvalidArgument("chat template does not compile: " + message);
  return ChatTemplate(std::move(source), std::move(special_tokens), handle);
}

Expected<std::string> ChatTemplate::RenderContext(const Json& context) const {
  // Invalid UTF-8 in a request string must be an error, not an exception.
  std::string text = context.dump(-1, ' ', false, Json::error_handler_t::replace);
  RadixChatString out{nullptr, 0};
  bool ok = radix_chat_template_render(handle_.get(), text.data(), text.size(), &out);
  std::string result = TakeString(out);
  if (!ok) return InvalidArgument("chat template error: " + result);
  return result;
}

Expected<std::string> ChatTemplate::Render(const ChatRenderInput& input) const {
  if (!input.messages.is_array()) return InvalidArgument("messages must be a list");
  if (!input.template_kwargs.is_object()) {
    return InvalidArgument("chat_template_kwargs must be an object");
  }
  if (input.continue_final_message && input.add_generation_prompt) {
    return InvalidArgument(
        "continue_final_message and add_generation_prompt are not compatible: use one of them");
  }
  Json messages = Json::array();
  for (const auto& message : input.messages) {
    if (!message.is_object()) return InvalidArgument("each message must be an object");
    messages.push_back(AliasReasoningFields(message));
  }

  std::string continued;  // the text of the final message being continued
  if (input.continue_final_message) {
    if (messages.empty()) {
      return InvalidArgument("continue_final_message is set but the conversation is empty");
    }
    if (source_.find("content") == std::string::npos) {
      return InvalidArgument("continue_final_message is set but the template never reads content");
    }
    Json& content = messages.back()["content"];
    if (content.is_string()) {
      continued = content.get<std::string>();
      content = continued + std::string(kContinueTag);
    } else if (content.is_array()) {
      bool found = false;
      for (auto it = content.rbegin(); it != content.rend() && !found; ++it) {
        if (it->is_object() && it->contains("text") && (*it)["text"].is_string()) {
          continued = (*it)["text"].get<std::string>();
          (*it)["text"] = continued + std::string(kContinueTag);
          found = true;
        }
      }
      if (!found) {
        return InvalidArgument("continue_final_message is set but the final message has no text");
      }
    } else {
      return InvalidArgument("continue_final_message is set but the final message has no content");
    }
  }

  Json context = Json::object();
  AddToken(context, "bos_token", special_tokens_.bos_token);
  AddToken(context, "eos_token", special_tokens_.eos_token);
  AddToken(context, "unk_token", special_tokens_.unk_token);
  AddToken(context, "pad_token", special_tokens_.pad_token);
  for (const auto& [name, token] : special_tokens_.extra) AddToken(context, name.c_str(), token);
  for (const auto& [key, value] : input.template_kwargs.items()) {
    if (key == "messages" || key == "tools" || key == "documents" ||
        key == "add_generation_prompt") {
      return InvalidArgument("chat_template_kwargs may not set '" + key + "'");
    }
    context[key] = value;
  }
  context["messages"] = std::move(messages);
  context["tools"] = input.tools;
  context["documents"] = input.documents;
  context["add_generation_prompt"] = input.add_generation_prompt;

  Expected<std::string> rendered = RenderContext(context);
  if (!rendered.ok() || !input.continue_final_message) return rendered;

  std::string& text = rendered.value();
  size_t tag = text.rfind(kContinueTagStripped);
  if (tag == std::string::npos || text.find(Strip(continued)) == std::string::npos) {
    return InvalidArgument(
        "continue_final_message is set but the template does not render the final message");
  }
  bool spacing_kept = text.compare(tag, kContinueTag.size(), kContinueTag) == 0;
  text.resize(tag);
  if (!spacing_kept) {
    while (!text.empty() && IsSpace(text.back())) text.pop_back();
  }
  return rendered;
}

ContentFormat DetectContentFormat(std::string_view source) {
  for (std::string_view media : {"image", "audio", "video", "vision"}) {
    if (source.find(media) != std::string_view::npos) return ContentFormat::kOpenAI;
  }
  // A for-loop whose iterable is message/msg/m .content or ['content'] (possibly filtered).
  static const std::regex kContentLoop(
      R"(for\s+\w+\s+in\s+(message|msg|m)\s*(\.\s*content\b|\[\s*['"]content['"]\s*\]))");
  std::string text(source);
  return std::regex_search(text, kContentLoop) ? ContentFormat::kOpenAI : ContentFormat::kString;
}

Json PrepareMessage(const Json& message, ContentFormat format) {
  if (!message.is_object()) return message;
  Json prepared = Json::object();
  for (const auto& [key, value] : message.items()) {
    if (!value.is_null()) prepared[key] = value;
  }
  auto content = prepared.find("content");
  if (content == prepared.end() || !content->is_array()) return prepared;

  Json parts = Json::array();
  std::string joined;
  bool first = true;
  for (const auto& part : *content) {
    if (!part.is_object()) continue;
    std::string type = part.value("type", "");
    bool is_text = (type == "text" || type == "input_text") && part.contains("text") &&
                   part["text"].is_string();
    if (format == ContentFormat::kString) {
      if (!is_text) continue;
      if (!first) joined += ' ';
      joined += part["text"].get<std::string>();
      first = false;
    } else if (is_text) {
      parts.push_back({{"type", "text"}, {"text", part["text"]}});
    } else if (type == "image_url" || type == "input_image") {
      parts.push_back({{"type", "image"}});
    } else if (type == "video_url") {
      parts.push_back({{"type", "video"}});
    } else if (type == "audio_url") {
      parts.push_back({{"type", "audio"}});
    }
  }
  if (format == ContentFormat::kString) {
    *content = joined;
  } else {
    // SGLang rebuilds the list and re-adds it last.
    prepared.erase("content");
    prepared["content"] = std::move(parts);
  }
  return prepared;
}

}  // namespace radixserve::chat
