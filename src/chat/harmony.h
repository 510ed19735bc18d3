// OpenAI's harmony response format (gpt-oss), as SGLang's HarmonyParser reads it:
//   <|channel|>analysis<|message|>thinking<|end|>
//   <|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{..}<|call|>
//   <|start|>assistant<|channel|>final<|message|>answer<|return|>
// A message is [<|start|>role] <|channel|>header <|message|>content, ended by <|end|> or
// <|call|> (analysis, commentary) or <|return|> (final; also <|end|> here). Text outside messages
// is plain content; stray structural tokens outside messages and the "commentary" filler some
// outputs repeat after a <|call|> are dropped. Text without <|start|> / <|channel|> that reads
// as harmony decoded with its special tokens skipped ("analysis...assistantfinal...") is split
// as SGLang's text fallback splits it. Used by the gpt-oss reasoning and tool parsers.
// Pure function; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace radixserve::chat {

struct HarmonySegment {
  enum class Kind {
    kText,       // plain text outside messages
    kReasoning,  // analysis content (streamed while open)
    kContent,    // final content (streamed while open) or commentary ended by <|end|>
    kToolCall,   // a message ended by <|call|>; reported once complete
  };
  Kind kind = Kind::kText;
  std::string content;  // the message content (the text itself for kText)
  std::string raw;      // kToolCall: the message with its markup, <|start|> through <|call|>
  std::string header;   // the channel header ("commentary to=functions.f <|constrain|>json")
  bool complete = true;
};

// Segments of `text` that are final: a partial structural token at the end is held back unless
// `at_end`; an open analysis or final message is reported with what it has so far
// (complete = false); other open messages are held back (and dropped at the end, as SGLang).
std::vector<HarmonySegment> ScanHarmony(std::string_view text, bool at_end);

// Where a scan of an output's remaining text resumes: its beginning, between messages (after a
// <|call|> or not), or inside the content of an analysis or final message.
struct HarmonyCursor {
  enum class Where { kBegin, kBetween, kInAnalysis, kInFinal };
  Where where = Where::kBegin;
  bool after_call = false;  // kBetween
};

struct HarmonyScan {
  std::vector<HarmonySegment> segments;
  // What a stream may forget (0: nothing): text[0, settled_text) is reported by exactly the
  // first settled_segments segments, and scanning the rest from `next` reports what follows.
  // Never inside a message with a recipient (it may end as a tool call, reported whole) or the
  // text fallback. An analysis message resumed inside its content and ended by <|call|> is
  // reported as thinking, not as a call.
  size_t settled_text = 0;
  size_t settled_segments = 0;
  HarmonyCursor next;
};

// ScanHarmony on the text that remains from `from` on.
HarmonyScan ScanHarmonyFrom(std::string_view text, bool at_end, HarmonyCursor from);

}  // namespace radixserve::chat
