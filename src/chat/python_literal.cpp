#include "chat/python_literal.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "chat/py_json.h"
#include "tokenizer/utf8.h"

namespace radixserve::chat {
namespace {

bool IsIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class PyParser {
 public:
  explicit PyParser(std::string_view text) : t_(text) {}

  void Ws() {
    while (p_ < t_.size()) {
      char c = t_[p_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++p_;
      } else if (c == '\\' && p_ + 1 < t_.size() && t_[p_ + 1] == '\n') {
        p_ += 2;
      } else if (c == '#') {
        while (p_ < t_.size() && t_[p_] != '\n') ++p_;
      } else {
        break;
      }
    }
  }
  bool AtEnd() {
    Ws();
    return p_ >= t_.size();
  }
  bool Eat(char c) {
    Ws();
    if (p_ < t_.size() && t_[p_] == c) {
      ++p_;
      return true;
    }
    return false;
  }

  PyLiteral Value() {
    Ws();
    if (p_ >= t_.size()) return Err(PyLiteralError::kSyntax);
    char c = t_[p_];
    if (c == '[') return Sequence(']');
    if (c == '(') return Sequence(')');
    if (c == '{') return DictOrSet();
    if (c == '-' || c == '+') {
      ++p_;
      Ws();
      PyLiteral v = Value();
      if (!v.ok()) return v;
      if (!v.value.is_number() || v.value.is_boolean()) return Err(PyLiteralError::kSyntax);
      if (c == '-') {
        if (v.value.is_number_float()) {
          v.value = -v.value.get<double>();
        } else if (v.value.is_number_unsigned()) {
          uint64_t u = v.value.get<uint64_t>();
          if (u <= uint64_t(1) << 63) {
            v.value = u == uint64_t(1) << 63 ? INT64_MIN : -static_cast<int64_t>(u);
          } else {
            v.value = -static_cast<double>(u);
          }
        } else {
          v.value = -v.value.get<int64_t>();
        }
      }
      return v;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) ||
        (c == '.' && p_ + 1 < t_.size() && std::isdigit(static_cast<unsigned char>(t_[p_ + 1])))) {
      return Number();
    }
    if (IsIdentStart(c)) {
      size_t start = p_;
      while (p_ < t_.size() && IsIdentChar(t_[p_])) ++p_;
      std::string_view word = t_.substr(start, p_ - start);
      if (p_ < t_.size() && (t_[p_] == '\'' || t_[p_] == '"') && word.size() <= 2) {
        p_ = start;
        return Strings();
      }
      if (word == "True") return Ok(true);
      if (word == "False") return Ok(false);
      if (word == "None") return Ok(nullptr);
      return Err(PyLiteralError::kSyntax);
    }
    if (c == '\'' || c == '"') return Strings();
    return Err(PyLiteralError::kSyntax);
  }

  // An identifier at p_ (after whitespace), or empty.
  std::string Identifier() {
    Ws();
    size_t start = p_;
    if (p_ < t_.size() && IsIdentStart(t_[p_])) {
      while (p_ < t_.size() && IsIdentChar(t_[p_])) ++p_;
    }
    return std::string(t_.substr(start, p_ - start));
  }
  size_t pos() const { return p_; }
  void set_pos(size_t p) { p_ = p; }

 private:
  static PyLiteral Ok(Json v) { return PyLiteral{PyLiteralError::kNone, std::move(v)}; }
  static PyLiteral Err(PyLiteralError e) { return PyLiteral{e, Json()}; }

  PyLiteral Sequence(char close) {
    ++p_;
    Json list = Json::array();
    PyLiteralError soft = PyLiteralError::kNone;
    bool any = false, trailing_comma = false;
    while (true) {
      if (Eat(close)) break;
      if (any && !trailing_comma) return Err(PyLiteralError::kSyntax);
      PyLiteral item = Value();
      if (item.error == PyLiteralError::kSyntax) return item;
      if (!item.ok()) soft = item.error;
      list.push_back(std::move(item.value));
      any = true;
      trailing_comma = Eat(',');
    }
    // (x) is a parenthesized value, not a tuple.
    if (close == ')' && list.size() == 1 && !trailing_comma) {
      return soft == PyLiteralError::kNone ? Ok(list[0]) : Err(soft);
    }
    return soft == PyLiteralError::kNone ? Ok(std::move(list)) : Err(soft);
  }

