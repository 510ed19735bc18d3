// radix_logits: runs a model on given token ids (teacher forcing) and reports logits, for the
// oracle tests in tests/oracle/model and for debugging. Not part of the server.
//
//   radix_logits --model PATH [--load-format F] [--dtype D] [--threads N]
//                (--tokens 1,2,3 | --tokens-file FILE) [--chunk N] [--logits-out FILE]
//                [--exact-activations] [--disable-mmap]
//                [--kv-cache-dtype f32|bf16|fp16|fp8_e4m3|fp8_e5m2|int8] [--kv-scales K,V]
//                [--lora PATH] [--hidden-out FILE] [--mtp-logits-out FILE]
//   radix_logits --model PATH --dump-tensor NAME --out FILE
//   radix_logits --model PATH --rope-info [--json-model-override-args JSON]
//
// Prints one JSON object on stdout: {"architecture", "n_tokens", "n_vocab", "top1": [...]}.
// --logits-out writes float32 logits [n_tokens, n_vocab] (little-endian, row-major).
// --chunk N feeds the prompt N tokens per forward step (the rest comes from the KV prefix).
// --dump-tensor writes one weight tensor dequantized to float32. --exact-activations multiplies
// GGUF quantized weights with float32 activations instead of llama.cpp's Q8 rounding (the
// default; LoadOptions::exact_quantized_activations). --rope-info prints the model's RoPE inverse
// frequencies and attention factor ({"inv_freq": [...], "attention_factor": f}) from its config
// alone. --json-model-override-args merges JSON over the config (LoadOptions::json_override).
// --lora applies a LoRA adapter (PEFT folder or GGUF LoRA file) to every token.
// --hidden-out writes the final hidden states (after the last norm) [n_tokens, hidden].
// --mtp-logits-out loads the multi-token-prediction block (DeepSeek-V3's NextN layer) and writes
// its logits [n_tokens, n_vocab]: token q paired with the hidden state of position q - 1 (zeros
// for q = 0), fed in the same chunks as the model (CausalLM::ForwardMtp).
// --kv-cache-dtype stores the KV cache in that element type (default f32); --kv-scales gives the
// fp8 dequantization factors of every layer's K and V (default 1,1).
// Exit status 1 on any error.
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
#include "kernels/ref/dequantize.h"
#include "kernels/rope.h"
#include "model/gguf_file.h"
#include "model/model_loader.h"

namespace {

using radixserve::Status;
namespace model = radixserve::model;

int Fail(const std::string& message) {
  std::fprintf(stderr, "radix_logits: %s\n", message.c_str());
  return 1;
}

bool ParseTokens(const std::string& text, std::vector<int32_t>* out) {
  std::string token;
  std::stringstream in(text);
  while (std::getline(in, token, ',')) {
    token.erase(std::remove_if(token.begin(), token.end(), ::isspace), token.end());
    if (token.empty()) continue;
    try {
      out->push_back(static_cast<int32_t>(std::stol(token)));
    } catch (...) {
      return false;
    }
  }
  return true;
}

int DumpTensor(const model::LoadOptions& options, const std::string& name,
               const std::string& out_path) {
  auto gguf = model::GgufFile::Open(options.model_path, !options.disable_mmap);
  if (!gguf.ok()) return Fail(gguf.status().message());
  const model::GgufTensorInfo* t = gguf->FindTensor(name);
  if (t == nullptr) return Fail(options.model_path + ": missing tensor " + name);
  int64_t elements = 1;
  for (int64_t d : t->shape) elements *= d;
  std::vector<float> values(static_cast<size_t>(elements));
  radixserve::kernels::ref::Dequantize(t->format, t->data, values.data(), elements);
  std::ofstream out(out_path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(float)));
  if (!out) return Fail(out_path + ": write failed");
  nlohmann::json report{{"name", name}, {"shape", t->shape}, {"elements", elements}};
  std::cout << report.dump() << std::endl;
  return 0;
}

