// Added tokens (special and user-defined): tokens matched literally in the input before
// normalization and pre-tokenization, with HF tokenizers' semantics:
//   * leftmost-longest, non-overlapping matching;
//   * single_word: the match must not touch a word character on either side;
//   * lstrip / rstrip: the match swallows whitespace on its left / right;
//   * normalized: matched against the normalized text instead of the raw input;
//   * special: skipped by decode(skip_special_tokens);
//   * special_parse_only: matched only when special-token parsing is on (HF: the special
//     tokens; llama.cpp: every control, unknown and user-defined token of a GGUF vocabulary).
// Immutable after construction; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/vocab.h"

namespace radixserve::tokenizer {

struct AddedToken {
  TokenId id = 0;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
  bool special_parse_only = false;
};

// A run of input: either plain text or one added token.
struct Section {
  std::string_view text;
  std::optional<TokenId> token;
  size_t offset = 0;  // byte offset of `text` in the string that was split
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  explicit AddedVocabulary(std::vector<AddedToken> tokens);

  // Splits `text` on the tokens whose `normalized` flag equals `normalized`. When
  // `parse_special` is false, special_parse_only tokens are matched but left as text (HF's
  // encode_special_tokens), so they still shadow overlapping tokens.
  std::vector<Section> Split(std::string_view text, bool normalized, bool parse_special) const;

  const AddedToken* Find(TokenId id) const;
  bool empty() const { return tokens_.empty(); }
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  // Byte trie of one matching set; node 0 is the root.
  struct Trie {
    std::unordered_map<uint64_t, int32_t> edges;  // (node << 8 | byte) -> child
    std::vector<int32_t> terminal;                // node -> index in tokens_, or -1
    // Longest token starting at `pos`: (index in tokens_, length) or index -1.
    std::pair<int32_t, size_t> LongestAt(std::string_view text, size_t pos) const;
  };
  void Insert(Trie& trie, int32_t index);

  std::vector<AddedToken> tokens_;
  std::unordered_map<TokenId, size_t> by_id_;
  Trie raw_, normalized_;
};

}  // namespace radixserve::tokenizer
