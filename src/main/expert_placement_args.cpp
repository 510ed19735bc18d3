#include "main/expert_placement_args.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace radixserve {
namespace {

namespace key = args::key;

Status Invalid(const std::string& why) {
  return InvalidArgument("argument --init-expert-location: " + why);
}

// SGLang's two forms: physical_to_logical_map [layers][slots], or logical_count [layers][experts]
// (stat dumps carry [passes][layers][experts], summed here over the passes).
Status ReadLocation(const nlohmann::json& doc, model::ExpertPlacementOptions& out) {
  if (!doc.is_object()) return Invalid("expected a JSON object");
  const auto is_matrix = [](const nlohmann::json& m, bool integers) {
    if (!m.is_array() || m.empty()) return false;
    for (const nlohmann::json& row : m) {
      if (!row.is_array() || row.empty()) return false;
      for (const nlohmann::json& v : row) {
        if (integers ? !v.is_number_integer() : !v.is_number()) return false;
      }
    }
    return true;
  };
  if (doc.contains("physical_to_logical_map")) {
    const nlohmann::json& map = doc["physical_to_logical_map"];
    if (!is_matrix(map, true)) {
      return Invalid("physical_to_logical_map must be a [layers][physical experts] integer array");
    }
    for (const nlohmann::json& row : map) {
      std::vector<int32_t> slots;
      for (const nlohmann::json& v : row) {
        const auto e = v.get<int64_t>();
        slots.push_back(e < 0 || e > INT32_MAX ? -1 : static_cast<int32_t>(e));
      }
      out.initial_map.push_back(std::move(slots));
    }
    return Status::Ok();
  }
  if (doc.contains("logical_count")) {
    const nlohmann::json& count = doc["logical_count"];
    std::vector<nlohmann::json> passes;
    if (is_matrix(count, false)) {
      passes.push_back(count);
    } else if (count.is_array() && !count.empty()) {
      for (const nlohmann::json& pass : count) {
        if (!is_matrix(pass, false)) {
          return Invalid(
              "logical_count must be a [layers][experts] or [passes][layers][experts] array of "
              "numbers");
        }
        passes.push_back(pass);
      }
    } else {
      return Invalid("logical_count must be a non-empty array");
    }
    for (const nlohmann::json& pass : passes) {
      if (pass.size() != passes.front().size()) return Invalid("logical_count's passes differ");
      out.initial_load.resize(pass.size());
      for (size_t l = 0; l < pass.size(); ++l) {
        std::vector<double>& row = out.initial_load[l];
        if (row.empty()) row.assign(pass[l].size(), 0.0);
        if (row.size() != pass[l].size()) return Invalid("logical_count's rows differ in length");
        for (size_t e = 0; e < row.size(); ++e) {
          const auto v = pass[l][e].get<double>();
          if (!(v >= 0)) return Invalid("logical_count holds a negative count");
          row[e] += v;
        }
      }
    }
    return Status::Ok();
  }
  return Invalid("the JSON object holds neither physical_to_logical_map nor logical_count");
}

}  // namespace

Expected<model::ExpertPlacementOptions> ExpertPlacementFromArgs(const args::ServerArgs& args) {
  model::ExpertPlacementOptions out;
  out.redundant_experts = args.GetInt(key::kEpNumRedundantExperts);
  const std::string dispatch =
      args.IsNull(key::kEpDispatchAlgorithm) ? "static" : args.GetString(key::kEpDispatchAlgorithm);
  out.dispatch = dispatch == "dynamic" ? model::ExpertDispatch::kDynamic
                 : dispatch == "fake"  ? model::ExpertDispatch::kFake
                                       : model::ExpertDispatch::kStatic;
  out.rebalance = args.GetBool(key::kEnableEplb);
  out.rebalance_every = args.GetInt(key::kEplbRebalanceNumIterations);
  out.layers_per_chunk = args.GetOptionalInt(key::kEplbRebalanceLayersPerChunk).value_or(0);
  out.min_utilization = args.GetFloat(key::kEplbMinRebalancingUtilizationThreshold);
  const std::string location = args.GetString(key::kInitExpertLocation);
  if (location == "trivial") return out;
  if (location.ends_with(".pt")) {
    return Invalid(fmt::format(
        "'{}' is a PyTorch file; radixserve reads the JSON forms (a .json file, or the JSON text "
        "itself, with physical_to_logical_map or logical_count)",
        location));
  }
  std::string text = location;
  if (location.ends_with(".json")) {
    std::ifstream in(location);
    if (!in) return Invalid(fmt::format("cannot read '{}'", location));
    std::stringstream buffer;
    buffer << in.rdbuf();
    text = buffer.str();
  }
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return Invalid(
        fmt::format("'{}' is neither 'trivial', a .json file nor JSON", location.substr(0, 80)));
  }
  RADIX_RETURN_IF_ERROR(ReadLocation(doc, out));
  return out;
}

}  // namespace radixserve
