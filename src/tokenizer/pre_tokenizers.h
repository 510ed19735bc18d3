// Pre-tokenizers: split a normalized section into pieces that the model tokenizes one by one
// (HF tokenizers' `pre_tokenizer`). A piece remembers whether it begins the original input,
// which Metaspace's "first" prepend scheme needs. Instances are immutable and thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/regex.h"

namespace radixserve::tokenizer {

struct Piece {
  std::string text;
  bool at_start = false;  // begins at offset 0 of the original input
};

// What happens to the delimiters a split finds (HF's SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their refinement; empty pieces are dropped.
  virtual void PreTokenize(std::vector<Piece>& pieces) const = 0;
};

// GPT-2 byte-level: optional prefix space, optional split by the GPT-2 regex, then every byte
// spelled with the byte-level alphabet.
class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex);
  void PreTokenize(std::vector<Piece>& pieces) const override;

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;  // null when use_regex is false
};

enum class PrependScheme { kAlways, kFirst, kNever };

// SentencePiece's Metaspace: spaces become `replacement`, optionally prepended, optionally split
// before each replacement character.
class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}
  void PreTokenize(std::vector<Piece>& pieces) const override;

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
};

// Split on a literal string or a regex with a delimiter behavior; `invert` splits on what does
// not match instead.
class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(std::string literal, SplitBehavior behavior, bool invert)
      : literal_(std::move(literal)), behavior_(behavior), invert_(invert) {}
  SplitPreTokenizer(Regex regex, SplitBehavior behavior, bool invert)
      : regex_(std::make_unique<Regex>(std::move(regex))), behavior_(behavior), invert_(invert) {}
  void PreTokenize(std::vector<Piece>& pieces) const override;

 private:
  std::string literal_;
  std::unique_ptr<Regex> regex_;
  SplitBehavior behavior_;
  bool invert_;
};

// Splits on every code point satisfying a predicate: Digits, Punctuation, WhitespaceSplit and
// the two halves of BertPreTokenizer are instances of this.
class CharSplitPreTokenizer final : public PreTokenizer {
 public:
  CharSplitPreTokenizer(std::function<bool(char32_t)> is_delimiter, SplitBehavior behavior)
      : is_delimiter_(std::move(is_delimiter)), behavior_(behavior) {}
  void PreTokenize(std::vector<Piece>& pieces) const override;

 private:
  std::function<bool(char32_t)> is_delimiter_;
  SplitBehavior behavior_;
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  void PreTokenize(std::vector<Piece>& pieces) const override;

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

// The regex HF's ByteLevel pre-tokenizer uses when use_regex is true (GPT-2's).
extern const char* const kGpt2SplitPattern;

// Splits `piece` given its delimiter ranges [begin, end) (sorted, disjoint) by `behavior`,
// appending the results to `out`. Exposed for tests.
void SplitByRanges(const Piece& piece, const std::vector<std::pair<size_t, size_t>>& delimiters,
                   SplitBehavior behavior, std::vector<Piece>& out);

}  // namespace radixserve::tokenizer
