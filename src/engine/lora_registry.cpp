#include "engine/lora_registry.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/log.h"

namespace radixserve::engine {

void LoraRegistry::SetModel(std::shared_ptr<const model::CausalLM> model) {
  std::lock_guard<std::mutex> lock(mutex_);
  model_ = std::move(model);
}

Status LoraRegistry::Load(const std::string& name, const std::string& path, bool pinned,
                          std::vector<std::string>* evicted) {
  if (name.empty()) return InvalidArgument("lora_name must not be empty");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const bool known = std::any_of(loaded_.begin(), loaded_.end(),
                                   [&](const LoraRef& r) { return r.name == name; });
    if (known || loading_.count(name) > 0) {
      return InvalidArgument("LoRA adapter '" + name +
                             "' is already loaded; unload it first or choose another name");
    }
    loading_.insert(name);
  }
  std::shared_ptr<const model::CausalLM> model;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    model = model_;
  }
  if (model == nullptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    loading_.erase(name);
    return InvalidArgument(
        "The model's weights are released (/release_memory_occupation); "
        "resume them before loading a LoRA adapter.");
  }
  auto adapter = model->LoadLora(path, options_.load);
  std::lock_guard<std::mutex> lock(mutex_);
  loading_.erase(name);
  if (!adapter.ok()) return adapter.status();
  if (options_.max_bytes >= 0 && adapter.value()->bytes() > options_.max_bytes) {
    return InvalidArgument(
        "LoRA adapter '" + name + "' holds " + std::to_string(adapter.value()->bytes()) +
        " bytes of matrices, over --max-lora-model-size " + std::to_string(options_.max_bytes));
  }
  if (options_.max_loaded > 0 && static_cast<int64_t>(loaded_.size()) + 1 > options_.max_loaded &&
      std::none_of(loaded_.begin(), loaded_.end(), [](const LoraRef& r) { return !r.pinned; })) {
    return InvalidArgument("cannot load LoRA adapter '" + name +
                           "': " + std::to_string(loaded_.size()) +
                           " adapters are loaded (--max-loaded-loras " +
                           std::to_string(options_.max_loaded) + ") and all are pinned");
  }
  loaded_.push_back({name, path, pinned, next_id_++, std::move(adapter).value()});
  RADIX_LOG_INFO("Loaded LoRA adapter '{}' from {} ({} format, rank {}, {} targets)", name, path,
                 loaded_.back().adapter->format(), loaded_.back().adapter->rank(),
                 loaded_.back().adapter->targets().size());
  while (options_.max_loaded > 0 && static_cast<int64_t>(loaded_.size()) > options_.max_loaded) {
    // The front is the least recently used (lru) or the first loaded (fifo).
    auto victim =
        std::find_if(loaded_.begin(), loaded_.end(), [](const LoraRef& r) { return !r.pinned; });
    RADIX_LOG_INFO("Unloading LoRA adapter '{}' ({} adapters loaded, --max-loaded-loras {})",
                   victim->name, loaded_.size(), options_.max_loaded);
    if (evicted != nullptr) evicted->push_back(victim->name);
    loaded_.erase(victim);
  }
  return Status::Ok();
}

Status LoraRegistry::Unload(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(loaded_.begin(), loaded_.end(),
                         [&](const LoraRef& r) { return r.name == name; });
  if (it == loaded_.end()) {
    return NotFound("LoRA adapter '" + name + "' is not loaded");
  }
  loaded_.erase(it);
  RADIX_LOG_INFO("Unloaded LoRA adapter '{}'", name);
  return Status::Ok();
}

std::optional<LoraRef> LoraRegistry::Find(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(loaded_.begin(), loaded_.end(),
                         [&](const LoraRef& r) { return r.name == name; });
  if (it == loaded_.end()) return std::nullopt;
  if (!options_.evict_fifo) loaded_.splice(loaded_.end(), loaded_, it);
  return *it;
}

std::vector<LoraRef> LoraRegistry::List() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<LoraRef> out(loaded_.begin(), loaded_.end());
  std::sort(out.begin(), out.end(), [](const LoraRef& a, const LoraRef& b) { return a.id < b.id; });
  return out;
}

Expected<LoraPathSpec> ParseLoraPathSpec(const std::string& text) {
  LoraPathSpec spec;
  if (!text.empty() && text.front() == '{') {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("lora_name") || !j["lora_name"].is_string() ||
        !j.contains("lora_path") || !j["lora_path"].is_string() ||
        (j.contains("pinned") && !j["pinned"].is_boolean())) {
      return InvalidArgument("'" + text +
                             "' must be a JSON object with string lora_name and lora_path and an "
                             "optional boolean pinned");
    }
    for (const auto& [key, value] : j.items()) {
      (void)value;
      if (key != "lora_name" && key != "lora_path" && key != "pinned") {
        return InvalidArgument("'" + text + "': unknown key '" + key + "'");
      }
    }
    spec.name = j["lora_name"].get<std::string>();
    spec.path = j["lora_path"].get<std::string>();
    spec.pinned = j.value("pinned", false);
  } else if (const size_t eq = text.find('='); eq != std::string::npos) {
    spec.name = text.substr(0, eq);
    spec.path = text.substr(eq + 1);
  } else {
    spec.name = spec.path = text;
  }
  if (spec.name.empty() || spec.path.empty()) {
    return InvalidArgument("'" + text + "' must be PATH, NAME=PATH or a JSON object");
  }
  return spec;
}

Expected<std::vector<model::LoraTarget>> ParseLoraTargets(const std::vector<std::string>& names) {
  std::vector<model::LoraTarget> out;
  for (const std::string& name : names) {
    if (name == "all") return std::vector<model::LoraTarget>{};
    std::vector<std::string> parts = {name};
    if (name == "qkv_proj") parts = {"q_proj", "k_proj", "v_proj"};
    if (name == "gate_up_proj") parts = {"gate_proj", "up_proj"};
    for (const std::string& part : parts) {
      auto target = model::LoraTargetFromName(part);
      if (!target) return InvalidArgument("unknown LoRA target module '" + name + "'");
      if (std::find(out.begin(), out.end(), *target) == out.end()) out.push_back(*target);
    }
  }
  return out;
}

}  // namespace radixserve::engine
