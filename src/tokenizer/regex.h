// A compiled PCRE2 pattern (UTF + Unicode properties, JIT when available) used by the split
// pre-tokenizers and Replace normalizers/decoders, and by stop_regex (Search, with partial
// matches). Immutable after construction; FindAll and Search may be called from several threads
// at once (match data is per call).
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
  // Compiles `pattern`; a syntax error becomes an InvalidArgument status naming `what` and the
  // offset ("bad tokenizer regex at offset 3: ...").
  static Expected<Regex> Compile(std::string_view pattern,
                                 std::string_view what = "tokenizer regex");

  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;
  ~Regex();

  // All non-overlapping matches [begin, end) in `text` (well-formed UTF-8), left to right.
  // Empty matches are skipped.
  std::vector<std::pair<size_t, size_t>> FindAll(std::string_view text) const;

  // The leftmost complete match in `text` (well-formed UTF-8) starting at or after byte `from`
  // ([begin, end); empty matches count, as Python's re.search finds them). Without one, the
  // leftmost partial match -- one that runs into the end of the text and could complete with
  // more text (PCRE2's soft partial matching) -- reports its begin.
  struct SearchResult {
    enum class Kind { kNone, kPartial, kComplete };
    Kind kind = Kind::kNone;
    size_t begin = 0;
    size_t end = 0;
  };
  SearchResult Search(std::string_view text, size_t from = 0) const;

 private:
  struct Impl;
  explicit Regex(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace radixserve::tokenizer
