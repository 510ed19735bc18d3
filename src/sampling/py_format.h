// Number formatting that matches Python's str()/repr(), so validation messages read exactly like
// SGLang's f-strings ("got 0.5.", "got -1.", "got 1e-07.").
// Pure functions; thread-safe.
#pragma once

#include <string>

namespace radixserve::sampling {

// Python repr(float): shortest round-trip digits; fixed notation when the decimal exponent is in
// [-4, 16), scientific otherwise ("1e-05", "1.5e+16"); integral values keep ".0"; "inf", "-inf",
// "nan".
std::string FormatPyFloat(double value);

// A JSON number as Python would print it after json.loads: an integer literal stays an int
// ("-1"), anything else is a float ("-1.0").
std::string FormatPyNumber(double value, bool is_integer);

}  // namespace radixserve::sampling
