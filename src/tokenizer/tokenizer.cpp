#include "tokenizer/tokenizer.h"

#include "tokenizer/utf8.h"

namespace radixserve::tokenizer {

Tokenizer::Tokenizer(Parts parts) : parts_(std::move(parts)) {
  RADIX_CHECK(parts_.model != nullptr);
  vocab_size_ = parts_.model->vocab().size();
  for (const auto& t : parts_.added.tokens()) {
    vocab_size_ = std::max(vocab_size_, static_cast<size_t>(t.id) + 1);
  }
}

std::vector<TokenId> Tokenizer::Encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<TokenId> ids;
  if (options.add_special_tokens) ids = parts_.post_processor.prefix;
  if (IsValidUtf8(text)) {
    EncodeText(text, true, options.parse_special, ids);
  } else {
    const std::string clean = SanitizeUtf8(text);
    EncodeText(clean, true, options.parse_special, ids);
  }
  if (options.add_special_tokens) {
    ids.insert(ids.end(), parts_.post_processor.suffix.begin(), parts_.post_processor.suffix.end());
  }
  return ids;
}

PairEncoding Tokenizer::EncodePair(std::string_view a, std::string_view b,
                                   const EncodeOptions& options) const {
  const EncodeOptions bare{.add_special_tokens = false, .parse_special = options.parse_special};
  const std::vector<TokenId> ids_a = Encode(a, bare);
  const std::vector<TokenId> ids_b = Encode(b, bare);
  PairEncoding out;
  auto add = [&out](const std::vector<TokenId>& ids, int32_t type_id) {
    out.ids.insert(out.ids.end(), ids.begin(), ids.end());
    out.type_ids.insert(out.type_ids.end(), ids.size(), type_id);
  };
  const PostProcessor& post = parts_.post_processor;
  if (!options.add_special_tokens) {
    add(ids_a, 0);
    add(ids_b, 1);
  } else if (post.pair.empty()) {
    for (int32_t type_id : {0, 1}) {
      add(post.prefix, type_id);
      add(type_id == 0 ? ids_a : ids_b, type_id);
      add(post.suffix, type_id);
    }
  } else {
    for (const PairPiece& piece : post.pair) {
      add(piece.kind == PairPiece::Kind::kTokens      ? piece.ids
          : piece.kind == PairPiece::Kind::kSequenceA ? ids_a
                                                      : ids_b,
          piece.type_id);
    }
  }
  return out;
}

void Tokenizer::EncodeText(std::string_view text, bool at_start, bool parse_special,
                           std::vector<TokenId>& out) const {
  for (const Section& raw : parts_.added.Split(text, /*normalized=*/false, parse_special)) {
    if (raw.token) {
      out.push_back(*raw.token);
      continue;
    }
    const bool section_at_start = at_start && raw.offset == 0;
    if (parts_.normalizer) {
      std::string normalized(raw.text);
      parts_.normalizer->Normalize(normalized);
      EncodeNormalized(normalized, section_at_start, out);
    } else {
      EncodeNormalized(raw.text, section_at_start, out);
    }
  }
}

void Tokenizer::EncodeNormalized(std::string_view text, bool at_start,
                                 std::vector<TokenId>& out) const {
  for (const Section& sec : parts_.added.Split(text, /*normalized=*/true, true)) {
    if (sec.token) {
      out.push_back(*sec.token);
      continue;
    }
    if (!parts_.pre_tokenizer) {
      parts_.model->Tokenize(sec.text, out);
      continue;
    }
    thread_local std::vector<Piece> pieces;
    pieces.clear();
    pieces.push_back({std::string(sec.text), at_start && sec.offset == 0});
    parts_.pre_tokenizer->PreTokenize(pieces);
    for (const Piece& p : pieces) parts_.model->Tokenize(p.text, out);
  }
}

std::string Tokenizer::Decode(std::span<const TokenId> ids, const DecodeOptions& options) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (TokenId id : ids) {
    if (const AddedToken* added = parts_.added.Find(id)) {
      if (options.skip_special_tokens && added->special) continue;
      tokens.push_back(added->content);
    } else if (const std::string* t = parts_.model->vocab().Token(id)) {
      tokens.push_back(*t);
    }
  }
  std::string text;
  if (parts_.decoder) {
    parts_.decoder->Decode(tokens);
    for (const auto& t : tokens) text += t;
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) text += ' ';
      text += tokens[i];
    }
  }
  return text;
}

const std::string* Tokenizer::IdToToken(TokenId id) const {
  if (const AddedToken* added = parts_.added.Find(id)) return &added->content;
  return parts_.model->vocab().Token(id);
}

std::optional<TokenId> Tokenizer::TokenToId(std::string_view token) const {
  for (const auto& t : parts_.added.tokens()) {
    if (t.content == token) return t.id;
  }
  return parts_.model->vocab().Find(token);
}

bool Tokenizer::IsSpecial(TokenId id) const {
  const AddedToken* added = parts_.added.Find(id);
  return added != nullptr && added->special;
}

}  // namespace radixserve::tokenizer
