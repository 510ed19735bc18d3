#include "tokenizer/added_vocabulary.h"

#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace radixserve::tokenizer {

namespace {

bool IsWordChar(char32_t cp) { return cp == '_' || IsAlphanumeric(cp); }

// The last code point before byte `end` (which must be a character boundary, end > 0).
char32_t CodePointBefore(std::string_view text, size_t end, size_t* start_out = nullptr) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  size_t pos = start;
  char32_t cp;
  DecodeUtf8(text, pos, cp);
  if (start_out != nullptr) *start_out = start;
  return cp;
}

}  // namespace

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  raw_.terminal.push_back(-1);
  normalized_.terminal.push_back(-1);
  for (size_t i = 0; i < tokens_.size(); ++i) {
    by_id_[tokens_[i].id] = i;
    if (tokens_[i].content.empty()) continue;
    Insert(tokens_[i].normalized ? normalized_ : raw_, static_cast<int32_t>(i));
  }
}

void AddedVocabulary::Insert(Trie& trie, int32_t index) {
  int32_t node = 0;
  for (unsigned char b : tokens_[index].content) {
    const uint64_t key = (static_cast<uint64_t>(node) << 8) | b;
    auto it = trie.edges.find(key);
    if (it == trie.edges.end()) {
      const auto child = static_cast<int32_t>(trie.terminal.size());
      trie.terminal.push_back(-1);
      it = trie.edges.emplace(key, child).first;
    }
    node = it->second;
  }
  // The first registration of a spelling wins, like HF's content -> id map.
  if (trie.terminal[node] < 0) trie.terminal[node] = index;
}

std::pair<int32_t, size_t> AddedVocabulary::Trie::LongestAt(std::string_view text,
                                                            size_t pos) const {
  std::pair<int32_t, size_t> best{-1, 0};
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    auto it = edges.find((static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(text[i]));
    if (it == edges.end()) break;
    node = it->second;
    if (terminal[node] >= 0) best = {terminal[node], i + 1 - pos};
  }
  return best;
}

std::vector<Section> AddedVocabulary::Split(std::string_view text, bool normalized,
                                            bool parse_special) const {
  const Trie& trie = normalized ? normalized_ : raw_;
  std::vector<Section> out;
  if (trie.edges.empty()) {
    if (!text.empty()) out.push_back({text, std::nullopt, 0});
    return out;
  }
  size_t emitted = 0;  // end of the last section pushed
  size_t pos = 0;
  while (pos < text.size()) {
    auto [index, len] = trie.LongestAt(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& tok = tokens_[index];
    size_t start = pos, stop = pos + len;
    pos = stop;  // matching resumes after the raw match whatever happens to it
    if (!parse_special && tok.special_parse_only) continue;
    if (tok.single_word) {
      const bool left_ok = start == 0 || !IsWordChar(CodePointBefore(text, start));
      bool right_ok = stop == text.size();
      if (!right_ok) {
        size_t p = stop;
        char32_t cp;
        DecodeUtf8(text, p, cp);
        right_ok = !IsWordChar(cp);
      }
      if (!left_ok || !right_ok) continue;
    }
    if (tok.lstrip) {
      size_t s = start;
      while (s > 0) {
        size_t prev;
        if (!IsWhitespace(CodePointBefore(text, s, &prev))) break;
        s = prev;
      }
      start = std::max(s, emitted);
    }
    if (tok.rstrip) {
      while (stop < text.size()) {
        size_t p = stop;
        char32_t cp;
        DecodeUtf8(text, p, cp);
        if (!IsWhitespace(cp)) break;
        stop = p;
      }
    }
    if (emitted < start)
      out.push_back({text.substr(emitted, start - emitted), std::nullopt, emitted});
    out.push_back({text.substr(start, stop - start), tok.id, start});
    emitted = stop;
    pos = std::max(pos, stop);
  }
  if (emitted < text.size()) out.push_back({text.substr(emitted), std::nullopt, emitted});
  return out;
}

const AddedToken* AddedVocabulary::Find(TokenId id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

}  // namespace radixserve::tokenizer
