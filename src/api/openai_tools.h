// Tool calling on /v1/chat/completions: the request's `tools`, `tool_choice` and
// `parallel_tool_calls`, the grammar that forces a call, and the model's text turned into OpenAI
// `tool_calls` (whole, or as streamed deltas).
//
// As SGLang does it:
// - tool_choice "none" (the default without tools) leaves tools out of the prompt and parses
//   nothing.
// - "auto" (the default with tools) renders the tools through the chat template; when the server
//   has a --tool-call-parser, the output is read with it: the calls it finds become `tool_calls`,
//   the rest stays `content`, and finish_reason "stop" becomes "tool_calls".
// - "required" and a named function ({"type": "function", "function": {"name": ...}}) constrain
//   the output with a JSON schema: an array of {"name", "parameters"} objects whose parameters
//   follow each function's schema (one function for a named choice; at most one call when
//   parallel_tool_calls is false). That array is the answer's `tool_calls`; content is "".
// - "auto" with parallel_tool_calls false keeps the first call the parser finds (streamed or
//   not); the text of later calls is dropped with them.
// Call ids are "call_" + 24 hex digits, except for the kimi_k2 parser
// ("functions.<name>:<n>", n counting the calls in the conversation so far).
//
// Thread safety: plain functions; a ToolCallStreamer belongs to one choice of one response.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/api_error.h"
#include "chat/chat_template.h"
#include "chat/tool_call_parser.h"

namespace radixserve::api::openai {

enum class ToolChoiceMode { kNone, kAuto, kRequired, kNamed };

struct ToolRequest {
  std::vector<chat::ToolSpec> tools;  // every function the request offers
  chat::Json template_tools;          // what the chat template gets: null for "none", only the
                                      // chosen function for a named choice
  ToolChoiceMode mode = ToolChoiceMode::kNone;
  std::string named_function;  // kNamed only
  bool parallel = true;        // parallel_tool_calls
  int history_calls = 0;       // tool calls of assistant messages already in the chat

  bool constrained() const {
    return mode == ToolChoiceMode::kRequired || mode == ToolChoiceMode::kNamed;
  }
};

// Reads tools / tool_choice / parallel_tool_calls from the ordered request body. Fails with
// InvalidRequest for wrong types and BadRequest for requests SGLang refuses (a named function
// that is not among the tools, "required" without tools, ...).
ApiExpected<ToolRequest> ReadToolRequest(const chat::Json& body);

// The JSON schema (as text) a required / named choice constrains the output with; BadRequest when
// two tools define one $defs name differently.
ApiExpected<std::string> ToolCallSchema(const ToolRequest& request);

// tool_choice "auto" with a strict function (function.strict true) constrains the calls the
// model writes in its own format, as SGLang's structural tag does: the output is free text, but
// each call opener (the parser's trigger) must continue as a call of an offered function whose
// arguments follow its schema (any JSON for the functions that are not strict). Returns the
// structural tag (as text), or nullopt when nothing is strict or there is no --tool-call-parser
// (then no call is ever read from the text). BadRequest when the parser's format has no
// "opener + JSON arguments + closer" shape to constrain (pythonic, qwen3_coder, glm45, step3,
// gpt-oss).
ApiExpected<std::optional<std::string>> StrictCallsTag(const ToolRequest& request,
                                                       const chat::ToolCallParser* parser);

// Assistant messages of the history carry tool_calls[].function.arguments as JSON text; chat
// templates iterate them as mappings, so the text is parsed (SGLang does the same). A BadRequest
// when it is not a JSON object.
std::optional<ApiError> NormalizeHistoryToolCalls(chat::Json& message);

// A finished choice's text read for tool calls.
struct ToolCallAnswer {
  std::string content;
  nlohmann::json tool_calls;  // null when there are none, else the OpenAI tool_calls array
};

// `parser` may be null (no --tool-call-parser): then only a constrained choice yields calls.
ToolCallAnswer ParseToolCalls(const ToolRequest& request, const chat::ToolCallParser* parser,
                              const std::string& text);

// One choice's stream: text deltas in, content and OpenAI `delta.tool_calls` entries out.
class ToolCallStreamer {
 public:
  struct Out {
    std::string content;
    nlohmann::json tool_calls = nlohmann::json::array();
  };

  ToolCallStreamer(const ToolRequest& request, const chat::ToolCallParser* parser);

  Out Feed(std::string_view delta);
  // The output ended: what was held back.
  Out Finish();
  // Whether any call was streamed (finish_reason "stop" then becomes "tool_calls").
  bool called() const { return called_; }

 private:
  Out FromParser(chat::ToolCallStreamResult result);
  Out ScanArray();

  const ToolRequest& request_;
  const chat::ToolCallParser* parser_;
  std::optional<chat::ToolCallStream> stream_;  // auto with a parser
  std::string array_text_;                      // constrained: the JSON array so far
  size_t scanned_ = 0;                          // array_text_ bytes looked at
  int depth_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;
  size_t element_start_ = std::string::npos;
  int next_index_ = 0;
  std::vector<std::string> ids_;  // per call index, parser calls
  bool called_ = false;
};

// "call_" + 24 random hex digits, or kimi_k2's "functions.<name>:<n>".
std::string ToolCallId(const chat::ToolCallParser* parser, const std::string& name, int n);

}  // namespace radixserve::api::openai
