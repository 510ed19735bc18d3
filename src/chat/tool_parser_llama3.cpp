// llama3 (SGLang's Llama32Detector): JSON call objects {"name": ..., "parameters" | "arguments":
// ...} after <|python_tag|>, or at the very start of the output without it, several separated
// by ';'. Non-streaming content is the text before <|python_tag|> plus whatever after the last
// parsed call is not a call; a call written as a Python dict (single quotes) is accepted too.
#include "chat/py_json.h"
#include "chat/python_literal.h"
#include "chat/tool_call_format.h"

namespace radixserve::chat {
namespace {

constexpr std::string_view kPythonTag = "<|python_tag|>";

// Only an output that starts with '{' is a bare JSON call: a settle cut never lands on one.
size_t NotAtBrace(std::string_view text, size_t cut) {
  while (cut > 0 && text[cut] == '{') --cut;
  return cut;
}

class Llama3Format : public ToolCallFormat {
 public:
  using ToolCallFormat::ToolCallFormat;

  bool HasToolCall(std::string_view text) const override {
    return text.find(kPythonTag) != std::string_view::npos || text.substr(0, 1) == "{";
  }

  ToolCallParseResult ParseComplete(std::string_view text) const override {
    ToolCallParseResult result;
    std::string_view action;
    size_t tag = text.find(kPythonTag);
    if (tag != std::string_view::npos) {
      result.normal_text = std::string(text.substr(0, tag));
      action = text.substr(tag + kPythonTag.size());
    } else if (text.substr(0, 1) == "{") {
      action = text;
    } else {
      return ToolCallParseResult{std::string(text), {}};
    }
    size_t idx = 0, safe = 0;
    std::vector<std::pair<std::string, std::string>> found;
    while (idx < action.size()) {
      // json.JSONDecoder.raw_decode: a value exactly at idx (no leading whitespace).
      if (action[idx] == '{' || action[idx] == '[' || action[idx] == '"') {
        JsonPrefix value = ScanJsonPrefix(action, idx, true);
        if (value.state == JsonScanState::kComplete) {
          CollectCalls(action.substr(idx, value.end - idx), found);
          idx = value.end + 1;
          safe = idx;
          continue;
        }
        if (action[idx] == '{') {
          if (size_t end = MatchBraces(action, idx); end != 0) {
            PyLiteral dict = ParsePyLiteral(action.substr(idx, end - idx));
            if (dict.ok() && dict.value.is_object()) {
              CollectCalls(PyJsonDumps(dict.value), found);
              idx = end + 1;
              safe = idx;
              continue;
            }
          }
        }
      } else if (ScanJsonPrefix(action, idx, true).state == JsonScanState::kComplete &&
                 !std::isspace(static_cast<unsigned char>(action[idx]))) {
        JsonPrefix value = ScanJsonPrefix(action, idx, true);
        idx = value.end + 1;
        safe = idx;
        continue;
      }
      size_t next = action.find("{\"name\":", idx + 1);
      if (next == std::string_view::npos) break;
      idx = next;
    }
    for (auto& [name, args] : found) {
      if (auto known = KnownCall(name, args)) result.calls.push_back(*known);
    }
    if (safe < action.size()) result.normal_text += std::string(StripWs(action.substr(safe)));
    return result;
  }

  ToolCallScan Scan(std::string_view text, bool at_end) const override {
    ToolCallScan scan;
    size_t pos;
    size_t tag = text.find(kPythonTag);
    if (tag != std::string_view::npos) {
      scan.normal = std::string(text.substr(0, tag));
      pos = tag + kPythonTag.size();
    } else if (text.substr(0, 1) == "{") {
      pos = 0;
    } else {
      AppendHeldBack(text, at_end, {kPythonTag}, scan.normal);
      SettlePlainTail(text, 0, 0, {}, {kPythonTag}, scan, NotAtBrace);
      return scan;
    }
    while (true) {
      while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
      if (pos >= text.size()) return scan;
      JsonCallScan call = ScanJsonCall(text, pos, at_end);
      if (call.state == JsonScanState::kInvalid) return scan;
      if (!AddScannedJsonCalls(tools(), {call}, scan) || call.state != JsonScanState::kComplete) {
        return scan;
      }
      pos = call.end;
      while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
      if (pos >= text.size() || text[pos] != ';') return scan;
      ++pos;
    }
  }

  std::optional<ToolCallStructure> Structure(std::string_view name) const override {
    return ToolCallStructure{
        "<|python_tag|>{\"name\":\"" + std::string(name) + "\", \"arguments\":", "}",
        "<|python_tag|>"};
  }

 private:
  static void CollectCalls(std::string_view json,
                           std::vector<std::pair<std::string, std::string>>& out) {
    auto calls = ParseJsonCalls(json);
    if (!calls) return;
    for (const JsonCallScan& call : *calls) {
      if (call.name) out.emplace_back(*call.name, call.arguments);
    }
  }

  // One past the '}' closing the '{' at `start` (plain brace counting, as SGLang does), or 0.
  static size_t MatchBraces(std::string_view text, size_t start) {
    int depth = 0;
    for (size_t i = start; i < text.size(); ++i) {
      if (text[i] == '{') ++depth;
      if (text[i] == '}' && --depth == 0) return i + 1;
    }
    return 0;
  }
};

}  // namespace

std::unique_ptr<ToolCallFormat> MakeLlama3Format(ToolSet tools) {
  return std::make_unique<Llama3Format>(std::move(tools));
}

}  // namespace radixserve::chat
