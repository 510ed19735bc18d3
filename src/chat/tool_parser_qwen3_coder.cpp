// qwen3_coder (SGLang's Qwen3CoderDetector; also step3p5 and nanbeige): XML-style calls
//   <tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n
//   </tool_call>
// Parameter values are text (one leading and one trailing newline removed) converted by the
// type the tool's schema gives the parameter (tool_value_conversion.h). A parameter also ends at
// the next <parameter= or at </function>. As in SGLang, function names are not checked against
// the tools and non-streaming content is the text before the first <tool_call>, unstripped.
#include "chat/tool_call_format.h"
#include "chat/tool_value_conversion.h"

namespace radixserve::chat {
namespace {

constexpr std::string_view kBlockStart = "<tool_call>";
constexpr std::string_view kBlockEnd = "</tool_call>";
constexpr std::string_view kFunction = "<function=";
constexpr std::string_view kFunctionEnd = "</function>";
constexpr std::string_view kParam = "<parameter=";
constexpr std::string_view kParamEnd = "</parameter>";

struct Function {
  std::string name;
  std::vector<std::pair<std::string, std::string>> params;  // converted values
  bool complete = false;
  size_t end = 0;  // after </function> when complete
};

class Qwen3CoderFormat : public ToolCallFormat {
 public:
  using ToolCallFormat::ToolCallFormat;

  bool HasToolCall(std::string_view text) const override {
    return text.find(kBlockStart) != std::string_view::npos;
  }

  ToolCallParseResult ParseComplete(std::string_view text) const override {
    size_t first = text.find(kBlockStart);
    if (first == std::string_view::npos) return ToolCallParseResult{std::string(text), {}};
    ToolCallParseResult result;
    result.normal_text = std::string(text.substr(0, first));
    std::vector<std::string_view> blocks;
    for (size_t pos = 0;;) {
      size_t start = text.find(kBlockStart, pos);
      if (start == std::string_view::npos) break;
      size_t end = text.find(kBlockEnd, start + kBlockStart.size());
      if (end == std::string_view::npos) break;
      blocks.push_back(text.substr(start + kBlockStart.size(), end - start - kBlockStart.size()));
      pos = end + kBlockEnd.size();
    }
    if (blocks.empty() && text.find(kFunction) != std::string_view::npos) blocks.push_back(text);
    for (std::string_view block : blocks) {
      for (size_t pos = 0;;) {
        size_t fn = block.find(kFunction, pos);
        if (fn == std::string_view::npos) break;
        size_t fn_end = block.find(kFunctionEnd, fn);
        std::string_view body = block.substr(
            fn + kFunction.size(),
            fn_end == std::string_view::npos ? block.npos : fn_end - fn - kFunction.size());
        pos = fn_end == std::string_view::npos ? block.size() : fn_end + kFunctionEnd.size();
        size_t gt = body.find('>');
        if (gt == std::string_view::npos) continue;
        Function f = ReadParams(std::string(body.substr(0, gt)), body.substr(gt + 1), true);
        result.calls.push_back(Call(f));
      }
    }
    return result;
  }

  ToolCallScan Scan(std::string_view text, bool at_end) const override {
    ToolCallScan scan;
    size_t pos = 0;
    while (true) {
      size_t block = text.find(kBlockStart, pos);
      if (block == std::string_view::npos) {
        const size_t normal_before = scan.normal.size();
        AppendHeldBack(text.substr(pos), at_end, {kBlockStart}, scan.normal);
        SettlePlainTail(text, pos, normal_before, {}, {kBlockStart}, scan);
        return scan;
      }
      scan.normal += text.substr(pos, block - pos);
      pos = block + kBlockStart.size();
      // One or more functions, then </tool_call>.
      while (true) {
        size_t ws = pos;
        while (ws < text.size() && std::isspace(static_cast<unsigned char>(text[ws]))) ++ws;
        std::string_view rest = text.substr(ws);
        if (rest.substr(0, kBlockEnd.size()) == kBlockEnd) {
          pos = ws + kBlockEnd.size();
          break;
        }
        if (rest.substr(0, kFunction.size()) != kFunction) {
          if (!at_end && (kBlockEnd.substr(0, rest.size()) == rest ||
                          kFunction.substr(0, rest.size()) == rest)) {
            return scan;
          }
          pos = ws;  // not call markup: back to content
          break;
        }
        size_t gt = text.find('>', ws + kFunction.size());
        if (gt == std::string_view::npos) return scan;
        std::string name(text.substr(ws + kFunction.size(), gt - ws - kFunction.size()));
        size_t body_start = gt + 1;
        size_t fn_end = text.find(kFunctionEnd, body_start);
        bool closed = fn_end != std::string_view::npos;
        std::string_view body = text.substr(body_start, closed ? fn_end - body_start : text.npos);
        Function f = ReadParams(name, body, closed || at_end);
        ToolCall call = Call(f);
        if (closed || at_end) {
          scan.calls.push_back(ScannedCall{call.name, call.arguments, true});
        } else {
          scan.calls.push_back(ScannedCall{call.name, JsonObjectText(f.params, false), false});
          return scan;
        }
        if (!closed) return scan;
        pos = fn_end + kFunctionEnd.size();
      }
    }
  }

 private:
  ToolCall Call(const Function& f) const {
    ToolCall call;
    call.tool_index = tools().IndexOf(f.name);
    call.name = f.name;
    call.arguments = JsonObjectText(f.params, true);
    return call;
  }

  // Parameters of a function body. `complete`: the body is whole, so a parameter running to its
  // end is finished; otherwise only parameters followed by their terminator count.
  Function ReadParams(std::string name, std::string_view body, bool complete) const {
    Function f;
    f.name = std::move(name);
    Json props = Json::object();
    if (const Json* schema = tools().Parameters(f.name)) props = SchemaProperties(*schema);
    for (size_t pos = 0;;) {
      size_t p = body.find(kParam, pos);
      if (p == std::string_view::npos) break;
      size_t start = p + kParam.size();
      size_t close = body.find(kParamEnd, start);
      size_t next = body.find(kParam, start);
      size_t end = std::min(close, next);
      if (end == std::string_view::npos && !complete) break;
      std::string_view inner =
          body.substr(start, end == std::string_view::npos ? body.npos : end - start);
      pos = end == std::string_view::npos ? body.size()
            : end == close                ? close + kParamEnd.size()
                                          : next;
      size_t gt = inner.find('>');
      if (gt == std::string_view::npos) continue;
      std::string key(inner.substr(0, gt));
      std::string value(inner.substr(gt + 1));
      if (!value.empty() && value.front() == '\n') value.erase(0, 1);
      if (!value.empty() && value.back() == '\n') value.pop_back();
      bool known = props.contains(key);
      std::string type = known ? InferSchemaType(props[key]) : "";
      f.params.emplace_back(key, ConvertQwen3CoderValue(value, known, type));
    }
    return f;
  }
};

}  // namespace

std::unique_ptr<ToolCallFormat> MakeQwen3CoderFormat(ToolSet tools) {
  return std::make_unique<Qwen3CoderFormat>(std::move(tools));
}

}  // namespace radixserve::chat
