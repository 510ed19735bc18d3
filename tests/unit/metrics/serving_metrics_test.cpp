#include "metrics/serving_metrics.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <thread>

#include "exposition_parser.h"

namespace radixserve::metrics {
namespace {

using testing::Parse;
using testing::ParsedExposition;
using testing::ParsedFamily;
using testing::ParsedSample;

std::unique_ptr<ServingMetrics> Make(ServingMetricsOptions options) {
  auto created = ServingMetrics::Create(options);
  EXPECT_TRUE(created.ok()) << created.status().message();
  return created.ok() ? std::move(created).value() : nullptr;
}

ParsedExposition Scrape(const ServingMetrics& metrics) {
  ParsedExposition parsed = Parse(metrics.Expose());
  EXPECT_EQ(parsed.error, "");
  return parsed;
}

// The one sample of `family` whose name is `sample` (a histogram suffix or the family name) and
// whose labels include `le` when given.
double Value(const ParsedExposition& parsed, const std::string& family, const std::string& sample,
             const std::string& le = "") {
  const ParsedFamily* f = parsed.Find(family);
  EXPECT_NE(f, nullptr) << family;
  if (!f) return -1;
  for (const ParsedSample& s : f->samples) {
    if (s.name == sample && (le.empty() || s.labels.at("le") == le)) return s.value;
  }
  ADD_FAILURE() << "no sample " << sample << " le=" << le;
  return -1;
}

TEST(ServingMetricsTest, FamiliesHaveSglangNamesAndTypes) {
  auto metrics = Make({.model_name = "m", .collect_tokens_histogram = true});
  const ParsedExposition parsed = Scrape(*metrics);
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"sglang:prompt_tokens_total", "counter"},
      {"sglang:generation_tokens_total", "counter"},
      {"sglang:prompt_tokens_histogram", "histogram"},
      {"sglang:generation_tokens_histogram", "histogram"},
      {"sglang:cached_tokens_total", "counter"},
      {"sglang:num_requests_total", "counter"},
      {"sglang:num_so_requests_total", "counter"},
      {"sglang:num_aborted_requests_total", "counter"},
      {"sglang:time_to_first_token_seconds", "histogram"},
      {"sglang:inter_token_latency_seconds", "histogram"},
      {"sglang:e2e_request_latency_seconds", "histogram"},
      {"sglang:num_retractions", "histogram"},
      {"sglang:num_running_reqs", "gauge"},
      {"sglang:num_used_tokens", "gauge"},
      {"sglang:token_usage", "gauge"},
      {"sglang:gen_throughput", "gauge"},
      {"sglang:num_queue_reqs", "gauge"},
      {"sglang:num_grammar_queue_reqs", "gauge"},
      {"sglang:num_running_reqs_offline_batch", "gauge"},
      {"sglang:cache_hit_rate", "gauge"},
      {"sglang:max_total_num_tokens", "gauge"},
      {"sglang:decode_sum_seq_lens", "gauge"},
      {"sglang:new_token_ratio", "gauge"},
      {"sglang:num_retracted_reqs", "gauge"},
      {"sglang:num_paused_reqs", "gauge"},
      {"sglang:utilization", "gauge"},
      {"sglang:max_running_requests_under_SLO", "gauge"},
      {"sglang:engine_startup_time", "gauge"},
      {"sglang:engine_load_weights_time", "gauge"},
      {"sglang:is_cuda_graph", "gauge"},
      {"sglang:spec_accept_length", "gauge"},
      {"sglang:spec_accept_rate", "gauge"},
      {"sglang:swa_token_usage", "gauge"},
      {"sglang:mamba_usage", "gauge"},
      {"sglang:pending_prealloc_token_usage", "gauge"},
      {"sglang:queue_time_seconds", "histogram"},
      {"sglang:per_stage_req_latency_seconds", "histogram"},
      {"sglang:http_responses_total", "counter"},
  };
  using Types = std::map<std::string, std::string>;
  const auto families = metrics->registry().Families();
  const Types got(families.begin(), families.end()), want(expected.begin(), expected.end());
  EXPECT_EQ(got, want);
  EXPECT_EQ(families.size(), expected.size());
  // Every family is labelled and nothing was recorded: nothing is exposed yet (SGLang's
  // multiprocess registry serves no HELP/TYPE for families without samples).
  EXPECT_TRUE(parsed.families.empty()) << metrics->Expose();
}

