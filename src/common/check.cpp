#include "common/check.h"

#include <cstdio>
#include <cstdlib>

namespace radixserve::detail {

void CheckFailed(const char* condition, const char* file, int line, const char* message) {
  std::fprintf(stderr, "RADIX_CHECK failed at %s:%d: %s%s%s\n", file, line, condition,
               message ? ": " : "", message ? message : "");
  std::fflush(stderr);
  std::abort();
}

}  // namespace radixserve::detail
