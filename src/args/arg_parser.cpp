#include "args/arg_parser.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "args/arg_table.h"
#include "args/config_file.h"

namespace radixserve::args {
namespace {

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::optional<bool> ParseBoolWord(std::string_view word) {
  std::string lower = Lower(word);
  if (lower == "true" || lower == "1" || lower == "yes" || lower == "on") return true;
  if (lower == "false" || lower == "0" || lower == "no" || lower == "off") return false;
  return std::nullopt;
}

std::optional<int64_t> ParseIntWord(std::string_view word) {
  int64_t value = 0;
  const char* begin = word.data();
  const char* end = word.data() + word.size();
  if (begin != end && *begin == '+') ++begin;
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr != end || begin == end) return std::nullopt;
  return value;
}

std::optional<double> ParseFloatWord(std::string_view word) {
  std::string text(word);
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || std::isnan(value)) return std::nullopt;
  return value;
}

bool IsListType(ArgType type) {
  return type == ArgType::kStringList || type == ArgType::kIntList || type == ArgType::kFloatList;
}

std::string ChoiceList(const ArgSpec& spec) {
  std::string out;
  for (std::string_view choice : spec.choices) {
    if (!out.empty()) out += ", ";
    out += fmt::format("'{}'", choice);
  }
  return out;
}

// A word that starts another option rather than being a value: "--x", or "-x" that is not a
// negative number.
bool LooksLikeOption(std::string_view word) {
  if (word.size() < 2 || word[0] != '-') return false;
  if (word[1] == '-') return true;
  return !ParseFloatWord(word).has_value();
}

// Values that LightLLM and RTP-LLM spell differently from SGLang, read as SGLang's value so their
// launch commands work unchanged. Matched case-insensitively.
struct ValueSynonym {
  ArgKey arg;
  std::string_view from;
  std::string_view to;
};
constexpr ValueSynonym kValueSynonyms[] = {
    {key::kTokenizerMode, "fast", "auto"},         // LightLLM: its default tokenizer mode
    {key::kSamplingBackend, "triton", "pytorch"},  // LightLLM: all map to the cpu sampler
    {key::kSamplingBackend, "sglang_kernel", "pytorch"},
    {key::kLogLevel, "warn", "warning"},  // RTP-LLM: Python logging level names
    {key::kLogLevel, "debug", "debug"},
    {key::kLogLevel, "info", "info"},
    {key::kLogLevel, "warning", "warning"},
    {key::kLogLevel, "error", "error"},
    {key::kLogLevel, "critical", "critical"},
};

std::string ApplyValueSynonym(const ArgSpec& spec, const std::string& word) {
  const std::string lower = Lower(word);
  for (const ValueSynonym& synonym : kValueSynonyms) {
    if (synonym.arg == KeyOf(spec) && synonym.from == lower) return std::string(synonym.to);
  }
  return word;
}

Status CheckChoice(const ArgSpec& spec, std::string_view display, std::string_view word) {
  if (spec.choices.empty()) return Status::Ok();
  if (std::find(spec.choices.begin(), spec.choices.end(), word) != spec.choices.end()) {
    return Status::Ok();
  }
  return InvalidArgument(fmt::format("argument {}: invalid choice: '{}' (choose from {})", display,
                                     word, ChoiceList(spec)));
}

Expected<nlohmann::json> ConvertScalar(const ArgSpec& spec, ArgType type, std::string_view display,
                                       const std::string& word) {
  switch (type) {
    case ArgType::kFlag:
    case ArgType::kBool: {
      auto value = ParseBoolWord(word);
      if (!value) {
        return InvalidArgument(fmt::format(
            "argument {}: invalid bool value: '{}' (use true or false)", display, word));
      }
      return nlohmann::json(*value);
    }
    case ArgType::kInt:
    case ArgType::kIntList: {
      auto value = ParseIntWord(word);
      if (!value) {
        return InvalidArgument(fmt::format("argument {}: invalid int value: '{}'", display, word));
      }
      return nlohmann::json(*value);
    }
    case ArgType::kFloat:
    case ArgType::kFloatList: {
      auto value = ParseFloatWord(word);
      if (!value) {
        return InvalidArgument(
            fmt::format("argument {}: invalid float value: '{}'", display, word));
      }
      return nlohmann::json(*value);
    }
    case ArgType::kJson: {
      auto value = nlohmann::json::parse(word, nullptr, /*allow_exceptions=*/false);
      if (value.is_discarded()) {
        return InvalidArgument(fmt::format("argument {}: invalid JSON value: '{}'", display, word));
      }
      return value;
    }
    case ArgType::kString:
    case ArgType::kStringList:
      return nlohmann::json(word);
  }
  (void)spec;
  return Internal("unknown argument type");
}

}  // namespace

