// Unicode character classes and normalization forms (ICU underneath) with the meanings the HF
// tokenizers library gives them (Rust's char::is_whitespace, is_alphanumeric, is_numeric, ...).
// Pure functions, thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace radixserve::tokenizer {

bool IsWhitespace(char32_t cp);      // Unicode White_Space property
bool IsNumeric(char32_t cp);         // general category Nd, Nl or No
bool IsAlphanumeric(char32_t cp);    // Alphabetic property or numeric
bool IsPunctuation(char32_t cp);     // general category P* (plus ASCII punctuation symbols)
bool IsControl(char32_t cp);         // general category Cc/Cf/Cn/Co (BERT's notion)
bool IsNonspacingMark(char32_t cp);  // general category Mn
bool IsChineseChar(char32_t cp);     // the CJK blocks BERT isolates

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };

// Normalizes well-formed UTF-8 text.
std::string NormalizeUnicode(std::string_view text, NormalForm form);

// Full Unicode lowercase mapping (root locale), as Rust's str::to_lowercase.
std::string ToLowerUnicode(std::string_view text);

}  // namespace radixserve::tokenizer
