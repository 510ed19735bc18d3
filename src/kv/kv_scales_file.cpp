#include "kv/kv_scales_file.h"

#include <cmath>
#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

namespace radixserve::kv {

namespace {

Status Bad(const std::string& path, const std::string& why) {
  return InvalidArgument("--quantization-param-path " + path + ": " + why);
}

}  // namespace

Expected<KvScales> LoadKvScalesFile(const std::string& path, int32_t num_layers,
                                    std::string_view model_type, int32_t tp_rank, int32_t tp_size) {
  std::ifstream in(path);
  if (!in) return Bad(path, "cannot open the file");
  const nlohmann::json doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return Bad(path, "not a JSON object");
  if (doc.contains("model_type") && doc["model_type"].is_string() && !model_type.empty() &&
      doc["model_type"].get<std::string>() != model_type) {
    return Bad(path, "scaling factors for model type '" + doc["model_type"].get<std::string>() +
                         "', but the model is '" + std::string(model_type) + "'");
  }
  if (!doc.contains("kv_cache") || !doc["kv_cache"].is_object()) {
    return Bad(path, "no \"kv_cache\" object");
  }
  const nlohmann::json& kv = doc["kv_cache"];
  if (!kv.contains("dtype") || kv["dtype"] != "float8_e4m3fn") {
    return Bad(path, "kv_cache.dtype must be \"float8_e4m3fn\"");
  }
  if (!kv.contains("scaling_factor") || !kv["scaling_factor"].is_object()) {
    return Bad(path, "no kv_cache.scaling_factor object");
  }
  const nlohmann::json& ranks = kv["scaling_factor"];
  if (ranks.size() != static_cast<size_t>(tp_size)) {
    return Bad(path, "scaling factors for " + std::to_string(ranks.size()) +
                         " tensor-parallel ranks, but --tp-size is " + std::to_string(tp_size));
  }
  const std::string rank_key = std::to_string(tp_rank);
  if (!ranks.contains(rank_key) || !ranks[rank_key].is_object()) {
    return Bad(path, "no scaling factors for tensor-parallel rank " + rank_key);
  }
  const nlohmann::json& layers = ranks[rank_key];
  KvScales scales;
  for (int32_t l = 0; l < num_layers; ++l) {
    const std::string key = std::to_string(l);
    if (!layers.contains(key)) return Bad(path, "no scaling factor for layer " + key);
    const nlohmann::json& f = layers[key];
    if (!f.is_number() || !std::isfinite(f.get<double>()) || f.get<double>() <= 0.0) {
      return Bad(path, "the scaling factor of layer " + key + " is not a positive number");
    }
    scales.k.push_back(f.get<float>());
  }
  for (const auto& [key, value] : layers.items()) {
    char* end = nullptr;
    const long l = std::strtol(key.c_str(), &end, 10);
    if (*end != '\0' || end == key.c_str() || l < 0 || l >= num_layers) {
      return Bad(path, "layer '" + key + "' is not a layer of the model (" +
                           std::to_string(num_layers) + " layers)");
    }
  }
  scales.v = scales.k;
  return scales;
}

}  // namespace radixserve::kv
