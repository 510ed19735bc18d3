#include "args/validate.h"

#include <cmath>
#include <fstream>
#include <random>
#include <string_view>

#include <fmt/format.h>

#include "args/arg_table.h"

namespace radixserve::args {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

Status Invalid(std::string_view arg, const std::string& message) {
  return InvalidArgument(fmt::format("argument --{}: {}", arg, message));
}

// SGLang's deprecated MoE switches and the value each one stands for.
struct DeprecatedSwitch {
  std::string_view flag;
  std::string_view target;
  std::string_view value;
};
constexpr DeprecatedSwitch kDeprecatedSwitches[] = {
    {"enable-deepep-moe", "moe-a2a-backend", "deepep"},
    {"enable-triton-kernel-moe", "moe-runner-backend", "triton_kernel"},
    {"enable-flashinfer-cutlass-moe", "moe-runner-backend", "flashinfer_cutlass"},
    {"enable-flashinfer-trtllm-moe", "moe-runner-backend", "flashinfer_trtllm"},
    {"enable-flashinfer-mxfp4-moe", "moe-runner-backend", "flashinfer_mxfp4"},
    {"enable-flashinfer-cutedsl-moe", "moe-runner-backend", "flashinfer_cutedsl"},
};

bool IsGgufFile(const std::string& path) {
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".gguf") == 0) return true;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::string_view(magic, 4) == "GGUF";
}

void MapDeprecated(ServerArgs& args, std::vector<std::string>& warnings) {
  if (FindArg("enable-ep-moe") && args.GetBool("enable-ep-moe")) {
    args.Set("ep-size", args.Get("tp-size"));
    warnings.push_back("--enable-ep-moe is deprecated; --ep-size is set to --tp-size instead");
  }
  for (const DeprecatedSwitch& item : kDeprecatedSwitches) {
    if (!FindArg(item.flag) || !args.GetBool(item.flag)) continue;
    args.Set(item.target, std::string(item.value));
    warnings.push_back(fmt::format("--{} is deprecated; use --{} {} instead", item.flag,
                                   item.target, item.value));
  }
}

// Speculative decoding: only NGRAM is implemented, with chain drafts.
Status CheckNgramArgs(const ServerArgs& args) {
  const std::string algorithm = args.GetString("speculative-algorithm");
  if (algorithm != "NGRAM") {
    return Invalid("speculative-algorithm",
                   fmt::format("{} is not implemented (it needs a draft model or trained draft "
                               "heads); only NGRAM is available",
                               algorithm));
  }
  for (const char* breadth :
       {"speculative-ngram-min-bfs-breadth", "speculative-ngram-max-bfs-breadth"}) {
    if (args.IsExplicit(breadth)) {
      return Invalid(breadth, "NGRAM drafts a single chain; tree drafts (BFS breadth) are not "
                              "implemented");
    }
  }
  if (!args.IsNull("speculative-num-draft-tokens") &&
      args.GetInt("speculative-num-draft-tokens") < 2) {
    return Invalid("speculative-num-draft-tokens",
                   "must be at least 2 (the last sampled token and one draft)");
  }
  const int64_t min_window = args.GetInt("speculative-ngram-min-match-window-size");
  if (min_window < 1) return Invalid("speculative-ngram-min-match-window-size", "must be >= 1");
  if (args.GetInt("speculative-ngram-max-match-window-size") < min_window) {
    return Invalid("speculative-ngram-max-match-window-size",
                   "must be >= --speculative-ngram-min-match-window-size");
  }
  if (args.GetInt("speculative-ngram-branch-length") < 2) {
    return Invalid("speculative-ngram-branch-length", "must be at least 2");
  }
  if (args.GetInt("speculative-ngram-capacity") < 1) {
    return Invalid("speculative-ngram-capacity", "must be at least 1");
  }
  return Status::Ok();
}

