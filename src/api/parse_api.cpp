#include "api/parse_api.h"

#include <optional>
#include <string>

#include "api/json_body.h"
#include "api/openai_common.h"
#include "api/openai_tools.h"
#include "api/serving.h"
#include "chat/reasoning_parser.h"
#include "chat/tool_call_parser.h"

namespace radixserve::api {
namespace {

// A required string field.
ApiExpected<std::string> RequireString(const chat::Json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || !it->is_string()) {
    return InvalidRequest(std::string("Field '") + key + "' is required and must be a string.");
  }
  return it->get<std::string>();
}

ApiExpected<nlohmann::json> ParseFunctionCall(std::string_view body_text) {
  chat::Json body;  // ordered: tool schemas keep their key order
  RADIX_ASSIGN_OR_RETURN(body, ParseOrderedJsonObjectBody(body_text));
  std::string text, parser_name;
  RADIX_ASSIGN_OR_RETURN(text, RequireString(body, "text"));
  RADIX_ASSIGN_OR_RETURN(parser_name, RequireString(body, "tool_call_parser"));
  auto tools_field = body.find("tools");
  if (tools_field == body.end() || !tools_field->is_array()) {
    return InvalidRequest("Field 'tools' is required and must be a list.");
  }
  openai::ToolRequest tools;
  RADIX_ASSIGN_OR_RETURN(tools, openai::ReadToolRequest(chat::Json{{"tools", *tools_field}}));
  auto parser = chat::ToolCallParser::Create(parser_name, std::move(tools.tools));
  if (!parser.ok()) return BadRequest(parser.status().message());
  chat::ToolCallParseResult parsed = (*parser)->Parse(text);
  nlohmann::json calls = nlohmann::json::array();
  for (const chat::ToolCall& call : parsed.calls) {
    calls.push_back(
        {{"tool_index", call.tool_index}, {"name", call.name}, {"parameters", call.arguments}});
  }
  return nlohmann::json{{"normal_text", parsed.normal_text}, {"calls", std::move(calls)}};
}

ApiExpected<nlohmann::json> SeparateReasoning(std::string_view body_text) {
  chat::Json body;
  RADIX_ASSIGN_OR_RETURN(body, ParseOrderedJsonObjectBody(body_text));
  std::string text, parser_name;
  RADIX_ASSIGN_OR_RETURN(text, RequireString(body, "text"));
  RADIX_ASSIGN_OR_RETURN(parser_name, RequireString(body, "reasoning_parser"));
  auto parser = chat::ReasoningParser::Create(parser_name);
  if (!parser.ok()) return BadRequest(parser.status().message());
  chat::ReasoningResult split = (*parser)->Parse(text);
  return nlohmann::json{{"text", split.normal_text}, {"reasoning_text", split.reasoning_text}};
}

}  // namespace

void HandleParseFunctionCall(ServerContext&, const ApiRequest& request, ResponseWriterPtr writer) {
  SendResult(*writer, ParseFunctionCall(request.body));
}

void HandleSeparateReasoning(ServerContext&, const ApiRequest& request, ResponseWriterPtr writer) {
  SendResult(*writer, SeparateReasoning(request.body));
}

}  // namespace radixserve::api
