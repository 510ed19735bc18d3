// GPT-2's reversible byte <-> printable-character table used by byte-level BPE vocabularies:
// bytes that are printable Latin-1 map to themselves, the other 68 map to U+0100 onwards.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace radixserve::tokenizer {

// Appends the byte-level spelling of every byte of `bytes` to `out`.
void AppendByteLevel(std::string& out, std::string_view bytes);

// The byte a byte-level character stands for, or nullopt for characters outside the table.
std::optional<unsigned char> ByteFromByteLevelChar(char32_t cp);

}  // namespace radixserve::tokenizer
