#include "tokenizer/incremental_detokenizer.h"

#include <gtest/gtest.h>

#include "tokenizer/bpe_model.h"
#include "tokenizer/byte_level.h"

namespace radixserve::tokenizer {
namespace {

// Byte-level tokenizer whose token i is the single byte i.
Tokenizer ByteTokenizer() {
  std::vector<std::string> tokens(256);
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    AppendByteLevel(tokens[b], std::string_view(&c, 1));
  }
  Tokenizer::Parts parts;
  auto model = BpeModel::FromMerges(Vocab(tokens), {}, {});
  EXPECT_TRUE(model.ok());
  parts.model = std::make_unique<BpeModel>(std::move(model).value());
  parts.pre_tokenizer = std::make_unique<ByteLevelPreTokenizer>(false, false);
  parts.decoder = std::make_unique<ByteLevelDecoder>();
  return Tokenizer(std::move(parts));
}

// SentencePiece-style: 0 <unk>, 1 ▁Hello, 2 ▁world, 3 !, 4.. <0x00>..<0xFF>.
Tokenizer SentencePieceTokenizer() {
  std::vector<std::string> tokens = {"<unk>", "\xE2\x96\x81Hello", "\xE2\x96\x81world", "!"};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    tokens.push_back(name);
  }
  Tokenizer::Parts parts;
  BpeOptions opts;
  opts.byte_fallback = true;
  parts.model = std::make_unique<BpeModel>(BpeModel::FromScores(Vocab(tokens), {}, opts));
  std::vector<std::unique_ptr<Decoder>> dec;
  dec.push_back(std::make_unique<ReplaceDecoder>("\xE2\x96\x81", " "));
  dec.push_back(std::make_unique<ByteFallbackDecoder>());
  dec.push_back(std::make_unique<FuseDecoder>());
  dec.push_back(std::make_unique<StripDecoder>(" ", 1, 0));
  parts.decoder = std::make_unique<SequenceDecoder>(std::move(dec));
  return Tokenizer(std::move(parts));
}

std::vector<std::string> StreamOneByOne(const Tokenizer& tok, const std::vector<TokenId>& ids,
                                        const std::vector<TokenId>& prompt = {}) {
  IncrementalDetokenizer detok(tok, prompt, DecodeOptions{});
  std::vector<std::string> pieces;
  for (TokenId id : ids) pieces.push_back(detok.Step(std::span<const TokenId>(&id, 1)));
  pieces.push_back(detok.Finish());
  return pieces;
}

TEST(IncrementalDetokenizerTest, HoldsBackPartialCharacters) {
  const Tokenizer tok = ByteTokenizer();
  // "a" then the three bytes of 一 (E4 B8 80) then "b".
  const auto pieces = StreamOneByOne(tok, {'a', 0xE4, 0xB8, 0x80, 'b'});
  EXPECT_EQ(pieces, (std::vector<std::string>{"a", "", "", "\xE4\xB8\x80", "b", ""}));
}

TEST(IncrementalDetokenizerTest, ReleasesUpToLastSpaceWhileACharacterIsOpen) {
  const Tokenizer tok = ByteTokenizer();
  // Nothing is committed while the window ends mid-character, but "x y " is printable.
  IncrementalDetokenizer detok(tok, {}, DecodeOptions{});
  const std::vector<TokenId> ids = {'x', ' ', 'y', ' ', 0xC3};
  EXPECT_EQ(detok.Step(ids), "x y ");
  const TokenId last = 0xA9;
  EXPECT_EQ(detok.Step(std::span<const TokenId>(&last, 1)), "\xC3\xA9");
  EXPECT_EQ(detok.Finish(), "");
  EXPECT_EQ(detok.emitted(), "x y \xC3\xA9");
}

TEST(IncrementalDetokenizerTest, SentencePieceSpacesAndByteFallback) {
  const Tokenizer tok = SentencePieceTokenizer();
  // ▁Hello ▁world <0xC3><0xA9> !
  const std::vector<TokenId> ids = {1, 2, 4 + 0xC3, 4 + 0xA9, 3};
  const auto pieces = StreamOneByOne(tok, ids);
  EXPECT_EQ(pieces, (std::vector<std::string>{"Hello", " world", "", "\xC3\xA9", "!", ""}));
  std::string joined;
  for (const auto& p : pieces) joined += p;
  EXPECT_EQ(joined, tok.Decode(ids));
}

TEST(IncrementalDetokenizerTest, PromptContextKeepsTheLeadingSpace) {
  const Tokenizer tok = SentencePieceTokenizer();
  // After a prompt ending in ▁Hello, the output ▁world reads " world", not "world".
  const auto pieces = StreamOneByOne(tok, {2}, {1});
  EXPECT_EQ(pieces, (std::vector<std::string>{" world", ""}));
}

TEST(IncrementalDetokenizerTest, ContextWindowStartsOnACharacterBoundary) {
  const Tokenizer tok = SentencePieceTokenizer();
  // Prompt: ▁Hello 一 一 as byte tokens. Its last 5 ids start inside the first 一; a window
  // there would turn the whole byte run, output included, into U+FFFD.
  const std::vector<TokenId> prompt = {1,        4 + 0xE4, 4 + 0xB8, 4 + 0x80,
                                       4 + 0xE4, 4 + 0xB8, 4 + 0x80};
  const auto pieces = StreamOneByOne(tok, {4 + 0xE4, 4 + 0xB8, 4 + 0x80}, prompt);
  EXPECT_EQ(pieces, (std::vector<std::string>{"", "", "\xE4\xB8\x80", ""}));
}

TEST(IncrementalDetokenizerTest, OutputCompletingAPromptCharacter) {
  const Tokenizer tok = ByteTokenizer();
  // The prompt ends with the first byte of 一; the output supplies the other two.
  const auto pieces = StreamOneByOne(tok, {0xB8, 0x80, 'z'}, {'a', 0xE4});
  EXPECT_EQ(pieces, (std::vector<std::string>{"", "\xE4\xB8\x80", "z", ""}));
}

TEST(IncrementalDetokenizerTest, FinishReleasesAnIncompleteTail) {
  const Tokenizer tok = ByteTokenizer();
  const auto pieces = StreamOneByOne(tok, {'o', 'k', 0xE4});
  EXPECT_EQ(pieces, (std::vector<std::string>{"o", "k", "", "\xEF\xBF\xBD"}));
}

TEST(PrintablePrefixTest, SglangRules) {
  EXPECT_EQ(PrintablePrefix("line\n"), "line\n");
  EXPECT_EQ(PrintablePrefix("hello wor"), "hello ");
  EXPECT_EQ(PrintablePrefix("nospace"), "");
  EXPECT_EQ(PrintablePrefix("ab\xE4\xB8\x80"), "ab\xE4\xB8\x80");  // ends with CJK
  EXPECT_EQ(PrintablePrefix("ab\xE4\xB8\x80"
                            "c"),
            "ab\xE4\xB8\x80");  // CJK then one more
}

}  // namespace
}  // namespace radixserve::tokenizer