TEST(ServingMetricsTest, TokenHistogramsOnlyWhenCollected) {
  auto metrics = Make({.model_name = "m"});
  const ParsedExposition parsed = Scrape(*metrics);
  EXPECT_EQ(parsed.Find("sglang:prompt_tokens_histogram"), nullptr);
  EXPECT_EQ(parsed.Find("sglang:generation_tokens_histogram"), nullptr);
}

TEST(ServingMetricsTest, FinishedRequestAccounting) {
  auto metrics = Make({.model_name = "smol",
                       .collect_tokens_histogram = true,
                       .prompt_tokens_buckets = {"customer", "10", "100"},
                       .generation_tokens_buckets = {"tse", "1000", "2", "8"}});
  RequestMetrics& req = metrics->Requests();
  req.ObserveFinishedRequest({.prompt_tokens = 7,
                              .generation_tokens = 20,
                              .cached_tokens = 0,
                              .e2e_latency_s = 0.3,
                              .retraction_count = 0});
  req.ObserveFinishedRequest({.prompt_tokens = 50,
                              .generation_tokens = 999,
                              .cached_tokens = 32,
                              .e2e_latency_s = 5.0,
                              .has_grammar = true,
                              .retraction_count = 2});
  req.ObserveAbortedRequest();
  const ParsedExposition p = Scrape(*metrics);
  EXPECT_EQ(Value(p, "sglang:prompt_tokens_total", "sglang:prompt_tokens_total"), 57);
  EXPECT_EQ(Value(p, "sglang:generation_tokens_total", "sglang:generation_tokens_total"), 1019);
  EXPECT_EQ(Value(p, "sglang:cached_tokens_total", "sglang:cached_tokens_total"), 32);
  EXPECT_EQ(Value(p, "sglang:num_requests_total", "sglang:num_requests_total"), 2);
  EXPECT_EQ(Value(p, "sglang:num_so_requests_total", "sglang:num_so_requests_total"), 1);
  EXPECT_EQ(Value(p, "sglang:num_aborted_requests_total", "sglang:num_aborted_requests_total"), 1);
  const std::string e2e = "sglang:e2e_request_latency_seconds";
  EXPECT_EQ(Value(p, e2e, e2e + "_bucket", "0.4"), 1);
  EXPECT_EQ(Value(p, e2e, e2e + "_bucket", "4.0"), 1);
  EXPECT_EQ(Value(p, e2e, e2e + "_bucket", "6.0"), 2);
  EXPECT_DOUBLE_EQ(Value(p, e2e, e2e + "_sum"), 5.3);
  const std::string ptok = "sglang:prompt_tokens_histogram";
  EXPECT_EQ(Value(p, ptok, ptok + "_bucket", "10.0"), 1);
  EXPECT_EQ(Value(p, ptok, ptok + "_bucket", "100.0"), 2);
  const std::string gtok = "sglang:generation_tokens_histogram";
  EXPECT_EQ(Value(p, gtok, gtok + "_bucket", "984.0"), 1);
  EXPECT_EQ(Value(p, gtok, gtok + "_bucket", "998.0"), 1);
  EXPECT_EQ(Value(p, gtok, gtok + "_bucket", "1000.0"), 2);
  const std::string retr = "sglang:num_retractions";
  EXPECT_EQ(Value(p, retr, retr + "_bucket", "0.0"), 1);
  EXPECT_EQ(Value(p, retr, retr + "_bucket", "2.0"), 2);
  for (const ParsedSample& s : p.Find("sglang:prompt_tokens_total")->samples) {
    EXPECT_EQ(s.labels, (std::map<std::string, std::string>{{"model_name", "smol"}}));
  }
}

TEST(ServingMetricsTest, CachedTokensCounterUntouchedWhenZero) {
  auto metrics = Make({.model_name = "m"});
  metrics->Requests().ObserveFinishedRequest({.prompt_tokens = 3, .generation_tokens = 1});
  const ParsedExposition p = Scrape(*metrics);
  EXPECT_EQ(p.Find("sglang:cached_tokens_total"), nullptr);
  EXPECT_EQ(p.Find("sglang:num_so_requests_total"), nullptr);
}

