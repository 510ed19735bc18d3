// Base64 (RFC 4648): the standard alphabet, or the URL- and filename-safe one ('-' and '_' for
// '+' and '/'); both padded with '='.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace radixserve {

enum class Base64Alphabet { kStandard, kUrlSafe };

std::string Base64Encode(std::string_view bytes,
                         Base64Alphabet alphabet = Base64Alphabet::kStandard);

// The bytes of standard-alphabet base64 text (padding optional); nullopt when malformed.
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace radixserve
