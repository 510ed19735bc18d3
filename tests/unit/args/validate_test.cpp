#include "args/validate.h"

#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "args/arg_parser.h"
#include "args/arg_table.h"

namespace radixserve::args {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

struct Resolved {
  Status status;
  ServerArgs args;
  std::vector<std::string> warnings;
};

Resolved Resolve(std::vector<std::string> words, uint64_t memory = 24 * kGiB) {
  words.insert(words.begin(), {"--model-path", "/m"});
  auto parsed = ParseCommandLine(words);
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  Resolved out{Status::Ok(), parsed->args, {}};
  MachineInfo machine{
      .total_memory_bytes = memory, .available_memory_bytes = memory, .usable_cpus = 2};
  out.status = ResolveServerArgs(out.args, machine, out.warnings);
  return out;
}

TEST(Validate, DerivedDefaultsFollowSglang) {
  Resolved r = Resolve({});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.args.GetString("tokenizer-path"), "/m");
  EXPECT_EQ(r.args.GetString("served-model-name"), "/m");
  EXPECT_EQ(r.args.GetString("device"), "cpu");
  EXPECT_EQ(r.args.GetInt("page-size"), 1);
  EXPECT_EQ(r.args.GetInt("threads"), 2);
  // 24 GiB falls in SGLang's smallest bucket: 2048-token chunks.
  EXPECT_EQ(r.args.GetInt("chunked-prefill-size"), 2048);
  // Left to the engine's cpu sizing rule.
  EXPECT_TRUE(r.args.IsNull("mem-fraction-static"));
  EXPECT_FALSE(r.args.IsNull("random-seed"));
}

TEST(Validate, MemoryBuckets) {
  EXPECT_EQ(Resolve({}, 80 * kGiB).args.GetInt("chunked-prefill-size"), 8192);
  EXPECT_EQ(Resolve({}, 200 * kGiB).args.GetInt("chunked-prefill-size"), 16384);
  EXPECT_EQ(Resolve({}, 0).args.GetInt("chunked-prefill-size"), 4096);
}

TEST(Validate, IncompatibleCombinationsAreRejected) {
  struct Case {
    std::vector<std::string> words;
    std::string named;
  };
  const std::vector<Case> cases = {
      {{"--enable-hierarchical-cache", "--disable-radix-cache"}, "--enable-hierarchical-cache"},
      {{"--page-size", "16", "--chunked-prefill-size", "100"}, "--chunked-prefill-size"},
      {{"--device", "cuda"}, "--device"},
      {{"--mem-fraction-static", "1.0"}, "--mem-fraction-static"},
      {{"--max-queued-requests", "0"}, "--max-queued-requests"},
      {{"--schedule-conservativeness", "-0.5"}, "--schedule-conservativeness"},
      {{"--revision", "main"}, "--revision"},
      {{"--prompt-tokens-buckets", "tse", "1", "1", "3"}, "--prompt-tokens-buckets"},
      {{"--enable-priority-scheduling", "--schedule-policy", "lpm"},
       "--enable-priority-scheduling"},
      {{"--pp-size", "2", "--enable-mixed-chunk"}, "--pp-size"},
  };
  for (const Case& c : cases) {
    Resolved r = Resolve(c.words);
    ASSERT_FALSE(r.status.ok()) << c.named;
    EXPECT_EQ(r.status.message().rfind("argument " + c.named, 0), 0u) << r.status.message();
  }
}

TEST(Validate, AdjustmentsAndWarnings) {
  Resolved r = Resolve({"--dp-size", "2", "--tp-size", "2", "--enable-dp-attention",
                        "--speculative-algorithm", "NGRAM", "--enable-mixed-chunk",
                        "--enable-triton-kernel-moe", "--disable-cuda-graph"});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_FALSE(r.args.GetBool("enable-mixed-chunk"));
  EXPECT_EQ(r.args.GetInt("chunked-prefill-size"), 1024);
  EXPECT_DOUBLE_EQ(r.args.GetFloat("schedule-conservativeness"), 0.3);
  EXPECT_EQ(r.args.GetString("moe-runner-backend"), "triton_kernel");
  int cuda_graph_warnings = 0;
  for (const std::string& w : r.warnings)
    cuda_graph_warnings += w.find("--disable-cuda-graph") == 0;
  EXPECT_EQ(cuda_graph_warnings, 1);
}

