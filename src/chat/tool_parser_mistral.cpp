// mistral (SGLang's MistralDetector), two layouts after the [TOOL_CALLS] marker:
//   [TOOL_CALLS] [{"name": "f", "arguments": {...}}, ...]     (a JSON list)
//   [TOOL_CALLS]f[ARGS]{...}[TOOL_CALLS]g[ARGS]{...}          (compact, one marker per call;
//                                                              tolerates a missing ']' after
//                                                              [TOOL_CALLS and [ARGS)
// Non-streaming content is the text before the marker, stripped, joined by a space with any
// text after the calls.
#include "chat/tool_call_format.h"

namespace radixserve::chat {
namespace {

constexpr std::string_view kMarker = "[TOOL_CALLS";
constexpr std::string_view kListStart = "[TOOL_CALLS] [";
constexpr std::string_view kArgs = "[ARGS";

struct Compact {
  std::string name;
  JsonPrefix args;
  size_t args_start = 0;
};

// The compact call whose marker is at text[at]; nullopt while its name is unfinished.
std::optional<Compact> ScanCompact(std::string_view text, size_t at, bool at_end, bool* invalid) {
  *invalid = false;
  size_t i = at + kMarker.size();
  if (i < text.size() && text[i] == ']') ++i;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  size_t args = text.find(kArgs, i);
  if (args == std::string_view::npos) return std::nullopt;
  Compact c;
  c.name = std::string(StripWs(text.substr(i, args - i)));
  if (c.name.empty()) {
    *invalid = true;
    return std::nullopt;
  }
  size_t j = args + kArgs.size();
  if (j < text.size() && text[j] == ']') ++j;
  while (j < text.size() && std::isspace(static_cast<unsigned char>(text[j]))) ++j;
  if (j >= text.size()) return std::nullopt;
  if (text[j] != '{' && text[j] != '[') {
    *invalid = true;
    return std::nullopt;
  }
  c.args_start = j;
  c.args = ScanJsonPrefix(text, j, at_end);
  return c;
}

class MistralFormat : public ToolCallFormat {
 public:
  using ToolCallFormat::ToolCallFormat;

  bool HasToolCall(std::string_view text) const override {
    return text.find(kMarker) != std::string_view::npos;
  }

  ToolCallParseResult ParseComplete(std::string_view text) const override {
    size_t marker = text.find(kMarker);
    if (marker == std::string_view::npos) return ToolCallParseResult{std::string(text), {}};
    ToolCallParseResult result;
    std::string normal(StripWs(text.substr(0, marker)));
    std::string_view part = text.substr(marker);
    auto join = [&](std::string_view trailing) {
      trailing = StripWs(trailing);
      return trailing.empty() ? normal : std::string(StripWs(normal + " " + std::string(trailing)));
    };
    if (size_t list = part.find(kListStart); list != std::string_view::npos) {
      size_t start = list + kListStart.size() - 1;
      size_t end = MatchBrackets(part, start);
      result.normal_text = normal;
      if (end == 0) return result;
      if (auto calls = ParseJsonCalls(part.substr(start, end - start))) {
        for (const JsonCallScan& call : *calls) {
          if (call.name) {
            if (auto known = KnownCall(*call.name, call.arguments)) result.calls.push_back(*known);
          }
        }
      }
      result.normal_text = join(part.substr(end));
      return result;
    }
    std::string_view remaining = part;
    bool any = false;
    while (!remaining.empty()) {
      size_t at = remaining.find(kMarker);
      if (at == std::string_view::npos) break;
      bool invalid = false;
      auto c = ScanCompact(remaining, at, true, &invalid);
      if (!c || c->args.state != JsonScanState::kComplete) break;
      any = true;
      if (auto known = KnownCall(c->name, c->args.canonical)) result.calls.push_back(*known);
      remaining = StripWs(remaining.substr(c->args.end));
    }
    result.normal_text = any ? join(remaining) : normal;
    return result;
  }

  ToolCallScan Scan(std::string_view text, bool at_end) const override {
    ToolCallScan scan;
    size_t marker = text.find(kMarker);
    if (marker == std::string_view::npos) {
      AppendHeldBack(text, at_end, {kMarker}, scan.normal);
      SettlePlainTail(text, 0, 0, {}, {kMarker}, scan);
      return scan;
    }
    scan.normal = std::string(text.substr(0, marker));
    std::string_view after = text.substr(marker);
    if (!at_end && after.size() < kListStart.size() &&
        kListStart.substr(0, after.size()) == after) {
      return scan;  // cannot tell the two layouts apart yet
    }
    if (after.substr(0, kListStart.size()) == kListStart) {
      JsonCallListScan calls = ScanJsonCalls(text, marker + kListStart.size() - 1, at_end);
      if (calls.state == JsonScanState::kInvalid) return scan;
      if (AddScannedJsonCalls(tools(), calls.calls, scan) &&
          calls.state == JsonScanState::kComplete) {
        scan.normal += text.substr(calls.end);
      }
      return scan;
    }
    size_t pos = marker;
    while (true) {
      bool invalid = false;
      auto c = ScanCompact(text, pos, at_end, &invalid);
      if (!c) return scan;
      if (c->args.state == JsonScanState::kInvalid) return scan;
      bool complete = c->args.state == JsonScanState::kComplete;
      if (tools().Has(c->name)) {
        scan.calls.push_back(ScannedCall{c->name, c->args.canonical, complete});
      }
      if (!complete) return scan;
      size_t next = text.find(kMarker, c->args.end);
      if (next == std::string_view::npos) {
        std::string_view rest = text.substr(c->args.end);
        if (!at_end && PartialMarkerSuffix(rest, kMarker) > 0) return scan;
        return scan;  // text after the calls is not content in SGLang's streaming either
      }
      pos = next;
    }
  }

  std::optional<ToolCallStructure> Structure(std::string_view name) const override {
    return ToolCallStructure{
        "[TOOL_CALLS] [{\"name\":\"" + std::string(name) + "\", \"arguments\":", "}]",
        "[TOOL_CALLS]"};
  }

 private:
  // One past the ']' matching the '[' at `start`, skipping brackets inside strings; 0 if none.
  static size_t MatchBrackets(std::string_view text, size_t start) {
    int depth = 0;
    bool in_string = false, escape = false;
    for (size_t i = start; i < text.size(); ++i) {
      char c = text[i];
      if (escape) {
        escape = false;
        continue;
      }
      if (c == '\\') {
        escape = true;
        continue;
      }
      if (c == '"') {
        in_string = !in_string;
        continue;
      }
      if (in_string) continue;
      if (c == '[') ++depth;
      if (c == ']' && --depth == 0) return i + 1;
    }
    return 0;
  }
};

}  // namespace

std::unique_ptr<ToolCallFormat> MakeMistralFormat(ToolSet tools) {
  return std::make_unique<MistralFormat>(std::move(tools));
}

}  // namespace radixserve::chat
