// RADIX_ASSIGN_OR_RETURN(target, expr): evaluates an Expected<T>; on error returns its Status
// from the enclosing function, otherwise moves the value into `target`.
#pragma once

#include <utility>

#include "common/status.h"

#define RADIX_ASSIGN_OR_RETURN(target, expr)                \
  do {                                                      \
    auto radix_result_ = (expr);                            \
    if (!radix_result_.ok()) return radix_result_.status(); \
    target = std::move(radix_result_).value();              \
  } while (0)
