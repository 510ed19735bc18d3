#include "api/pickle_writer.h"

#include <cstdint>
#include <cstring>

namespace radixserve::api::pickle {

namespace {

using Json = nlohmann::ordered_json;

void AppendLe32(uint32_t v, std::string& out) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}

// LONG1: length byte, then little-endian two's complement.
void AppendLong(__int128 v, std::string& out) {
  char bytes[17];
  int n = 0;
  do {
    bytes[n++] = static_cast<char>(static_cast<uint8_t>(v & 0xFF));
    v >>= 8;
    // Stop once the rest is pure sign extension of the last byte written.
  } while (!((v == 0 && (bytes[n - 1] & 0x80) == 0) || (v == -1 && (bytes[n - 1] & 0x80) != 0)));
  out += '\x8a';
  out += static_cast<char>(n);
  out.append(bytes, n);
}

void AppendInt(__int128 v, std::string& out) {
  if (v >= INT32_MIN && v <= INT32_MAX) {
    out += 'J';  // BININT
    AppendLe32(static_cast<uint32_t>(static_cast<int32_t>(v)), out);
  } else {
    AppendLong(v, out);
  }
}

// Copies `s`, replacing each byte that does not start a well-formed UTF-8 sequence by U+FFFD.
std::string ValidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    size_t len = b < 0x80                   ? 1
                 : (b >= 0xC2 && b <= 0xDF) ? 2
                 : (b >> 4) == 0xE          ? 3
                 : (b >= 0xF0 && b <= 0xF4) ? 4
                                            : 0;
    bool ok = len > 0 && i + len <= s.size();
    uint32_t cp = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    for (size_t k = 1; ok && k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      ok = (c & 0xC0) == 0x80;
      cp = (cp << 6) | (c & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are rejected by Python's decoder.
    if (ok && len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ok = false;
    if (ok && len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ok = false;
    if (!ok) {
      out += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    out.append(s.substr(i, len));
    i += len;
  }
  return out;
}

}  // namespace

void EncodeFloat(double value, char out[9]) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  out[0] = 'G';  // BINFLOAT: big-endian IEEE 754 double
  for (int i = 0; i < 8; ++i) out[1 + i] = static_cast<char>((bits >> (56 - 8 * i)) & 0xFF);
}

void AppendFloat(double value, std::string& out) {
  char bytes[9];
  EncodeFloat(value, bytes);
  out.append(bytes, sizeof bytes);
}

void AppendString(std::string_view utf8, std::string& out) {
  const std::string valid = ValidUtf8(utf8);
  out += 'X';  // BINUNICODE
  AppendLe32(static_cast<uint32_t>(valid.size()), out);
  out += valid;
}

void AppendValue(const Json& value, std::string& out) {
  switch (value.type()) {
    case Json::value_t::null:
    case Json::value_t::discarded:
      out += 'N';
      return;
    case Json::value_t::boolean:
      out += value.get<bool>() ? '\x88' : '\x89';
      return;
    case Json::value_t::number_integer:
      AppendInt(value.get<int64_t>(), out);
      return;
    case Json::value_t::number_unsigned:
      AppendInt(value.get<uint64_t>(), out);
      return;
    case Json::value_t::number_float:
      AppendFloat(value.get<double>(), out);
      return;
    case Json::value_t::string:
      AppendString(value.get_ref<const std::string&>(), out);
      return;
    case Json::value_t::array:
      out += kEmptyList;
      if (value.empty()) return;
      out += kMark;
      for (const Json& item : value) AppendValue(item, out);
      out += 'e';  // APPENDS
      return;
    case Json::value_t::object:
      out += kEmptyDict;
      if (value.empty()) return;
      out += kMark;
      for (const auto& [key, item] : value.items()) {
        AppendString(key, out);
        AppendValue(item, out);
      }
      out += kSetItems;
      return;
    case Json::value_t::binary:
      out += 'N';
      return;
  }
}

std::string Dumps(const Json& value) {
  std::string out(kProto2, 2);
  AppendValue(value, out);
  out += kStop;
  return out;
}

}  // namespace radixserve::api::pickle