TEST(ServingMetricsTest, InterTokenLatencyCountsEveryToken) {
  auto metrics = Make({.model_name = "m"});
  RequestMetrics& req = metrics->Requests();
  req.ObserveInterTokenLatency(0.05, 1);  // 1 x 0.05
  req.ObserveInterTokenLatency(0.09, 3);  // 3 x 0.03
  req.ObserveInterTokenLatency(1.0, 0);   // nothing
  req.ObserveTimeToFirstToken(0.15);
  const ParsedExposition p = Scrape(*metrics);
  const std::string itl = "sglang:inter_token_latency_seconds";
  EXPECT_EQ(Value(p, itl, itl + "_bucket", "0.025"), 0);
  EXPECT_EQ(Value(p, itl, itl + "_bucket", "0.03"), 3);
  EXPECT_EQ(Value(p, itl, itl + "_bucket", "0.06"), 4);
  EXPECT_EQ(Value(p, itl, itl + "_count"), 4);
  EXPECT_DOUBLE_EQ(Value(p, itl, itl + "_sum"), 0.14);
  const std::string ttft = "sglang:time_to_first_token_seconds";
  EXPECT_EQ(Value(p, ttft, ttft + "_bucket", "0.1"), 0);
  EXPECT_EQ(Value(p, ttft, ttft + "_bucket", "0.2"), 1);
}

TEST(ServingMetricsTest, CustomBucketFlags) {
  auto metrics = Make({.model_name = "m", .bucket_time_to_first_token = std::vector<double>{1, 2}});
  metrics->Requests().ObserveTimeToFirstToken(1.5);
  const ParsedExposition p = Scrape(*metrics);
  const ParsedFamily* f = p.Find("sglang:time_to_first_token_seconds");
  std::vector<std::string> les;
  for (const ParsedSample& s : f->samples) {
    if (s.labels.count("le")) les.push_back(s.labels.at("le"));
  }
  EXPECT_EQ(les, (std::vector<std::string>{"1.0", "2.0", "+Inf"}));
}

TEST(ServingMetricsTest, BadOptionsNameTheFlag) {
  auto bad_ttft = ServingMetrics::Create({.bucket_time_to_first_token = std::vector<double>{2, 1}});
  ASSERT_FALSE(bad_ttft.ok());
  EXPECT_NE(bad_ttft.status().message().find("--bucket-time-to-first-token"), std::string::npos);
  auto bad_rule = ServingMetrics::Create(
      {.collect_tokens_histogram = true, .generation_tokens_buckets = {"tse", "1", "1", "1"}});
  ASSERT_FALSE(bad_rule.ok());
  EXPECT_NE(bad_rule.status().message().find("--generation-tokens-buckets"), std::string::npos);
  EXPECT_FALSE(ServingMetrics::Create({.allowed_customer_labels = {"model_name"}}).ok());
  EXPECT_FALSE(ServingMetrics::Create({.allowed_customer_labels = {"bad-label"}}).ok());
  // Rules are only looked at when the token histograms are collected, as in SGLang.
  EXPECT_TRUE(ServingMetrics::Create({.prompt_tokens_buckets = {"nonsense"}}).ok());
}

TEST(ServingMetricsTest, CustomerLabels) {
  auto metrics = Make({.model_name = "m", .allowed_customer_labels = {"tenant", "tier"}});
  RequestMetrics& a = metrics->Requests({{"tenant", "acme"}, {"ignored", "x"}});
  RequestMetrics& b = metrics->Requests({{"tenant", "acme"}});
  EXPECT_EQ(&a, &b);
  a.ObserveAbortedRequest();
  metrics->Requests().ObserveAbortedRequest();
  const ParsedExposition p = Scrape(*metrics);
  const auto& samples = p.Find("sglang:num_aborted_requests_total")->samples;
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].labels, (std::map<std::string, std::string>{
                                   {"model_name", "m"}, {"tenant", "acme"}, {"tier", ""}}));
  EXPECT_EQ(samples[1].labels, (std::map<std::string, std::string>{
                                   {"model_name", "m"}, {"tenant", ""}, {"tier", ""}}));
}

