// gpt-oss (SGLang's GptOssDetector): harmony messages ended by <|call|> whose header names the
// function and JSON arguments:
//   <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json
//   <|message|>{"location": "Tokyo"}<|call|>
// The name is the last dot-separated part of the recipient. Calls are reported once complete;
// content is the plain and final text (analysis is left to the reasoning parser), joined by
// spaces and stripped in the non-streaming result. A tool call needs the
// "<|start|>assistant<|channel|>commentary" opener somewhere in the output, as in SGLang.
#include "chat/harmony.h"
#include "chat/tool_call_format.h"

namespace radixserve::chat {
namespace {

constexpr std::string_view kBot = "<|start|>assistant<|channel|>commentary";

class GptOssFormat : public ToolCallFormat {
 public:
  using ToolCallFormat::ToolCallFormat;

  bool HasToolCall(std::string_view text) const override {
    return text.find(kBot) != std::string_view::npos;
  }

  ToolCallParseResult ParseComplete(std::string_view text) const override {
    if (!HasToolCall(text)) return ToolCallParseResult{std::string(text), {}};
    ToolCallParseResult result;
    std::string normal;
    bool first = true;
    for (const HarmonySegment& seg : ScanHarmony(text, true)) {
      if (seg.kind == HarmonySegment::Kind::kToolCall) {
        if (auto call = Extract(seg.raw)) result.calls.push_back(std::move(*call));
      } else if (seg.kind != HarmonySegment::Kind::kReasoning) {
        normal += (first ? "" : " ") + seg.content;
        first = false;
      }
    }
    result.normal_text = std::string(StripWs(normal));
    return result;
  }

  ToolCallScan Scan(std::string_view text, bool at_end) const override {
    return ScanFrom(text, at_end, 0);
  }

  // The state is the harmony cursor: where (bits 0-1) and after_call (bit 2).
  ToolCallScan ScanFrom(std::string_view text, bool at_end, uint32_t state) const override {
    HarmonyCursor from;
    from.where = static_cast<HarmonyCursor::Where>(state & 3);
    from.after_call = (state & 4) != 0;
    HarmonyScan harmony = ScanHarmonyFrom(text, at_end, from);
    ToolCallScan scan;
    for (size_t i = 0; i < harmony.segments.size(); ++i) {
      const HarmonySegment& seg = harmony.segments[i];
      if (seg.kind == HarmonySegment::Kind::kToolCall) {
        if (auto call = Extract(seg.raw)) {
          scan.calls.push_back(ScannedCall{call->name, call->arguments, true});
        }
      } else if (seg.kind != HarmonySegment::Kind::kReasoning) {
        scan.normal += seg.content;
      }
      if (i + 1 == harmony.settled_segments) {
        scan.settled_normal = scan.normal.size();
        scan.settled_calls = scan.calls.size();
      }
    }
    if (harmony.settled_text > 0) {
      scan.settled_text = harmony.settled_text;
      scan.next_state =
          static_cast<uint32_t>(harmony.next.where) | (harmony.next.after_call ? 4u : 0u);
    }
    return scan;
  }

 private:
  // to=NAME \s* <|constrain|>json<|message|> ARGS <|call|>
  std::optional<ToolCall> Extract(std::string_view raw) const {
    size_t to = raw.find("to=");
    while (to != std::string_view::npos) {
      size_t i = to + 3;
      size_t start = i;
      if (i < raw.size() && (std::isalpha(static_cast<unsigned char>(raw[i])) || raw[i] == '_')) {
        while (i < raw.size() && (std::isalnum(static_cast<unsigned char>(raw[i])) ||
                                  raw[i] == '_' || raw[i] == '.' || raw[i] == '-')) {
          ++i;
        }
        std::string_view full = raw.substr(start, i - start);
        while (i < raw.size() && std::isspace(static_cast<unsigned char>(raw[i]))) ++i;
        std::string_view marker = "<|constrain|>json<|message|>";
        if (raw.substr(i, marker.size()) == marker) {
          size_t body = i + marker.size();
          size_t end = raw.find("<|call|>", body);
          std::string_view args =
              raw.substr(body, end == std::string_view::npos ? raw.npos : end - body);
          size_t dot = full.rfind('.');
          std::string name(dot == std::string_view::npos ? full : full.substr(dot + 1));
          std::string arguments = "{}";
          if (!StripWs(args).empty()) {
            auto canonical = CanonicalJson(args);
            if (!canonical) return std::nullopt;
            arguments = *canonical;
          }
          return KnownCall(std::move(name), std::move(arguments));
        }
      }
      to = raw.find("to=", to + 3);
    }
    return std::nullopt;
  }
};

}  // namespace

std::unique_ptr<ToolCallFormat> MakeGptOssFormat(ToolSet tools) {
  return std::make_unique<GptOssFormat>(std::move(tools));
}

}  // namespace radixserve::chat
