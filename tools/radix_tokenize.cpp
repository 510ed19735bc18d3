// radix_tokenize: our tokenizer behind a JSON-lines protocol, for oracle tests and benchmarks.
//
//   radix_tokenize --tokenizer PATH                 requests on stdin, one JSON object a line:
//     {"op":"encode","text":S | "hex":H, "add_special_tokens":B, "parse_special":B} -> {"ids":[..]}
//     {"op":"decode","ids":[..], "skip_special_tokens":B}                          -> {"text":S}
//     {"op":"stream","ids":[..], "prompt_ids":[..], "skip_special_tokens":B}
//         -> {"pieces":[..], "text":S}   (token-by-token incremental detokenization)
//     {"op":"info"} -> {"vocab_size":N, "bos_id":N|null, "eos_ids":[..]}
//   radix_tokenize --tokenizer PATH --bench FILE [--repeat N] [--lines 1]
//     encodes FILE's text (whole, or line by line with --lines 1) N times on one thread;
//     prints {"bytes":..,"tokens":..,"seconds":..} with seconds per pass.
// A bad request line yields {"error":"..."} and the loop continues.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer_loader.h"

namespace {

using nlohmann::json;
using radixserve::tokenizer::DecodeOptions;
using radixserve::tokenizer::EncodeOptions;
using radixserve::tokenizer::IncrementalDetokenizer;
using radixserve::tokenizer::TokenId;
using radixserve::tokenizer::Tokenizer;

std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

json Handle(const Tokenizer& tok, const json& req) {
  const std::string op = req.value("op", std::string());
  DecodeOptions dopts;
  dopts.skip_special_tokens = req.value("skip_special_tokens", true);
  dopts.spaces_between_special_tokens = req.value("spaces_between_special_tokens", true);
  if (op == "encode") {
    EncodeOptions eopts;
    eopts.add_special_tokens = req.value("add_special_tokens", true);
    eopts.parse_special = req.value("parse_special", true);
    const std::string text = req.contains("hex") ? FromHex(req.at("hex").get<std::string>())
                                                 : req.at("text").get<std::string>();
    return {{"ids", tok.Encode(text, eopts)}};
  }
  if (op == "decode") {
    const auto ids = req.at("ids").get<std::vector<TokenId>>();
    return {{"text", tok.Decode(ids, dopts)}};
  }
  if (op == "stream") {
    const auto ids = req.at("ids").get<std::vector<TokenId>>();
    const auto prompt = req.value("prompt_ids", std::vector<TokenId>());
    IncrementalDetokenizer detok(tok, prompt, dopts);
    json pieces = json::array();
    std::string text;
    for (TokenId id : ids) {
      std::string piece = detok.Step(std::span<const TokenId>(&id, 1));
      text += piece;
      pieces.push_back(std::move(piece));
    }
    std::string last = detok.Finish();
    text += last;
    pieces.push_back(std::move(last));
    return {{"pieces", pieces}, {"text", text}};
  }
  if (op == "info") {
    json bos = tok.bos_id() ? json(*tok.bos_id()) : json(nullptr);
    return {{"vocab_size", tok.vocab_size()}, {"bos_id", bos}, {"eos_ids", tok.eos_ids()}};
  }
  return {{"error", "unknown op '" + op + "'"}};
}

int Bench(const Tokenizer& tok, const std::string& path, int repeat, bool by_lines) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot open %s\n", path.c_str());
    return 1;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::vector<std::string_view> inputs;
  if (by_lines) {
    size_t begin = 0;
    while (begin < text.size()) {
      size_t end = text.find('\n', begin);
      end = end == std::string::npos ? text.size() : end + 1;
      inputs.push_back(std::string_view(text).substr(begin, end - begin));
      begin = end;
    }
  } else {
    inputs.push_back(text);
  }
  EncodeOptions opts;
  opts.add_special_tokens = false;
  auto pass = [&] {
    size_t n = 0;
    for (std::string_view in : inputs) n += tok.Encode(in, opts).size();
    return n;
  };
  size_t tokens = pass();  // warm-up
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < repeat; ++i) tokens = pass();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / repeat;
  std::cout << json{{"bytes", text.size()}, {"tokens", tokens}, {"seconds", seconds}}.dump()
            << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path, bench;
  int repeat = 1;
  bool by_lines = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--tokenizer") {
      path = argv[i + 1];
    } else if (flag == "--bench") {
      bench = argv[i + 1];
    } else if (flag == "--lines") {
      by_lines = std::string(argv[i + 1]) != "0";
    } else if (flag == "--repeat") {
      repeat = std::max(1, std::atoi(argv[i + 1]));
    } else {
      std::fprintf(stderr, "radix_tokenize: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (path.empty()) {
    std::fprintf(stderr, "usage: radix_tokenize --tokenizer PATH [--bench FILE [--repeat N]]\n");
    return 2;
  }
  auto tok = radixserve::tokenizer::LoadTokenizer(path);
  if (!tok.ok()) {
    std::fprintf(stderr, "radix_tokenize: %s\n", tok.status().message().c_str());
    return 1;
  }
  if (!bench.empty()) return Bench(**tok, bench, repeat, by_lines);
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    json reply;
    try {
      reply = Handle(**tok, json::parse(line));
    } catch (const std::exception& e) {
      reply = {{"error", e.what()}};
    }
    std::cout << reply.dump(-1, ' ', false, json::error_handler_t::replace) << '\n' << std::flush;
  }
  return 0;
}
