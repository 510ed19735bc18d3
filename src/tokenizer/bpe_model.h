// Byte-pair encoding. Two ways of ranking merges:
//   * merges: the ordered merge list of tokenizer.json / GGUF `tokenizer.ggml.merges` (lower rank
//     first, ties leftmost), as HF tokenizers' BPE;
//   * scores: SentencePiece-BPE, where adjacent symbols merge into the vocabulary token with the
//     highest score (ties leftmost), as llama.cpp's SPM tokenizer for GGUF `llama` vocabularies.
// Characters with no token fall back to <0xXX> byte tokens (byte_fallback) or to the unknown
// token (consecutive ones fused into one when fuse_unk). Thread-safe after construction.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"
#include "tokenizer/model.h"

namespace radixserve::tokenizer {

struct BpeOptions {
  bool byte_fallback = false;
  bool fuse_unk = false;
  bool ignore_merges = false;  // a piece that is itself a token is emitted whole (Llama 3)
  std::optional<TokenId> unk_id;
};

class BpeModel final : public Model {
 public:
  // `merges` are pairs of token spellings; a merge whose parts or result are missing from the
  // vocabulary is a DataLoss error.
  static Expected<BpeModel> FromMerges(
      Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges,
      BpeOptions options);
  // `scores[i]` is the SentencePiece score of token i.
  static BpeModel FromScores(Vocab vocab, std::vector<float> scores, BpeOptions options);

  void Tokenize(std::string_view piece, std::vector<TokenId>& out) const override;
  const Vocab& vocab() const override { return vocab_; }

 private:
  BpeModel(Vocab vocab, BpeOptions options);
  void EmitUnknown(std::string_view text, bool& last_was_unk, std::vector<TokenId>& out) const;

  Vocab vocab_;
  BpeOptions options_;
  // merges mode: (left id << 32 | right id) -> (rank, merged id).
  std::unordered_map<uint64_t, std::pair<int32_t, TokenId>> merges_;
  std::vector<float> scores_;         // scores mode when non-empty
  std::vector<TokenId> byte_tokens_;  // <0xXX> ids, -1 when absent
};

}  // namespace radixserve::tokenizer
