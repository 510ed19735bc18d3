#include "args/config_file.h"

#include <fstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "args/arg_parser.h"
#include "args/arg_table.h"

namespace radixserve::args {
namespace {

// YAML to JSON for JSON-typed arguments written as nested YAML.
nlohmann::json ToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& item : node) out[item.first.as<std::string>()] = ToJson(item.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& item : node) out.push_back(ToJson(item));
      return out;
    }
    case YAML::NodeType::Scalar: {
      // Let JSON decide numbers and booleans; anything else stays a string.
      std::string text = node.as<std::string>();
      auto parsed = nlohmann::json::parse(text, nullptr, false);
      if (!parsed.is_discarded() && !parsed.is_object() && !parsed.is_array()) return parsed;
      return text;
    }
    default:
      return nullptr;
  }
}

}  // namespace

Status ApplyConfigFile(const std::string& path, ServerArgs& args,
                       std::vector<std::string>& notices) {
  std::ifstream in(path);
  if (!in) return InvalidArgument(fmt::format("argument --config: cannot read '{}'", path));
  YAML::Node root;
  try {
    root = YAML::Load(in);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(fmt::format("argument --config: cannot parse '{}': {}", path, e.what()));
  }
  if (root.IsNull()) return Status::Ok();
  if (!root.IsMap()) {
    return InvalidArgument(
        fmt::format("argument --config: '{}' must be a mapping of argument names to values", path));
  }
  for (const auto& item : root) {
    std::string key = item.first.as<std::string>();
    const ArgSpec* spec = FindArg(key);
    if (spec == nullptr) {
      return InvalidArgument(fmt::format("argument --config: unknown key '{}' in '{}'", key, path));
    }
    if (KeyOf(*spec) == key::kConfig) {
      return InvalidArgument(
          fmt::format("argument --config: '{}' may not name another config file", path));
    }
    if (std::string notice = DeprecationNotice(*spec, key); !notice.empty()) {
      notices.push_back(std::move(notice));
    }
    std::string display = fmt::format("--{} (in '{}')", key, path);
    const YAML::Node& node = item.second;
    nlohmann::json value;
    if (spec->type == ArgType::kJson && (node.IsMap() || node.IsSequence())) {
      value = ToJson(node);
    } else if (node.IsNull()) {
      value = nullptr;
    } else {
      std::vector<std::string> words;
      if (node.IsSequence()) {
        for (const auto& element : node) {
          if (!element.IsScalar()) {
            return InvalidArgument(
                fmt::format("argument {}: list elements must be scalars", display));
          }
          words.push_back(element.as<std::string>());
        }
      } else if (node.IsScalar()) {
        words.push_back(node.as<std::string>());
      } else {
        return InvalidArgument(fmt::format("argument {}: expected a scalar value", display));
      }
      RADIX_ASSIGN_OR_RETURN(value, ConvertValue(*spec, display, words));
    }
    args.Set(KeyOf(*spec), std::move(value), /*explicitly=*/true);
  }
  return Status::Ok();
}

}  // namespace radixserve::args
