#include "chat/tool_value_conversion.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "chat/json_prefix.h"
#include "chat/py_json.h"
#include "chat/python_literal.h"

namespace radixserve::chat {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::string_view StripPy(std::string_view s) {
  size_t a = s.find_first_not_of(" \t\n\r\f\v");
  if (a == std::string_view::npos) return {};
  return s.substr(a, s.find_last_not_of(" \t\n\r\f\v") - a + 1);
}

// Removes '_' that sit between two digits; nullopt if an underscore sits elsewhere.
std::optional<std::string> DropUnderscores(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '_') {
      out += s[i];
      continue;
    }
    if (i == 0 || i + 1 >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i - 1])) ||
        !std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      return std::nullopt;
    }
  }
  return out;
}

std::string StringJson(std::string_view s) {
  std::string out;
  out.push_back('"');
  AppendPyJsonEscaped(s, out);
  out.push_back('"');
  return out;
}

std::string IntegralDoubleText(double v) {
  char buf[400];
  std::snprintf(buf, sizeof(buf), "%.0f", v);
  return std::string(buf) == "-0" ? "0" : buf;
}

// _convert_to_number: float if '.' or 'e' appears, else int; the text itself on failure.
std::string ConvertToNumber(const std::string& value) {
  std::string lower = Lower(value);
  if (lower.find('.') != std::string::npos || lower.find('e') != std::string::npos) {
    if (auto f = PyFloat(value)) return PyFloatRepr(*f);
  } else if (auto i = PyIntText(value)) {
    return *i;
  }
  return StringJson(value);
}

}  // namespace

std::optional<Json> PyJsonLoads(std::string_view text) {
  Json value = Json::parse(text.begin(), text.end(), nullptr, false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

std::optional<std::string> PyIntText(std::string_view text) {
  auto cleaned = DropUnderscores(StripPy(text));
  if (!cleaned || cleaned->empty()) return std::nullopt;
  std::string_view s = *cleaned;
  bool negative = false;
  if (s[0] == '+' || s[0] == '-') {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.empty()) return std::nullopt;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  size_t nz = s.find_first_not_of('0');
  if (nz == std::string_view::npos) return "0";
  std::string out;
  if (negative) out.push_back('-');
  out.append(s.substr(nz));
  return out;
}

std::optional<double> PyFloat(std::string_view text) {
  auto cleaned = DropUnderscores(StripPy(text));
  if (!cleaned || cleaned->empty()) return std::nullopt;
  for (char c : *cleaned) {
    if (!std::isdigit(static_cast<unsigned char>(c)) &&
        std::string_view("+-.eE").find(c) == std::string_view::npos) {
      return std::nullopt;  // no inf/nan/hex: JSON cannot carry them
    }
  }
  char* end = nullptr;
  double v = std::strtod(cleaned->c_str(), &end);
  if (end != cleaned->c_str() + cleaned->size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::string ConvertQwen3CoderValue(const std::string& value, bool known_param,
                                   const std::string& raw_type) {
  if (Lower(value) == "null") return "null";
  if (!known_param) return StringJson(value);
  std::string type = raw_type.empty() ? "string" : Lower(StripPy(raw_type));
  if (type == "string" || type == "str" || type == "text" || type == "varchar" || type == "char" ||
      type == "enum") {
    return StringJson(value);
  }
  for (const char* p : {"int", "uint", "long", "short", "unsigned"}) {
    if (StartsWith(type, p)) {
      auto i = PyIntText(value);
      return i ? *i : StringJson(value);
    }
  }
  if (StartsWith(type, "num") || StartsWith(type, "float")) {
    auto f = PyFloat(value);
    if (!f) return StringJson(value);
    bool maybe_int =
        value.find('.') == std::string::npos && Lower(value).find('e') == std::string::npos;
    if (maybe_int && std::floor(*f) == *f) return IntegralDoubleText(*f);
    return PyFloatRepr(*f);
  }
  if (type == "boolean" || type == "bool" || type == "binary") {
    return Lower(value) == "true" ? "true" : "false";
  }
  if (type == "object" || type == "array" || type == "arr" || StartsWith(type, "dict") ||
      StartsWith(type, "list")) {
    if (auto canonical = CanonicalJson(value)) return *canonical;
  }
  PyLiteral literal = ParsePyLiteral(value);
  if (literal.ok()) return PyJsonDumps(literal.value);
  return StringJson(value);
}

std::string ConvertGlmValue(const std::string& value, const std::string& type) {
  // parse_arguments: JSON, then JSON after unescaping, then (strings) the raw text, then a
  // Python literal, then the raw text.
  std::optional<Json> parsed = PyJsonLoads(value);
  if (!parsed) {
    size_t end = 0;
    std::string wrapped;
    wrapped.reserve(value.size() + 2);
    wrapped.push_back('"');
    wrapped.append(value);
    wrapped.push_back('"');
    if (auto inner = ScanJsonString(wrapped, 0, &end); inner && end == wrapped.size()) {
      parsed = PyJsonLoads(*inner);
    }
  }
  if (parsed) {
    if (type == "number" && parsed->is_string()) {
      std::string number = ConvertToNumber(parsed->get<std::string>());
      if (auto v = PyJsonLoads(number)) parsed = *v;
    }
  } else if (type == "string") {
    if (value.size() >= 2 && value.front() == value.back() &&
        (value.front() == '"' || value.front() == '\'')) {
      return StringJson(value.substr(1, value.size() - 2));
    }
    return StringJson(value);
  } else {
    PyLiteral literal = ParsePyLiteral(value);
    if (literal.ok()) {
      parsed = literal.value;
    } else {
      return StringJson(value);
    }
  }
  if (type == "string") {
    if (parsed->is_string()) return PyJsonDumps(*parsed);
    if (parsed->is_structured()) return StringJson(PyJsonDumps(*parsed));
    return StringJson(PyStr(*parsed));
  }
  return PyJsonDumps(*parsed);
}

std::string ConvertStep3Value(const std::string& value, const Json* declared_type) {
  bool parse = declared_type && !declared_type->is_null() &&
               !(declared_type->is_string() && declared_type->get<std::string>() == "string") &&
               !(declared_type->is_string() && declared_type->get<std::string>().empty());
  if (!parse) return StringJson(value);
  if (auto json = PyJsonLoads(value)) return PyJsonDumps(*json);
  PyLiteral literal = ParsePyLiteral(value);
  if (literal.ok()) return PyJsonDumps(literal.value);
  return StringJson(value);
}

std::string JsonObjectText(const std::vector<std::pair<std::string, std::string>>& pairs,
                           bool close) {
  std::vector<std::pair<std::string, std::string>> merged;
  for (const auto& [key, value] : pairs) {
    bool replaced = false;
    for (auto& [k, v] : merged) {
      if (k == key) {
        v = value;
        replaced = true;
      }
    }
    if (!replaced) merged.emplace_back(key, value);
  }
  std::string out = "{";
  for (size_t i = 0; i < merged.size(); ++i) {
    if (i) out += ", ";
    out.append(StringJson(merged[i].first));
    out.append(": ");
    out.append(merged[i].second);
  }
  if (close) out += "}";
  return out;
}

}  // namespace radixserve::chat
