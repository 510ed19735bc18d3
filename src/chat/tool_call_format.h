// ToolCallFormat: the internal interface each tool-call format implements (one file per format,
// tool_parser_<format>.cpp), and helpers they share. Not part of the chat API; include
// tool_call_parser.h instead.
//
// A format reads text two ways. ParseComplete mirrors SGLang's detect_and_parse on a finished
// output. Scan reads any prefix of an output and reports what is final so far: the content
// outside call markup (partial markers at the end held back) and the calls in order, each with
// its name and the part of its arguments text that can no longer change. ToolCallStream turns
// successive Scans of the growing text into deltas, so a format only has to be right about
// prefixes: Scan(t).normal is a prefix of Scan(t + more).normal, and likewise each call's
// arguments. Formats are immutable and shared across threads.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/json_prefix.h"
#include "chat/tool_call_parser.h"

namespace radixserve::chat {

struct ScannedCall {
  std::string name;
  std::string arguments;  // final prefix of the arguments text
  bool complete = false;
};

struct ToolCallScan {
  std::string normal;
  std::vector<ScannedCall> calls;
  // What the stream may forget (0: nothing): text[0, settled_text) produced the first
  // settled_normal bytes of `normal` and the first settled_calls calls (all complete), and a
  // Scan of text[settled_text, ...) alone reports the rest -- the format reads what follows that
  // point as it reads a fresh output. Lets a stream scan only what is still open instead of the
  // whole text on every delta.
  size_t settled_text = 0;
  size_t settled_normal = 0;
  size_t settled_calls = 0;
  uint32_t next_state = 0;  // where ScanFrom resumes at settled_text (format-defined; 0: fresh)
};

// The tools of one request, looked up by name.
class ToolSet {
 public:
  explicit ToolSet(std::vector<ToolSpec> tools);
  const std::vector<ToolSpec>& tools() const { return tools_; }
  bool empty() const { return tools_.empty(); }
  // Index in the tools list, or -1.
  int IndexOf(std::string_view name) const;
  bool Has(std::string_view name) const { return IndexOf(name) >= 0; }
  // The parameters schema of `name` (null when unknown).
  const Json* Parameters(std::string_view name) const;

 private:
  std::vector<ToolSpec> tools_;
  std::map<std::string, int, std::less<>> index_;
};

class ToolCallFormat {
 public:
  explicit ToolCallFormat(ToolSet tools) : tools_(std::move(tools)) {}
  virtual ~ToolCallFormat() = default;

  virtual ToolCallParseResult ParseComplete(std::string_view text) const = 0;
  virtual ToolCallScan Scan(std::string_view text, bool at_end) const = 0;
  // Scan of text that resumes a settled one in `state` (a ToolCallScan::next_state); formats
  // that only settle at fresh points keep this default.
  virtual ToolCallScan ScanFrom(std::string_view text, bool at_end, uint32_t /*state*/) const {
    return Scan(text, at_end);
  }
  virtual bool HasToolCall(std::string_view text) const = 0;
  virtual std::optional<ToolCallStructure> Structure(std::string_view /*name*/) const {
    return std::nullopt;
  }

  const ToolSet& tools() const { return tools_; }

 protected:
  // A finished call as SGLang's parse_base_json makes it: dropped (nullopt) when the function
  // is not among the tools.
  std::optional<ToolCall> KnownCall(std::string name, std::string arguments) const;

 private:
  ToolSet tools_;
};

// Factories, one per format file.
std::unique_ptr<ToolCallFormat> MakeHermesFormat(ToolSet tools);
std::unique_ptr<ToolCallFormat> MakeQwen25Format(ToolSet tools);
std::unique_ptr<ToolCallFormat> MakeLlama3Format(ToolSet tools);
std::unique_ptr<ToolCallFormat> MakeMistralFormat(ToolSet tools);
std::unique_ptr<ToolCallFormat> MakePythonicFormat(ToolSet tools);
std::unique_ptr<ToolCallFormat> MakeDeepSeekV3Format(ToolSet tools);
std::unique_ptr<ToolCallFormat> MakeDeepSeekV31Format(ToolSet tools);
std::unique_ptr<ToolCallFormat> MakeKimiK2Format(ToolSet tools);
std::unique_ptr<ToolCallFormat> MakeGptOssFormat(ToolSet tools);
std::unique_ptr<ToolCallFormat> MakeQwen3CoderFormat(ToolSet tools);
std::unique_ptr<ToolCallFormat> MakeGlm45Format(ToolSet tools);
std::unique_ptr<ToolCallFormat> MakeStep3Format(ToolSet tools);

// --- helpers shared by the formats ---

// Length of the longest suffix of `text` that is a proper prefix of `marker` (text that may
// still become the marker).
size_t PartialMarkerSuffix(std::string_view text, std::string_view marker);
// Python's str.strip() on ASCII whitespace.
std::string_view StripWs(std::string_view text);
// Removes every occurrence of `marker` from `text`.
std::string RemoveAll(std::string_view text, std::string_view marker);

// Content before markup in Scan: text[from, to) goes to `normal`, except a tail that may still
// become one of `markers` (unless at_end).
void AppendHeldBack(std::string_view text, bool at_end,
                    std::initializer_list<std::string_view> markers, std::string& normal);

// For a Scan's plain tail: text[from, ...) holds no call opener and went to `normal` (after
// `normal_before` bytes) with every `removed` marker dropped (in that order) and a tail that may
// still become a marker held back. Settles the scan (see ToolCallScan) with every call so far at
// a cut short of anything held back that no marker crosses, where the content of what precedes
// it is final; `adjust` may move the cut left (a format's own opener pattern). Only for formats
// that read text after a finished call (and after plain text) as they read a fresh output.
void SettlePlainTail(std::string_view text, size_t from, size_t normal_before,
                     std::initializer_list<std::string_view> removed,
                     std::initializer_list<std::string_view> markers, ToolCallScan& scan,
                     size_t (*adjust)(std::string_view text, size_t cut) = nullptr);

// The `properties` of a tool's parameters schema, descending into anyOf/oneOf/allOf when the
// top level has none (SGLang's get_schema_properties).
Json SchemaProperties(const Json& schema);
// The primary type of a parameter schema (SGLang's infer_type_from_json_schema), or "" if none.
std::string InferSchemaType(const Json& schema);

}  // namespace radixserve::chat

namespace radixserve::chat {

// A JSON call object or a list of them at text[pos] (SGLang accepts both wherever it
// json.loads a call). On kComplete `end` is one past the value; calls holds every object seen
// so far (the last one possibly partial on kPartial).
struct JsonCallListScan {
  JsonScanState state = JsonScanState::kPartial;
  size_t end = 0;
  std::vector<JsonCallScan> calls;
};
JsonCallListScan ScanJsonCalls(std::string_view text, size_t pos, bool at_end);

// json.loads(text) then parse_base_json: the calls of a complete JSON document that is a call
// object or a list of them; nullopt when `text` is not exactly that (Python would raise).
std::optional<std::vector<JsonCallScan>> ParseJsonCalls(std::string_view text);

// Adds the calls of a JSON call list to a scan: known names only; a call whose name is not
// final yet ends the scan (returns false), as does a partial call.
bool AddScannedJsonCalls(const ToolSet& tools, const std::vector<JsonCallScan>& calls,
                         ToolCallScan& scan);

}  // namespace radixserve::chat
