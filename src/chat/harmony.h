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

}  // namespace radixserve::chat
