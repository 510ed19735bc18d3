#include "sampling/sampling_params.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string_view>

#include "sampling/py_format.h"

namespace radixserve::sampling {
namespace {

using nlohmann::json;

// A client's value in an error message, cut short: never echo an unbounded value back.
std::string Preview(const json& value) {
  constexpr size_t kMaxChars = 80;
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > kMaxChars) text = text.substr(0, kMaxChars) + "...";
  return text;
}

Status TypeError(std::string_view key, std::string_view expected, const json& value) {
  return InvalidArgument("sampling_params." + std::string(key) + " must be " +
                         std::string(expected) + ", got " + Preview(value) + ".");
}

Status ReadDouble(std::string_view key, const json& value, double& out, bool& is_integer,
                  const SamplingJsonOptions& options) {
  if (value.is_null()) return Status::Ok();  // keep the default, like SGLang's None handling
  if (!value.is_number()) return TypeError(key, "a number", value);
  out = value.get<double>();
  is_integer = value.is_number_integer() && !options.float_fields_are_floats;
  return Status::Ok();
}

Status ReadInt(std::string_view key, const json& value, int64_t& out) {
  if (value.is_number_integer()) {
    out = value.is_number_unsigned()
              ? static_cast<int64_t>(std::min<uint64_t>(value.get<uint64_t>(), INT64_MAX))
              : value.get<int64_t>();
    return Status::Ok();
  }
  if (value.is_number_float()) {
    const double d = value.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18) {
      out = static_cast<int64_t>(d);
      return Status::Ok();
    }
  }
  return TypeError(key, "an integer", value);
}

Status ReadBool(std::string_view key, const json& value, bool& out) {
  if (value.is_null()) return Status::Ok();
  if (!value.is_boolean()) return TypeError(key, "a boolean", value);
  out = value.get<bool>();
  return Status::Ok();
}

Status ReadOptionalString(std::string_view key, const json& value,
                          std::optional<std::string>& out) {
  if (value.is_null()) return Status::Ok();
  if (!value.is_string()) return TypeError(key, "a string", value);
  out = value.get<std::string>();
  return Status::Ok();
}

// `stop` / `stop_regex`: a string or a list of strings.
Status ReadStringList(std::string_view key, const json& value, std::vector<std::string>& out) {
  if (value.is_null()) return Status::Ok();
  if (value.is_string()) {
    out.push_back(value.get<std::string>());
    return Status::Ok();
  }
  if (!value.is_array()) return TypeError(key, "a string or a list of strings", value);
  for (const json& item : value) {
    if (!item.is_string()) return TypeError(key, "a string or a list of strings", value);
    out.push_back(item.get<std::string>());
  }
  return Status::Ok();
}

Status ReadStopTokenIds(const json& value, std::vector<int32_t>& out) {
  if (value.is_null()) return Status::Ok();
  if (!value.is_array()) return TypeError("stop_token_ids", "a list of integers", value);
  for (const json& item : value) {
    if (item.is_null()) continue;  // SGLang drops None entries
    int64_t id = 0;
    if (!ReadInt("stop_token_ids", item, id).ok() || id < INT32_MIN || id > INT32_MAX) {
      return TypeError("stop_token_ids", "a list of integers", value);
    }
    out.push_back(static_cast<int32_t>(id));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return Status::Ok();
}

// Python's int(str) for base 10: surrounding whitespace, an optional sign, digits with single
// underscores between them.
std::optional<int64_t> ParsePyInt(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  bool negative = false;
  if (!text.empty() && (text.front() == '+' || text.front() == '-')) {
    negative = text.front() == '-';
    text.remove_prefix(1);
  }
  if (text.empty() || text.front() == '_' || text.back() == '_') return std::nullopt;
  int64_t value = 0;
  char previous = 0;
  for (char c : text) {
    if (c == '_') {
      if (previous == '_') return std::nullopt;
    } else if (c >= '0' && c <= '9') {
      // Saturate: anything this large is outside every vocabulary anyway.
      value = value > (INT64_MAX - 9) / 10 ? INT64_MAX - 9 : value * 10 + (c - '0');
    } else {
      return std::nullopt;
    }
    previous = c;
  }
  return negative ? -value : value;
}

Status ReadLogitBias(const json& value, std::vector<LogitBiasEntry>& out) {
  if (value.is_null()) return Status::Ok();
  if (!value.is_object()) return TypeError("logit_bias", "an object", value);
  for (const auto& [key, bias] : value.items()) {
    if (!bias.is_number()) return TypeError("logit_bias", "an object of numbers", value);
    out.push_back({key, ParsePyInt(key), bias.get<double>()});
  }
  return Status::Ok();
}

}  // namespace

