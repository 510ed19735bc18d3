#include "sampling/sampling_defaults.h"

#include <string>

namespace radixserve::sampling {

using nlohmann::json;

Expected<SamplingDefaultsSource> ParseSamplingDefaultsSource(std::string_view text) {
  if (text == "model") return SamplingDefaultsSource::kModel;
  if (text == "openai") return SamplingDefaultsSource::kOpenAI;
  return InvalidArgument("--sampling-defaults must be one of 'openai', 'model', got '" +
                         std::string(text) + "'");
}

Expected<json> ModelSamplingDefaults(const json& generation_config, SamplingDefaultsSource source) {
  json defaults = json::object();
  if (source != SamplingDefaultsSource::kModel || generation_config.is_null()) return defaults;
  if (!generation_config.is_object()) {
    return DataLoss("generation_config.json must hold a JSON object");
  }
  for (const char* key : {"repetition_penalty", "temperature", "top_k", "top_p", "min_p"}) {
    auto it = generation_config.find(key);
    if (it == generation_config.end() || it->is_null()) continue;
    if (!it->is_number()) {
      return DataLoss(std::string("generation_config.json: ") + key + " must be a number");
    }
    defaults[key] = *it;
  }
  return defaults;
}

Expected<json> ParsePreferredSamplingParams(std::string_view text) {
  if (text.empty()) return json::object();
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return InvalidArgument("--preferred-sampling-params must be a JSON object, got '" +
                           std::string(text) + "'");
  }
  return parsed;
}

json MergeSamplingDefaults(const json& defaults, const json& request) {
  json merged = defaults.is_object() ? defaults : json::object();
  if (!request.is_object()) return merged;
  for (const auto& [key, value] : request.items()) {
    if (value.is_null() && merged.contains(key)) continue;
    merged[key] = value;
  }
  return merged;
}

}  // namespace radixserve::sampling
