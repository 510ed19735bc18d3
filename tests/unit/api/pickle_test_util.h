// Loads a pickle file with the system's CPython (`pickle.load`, the reference decoder) and returns
// it re-encoded as JSON text (tuples become lists), or "ERROR: ..." when Python fails.
#pragma once

#include <array>
#include <cstdio>
#include <string>

namespace radixserve::api::testing {

inline std::string PythonUnpickleToJson(const std::string& path) {
  const std::string cmd =
      "python3 -c 'import json,pickle,sys; print(json.dumps(pickle.load(open(sys.argv[1],\"rb\")),"
      " sort_keys=True))' '" +
      path + "' 2>&1";
  std::string out;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return "ERROR: popen";
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int rc = ::pclose(pipe);
  if (rc != 0) return "ERROR: " + out;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace radixserve::api::testing