int RopeInfo(const model::LoadOptions& options) {
  auto config = model::LoadModelConfig(options);
  if (!config.ok()) return Fail(config.status().message());
  const model::ModelConfig& c = *config;
  std::vector<float> inv_freq = radixserve::kernels::RopeInvFreq(
      c.rope_theta, static_cast<int>(c.rotary_dim), c.rope_scaling);
  const double attention_factor = radixserve::kernels::RopeAttentionFactor(c.rope_scaling);
  nlohmann::json report{
      {"inv_freq", inv_freq}, {"attention_factor", attention_factor}, {"rotary_dim", c.rotary_dim}};
  std::cout << report.dump() << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  radixserve::InitLogging("warning");
  model::LoadOptions options;
  std::string tokens_text, tokens_file, logits_out, dump_tensor, dump_out, lora_path, hidden_out,
      mtp_out;
  int threads = 0;
  int64_t chunk = 0;
  bool rope_info = false;
  radixserve::kernels::KvType kv_type = radixserve::kernels::KvType::kF32;
  float k_scale = 1.0f, v_scale = 1.0f;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (arg == "--model")
      options.model_path = next();
    else if (arg == "--load-format")
      options.load_format = next();
    else if (arg == "--dtype")
      options.dtype = next();
    else if (arg == "--threads")
      threads = std::atoi(next().c_str());
    else if (arg == "--tokens")
      tokens_text = next();
    else if (arg == "--tokens-file")
      tokens_file = next();
    else if (arg == "--chunk")
      chunk = std::atoll(next().c_str());
    else if (arg == "--logits-out")
      logits_out = next();
    else if (arg == "--dump-tensor")
      dump_tensor = next();
    else if (arg == "--out")
      dump_out = next();
    else if (arg == "--disable-mmap")
      options.disable_mmap = true;
    else if (arg == "--rope-info")
      rope_info = true;
    else if (arg == "--json-model-override-args")
      options.json_override = next();
    else if (arg == "--hidden-out")
      hidden_out = next();
    else if (arg == "--mtp-logits-out")
      mtp_out = next();
    else if (arg == "--lora")
      lora_path = next();
    else if (arg == "--exact-activations")
      options.exact_quantized_activations = true;
    else if (arg == "--kv-cache-dtype") {
      const std::string name = next();
      using radixserve::kernels::KvType;
      const std::pair<const char*, KvType> kNames[] = {
          {"f32", KvType::kF32},          {"bf16", KvType::kBF16},        {"fp16", KvType::kF16},
          {"fp8_e4m3", KvType::kFp8E4M3}, {"fp8_e5m2", KvType::kFp8E5M2}, {"int8", KvType::kInt8}};
      bool known = false;
      for (const auto& [spelled, type] : kNames) {
        if (name == spelled) kv_type = type, known = true;
      }
      if (!known) return Fail("--kv-cache-dtype: invalid choice '" + name + "'");
    } else if (arg == "--kv-scales") {
      const std::string pair = next();
      if (std::sscanf(pair.c_str(), "%f,%f", &k_scale, &v_scale) != 2 || !(k_scale > 0.0f) ||
          !(v_scale > 0.0f)) {
        return Fail("--kv-scales: expected two positive numbers K,V, got '" + pair + "'");
      }
    } else
      return Fail("unknown argument " + arg);
  }
  if (options.model_path.empty()) return Fail("--model is required");
  options.load_mtp = !mtp_out.empty();
  if (!dump_tensor.empty()) return DumpTensor(options, dump_tensor, dump_out);
  if (rope_info) return RopeInfo(options);

  std::vector<int32_t> tokens;
  if (!tokens_file.empty()) {
    std::ifstream in(tokens_file);
    std::stringstream buffer;
    buffer << in.rdbuf();
    tokens_text = buffer.str();
  }
  if (!ParseTokens(tokens_text, &tokens) || tokens.empty()) return Fail("no valid --tokens given");

  auto loaded = model::LoadModel(options);
  if (!loaded.ok()) return Fail(loaded.status().message());
  const model::CausalLM& lm = **loaded;
  const model::ModelConfig& c = lm.config();
  std::shared_ptr<const model::LoraAdapter> lora;
  if (!lora_path.empty()) {
    auto adapter = lm.LoadLora(lora_path, {});
    if (!adapter.ok()) return Fail(adapter.status().message());
    lora = adapter.value();
  }
  const int64_t n = static_cast<int64_t>(tokens.size());
  model::KvCacheBuffers kv_buffers(c.num_layers, n, c.num_kv_heads, c.head_dim, kv_type);
  model::KvCacheView kv = kv_buffers.view();
  for (auto& b : kv.k) b.scale = k_scale;
  for (auto& b : kv.v) b.scale = v_scale;
  std::vector<int32_t> slots(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    slots[static_cast<size_t>(i)] = static_cast<int32_t>(n - 1 - i);  // any permutation
  radixserve::ThreadPool pool(threads);
  std::vector<float> logits(static_cast<size_t>(n * c.vocab_size));
  const bool want_hidden = !hidden_out.empty() || !mtp_out.empty();
  const int64_t H = c.hidden_size;
  std::vector<float> hidden(want_hidden ? static_cast<size_t>(n * H) : 0);
  model::KvCacheBuffers mtp_kv_buffers(mtp_out.empty() ? 0 : 1, n, c.num_kv_heads, c.head_dim,
                                       kv_type);
  std::vector<float> mtp_logits(mtp_out.empty() ? 0 : static_cast<size_t>(n * c.vocab_size));
  std::vector<float> mtp_in;
  if (chunk <= 0) chunk = n;
  for (int64_t start = 0; start < n; start += chunk) {
    const int64_t len = std::min(chunk, n - start);
    model::ForwardBatch batch;
    batch.token_ids.assign(tokens.begin() + start, tokens.begin() + start + len);
    for (int64_t i = 0; i < len; ++i) {
      batch.positions.push_back(start + i);
      batch.logit_indices.push_back(i);
    }
    batch.sequences.push_back(
        {start, len, std::span<const int32_t>(slots.data(), static_cast<size_t>(start + len)),
         lora.get()});
    if (want_hidden) batch.hidden_indices = batch.logit_indices;
    Status status =
        want_hidden ? lm.ForwardWithHidden(batch, kv, &pool, logits.data() + start * c.vocab_size,
                                           hidden.data() + start * H)
                    : lm.Forward(batch, kv, &pool, logits.data() + start * c.vocab_size);
    if (!status.ok()) return Fail(status.message());
    if (mtp_out.empty()) continue;
    mtp_in.assign(static_cast<size_t>(len * H), 0.0f);
    const int64_t from = start == 0 ? 1 : 0;  // position 0 pairs with zeros
    std::copy(hidden.begin() + (start + from - 1) * H, hidden.begin() + (start + len - 1) * H,
              mtp_in.begin() + from * H);
    status = lm.ForwardMtp(batch, mtp_in.data(), mtp_kv_buffers.view(), &pool,
                           mtp_logits.data() + start * c.vocab_size, nullptr);
    if (!status.ok()) return Fail(status.message());
  }
  nlohmann::json report;
  report["architecture"] = c.architecture;
  report["n_tokens"] = n;
  report["n_vocab"] = c.vocab_size;
  report["weight_bytes"] = lm.weight_bytes();
  std::vector<int64_t> top1;
  for (int64_t t = 0; t < n; ++t) {
    const float* row = logits.data() + t * c.vocab_size;
    top1.push_back(std::max_element(row, row + c.vocab_size) - row);
  }
  report["top1"] = top1;
  const auto write = [](const std::string& path, const std::vector<float>& values) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(values.data()),
              static_cast<std::streamsize>(values.size() * sizeof(float)));
    return static_cast<bool>(out);
  };
  if (!logits_out.empty() && !write(logits_out, logits)) return Fail(logits_out + ": write failed");
  if (!hidden_out.empty() && !write(hidden_out, hidden)) return Fail(hidden_out + ": write failed");
  if (!mtp_out.empty() && !write(mtp_out, mtp_logits)) return Fail(mtp_out + ": write failed");
  report["n_hidden"] = H;
  std::cout << report.dump() << std::endl;
  return 0;
}
