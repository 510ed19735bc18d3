#include "metrics/registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "exposition_parser.h"

namespace radixserve::metrics {
namespace {

using testing::Parse;
using testing::ParsedExposition;
using testing::ParsedSample;

TEST(RegistryTest, ExposesHelpTypeAndSamplesInRegistrationOrder) {
  Registry registry;
  auto& requests = registry.AddCounter("app:requests_total", "Requests \"served\".\nSecond line",
                                       {"model_name", "code"});
  auto& up = registry.AddGauge("app:up", "Unlabelled gauge.");
  auto& latency =
      registry.AddHistogram("app:latency_seconds", "Latency.", {"model_name"}, {0.1, 1, 10});
  requests.Labels({"m\"1\\x\ny", "200"}).Inc(3);
  requests.Labels({"m2", "500"}).Inc();
  requests.Labels({"m\"1\\x\ny", "200"}).Inc(2);
  up.Labels({}).Set(1);
  for (double v : {0.05, 0.1, 0.5, 20.0}) latency.Labels({"m"}).Observe(v);

  const ParsedExposition parsed = Parse(registry.Expose());
  ASSERT_EQ(parsed.error, "");
  ASSERT_EQ(parsed.families.size(), 3u);
  EXPECT_EQ(parsed.families[0].name, "app:requests_total");
  EXPECT_EQ(parsed.families[0].type, "counter");
  EXPECT_EQ(parsed.families[0].help, "Requests \"served\".\nSecond line");
  EXPECT_EQ(parsed.families[1].name, "app:up");
  EXPECT_EQ(parsed.families[1].type, "gauge");
  EXPECT_EQ(parsed.families[2].type, "histogram");

  const auto& counter_samples = parsed.families[0].samples;
  ASSERT_EQ(counter_samples.size(), 2u);  // one per label set, in creation order
  EXPECT_EQ(counter_samples[0].labels.at("model_name"), "m\"1\\x\ny");
  EXPECT_EQ(counter_samples[0].labels.at("code"), "200");
  EXPECT_EQ(counter_samples[0].value, 5);
  EXPECT_EQ(counter_samples[1].labels.at("model_name"), "m2");
  EXPECT_EQ(counter_samples[1].value, 1);
  // Labels print in name order, as the official client does.
  EXPECT_EQ(counter_samples[0].label_order, (std::vector<std::string>{"code", "model_name"}));

  ASSERT_EQ(parsed.families[1].samples.size(), 1u);
  EXPECT_TRUE(parsed.families[1].samples[0].labels.empty());
  EXPECT_EQ(parsed.families[1].samples[0].value, 1);

  const auto& h = parsed.families[2].samples;
  ASSERT_EQ(h.size(), 6u);  // 4 buckets, _count, _sum
  const std::vector<std::string> les = {"0.1", "1.0", "10.0", "+Inf"};
  const std::vector<double> cumulative = {2, 3, 3, 4};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(h[i].name, "app:latency_seconds_bucket");
    EXPECT_EQ(h[i].labels.at("le"), les[i]);
    EXPECT_EQ(h[i].labels.at("model_name"), "m");
    EXPECT_EQ(h[i].value, cumulative[i]);
    EXPECT_EQ(h[i].label_order, (std::vector<std::string>{"le", "model_name"}));
  }
  EXPECT_EQ(h[4].name, "app:latency_seconds_count");
  EXPECT_EQ(h[4].value, 4);
  EXPECT_EQ(h[5].name, "app:latency_seconds_sum");
  EXPECT_DOUBLE_EQ(h[5].value, 0.05 + 0.1 + 0.5 + 20.0);
}

TEST(RegistryTest, LabelledFamilyWithoutChildrenIsLeftOut) {
  Registry registry;
  registry.AddCounter("x_total", "x", {"a"});
  registry.AddGauge("y", "y");
  EXPECT_EQ(registry.Expose(), "# HELP y y\n# TYPE y gauge\ny 0.0\n");
  EXPECT_EQ(registry.Families(), (std::vector<std::pair<std::string, std::string>>{
                                     {"x_total", "counter"}, {"y", "gauge"}}));
}

TEST(RegistryTest, NegativeBucketsOmitSum) {
  Registry registry;
  registry.AddHistogram("t", "t", {}, {-1, 0, 1}).Labels({}).Observe(0.5);
  const ParsedExposition parsed = Parse(registry.Expose());
  ASSERT_EQ(parsed.error, "");
  for (const ParsedSample& s : parsed.families[0].samples) EXPECT_NE(s.name, "t_sum");
}

TEST(RegistryTest, SameChildForSameLabels) {
  Registry registry;
  auto& family = registry.AddGauge("g", "g", {"a", "b"});
  EXPECT_EQ(&family.Labels({"1", "2"}), &family.Labels({"1", "2"}));
  EXPECT_NE(&family.Labels({"1", "2"}), &family.Labels({"2", "1"}));
}

TEST(RegistryDeathTest, ProgrammerErrorsAbort) {
  Registry registry;
  registry.AddHistogram("h", "h", {}, {1});
  EXPECT_DEATH(registry.AddCounter("h", "again"), "h");
  EXPECT_DEATH(registry.AddGauge("h_count", "collides with the histogram's samples"), "h_count");
  EXPECT_DEATH(registry.AddGauge("bad-name", "x"), "bad-name");
  EXPECT_DEATH(registry.AddGauge("g", "x", {"le"}), "le");
  EXPECT_DEATH(registry.AddGauge("g2", "x", {"a", "a"}), "");
  EXPECT_DEATH(registry.AddHistogram("h2", "x", {}, {2, 1}), "h2");
  auto& family = registry.AddGauge("g3", "x", {"a"});
  EXPECT_DEATH(family.Labels({"1", "2"}), "g3");
}

TEST(RegistryTest, ScrapesWhileObservingFromManyThreads) {
  Registry registry;
  auto& tokens = registry.AddCounter("tokens_total", "t", {"model_name"});
  auto& latency = registry.AddHistogram("lat", "l", {"model_name"}, {1, 2, 3});
  constexpr int kThreads = 4;
  constexpr int kPerThread = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string model = t % 2 ? "odd" : "even";
      Counter& c = tokens.Labels({model});
      Histogram& h = latency.Labels({model});
      for (int i = 0; i < kPerThread; ++i) {
        c.Inc();
        h.Observe(i % 4);
      }
    });
  }
  for (int k = 0; k < 50; ++k) {
    const ParsedExposition parsed = Parse(registry.Expose());
    ASSERT_EQ(parsed.error, "");
  }
  for (auto& thread : threads) thread.join();
  const ParsedExposition parsed = Parse(registry.Expose());
  ASSERT_EQ(parsed.error, "");
  for (const ParsedSample& s : parsed.Find("tokens_total")->samples) {
    EXPECT_EQ(s.value, 2.0 * kPerThread);
  }
  for (const ParsedSample& s : parsed.Find("lat")->samples) {
    if (s.name == "lat_count") {
      EXPECT_EQ(s.value, 2.0 * kPerThread);
    } else if (s.name == "lat_sum") {
      EXPECT_EQ(s.value, 2.0 * (kPerThread / 4) * (0 + 1 + 2 + 3));
    } else if (s.labels.at("le") == "1.0") {
      EXPECT_EQ(s.value, 2.0 * kPerThread / 2);
    }
  }
}

}  // namespace
}  // namespace radixserve::metrics
