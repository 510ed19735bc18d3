// Decoders: turn the spellings of a token sequence back into text (HF tokenizers' `decoder`).
// Decode rewrites the list of token strings; the final text is their concatenation. Instances
// are immutable and thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/normalizers.h"
#include "tokenizer/pre_tokenizers.h"

namespace radixserve::tokenizer {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void Decode(std::vector<std::string>& tokens) const = 0;
};

// Byte-level alphabet back to bytes, then lossy UTF-8 (ill-formed bytes become U+FFFD).
class ByteLevelDecoder final : public Decoder {
 public:
  void Decode(std::vector<std::string>& tokens) const override;
};

// Replacement character back to spaces; the first token drops it when a prefix was prepended.
class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, PrependScheme scheme)
      : replacement_(std::move(replacement)), scheme_(scheme) {}
  void Decode(std::vector<std::string>& tokens) const override;

 private:
  std::string replacement_;
  PrependScheme scheme_;
};

// Runs of <0xXX> tokens become their bytes when those form valid UTF-8, else one U+FFFD each.
class ByteFallbackDecoder final : public Decoder {
 public:
  void Decode(std::vector<std::string>& tokens) const override;
};

// Concatenates everything into one token.
class FuseDecoder final : public Decoder {
 public:
  void Decode(std::vector<std::string>& tokens) const override;
};

// Removes up to `start` leading and `stop` trailing copies of the character `content` per token.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void Decode(std::vector<std::string>& tokens) const override;

 private:
  std::string content_;
  size_t start_, stop_;
};

// Replaces a literal (or regex) pattern in each token.
class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(std::string literal, std::string content);
  ReplaceDecoder(Regex regex, std::string content);
  void Decode(std::vector<std::string>& tokens) const override;

 private:
  ReplaceNormalizer replace_;
};

// WordPiece: continuation prefix removed, a space before every other token, optional cleanup of
// spaces before punctuation and contractions.
class WordPieceDecoder final : public Decoder {
 public:
  WordPieceDecoder(std::string prefix, bool cleanup)
      : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void Decode(std::vector<std::string>& tokens) const override;

 private:
  std::string prefix_;
  bool cleanup_;
};

// Classic BPE end-of-word suffix: replaced by a space, except on the last token.
class BpeSuffixDecoder final : public Decoder {
 public:
  explicit BpeSuffixDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void Decode(std::vector<std::string>& tokens) const override;

 private:
  std::string suffix_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps)
      : steps_(std::move(steps)) {}
  void Decode(std::vector<std::string>& tokens) const override;

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

// The WordPiece decoder's cleanup (also transformers' clean_up_tokenization).
std::string CleanUpTokenization(std::string text);

}  // namespace radixserve::tokenizer
