#include "api/parse_api.h"

#include <optional>
#include <string>

#include "api/json_body.h"
#include "api/openai_common.h"
#include "api/openai_tools.h"
#include "chat/reasoning_parser.h"
#include "chat/tool_call_parser.h"

namespace radixserve::api {
namespace {

using openai::SendValidationError;

// The body as an ordered JSON object (tool schemas keep their key order), or a 400 already sent.
std::optional<chat::Json> ParseObject(const ApiRequest& request, ResponseWriter& writer) {
  auto body = ParseOrderedJsonBody(request.body);
  if (!body.ok()) {
    SendValidationError(writer, body.status().message());
    return std::nullopt;
  }
  if (!body->is_object()) {
    SendValidationError(writer, "The request body must be a JSON object.");
    return std::nullopt;
  }
  return std::move(body).value();
}

// A required string field, or a 400 naming it already sent.
std::optional<std::string> RequireString(const chat::Json& body, const char* key,
                                         ResponseWriter& writer) {
  auto it = body.find(key);
  if (it == body.end() || !it->is_string()) {
    SendValidationError(writer, std::string("Field '") + key + "' is required and must be a string.");
    return std::nullopt;
  }
  return it->get<std::string>();
}

}  // namespace

void HandleParseFunctionCall(ServerContext&, const ApiRequest& request, ResponseWriterPtr writer) {
  std::optional<chat::Json> body = ParseObject(request, *writer);
  if (!body) return;
  std::optional<std::string> text = RequireString(*body, "text", *writer);
  if (!text) return;
  std::optional<std::string> parser_name = RequireString(*body, "tool_call_parser", *writer);
  if (!parser_name) return;
  auto tools_field = body->find("tools");
  if (tools_field == body->end() || !tools_field->is_array()) {
    return SendValidationError(*writer, "Field 'tools' is required and must be a list.");
  }
  std::vector<chat::ToolSpec> tools;
  try {
    chat::Json only_tools = {{"tools", *tools_field}};
    tools = openai::ReadToolRequest(only_tools).tools;
  } catch (const std::exception& e) {
    return SendValidationError(*writer, e.what());
  }
  auto parser = chat::ToolCallParser::Create(*parser_name, std::move(tools));
  if (!parser.ok()) return openai::SendError(*writer, BadRequest(parser.status().message()));
  chat::ToolCallParseResult parsed = (*parser)->Parse(*text);
  nlohmann::json calls = nlohmann::json::array();
  for (const chat::ToolCall& call : parsed.calls) {
    calls.push_back(
        {{"tool_index", call.tool_index}, {"name", call.name}, {"parameters", call.arguments}});
  }
  nlohmann::json out = {{"normal_text", parsed.normal_text}, {"calls", std::move(calls)}};
  writer->Send(200, "application/json", ToJsonText(out));
}

void HandleSeparateReasoning(ServerContext&, const ApiRequest& request, ResponseWriterPtr writer) {
  std::optional<chat::Json> body = ParseObject(request, *writer);
  if (!body) return;
  std::optional<std::string> text = RequireString(*body, "text", *writer);
  if (!text) return;
  std::optional<std::string> parser_name = RequireString(*body, "reasoning_parser", *writer);
  if (!parser_name) return;
  auto parser = chat::ReasoningParser::Create(*parser_name);
  if (!parser.ok()) return openai::SendError(*writer, BadRequest(parser.status().message()));
  chat::ReasoningResult split = (*parser)->Parse(*text);
  nlohmann::json out = {{"text", split.normal_text}, {"reasoning_text", split.reasoning_text}};
  writer->Send(200, "application/json", ToJsonText(out));
}

}  // namespace radixserve::api
