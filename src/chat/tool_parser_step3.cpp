// step3 (SGLang's Step3Detector):
//   <｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="f">
//   <steptml:parameter name="city">Paris</steptml:parameter></steptml:invoke><｜tool_call_end｜>
//   <｜tool_calls_end｜>
// Values are stripped text, read as JSON (or a Python literal) when the schema declares a type
// other than string. Non-streaming needs the closing <｜tool_calls_end｜> (else no calls) and
// returns the text before and after the section as content; unknown functions are dropped.
#include "chat/tool_call_format.h"
#include "chat/tool_value_conversion.h"

namespace radixserve::chat {
namespace {

constexpr std::string_view kBegin = "<｜tool_calls_begin｜>";
constexpr std::string_view kEnd = "<｜tool_calls_end｜>";
constexpr std::string_view kCallBegin = "<｜tool_call_begin｜>";
constexpr std::string_view kCallEnd = "<｜tool_call_end｜>";
constexpr std::string_view kSep = "<｜tool_sep｜>";
constexpr std::string_view kInvoke = "<steptml:invoke name=\"";
constexpr std::string_view kInvokeEnd = "</steptml:invoke>";
constexpr std::string_view kParam = "<steptml:parameter name=\"";
constexpr std::string_view kParamEnd = "</steptml:parameter>";

class Step3Format : public ToolCallFormat {
 public:
  using ToolCallFormat::ToolCallFormat;

  bool HasToolCall(std::string_view text) const override {
    return text.find(kBegin) != std::string_view::npos;
  }

  ToolCallParseResult ParseComplete(std::string_view text) const override {
    size_t begin = text.find(kBegin);
    if (begin == std::string_view::npos) return ToolCallParseResult{std::string(text), {}};
    size_t end = text.find(kEnd, begin + kBegin.size());
    if (end == std::string_view::npos) return ToolCallParseResult{std::string(text), {}};
    ToolCallParseResult result;
    result.normal_text =
        std::string(text.substr(0, begin)) + std::string(text.substr(end + kEnd.size()));
    std::string_view section = text.substr(begin + kBegin.size(), end - begin - kBegin.size());
    for (size_t pos = 0;;) {
      size_t cb = section.find(kCallBegin, pos);
      if (cb == std::string_view::npos) break;
      size_t ce = section.find(kCallEnd, cb + kCallBegin.size());
      if (ce == std::string_view::npos) break;
      pos = ce + kCallEnd.size();
      if (auto call =
              ReadCall(section.substr(cb + kCallBegin.size(), ce - cb - kCallBegin.size()))) {
        result.calls.push_back(std::move(*call));
      }
    }
    return result;
  }

  ToolCallScan Scan(std::string_view text, bool at_end) const override {
    ToolCallScan scan;
    size_t begin = text.find(kBegin);
    if (begin == std::string_view::npos) {
      AppendHeldBack(text, at_end, {kBegin}, scan.normal);
      SettlePlainTail(text, 0, 0, {}, {kBegin}, scan);
      return scan;
    }
    scan.normal = std::string(text.substr(0, begin));
    size_t pos = begin + kBegin.size();
    while (true) {
      size_t ws = pos;
      while (ws < text.size() && std::isspace(static_cast<unsigned char>(text[ws]))) ++ws;
      std::string_view rest = text.substr(ws);
      if (rest.substr(0, kEnd.size()) == kEnd) {
        scan.normal += text.substr(ws + kEnd.size());
        return scan;
      }
      if (rest.substr(0, kCallBegin.size()) != kCallBegin) return scan;
      size_t ce = text.find(kCallEnd, ws + kCallBegin.size());
      if (ce == std::string_view::npos) return scan;
      if (auto call = ReadCall(text.substr(ws + kCallBegin.size(), ce - ws - kCallBegin.size()))) {
        scan.calls.push_back(ScannedCall{call->name, call->arguments, true});
      }
      pos = ce + kCallEnd.size();
    }
  }

 private:
  std::optional<ToolCall> ReadCall(std::string_view content) const {
    size_t sep = content.find(kSep);
    if (sep == std::string_view::npos || StripWs(content.substr(0, sep)) != "function") {
      return std::nullopt;
    }
    std::string_view invoke = content.substr(sep + kSep.size());
    size_t inv = invoke.find(kInvoke);
    if (inv == std::string_view::npos) return std::nullopt;
    size_t quote = invoke.find("\">", inv + kInvoke.size());
    size_t inv_end = invoke.find(kInvokeEnd, inv);
    if (quote == std::string_view::npos || inv_end == std::string_view::npos || quote > inv_end) {
      return std::nullopt;
    }
    std::string name(invoke.substr(inv + kInvoke.size(), quote - inv - kInvoke.size()));
    if (name.empty() || name.find('"') != std::string::npos || quote + 2 >= inv_end) {
      return std::nullopt;
    }
    std::string_view params = invoke.substr(quote + 2, inv_end - quote - 2);
    Json props = Json::object();
    if (const Json* schema = tools().Parameters(name)) props = SchemaProperties(*schema);
    std::vector<std::pair<std::string, std::string>> pairs;
    for (size_t pos = 0;;) {
      size_t p = params.find(kParam, pos);
      if (p == std::string_view::npos) break;
      size_t q = params.find("\">", p + kParam.size());
      if (q == std::string_view::npos) break;
      size_t v_end = params.find(kParamEnd, q + 2);
      if (v_end == std::string_view::npos) break;
      std::string key(params.substr(p + kParam.size(), q - p - kParam.size()));
      std::string_view value = params.substr(q + 2, v_end - q - 2);
      pos = v_end + kParamEnd.size();
      if (key.empty() || key.find('"') != std::string::npos ||
          value.find('<') != std::string_view::npos) {
        continue;
      }
      const Json* type = nullptr;
      if (props.contains(key) && props[key].is_object() && props[key].contains("type")) {
        type = &props[key]["type"];
      }
      pairs.emplace_back(key, ConvertStep3Value(std::string(StripWs(value)), type));
    }
    return KnownCall(std::move(name), JsonObjectText(pairs, true));
  }
};

}  // namespace

std::unique_ptr<ToolCallFormat> MakeStep3Format(ToolSet tools) {
  return std::make_unique<Step3Format>(std::move(tools));
}

}  // namespace radixserve::chat
