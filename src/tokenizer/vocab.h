// The token <-> id table of a model. Heterogeneous lookup lets callers search with string_view.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace radixserve::tokenizer {

using TokenId = int32_t;

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class Vocab {
 public:
  Vocab() = default;
  // `tokens[i]` is the spelling of id i. Duplicate spellings keep the lowest id for lookup.
  explicit Vocab(std::vector<std::string> tokens);

  std::optional<TokenId> Find(std::string_view token) const {
    auto it = index_.find(token);
    if (it == index_.end()) return std::nullopt;
    return it->second;
  }
  // nullptr when `id` is out of range.
  const std::string* Token(TokenId id) const {
    return id >= 0 && static_cast<size_t>(id) < tokens_.size() ? &tokens_[id] : nullptr;
  }
  size_t size() const { return tokens_.size(); }

 private:
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, TokenId, StringHash, std::equal_to<>> index_;
};

}  // namespace radixserve::tokenizer