Expected<SamplingParams> SamplingParams::FromJson(const json& object,
                                                  const SamplingJsonOptions& options) {
  SamplingParams p;
  if (object.is_null()) return p;
  if (!object.is_object()) {
    return InvalidArgument("sampling_params must be an object, got " + Preview(object) + ".");
  }
  for (const auto& [key, value] : object.items()) {
    auto& lit = p.integer_literals;
    Status s;
    if (key == "max_new_tokens") {
      if (value.is_null()) {
        p.max_new_tokens.reset();
      } else {
        int64_t v = 0;
        s = ReadInt(key, value, v);
        p.max_new_tokens = v;
      }
    } else if (key == "stop") {
      s = ReadStringList(key, value, p.stop);
    } else if (key == "stop_token_ids") {
      s = ReadStopTokenIds(value, p.stop_token_ids);
    } else if (key == "stop_regex") {
      s = ReadStringList(key, value, p.stop_regex);
    } else if (key == "temperature") {
      s = ReadDouble(key, value, p.temperature, lit.temperature, options);
    } else if (key == "top_p") {
      s = ReadDouble(key, value, p.top_p, lit.top_p, options);
    } else if (key == "top_k") {
      if (!value.is_null()) s = ReadInt(key, value, p.top_k);
    } else if (key == "min_p") {
      s = ReadDouble(key, value, p.min_p, lit.min_p, options);
    } else if (key == "frequency_penalty") {
      s = ReadDouble(key, value, p.frequency_penalty, lit.frequency_penalty, options);
    } else if (key == "presence_penalty") {
      s = ReadDouble(key, value, p.presence_penalty, lit.presence_penalty, options);
    } else if (key == "repetition_penalty") {
      s = ReadDouble(key, value, p.repetition_penalty, lit.repetition_penalty, options);
    } else if (key == "min_new_tokens") {
      if (!value.is_null()) s = ReadInt(key, value, p.min_new_tokens);
    } else if (key == "n") {
      if (!value.is_null()) s = ReadInt(key, value, p.n);
    } else if (key == "json_schema") {
      s = ReadOptionalString(key, value, p.json_schema);
    } else if (key == "regex") {
      s = ReadOptionalString(key, value, p.regex);
    } else if (key == "ebnf") {
      s = ReadOptionalString(key, value, p.ebnf);
    } else if (key == "structural_tag") {
      s = ReadOptionalString(key, value, p.structural_tag);
    } else if (key == "ignore_eos") {
      s = ReadBool(key, value, p.ignore_eos);
    } else if (key == "skip_special_tokens") {
      s = ReadBool(key, value, p.skip_special_tokens);
    } else if (key == "spaces_between_special_tokens") {
      s = ReadBool(key, value, p.spaces_between_special_tokens);
    } else if (key == "no_stop_trim") {
      s = ReadBool(key, value, p.no_stop_trim);
    } else if (key == "custom_params") {
      if (!value.is_null() && !value.is_object()) s = TypeError(key, "an object", value);
      p.custom_params = value;
    } else if (key == "stream_interval") {
      if (!value.is_null()) {
        int64_t v = 0;
        s = ReadInt(key, value, v);
        p.stream_interval = v;
      }
    } else if (key == "logit_bias") {
      s = ReadLogitBias(value, p.logit_bias);
    } else if (key == "sampling_seed") {
      if (value.is_null()) {
        p.sampling_seed_is_null = true;
      } else {
        int64_t v = 0;
        if (value.is_number_unsigned()) {
          p.sampling_seed = value.get<uint64_t>();
        } else {
          s = ReadInt(key, value, v);
          p.sampling_seed = static_cast<uint64_t>(v);
        }
      }
    } else {
      return InvalidArgument("SamplingParams.__init__() got an unexpected keyword argument '" +
                             key + "'");
    }
    RADIX_RETURN_IF_ERROR(s);
  }

  // SGLang's constructor normalization.
  if (p.temperature >= 0.0 && p.temperature < kSamplingEps) {
    p.temperature = 1.0;
    p.integer_literals.temperature = false;
    p.top_k = 1;
  }
  if (p.top_k == -1) p.top_k = kTopKAll;
  return p;
}

