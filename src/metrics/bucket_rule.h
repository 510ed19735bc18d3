// Bucket rules of SGLang's token histograms (--prompt-tokens-buckets,
// --generation-tokens-buckets), given as words:
//   default                      the histogram's predefined buckets
//   tse <middle> <base> <count>  two-sided exponential: middle, and middle +/- base^k for
//                                k = 1..ceil(count/2), lower side clamped at 0, sorted, unique
//                                ("tse 1000 2 8" -> 984 992 996 998 1000 1002 1004 1008 1016)
//   customer <v1> <v2> ...       explicit bounds, non-negative, no repeats; sorted here
// An empty word list means "default". Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace radixserve::metrics {

// Validates `words` as above and returns the bucket bounds (without +Inf). `default_bounds` is
// used for the 'default' rule (sorted and de-duplicated). Errors are InvalidArgument.
Expected<std::vector<double>> GenerateBuckets(const std::vector<std::string>& words,
                                              const std::vector<double>& default_bounds);

// middle, middle +/- base^k (k = 1..ceil(count/2)), lower values clamped at 0, sorted, unique.
// Requires base > 1 and count > 0 (RADIX_CHECK; GenerateBuckets validates user input).
std::vector<double> TwoSidedExponentialBuckets(double middle, double base, int count);

// start * width^i for i = 0..length-1. Requires start > 0, width > 1,
// length > 0 (RADIX_CHECK).
std::vector<double> ExponentialBuckets(double start, double width, int length);

}  // namespace radixserve::metrics
