// Building a Tokenizer from files on disk.
//   * HF tokenizer.json (a file, or a directory holding one; tokenizer_config.json beside it
//     supplies bos/eos tokens when present);
//   * the vocabulary embedded in a GGUF file (tokenizer.ggml.*): the `llama` (SentencePiece,
//     scores + byte fallback) and `gpt2` (byte-level BPE with merges; pre-tokenizer variant from
//     tokenizer.ggml.pre) families.
// Errors (missing file, malformed JSON/GGUF, unsupported component) are returned, never thrown.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "tokenizer/tokenizer.h"

namespace radixserve::tokenizer {

// Chooses the format from the path: *.gguf, a tokenizer.json file, or a directory.
Expected<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path);

Expected<std::unique_ptr<Tokenizer>> LoadTokenizerJson(const std::string& json_path);
// Parses tokenizer.json text; `config_text` is tokenizer_config.json's text or empty.
Expected<std::unique_ptr<Tokenizer>> ParseTokenizerJson(const std::string& json_text,
                                                        const std::string& config_text);

Expected<std::unique_ptr<Tokenizer>> LoadGgufTokenizer(const std::string& gguf_path);

}  // namespace radixserve::tokenizer