  PyLiteral DictOrSet() {
    ++p_;
    Json dict = Json::object();
    PyLiteralError soft = PyLiteralError::kNone;
    bool any = false, trailing_comma = false, is_set = false;
    while (true) {
      if (Eat('}')) break;
      if (any && !trailing_comma) return Err(PyLiteralError::kSyntax);
      PyLiteral key = Value();
      if (key.error == PyLiteralError::kSyntax) return key;
      if (!Eat(':')) {
        is_set = true;
      } else {
        if (is_set) return Err(PyLiteralError::kSyntax);
        PyLiteral value = Value();
        if (value.error == PyLiteralError::kSyntax) return value;
        if (!value.ok() || !key.ok()) {
          soft = PyLiteralError::kUnrepresentable;
        } else if (key.value.is_string()) {
          dict[key.value.get<std::string>()] = std::move(value.value);
        } else if (key.value.is_primitive()) {
          // json.dumps writes int/float/bool/None keys as strings.
          std::string k = key.value.is_null()      ? "null"
                          : key.value.is_boolean() ? key.value.dump()
                                                   : PyJsonDumps(key.value);
          dict[k] = std::move(value.value);
        } else {
          soft = PyLiteralError::kUnrepresentable;  // unhashable key: literal_eval raises too
        }
      }
      any = true;
      trailing_comma = Eat(',');
    }
    if (is_set) return Err(PyLiteralError::kUnrepresentable);
    return soft == PyLiteralError::kNone ? Ok(std::move(dict)) : Err(soft);
  }

  PyLiteral Number() {
    size_t start = p_;
    std::string digits;
    auto take_digits = [&](auto pred) {
      while (p_ < t_.size() &&
             (pred(t_[p_]) || (t_[p_] == '_' && p_ + 1 < t_.size() && pred(t_[p_ + 1])))) {
        if (t_[p_] != '_') digits += t_[p_];
        ++p_;
      }
    };
    auto is_dec = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
    if (t_[p_] == '0' && p_ + 1 < t_.size() && std::strchr("xXoObB", t_[p_ + 1]) != nullptr &&
        t_[p_ + 1] != '\0') {
      char kind = static_cast<char>(std::tolower(t_[p_ + 1]));
      p_ += 2;
      if (p_ < t_.size() && t_[p_] == '_') ++p_;
      int base = kind == 'x' ? 16 : kind == 'o' ? 8 : 2;
      take_digits([base](char c) {
        int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                : std::isxdigit(static_cast<unsigned char>(c))
                    ? std::tolower(static_cast<unsigned char>(c)) - 'a' + 10
                    : 99;
        return d < base;
      });
      if (digits.empty() || (p_ < t_.size() && IsIdentChar(t_[p_]))) {
        return Err(PyLiteralError::kSyntax);
      }
      return Ok(static_cast<uint64_t>(std::strtoull(digits.c_str(), nullptr, base)));
    }
    take_digits(is_dec);
    bool is_float = false;
    if (p_ < t_.size() && t_[p_] == '.') {
      is_float = true;
      digits += '.';
      ++p_;
      take_digits(is_dec);
    }
    if (p_ < t_.size() && (t_[p_] == 'e' || t_[p_] == 'E')) {
      size_t save = p_;
      std::string exp = "e";
      ++p_;
      if (p_ < t_.size() && (t_[p_] == '+' || t_[p_] == '-')) exp += t_[p_++];
      if (p_ < t_.size() && is_dec(t_[p_])) {
        std::string before = digits;
        digits.clear();
        take_digits(is_dec);
        digits = before + exp + digits;
        is_float = true;
      } else {
        p_ = save;
      }
    }
    if (p_ < t_.size() && (t_[p_] == 'j' || t_[p_] == 'J')) {
      ++p_;
      return Err(PyLiteralError::kUnrepresentable);
    }
    if (p_ < t_.size() && IsIdentChar(t_[p_])) return Err(PyLiteralError::kSyntax);
    if (is_float) return Ok(std::strtod(digits.c_str(), nullptr));
    // Python 3 forbids leading zeros in non-zero decimal ints.
    if (digits.size() > 1 && digits[0] == '0' &&
        digits.find_first_not_of('0') != std::string::npos) {
      p_ = start;
      return Err(PyLiteralError::kSyntax);
    }
    errno = 0;
    uint64_t u = std::strtoull(digits.c_str(), nullptr, 10);
    if (errno == ERANGE) return Ok(std::strtod(digits.c_str(), nullptr));
    if (u <= static_cast<uint64_t>(INT64_MAX)) return Ok(static_cast<int64_t>(u));
    return Ok(u);
  }

