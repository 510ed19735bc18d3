// Tool-call parsers: SGLang's `--tool-call-parser` formats (sglang/srt/function_call/) read from
// model output. A ToolCallParser is built once per request from the parser name and the
// request's tools; Parse reads a finished output, a ToolCallStream reads it delta by delta.
//
// Behaviour follows SGLang's detectors: which markers open and close a call, which text is left
// as content, which calls are dropped (a call naming a function that is not among the tools is
// dropped where SGLang's detector drops it: hermes, qwen25, llama3, mistral, pythonic,
// deepseekv3/v31, glm45, step3, gpt-oss; kept by kimi_k2 and qwen3_coder), and how arguments are
// written (json.dumps of the parsed value, except kimi_k2 which passes the model's JSON text).
// Where SGLang's streaming and non-streaming paths disagree, the streamed call deltas of a
// well-formed output concatenate to exactly the non-streamed name and arguments.
//
// Thread safety: a ToolCallParser is immutable and may be shared; each ToolCallStream belongs to
// one response stream (one thread at a time).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_template.h"
#include "common/status.h"

namespace radixserve::chat {

// A function the request offers: OpenAI `tools[i].function.name` and `.parameters` (JSON schema).
struct ToolSpec {
  std::string name;
  Json parameters = Json::object();
  bool strict = false;  // function.strict: the arguments must follow `parameters` exactly
};

// Reads OpenAI `tools` ([{"type": "function", "function": {...}}]); entries of other types are
// skipped. Error when an entry has no function name.
Expected<std::vector<ToolSpec>> ToolSpecsFromOpenAI(const Json& tools);

struct ToolCall {
  int index = 0;        // position among the calls of this output (OpenAI tool_calls[].index)
  int tool_index = -1;  // position of the function in the tools list; -1 if not among them
  std::string name;
  std::string arguments;  // JSON text
};

struct ToolCallParseResult {
  std::string normal_text;  // the content left for the client, as SGLang's parse_non_stream
  std::vector<ToolCall> calls;
};

// One streamed piece of a call: the first delta of a call carries its name (and usually empty
// arguments), later ones carry argument text to append.
struct ToolCallDelta {
  int index = 0;
  std::optional<std::string> name;
  std::string arguments;
};

struct ToolCallStreamResult {
  std::string normal_text;
  std::vector<ToolCallDelta> calls;
};

// What a grammar needs to force a call of one function in this format (SGLang's
// structure_info): the text before the arguments JSON, the text after it, and the trigger that
// starts a call.
struct ToolCallStructure {
  std::string begin;
  std::string end;
  std::string trigger;
};

class ToolCallFormat;

class ToolCallStream {
 public:
  explicit ToolCallStream(std::shared_ptr<const ToolCallFormat> format);
  ~ToolCallStream();
  ToolCallStream(ToolCallStream&&) noexcept;
  ToolCallStream& operator=(ToolCallStream&&) noexcept;

  // Feeds the next text delta; returns the content and call deltas that are now final. Text that
  // may still turn into call markup is held back.
  ToolCallStreamResult Feed(std::string_view delta);
  // The output ended: releases held-back text (a marker that never completed is content).
  ToolCallStreamResult Finish();
  // Bytes of the output kept to be read again (what the format has not settled yet).
  size_t buffered() const { return buffer_.size(); }

 private:
  ToolCallStreamResult Emit(bool at_end);

  std::shared_ptr<const ToolCallFormat> format_;
  std::string buffer_;             // the text not yet settled (see ToolCallScan)
  size_t normal_sent_ = 0;         // content sent from buffer_'s scan
  std::vector<size_t> args_sent_;  // per call of buffer_'s scan that was emitted
  int calls_settled_ = 0;          // calls before buffer_ (their indices come first)
  uint32_t state_ = 0;             // the format's state at the start of buffer_
  bool finished_ = false;
};

class ToolCallParser {
 public:
  // `name` is a --tool-call-parser value (see Names()); unknown names are kInvalidArgument
  // listing the valid ones.
  static Expected<std::unique_ptr<ToolCallParser>> Create(std::string_view name,
                                                          std::vector<ToolSpec> tools);
  // The parser names Create accepts, sorted.
  static const std::vector<std::string>& Names();

  ~ToolCallParser();

  // Parses a finished output (SGLang's parse_non_stream). Without tools the text is returned
  // unchanged, as SGLang does.
  ToolCallParseResult Parse(std::string_view text) const;
  // Whether `text` contains this format's call markup (SGLang's has_tool_call).
  bool HasToolCall(std::string_view text) const;
  // begin/end/trigger around a call of `function_name`; nullopt for formats whose calls are not
  // "begin + JSON arguments + end" (pythonic, qwen3_coder, glm45, step3, gpt-oss), where SGLang
  // uses its model-specific grammars instead.
  std::optional<ToolCallStructure> StructureInfo(std::string_view function_name) const;
  ToolCallStream NewStream() const;

  const std::string& name() const { return name_; }

 private:
  ToolCallParser(std::string name, std::shared_ptr<const ToolCallFormat> format);

  std::string name_;
  std::shared_ptr<const ToolCallFormat> format_;
};

}  // namespace radixserve::chat
