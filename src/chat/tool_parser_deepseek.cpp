// deepseekv3 and deepseekv31 (SGLang's DeepSeekV3Detector / DeepSeekV31Detector):
//   v3:  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```
//        <｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
//   v31: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>
//        ...<｜tool▁calls▁end｜>
// Non-streaming content is the text before the calls, stripped; a call whose arguments are not
// JSON makes SGLang return the whole text with no calls. Arguments are json.dumps of the parsed
// JSON (SGLang's streaming passes the model's text through; its non-streaming result is this).
#include "chat/tool_call_format.h"

namespace radixserve::chat {
namespace {

constexpr std::string_view kCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kSep = "<｜tool▁sep｜>";
constexpr std::string_view kJsonFence = "\n```json\n";
constexpr std::string_view kFenceEnd = "\n```";

class DeepSeekFormat : public ToolCallFormat {
 public:
  DeepSeekFormat(ToolSet tools, bool v31) : ToolCallFormat(std::move(tools)), v31_(v31) {}

  bool HasToolCall(std::string_view text) const override {
    return text.find(kCallsBegin) != std::string_view::npos;
  }

  ToolCallParseResult ParseComplete(std::string_view text) const override {
    size_t begin = text.find(kCallsBegin);
    if (begin == std::string_view::npos) return ToolCallParseResult{std::string(text), {}};
    ToolCallParseResult result;
    result.normal_text = std::string(StripWs(text.substr(0, begin)));
    // Every <｜tool▁call▁begin｜>...<｜tool▁call▁end｜> in the text (shortest match).
    size_t pos = 0;
    while (true) {
      size_t start = text.find(kCallBegin, pos);
      if (start == std::string_view::npos) break;
      size_t end = text.find(kCallEnd, start + kCallBegin.size());
      if (end == std::string_view::npos) break;
      std::string_view inner =
          text.substr(start + kCallBegin.size(), end - start - kCallBegin.size());
      pos = end + kCallEnd.size();
      // The detail regex is greedy: the name and arguments split at the last separator.
      size_t sep = inner.rfind(kSep);
      if (sep == std::string_view::npos) return ToolCallParseResult{std::string(text), {}};
      std::string_view name = inner.substr(sep + kSep.size());
      std::string_view args;
      if (v31_) {
        args = name;
        name = inner.substr(0, sep);
      } else {
        size_t fence = name.rfind(kJsonFence);
        if (fence == std::string_view::npos || name.size() < 4 ||
            name.substr(name.size() - 4) != kFenceEnd) {
          return ToolCallParseResult{std::string(text), {}};
        }
        args = name.substr(fence + kJsonFence.size(), name.size() - 4 - fence - kJsonFence.size());
        name = name.substr(0, fence);
      }
      auto canonical = CanonicalJson(args);
      if (!canonical) return ToolCallParseResult{std::string(text), {}};
      if (auto known = KnownCall(std::string(name), *canonical)) result.calls.push_back(*known);
    }
    return result;
  }

  ToolCallScan Scan(std::string_view text, bool at_end) const override {
    ToolCallScan scan;
    size_t begin = text.find(kCallsBegin);
    if (begin == std::string_view::npos) {
      AppendHeldBack(text, at_end, {kCallsBegin}, scan.normal);
      SettlePlainTail(text, 0, 0, {}, {kCallsBegin}, scan);
      return scan;
    }
    scan.normal = std::string(text.substr(0, begin));
    size_t pos = begin + kCallsBegin.size();
    while (true) {
      size_t ws = pos;
      while (ws < text.size() && std::isspace(static_cast<unsigned char>(text[ws]))) ++ws;
      std::string_view rest = text.substr(ws);
      if (rest.substr(0, kCallsEnd.size()) == kCallsEnd) {
        AppendHeldBack(text.substr(ws + kCallsEnd.size()), at_end, {}, scan.normal);
        return scan;
      }
      if (rest.substr(0, kCallBegin.size()) != kCallBegin) return scan;
      size_t sep = text.find(kSep, ws + kCallBegin.size());
      if (sep == std::string_view::npos) return scan;
      size_t name_start = ws + kCallBegin.size(), args_start;
      std::string name;
      if (v31_) {
        name = std::string(text.substr(name_start, sep - name_start));
        args_start = sep + kSep.size();
      } else {
        size_t fence = text.find(kJsonFence, sep + kSep.size());
        if (fence == std::string_view::npos) return scan;
        name = std::string(text.substr(sep + kSep.size(), fence - sep - kSep.size()));
        args_start = fence + kJsonFence.size();
      }
      JsonPrefix args = ScanJsonPrefix(text, args_start, at_end);
      if (args.state == JsonScanState::kInvalid) return scan;
      bool complete = args.state == JsonScanState::kComplete;
      if (tools().Has(name)) scan.calls.push_back(ScannedCall{name, args.canonical, complete});
      if (!complete) return scan;
      size_t end = text.find(kCallEnd, args.end);
      if (end == std::string_view::npos) return scan;
      pos = end + kCallEnd.size();
    }
  }

  std::optional<ToolCallStructure> Structure(std::string_view name) const override {
    if (v31_) {
      return ToolCallStructure{std::string(kCallBegin) + std::string(name) + std::string(kSep),
                               std::string(kCallEnd), std::string(kCallBegin)};
    }
    return ToolCallStructure{std::string(kCallsBegin) + std::string(kCallBegin) + "function" +
                                 std::string(kSep) + std::string(name) + std::string(kJsonFence),
                             "\n```" + std::string(kCallEnd) + std::string(kCallsEnd),
                             std::string(kCallsBegin)};
  }

 private:
  bool v31_;
};

}  // namespace

std::unique_ptr<ToolCallFormat> MakeDeepSeekV3Format(ToolSet tools) {
  return std::make_unique<DeepSeekFormat>(std::move(tools), false);
}

std::unique_ptr<ToolCallFormat> MakeDeepSeekV31Format(ToolSet tools) {
  return std::make_unique<DeepSeekFormat>(std::move(tools), true);
}

}  // namespace radixserve::chat