TEST(ServingMetricsTest, SchedulerGaugesAndLabels) {
  auto metrics = Make({.model_name = "m", .tp_rank = 0, .pp_rank = 0, .label_dp_rank = true});
  SchedulerStats stats;
  stats.num_running_reqs = 3;
  stats.num_queue_reqs = 2;
  stats.token_usage = 0.25;
  stats.cache_hit_rate = 0.5;
  stats.gen_throughput = 123.5;
  stats.max_total_num_tokens = 4096;
  metrics->Scheduler(1).LogStats(stats);
  metrics->Scheduler(1).ObserveQueueTime(0.3);
  metrics->Scheduler(1).ObservePerStageLatency("prefill_forward", 0.002);
  const ParsedExposition p = Scrape(*metrics);
  EXPECT_EQ(Value(p, "sglang:num_running_reqs", "sglang:num_running_reqs"), 3);
  EXPECT_EQ(Value(p, "sglang:num_queue_reqs", "sglang:num_queue_reqs"), 2);
  EXPECT_EQ(Value(p, "sglang:token_usage", "sglang:token_usage"), 0.25);
  EXPECT_EQ(Value(p, "sglang:cache_hit_rate", "sglang:cache_hit_rate"), 0.5);
  EXPECT_EQ(Value(p, "sglang:gen_throughput", "sglang:gen_throughput"), 123.5);
  EXPECT_EQ(Value(p, "sglang:max_total_num_tokens", "sglang:max_total_num_tokens"), 4096);
  EXPECT_EQ(Value(p, "sglang:is_cuda_graph", "sglang:is_cuda_graph"), 0);
  // Not known: not exported.
  EXPECT_EQ(p.Find("sglang:max_running_requests_under_SLO"), nullptr);
  const std::map<std::string, std::string> labels = {{"model_name", "m"},
                                                     {"engine_type", "unified"},
                                                     {"tp_rank", "0"},
                                                     {"pp_rank", "0"},
                                                     {"dp_rank", "1"}};
  EXPECT_EQ(p.Find("sglang:num_running_reqs")->samples[0].labels, labels);
  const std::string q = "sglang:queue_time_seconds";
  EXPECT_EQ(Value(p, q, q + "_bucket", "0.2"), 0);
  EXPECT_EQ(Value(p, q, q + "_bucket", "0.5"), 1);
  const ParsedFamily* stage = p.Find("sglang:per_stage_req_latency_seconds");
  ASSERT_FALSE(stage->samples.empty());
  EXPECT_EQ(stage->samples[0].labels.at("stage"), "prefill_forward");
  EXPECT_EQ(stage->samples.size(), 30u + 1 + 2);
}

TEST(ServingMetricsTest, HttpResponses) {
  auto metrics = Make({.model_name = "m"});
  metrics->CountHttpResponse("/generate", 200, "POST");
  metrics->CountHttpResponse("/generate", 200, "POST");
  metrics->CountHttpResponse("/v1/models", 401, "GET");
  const ParsedExposition p = Scrape(*metrics);
  const auto& samples = p.Find("sglang:http_responses_total")->samples;
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].labels,
            (std::map<std::string, std::string>{
                {"endpoint", "/generate"}, {"status_code", "200"}, {"method", "POST"}}));
  EXPECT_EQ(samples[0].value, 2);
  EXPECT_EQ(samples[1].labels.at("status_code"), "401");
  EXPECT_EQ(samples[1].value, 1);
}

TEST(ServingMetricsTest, ConcurrentRequestsFromManyThreads) {
  auto metrics = Make({.model_name = "m"});
  constexpr int kThreads = 4;
  constexpr int kRequests = 5000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRequests; ++i) {
        RequestMetrics& req = metrics->Requests();
        req.ObserveInterTokenLatency(0.01, 2);
        req.ObserveFinishedRequest({.prompt_tokens = 10,
                                    .generation_tokens = 2,
                                    .cached_tokens = 4,
                                    .e2e_latency_s = 1.0});
      }
    });
  }
  for (int k = 0; k < 20; ++k) Scrape(*metrics);
  for (auto& thread : threads) thread.join();
  const ParsedExposition p = Scrape(*metrics);
  const double n = kThreads * kRequests;
  EXPECT_EQ(Value(p, "sglang:prompt_tokens_total", "sglang:prompt_tokens_total"), 10 * n);
  EXPECT_EQ(Value(p, "sglang:cached_tokens_total", "sglang:cached_tokens_total"), 4 * n);
  EXPECT_EQ(Value(p, "sglang:num_requests_total", "sglang:num_requests_total"), n);
  const std::string itl = "sglang:inter_token_latency_seconds";
  EXPECT_EQ(Value(p, itl, itl + "_count"), 2 * n);
  EXPECT_EQ(Value(p, itl, itl + "_bucket", "0.006"), 2 * n);
  EXPECT_EQ(Value(p, itl, itl + "_bucket", "0.004"), 0);
}

}  // namespace
}  // namespace radixserve::metrics
