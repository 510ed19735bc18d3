#include "chat/reasoning_parser.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "chat/harmony.h"

namespace radixserve::chat {
namespace {

enum class Force { kRequest, kAlways, kNever };

struct Entry {
  int kind;  // 0 think tags, 1 harmony, 2 append-think
  ReasoningFormat format;
  Force force;
};

ReasoningFormat Tags(std::string tool_start, std::string reasoning_default, bool internal) {
  return ReasoningFormat{"<think>", "</think>", std::move(tool_start), std::move(reasoning_default),
                         internal};
}

// SGLang's ReasoningParser.DetectorMap entries implemented here, with each detector's tokens.
const std::map<std::string, Entry, std::less<>>& Entries() {
  static const auto* entries = [] {
    Entry r1{0, Tags("", "always", false), Force::kAlways};  // DeepSeekR1Detector
    Entry qwen3{0, Tags("<tool_call>", "enable_thinking", true), Force::kRequest};
    Entry qwen3_forced = qwen3;
    qwen3_forced.force = Force::kAlways;
    Entry explicit_thinking = qwen3;
    explicit_thinking.format.reasoning_default = "explicit_thinking";
    Entry explicit_enable = qwen3;
    explicit_enable.format.reasoning_default = "explicit_enable_thinking";
    return new std::map<std::string, Entry, std::less<>>{
        {"deepseek-r1", r1},
        {"deepseek-v3", explicit_thinking},
        {"dots", qwen3},
        {"gigachat35", r1},
        {"glm45", Entry{0, Tags("<tool_call>", "enable_thinking", true), Force::kRequest}},
        {"gpt-oss",
         Entry{1, ReasoningFormat{"<|channel|>analysis<|message|>", "<|end|>", "", "always", false},
               Force::kAlways}},
        {"interns1", qwen3},
        {"kimi",
         Entry{0, ReasoningFormat{"◁think▷", "◁/think▷", "", "always", false}, Force::kNever}},
        {"kimi_k2",
         Entry{0, Tags("<|tool_calls_section_begin|>", "thinking", false), Force::kRequest}},
        {"mimo", explicit_enable},
        {"minimax", qwen3_forced},
        {"minimax-append-think", Entry{2, Tags("", "always", false), Force::kRequest}},
        {"nanbeige", qwen3},
        {"nemotron_3", Entry{0, Tags("<tool_call>", "enable_thinking", false), Force::kRequest}},
        {"poolside_v1", explicit_enable},
        {"qwen3", qwen3},
        {"qwen3-thinking", qwen3_forced},
        {"step3", r1},
        {"step3p5", r1},
    };
  }();
  return *entries;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

size_t PartialSuffix(std::string_view text, std::string_view token) {
  if (token.empty()) return 0;
  for (size_t n = std::min(text.size(), token.size() - 1); n > 0; --n) {
    if (token.substr(0, n) == text.substr(text.size() - n)) return n;
  }
  return 0;
}

std::string_view StripStarts(std::string_view text, std::string_view start) {
  while (!start.empty() && text.substr(0, start.size()) == start) text.remove_prefix(start.size());
  return text;
}

}  // namespace

ReasoningParser::ReasoningParser(std::string name, Kind kind, ReasoningFormat format, bool force,
                                 ReasoningParserOptions options)
    : name_(std::move(name)),
      kind_(kind),
      format_(std::move(format)),
      force_(force),
      options_(options) {}

Expected<std::unique_ptr<ReasoningParser>> ReasoningParser::Create(std::string_view name,
                                                                   ReasoningParserOptions options) {
  std::string key = Lower(name);
  auto it = Entries().find(key);
  if (it == Entries().end()) {
    std::string valid;
    for (const auto& n : Names()) valid += (valid.empty() ? "" : ", ") + n;
    return InvalidArgument("unknown reasoning parser '" + std::string(name) +
                           "'; valid parsers: " + valid);
  }
  const Entry& e = it->second;
  bool force = e.force == Force::kAlways  ? true
               : e.force == Force::kNever ? false
                                          : options.force_reasoning.value_or(false);
  Kind kind = e.kind == 1 ? Kind::kHarmony : e.kind == 2 ? Kind::kAppendThink : Kind::kThinkTags;
  return std::unique_ptr<ReasoningParser>(new ReasoningParser(key, kind, e.format, force, options));
}

const std::vector<std::string>& ReasoningParser::Names() {
  static const auto* names = [] {
    auto* list = new std::vector<std::string>;
    for (const auto& [name, entry] : Entries()) list->push_back(name);
    return list;
  }();
  return *names;
}

ReasoningResult ReasoningParser::Parse(std::string_view text) const {
  if (kind_ != Kind::kThinkTags) return Scan(text, true);
  // BaseReasoningFormatDetector._detect_and_parse_impl.
  const std::string& start = format_.think_start;
  const std::string& end = format_.think_end;
  ReasoningResult result;
  if (!force_ && text.find(start) == std::string_view::npos) {
    result.normal_text = std::string(text);
    return result;
  }
  std::string_view body = StripStarts(text, start);
  size_t end_at = body.find(end);
  if (end_at == std::string_view::npos) {
    size_t tool =
        format_.tool_start.empty() ? std::string_view::npos : body.find(format_.tool_start);
    if (tool != std::string_view::npos) {
      result.reasoning_text = std::string(body.substr(0, tool));
      result.normal_text = std::string(body.substr(tool));
    } else {
      result.reasoning_text = std::string(body);
    }
  } else {
    result.reasoning_text = std::string(body.substr(0, end_at));
    result.normal_text = std::string(body.substr(end_at + end.size()));
  }
  if (options_.force_nonempty_content && result.normal_text.empty()) {
    std::swap(result.normal_text, result.reasoning_text);
  }
  return result;
}

ReasoningResult ReasoningParser::Scan(std::string_view text, bool at_end) const {
  return ScanFrom(text, at_end, ReasoningPhase::kBegin).result;
}

ReasoningParser::PhasedScan ReasoningParser::ScanFrom(std::string_view text, bool at_end,
                                                      ReasoningPhase phase,
                                                      const HarmonyCursor& harmony) const {
  PhasedScan scan;
  ReasoningResult& r = scan.result;
  // text[0, at) gave everything reported so far; what follows continues from `next`.
  auto settle = [&](size_t at, ReasoningPhase next) {
    scan.settled_text = at;
    scan.settled_reasoning = r.reasoning_text.size();
    scan.settled_normal = r.normal_text.size();
    scan.next = next;
  };
  auto settle_all = [&](ReasoningPhase next) { settle(text.size(), next); };
  if (phase == ReasoningPhase::kAnswer) {
    r.normal_text = std::string(text);
    settle_all(ReasoningPhase::kAnswer);
    return scan;
  }
  if (kind_ == Kind::kAppendThink) {
    r.normal_text = format_.think_start + std::string(text);
    settle_all(ReasoningPhase::kAnswer);
    return scan;
  }
  if (kind_ == Kind::kHarmony) {
    HarmonyScan harmony_scan = ScanHarmonyFrom(text, at_end, harmony);
    for (size_t i = 0; i < harmony_scan.segments.size(); ++i) {
      const HarmonySegment& seg = harmony_scan.segments[i];
      if (seg.kind == HarmonySegment::Kind::kReasoning) {
        r.reasoning_text += seg.content;
      } else if (seg.kind == HarmonySegment::Kind::kToolCall) {
        r.normal_text += seg.raw;
      } else {
        r.normal_text += seg.content;
      }
      if (i + 1 == harmony_scan.settled_segments) {
        scan.settled_reasoning = r.reasoning_text.size();
        scan.settled_normal = r.normal_text.size();
      }
    }
    if (harmony_scan.settled_text > 0) {
      scan.settled_text = harmony_scan.settled_text;
      scan.next = ReasoningPhase::kThinking;  // unused by harmony; not kAnswer
      scan.next_harmony = harmony_scan.next;
    }
    return scan;
  }
  const std::string& start = format_.think_start;
  const std::string& end = format_.think_end;
  const std::string& tool = format_.tool_start;
  std::string_view body = text;
  if (phase == ReasoningPhase::kBegin) {
    size_t pos = 0;
    if (!force_) {
      size_t at = text.find(start);
      if (at == std::string_view::npos) {
        size_t hold = at_end ? 0 : PartialSuffix(text, start);
        r.normal_text = std::string(text.substr(0, text.size() - hold));
        settle(r.normal_text.size(), ReasoningPhase::kBegin);
        return scan;
      }
      r.normal_text = std::string(text.substr(0, at));
      pos = at;
    }
    body = StripStarts(text.substr(pos), start);
    if (!at_end && !body.empty() && body.size() < start.size() &&
        std::string_view(start).substr(0, body.size()) == body &&
        body.size() == text.size() - pos) {
      return scan;  // a think-start token still being written at the beginning
    }
  }
  size_t end_at = body.find(end);
  size_t tool_at = tool.empty() ? std::string_view::npos : body.find(tool);
  if (end_at != std::string_view::npos || tool_at != std::string_view::npos) {
    bool by_end = end_at <= tool_at;
    size_t cut = by_end ? end_at : tool_at;
    r.reasoning_text = std::string(body.substr(0, cut));
    r.normal_text += std::string(body.substr(by_end ? cut + end.size() : cut));
    settle_all(ReasoningPhase::kAnswer);
    return scan;
  }
  if (!options_.stream_reasoning && !at_end) return scan;
  size_t hold = 0;
  if (!at_end) hold = std::max(PartialSuffix(body, end), PartialSuffix(body, tool));
  r.reasoning_text = std::string(body.substr(0, body.size() - hold));
  // What is left is the held-back tail of the thinking block.
  settle(text.size() - hold, ReasoningPhase::kThinking);
  return scan;
}

ReasoningStream::ReasoningStream(const ReasoningParser* parser) : parser_(parser) {}

ReasoningResult ReasoningStream::Feed(std::string_view delta) {
  if (finished_) return {};
  buffer_ += delta;
  return Emit(false);
}

ReasoningResult ReasoningStream::Finish() {
  if (finished_) return {};
  ReasoningResult r = Emit(true);
  finished_ = true;
  return r;
}

ReasoningResult ReasoningStream::Emit(bool at_end) {
  ReasoningParser::PhasedScan phased = parser_->ScanFrom(buffer_, at_end, phase_, harmony_);
  const ReasoningResult& scan = phased.result;
  ReasoningResult out;
  if (scan.reasoning_text.size() > reasoning_sent_) {
    out.reasoning_text = scan.reasoning_text.substr(reasoning_sent_);
    reasoning_sent_ = scan.reasoning_text.size();
  }
  if (scan.normal_text.size() > normal_sent_) {
    out.normal_text = scan.normal_text.substr(normal_sent_);
    normal_sent_ = scan.normal_text.size();
  }
  if (phased.settled_text > 0 && !at_end) {
    buffer_.erase(0, phased.settled_text);
    reasoning_sent_ -= phased.settled_reasoning;
    normal_sent_ -= phased.settled_normal;
    phase_ = phased.next;
    harmony_ = phased.next_harmony;
  }
  return out;
}

bool ReasoningEnabledByRequest(std::string_view parser_name, const Json& chat_template_kwargs) {
  auto it = Entries().find(Lower(parser_name));
  if (it == Entries().end()) return false;
  const std::string& mode = it->second.format.reasoning_default;
  if (mode == "always") return true;
  bool has_kwargs = chat_template_kwargs.is_object() && !chat_template_kwargs.empty();
  if (mode == "thinking" || mode == "enable_thinking") {
    if (!has_kwargs) return true;
    auto v = chat_template_kwargs.find(mode);
    return v == chat_template_kwargs.end() || !(v->is_boolean() && !v->get<bool>());
  }
  if (mode.rfind("explicit_", 0) == 0) {
    std::string toggle = mode.substr(9);
    if (!chat_template_kwargs.is_object()) return false;
    auto v = chat_template_kwargs.find(toggle);
    return v != chat_template_kwargs.end() && v->is_boolean() && v->get<bool>();
  }
  return false;
}

}  // namespace radixserve::chat
