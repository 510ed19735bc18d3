// kimi_k2 (SGLang's KimiK2Detector):
//   <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>
//   {...}<|tool_call_end|>...<|tool_calls_section_end|>
// The call id may also be a bare counter ("3"): the name is then the only tool, or the tool whose
// schema properties best match the argument keys. As in SGLang, arguments are the model's JSON
// text unchanged (from '{' to the last '}' before <|tool_call_end|>), calls are not checked
// against the tools, and non-streaming content is the text before the section, unstripped.
#include <regex>

#include "chat/tool_call_format.h"

namespace radixserve::chat {
namespace {

constexpr std::string_view kSectionBegin = "<|tool_calls_section_begin|>";
constexpr std::string_view kSectionEnd = "<|tool_calls_section_end|>";
constexpr std::string_view kCallBegin = "<|tool_call_begin|>";
constexpr std::string_view kCallEnd = "<|tool_call_end|>";
constexpr std::string_view kArgBegin = "<|tool_call_argument_begin|>";

bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' ||
         static_cast<unsigned char>(c) >= 0x80;  // \w is Unicode-aware in Python
}

class KimiK2Format : public ToolCallFormat {
 public:
  using ToolCallFormat::ToolCallFormat;

  bool HasToolCall(std::string_view text) const override {
    return text.find(kSectionBegin) != std::string_view::npos;
  }

  ToolCallParseResult ParseComplete(std::string_view text) const override {
    size_t section = text.find(kSectionBegin);
    if (section == std::string_view::npos) return ToolCallParseResult{std::string(text), {}};
    ToolCallParseResult result;
    result.normal_text = std::string(text.substr(0, section));
    size_t pos = 0;
    while (true) {
      Parsed call = ParseCall(text, pos, true);
      if (call.state == kNone) break;
      pos = call.next;
      if (call.state != kDone || call.name.empty()) continue;
      ToolCall out;
      out.tool_index = tools().IndexOf(call.name);
      out.name = call.name;
      out.arguments = call.args;
      result.calls.push_back(std::move(out));
    }
    return result;
  }

  ToolCallScan Scan(std::string_view text, bool at_end) const override {
    ToolCallScan scan;
    size_t section = text.find(kSectionBegin);
    size_t first_call = text.find(kCallBegin);
    size_t start = std::min(section, first_call);
    if (start == std::string_view::npos) {
      AppendHeldBack(text, at_end, {kSectionBegin, kCallBegin}, scan.normal);
      SettlePlainTail(text, 0, 0, {}, {kSectionBegin, kCallBegin}, scan);
      return scan;
    }
    scan.normal = std::string(text.substr(0, start));
    size_t pos = start;
    while (true) {
      Parsed call = ParseCall(text, pos, at_end);
      if (call.state == kNone || call.state == kWaiting) return scan;
      if (call.state == kPartial) {
        if (!call.name.empty()) scan.calls.push_back(ScannedCall{call.name, call.args, false});
        return scan;
      }
      if (!call.name.empty()) scan.calls.push_back(ScannedCall{call.name, call.args, true});
      pos = call.next;
    }
  }

  std::optional<ToolCallStructure> Structure(std::string_view name) const override {
    return ToolCallStructure{std::string(kSectionBegin) + std::string(kCallBegin) + "functions." +
                                 std::string(name) + ":0" + std::string(kArgBegin),
                             std::string(kCallEnd) + std::string(kSectionEnd),
                             std::string(kSectionBegin)};
  }

 private:
  enum State { kNone, kWaiting, kPartial, kDone, kSkipped };
  struct Parsed {
    State state = kNone;
    std::string name;
    std::string args;
    size_t next = 0;
  };

