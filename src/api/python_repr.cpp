#include "api/python_repr.h"

#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "tokenizer/utf8.h"

namespace radixserve::api {

namespace {

using Json = nlohmann::ordered_json;

std::vector<char32_t> DecodeUtf8(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    char32_t cp = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    bool ok = len > 0 && i + len <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      ok = (c & 0xC0) == 0x80;
      cp = (cp << 6) | (c & 0x3F);
    }
    if (!ok) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

// str.isprintable() for the code points a prompt or output plausibly holds: controls, the
// separators other than ' ', format characters, surrogates and private use are not printable.
bool IsPrintable(char32_t cp) {
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) return false;
  if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F)) {
    return false;
  }
  if ((cp >= 0x205F && cp <= 0x2064) || cp == 0x3000 || cp == 0xFEFF) return false;
  if ((cp >= 0xD800 && cp <= 0xF8FF) || cp == 0xFFFE || cp == 0xFFFF) return false;
  if (cp >= 0xF0000 || cp > 0x10FFFF) return false;
  return true;
}

std::string ReprOf(const std::vector<char32_t>& cps, size_t begin, size_t end) {
  bool has_single = false, has_double = false;
  for (size_t i = begin; i < end; ++i) {
    has_single |= cps[i] == U'\'';
    has_double |= cps[i] == U'"';
  }
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (size_t i = begin; i < end; ++i) {
    const char32_t cp = cps[i];
    if (cp == U'\\') {
      out += "\\\\";
    } else if (cp == static_cast<char32_t>(quote)) {
      out += '\\';
      out += quote;
    } else if (cp == U'\n') {
      out += "\\n";
    } else if (cp == U'\r') {
      out += "\\r";
    } else if (cp == U'\t') {
      out += "\\t";
    } else if (IsPrintable(cp)) {
      tokenizer::AppendUtf8(out, static_cast<char32_t>(cp));
    } else if (cp <= 0xFF) {
      out += fmt::format("\\x{:02x}", static_cast<uint32_t>(cp));
    } else if (cp <= 0xFFFF) {
      out += fmt::format("\\u{:04x}", static_cast<uint32_t>(cp));
    } else {
      out += fmt::format("\\U{:08x}", static_cast<uint32_t>(cp));
    }
  }
  out += quote;
  return out;
}

// Python's str() of a value that is not truncated any further (list elements).
std::string PyStr(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "None";
    case Json::value_t::boolean:
      return value.get<bool>() ? "True" : "False";
    case Json::value_t::string:
      return PyRepr(value.get_ref<const std::string&>());
    case Json::value_t::number_float: {
      const double d = value.get<double>();
      if (d != d) return "nan";
      if (d == std::numeric_limits<double>::infinity()) return "inf";
      if (d == -std::numeric_limits<double>::infinity()) return "-inf";
      return value.dump();
    }
    case Json::value_t::array: {
      std::string out = "[";
      for (size_t i = 0; i < value.size(); ++i) out += (i ? ", " : "") + PyStr(value[i]);
      return out + "]";
    }
    case Json::value_t::object: {
      std::string out = "{";
      bool first = true;
      for (const auto& [key, item] : value.items()) {
        out += (first ? "" : ", ") + PyRepr(key) + ": " + PyStr(item);
        first = false;
      }
      return out + "}";
    }
    default:
      return value.dump();
  }
}

std::string ListSlice(const Json& list, size_t begin, size_t end) {
  std::string out = "[";
  for (size_t i = begin; i < end; ++i) out += (i > begin ? ", " : "") + PyStr(list[i]);
  return out + "]";
}

}  // namespace

std::string PyRepr(std::string_view utf8) {
  auto cps = DecodeUtf8(utf8);
  return ReprOf(cps, 0, cps.size());
}

std::string PyReprTruncated(const Json& value, size_t max_length,
                            const std::set<std::string>& skip_names) {
  const size_t half = max_length / 2;
  if (value.is_string()) {
    auto cps = DecodeUtf8(value.get_ref<const std::string&>());
    if (cps.size() <= max_length) return ReprOf(cps, 0, cps.size());
    // data[-half:] is the whole string when half == 0.
    const size_t tail = half == 0 ? 0 : cps.size() - half;
    return ReprOf(cps, 0, half) + " ... " + ReprOf(cps, tail, cps.size());
  }
  if (value.is_array()) {
    if (value.size() <= max_length) return PyStr(value);
    const size_t tail = half == 0 ? 0 : value.size() - half;
    return ListSlice(value, 0, half) + " ... " + ListSlice(value, tail, value.size());
  }
  if (value.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [key, item] : value.items()) {
      if (skip_names.count(key)) continue;
      out += (first ? "" : ", ") + PyRepr(key) + ": " + PyReprTruncated(item, max_length);
      first = false;
    }
    return out + "}";
  }
  return PyStr(value);
}

std::string PyDataclassRepr(std::string_view name, const Json& fields, size_t max_length,
                            const std::set<std::string>& skip_names) {
  std::string out(name);
  out += '(';
  bool first = true;
  for (const auto& [key, item] : fields.items()) {
    if (skip_names.count(key)) continue;
    out += (first ? "" : ", ") + key + "=" + PyReprTruncated(item, max_length);
    first = false;
  }
  return out + ")";
}

}  // namespace radixserve::api
