#include "chat/py_json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace radixserve::chat {

void AppendPyJsonEscaped(std::string_view text, std::string& out) {
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
}

std::string PyFloatRepr(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string out;
  size_t i = 0;
  if (sci[0] == '-') {
    out += '-';
    i = 1;
  }
  size_t e_pos = sci.find('e');
  std::string digits;
  for (size_t k = i; k < e_pos; ++k) {
    if (sci[k] != '.') digits += sci[k];
  }
  int exponent = std::atoi(sci.c_str() + e_pos + 1);
  if (exponent >= -4 && exponent < 16) {
    if (exponent >= 0) {
      size_t int_len = static_cast<size_t>(exponent) + 1;
      out.append(digits, 0, std::min(digits.size(), int_len));
      if (digits.size() < int_len) out.append(int_len - digits.size(), '0');
      out.push_back('.');
      if (digits.size() > int_len) {
        out.append(digits, int_len, std::string::npos);
      } else {
        out.push_back('0');
      }
    } else {
      out.append("0.");
      out.append(static_cast<size_t>(-exponent - 1), '0');
      out.append(digits);
    }
  } else {
    out.push_back(digits[0]);
    if (digits.size() > 1) {
      out.push_back('.');
      out.append(digits, 1, std::string::npos);
    }
    char ebuf[16];
    std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out.append(ebuf);
  }
  return out;
}

namespace {

void Dump(const Json& value, std::string& out) {
  switch (value.type()) {
    case Json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, item] : value.items()) {
        if (!first) out += ", ";
        first = false;
        out += '"';
        AppendPyJsonEscaped(key, out);
        out += "\": ";
        Dump(item, out);
      }
      out += '}';
      break;
    }
    case Json::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& item : value) {
        if (!first) out += ", ";
        first = false;
        Dump(item, out);
      }
      out += ']';
      break;
    }
    case Json::value_t::string:
      out += '"';
      AppendPyJsonEscaped(value.get_ref<const std::string&>(), out);
      out += '"';
      break;
    case Json::value_t::number_float:
      out += PyFloatRepr(value.get<double>());
      break;
    case Json::value_t::null:
    case Json::value_t::discarded:
      out += "null";
      break;
    default:  // booleans and integers print the same in both languages
      out += value.dump();
  }
}

}  // namespace

std::string PyJsonDumps(const Json& value) {
  std::string out;
  Dump(value, out);
  return out;
}

std::string PyStr(const Json& value) {
  switch (value.type()) {
    case Json::value_t::string:
      return value.get<std::string>();
    case Json::value_t::boolean:
      return value.get<bool>() ? "True" : "False";
    case Json::value_t::null:
      return "None";
    case Json::value_t::number_float: {
      double v = value.get<double>();
      if (std::isnan(v)) return "nan";
      if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
      return PyFloatRepr(v);
    }
    default:
      return PyJsonDumps(value);
  }
}

}  // namespace radixserve::chat
