#include "chat/json_prefix.h"

#include <cstdlib>
#include <cstring>

#include "chat/py_json.h"
#include "tokenizer/utf8.h"

namespace radixserve::chat {
namespace {

enum class R { kOk, kMore, kBad };

bool IsWs(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Scanner {
 public:
  Scanner(std::string_view text, size_t pos, bool at_end) : t_(text), p_(pos), at_end_(at_end) {}

  size_t pos() const { return p_; }

  void SkipWs() {
    while (p_ < t_.size() && IsWs(t_[p_])) ++p_;
  }

  R Value(std::string& out) {
    SkipWs();
    if (p_ >= t_.size()) return R::kMore;
    char c = t_[p_];
    if (c == '{') return Object(out);
    if (c == '[') return Array(out);
    if (c == '"') return QuotedString(out);
    if (c == '-' || (c >= '0' && c <= '9')) return Number(out);
    return Literal(out);
  }

  // Decodes a string literal at p_ into `decoded`; on kMore `decoded` holds the final part.
  // Lone surrogates are kept as \uXXXX escapes in `decoded` (`lone_escapes` set), which only
  // makes sense for re-escaping, never for names.
  R String(std::string& decoded) {
    ++p_;  // opening quote
    while (true) {
      if (p_ >= t_.size()) return R::kMore;
      auto c = static_cast<unsigned char>(t_[p_]);
      if (c == '"') {
        ++p_;
        return R::kOk;
      }
      if (c < 0x20) return R::kBad;
      if (c != '\\') {
        decoded += static_cast<char>(c);
        ++p_;
        continue;
      }
      if (p_ + 1 >= t_.size()) return R::kMore;
      char e = t_[p_ + 1];
      switch (e) {
        case '"':
          decoded += '"';
          break;
        case '\\':
          decoded += '\\';
          break;
        case '/':
          decoded += '/';
          break;
        case 'b':
          decoded += '\b';
          break;
        case 'f':
          decoded += '\f';
          break;
        case 'n':
          decoded += '\n';
          break;
        case 'r':
          decoded += '\r';
          break;
        case 't':
          decoded += '\t';
          break;
        case 'u': {
          uint32_t cp = 0;
          R r = Hex4(p_ + 2, &cp);
          if (r != R::kOk) return r;
          size_t next = p_ + 6;
          if (cp >= 0xD800 && cp < 0xDC00) {
            // A high surrogate joins a following \uDC00-\uDFFF; wait until that is decided.
            std::string_view rest = t_.substr(next);
            std::string_view want = "\\u";
            if (rest.size() < 2 && want.substr(0, rest.size()) == rest) return R::kMore;
            if (rest.substr(0, 2) == want) {
              uint32_t low = 0;
              R lr = Hex4(next + 2, &low);
              if (lr == R::kMore) return R::kMore;
              if (lr == R::kOk && low >= 0xDC00 && low < 0xE000) {
                tokenizer::AppendUtf8(
                    decoded,
                    static_cast<char32_t>(0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)));
                p_ = next + 6;
                continue;
              }
            }
            lone_surrogate_ = true;
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            lone_surrogate_ = true;
          }
          if (lone_surrogate_) {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "%c%04x", kLoneMark, cp);
            decoded += buf;
          } else {
            tokenizer::AppendUtf8(decoded, static_cast<char32_t>(cp));
          }
          p_ = next;
          continue;
        }
        default:
          return R::kBad;
      }
      p_ += 2;
    }
  }

  bool lone_surrogate() const { return lone_surrogate_; }