// Device-only arguments: accepted, with one warning each when set to a non-default value.
void WarnInapplicable(const ServerArgs& args, std::vector<std::string>& warnings) {
  for (const ArgSpec& spec : AllArgs()) {
    if (spec.cpu != Support::kNo || !args.IsExplicit(spec.name)) continue;
    if (args.Get(spec.name) == nlohmann::json::parse(spec.default_value)) continue;
    warnings.push_back(fmt::format("--{} has no effect on device cpu: {}", spec.name,
                                   spec.cpu_note.empty() ? "not applicable" : spec.cpu_note));
  }
}

// Partially supported arguments set to a value that does not apply on cpu: one warning each.
void WarnInapplicableValues(const ServerArgs& args, std::vector<std::string>& warnings) {
  for (const ArgSpec& spec : AllArgs()) {
    if (spec.cpu != Support::kPartial || spec.cpu_values.empty()) continue;
    if (!args.IsExplicit(spec.name) || args.IsNull(spec.name)) continue;
    const nlohmann::json& value = args.Get(spec.name);
    const std::string spelled = value.is_string() ? value.get<std::string>() : value.dump();
    bool applies = false;
    for (std::string_view allowed : spec.cpu_values) applies = applies || allowed == spelled;
    if (applies) continue;
    warnings.push_back(fmt::format("--{} {} does not apply on device cpu and is ignored: {}",
                                   spec.name, spelled, spec.cpu_note));
  }
}

// Every --moe-runner-backend value runs on the one CPU expert GEMM: one line saying so.
void WarnMoeRunnerBackend(const ServerArgs& args, std::vector<std::string>& warnings) {
  const std::string backend = args.GetString("moe-runner-backend");
  if (backend == "auto") return;
  warnings.push_back(fmt::format(
      "--moe-runner-backend {} maps to radixserve's CPU expert GEMM (model/moe_ffn.h: the step's "
      "tokens grouped by expert, one matmul per active expert and projection), as auto does",
      backend));
}

// SGLang sizes the activation reserve and the default chunk from device memory; on cpu the
// device memory is the RAM this process may use.
void DeriveMemoryDefaults(ServerArgs& args, const MachineInfo& machine) {
  const double mem_mb = static_cast<double>(machine.total_memory_bytes) / kMiB;
  const bool known = machine.total_memory_bytes != 0;
  // mem_fraction_static stays unset unless given: SGLang derives it from GPU memory minus an
  // activation reserve, but on cpu the KV pool shares RAM with every other process, so the
  // engine applies the cpu rule of kv/memory_sizing.h (a quarter of the available memory).
  if (args.IsNull("chunked-prefill-size")) {
    int64_t chunk = 4096;
    if (known) chunk = mem_mb < 35 * 1024 ? 2048 : mem_mb < 160 * 1024 ? 8192 : 16384;
    args.Set("chunked-prefill-size", chunk);
  }
}

Status CheckBuckets(const ServerArgs& args, std::string_view name) {
  const nlohmann::json& rule = args.Get(name);
  if (rule.is_null() || rule.empty()) return Status::Ok();
  std::vector<std::string> words;
  for (const auto& item : rule) words.push_back(item.is_string() ? item.get<std::string>() : item.dump());
  auto number = [](const std::string& word, double& out) {
    char* end = nullptr;
    out = std::strtod(word.c_str(), &end);
    return !word.empty() && end == word.c_str() + word.size();
  };
  const std::string& kind = words[0];
  if (kind == "default") {
    if (words.size() != 1) return Invalid(name, "the 'default' rule takes no values");
  } else if (kind == "tse") {
    double middle, base, count;
    if (words.size() != 4 || !number(words[1], middle) || !number(words[2], base) ||
        !number(words[3], count) || count != std::floor(count)) {
      return Invalid(name, "the 'tse' rule is: tse <middle> <base> <count>");
    }
    if (base <= 1) return Invalid(name, "tse base must be greater than 1");
    if (count <= 0) return Invalid(name, "tse count must be positive");
    if (middle <= 0) return Invalid(name, "tse middle must be positive");
  } else if (kind == "customer") {
    if (words.size() < 2) return Invalid(name, "the 'customer' rule needs at least one bucket");
    std::vector<double> values;
    for (size_t i = 1; i < words.size(); ++i) {
      double value;
      if (!number(words[i], value)) return Invalid(name, "customer buckets must be numbers");
      if (value < 0) return Invalid(name, "customer buckets must be non-negative");
      for (double seen : values) {
        if (seen == value) return Invalid(name, "customer buckets must not repeat");
      }
      values.push_back(value);
    }
  } else {
    return Invalid(name, fmt::format("unknown rule '{}' (choose from 'tse', 'default', "
                                     "'customer')", kind));
  }
  return Status::Ok();
}

