#include "metrics/bucket_rule.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>

#include "common/check.h"

namespace radixserve::metrics {
namespace {

bool ParseDouble(const std::string& word, double& out) {
  if (word.empty()) return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtod(word.c_str(), &end);
  return end == word.c_str() + word.size() && errno != ERANGE && !std::isnan(out);
}

bool ParseInt(const std::string& word, int& out) {
  if (word.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(word.c_str(), &end, 10);
  if (end != word.c_str() + word.size() || errno == ERANGE) return false;
  if (value < -1000000 || value > 1000000) return false;
  out = static_cast<int>(value);
  return true;
}

}  // namespace

std::vector<double> TwoSidedExponentialBuckets(double middle, double base, int count) {
  RADIX_CHECK(base > 1 && count > 0);
  std::set<double> bounds{middle};
  double distance = 1.0;
  const int half = (count + 1) / 2;
  for (int k = 0; k < half; ++k) {
    distance *= base;
    bounds.insert(middle + distance);
    bounds.insert(std::max(0.0, middle - distance));
  }
  return {bounds.begin(), bounds.end()};
}

std::vector<double> ExponentialBuckets(double start, double width, int length) {
  RADIX_CHECK(start > 0 && width > 1 && length > 0);
  std::vector<double> bounds;
  bounds.reserve(static_cast<size_t>(length));
  // start * width^i with pow, not repeated multiplication: the bounds then equal SGLang's
  // bit for bit, so `le` labels print identically.
  for (int i = 0; i < length; ++i) bounds.push_back(start * std::pow(width, i));
  return bounds;
}

Expected<std::vector<double>> GenerateBuckets(const std::vector<std::string>& words,
                                              const std::vector<double>& default_bounds) {
  const std::string rule = words.empty() ? "default" : words[0];
  if (rule == "default") {
    if (words.size() > 1) return InvalidArgument("the 'default' bucket rule takes no values");
    std::set<double> unique(default_bounds.begin(), default_bounds.end());
    return std::vector<double>(unique.begin(), unique.end());
  }
  if (rule == "tse") {
    double middle = 0, base = 0;
    int count = 0;
    if (words.size() != 4 || !ParseDouble(words[1], middle) || !ParseDouble(words[2], base) ||
        !ParseInt(words[3], count)) {
      return InvalidArgument("the 'tse' bucket rule is: tse <middle> <base> <integer count>");
    }
    if (!(base > 1)) return InvalidArgument("tse base must be greater than 1");
    if (count <= 0) return InvalidArgument("tse count must be positive");
    if (!(middle > 0)) return InvalidArgument("tse middle must be positive");
    if (std::isinf(middle) || std::isinf(base)) return InvalidArgument("tse values must be finite");
    return TwoSidedExponentialBuckets(middle, base, count);
  }
  if (rule == "customer") {
    if (words.size() < 2) return InvalidArgument("the 'customer' bucket rule needs a value");
    std::vector<double> bounds;
    for (size_t i = 1; i < words.size(); ++i) {
      double value = 0;
      if (!ParseDouble(words[i], value) || std::isinf(value)) {
        return InvalidArgument("customer bucket '" + words[i] + "' is not a number");
      }
      if (value < 0) return InvalidArgument("customer buckets must be non-negative");
      if (std::find(bounds.begin(), bounds.end(), value) != bounds.end()) {
        return InvalidArgument("customer buckets must not repeat");
      }
      bounds.push_back(value);
    }
    std::sort(bounds.begin(), bounds.end());
    return bounds;
  }
  return InvalidArgument("unknown bucket rule '" + rule +
                         "' (choose from 'tse', 'default', 'customer')");
}

}  // namespace radixserve::metrics
