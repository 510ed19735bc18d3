// Tests that compare against a reference outside the build (the project venv's Python packages,
// a model from scripts/setup) skip when it is absent -- except under the README's test command,
// which sets RADIX_REQUIRE_REFERENCES=1: there a missing reference fails the test, so an oracle
// can never go green unseen.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace radixserve::testing {

inline bool ReferencesRequired() {
  const char* value = std::getenv("RADIX_REQUIRE_REFERENCES");
  return value != nullptr && std::string(value) == "1";
}

// The project venv's python: $RADIX_VENV/bin/python, else ~/.cache/radixserve/venv/bin/python.
inline std::string VenvPython() {
  if (const char* venv = std::getenv("RADIX_VENV"); venv != nullptr && *venv != '\0') {
    return std::string(venv) + "/bin/python";
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "") + "/.cache/radixserve/venv/bin/python";
}

}  // namespace radixserve::testing

// Skips the test for a missing reference, or fails it when references are required.
#define RADIX_SKIP_WITHOUT_REFERENCE(message)                                  \
  do {                                                                         \
    if (::radixserve::testing::ReferencesRequired()) {                         \
      FAIL() << "reference missing (RADIX_REQUIRE_REFERENCES=1): " << message; \
    }                                                                          \
    GTEST_SKIP() << message;                                                   \
  } while (0)