Status CheckRanges(const ServerArgs& args) {
  struct MinRule {
    std::string_view name;
    int64_t min;
  };
  // Integer arguments that must be at least `min` when set.
  constexpr MinRule kMinimums[] = {
      {"port", 1},          {"tp-size", 1},          {"pp-size", 1},
      {"dp-size", 1},       {"nnodes", 1},           {"page-size", 1},
      {"stream-interval", 1}, {"max-queued-requests", 1}, {"max-running-requests", 1},
      {"max-total-tokens", 1}, {"max-prefill-tokens", 1}, {"tokenizer-worker-num", 1},
      {"context-length", 1}, {"base-gpu-id", 0},     {"gpu-id-step", 1},
      {"decode-log-interval", 1}, {"num-continuous-decode-steps", 1},
      {"max-loras-per-batch", 1}, {"threads", 1}, {"max-n", 1},
      {"max-requests-per-call", 1}, {"max-top-logprobs", 0},
      {"max-request-body-mb", 1}, {"max-buffered-body-mb", 1},
  };
  for (const MinRule& rule : kMinimums) {
    if (!FindArg(rule.name)) continue;
    auto value = args.GetOptionalInt(rule.name);
    if (value && *value < rule.min) {
      return Invalid(rule.name, fmt::format("must be >= {}, got {}", rule.min, *value));
    }
  }
  if (args.GetInt("port") > 65535) return Invalid("port", "must be <= 65535");
  if (args.GetInt("max-request-body-mb") > args.GetInt("max-buffered-body-mb")) {
    return Invalid("max-request-body-mb",
                   fmt::format("must be <= --max-buffered-body-mb ({})",
                               args.GetInt("max-buffered-body-mb")));
  }
  if (args.GetInt("max-buffered-body-mb") > (int64_t{1} << 30)) {
    return Invalid("max-buffered-body-mb", "must be <= 1073741824");
  }
  if (args.GetFloat("shutdown-grace-period") < 0) {
    return Invalid("shutdown-grace-period", "must be >= 0");
  }
  if (!args.IsNull("mem-fraction-static")) {
    double fraction = args.GetFloat("mem-fraction-static");
    if (!(fraction > 0.0 && fraction < 1.0)) {
      return Invalid("mem-fraction-static", fmt::format("must be in (0, 1), got {}", fraction));
    }
  }
  if (args.GetFloat("schedule-conservativeness") < 0) {
    return Invalid("schedule-conservativeness", "must be >= 0");
  }
  if (args.GetFloat("watchdog-timeout") <= 0) return Invalid("watchdog-timeout", "must be > 0");
  if (args.GetString("served-model-name").find(':') != std::string::npos &&
      args.IsExplicit("served-model-name")) {
    return Invalid("served-model-name", "must not contain ':'");
  }
  return Status::Ok();
}

