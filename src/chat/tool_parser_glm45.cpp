// glm45 (alias glm; SGLang's Glm4MoeDetector, GLM-4.5/4.6):
//   <tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n</tool_call>
// The name runs to the first newline (or a literal "\n" written as two characters); values are
// converted by the schema type of their key (tool_value_conversion.h). Unknown functions are
// dropped; non-streaming content is the text before the first <tool_call>, stripped.
#include "chat/tool_call_format.h"
#include "chat/tool_value_conversion.h"

namespace radixserve::chat {
namespace {

constexpr std::string_view kStart = "<tool_call>";
constexpr std::string_view kEnd = "</tool_call>";
constexpr std::string_view kKey = "<arg_key>";
constexpr std::string_view kKeyEnd = "</arg_key>";
constexpr std::string_view kValue = "<arg_value>";
constexpr std::string_view kValueEnd = "</arg_value>";

// End of the name: the first "\n" or literal "\\n"; returns (position, separator length).
std::pair<size_t, size_t> NameEnd(std::string_view body) {
  size_t nl = body.find('\n');
  size_t lit = body.find("\\n");
  if (lit < nl) return {lit, 2};
  return {nl, 1};
}

class Glm45Format : public ToolCallFormat {
 public:
  using ToolCallFormat::ToolCallFormat;

  bool HasToolCall(std::string_view text) const override {
    return text.find(kStart) != std::string_view::npos;
  }

  ToolCallParseResult ParseComplete(std::string_view text) const override {
    size_t first = text.find(kStart);
    if (first == std::string_view::npos) return ToolCallParseResult{std::string(text), {}};
    ToolCallParseResult result;
    result.normal_text = std::string(StripWs(text.substr(0, first)));
    for (size_t pos = 0;;) {
      size_t start = text.find(kStart, pos);
      if (start == std::string_view::npos) break;
      size_t end = text.find(kEnd, start + kStart.size());
      if (end == std::string_view::npos) break;
      pos = end + kEnd.size();
      std::string_view body = text.substr(start + kStart.size(), end - start - kStart.size());
      auto [name_end, sep] = NameEnd(body);
      if (name_end == std::string_view::npos) continue;
      std::string name(body.substr(0, name_end));
      auto pairs = Pairs(name, body.substr(name_end + sep), nullptr);
      if (auto known = KnownCall(name, JsonObjectText(pairs, true))) result.calls.push_back(*known);
    }
    return result;
  }

  ToolCallScan Scan(std::string_view text, bool at_end) const override {
    ToolCallScan scan;
    size_t pos = 0;
    while (true) {
      size_t start = text.find(kStart, pos);
      if (start == std::string_view::npos) {
        const size_t normal_before = scan.normal.size();
        AppendHeldBack(RemoveAll(text.substr(pos), kEnd), at_end, {kStart, kEnd}, scan.normal);
        SettlePlainTail(text, pos, normal_before, {kEnd}, {kStart, kEnd}, scan);
        return scan;
      }
      scan.normal += RemoveAll(text.substr(pos, start - pos), kEnd);
      size_t body_start = start + kStart.size();
      size_t end = text.find(kEnd, body_start);
      std::string_view body =
          text.substr(body_start, end == std::string_view::npos ? text.npos : end - body_start);
      auto [name_end, sep] = NameEnd(body);
      if (name_end == std::string_view::npos ||
          (!at_end && end == std::string_view::npos && name_end + sep > body.size())) {
        if (end == std::string_view::npos) return scan;  // name still being written
        pos = end + kEnd.size();                         // no newline: not a call
        continue;
      }
      std::string name(body.substr(0, name_end));
      bool closed = end != std::string_view::npos;
      size_t consumed = 0;
      auto pairs = Pairs(name, body.substr(name_end + sep), &consumed);
      if (tools().Has(name)) {
        scan.calls.push_back(ScannedCall{name, JsonObjectText(pairs, closed), closed});
      }
      if (!closed) return scan;
      pos = end + kEnd.size();
    }
  }

 private:
  // Complete <arg_key>k</arg_key> (whitespace or literal \n) <arg_value>v</arg_value> pairs.
  std::vector<std::pair<std::string, std::string>> Pairs(const std::string& name,
                                                         std::string_view args,
                                                         size_t* consumed) const {
    std::vector<std::pair<std::string, std::string>> pairs;
    Json props = Json::object();
    if (const Json* schema = tools().Parameters(name)) props = SchemaProperties(*schema);
    size_t pos = 0;
    while (true) {
      size_t k = args.find(kKey, pos);
      if (k == std::string_view::npos) break;
      size_t k_end = args.find(kKeyEnd, k + kKey.size());
      if (k_end == std::string_view::npos) break;
      size_t v = k_end + kKeyEnd.size();
      while (v < args.size()) {
        if (std::isspace(static_cast<unsigned char>(args[v]))) {
          ++v;
        } else if (args.substr(v, 2) == "\\n") {
          v += 2;
        } else {
          break;
        }
      }
      if (args.substr(v, kValue.size()) != kValue) {
        // The regex would look for the next key; a value must follow this one.
        pos = k + kKey.size();
        continue;
      }
      size_t v_end = args.find(kValueEnd, v + kValue.size());
      if (v_end == std::string_view::npos) break;
      std::string key(StripWs(args.substr(k + kKey.size(), k_end - k - kKey.size())));
      std::string value(args.substr(v + kValue.size(), v_end - v - kValue.size()));
      std::string type = props.contains(key) ? InferSchemaType(props[key]) : "";
      pairs.emplace_back(key, ConvertGlmValue(value, type));
      pos = v_end + kValueEnd.size();
    }
    if (consumed) *consumed = pos;
    return pairs;
  }
};

}  // namespace

std::unique_ptr<ToolCallFormat> MakeGlm45Format(ToolSet tools) {
  return std::make_unique<Glm45Format>(std::move(tools));
}

}  // namespace radixserve::chat
