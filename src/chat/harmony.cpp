#include "chat/harmony.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>

namespace radixserve::chat {
namespace {

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kConstrain = "<|constrain|>";
constexpr std::string_view kEnd = "<|end|>";
constexpr std::string_view kCall = "<|call|>";
constexpr std::string_view kReturn = "<|return|>";
constexpr std::string_view kTokens[] = {kStart, kChannel, kMessage, kConstrain,
                                        kEnd,   kCall,    kReturn};

size_t HoldBack(std::string_view text, bool at_end) {
  if (at_end) return 0;
  size_t hold = 0;
  for (std::string_view tok : kTokens) {
    for (size_t n = std::min(tok.size() - 1, text.size()); n > hold; --n) {
      if (tok.substr(0, n) == text.substr(text.size() - n)) {
        hold = n;
        break;
      }
    }
  }
  return hold;
}

// The first of `tokens` at or after `from`: (position, token), npos when none.
std::pair<size_t, std::string_view> FindFirst(std::string_view text, size_t from,
                                              std::initializer_list<std::string_view> tokens) {
  std::pair<size_t, std::string_view> best{std::string_view::npos, {}};
  for (std::string_view tok : tokens) {
    size_t at = text.find(tok, from);
    if (at < best.first) best = {at, tok};
  }
  return best;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Strip(std::string_view s) {
  size_t a = s.find_first_not_of(" \t\n\r");
  if (a == std::string_view::npos) return {};
  return s.substr(a, s.find_last_not_of(" \t\n\r") - a + 1);
}

// Plain text between messages: structural tokens dropped, and a lone "commentary" right after a
// <|call|> (filler before the next message) skipped. Returns whether its last piece follows a
// <|call|>.
bool AddText(std::string_view text, bool after_call, std::vector<HarmonySegment>& out) {
  std::string kept;
  size_t pos = 0;
  while (pos < text.size()) {
    auto [at, tok] = FindFirst(text, pos, {kMessage, kConstrain, kEnd, kCall, kReturn});
    std::string_view piece = text.substr(pos, at == std::string_view::npos ? text.npos : at - pos);
    bool filler = after_call && Lower(Strip(piece)) == "commentary";
    if (!filler) kept += piece;
    if (at == std::string_view::npos) break;
    after_call = tok == kCall;
    pos = at + tok.size();
  }
  if (!kept.empty()) out.push_back(HarmonySegment{HarmonySegment::Kind::kText, kept, "", "", true});
  return after_call;
}

// Whether `text` starts (case-insensitively) with `word`; `partial` is set when `text` is shorter
// and is a prefix of it.
bool StartsWithWord(std::string_view lower, std::string_view word, bool& partial) {
  if (lower.size() < word.size()) {
    partial = partial || word.substr(0, lower.size()) == lower;
    return false;
  }
  return lower.substr(0, word.size()) == word;
}

// The longest suffix of `lower` that is a proper prefix of `word`.
size_t PartialWordSuffix(std::string_view lower, std::string_view word) {
  for (size_t n = std::min(word.size() - 1, lower.size()); n > 0; --n) {
    if (lower.substr(lower.size() - n) == word.substr(0, n)) return n;
  }
  return 0;
}

size_t SkipSpace(std::string_view s, size_t pos) {
  while (pos < s.size() && std::isspace(static_cast<unsigned char>(s[pos]))) ++pos;
  return pos;
}

std::string_view LStrip(std::string_view s) { return s.substr(SkipSpace(s, 0)); }

std::string_view RStrip(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

constexpr std::string_view kTextFinal = "assistantfinal";
constexpr std::string_view kTextAssistant = "assistant";

HarmonySegment Part(HarmonySegment::Kind kind, std::string_view content, bool complete) {
  return HarmonySegment{kind, std::string(content), "", "", complete};
}

// SGLang's text fallback (its HarmonyParser TextStrategy): output whose structural tokens were
// dropped in decoding reads "[assistant]analysis<thinking>assistantfinal<answer>", or
// "commentary<text>assistantfinal<answer>", or "assistantfinal<answer>". Returns false when
// `text` does not start that way; while it may still (a prefix of a channel word), nothing is
// reported yet. An open part holds back a partial "assistantfinal" and trailing spaces, so
// what is reported never shrinks; parts are stripped as SGLang strips them.
bool ScanHarmonyText(std::string_view text, bool at_end, std::vector<HarmonySegment>& out) {
  const std::string lower = Lower(text);
  const std::string_view low(lower);
  bool partial = false;
  const size_t lead = SkipSpace(low, 0);
  if (StartsWithWord(low.substr(lead), kTextFinal, partial)) {
    std::string_view answer = LStrip(text.substr(lead + kTextFinal.size()));
    if (!answer.empty()) out.push_back(Part(HarmonySegment::Kind::kContent, answer, true));
    return true;
  }
  size_t at = lead;
  bool assistant_partial = false;
  if (StartsWithWord(low.substr(at), kTextAssistant, assistant_partial)) {
    at = SkipSpace(low, at + kTextAssistant.size());
  }
  partial = partial || assistant_partial;
  std::string_view channel;
  for (std::string_view word : {std::string_view("analysis"), std::string_view("commentary")}) {
    if (StartsWithWord(low.substr(at), word, partial)) channel = word;
  }
  if (channel.empty()) return partial && !at_end;  // a channel word may still be coming
  // SGLang strips the thinking only where "assistantfinal" ends it (its stream never strips it
  // at the front, so neither does this); commentary is stripped.
  const bool thinking = channel == "analysis";
  const HarmonySegment::Kind first_kind =
      thinking ? HarmonySegment::Kind::kReasoning : HarmonySegment::Kind::kContent;
  const size_t body = at + channel.size();
  const size_t final_at = low.find(kTextFinal, body);
  std::string_view first = text.substr(
      body, final_at == std::string_view::npos ? std::string_view::npos : final_at - body);
  if (!thinking) first = LStrip(first);
  if (final_at != std::string_view::npos) {
    first = RStrip(first);
    if (!first.empty()) out.push_back(Part(first_kind, first, true));
    std::string_view answer = LStrip(text.substr(final_at + kTextFinal.size()));
    if (!answer.empty()) out.push_back(Part(HarmonySegment::Kind::kContent, answer, true));
    return true;
  }
  if (!at_end) {
    first.remove_suffix(PartialWordSuffix(low.substr(text.size() - first.size()), kTextFinal));
    first = RStrip(first);
  } else if (!thinking) {
    first = RStrip(first);
  }
  if (!first.empty()) out.push_back(Part(first_kind, first, false));
  return true;
}

}  // namespace

HarmonyScan ScanHarmonyFrom(std::string_view text, bool at_end, HarmonyCursor from) {
  HarmonyScan scan;
  std::vector<HarmonySegment>& out = scan.segments;
  using Where = HarmonyCursor::Where;
  if (from.where == Where::kBegin && text.find(kStart) == std::string_view::npos &&
      text.find(kChannel) == std::string_view::npos && ScanHarmonyText(text, at_end, out)) {
    return scan;  // the text fallback settles nothing
  }
  // Records a settle point: `at` ends what the segments so far report, and nothing later is
  // reported; the scan resumes there from `cursor`.
  auto settle = [&](size_t at, HarmonyCursor cursor) {
    scan.settled_text = at;
    scan.settled_segments = out.size();
    scan.next = cursor;
  };
  size_t pos = 0;
  bool after_call = from.after_call;
  if (from.where == Where::kInAnalysis || from.where == Where::kInFinal) {
    // Inside the content of a message whose header was read before.
    const bool final = from.where == Where::kInFinal;
    auto [end, term] =
        final ? FindFirst(text, 0, {kReturn, kEnd}) : FindFirst(text, 0, {kEnd, kCall});
    const HarmonySegment::Kind kind =
        final ? HarmonySegment::Kind::kContent : HarmonySegment::Kind::kReasoning;
    if (end == std::string_view::npos) {
      const size_t shown = text.size() - HoldBack(text, at_end);
      out.push_back(HarmonySegment{kind, std::string(text.substr(0, shown)), "", "", false});
      settle(shown, from);
      return scan;
    }
    out.push_back(HarmonySegment{kind, std::string(text.substr(0, end)), "", "", true});
    after_call = term == kCall;
    pos = end + term.size();
    settle(pos, {Where::kBetween, after_call});
  }
  while (pos < text.size()) {
    auto [block, opener] = FindFirst(text, pos, {kStart, kChannel});
    if (block == std::string_view::npos) {
      std::string_view rest = text.substr(pos);
      const size_t shown = rest.size() - HoldBack(rest, at_end);
      // A piece right after a <|call|> may still turn out to be "commentary" filler.
      if (!AddText(rest.substr(0, shown), after_call, out)) settle(pos + shown, {Where::kBetween});
      return scan;
    }
    after_call = AddText(text.substr(pos, block - pos), after_call, out);
    settle(block, {Where::kBetween, after_call});
    size_t message = text.find(kMessage, block + opener.size());
    if (message == std::string_view::npos) return scan;  // header still being written
    size_t channel = text.find(kChannel, block);
    std::string header;
    std::string type;
    if (channel != std::string_view::npos && channel < message) {
      header =
          std::string(text.substr(channel + kChannel.size(), message - channel - kChannel.size()));
      std::string lower = Lower(Strip(header));
      for (const char* t : {"analysis", "commentary", "final"}) {
        if (lower.rfind(t, 0) == 0) type = t;
      }
    }
    size_t content = message + kMessage.size();
    auto [end, term] = type == "final" ? FindFirst(text, content, {kReturn, kEnd})
                       : type.empty() && channel != std::string_view::npos && channel < message
                           ? FindFirst(text, content, {kEnd, kCall})
                       : type.empty() ? FindFirst(text, content, {kEnd, kCall, kReturn})
                                      : FindFirst(text, content, {kEnd, kCall});
    if (end == std::string_view::npos) {
      if (type == "analysis" || type == "final") {
        std::string_view body = text.substr(content);
        HarmonySegment seg;
        seg.kind =
            type == "analysis" ? HarmonySegment::Kind::kReasoning : HarmonySegment::Kind::kContent;
        seg.content = std::string(body.substr(0, body.size() - HoldBack(body, at_end)));
        seg.header = header;
        seg.complete = false;
        const size_t shown = content + seg.content.size();
        out.push_back(std::move(seg));
        // A message with a recipient may end as a tool call, reported whole: never cut in it.
        if (header.find("to=") == std::string::npos) {
          settle(shown, {type == "final" ? Where::kInFinal : Where::kInAnalysis});
        }
      }
      return scan;
    }
    HarmonySegment seg;
    seg.content = std::string(text.substr(content, end - content));
    seg.header = header;
    if (term == kCall) {
      seg.kind = HarmonySegment::Kind::kToolCall;
      seg.raw = std::string(text.substr(block, end + kCall.size() - block));
    } else if (type == "analysis") {
      seg.kind = HarmonySegment::Kind::kReasoning;
    } else {
      seg.kind = HarmonySegment::Kind::kContent;
    }
    out.push_back(std::move(seg));
    after_call = term == kCall;
    pos = end + term.size();
    settle(pos, {Where::kBetween, after_call});
  }
  return scan;
}

std::vector<HarmonySegment> ScanHarmony(std::string_view text, bool at_end) {
  return ScanHarmonyFrom(text, at_end, HarmonyCursor{}).segments;
}

}  // namespace radixserve::chat
