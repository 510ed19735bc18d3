// Tokenizer: text <-> token ids for one model, assembled from the HF tokenizers pipeline stages:
//   added tokens split -> normalizer -> pre-tokenizer -> model -> post-processor (encode)
//   ids -> token spellings -> decoder (decode)
// Built by LoadTokenizer (tokenizer_loader.h) from a tokenizer.json or a GGUF vocabulary.
// Immutable after construction: Encode and Decode may run concurrently on any thread.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/added_vocabulary.h"
#include "tokenizer/decoders.h"
#include "tokenizer/model.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/pre_tokenizers.h"

namespace radixserve::tokenizer {

struct EncodeOptions {
  // Apply the post-processor (BOS/EOS per the tokenizer's template or GGUF add_bos/add_eos).
  bool add_special_tokens = true;
  // Recognise special-token literals such as "<|im_end|>" in the text. When false they are
  // tokenized as plain text (non-special added tokens are still recognised).
  bool parse_special = true;
};

struct DecodeOptions {
  bool skip_special_tokens = true;
  // Accepted for API compatibility. SGLang decodes with HF *fast* tokenizers, which ignore this
  // flag, so it has no effect here either.
  bool spaces_between_special_tokens = true;
};

// One piece of a pair template: special-token ids, or where sequence A or B goes; type_id is the
// segment (token type) its tokens get.
struct PairPiece {
  enum class Kind { kTokens, kSequenceA, kSequenceB };
  Kind kind = Kind::kTokens;
  std::vector<TokenId> ids;  // kTokens
  int32_t type_id = 0;
};

// Ids added around a single encoded sequence by the post-processor, and how it assembles a pair.
struct PostProcessor {
  std::vector<TokenId> prefix;
  std::vector<TokenId> suffix;
  // tokenizer.json's pair template (TemplateProcessing "pair", BertProcessing's
  // [CLS] A [SEP] B [SEP]). Empty: the pair is A then B, each with prefix and suffix, types 0
  // and 1.
  std::vector<PairPiece> pair;
};

// A sequence pair encoded for a cross-encoder: ids and the segment of each.
struct PairEncoding {
  std::vector<TokenId> ids;
  std::vector<int32_t> type_ids;
};

class Tokenizer {
 public:
  struct Parts {
    std::unique_ptr<Normalizer> normalizer;       // may be null
    std::unique_ptr<PreTokenizer> pre_tokenizer;  // may be null
    std::unique_ptr<Model> model;                 // required
    std::unique_ptr<Decoder> decoder;             // may be null: tokens joined by spaces
    PostProcessor post_processor;
    AddedVocabulary added;
    std::optional<TokenId> bos_id;
    std::vector<TokenId> eos_ids;  // every id that ends generation (EOS, EOT, ...)
  };
  explicit Tokenizer(Parts parts);

  // `text` may hold ill-formed UTF-8: each ill-formed subsequence is read as U+FFFD.
  std::vector<TokenId> Encode(std::string_view text, const EncodeOptions& options = {}) const;
  // `a` and `b` as one input, as HF's tokenizer(a, b) assembles it (options.add_special_tokens:
  // the pair template; else A's tokens (type 0) then B's (type 1)).
  PairEncoding EncodePair(std::string_view a, std::string_view b,
                          const EncodeOptions& options = {}) const;
  // Unknown ids are skipped. The result is well-formed UTF-8.
  std::string Decode(std::span<const TokenId> ids, const DecodeOptions& options = {}) const;

  // Spelling of `id` (added token content or model vocabulary entry), nullptr if unknown.
  const std::string* IdToToken(TokenId id) const;
  std::optional<TokenId> TokenToId(std::string_view token) const;
  bool IsSpecial(TokenId id) const;
  // One past the largest id.
  size_t vocab_size() const { return vocab_size_; }
  std::optional<TokenId> bos_id() const { return parts_.bos_id; }
  const std::vector<TokenId>& eos_ids() const { return parts_.eos_ids; }
  const AddedVocabulary& added_vocabulary() const { return parts_.added; }

 private:
  void EncodeText(std::string_view text, bool at_start, bool parse_special,
                  std::vector<TokenId>& out) const;
  void EncodeNormalized(std::string_view text, bool at_start, std::vector<TokenId>& out) const;

  Parts parts_;
  size_t vocab_size_ = 0;
};

}  // namespace radixserve::tokenizer