TEST(Validate, MoeRunnerBackendLogsWhatItMapsTo) {
  Resolved r = Resolve({"--moe-runner-backend", "flashinfer_cutlass"});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  int lines = 0;
  for (const std::string& w : r.warnings) {
    lines += w.find(
                 "--moe-runner-backend flashinfer_cutlass maps to radixserve's CPU expert "
                 "GEMM") == 0;
  }
  EXPECT_EQ(lines, 1);
  Resolved plain = Resolve({"--moe-runner-backend", "auto"});
  for (const std::string& w : plain.warnings) {
    EXPECT_EQ(w.find("--moe-runner-backend"), std::string::npos);
  }
}

TEST(Validate, EagleHeadsAreRefusedAndNextnDraftsAChain) {
  for (const char* algorithm : {"EAGLE", "EAGLE3"}) {
    Resolved r = Resolve({"--speculative-algorithm", algorithm});
    EXPECT_FALSE(r.status.ok()) << algorithm;
    EXPECT_NE(r.status.message().find("--speculative-algorithm"), std::string::npos);
  }
  Resolved standalone = Resolve({"--speculative-algorithm", "STANDALONE"});
  EXPECT_NE(standalone.status.message().find("--speculative-draft-model-path"), std::string::npos);
  // NEXTN: the checkpoint's own block drafts a chain of SGLang's default 3 steps.
  Resolved nextn = Resolve({"--speculative-algorithm", "NEXTN"});
  ASSERT_TRUE(nextn.status.ok()) << nextn.status.message();
  EXPECT_EQ(nextn.args.GetString(key::kSpeculativeAlgorithm), "NEXTN");
  EXPECT_EQ(nextn.args.GetInt(key::kSpeculativeNumSteps), 3);
  EXPECT_EQ(nextn.args.GetInt(key::kSpeculativeNumDraftTokens), 4);
  Resolved separate = Resolve(
      {"--speculative-algorithm", "NEXTN", "--speculative-draft-model-path", "/elsewhere/nextn"});
  EXPECT_NE(separate.status.message().find("--speculative-draft-model-path"), std::string::npos);
  Resolved tree = Resolve({"--speculative-algorithm", "NEXTN", "--speculative-eagle-topk", "4"});
  EXPECT_NE(tree.status.message().find("--speculative-eagle-topk"), std::string::npos);
  // LightLLM's --mtp_mode and RTP-LLM's --sp-type mtp are NEXTN.
  Resolved lightllm = Resolve({"--mtp_mode", "deepseekv3", "--mtp_step", "2"});
  ASSERT_TRUE(lightllm.status.ok()) << lightllm.status.message();
  EXPECT_EQ(lightllm.args.GetString(key::kSpeculativeAlgorithm), "NEXTN");
  EXPECT_EQ(lightllm.args.GetInt(key::kSpeculativeNumSteps), 2);
  Resolved rtp = Resolve({"--sp-type", "mtp", "--gen-num-per-cycle", "5"});
  ASSERT_TRUE(rtp.status.ok()) << rtp.status.message();
  EXPECT_EQ(rtp.args.GetString(key::kSpeculativeAlgorithm), "NEXTN");
  EXPECT_EQ(rtp.args.GetInt(key::kSpeculativeNumSteps), 5);
  // Tree drafts: the breadths must be ordered and positive.
  EXPECT_TRUE(Resolve({"--speculative-algorithm", "NGRAM", "--speculative-ngram-min-bfs-breadth",
                       "2", "--speculative-ngram-max-bfs-breadth", "4"})
                  .status.ok());
  Resolved zero =
      Resolve({"--speculative-algorithm", "NGRAM", "--speculative-ngram-min-bfs-breadth", "0"});
  EXPECT_NE(zero.status.message().find("--speculative-ngram-min-bfs-breadth"), std::string::npos);
  Resolved inverted =
      Resolve({"--speculative-algorithm", "NGRAM", "--speculative-ngram-min-bfs-breadth", "5",
               "--speculative-ngram-max-bfs-breadth", "3"});
  EXPECT_NE(inverted.status.message().find("--speculative-ngram-max-bfs-breadth"),
            std::string::npos);
  EXPECT_TRUE(Resolve({"--speculative-algorithm", "NGRAM"}).status.ok());
}