  R ObjectMembers(std::string& out,
                  const std::function<R(const std::string&, std::string&)>& member) {
    ++p_;
    out += '{';
    SkipWs();
    if (p_ >= t_.size()) return R::kMore;
    if (t_[p_] == '}') {
      ++p_;
      out += '}';
      return R::kOk;
    }
    while (true) {
      SkipWs();
      if (p_ >= t_.size()) return R::kMore;
      if (t_[p_] != '"') return R::kBad;
      std::string key;
      out += '"';
      R r = String(key);
      AppendEscaped(key, out);
      if (r != R::kOk) return r;
      out += "\": ";
      SkipWs();
      if (p_ >= t_.size()) return R::kMore;
      if (t_[p_] != ':') return R::kBad;
      ++p_;
      r = member(key, out);
      if (r != R::kOk) return r;
      SkipWs();
      if (p_ >= t_.size()) return R::kMore;
      if (t_[p_] == ',') {
        ++p_;
        out += ", ";
        continue;
      }
      if (t_[p_] == '}') {
        ++p_;
        out += '}';
        return R::kOk;
      }
      return R::kBad;
    }
  }

 private:
  static constexpr char kLoneMark = '\x01';  // never a literal in `decoded` (raw controls are bad)

  static void AppendEscaped(const std::string& decoded, std::string& out) {
    if (decoded.find(kLoneMark) == std::string::npos) {
      AppendPyJsonEscaped(decoded, out);
      return;
    }
    size_t start = 0;
    for (size_t i = 0; i < decoded.size(); ++i) {
      if (decoded[i] != kLoneMark) continue;
      AppendPyJsonEscaped(std::string_view(decoded).substr(start, i - start), out);
      out += "\\u";
      out += decoded.substr(i + 1, 4);
      i += 4;
      start = i + 1;
    }
    AppendPyJsonEscaped(std::string_view(decoded).substr(start), out);
  }

  R Hex4(size_t at, uint32_t* cp) {
    *cp = 0;
    for (size_t k = 0; k < 4; ++k) {
      if (at + k >= t_.size()) return R::kMore;
      int d = HexDigit(t_[at + k]);
      if (d < 0) return R::kBad;
      *cp = *cp * 16 + static_cast<uint32_t>(d);
    }
    return R::kOk;
  }

  R QuotedString(std::string& out) {
    std::string decoded;
    out += '"';
    R r = String(decoded);
    AppendEscaped(decoded, out);
    if (r == R::kOk) out += '"';
    return r;
  }

  R Object(std::string& out) {
    return ObjectMembers(out, [this](const std::string&, std::string& o) { return Value(o); });
  }

  R Array(std::string& out) {
    ++p_;
    out += '[';
    SkipWs();
    if (p_ >= t_.size()) return R::kMore;
    if (t_[p_] == ']') {
      ++p_;
      out += ']';
      return R::kOk;
    }
    while (true) {
      R r = Value(out);
      if (r != R::kOk) return r;
      SkipWs();
      if (p_ >= t_.size()) return R::kMore;
      if (t_[p_] == ',') {
        ++p_;
        out += ", ";
        continue;
      }
      if (t_[p_] == ']') {
        ++p_;
        out += ']';
        return R::kOk;
      }
      return R::kBad;
    }
  }

  R Number(std::string& out) {
    size_t start = p_;
    while (p_ < t_.size() && std::strchr("0123456789+-.eE", t_[p_]) != nullptr) ++p_;
    if (p_ >= t_.size() && !at_end_) return R::kMore;
    std::string_view num = t_.substr(start, p_ - start);
    // -?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?
    size_t i = 0;
    if (i < num.size() && num[i] == '-') ++i;
    if (i >= num.size() || !std::isdigit(static_cast<unsigned char>(num[i]))) return R::kBad;
    if (num[i] == '0') {
      ++i;
    } else {
      while (i < num.size() && std::isdigit(static_cast<unsigned char>(num[i]))) ++i;
    }
    // Python's decoder stops at the longest valid number; the rest must then be a delimiter.
    size_t int_end = i;
    bool is_float = false;
    if (i < num.size() && num[i] == '.' && i + 1 < num.size() &&
        std::isdigit(static_cast<unsigned char>(num[i + 1]))) {
      i += 1;
      while (i < num.size() && std::isdigit(static_cast<unsigned char>(num[i]))) ++i;
      is_float = true;
    }
    if (i < num.size() && (num[i] == 'e' || num[i] == 'E')) {
      size_t j = i + 1;
      if (j < num.size() && (num[j] == '+' || num[j] == '-')) ++j;
      if (j < num.size() && std::isdigit(static_cast<unsigned char>(num[j]))) {
        while (j < num.size() && std::isdigit(static_cast<unsigned char>(num[j]))) ++j;
        i = j;
        is_float = true;
      }
    }
    if (i != num.size()) return R::kBad;
    if (!is_float) {
      std::string_view digits = num.substr(0, int_end);
      out += digits == "-0" ? std::string_view("0") : digits;
      return R::kOk;
    }
    double v = std::strtod(std::string(num).c_str(), nullptr);
    out += std::isinf(v) ? std::string(num) : PyFloatRepr(v);
    return R::kOk;
  }

