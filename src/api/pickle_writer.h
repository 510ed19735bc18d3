// Python pickle (protocol 2) encoding of JSON values, so that a crash dump written from C++ loads
// with a plain `pickle.load` and no classes: null/bool/int/float/str/list/dict map to
// None/bool/int/float/str/list/dict. Strings must be UTF-8; invalid bytes become U+FFFD.
//
// The Append* functions emit fragments without the PROTO header or STOP, so a caller can
// assemble a larger pickle (a list grown with APPEND) out of pieces serialized at different
// times. No memo opcodes are used, so fragments are position-independent.
//
// Pure functions.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace radixserve::api::pickle {

inline constexpr char kProto2[] = "\x80\x02";  // PROTO 2 (two bytes)
inline constexpr char kMark = '(';
inline constexpr char kEmptyList = ']';
inline constexpr char kEmptyDict = '}';
inline constexpr char kAppend = 'a';
inline constexpr char kSetItems = 'u';
inline constexpr char kTuple = 't';
inline constexpr char kStop = '.';

void AppendValue(const nlohmann::ordered_json& value, std::string& out);
void AppendString(std::string_view utf8, std::string& out);
void AppendFloat(double value, std::string& out);

// The 9 bytes of a BINFLOAT opcode, written into `out` (no allocation: usable from a signal
// handler).
void EncodeFloat(double value, char out[9]);

// A complete pickle of one value (PROTO 2 ... STOP).
std::string Dumps(const nlohmann::ordered_json& value);

}  // namespace radixserve::api::pickle
