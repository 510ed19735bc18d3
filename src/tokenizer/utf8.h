// UTF-8 helpers shared by the tokenizer stages. All functions are pure and thread-safe.
// Code points are char32_t; byte strings are std::string / std::string_view.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace radixserve::tokenizer {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Appends the UTF-8 encoding of `cp` (must be a valid scalar value) to `out`.
void AppendUtf8(std::string& out, char32_t cp);

// Decodes the character starting at `pos`. On success stores it in `cp`, advances `pos` past it
// and returns true. On an ill-formed sequence advances `pos` past its maximal subpart (the
// Unicode "substitution of maximal subparts" practice, which Python and Rust follow), sets `cp`
// to U+FFFD and returns false. Requires pos < text.size().
bool DecodeUtf8(std::string_view text, size_t& pos, char32_t& cp);

// Replaces every ill-formed sequence by U+FFFD (one per maximal subpart), like Python's
// bytes.decode("utf-8", "replace") and Rust's String::from_utf8_lossy.
std::string SanitizeUtf8(std::string_view text);

// True when `text` is well-formed UTF-8.
bool IsValidUtf8(std::string_view text);

// Byte length of the character whose lead byte is `lead` (1 for stray continuation bytes).
size_t Utf8Length(unsigned char lead);

// Number of code points in a well-formed UTF-8 string.
size_t CountCodePoints(std::string_view text);

}  // namespace radixserve::tokenizer