TEST(Validate, PartialArgumentsWarnOnValuesThatDoNotApply) {
  auto count = [](const Resolved& r, std::string_view prefix) {
    int n = 0;
    for (const std::string& w : r.warnings) n += w.rfind(prefix, 0) == 0;
    return n;
  };
  // Tensor and pipeline parallelism apply (src/main/tensor_parallel.h): no warning.
  Resolved r = Resolve({"--pp-size", "2", "--pp-max-micro-batch-size", "4"});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(count(r, "--pp-size"), 0);
  EXPECT_EQ(count(r, "--max-micro-batch-size"), 0);
  Resolved tp = Resolve({"--tp", "2", "--nnodes", "2", "--node-rank", "1", "--pp-size", "1",
                         "--dist-init-addr", "10.0.0.1:29500"});
  ASSERT_TRUE(tp.status.ok()) << tp.status.message();
  EXPECT_EQ(count(tp, "--tp-size"), 0);
  EXPECT_EQ(count(tp, "--nnodes"), 0);
  EXPECT_EQ(count(tp, "--node-rank"), 0);
  EXPECT_EQ(count(tp, "--pp-size"), 0);  // 1 applies
  Resolved lightllm = Resolve({"--run_mode", "prefill", "--load_way", "HF"});
  ASSERT_TRUE(lightllm.status.ok()) << lightllm.status.message();
  EXPECT_EQ(count(lightllm, "--run-mode prefill does not apply"), 1);
  EXPECT_EQ(count(lightllm, "--load-way"), 0);
}

TEST(Validate, TensorParallelLayouts) {
  const auto refused = [](std::vector<std::string> argv, std::string_view named) {
    Resolved r = Resolve(std::move(argv));
    EXPECT_FALSE(r.status.ok()) << named;
    EXPECT_EQ(r.status.message().rfind("argument " + std::string(named) + ":", 0), 0u)
        << r.status.message();
  };
  refused({"--tp-size", "2", "--nnodes", "2"}, "--dist-init-addr");
  refused({"--tp-size", "2", "--nnodes", "2", "--node-rank", "2", "--dist-init-addr", "h:1"},
          "--node-rank");
  refused({"--tp-size", "2", "--dp-size", "2"}, "--dp-size");
  refused({"--pp-size", "2", "--dp-size", "2"}, "--dp-size");
  refused({"--pp-size", "2", "--enable-hierarchical-cache"}, "--enable-hierarchical-cache");
  refused({"--pp-size", "2", "--max-micro-batch-size", "0"}, "--max-micro-batch-size");
  refused({"--tp-size", "2", "--pp-size", "2", "--nnodes", "3", "--dist-init-addr", "h:1"},
          "--nnodes");
  refused({"--tp-size", "2", "--lora-paths", "a=/x"}, "--enable-lora");
  refused({"--tp-size", "2", "--enable-memory-saver"}, "--enable-memory-saver");
  refused({"--tp-size", "2", "--dist-timeout", "0"}, "--dist-timeout");
  // DP attention: the replicas take the TP ranks, each a whole model.
  Resolved dp = Resolve({"--tp-size", "2", "--dp-size", "2", "--enable-dp-attention"});
  ASSERT_TRUE(dp.status.ok()) << dp.status.message();
  EXPECT_EQ(ModelSplitRanks(dp.args), 1);
  Resolved tp = Resolve({"--tp-size", "4"});
  ASSERT_TRUE(tp.status.ok()) << tp.status.message();
  EXPECT_EQ(ModelSplitRanks(tp.args), 4);
  // Stages compose with tensor parallelism; as in SGLang the overlap schedule goes off.
  Resolved both =
      Resolve({"--tp-size", "2", "--pp-size", "2", "--nnodes", "2", "--dist-init-addr", "h:1"});
  ASSERT_TRUE(both.status.ok()) << both.status.message();
  EXPECT_TRUE(both.args.GetBool("disable-overlap-schedule"));
}

