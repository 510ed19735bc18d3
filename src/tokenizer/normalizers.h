// Normalizers: the first encode stage, applied to each section of input text that is not an added
// token (HF tokenizers' `normalizer`). Each rewrites well-formed UTF-8 in place. Instances are
// immutable after construction and safe to share between threads.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace radixserve::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void Normalize(std::string& text) const = 0;
};

// NFC / NFD / NFKC / NFKD.
class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormalForm form) : form_(form) {}
  void Normalize(std::string& text) const override;

 private:
  NormalForm form_;
};

class LowercaseNormalizer final : public Normalizer {
 public:
  void Normalize(std::string& text) const override;
};

// Prepends `prefix` to non-empty text (SentencePiece's leading "▁").
class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void Normalize(std::string& text) const override;

 private:
  std::string prefix_;
};

// Replaces every occurrence of a literal string, or every match of a regex, by `content`.
class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(std::string literal, std::string content)
      : literal_(std::move(literal)), content_(std::move(content)) {}
  ReplaceNormalizer(Regex regex, std::string content)
      : regex_(std::move(regex)), content_(std::move(content)) {}
  void Normalize(std::string& text) const override;

 private:
  std::string literal_;
  std::optional<Regex> regex_;
  std::string content_;
};

// Strips Unicode whitespace on the chosen sides.
class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void Normalize(std::string& text) const override;

 private:
  bool left_, right_;
};

// Removes nonspacing marks (expects decomposed input, e.g. after NFD).
class StripAccentsNormalizer final : public Normalizer {
 public:
  void Normalize(std::string& text) const override;
};

// BERT's normalizer: drop control characters, map whitespace to ' ', pad CJK characters with
// spaces, optionally strip accents and lowercase.
class BertNormalizer final : public Normalizer {
 public:
  BertNormalizer(bool clean_text, bool handle_chinese_chars, bool strip_accents, bool lowercase)
      : clean_text_(clean_text),
        handle_chinese_chars_(handle_chinese_chars),
        strip_accents_(strip_accents),
        lowercase_(lowercase) {}
  void Normalize(std::string& text) const override;

 private:
  bool clean_text_, handle_chinese_chars_, strip_accents_, lowercase_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps)
      : steps_(std::move(steps)) {}
  void Normalize(std::string& text) const override;

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace radixserve::tokenizer
