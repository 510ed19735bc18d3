// Streaming detokenization of one sequence (SGLang's DecodeStatus / offsets algorithm,
// reference/sglang-runtime.md 1.4). Owned by the engine thread; not thread-safe.
//
// Each step decodes two overlapping windows of ids, ids[surr:read] and ids[surr:], and takes
// the new text as the difference, so tokens whose spelling depends on their left context
// (SentencePiece leading spaces, byte-fallback pieces, byte-level fragments of one character)
// come out right. Text is committed when the window ends on a complete character; otherwise
// only a safe printable prefix is released. Guarantees:
//   * emitted text is well-formed UTF-8 and never taken back (each delta extends the last);
//   * after Finish, the concatenation of all deltas equals Decode(all output ids).
// A request finished by a stop token that must not show in the text (SGLang's default, unless
// no_stop_trim) simply does not pass that token to Step. Stop strings are matched downstream
// of the deltas by StopStringMatcher.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace radixserve::tokenizer {

class IncrementalDetokenizer {
 public:
  // SGLang seeds the window with up to this many trailing prompt ids.
  static constexpr size_t kContextTokens = 5;

  // `prompt_ids` gives left context only (its last kContextTokens ids, a few more if those
  // start inside a character or decode to nothing); their text is never emitted.
  // `tokenizer` must outlive this object.
  IncrementalDetokenizer(const Tokenizer& tokenizer, std::span<const TokenId> prompt_ids,
                         DecodeOptions options);

  // Appends output ids and returns the newly releasable text (possibly empty).
  std::string Step(std::span<const TokenId> new_ids);
  // Ends the stream: returns all text not yet released. Further calls return "".
  std::string Finish();

  // All text released so far.
  const std::string& emitted() const { return emitted_; }

 private:
  std::string Decode(size_t begin, size_t end) const;

  const Tokenizer& tokenizer_;
  DecodeOptions options_;
  std::vector<TokenId> ids_;
  size_t surr_offset_ = 0;
  size_t read_offset_ = 0;
  std::string decoded_text_;  // committed text
  std::string emitted_;       // released text: decoded_text_ plus maybe a printable prefix
  bool finished_ = false;
};

// The prefix of `text` that is safe to release while its last character may still change
// (SGLang's rule: all of it after a newline, all of it or all but the last character around
// CJK, else up to and including the last space). Exposed for tests.
std::string_view PrintablePrefix(std::string_view text);

}  // namespace radixserve::tokenizer