  // One or more adjacent string literals (implicit concatenation).
  PyLiteral Strings() {
    std::string value;
    bool any = false, bytes = false;
    while (true) {
      Ws();
      size_t save = p_;
      std::string prefix;
      while (p_ < t_.size() && std::isalpha(static_cast<unsigned char>(t_[p_])) &&
             prefix.size() < 3) {
        prefix += static_cast<char>(std::tolower(static_cast<unsigned char>(t_[p_])));
        ++p_;
      }
      if (p_ >= t_.size() || (t_[p_] != '\'' && t_[p_] != '"')) {
        p_ = save;
        break;
      }
      bool raw = prefix.find('r') != std::string::npos;
      if (prefix.find('b') != std::string::npos) bytes = true;
      if (prefix.find('f') != std::string::npos) return Err(PyLiteralError::kSyntax);
      for (char c : prefix) {
        if (c != 'r' && c != 'b' && c != 'u') return Err(PyLiteralError::kSyntax);
      }
      if (!StringBody(raw, value)) return Err(PyLiteralError::kSyntax);
      any = true;
    }
    if (!any) return Err(PyLiteralError::kSyntax);
    if (bytes) return Err(PyLiteralError::kUnrepresentable);
    return Ok(std::move(value));
  }

  bool StringBody(bool raw, std::string& out) {
    char q = t_[p_];
    bool triple = t_.substr(p_, 3) == std::string(3, q);
    p_ += triple ? 3 : 1;
    while (true) {
      if (p_ >= t_.size()) return false;
      char c = t_[p_];
      if (c == q) {
        if (!triple) {
          ++p_;
          return true;
        }
        if (t_.substr(p_, 3) == std::string(3, q)) {
          p_ += 3;
          return true;
        }
      }
      if (c == '\n' && !triple) return false;
      if (c != '\\') {
        out += c;
        ++p_;
        continue;
      }
      if (p_ + 1 >= t_.size()) return false;
      char e = t_[p_ + 1];
      if (raw) {
        out += c;
        out += e;
        p_ += 2;
        continue;
      }
      p_ += 2;
      switch (e) {
        case '\n':
          break;
        case '\\':
          out += '\\';
          break;
        case '\'':
          out += '\'';
          break;
        case '"':
          out += '"';
          break;
        case 'a':
          out += '\a';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'v':
          out += '\v';
          break;
        case 'x':
        case 'u':
        case 'U': {
          size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (p_ + n > t_.size()) return false;
          uint32_t cp = 0;
          for (size_t k = 0; k < n; ++k) {
            char h = t_[p_ + k];
            if (!std::isxdigit(static_cast<unsigned char>(h))) return false;
            cp = cp * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h))
                                                     ? h - '0'
                                                     : std::tolower(h) - 'a' + 10);
          }
          if (cp > 0x10FFFF) return false;
          p_ += n;
          tokenizer::AppendUtf8(out, static_cast<char32_t>(cp));
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '7'; ++k) {
              cp = cp * 8 + static_cast<uint32_t>(t_[p_++] - '0');
            }
            tokenizer::AppendUtf8(out, static_cast<char32_t>(cp));
          } else {
            out += '\\';  // unknown escapes keep their backslash
            out += e;
          }
      }
    }
  }

  std::string_view t_;
  size_t p_ = 0;
};

}  // namespace

PyLiteral ParsePyLiteral(std::string_view text) {
  PyParser parser(text);
  PyLiteral v = parser.Value();
  if (v.error == PyLiteralError::kSyntax) return v;
  if (!parser.AtEnd()) return PyLiteral{PyLiteralError::kSyntax, Json()};
  return v;
}

std::optional<std::vector<PyCall>> ParsePyCallList(std::string_view text) {
  PyParser p(text);
  if (!p.Eat('[')) return std::nullopt;
  std::vector<PyCall> calls;
  bool trailing_comma = true;
  while (true) {
    if (p.Eat(']')) break;
    if (!trailing_comma) return std::nullopt;
    PyCall call;
    call.name = p.Identifier();
    if (call.name.empty() || !p.Eat('(')) return std::nullopt;
    call.arguments.value = Json::object();
    bool arg_comma = true;
    while (true) {
      if (p.Eat(')')) break;
      if (!arg_comma) return std::nullopt;
      std::string key = p.Identifier();
      if (key.empty() || !p.Eat('=')) return std::nullopt;
      PyLiteral value = p.Value();
      if (value.error == PyLiteralError::kSyntax) {
        // A non-literal argument (a name, an expression) is valid Python but no literal:
        // skip to the end of this argument by bracket depth.
        call.arguments.error = PyLiteralError::kUnrepresentable;
        return std::nullopt;
      }
      if (!value.ok()) call.arguments.error = value.error;
      call.arguments.value[key] = std::move(value.value);
      arg_comma = p.Eat(',');
    }
    calls.push_back(std::move(call));
    trailing_comma = p.Eat(',');
  }
  if (!p.AtEnd()) return std::nullopt;
  return calls;
}

}  // namespace radixserve::chat