TEST(Validate, GgufModelPathSetsTheLoadFormat) {
  Resolved r = Resolve({"--model-path", std::string(RADIX_SHARED_DIR) +
                                            "/models/stories260K/gguf/stories260K.gguf"});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.args.GetString("load-format"), "gguf");
  EXPECT_EQ(r.args.GetString("quantization"), "gguf");
}

}  // namespace
}  // namespace radixserve::args

namespace radixserve::args {
namespace {

// A command-line value of `spec`'s type other than its default (a choice when it has choices).
std::vector<std::string> NonDefaultWords(const ArgSpec& spec) {
  const std::string flag = "--" + std::string(spec.name);
  const nlohmann::json def = nlohmann::json::parse(spec.default_value);
  if (!spec.choices.empty()) {
    const std::string spelled = def.is_string() ? def.get<std::string>() : def.dump();
    for (std::string_view choice : spec.choices) {
      if (spelled != choice) return {flag, std::string(choice)};
    }
  }
  switch (spec.type) {
    case ArgType::kFlag:
      return {flag};
    case ArgType::kBool:
      return {flag, def.is_boolean() && def.get<bool>() ? "false" : "true"};
    case ArgType::kInt:
      return {flag, std::to_string(def.is_number_integer() ? def.get<int64_t>() + 1 : 1)};
    case ArgType::kFloat:
      return {flag, def.is_number() ? fmt::format("{}", def.get<double>() + 0.25) : "0.5"};
    case ArgType::kIntList:
      return {flag, "3"};
    case ArgType::kFloatList:
      return {flag, "0.5"};
    case ArgType::kStringList:
      return {flag, "x"};
    case ArgType::kJson:
      return {flag, R"({"k": 1})"};
    case ArgType::kString:
      break;
  }
  return {flag, def.is_string() && def.get<std::string>() == "x" ? "y" : "x"};
}

// Every argument documented "no" (no effect on cpu) is accepted with exactly one warning naming
// it when set to a value other than its default, or, where its note says so, refused at startup
// naming it: none is silently ignored.
TEST(Validate, EveryArgumentWithoutAnEffectWarnsOrIsRefused) {
  int warned = 0;
  for (const ArgSpec& spec : AllArgs()) {
    if (spec.cpu != Support::kNo || spec.name == "model-path") continue;
    const std::vector<std::string> words = NonDefaultWords(spec);
    auto parsed = ParseCommandLine([&] {
      std::vector<std::string> all = {"--model-path", "/m"};
      all.insert(all.end(), words.begin(), words.end());
      return all;
    }());
    const std::string flag = "--" + std::string(spec.name);
    if (!parsed.ok()) {
      EXPECT_NE(parsed.status().message().find(spec.name), std::string::npos)
          << flag << ": " << parsed.status().message();
      continue;
    }
    ServerArgs args = parsed->args;
    std::vector<std::string> warnings;
    MachineInfo machine{
        .total_memory_bytes = 24 * kGiB, .available_memory_bytes = 24 * kGiB, .usable_cpus = 2};
    Status status = ResolveServerArgs(args, machine, warnings);
    if (!status.ok()) {
      EXPECT_NE(status.message().find(spec.name), std::string::npos)
          << flag << " refused without naming it: " << status.message();
      EXPECT_NE(spec.cpu_note.find("efused"), std::string_view::npos)
          << flag << " is refused at startup but its note does not say so: " << spec.cpu_note;
      continue;
    }
    int naming = 0;  // (a deprecated spelling also gets its notice)
    for (const std::string& warning : warnings) {
      if (warning.find(flag + " ") != std::string::npos &&
          warning.find("has no effect") != std::string::npos) {
        ++naming;
      }
    }
    EXPECT_EQ(naming, 1) << flag << " " << (words.size() > 1 ? words[1] : "")
                         << " logged no (or several) warnings";
    ++warned;
  }
  EXPECT_GT(warned, 200);
}

}  // namespace
}  // namespace radixserve::args
