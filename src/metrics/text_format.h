// Lexical pieces of the Prometheus text exposition format 0.0.4: number rendering, escaping and
// name validation. Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace radixserve::metrics {

// Renders a sample value or an `le` bound the way the official Python client does, so scrapes and
// dashboards written against SGLang see identical strings: "+Inf", "-Inf", "NaN"; otherwise the
// shortest round-trip digits in Python repr() style ("0.1", "2.0", "1e-05", "1e+16"), except that
// positive fixed-notation numbers with 7 or more integer digits switch to the client's Go-style
// exponent form (1100000.0 -> "1.1e+06", 12345678.0 -> "1.2345678e+07").
std::string FormatValue(double value);

// Label value escaping: backslash, double quote and line feed become \\, \" and \n.
std::string EscapeLabelValue(std::string_view value);

// HELP text escaping: backslash and line feed become \\ and \n.
std::string EscapeHelp(std::string_view help);

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool IsValidMetricName(std::string_view name);

// [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__" (reserved) and not "le" (used by histograms).
bool IsValidLabelName(std::string_view name);

}  // namespace radixserve::metrics
