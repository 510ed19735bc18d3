#include "metrics/sglang_buckets.h"

#include "metrics/bucket_rule.h"

namespace radixserve::metrics {

const std::vector<double>& DefaultTimeToFirstTokenBuckets() {
  static const std::vector<double> kBounds = {0.1, 0.2, 0.4, 0.6, 0.8, 1,  2,   4,   6,
                                              8,   10,  20,  40,  60,  80, 100, 200, 400};
  return kBounds;
}

const std::vector<double>& DefaultInterTokenLatencyBuckets() {
  static const std::vector<double> kBounds = {
      0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060,
      0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1,     2,     4,     6,     8};
  return kBounds;
}

const std::vector<double>& DefaultE2eRequestLatencyBuckets() {
  static const std::vector<double> kBounds = {0.1, 0.2, 0.4, 0.6,  0.8,  1,   2,  4,
                                              6,   8,   10,  20,   40,   60,  80, 100,
                                              200, 400, 600, 1200, 1800, 2400};
  return kBounds;
}

const std::vector<double>& DefaultTokensBuckets() {
  static const std::vector<double> kBounds = {
      100,   300,   500,   700,   1000,  1500,   2000,   3000,   4000,   5000,
      6000,  7000,  8000,  9000,  10000, 12000,  15000,  20000,  22000,  25000,
      30000, 35000, 40000, 66000, 99000, 132000, 300000, 600000, 900000, 1100000};
  return kBounds;
}

const std::vector<double>& StoragePagesBuckets() {
  static const std::vector<double> kBounds = {1, 5, 10, 50, 100};
  return kBounds;
}

const std::vector<double>& StorageBandwidthBuckets() {
  static const std::vector<double> kBounds = {0.1, 0.5, 1, 5, 10, 50, 100};
  return kBounds;
}

const std::vector<double>& DefaultRetractionsBuckets() {
  static const std::vector<double> kBounds = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,
                                              10, 15, 20, 25, 30, 40, 50, 75, 100};
  return kBounds;
}

const std::vector<double>& DefaultQueueTimeBuckets() {
  static const std::vector<double> kBounds = {0,   0.1,  0.2,  0.5,  1,    2,    3,    4,    5,
                                              10,  15,   20,   30,   40,   50,   60,   70,   80,
                                              90,  100,  200,  300,  400,  500,  600,  700,  800,
                                              900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000};
  return kBounds;
}

const std::vector<double>& DefaultPerStageLatencyBuckets() {
  static const std::vector<double> kBounds = ExponentialBuckets(0.001, 1.62, 30);
  return kBounds;
}

}  // namespace radixserve::metrics
