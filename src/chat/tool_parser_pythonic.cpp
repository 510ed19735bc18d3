// pythonic (SGLang's PythonicDetector, Llama 4 and others): a Python list of calls with keyword
// arguments, `[get_weather(city="Paris", days=3), get_time()]`, optionally wrapped in
// <|python_start|> / <|python_end|> (removed). Argument values are Python literals; a call with
// a value json.dumps cannot write (or NaN/inf) is skipped. Calls are reported when the list
// closes, as SGLang streams them; text before and after the list is content.
#include <cmath>

#include "chat/py_json.h"
#include "chat/python_literal.h"
#include "chat/tool_call_format.h"

namespace radixserve::chat {
namespace {

constexpr std::string_view kStart = "<|python_start|>";
constexpr std::string_view kEnd = "<|python_end|>";

std::string StripPythonTags(std::string_view text) {
  return RemoveAll(RemoveAll(text, kStart), kEnd);
}

bool HasNonFinite(const Json& v) {
  if (v.is_number_float()) return !std::isfinite(v.get<double>());
  if (v.is_structured()) {
    for (const auto& item : v) {
      if (HasNonFinite(item)) return true;
    }
  }
  return false;
}

// Where a call list may start: '[' followed by an identifier and '(' (SGLang's regex).
size_t FindListStart(std::string_view text, size_t from) {
  for (size_t at = text.find('[', from); at != std::string_view::npos;
       at = text.find('[', at + 1)) {
    size_t i = at + 1;
    if (i < text.size() && !std::isalpha(static_cast<unsigned char>(text[i]))) continue;
    while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_'))
      ++i;
    if (i >= text.size() || text[i] == '(') return at;
  }
  return std::string_view::npos;
}

// One past the ']' closing the list at `start` (quotes respected), or 0 while unclosed.
size_t ListEnd(std::string_view text, size_t start) {
  int depth = 0;
  char quote = 0;
  for (size_t i = start; i < text.size(); ++i) {
    char c = text[i];
    if (quote) {
      if (c == '\\') {
        ++i;
      } else if (c == quote) {
        quote = 0;
      }
      continue;
    }
    if (c == '\'' || c == '"') quote = c;
    if (c == '[' || c == '(' || c == '{') ++depth;
    if ((c == ']' || c == ')' || c == '}') && --depth == 0) return c == ']' ? i + 1 : 0;
  }
  return 0;
}

// A settle cut never splits '[' + identifier (the start of a possible call list).
size_t KeepListOpenerWhole(std::string_view text, size_t cut) {
  size_t i = cut;
  while (i > 0 && (std::isalnum(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == '_')) {
    --i;
  }
  return i > 0 && text[i - 1] == '[' ? i - 1 : cut;
}

class PythonicFormat : public ToolCallFormat {
 public:
  using ToolCallFormat::ToolCallFormat;

  bool HasToolCall(std::string_view text) const override {
    std::string t = StripPythonTags(StripWs(text));
    size_t start = FindListStart(t, 0);
    return start != std::string_view::npos && ListEnd(t, start) != 0;
  }

  ToolCallParseResult ParseComplete(std::string_view text) const override {
    std::string t = StripPythonTags(StripWs(text));
    size_t start = FindListStart(t, 0);
    size_t end = start == std::string_view::npos ? 0 : ListEnd(t, start);
    if (end == 0) return ToolCallParseResult{t, {}};
    ToolCallParseResult result;
    result.normal_text = t.substr(0, start) + t.substr(end);
    for (ToolCall& call : Calls(std::string_view(t).substr(start, end - start))) {
      result.calls.push_back(std::move(call));
    }
    return result;
  }

  ToolCallScan Scan(std::string_view text, bool at_end) const override {
    ToolCallScan scan;
    size_t pos = 0;
    while (true) {
      std::string_view rest = text.substr(pos);
      size_t start = FindListStart(rest, 0);
      if (start == std::string_view::npos) {
        size_t bracket = rest.rfind('[');
        // A trailing '[' + identifier may still become a call list.
        bool maybe = !at_end && bracket != std::string_view::npos &&
                     rest.find_first_not_of(
                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_",
                         bracket + 1) == std::string_view::npos;
        std::string_view head = maybe ? rest.substr(0, bracket) : rest;
        const size_t normal_before = scan.normal.size();
        AppendHeldBack(StripPythonTags(head), at_end, {kStart, kEnd}, scan.normal);
        SettlePlainTail(text, pos, normal_before, {kStart, kEnd}, {kStart, kEnd}, scan,
                        KeepListOpenerWhole);
        return scan;
      }
      scan.normal += StripPythonTags(rest.substr(0, start));
      size_t end = ListEnd(rest, start);
      if (end == 0) {
        if (at_end) scan.normal += StripPythonTags(rest.substr(start));
        return scan;
      }
      auto calls = ParsePyCallList(rest.substr(start, end - start));
      if (!calls) {
        scan.normal += StripPythonTags(rest.substr(start, end - start));
      } else {
        for (ToolCall& call : Calls(rest.substr(start, end - start))) {
          scan.calls.push_back(ScannedCall{call.name, call.arguments, true});
        }
      }
      pos += end;
    }
  }

 private:
  std::vector<ToolCall> Calls(std::string_view list) const {
    std::vector<ToolCall> out;
    auto calls = ParsePyCallList(list);
    if (!calls) return out;
    for (PyCall& call : *calls) {
      if (!call.arguments.ok() || HasNonFinite(call.arguments.value)) continue;
      if (auto known = KnownCall(call.name, PyJsonDumps(call.arguments.value))) {
        out.push_back(std::move(*known));
      }
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<ToolCallFormat> MakePythonicFormat(ToolSet tools) {
  return std::make_unique<PythonicFormat>(std::move(tools));
}

}  // namespace radixserve::chat
