// llama.cpp's text-based fix-ups of GGUF special tokens, which GGUF vocabularies rely on:
// tokens spelled like end-of-turn / end-of-generation / fill-in-the-middle markers are treated
// as control tokens whatever their stored type, and make up the end-of-generation set.
#pragma once

#include <string_view>

namespace radixserve::tokenizer {

// True for a spelling llama.cpp promotes to a control token (EOT, EOM, FIM and EOG markers).
bool IsControlLookingToken(std::string_view text);

// True for a spelling llama.cpp counts as end-of-generation.
bool IsEndOfGenerationToken(std::string_view text);

// True for the FIM pad / repo / file-separator markers, which also end generation.
bool IsFimEndToken(std::string_view text);

}  // namespace radixserve::tokenizer