  // The next call at or after `pos`: kNone when there is none, kWaiting while its id is
  // unfinished, kPartial while its arguments are (args = the final part), kSkipped for markup
  // that is no call (the regex would not match it).
  Parsed ParseCall(std::string_view text, size_t pos, bool at_end) const {
    Parsed p;
    size_t begin = text.find(kCallBegin, pos);
    if (begin == std::string_view::npos) return p;
    size_t arg = text.find(kArgBegin, begin + kCallBegin.size());
    size_t next_begin = text.find(kCallBegin, begin + kCallBegin.size());
    p.next = begin + kCallBegin.size();
    if (arg == std::string_view::npos ||
        (next_begin != std::string_view::npos && next_begin < arg)) {
      p.state = arg == std::string_view::npos && next_begin == std::string_view::npos && !at_end
                    ? kWaiting
                    : kSkipped;
      return p;
    }
    std::string_view id =
        StripWs(text.substr(begin + kCallBegin.size(), arg - begin - kCallBegin.size()));
    size_t body = arg + kArgBegin.size();
    while (body < text.size() && std::isspace(static_cast<unsigned char>(text[body]))) ++body;
    if (body >= text.size()) {
      p.state = at_end ? kSkipped : kWaiting;
      return p;
    }
    if (text[body] != '{') {
      p.state = kSkipped;
      return p;
    }
    // The arguments end at the first '}' followed by optional whitespace and <|tool_call_end|>.
    size_t end = text.find(kCallEnd, body);
    size_t close = std::string_view::npos;
    if (end != std::string_view::npos) {
      for (size_t i = body; i < end; ++i) {
        if (text[i] != '}') continue;
        if (StripWs(text.substr(i + 1, end - i - 1)).empty()) {
          close = i;
          break;
        }
      }
    }
    bool bare = std::all_of(id.begin(), id.end(),
                            [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) &&
                !id.empty();
    if (close == std::string_view::npos) {
      if (end != std::string_view::npos || at_end) {
        p.state = kSkipped;
        p.next = end == std::string_view::npos ? text.size() : end + kCallEnd.size();
        return p;
      }
      p.state = kPartial;
      p.name = bare ? (tools().tools().size() == 1 ? tools().tools()[0].name : "") : IdName(id);
      // Final part: up to the last '}' or text that cannot be the closing markup.
      std::string_view tail = text.substr(body);
      size_t hold = PartialMarkerSuffix(tail, kCallEnd);
      std::string_view safe = tail.substr(0, tail.size() - hold);
      size_t last = safe.find_last_not_of(" \t\n\r\f\v");
      // Trailing whitespace may belong to the closing markup; hold it.
      p.args = std::string(last == std::string_view::npos ? std::string_view()
                                                          : safe.substr(0, last + 1));
      if (bare && p.name.empty()) p.state = kWaiting;
      return p;
    }
    p.state = kDone;
    p.args = std::string(text.substr(body, close - body + 1));
    p.next = end + kCallEnd.size();
    p.name = bare ? InferName(p.args) : IdName(id);
    return p;
  }

  // "functions.NAME:IDX" or "NAME:IDX" -> NAME; "" when the id has another shape.
  static std::string IdName(std::string_view id) {
    size_t colon = id.rfind(':');
    if (colon == std::string_view::npos || colon + 1 >= id.size()) return "";
    for (size_t i = colon + 1; i < id.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(id[i]))) return "";
    }
    std::string_view name = id.substr(0, colon);
    if (name.substr(0, 10) == "functions.") name.remove_prefix(10);
    if (name.empty() || !std::all_of(name.begin(), name.end(), IsNameChar)) return "";
    return std::string(name);
  }

  std::string InferName(const std::string& args) const {
    const auto& list = tools().tools();
    if (list.empty()) return "";
    if (list.size() == 1) return list[0].name;
    Json parsed = Json::parse(args, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object()) return "";
    std::string best;
    long best_score = -1;
    bool have = false;
    for (const ToolSpec& tool : list) {
      Json props = SchemaProperties(tool.parameters);
      if (props.empty()) continue;
      long overlap = 0, extra = 0;
      for (const auto& [key, value] : parsed.items()) {
        (props.contains(key) ? overlap : extra) += 1;
      }
      long score = overlap - extra;
      if (!have || score > best_score) {
        best_score = score;
        best = tool.name;
        have = true;
      }
    }
    return best;
  }
};

}  // namespace

std::unique_ptr<ToolCallFormat> MakeKimiK2Format(ToolSet tools) {
  return std::make_unique<KimiK2Format>(std::move(tools));
}

}  // namespace radixserve::chat