std::string DeprecationNotice(const ArgSpec& spec, std::string_view spelling) {
  while (!spelling.empty() && spelling.front() == '-') spelling.remove_prefix(1);
  std::string normalized(spelling);
  std::replace(normalized.begin(), normalized.end(), '_', '-');
  for (const AliasSpec& alias : spec.aliases) {
    std::string name(alias.name);
    std::replace(name.begin(), name.end(), '_', '-');
    if (alias.deprecated && name == normalized) {
      return fmt::format("argument --{} is deprecated; use --{} instead", spelling, spec.name);
    }
  }
  return {};
}

Expected<nlohmann::json> ConvertValue(const ArgSpec& spec, std::string_view display,
                                      const std::vector<std::string>& words) {
  if (IsListType(spec.type)) {
    nlohmann::json list = nlohmann::json::array();
    for (const std::string& given : words) {
      const std::string word = ApplyValueSynonym(spec, given);
      RADIX_RETURN_IF_ERROR(CheckChoice(spec, display, word));
      RADIX_ASSIGN_OR_RETURN(auto value, ConvertScalar(spec, spec.type, display, word));
      list.push_back(std::move(value));
    }
    return list;
  }
  if (words.size() != 1) {
    return InvalidArgument(fmt::format("argument {}: expected one argument", display));
  }
  const std::string word = ApplyValueSynonym(spec, words[0]);
  RADIX_RETURN_IF_ERROR(CheckChoice(spec, display, word));
  return ConvertScalar(spec, spec.type, display, word);
}

Expected<ParsedCommandLine> ParseCommandLine(int argc, const char* const* argv) {
  std::vector<std::string> words;
  for (int i = 1; i < argc; ++i) words.emplace_back(argv[i]);
  return ParseCommandLine(words);
}

Expected<ParsedCommandLine> ParseCommandLine(const std::vector<std::string>& words) {
  ParsedCommandLine parsed;
  struct Given {
    const ArgSpec* spec;
    std::string display;
    nlohmann::json value;
  };
  std::vector<Given> given;
  std::string config_path;

  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (word == "-h" || word == "--help") {
      parsed.action = ParsedCommandLine::Action::kHelp;
      return parsed;
    }
    if (word == "--version") {
      parsed.action = ParsedCommandLine::Action::kVersion;
      return parsed;
    }
    if (word.size() < 3 || word.compare(0, 2, "--") != 0) {
      return InvalidArgument(fmt::format("unrecognized argument: '{}'", word));
    }
    size_t eq = word.find('=');
    std::string display = word.substr(0, eq);
    std::optional<std::string> inline_value;
    if (eq != std::string::npos) inline_value = word.substr(eq + 1);

    const ArgSpec* spec = FindArg(display);
    if (spec == nullptr) {
      return InvalidArgument(
          fmt::format("argument {}: unrecognized argument (see --help)", display));
    }
    if (std::string notice = DeprecationNotice(*spec, display); !notice.empty()) {
      parsed.notices.push_back(std::move(notice));
    }

    std::vector<std::string> values;
    if (inline_value) {
      values.push_back(*inline_value);
    } else if (spec->type == ArgType::kFlag || spec->type == ArgType::kBool) {
      if (i + 1 < words.size() && ParseBoolWord(words[i + 1])) values.push_back(words[++i]);
    } else if (IsListType(spec->type) && !spec->append) {
      while (i + 1 < words.size() && !LooksLikeOption(words[i + 1])) values.push_back(words[++i]);
      if (values.empty()) {
        return InvalidArgument(fmt::format("argument {}: expected at least one argument", display));
      }
    } else {
      if (i + 1 >= words.size() || LooksLikeOption(words[i + 1])) {
        return InvalidArgument(fmt::format("argument {}: expected one argument", display));
      }
      values.push_back(words[++i]);
    }

    nlohmann::json value = true;  // a bare flag
    if (!values.empty()) {
      RADIX_ASSIGN_OR_RETURN(value, ConvertValue(*spec, display, values));
    }
    if (KeyOf(*spec) == key::kConfig) {
      config_path = value.get<std::string>();
    }
    if (spec->append) {
      auto earlier = std::find_if(given.begin(), given.end(),
                                  [spec](const Given& g) { return g.spec == spec; });
      if (earlier != given.end()) {
        for (nlohmann::json& item : value) earlier->value.push_back(std::move(item));
        continue;
      }
    }
    given.push_back({spec, display, std::move(value)});
  }

  // The config file first, so the command line overrides it.
  if (!config_path.empty()) {
    RADIX_RETURN_IF_ERROR(ApplyConfigFile(config_path, parsed.args, parsed.notices));
  }
  for (Given& item : given) {
    parsed.args.Set(KeyOf(*item.spec), std::move(item.value), /*explicitly=*/true);
  }
  for (const ArgSpec& spec : AllArgs()) {
    if (spec.required && parsed.args.IsNull(KeyOf(spec))) {
      return InvalidArgument(fmt::format(
          "argument --{}: the following arguments are required: --{}", spec.name, spec.name));
    }
  }
  return parsed;
}

}  // namespace radixserve::args