Status CheckCombinations(ServerArgs& args, std::vector<std::string>& warnings) {
  if (args.GetBool("enable-hierarchical-cache") && args.GetBool("disable-radix-cache")) {
    return Invalid("enable-hierarchical-cache",
                   "cannot be combined with --disable-radix-cache (the hierarchical cache "
                   "extends the radix cache)");
  }
  if (FindArg("enable-dynamic-batch-tokenizer") && args.GetBool("enable-tokenizer-batch-encode") &&
      args.GetBool("enable-dynamic-batch-tokenizer")) {
    return Invalid("enable-tokenizer-batch-encode",
                   "cannot be combined with --enable-dynamic-batch-tokenizer");
  }
  if (args.GetBool("skip-tokenizer-init")) {
    args.Set("tokenizer-worker-num", 1);
    if (args.GetBool("enable-tokenizer-batch-encode")) {
      args.Set("enable-tokenizer-batch-encode", false);
      warnings.push_back("--enable-tokenizer-batch-encode is turned off by --skip-tokenizer-init");
    }
  }
  if (FindArg("export-metrics-to-file") && args.GetBool("export-metrics-to-file") &&
      args.IsNull("export-metrics-to-file-dir")) {
    return Invalid("export-metrics-to-file", "requires --export-metrics-to-file-dir");
  }
  if (FindArg("enable-priority-scheduling") && args.GetBool("enable-priority-scheduling")) {
    std::string policy = args.GetString("schedule-policy");
    if (policy != "fcfs" && policy != "lof") {
      return Invalid("enable-priority-scheduling",
                     fmt::format("requires --schedule-policy fcfs or lof, got '{}'", policy));
    }
  }
  if (FindArg("multi-item-scoring-delimiter") && !args.IsNull("multi-item-scoring-delimiter") &&
      (!args.GetBool("disable-radix-cache") || args.GetInt("chunked-prefill-size") != -1)) {
    return Invalid("multi-item-scoring-delimiter",
                   "requires --disable-radix-cache and --chunked-prefill-size -1");
  }
  if (!args.IsNull("quantization-param-path")) {
    if (args.GetString("kv-cache-dtype") != "fp8_e4m3") {
      return Invalid("quantization-param-path",
                     "holds FP8 E4M3 KV-cache scaling factors; it requires --kv-cache-dtype "
                     "fp8_e4m3");
    }
    if (args.GetInt("tp-size") > 1) {
      return Invalid("quantization-param-path", "is supported with --tp-size 1 only");
    }
  }
  const int64_t page_size = args.GetInt("page-size");
  const int64_t chunk = args.GetInt("chunked-prefill-size");
  if (chunk > 0 && chunk % page_size != 0) {
    return Invalid("chunked-prefill-size",
                   fmt::format("{} is not divisible by --page-size {}", chunk, page_size));
  }
  if ((args.GetInt("tp-size") * args.GetInt("pp-size")) % args.GetInt("nnodes") != 0) {
    return Invalid("nnodes", "tp-size x pp-size must be divisible by the number of nodes");
  }
  if (args.GetInt("pp-size") > 1) {
    args.Set("disable-overlap-schedule", true);
    if (args.GetBool("enable-mixed-chunk") || !args.IsNull("speculative-algorithm")) {
      return Invalid("pp-size",
                     "pipeline parallelism cannot be combined with --enable-mixed-chunk or "
                     "speculative decoding");
    }
  }
  if (!args.IsNull("speculative-algorithm")) {
    if (args.GetString("speculative-algorithm") == "NEXTN") {
      args.Set("speculative-algorithm", "EAGLE");
    }
    if (Status ngram = CheckNgramArgs(args); !ngram.ok()) return ngram;
    if (args.GetBool("enable-mixed-chunk")) {
      args.Set("enable-mixed-chunk", false);
      warnings.push_back("--enable-mixed-chunk is turned off: speculative decoding needs whole "
                         "prefill batches");
    }
  }
  if (args.GetInt("dp-size") == 1 && args.GetBool("enable-dp-attention")) {
    args.Set("enable-dp-attention", false);
  }
  if (args.GetBool("enable-dp-attention")) {
    const int64_t dp = args.GetInt("dp-size");
    if (args.GetInt("tp-size") % dp != 0) {
      return Invalid("enable-dp-attention", "--tp-size must be divisible by --dp-size");
    }
    args.Set("schedule-conservativeness", args.GetFloat("schedule-conservativeness") * 0.3);
    args.Set("chunked-prefill-size", args.GetInt("chunked-prefill-size") / dp);
  }
  return Status::Ok();
}

}  // namespace

