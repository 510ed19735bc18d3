// A compiled PCRE2 pattern (UTF + Unicode properties, JIT when available) used by the split
// pre-tokenizers and Replace normalizers/decoders. Immutable after construction; FindAll may be
// called from several threads at once (match data is per call).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace radixserve::tokenizer {

class Regex {
 public:
  // Compiles `pattern`; a syntax error becomes an InvalidArgument status.
  static Expected<Regex> Compile(std::string_view pattern);

  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;
  ~Regex();

  // All non-overlapping matches [begin, end) in `text` (well-formed UTF-8), left to right.
  // Empty matches are skipped.
  std::vector<std::pair<size_t, size_t>> FindAll(std::string_view text) const;

 private:
  struct Impl;
  explicit Regex(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace radixserve::tokenizer