Status SamplingParams::Verify(int64_t vocab_size) const {
  const auto& lit = integer_literals;
  if (temperature < 0.0 || std::isnan(temperature)) {
    return InvalidArgument("temperature must be non-negative, got " +
                           FormatPyNumber(temperature, lit.temperature) + ".");
  }
  if (!(top_p > 0.0 && top_p <= 1.0)) {
    return InvalidArgument("top_p must be in (0, 1], got " + FormatPyNumber(top_p, lit.top_p) +
                           ".");
  }
  if (!(min_p >= 0.0 && min_p <= 1.0)) {
    return InvalidArgument("min_p must be in [0, 1], got " + FormatPyNumber(min_p, lit.min_p) +
                           ".");
  }
  if (top_k < 1) {
    return InvalidArgument("top_k must be -1 (disable) or at least 1, got " +
                           std::to_string(top_k) + ".");
  }
  if (!(frequency_penalty >= -2.0 && frequency_penalty <= 2.0)) {
    return InvalidArgument("frequency_penalty must be in [-2, 2], got " +
                           FormatPyNumber(frequency_penalty, lit.frequency_penalty) + ".");
  }
  if (!(presence_penalty >= -2.0 && presence_penalty <= 2.0)) {
    return InvalidArgument("presence_penalty must be in [-2, 2], got " +
                           FormatPyNumber(presence_penalty, lit.presence_penalty) + ".");
  }
  if (!(repetition_penalty >= 0.0 && repetition_penalty <= 2.0)) {
    return InvalidArgument("repetition_penalty must be in [0, 2], got " +
                           FormatPyNumber(repetition_penalty, lit.repetition_penalty) + ".");
  }
  if (min_new_tokens < 0) {
    return InvalidArgument("min_new_tokens must be in [0, max_new_tokens], got " +
                           std::to_string(min_new_tokens) + ".");
  }
  if (max_new_tokens) {
    if (*max_new_tokens < 0) {
      return InvalidArgument("max_new_tokens must be at least 0, got " +
                             std::to_string(*max_new_tokens) + ".");
    }
    if (min_new_tokens > *max_new_tokens) {
      return InvalidArgument("min_new_tokens must be in [0, max_new_tokens(" +
                             std::to_string(*max_new_tokens) + ")], got " +
                             std::to_string(min_new_tokens) + ".");
    }
  }
  for (const LogitBiasEntry& entry : logit_bias) {
    if (!entry.token_id) {
      return InvalidArgument("invalid literal for int() with base 10: '" + entry.key + "'");
    }
    if (*entry.token_id < 0 || *entry.token_id >= vocab_size) {
      return InvalidArgument("logit_bias must has keys in [0, " + std::to_string(vocab_size - 1) +
                             "], got " + entry.key + ".");
    }
  }
  if (sampling_seed_is_null) return InvalidArgument("sampling_seed should not be None");
  if ((json_schema ? 1 : 0) + (regex ? 1 : 0) + (ebnf ? 1 : 0) > 1) {
    return InvalidArgument("Only one of regex, json_schema, or ebnf can be set.");
  }
  if (n < 1) return InvalidArgument("n must be at least 1, got " + std::to_string(n) + ".");
  return Status::Ok();
}

}  // namespace radixserve::sampling
