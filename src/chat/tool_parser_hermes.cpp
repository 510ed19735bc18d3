// hermes and qwen25 (alias qwen): one JSON call object (or a list of them) per block.
//   hermes: <tool_call>{"name": "f", "arguments": {...}}</tool_call>
//   qwen25: <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
// Non-streaming (SGLang's HermesDetector / Qwen25Detector): content is the text before the first
// block, stripped. hermes takes every <tool_call> block (an unclosed last one runs to the end)
// and gives up on all calls, returning the whole text, if any block is not JSON; qwen25 takes
// only closed blocks and skips a block that is not JSON.
#include "chat/tool_call_format.h"

namespace radixserve::chat {
namespace {

class JsonBlockFormat : public ToolCallFormat {
 public:
  JsonBlockFormat(ToolSet tools, bool qwen)
      : ToolCallFormat(std::move(tools)),
        qwen_(qwen),
        bot_(qwen ? "<tool_call>\n" : "<tool_call>"),
        eot_(qwen ? "\n</tool_call>" : "</tool_call>") {}

  bool HasToolCall(std::string_view text) const override {
    return text.find(bot_) != std::string_view::npos;
  }

  ToolCallParseResult ParseComplete(std::string_view text) const override {
    ToolCallParseResult result;
    size_t first = text.find(bot_);
    if (first == std::string_view::npos) return ToolCallParseResult{std::string(text), {}};
    result.normal_text = std::string(StripWs(text.substr(0, first)));
    size_t pos = first;
    while ((pos = text.find(bot_, pos)) != std::string_view::npos) {
      size_t body = pos + bot_.size();
      size_t close = text.find(eot_, body);
      if (close == std::string_view::npos && qwen_) break;
      std::string_view raw =
          text.substr(body, close == std::string_view::npos ? text.npos : close - body);
      pos = close == std::string_view::npos ? text.size() : close + eot_.size();
      if (raw.empty()) continue;
      auto calls = ParseJsonCalls(StripWs(raw));
      if (!calls) {
        if (qwen_) continue;
        return ToolCallParseResult{std::string(text), {}};
      }
      for (const JsonCallScan& call : *calls) {
        if (!call.name) continue;
        if (auto known = KnownCall(*call.name, call.arguments)) result.calls.push_back(*known);
      }
    }
    return result;
  }

  ToolCallScan Scan(std::string_view text, bool at_end) const override {
    ToolCallScan scan;
    std::string_view close = "</tool_call>";
    size_t pos = 0;
    while (true) {
      size_t at = text.find(bot_, pos);
      if (at == std::string_view::npos) {
        // Stray closing tags are dropped from content, as SGLang's streaming does.
        std::string rest = RemoveAll(text.substr(pos), close);
        const size_t normal_before = scan.normal.size();
        AppendHeldBack(rest, at_end, {bot_, close}, scan.normal);
        SettlePlainTail(text, pos, normal_before, {close}, {bot_, close}, scan);
        return scan;
      }
      scan.normal += RemoveAll(text.substr(pos, at - pos), close);
      JsonCallListScan calls = ScanJsonCalls(text, at + bot_.size(), at_end);
      if (calls.state == JsonScanState::kInvalid) {
        // Not a call: skip the block (SGLang never parses it either).
        size_t end = text.find(close, at + bot_.size());
        if (end == std::string_view::npos) return scan;
        pos = end + close.size();
        continue;
      }
      if (!AddScannedJsonCalls(tools(), calls.calls, scan) ||
          calls.state != JsonScanState::kComplete) {
        return scan;
      }
      size_t q = calls.end;
      while (q < text.size() && std::isspace(static_cast<unsigned char>(text[q]))) ++q;
      std::string_view tail = text.substr(q);
      if (tail.substr(0, close.size()) == close) {
        pos = q + close.size();
      } else if (!at_end && close.substr(0, tail.size()) == tail) {
        return scan;  // the closing tag may still come
      } else {
        pos = calls.end;
      }
    }
  }

  std::optional<ToolCallStructure> Structure(std::string_view name) const override {
    std::string nl = qwen_ ? "\n" : "";
    return ToolCallStructure{
        "<tool_call>" + nl + "{\"name\":\"" + std::string(name) + "\", \"arguments\":",
        "}" + nl + "</tool_call>", "<tool_call>"};
  }

 private:
  bool qwen_;
  std::string bot_;
  std::string eot_;
};

}  // namespace

std::unique_ptr<ToolCallFormat> MakeHermesFormat(ToolSet tools) {
  return std::make_unique<JsonBlockFormat>(std::move(tools), false);
}

std::unique_ptr<ToolCallFormat> MakeQwen25Format(ToolSet tools) {
  return std::make_unique<JsonBlockFormat>(std::move(tools), true);
}

}  // namespace radixserve::chat
