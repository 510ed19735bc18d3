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
// <|call|> (filler before the next message) skipped.
void AddText(std::string_view text, bool after_call, std::vector<HarmonySegment>& out) {
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
}

}  // namespace

std::vector<HarmonySegment> ScanHarmony(std::string_view text, bool at_end) {
  std::vector<HarmonySegment> out;
  size_t pos = 0;
  bool after_call = false;
  while (pos < text.size()) {
    auto [block, opener] = FindFirst(text, pos, {kStart, kChannel});
    if (block == std::string_view::npos) {
      std::string_view rest = text.substr(pos);
      AddText(rest.substr(0, rest.size() - HoldBack(rest, at_end)), after_call, out);
      return out;
    }
    AddText(text.substr(pos, block - pos), after_call, out);
    size_t message = text.find(kMessage, block + opener.size());
    if (message == std::string_view::npos) return out;  // header still being written
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
        out.push_back(std::move(seg));
      }
      return out;
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
  }
  return out;
}

}  // namespace radixserve::chat
