// Expected strings are what the official Python client (prometheus_client 0.26, floatToGoString
// over Python repr) prints for the same values.
#include "metrics/text_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace radixserve::metrics {
namespace {

TEST(FormatValueTest, MatchesPythonClient) {
  EXPECT_EQ(FormatValue(0.0), "0.0");
  EXPECT_EQ(FormatValue(1.0), "1.0");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(0.05), "0.05");
  EXPECT_EQ(FormatValue(2400.0), "2400.0");
  EXPECT_EQ(FormatValue(100000.0), "100000.0");
  EXPECT_EQ(FormatValue(999999.0), "999999.0");
  EXPECT_EQ(FormatValue(1000000.0), "1e+06");
  EXPECT_EQ(FormatValue(1100000.0), "1.1e+06");
  EXPECT_EQ(FormatValue(1234567.0), "1.234567e+06");
  EXPECT_EQ(FormatValue(12345678.0), "1.2345678e+07");
  EXPECT_EQ(FormatValue(123456789012.5), "1.234567890125e+011");
  EXPECT_EQ(FormatValue(1e16), "1e+16");
  EXPECT_EQ(FormatValue(1e22), "1e+22");
  EXPECT_EQ(FormatValue(1e-5), "1e-05");
  EXPECT_EQ(FormatValue(0.0001), "0.0001");
  EXPECT_EQ(FormatValue(1.5e-7), "1.5e-07");
  EXPECT_EQ(FormatValue(-2.5), "-2.5");
  EXPECT_EQ(FormatValue(-1234567.0), "-1234567.0");
  EXPECT_EQ(FormatValue(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
}

TEST(EscapeTest, LabelValues) {
  EXPECT_EQ(EscapeLabelValue("plain"), "plain");
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(EscapeLabelValue("tab\tstays"), "tab\tstays");
}

TEST(EscapeTest, HelpKeepsQuotes) { EXPECT_EQ(EscapeHelp("say \"hi\"\\\n"), "say \"hi\"\\\\\\n"); }

TEST(NameTest, MetricNames) {
  EXPECT_TRUE(IsValidMetricName("sglang:prompt_tokens_total"));
  EXPECT_TRUE(IsValidMetricName("_x1"));
  EXPECT_FALSE(IsValidMetricName(""));
  EXPECT_FALSE(IsValidMetricName("1abc"));
  EXPECT_FALSE(IsValidMetricName("a-b"));
}

TEST(NameTest, LabelNames) {
  EXPECT_TRUE(IsValidLabelName("model_name"));
  EXPECT_TRUE(IsValidLabelName("_x9"));
  EXPECT_FALSE(IsValidLabelName("__reserved"));
  EXPECT_FALSE(IsValidLabelName("le"));
  EXPECT_FALSE(IsValidLabelName("a:b"));
  EXPECT_FALSE(IsValidLabelName("9a"));
  EXPECT_FALSE(IsValidLabelName(""));
}

}  // namespace
}  // namespace radixserve::metrics
