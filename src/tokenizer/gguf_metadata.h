// The key/value metadata section of a GGUF file (versions 2 and 3), read without touching the
// tensor data. Only what vocabularies need is kept: scalars as int64/double/bool/string and
// arrays of strings or numbers. Plain value type; not tied to the file after Read returns.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/status.h"

namespace radixserve::tokenizer {

class GgufMetadata {
 public:
  using Value = std::variant<int64_t, double, bool, std::string, std::vector<std::string>,
                             std::vector<double>>;

  // Reads the header and all metadata of `path`; DataLoss on a malformed or truncated file.
  static Expected<GgufMetadata> Read(const std::string& path);

  bool Has(const std::string& key) const { return values_.count(key) != 0; }
  std::optional<std::string> GetString(const std::string& key) const;
  std::optional<int64_t> GetInt(const std::string& key) const;
  std::optional<bool> GetBool(const std::string& key) const;
  // nullptr when absent or of another type.
  const std::vector<std::string>* GetStrings(const std::string& key) const;
  const std::vector<double>* GetNumbers(const std::string& key) const;

  void Set(const std::string& key, Value value) { values_[key] = std::move(value); }

 private:
  std::map<std::string, Value> values_;
};

}  // namespace radixserve::tokenizer
