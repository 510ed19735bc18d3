#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

namespace radixserve::tokenizer {

struct Regex::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  bool jit_partial = false;
  ~Impl() {
    if (code != nullptr) pcre2_code_free(code);
  }
};

Regex::Regex(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;
Regex::~Regex() = default;

Expected<Regex> Regex::Compile(std::string_view pattern, std::string_view what) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return InvalidArgument("bad " + std::string(what) + " at offset " + std::to_string(offset) +
                           ": " + reinterpret_cast<const char*>(message));
  }
  auto impl = std::make_unique<Impl>();
  impl->code = code;
  impl->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  impl->jit_partial = impl->jit && pcre2_jit_compile(code, PCRE2_JIT_PARTIAL_SOFT) == 0;
  return Regex(std::move(impl));
}

namespace {

// Per-thread JIT stack, larger than PCRE2's 32 KiB default, so long whitespace runs under
// look-ahead patterns do not exhaust it.
pcre2_match_context* ThreadMatchContext() {
  struct Holder {
    pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    pcre2_match_context* context = pcre2_match_context_create(nullptr);
    Holder() {
      if (stack != nullptr && context != nullptr) pcre2_jit_stack_assign(context, nullptr, stack);
    }
    ~Holder() {
      if (context != nullptr) pcre2_match_context_free(context);
      if (stack != nullptr) pcre2_jit_stack_free(stack);
    }
  };
  thread_local Holder holder;
  return holder.context;
}

}  // namespace

std::vector<std::pair<size_t, size_t>> Regex::FindAll(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  RADIX_CHECK(md != nullptr);
  pcre2_match_context* context = ThreadMatchContext();
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    int rc = PCRE2_ERROR_NOMATCH;
    if (impl_->jit) {
      rc = pcre2_jit_match(impl_->code, subject, text.size(), start, 0, md, context);
    }
    if (!impl_->jit || (rc < 0 && rc != PCRE2_ERROR_NOMATCH)) {
      // No JIT, or the JIT ran out of stack: the interpreter gives the same answer.
      rc = pcre2_match(impl_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, md, nullptr);
    }
    if (rc < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t b = ov[0], e = ov[1];
    if (e > b) {
      out.emplace_back(b, e);
      start = e;
    } else {
      // Empty match: step one whole character forward.
      start = b + 1;
      while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
        ++start;
      }
    }
  }
  pcre2_match_data_free(md);
  return out;
}

Regex::SearchResult Regex::Search(std::string_view text, size_t from) const {
  SearchResult result;
  if (from > text.size()) return result;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  RADIX_CHECK(md != nullptr);
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  int rc = PCRE2_ERROR_NOMATCH;
  if (impl_->jit_partial) {
    rc = pcre2_jit_match(impl_->code, subject, text.size(), from, PCRE2_PARTIAL_SOFT, md,
                         ThreadMatchContext());
  }
  if (!impl_->jit_partial || (rc < 0 && rc != PCRE2_ERROR_NOMATCH && rc != PCRE2_ERROR_PARTIAL)) {
    rc = pcre2_match(impl_->code, subject, text.size(), from,
                     PCRE2_NO_UTF_CHECK | PCRE2_PARTIAL_SOFT, md, nullptr);
  }
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
  if (rc == PCRE2_ERROR_PARTIAL) {
    result.kind = SearchResult::Kind::kPartial;
    result.begin = ov[0];
    result.end = text.size();
  } else if (rc >= 0) {
    result.kind = SearchResult::Kind::kComplete;
    result.begin = ov[0];
    result.end = ov[1];
  }
  pcre2_match_data_free(md);
  return result;
}

}  // namespace radixserve::tokenizer
