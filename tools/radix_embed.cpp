// radix_embed: sentence embeddings of an encoder model (BertModel + its pooling), for the oracle
// tests in tests/oracle/model and for debugging. Not part of the server.
//
//   radix_embed --model FOLDER (--texts-file FILE | --tokens-file FILE) --out FILE
//               [--batch N] [--threads N] [--dtype D] [--max-tokens N]
//
// --texts-file holds a JSON array of strings, tokenized with the folder's tokenizer.json
// (special tokens added); --tokens-file a JSON array of token-id arrays. --batch N embeds N
// sequences per forward pass (default: all at once; 1: each alone). --max-tokens N truncates
// every sequence to its first N-1 tokens plus its last (keeping [SEP]), as sentence-transformers'
// max_seq_length does. Writes float32 embeddings [n, dim] (little-endian, row-major) to --out and
// prints one JSON object: {"architecture", "n", "dim", "pooling", "normalize", "ids": [[...]]}.
// Exit status 1 on any error, 2 on a bad argument.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/log.h"
#include "common/thread_pool.h"
#include "model/model_loader.h"
#include "tokenizer/tokenizer_loader.h"

namespace {

namespace model = radixserve::model;
using nlohmann::json;

int Fail(const std::string& message, int code = 1) {
  std::fprintf(stderr, "radix_embed: %s\n", message.c_str());
  return code;
}

bool ReadJsonFile(const std::string& path, json* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream buffer;
  buffer << in.rdbuf();
  *out = json::parse(buffer.str(), nullptr, false);
  return !out->is_discarded() && out->is_array();
}

}  // namespace

int main(int argc, char** argv) {
  radixserve::InitLogging("warning");
  model::LoadOptions options;
  std::string texts_file, tokens_file, out_path;
  int threads = 0;
  int64_t batch_size = 0, max_tokens = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return Fail("argument " + arg + " is unknown or lacks a value", 2);
    const std::string value = argv[++i];
    if (arg == "--model") {
      options.model_path = value;
    } else if (arg == "--dtype") {
      options.dtype = value;
    } else if (arg == "--threads") {
      threads = std::atoi(value.c_str());
    } else if (arg == "--texts-file") {
      texts_file = value;
    } else if (arg == "--tokens-file") {
      tokens_file = value;
    } else if (arg == "--out") {
      out_path = value;
    } else if (arg == "--batch") {
      batch_size = std::atoll(value.c_str());
    } else if (arg == "--max-tokens") {
      max_tokens = std::atoll(value.c_str());
    } else {
      return Fail("unknown argument " + arg, 2);
    }
  }
  if (options.model_path.empty()) return Fail("--model is required", 2);
  if (out_path.empty()) return Fail("--out is required", 2);
  if (texts_file.empty() == tokens_file.empty())
    return Fail("give exactly one of --texts-file, --tokens-file", 2);

  std::vector<std::vector<int32_t>> sequences;
  json input;
  if (!texts_file.empty()) {
    if (!ReadJsonFile(texts_file, &input)) return Fail(texts_file + ": not a JSON array");
    auto tok = radixserve::tokenizer::LoadTokenizer(options.model_path);
    if (!tok.ok()) return Fail(tok.status().message());
    for (const json& text : input) {
      if (!text.is_string()) return Fail(texts_file + ": every entry must be a string");
      sequences.push_back((*tok)->Encode(text.get<std::string>(), {}));
    }
  } else {
    if (!ReadJsonFile(tokens_file, &input)) return Fail(tokens_file + ": not a JSON array");
    for (const json& ids : input) sequences.push_back(ids.get<std::vector<int32_t>>());
  }
  for (auto& ids : sequences) {
    if (ids.empty()) return Fail("an input has no tokens");
    if (max_tokens > 1 && static_cast<int64_t>(ids.size()) > max_tokens) {
      const int32_t last = ids.back();
      ids.resize(static_cast<size_t>(max_tokens - 1));
      ids.push_back(last);
    }
  }

  auto loaded = model::LoadEncoderModel(options);
  if (!loaded.ok()) return Fail(loaded.status().message());
  const model::EncoderModel& encoder = **loaded;
  const int64_t n = static_cast<int64_t>(sequences.size()), dim = encoder.embedding_dim();
  if (batch_size <= 0) batch_size = std::max<int64_t>(n, 1);
  radixserve::ThreadPool pool(threads);
  std::vector<float> embeddings(static_cast<size_t>(n * dim));
  for (int64_t first = 0; first < n; first += batch_size) {
    model::ForwardBatch batch;
    const int64_t last = std::min(n, first + batch_size);
    for (int64_t s = first; s < last; ++s) {
      const auto& ids = sequences[static_cast<size_t>(s)];
      batch.token_ids.insert(batch.token_ids.end(), ids.begin(), ids.end());
      for (size_t p = 0; p < ids.size(); ++p) batch.positions.push_back(static_cast<int64_t>(p));
      batch.sequences.push_back({0, static_cast<int64_t>(ids.size()), {}});
    }
    auto status = encoder.Embed(batch, &pool, embeddings.data() + first * dim);
    if (!status.ok()) return Fail(status.message());
  }
  std::ofstream out(out_path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(embeddings.data()),
            static_cast<std::streamsize>(embeddings.size() * sizeof(float)));
  if (!out) return Fail(out_path + ": write failed");
  json report{{"architecture", encoder.config().architecture},
              {"n", n},
              {"dim", dim},
              {"pooling", model::PoolingModeName(encoder.pooling().mode)},
              {"normalize", encoder.pooling().normalize},
              {"ids", sequences}};
  std::cout << report.dump() << std::endl;
  return 0;
}
