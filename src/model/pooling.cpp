#include "model/pooling.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace radixserve::model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

Expected<json> ReadJson(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return NotFound(path.string() + ": cannot read");
  std::stringstream buffer;
  buffer << in.rdbuf();
  json j = json::parse(buffer.str(), nullptr, false);
  if (j.is_discarded()) return DataLoss(path.string() + ": not valid JSON");
  return j;
}

bool Flag(const json& config, const char* key) {
  auto it = config.find(key);
  return it != config.end() && it->is_boolean() && it->get<bool>();
}

Expected<PoolingMode> ReadPoolingMode(const fs::path& path) {
  json config;
  RADIX_ASSIGN_OR_RETURN(config, ReadJson(path));
  if (!config.is_object()) return DataLoss(path.string() + ": not a JSON object");
  // sentence-transformers >= 5 writes one "pooling_mode" string; older versions one flag each.
  if (auto named = config.find("pooling_mode"); named != config.end() && named->is_string()) {
    const std::string name = named->get<std::string>();
    if (name == "cls") return PoolingMode::kCls;
    if (name == "mean") return PoolingMode::kMean;
    if (name == "lasttoken") return PoolingMode::kLastToken;
    return Unsupported(path.string() + ": pooling_mode " + name +
                       " is not supported (supported: cls, mean, lasttoken)");
  }
  int chosen = 0;
  PoolingMode mode = PoolingMode::kCls;
  for (auto [key, m] : {std::pair{"pooling_mode_cls_token", PoolingMode::kCls},
                        {"pooling_mode_mean_tokens", PoolingMode::kMean},
                        {"pooling_mode_lasttoken", PoolingMode::kLastToken}}) {
    if (Flag(config, key)) {
      mode = m;
      ++chosen;
    }
  }
  for (const char* key : {"pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
                          "pooling_mode_weightedmean_tokens"}) {
    if (Flag(config, key)) {
      return Unsupported(path.string() + ": " + key +
                         " is not supported (supported: cls_token, mean_tokens, lasttoken)");
    }
  }
  if (chosen != 1) {
    return Unsupported(path.string() +
                       ": exactly one of pooling_mode_cls_token, pooling_mode_mean_tokens, "
                       "pooling_mode_lasttoken must be true");
  }
  return mode;
}

}  // namespace

const char* PoolingModeName(PoolingMode mode) {
  switch (mode) {
    case PoolingMode::kMean:
      return "mean";
    case PoolingMode::kCls:
      return "cls";
    case PoolingMode::kLastToken:
      return "lasttoken";
  }
  return "?";
}

Expected<PoolingConfig> LoadPoolingConfig(const std::string& folder, PoolingConfig fallback) {
  const fs::path modules_path = fs::path(folder) / "modules.json";
  std::error_code ec;
  if (!fs::exists(modules_path, ec)) return fallback;
  json modules;
  RADIX_ASSIGN_OR_RETURN(modules, ReadJson(modules_path));
  if (!modules.is_array()) return DataLoss(modules_path.string() + ": not a JSON array");
  // modules.json says it all: without a Normalize module nothing is normalized.
  PoolingConfig config{.mode = fallback.mode, .normalize = false};
  bool has_pooling = false;
  for (const json& module : modules) {
    if (!module.is_object() || !module.contains("type") || !module["type"].is_string()) {
      return DataLoss(modules_path.string() + ": every module needs a \"type\" string");
    }
    const std::string type = module["type"].get<std::string>();
    const std::string path = module.value("path", std::string());
    // The class name decides: sentence-transformers moved its modules between packages
    // (sentence_transformers.models.Pooling, ...sentence_transformer.modules.pooling.Pooling).
    const std::string kind =
        type.rfind("sentence_transformers.", 0) == 0 ? type.substr(type.rfind('.') + 1) : type;
    if (kind == "Transformer") continue;
    if (kind == "Pooling") {
      if (path.empty() || path.find("..") != std::string::npos) {
        return DataLoss(modules_path.string() + ": the Pooling module needs a folder path");
      }
      RADIX_ASSIGN_OR_RETURN(config.mode, ReadPoolingMode(fs::path(folder) / path / "config.json"));
      has_pooling = true;
    } else if (kind == "Normalize") {
      config.normalize = true;
    } else {
      return Unsupported(modules_path.string() + ": module type " + type +
                         " is not supported (supported: Transformer, Pooling, Normalize)");
    }
  }
  if (!has_pooling) return Unsupported(modules_path.string() + ": no Pooling module");
  return config;
}

void Pool(const PoolingConfig& config, const float* hidden, int64_t dim,
          std::span<const int64_t> lengths, float* out) {
  int64_t start = 0;
  for (size_t s = 0; s < lengths.size(); ++s) {
    const int64_t len = lengths[s];
    float* row = out + static_cast<int64_t>(s) * dim;
    switch (config.mode) {
      case PoolingMode::kCls:
        std::copy(hidden + start * dim, hidden + (start + 1) * dim, row);
        break;
      case PoolingMode::kLastToken:
        std::copy(hidden + (start + len - 1) * dim, hidden + (start + len) * dim, row);
        break;
      case PoolingMode::kMean:
        for (int64_t d = 0; d < dim; ++d) {
          double sum = 0;
          for (int64_t t = 0; t < len; ++t) sum += hidden[(start + t) * dim + d];
          row[d] = static_cast<float>(sum / static_cast<double>(len));
        }
        break;
    }
    if (config.normalize) {
      double norm2 = 0;
      for (int64_t d = 0; d < dim; ++d) norm2 += static_cast<double>(row[d]) * row[d];
      // torch.nn.functional.normalize: x / max(||x||, 1e-12).
      const double scale = 1.0 / std::max(std::sqrt(norm2), 1e-12);
      for (int64_t d = 0; d < dim; ++d) row[d] = static_cast<float>(row[d] * scale);
    }
    start += len;
  }
}

}  // namespace radixserve::model
