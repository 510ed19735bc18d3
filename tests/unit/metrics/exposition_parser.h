// A small, strict parser of the Prometheus text format 0.0.4 for the metrics tests: it reads our
// exposition back so tests assert on structure and values, not on our own output bytes.
// Parse() reports malformed input as a non-empty `error`.
#pragma once

#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace radixserve::metrics::testing {

struct ParsedSample {
  std::string name;
  std::map<std::string, std::string> labels;  // unescaped values
  std::vector<std::string> label_order;       // as written
  double value = 0;
};

struct ParsedFamily {
  std::string name, help, type;
  std::vector<ParsedSample> samples;
};

struct ParsedExposition {
  std::vector<ParsedFamily> families;  // in order of appearance
  std::string error;

  const ParsedFamily* Find(const std::string& name) const {
    for (const auto& f : families) {
      if (f.name == name) return &f;
    }
    return nullptr;
  }
};

inline bool ParseNumber(const std::string& text, double& out) {
  if (text == "+Inf") return out = 1.0 / 0.0, true;
  if (text == "-Inf") return out = -1.0 / 0.0, true;
  if (text == "NaN") return out = 0.0 / 0.0, true;
  char* end = nullptr;
  out = std::strtod(text.c_str(), &end);
  return !text.empty() && end == text.c_str() + text.size();
}

inline std::string UnescapeHelp(const std::string& s, bool quotes) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      const char n = s[++i];
      if (n == 'n') {
        out += '\n';
      } else if (n == '\\' || (quotes && n == '"')) {
        out += n;
      } else {
        out += '\\';
        out += n;
      }
    } else {
      out += s[i];
    }
  }
  return out;
}

inline bool IsSampleOf(const std::string& sample, const ParsedFamily& f) {
  if (sample == f.name) return f.type != "histogram";
  if (f.type != "histogram") return false;
  for (const char* suffix : {"_bucket", "_count", "_sum"}) {
    if (sample == f.name + suffix) return true;
  }
  return false;
}

inline ParsedExposition Parse(const std::string& text) {
  ParsedExposition out;
  auto fail = [&](const std::string& why, const std::string& line) {
    if (out.error.empty()) out.error = why + ": [" + line + "]";
  };
  if (!text.empty() && text.back() != '\n') fail("no final newline", "");
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0) {
      const std::string rest = line.substr(7);
      const size_t space = rest.find(' ');
      if (space == std::string::npos) return fail("HELP without text", line), out;
      ParsedFamily f;
      f.name = rest.substr(0, space);
      f.help = UnescapeHelp(rest.substr(space + 1), false);
      if (out.Find(f.name)) return fail("family repeated", line), out;
      out.families.push_back(f);
    } else if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream words(line.substr(7));
      std::string name, type, extra;
      words >> name >> type;
      if (out.families.empty() || out.families.back().name != name || words >> extra) {
        return fail("TYPE not right after its HELP", line), out;
      }
      if (type != "counter" && type != "gauge" && type != "histogram") {
        return fail("unexpected type", line), out;
      }
      out.families.back().type = type;
    } else {
      if (out.families.empty() || out.families.back().type.empty()) {
        return fail("sample before HELP/TYPE", line), out;
      }
      ParsedSample s;
      size_t i = 0;
      while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
      s.name = line.substr(0, i);
      if (i < line.size() && line[i] == '{') {
        ++i;
        while (i < line.size() && line[i] != '}') {
          const size_t eq = line.find("=\"", i);
          if (eq == std::string::npos) return fail("bad label", line), out;
          const std::string key = line.substr(i, eq - i);
          std::string raw;
          size_t j = eq + 2;
          for (; j < line.size() && line[j] != '"'; ++j) {
            if (line[j] == '\\' && j + 1 < line.size()) raw += line[j++];
            raw += line[j];
          }
          if (j >= line.size()) return fail("unterminated label value", line), out;
          if (s.labels.count(key)) return fail("label repeated", line), out;
          s.labels[key] = UnescapeHelp(raw, true);
          s.label_order.push_back(key);
          i = j + 1;
          if (i < line.size() && line[i] == ',') ++i;
        }
        if (i >= line.size()) return fail("unterminated labels", line), out;
        ++i;
      }
      if (i >= line.size() || line[i] != ' ') return fail("no value", line), out;
      if (!ParseNumber(line.substr(i + 1), s.value)) return fail("bad value", line), out;
      if (!IsSampleOf(s.name, out.families.back())) {
        return fail("sample of other family", line), out;
      }
      out.families.back().samples.push_back(s);
    }
  }
  return out;
}

}  // namespace radixserve::metrics::testing
