#include "api/openai_tools.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "api/openai_common.h"
#include "chat/py_json.h"

namespace radixserve::api::openai {
namespace {

const chat::Json* Field(const chat::Json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

// One function's entry of the call-array schema: {"name": <that name>, "parameters": <its
// parameters schema>}.
chat::Json CallItemSchema(const chat::ToolSpec& tool) {
  chat::Json parameters =
      tool.parameters.is_object() && !tool.parameters.empty()
          ? tool.parameters
          : chat::Json{{"type", "object"}, {"properties", chat::Json::object()}};
  // "type": "object" is explicit (SGLang leaves it out; without it a bare number would match).
  return chat::Json{{"type", "object"},
                    {"properties",
                     {{"name", {{"type", "string"}, {"enum", chat::Json::array({tool.name})}}},
                      {"parameters", std::move(parameters)}}},
                    {"required", chat::Json::array({"name", "parameters"})}};
}

nlohmann::json CallJson(const std::string& id, int index, const std::string& name,
                        const std::string& arguments) {
  return {{"id", id},
          {"index", index},
          {"type", "function"},
          {"function", {{"name", name}, {"arguments", arguments}}}};
}

}  // namespace

ApiExpected<ToolRequest> ReadToolRequest(const chat::Json& body) {
  ToolRequest out;
  const chat::Json* tools = Field(body, "tools");
  if (tools != nullptr) {
    if (!tools->is_array()) return InvalidRequest("tools must be a list of tool objects.");
    for (const chat::Json& tool : *tools) {
      if (!tool.is_object()) return InvalidRequest("Each entry of tools must be an object.");
      const chat::Json* type = Field(tool, "type");
      if (type != nullptr && (!type->is_string() || type->get<std::string>() != "function")) {
        return InvalidRequest("tools[].type must be \"function\".");
      }
      const chat::Json* function = Field(tool, "function");
      if (function == nullptr || !function->is_object()) {
        return InvalidRequest("tools[].function must be an object.");
      }
      const chat::Json* name = Field(*function, "name");
      if (name == nullptr || !name->is_string() || name->get<std::string>().empty()) {
        return InvalidRequest("tools[].function.name must be a non-empty string.");
      }
      const chat::Json* parameters = Field(*function, "parameters");
      if (parameters != nullptr && !parameters->is_object()) {
        return InvalidRequest("tools[].function.parameters must be a JSON schema object.");
      }
      const chat::Json* strict = Field(*function, "strict");
      if (strict != nullptr && !strict->is_boolean()) {
        return InvalidRequest("tools[].function.strict must be a boolean.");
      }
    }
    auto specs = chat::ToolSpecsFromOpenAI(*tools);
    if (!specs.ok()) return InvalidRequest(specs.status().message());
    out.tools = std::move(specs).value();
  }

  const chat::Json* choice = Field(body, "tool_choice");
  if (choice == nullptr) {
    out.mode = out.tools.empty() ? ToolChoiceMode::kNone : ToolChoiceMode::kAuto;
  } else if (choice->is_string()) {
    const std::string mode = choice->get<std::string>();
    if (mode == "none") {
      out.mode = ToolChoiceMode::kNone;
    } else if (mode == "auto") {
      out.mode = ToolChoiceMode::kAuto;
    } else if (mode == "required") {
      out.mode = ToolChoiceMode::kRequired;
    } else {
      return InvalidRequest(fmt::format(
          "tool_choice must be \"none\", \"auto\", \"required\" or {{\"type\": \"function\", "
          "\"function\": {{\"name\": ...}}}}, got \"{}\".",
          mode.size() > 40 ? mode.substr(0, 40) + "..." : mode));
    }
  } else if (choice->is_object()) {
    const chat::Json* function = Field(*choice, "function");
    const chat::Json* name =
        function != nullptr && function->is_object() ? Field(*function, "name") : nullptr;
    if (name == nullptr || !name->is_string()) {
      return InvalidRequest("tool_choice.function.name must be a string.");
    }
    out.mode = ToolChoiceMode::kNamed;
    out.named_function = name->get<std::string>();
  } else {
    return InvalidRequest("tool_choice must be a string or an object.");
  }
  // SGLang: "auto" (its default) without tools calls nothing; the others need tools.
  if (out.mode == ToolChoiceMode::kAuto && out.tools.empty()) out.mode = ToolChoiceMode::kNone;
  if (out.mode != ToolChoiceMode::kNone && out.tools.empty()) {
    return BadRequest(
        "Tools cannot be empty when tool_choice is \"required\" or a named function.");
  }
  if (out.mode == ToolChoiceMode::kNamed) {
    bool found = false;
    for (const chat::ToolSpec& tool : out.tools) found = found || tool.name == out.named_function;
    if (!found) {
      return BadRequest(fmt::format("Tool '{}' not found in 'tools'.",
                                    out.named_function.size() > 80
                                        ? out.named_function.substr(0, 80) + "..."
                                        : out.named_function));
    }
  }
  if (const chat::Json* parallel = Field(body, "parallel_tool_calls")) {
    if (!parallel->is_boolean()) return InvalidRequest("parallel_tool_calls must be a boolean.");
    out.parallel = parallel->get<bool>();
  }

  if (out.mode != ToolChoiceMode::kNone) {
    out.template_tools = chat::Json::array();
    for (const chat::Json& tool : *tools) {
      const std::string& name = tool["function"]["name"].get_ref<const std::string&>();
      if (out.mode == ToolChoiceMode::kNamed && name != out.named_function) continue;
      chat::Json entry = tool;
      if (!entry.contains("type")) entry["type"] = "function";
      out.template_tools.push_back(std::move(entry));
    }
  }
  if (const chat::Json* messages = Field(body, "messages"); messages && messages->is_array()) {
    for (const chat::Json& message : *messages) {
      if (!message.is_object()) continue;
      const chat::Json* role = Field(message, "role");
      const chat::Json* calls = Field(message, "tool_calls");
      if (role && role->is_string() && role->get<std::string>() == "assistant" && calls &&
          calls->is_array()) {
        out.history_calls += static_cast<int>(calls->size());
      }
    }
  }
  return out;
}

ApiExpected<std::string> ToolCallSchema(const ToolRequest& request) {
  chat::Json schema = {{"type", "array"}, {"minItems", 1}};
  if (request.mode == ToolChoiceMode::kNamed) {
    for (const chat::ToolSpec& tool : request.tools) {
      if (tool.name == request.named_function) {
        schema["items"] = CallItemSchema(tool);
        break;
      }
    }
  } else {
    chat::Json any_of = chat::Json::array();
    chat::Json defs = chat::Json::object();
    for (const chat::ToolSpec& tool : request.tools) {
      any_of.push_back(CallItemSchema(tool));
      if (!tool.parameters.is_object()) continue;
      auto found = tool.parameters.find("$defs");
      if (found == tool.parameters.end() || !found->is_object()) continue;
      for (const auto& [name, def] : found->items()) {
        if (defs.contains(name) && defs[name] != def) {
          return BadRequest(fmt::format(
              "Tool definition '{}' has multiple schemas, which is not supported.", name));
        }
        defs[name] = def;
      }
    }
    schema["items"] = {{"type", "object"}, {"anyOf", std::move(any_of)}};
    if (!defs.empty()) schema["$defs"] = std::move(defs);
  }
  if (!request.parallel) schema["maxItems"] = 1;
  return schema.dump();
}

ApiExpected<std::optional<std::string>> StrictCallsTag(const ToolRequest& request,
                                                       const chat::ToolCallParser* parser) {
  const std::optional<std::string> none;
  if (request.mode != ToolChoiceMode::kAuto || parser == nullptr) return none;
  const auto strict = std::find_if(request.tools.begin(), request.tools.end(),
                                   [](const chat::ToolSpec& tool) { return tool.strict; });
  if (strict == request.tools.end()) return none;
  chat::Json structures = chat::Json::array();
  std::vector<std::string> triggers;
  for (const chat::ToolSpec& tool : request.tools) {
    std::optional<chat::ToolCallStructure> info = parser->StructureInfo(tool.name);
    if (!info) {
      return BadRequest(fmt::format(
          "Function '{}' is strict, but the {} tool-call format cannot be constrained under "
          "tool_choice \"auto\"; use tool_choice \"required\" or a named function (constrained "
          "for every parser), or strict false.",
          strict->name, parser->name()));
    }
    chat::Json schema = chat::Json::object();
    if (tool.strict && tool.parameters.is_object() && !tool.parameters.empty()) {
      schema = tool.parameters;
    }
    structures.push_back(
        {{"begin", info->begin}, {"schema", std::move(schema)}, {"end", info->end}});
    if (std::find(triggers.begin(), triggers.end(), info->trigger) == triggers.end()) {
      triggers.push_back(info->trigger);
    }
  }
  chat::Json tag = {{"type", "structural_tag"},
                    {"structures", std::move(structures)},
                    {"triggers", std::move(triggers)}};
  return std::optional<std::string>(tag.dump());
}

std::optional<ApiError> NormalizeHistoryToolCalls(chat::Json& message) {
  if (!message.is_object() || message.value("role", "") != "assistant") return std::nullopt;
  auto calls = message.find("tool_calls");
  if (calls == message.end() || !calls->is_array()) return std::nullopt;
  for (chat::Json& call : *calls) {
    if (!call.is_object()) continue;
    auto function = call.find("function");
    if (function == call.end() || !function->is_object()) continue;
    auto arguments = function->find("arguments");
    if (arguments == function->end() || !arguments->is_string()) continue;
    chat::Json parsed = chat::Json::parse(arguments->get<std::string>(), nullptr, false);
    if (parsed.is_discarded()) {
      return BadRequest("Assistant tool call function.arguments must be valid JSON.");
    }
    if (!parsed.is_object()) {
      return BadRequest("Assistant tool call function.arguments must be a JSON object.");
    }
    *arguments = std::move(parsed);
  }
  return std::nullopt;
}

std::string ToolCallId(const chat::ToolCallParser* parser, const std::string& name, int n) {
  if (parser != nullptr && parser->name() == "kimi_k2") {
    return fmt::format("functions.{}:{}", name, n);
  }
  thread_local std::mt19937_64 rng(std::random_device{}());
  return fmt::format("call_{:016x}{:08x}", rng(), static_cast<uint32_t>(rng()));
}

ToolCallAnswer ParseToolCalls(const ToolRequest& request, const chat::ToolCallParser* parser,
                              const std::string& text) {
  ToolCallAnswer out{text, nullptr};
  if (request.constrained()) {
    // The grammar made the text a JSON array of {"name", "parameters"}; the model's own format
    // plays no part.
    chat::Json calls = chat::Json::parse(text, nullptr, false);
    if (calls.is_discarded() || !calls.is_array()) return out;  // cut short by max_tokens
    nlohmann::json tool_calls = nlohmann::json::array();
    int index = 0;
    for (const chat::Json& call : calls) {
      if (!call.is_object() || !call.contains("name") || !call["name"].is_string() ||
          !call.contains("parameters")) {
        return out;
      }
      const std::string name = call["name"].get<std::string>();
      tool_calls.push_back(CallJson(ToolCallId(parser, name, request.history_calls + index), index,
                                    name, chat::PyJsonDumps(call["parameters"])));
      ++index;
    }
    return {"", std::move(tool_calls)};
  }
  if (request.mode != ToolChoiceMode::kAuto || parser == nullptr || !parser->HasToolCall(text)) {
    return out;
  }
  chat::ToolCallParseResult parsed = parser->Parse(text);
  out.content = std::move(parsed.normal_text);
  if (!request.parallel && parsed.calls.size() > 1) parsed.calls.resize(1);
  nlohmann::json tool_calls = nlohmann::json::array();
  for (const chat::ToolCall& call : parsed.calls) {
    tool_calls.push_back(CallJson(ToolCallId(parser, call.name, request.history_calls + call.index),
                                  call.index, call.name, call.arguments));
  }
  out.tool_calls = std::move(tool_calls);
  return out;
}

ToolCallStreamer::ToolCallStreamer(const ToolRequest& request, const chat::ToolCallParser* parser)
    : request_(request), parser_(parser) {
  if (request.mode == ToolChoiceMode::kAuto && parser != nullptr) stream_ = parser->NewStream();
}

ToolCallStreamer::Out ToolCallStreamer::Feed(std::string_view delta) {
  if (request_.constrained()) {
    array_text_.append(delta);
    return ScanArray();
  }
  if (!stream_) return Out{std::string(delta)};
  return FromParser(stream_->Feed(delta));
}

ToolCallStreamer::Out ToolCallStreamer::Finish() {
  // A constrained element cut short by max_tokens is never sent.
  if (request_.constrained()) return Out{};
  if (!stream_) return Out{};
  return FromParser(stream_->Finish());
}

ToolCallStreamer::Out ToolCallStreamer::FromParser(chat::ToolCallStreamResult result) {
  Out out{std::move(result.normal_text)};
  for (chat::ToolCallDelta& delta : result.calls) {
    if (!request_.parallel && delta.index > 0) continue;
    if (delta.name) {
      if (ids_.size() <= static_cast<size_t>(delta.index)) ids_.resize(delta.index + 1);
      ids_[delta.index] = ToolCallId(parser_, *delta.name, request_.history_calls + delta.index);
      out.tool_calls.push_back(
          CallJson(ids_[delta.index], delta.index, *delta.name, std::move(delta.arguments)));
      called_ = true;
    } else {
      out.tool_calls.push_back(
          {{"index", delta.index}, {"function", {{"arguments", std::move(delta.arguments)}}}});
    }
  }
  return out;
}

// Streams each element of the constrained JSON array once it is complete: the scanner tracks
// strings and nesting, and a top-level object that closes is parsed and sent whole (name and
// arguments in one delta, the arguments formatted exactly as the non-streamed answer's).
ToolCallStreamer::Out ToolCallStreamer::ScanArray() {
  Out out;
  for (; scanned_ < array_text_.size(); ++scanned_) {
    const char c = array_text_[scanned_];
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
      continue;
    }
    if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      if (depth_ == 1 && c == '{') element_start_ = scanned_;
      ++depth_;
    } else if (c == '}' || c == ']') {
      --depth_;
      if (depth_ == 1 && c == '}' && element_start_ != std::string::npos) {
        std::string_view element(array_text_.data() + element_start_,
                                 scanned_ + 1 - element_start_);
        chat::Json call = chat::Json::parse(element, nullptr, false);
        element_start_ = std::string::npos;
        if (call.is_object() && call.contains("name") && call["name"].is_string() &&
            call.contains("parameters")) {
          const std::string name = call["name"].get<std::string>();
          out.tool_calls.push_back(
              CallJson(ToolCallId(parser_, name, request_.history_calls + next_index_), next_index_,
                       name, chat::PyJsonDumps(call["parameters"])));
          ++next_index_;
          called_ = true;
        }
      }
    }
  }
  return out;
}

}  // namespace radixserve::api::openai
