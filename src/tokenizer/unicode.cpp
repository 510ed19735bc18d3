#include "tokenizer/unicode.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "tokenizer/utf8.h"

namespace radixserve::tokenizer {

bool IsWhitespace(char32_t cp) { return u_hasBinaryProperty(cp, UCHAR_WHITE_SPACE); }

bool IsNumeric(char32_t cp) {
  const int8_t t = u_charType(cp);
  return t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER;
}

bool IsAlphanumeric(char32_t cp) {
  return u_hasBinaryProperty(cp, UCHAR_ALPHABETIC) || IsNumeric(cp);
}

bool IsPunctuation(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
           (cp >= 123 && cp <= 126);
  }
  return u_ispunct(cp);
}

bool IsControl(char32_t cp) {
  if (cp == '\t' || cp == '\n' || cp == '\r') return false;
  const int8_t t = u_charType(cp);
  return t == U_CONTROL_CHAR || t == U_FORMAT_CHAR || t == U_UNASSIGNED || t == U_PRIVATE_USE_CHAR;
}

bool IsNonspacingMark(char32_t cp) { return u_charType(cp) == U_NON_SPACING_MARK; }

bool IsChineseChar(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

std::string NormalizeUnicode(std::string_view text, NormalForm form) {
  bool ascii = true;
  for (unsigned char c : text) ascii &= c < 0x80;
  if (ascii) return std::string(text);
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* norm = nullptr;
  switch (form) {
    case NormalForm::kNfc:
      norm = icu::Normalizer2::getNFCInstance(err);
      break;
    case NormalForm::kNfd:
      norm = icu::Normalizer2::getNFDInstance(err);
      break;
    case NormalForm::kNfkc:
      norm = icu::Normalizer2::getNFKCInstance(err);
      break;
    case NormalForm::kNfkd:
      norm = icu::Normalizer2::getNFKDInstance(err);
      break;
  }
  RADIX_CHECK_MSG(U_SUCCESS(err) && norm != nullptr, "ICU normalizer data missing");
  const icu::UnicodeString src = icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  icu::UnicodeString dst = norm->normalize(src, err);
  RADIX_CHECK(U_SUCCESS(err));
  std::string out;
  dst.toUTF8String(out);
  return out;
}

std::string ToLowerUnicode(std::string_view text) {
  bool ascii = true;
  for (unsigned char c : text) ascii &= c < 0x80;
  if (ascii) {
    std::string out(text);
    for (char& c : out) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return out;
  }
  icu::UnicodeString s = icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  s.toLower(icu::Locale::getRoot());
  std::string out;
  s.toUTF8String(out);
  return out;
}

}  // namespace radixserve::tokenizer