Status ResolveServerArgs(ServerArgs& args, const MachineInfo& machine,
                         std::vector<std::string>& warnings) {
  MapDeprecated(args, warnings);

  const std::string model_path = args.GetString("model-path");
  if (args.IsNull("tokenizer-path")) args.Set("tokenizer-path", model_path);
  if (args.IsNull("served-model-name")) args.Set("served-model-name", model_path);
  if (!args.IsNull("revision")) {
    return Invalid("revision",
                   "radixserve loads local files only and cannot fetch a revision from a model "
                   "hub; point --model-path at the checkout you want");
  }

  std::string device = args.IsNull("device") ? "auto" : args.GetString("device");
  if (device != "cpu" && device != "auto") {
    return Invalid("device", fmt::format("'{}' is not available: this build supports device "
                                         "'cpu' only", device));
  }
  args.Set("device", "cpu");

  if (args.IsNull("random-seed")) {
    std::random_device entropy;
    args.Set("random-seed", static_cast<int64_t>(entropy() % ((1u << 30) + 1)));
  }
  if (args.IsNull("page-size")) args.Set("page-size", 1);
  // One grammar engine serves every backend name SGLang and LightLLM accept (except none).
  if (!args.IsNull("grammar-backend")) {
    const std::string backend = args.GetString("grammar-backend");
    if (backend == "xgrammar" || backend == "outlines") {
      warnings.push_back(fmt::format(
          "--grammar-backend {}: radixserve's grammar engine is llguidance, which enforces the "
          "same json_schema, regex, ebnf and structural_tag constraints",
          backend));
    }
  }
  if (args.IsNull("grammar-backend") || args.GetString("grammar-backend") != "none") {
    args.Set("grammar-backend", "llguidance");
  }
  if (FindArg("threads") && args.IsNull("threads")) {
    args.Set("threads", static_cast<int64_t>(machine.usable_cpus));
  }

  // Kernel backends: on cpu SGLang picks intel_amx attention (torch_native without AMX) and the
  // pytorch sampler; radixserve runs its own kernels for every choice and says so once.
  if (args.IsNull("attention-backend")) args.Set("attention-backend", "torch_native");
  if (args.IsExplicit("sampling-backend") && !args.IsNull("sampling-backend") &&
      args.GetString("sampling-backend") != "pytorch") {
    warnings.push_back(fmt::format(
        "--sampling-backend {}: on device cpu every sampling backend is radixserve's own sampler",
        args.GetString("sampling-backend")));
  }
  args.Set("sampling-backend", "pytorch");

  if (!args.IsNull("tool-call-parser")) {
    std::string parser = args.GetString("tool-call-parser");
    std::string renamed = parser == "qwen25" ? "qwen" : parser == "glm45" ? "glm" : "";
    if (!renamed.empty()) {
      args.Set("tool-call-parser", renamed);
      warnings.push_back(fmt::format("--tool-call-parser {} is deprecated; using '{}'", parser,
                                     renamed));
    }
  }

  const std::string load_format = args.GetString("load-format");
  if ((load_format == "auto" || load_format == "gguf") && IsGgufFile(model_path)) {
    args.Set("load-format", "gguf");
    args.Set("quantization", "gguf");
  }

  DeriveMemoryDefaults(args, machine);
  RADIX_RETURN_IF_ERROR(CheckRanges(args));
  RADIX_RETURN_IF_ERROR(CheckCombinations(args, warnings));
  RADIX_RETURN_IF_ERROR(CheckBuckets(args, "prompt-tokens-buckets"));
  RADIX_RETURN_IF_ERROR(CheckBuckets(args, "generation-tokens-buckets"));
  WarnInapplicable(args, warnings);
  WarnInapplicableValues(args, warnings);
  WarnMoeRunnerBackend(args, warnings);
  return Status::Ok();
}

}  // namespace radixserve::args
