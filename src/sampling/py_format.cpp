#include "sampling/py_format.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace radixserve::sampling {

std::string FormatPyFloat(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == 0.0) return std::signbit(value) ? "-0.0" : "0.0";

  // Shortest round-trip digits in scientific form, e.g. "-1.2345e-05".
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(end - buf));
  const size_t e_pos = sci.find('e');
  const bool negative = sci.front() == '-';
  std::string_view mantissa = sci.substr(negative ? 1 : 0, e_pos - (negative ? 1 : 0));
  const int exponent = std::atoi(std::string(sci.substr(e_pos + 1)).c_str());

  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits.push_back(c);
  }

  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out.push_back(digits[0]);
    if (digits.size() > 1) {
      out.push_back('.');
      out.append(digits, 1);
    }
    out.append(exponent < 0 ? "e-" : "e+");
    const int abs_exp = std::abs(exponent);
    if (abs_exp < 10) out += "0";
    out += std::to_string(abs_exp);
    return out;
  }
  const int point = exponent + 1;  // digits before the decimal point
  if (point <= 0) {
    out.append("0.");
    out.append(static_cast<size_t>(-point), '0');
    out.append(digits);
  } else if (static_cast<size_t>(point) >= digits.size()) {
    out.append(digits);
    out.append(static_cast<size_t>(point) - digits.size(), '0');
    out.append(".0");
  } else {
    out.append(digits, 0, static_cast<size_t>(point));
    out.push_back('.');
    out.append(digits, static_cast<size_t>(point));
  }
  return out;
}

std::string FormatPyNumber(double value, bool is_integer) {
  if (is_integer && std::isfinite(value) && std::fabs(value) < 9.2e18) {
    return std::to_string(static_cast<int64_t>(value));
  }
  return FormatPyFloat(value);
}

}  // namespace radixserve::sampling
