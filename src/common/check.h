// RADIX_CHECK: invariants that must hold whatever the input. A failure is a bug: it prints the
// condition with file:line and aborts. Never use it for anything a user can trigger.
#pragma once

namespace radixserve::detail {
[[noreturn]] void CheckFailed(const char* condition, const char* file, int line,
                              const char* message);
}  // namespace radixserve::detail

#define RADIX_CHECK(cond)                                                    \
  do {                                                                       \
    if (!(cond)) [[unlikely]]                                                \
      ::radixserve::detail::CheckFailed(#cond, __FILE__, __LINE__, nullptr); \
  } while (0)

#define RADIX_CHECK_MSG(cond, msg)                                         \
  do {                                                                     \
    if (!(cond)) [[unlikely]]                                              \
      ::radixserve::detail::CheckFailed(#cond, __FILE__, __LINE__, (msg)); \
  } while (0)
