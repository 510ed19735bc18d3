// Reasoning parsers: SGLang's `--reasoning-parser` formats (sglang/srt/parser/reasoning_parser.py)
// split a reasoning model's output into its thinking (OpenAI `reasoning_content`) and its answer
// (`content`). Most models wrap thinking in think-start/think-end tokens (<think>...</think>);
// gpt-oss writes harmony channels (analysis = thinking; final, commentary and tool calls =
// content, tool-call markup kept whole for the tool-call parser).
//
// `force_reasoning` says the output starts inside the thinking block because the prompt already
// opened it (the template ends with <think>, or the request enabled thinking): deepseek-r1 and
// the parsers SGLang maps to it always force it, kimi never does, qwen3-thinking, minimax and
// gpt-oss always do; for the others the request decides (ReasoningEnabledByRequest).
// Without a forced block, text before a think-start token is content. An output cut off inside
// the thinking block is all thinking. A tool-call opener (<tool_call> for qwen3/glm45,
// <|tool_calls_section_begin|> for kimi_k2) also ends the thinking block and stays in content.
//
// Streaming: a ReasoningStream gets text deltas and returns what is final; partial markers are
// held back; with stream_reasoning false the thinking is returned in one piece when it ends. The
// deltas of a stream concatenate to Parse's result (one known exception, as in SGLang: a
// think-start token in the middle of unforced text makes the non-streaming result treat the text
// before it as thinking, while a stream has already sent it as content).
//
// Thread safety: a ReasoningParser is immutable; each ReasoningStream serves one response.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_template.h"
#include "chat/harmony.h"
#include "common/status.h"

namespace radixserve::chat {

struct ReasoningParserOptions {
  bool stream_reasoning = true;         // request.stream_reasoning
  std::optional<bool> force_reasoning;  // the request's thinking state; nullopt: parser default
  bool force_nonempty_content = false;  // chat_template_kwargs.force_nonempty_content
};

struct ReasoningResult {
  std::string reasoning_text;
  std::string normal_text;
};

// The fixed facts of one parser name.
struct ReasoningFormat {
  std::string think_start;  // empty for gpt-oss (harmony)
  std::string think_end;
  std::string tool_start;  // a tool-call opener that also ends thinking; may be empty
  // SGLang's reasoning_default: "always", "enable_thinking", "thinking", "explicit_thinking",
  // "explicit_enable_thinking" — how a request turns thinking on (ReasoningEnabledByRequest).
  std::string reasoning_default = "always";
  // The model opens its thinking itself (no <think> appended to the prompt when thinking).
  bool thinks_internally = false;
};

class ReasoningParser;

// Where a scan of the output's remaining text starts: at the beginning, inside the thinking
// block (its start already read), or in the answer (everything after is content).
enum class ReasoningPhase { kBegin, kThinking, kAnswer };

class ReasoningStream {
 public:
  ReasoningStream(const ReasoningParser* parser);

  ReasoningResult Feed(std::string_view delta);
  // The output ended: releases held-back text (an unfinished thinking block is thinking).
  ReasoningResult Finish();
  // Bytes of the output kept to be read again (what is not settled yet).
  size_t buffered() const { return buffer_.size(); }

 private:
  ReasoningResult Emit(bool at_end);

  const ReasoningParser* parser_;
  std::string buffer_;  // the text not yet settled, read from phase_ (harmony_ for gpt-oss)
  ReasoningPhase phase_ = ReasoningPhase::kBegin;
  HarmonyCursor harmony_;
  size_t reasoning_sent_ = 0;  // of buffer_'s scan
  size_t normal_sent_ = 0;
  bool finished_ = false;
};

class ReasoningParser {
 public:
  // `name` is a --reasoning-parser value (see Names(), case-insensitive as in SGLang); unknown
  // names are kInvalidArgument listing the valid ones.
  static Expected<std::unique_ptr<ReasoningParser>> Create(std::string_view name,
                                                           ReasoningParserOptions options = {});
  static const std::vector<std::string>& Names();

  // SGLang's parse_non_stream.
  ReasoningResult Parse(std::string_view text) const;
  // A stream reading one output; the parser must outlive it.
  ReasoningStream NewStream() const { return ReasoningStream(this); }

  const std::string& name() const { return name_; }
  const ReasoningFormat& format() const { return format_; }
  bool force_reasoning() const { return force_; }

 private:
  friend class ReasoningStream;
  enum class Kind { kThinkTags, kHarmony, kAppendThink };

  ReasoningParser(std::string name, Kind kind, ReasoningFormat format, bool force,
                  ReasoningParserOptions options);
  // The final parts of `text` as a stream sees them (see the header comment).
  ReasoningResult Scan(std::string_view text, bool at_end) const;
  // Scan of the text that remains from `phase` on, with what a stream may forget: text[0,
  // settled_text) gave the first settled_reasoning / settled_normal bytes of the result, and a
  // scan of the rest from `next` gives the remainder. Think tags and append-think settle as they
  // go; harmony resumes from its own cursor (see ScanHarmonyFrom).
  struct PhasedScan {
    ReasoningResult result;
    size_t settled_text = 0;
    size_t settled_reasoning = 0;
    size_t settled_normal = 0;
    ReasoningPhase next = ReasoningPhase::kBegin;
    HarmonyCursor next_harmony;
  };
  PhasedScan ScanFrom(std::string_view text, bool at_end, ReasoningPhase phase,
                      const HarmonyCursor& harmony = {}) const;

  std::string name_;
  Kind kind_;
  ReasoningFormat format_;
  bool force_;
  ReasoningParserOptions options_;
};

// Whether a request has thinking on for `parser_name` when the chat template says nothing
// (SGLang's _get_reasoning_from_request fallback on reasoning_default): "always" -> true;
// "thinking"/"enable_thinking" -> unless chat_template_kwargs sets that key to false;
// "explicit_*" -> only when chat_template_kwargs sets it to true. False for unknown names.
bool ReasoningEnabledByRequest(std::string_view parser_name, const Json& chat_template_kwargs);

}  // namespace radixserve::chat
