// radix_chat_parse: runs the tool-call and reasoning parsers on model outputs, for the oracle
// tests in tests/oracle/chat/. Reads a JSON array of cases on stdin and writes a JSON array of
// results (one per case) to stdout; a case that fails gets {"error": message}.
// Case fields:
//   text                 the model output
//   tool_parser, tools   a --tool-call-parser name and OpenAI `tools`
//   reasoning_parser, force_reasoning, stream_reasoning
//   chunks               optional deltas (concatenating to text) to stream as well
// Result fields: non-streaming {normal_text, calls: [{name, arguments, tool_index}]} or
// {reasoning_text, normal_text}, and with chunks a "stream" object of the same shape built from
// the concatenated deltas, plus "deltas" (the raw per-feed output).
#include <iostream>
#include <iterator>
#include <map>
#include <string>

#include "chat/reasoning_parser.h"
#include "chat/tool_call_parser.h"

namespace chat = radixserve::chat;
using chat::Json;

namespace {

std::vector<std::string> Chunks(const Json& c) {
  std::vector<std::string> chunks;
  for (const Json& piece : c["chunks"]) chunks.push_back(piece.get<std::string>());
  return chunks;
}

Json RunTools(const Json& c) {
  auto tools = chat::ToolSpecsFromOpenAI(c.value("tools", Json::array()));
  if (!tools.ok()) return Json{{"error", tools.status().message()}};
  auto parser = chat::ToolCallParser::Create(c["tool_parser"].get<std::string>(), *tools);
  if (!parser.ok()) return Json{{"error", parser.status().message()}};
  std::string text = c.value("text", "");
  Json out;
  auto parsed = (*parser)->Parse(text);
  out["normal_text"] = parsed.normal_text;
  out["calls"] = Json::array();
  for (const auto& call : parsed.calls) {
    out["calls"].push_back(
        {{"name", call.name}, {"arguments", call.arguments}, {"tool_index", call.tool_index}});
  }
  out["has_tool_call"] = (*parser)->HasToolCall(text);
  if (c.contains("chunks")) {
    chat::ToolCallStream stream = (*parser)->NewStream();
    Json deltas = Json::array();
    std::string normal;
    std::map<int, Json> calls;
    auto take = [&](const chat::ToolCallStreamResult& r) {
      normal += r.normal_text;
      Json d = {{"normal_text", r.normal_text}, {"calls", Json::array()}};
      for (const auto& call : r.calls) {
        Json& merged = calls[call.index];
        if (call.name) merged["name"] = *call.name;
        merged["arguments"] = merged.value("arguments", "") + call.arguments;
        d["calls"].push_back({{"index", call.index},
                              {"name", call.name ? Json(*call.name) : Json()},
                              {"arguments", call.arguments}});
      }
      deltas.push_back(d);
    };
    for (const auto& chunk : Chunks(c)) take(stream.Feed(chunk));
    take(stream.Finish());
    Json stream_calls = Json::array();
    for (auto& [index, call] : calls) stream_calls.push_back(call);
    out["stream"] = {{"normal_text", normal}, {"calls", stream_calls}};
    out["deltas"] = deltas;
  }
  return out;
}

Json RunReasoning(const Json& c) {
  chat::ReasoningParserOptions options;
  if (c.contains("force_reasoning") && !c["force_reasoning"].is_null()) {
    options.force_reasoning = c["force_reasoning"].get<bool>();
  }
  options.stream_reasoning = c.value("stream_reasoning", true);
  auto parser = chat::ReasoningParser::Create(c["reasoning_parser"].get<std::string>(), options);
  if (!parser.ok()) return Json{{"error", parser.status().message()}};
  std::string text = c.value("text", "");
  auto parsed = (*parser)->Parse(text);
  Json out = {{"reasoning_text", parsed.reasoning_text}, {"normal_text", parsed.normal_text}};
  if (c.contains("chunks")) {
    chat::ReasoningStream stream = (*parser)->NewStream();
    std::string reasoning, normal;
    Json deltas = Json::array();
    auto take = [&](const chat::ReasoningResult& r) {
      reasoning += r.reasoning_text;
      normal += r.normal_text;
      deltas.push_back({{"reasoning_text", r.reasoning_text}, {"normal_text", r.normal_text}});
    };
    for (const auto& chunk : Chunks(c)) take(stream.Feed(chunk));
    take(stream.Finish());
    out["stream"] = {{"reasoning_text", reasoning}, {"normal_text", normal}};
    out["deltas"] = deltas;
  }
  return out;
}

}  // namespace

int main() {
  std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  Json cases = Json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (cases.is_discarded() || !cases.is_array()) {
    std::cerr << "input is not a JSON array\n";
    return 1;
  }
  Json results = Json::array();
  for (const Json& c : cases) {
    if (!c.is_object()) {
      results.push_back(Json{{"error", "case is not an object"}});
    } else if (c.contains("tool_parser")) {
      results.push_back(RunTools(c));
    } else if (c.contains("reasoning_parser")) {
      results.push_back(RunReasoning(c));
    } else {
      results.push_back(Json{{"error", "case names no parser"}});
    }
  }
  std::cout << results.dump(-1, ' ', false, Json::error_handler_t::replace) << '\n';
  return 0;
}