  R Literal(std::string& out) {
    for (std::string_view lit : {"true", "false", "null"}) {
      std::string_view rest = t_.substr(p_, lit.size());
      if (rest == lit) {
        p_ += lit.size();
        out += lit;
        return R::kOk;
      }
      if (p_ + rest.size() == t_.size() && lit.substr(0, rest.size()) == rest) return R::kMore;
    }
    return R::kBad;
  }

  std::string_view t_;
  size_t p_;
  bool at_end_;
  bool lone_surrogate_ = false;
};

JsonScanState StateOf(R r) {
  return r == R::kOk     ? JsonScanState::kComplete
         : r == R::kMore ? JsonScanState::kPartial
                         : JsonScanState::kInvalid;
}

}  // namespace

JsonPrefix ScanJsonPrefix(std::string_view text, size_t pos, bool at_end) {
  JsonPrefix result;
  Scanner s(text, pos, at_end);
  R r = s.Value(result.canonical);
  result.state = StateOf(r);
  result.end = s.pos();
  return result;
}

JsonCallScan ScanJsonCall(std::string_view text, size_t pos, bool at_end) {
  JsonCallScan result;
  Scanner s(text, pos, at_end);
  s.SkipWs();
  if (s.pos() >= text.size()) return result;
  if (text[s.pos()] != '{') {
    result.state = JsonScanState::kInvalid;
    return result;
  }
  std::string ignored;
  R r = s.ObjectMembers(ignored, [&](const std::string& key, std::string&) -> R {
    std::string value;
    bool is_args = (key == "arguments" || key == "parameters") && !result.has_arguments;
    s.SkipWs();
    size_t start = s.pos();
    R vr = s.Value(value);
    if (key == "name" && vr == R::kOk && start < text.size() && text[start] == '"') {
      size_t end = 0;
      result.name = ScanJsonString(text, start, &end);
    }
    if (is_args && start < text.size() && text[start] != 'n') {
      result.has_arguments = true;
      result.arguments = value;
      result.arguments_complete = vr == R::kOk;
    }
    return vr;
  });
  result.state = StateOf(r);
  result.end = s.pos();
  if (result.state == JsonScanState::kComplete && !result.has_arguments) {
    result.has_arguments = true;
    result.arguments_complete = true;
    result.arguments = "{}";
  }
  return result;
}

std::optional<std::string> ScanJsonString(std::string_view text, size_t pos, size_t* end) {
  if (pos >= text.size() || text[pos] != '"') return std::nullopt;
  Scanner s(text, pos, true);
  std::string decoded;
  if (s.String(decoded) != R::kOk || s.lone_surrogate()) return std::nullopt;
  *end = s.pos();
  return decoded;
}

std::optional<std::string> CanonicalJson(std::string_view text) {
  JsonPrefix p = ScanJsonPrefix(text, 0, true);
  if (p.state != JsonScanState::kComplete) return std::nullopt;
  for (size_t i = p.end; i < text.size(); ++i) {
    if (!IsWs(text[i])) return std::nullopt;
  }
  return p.canonical;
}

}  // namespace radixserve::chat
