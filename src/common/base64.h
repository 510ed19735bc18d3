// Base64 (RFC 4648): the standard alphabet, or the URL- and filename-safe one ('-' and '_' for
// '+' and '/'); both padded with '='.
#pragma once

#include <string>
#include <string_view>

namespace radixserve {

enum class Base64Alphabet { kStandard, kUrlSafe };

std::string Base64Encode(std::string_view bytes,
                         Base64Alphabet alphabet = Base64Alphabet::kStandard);

}  // namespace radixserve
