#include "tokenizer/wordpiece_model.h"

#include "tokenizer/utf8.h"

namespace radixserve::tokenizer {

void WordPieceModel::Tokenize(std::string_view piece, std::vector<TokenId>& out) const {
  if (piece.empty()) return;
  if (CountCodePoints(piece) > max_chars_) {
    out.push_back(unk_id_);
    return;
  }
  std::vector<TokenId> pieces;
  std::string candidate;
  size_t start = 0;
  while (start < piece.size()) {
    size_t end = piece.size();
    std::optional<TokenId> found;
    while (start < end) {
      candidate.clear();
      if (start > 0) candidate = prefix_;
      candidate.append(piece.substr(start, end - start));
      if ((found = vocab_.Find(candidate))) break;
      // Step back one whole character.
      do {
        --end;
      } while (end > start && (static_cast<unsigned char>(piece[end]) & 0xC0) == 0x80);
    }
    if (!found) {
      out.push_back(unk_id_);
      return;
    }
    pieces.push_back(*found);
    start = end;
  }
  out.insert(out.end(), pieces.begin(), pieces.end());
}

}  // namespace radixserve::tokenizer
