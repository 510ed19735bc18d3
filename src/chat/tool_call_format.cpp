#include "chat/tool_call_format.h"

#include <algorithm>
#include <cctype>

namespace radixserve::chat {

ToolSet::ToolSet(std::vector<ToolSpec> tools) : tools_(std::move(tools)) {
  for (size_t i = 0; i < tools_.size(); ++i) {
    // Python's {name: i for i, tool in enumerate(tools)}: a repeated name maps to its last index.
    if (!tools_[i].name.empty()) index_[tools_[i].name] = static_cast<int>(i);
  }
}

int ToolSet::IndexOf(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? -1 : it->second;
}

const Json* ToolSet::Parameters(std::string_view name) const {
  int i = IndexOf(name);
  return i < 0 ? nullptr : &tools_[static_cast<size_t>(i)].parameters;
}

std::optional<ToolCall> ToolCallFormat::KnownCall(std::string name, std::string arguments) const {
  int index = tools_.IndexOf(name);
  if (index < 0) return std::nullopt;
  ToolCall call;
  call.tool_index = index;
  call.name = std::move(name);
  call.arguments = std::move(arguments);
  return call;
}

size_t PartialMarkerSuffix(std::string_view text, std::string_view marker) {
  size_t max = std::min(text.size(), marker.size() - (marker.empty() ? 0 : 1));
  for (size_t n = max; n > 0; --n) {
    if (marker.substr(0, n) == text.substr(text.size() - n)) return n;
  }
  return 0;
}

std::string_view StripWs(std::string_view text) {
  constexpr std::string_view kWs = " \t\n\r\f\v";
  size_t start = text.find_first_not_of(kWs);
  if (start == std::string_view::npos) return {};
  size_t end = text.find_last_not_of(kWs);
  return text.substr(start, end - start + 1);
}

std::string RemoveAll(std::string_view text, std::string_view marker) {
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t at = marker.empty() ? std::string_view::npos : text.find(marker, pos);
    if (at == std::string_view::npos) break;
    out += text.substr(pos, at - pos);
    pos = at + marker.size();
  }
  out += text.substr(pos);
  return out;
}

void AppendHeldBack(std::string_view text, bool at_end,
                    std::initializer_list<std::string_view> markers, std::string& normal) {
  size_t hold = 0;
  if (!at_end) {
    for (std::string_view m : markers) hold = std::max(hold, PartialMarkerSuffix(text, m));
  }
  normal += text.substr(0, text.size() - hold);
}

void SettlePlainTail(std::string_view text, size_t from, size_t normal_before,
                     std::initializer_list<std::string_view> removed,
                     std::initializer_list<std::string_view> markers, ToolCallScan& scan,
                     size_t (*adjust)(std::string_view text, size_t cut)) {
  size_t margin = 0;
  for (std::string_view m : removed) margin = std::max(margin, m.size());
  for (std::string_view m : markers) margin = std::max(margin, m.size());
  if (text.size() < from + margin + 1) return;
  size_t p = text.size() - margin;
  if (adjust != nullptr) p = adjust(text, p);
  if (p <= from) return;
  auto crosses = [&](std::string_view m) {
    for (size_t s = p >= m.size() ? p - (m.size() - 1) : 0; s < p; ++s) {
      if (text.compare(s, m.size(), m) == 0) return true;
    }
    return false;
  };
  for (std::string_view m : markers) {
    if (crosses(m)) return;
  }
  auto clean = [&](std::string_view part) {
    std::string out(part);
    for (std::string_view m : removed) out = RemoveAll(out, m);
    return out;
  };
  // The content of the settled part is final only if cleaning the two parts apart gives what
  // cleaning the whole tail gives (no removed marker crosses the cut, none forms across it).
  const std::string head = clean(text.substr(from, p - from));
  if (head + clean(text.substr(p)) != clean(text.substr(from))) return;
  if (normal_before + head.size() > scan.normal.size()) return;
  scan.settled_text = p;
  scan.settled_normal = normal_before + head.size();
  scan.settled_calls = scan.calls.size();
}

Json SchemaProperties(const Json& schema) {
  if (!schema.is_object()) return Json::object();
  auto it = schema.find("properties");
  if (it != schema.end() && it->is_object()) return *it;
  Json merged = Json::object();
  for (const char* keyword : {"anyOf", "oneOf", "allOf"}) {
    auto branches = schema.find(keyword);
    if (branches == schema.end() || !branches->is_array()) continue;
    for (const Json& branch : *branches) {
      Json props = SchemaProperties(branch);
      for (auto it2 = props.begin(); it2 != props.end(); ++it2) {
        if (!merged.contains(it2.key())) merged[it2.key()] = it2.value();
      }
    }
  }
  return merged;
}

std::string InferSchemaType(const Json& schema) {
  if (!schema.is_object()) return "";
  if (auto it = schema.find("type"); it != schema.end()) {
    if (it->is_string()) return it->get<std::string>();
    if (it->is_array() && !it->empty()) {
      for (const Json& t : *it) {
        if (t != "null") return t.is_string() ? t.get<std::string>() : t.dump();
      }
      return "string";
    }
  }
  const Json* alternatives = nullptr;
  if (auto it = schema.find("anyOf"); it != schema.end() && !it->empty()) alternatives = &*it;
  if (!alternatives) {
    if (auto it = schema.find("oneOf"); it != schema.end()) alternatives = &*it;
  }
  if (alternatives) {
    std::vector<std::string> types;
    if (alternatives->is_array()) {
      for (const Json& sub : *alternatives) {
        std::string t = InferSchemaType(sub);
        if (!t.empty()) types.push_back(t);
      }
    }
    if (!types.empty()) {
      std::vector<std::string> distinct;
      for (const auto& t : types) {
        if (std::find(distinct.begin(), distinct.end(), t) == distinct.end()) distinct.push_back(t);
      }
      if (distinct.size() == 1) return distinct[0];
      bool has_null = std::find(distinct.begin(), distinct.end(), "null") != distinct.end();
      if (distinct.size() == 2 && has_null)
        return distinct[0] == "null" ? distinct[1] : distinct[0];
      if (std::find(distinct.begin(), distinct.end(), "string") != distinct.end()) return "string";
      return types[0];
    }
  }
  if (auto it = schema.find("enum"); it != schema.end() && it->is_array()) {
    if (it->empty()) return "string";
    std::vector<std::string> kinds;
    for (const Json& v : *it) {
      std::string k = v.is_null()             ? "null"
                      : v.is_boolean()        ? "boolean"
                      : v.is_number_integer() ? "integer"
                      : v.is_number()         ? "number"
                      : v.is_string()         ? "string"
                      : v.is_array()          ? "array"
                                              : "object";
      if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(k);
    }
    return kinds.size() == 1 ? kinds[0] : "string";
  }
  if (auto it = schema.find("allOf"); it != schema.end() && it->is_array()) {
    for (const Json& sub : *it) {
      std::string t = InferSchemaType(sub);
      if (!t.empty() && t != "string") return t;
    }
    return "string";
  }
  if (schema.contains("properties")) return "object";
  if (schema.contains("items")) return "array";
  return "";
}

}  // namespace radixserve::chat

namespace radixserve::chat {

JsonCallListScan ScanJsonCalls(std::string_view text, size_t pos, bool at_end) {
  JsonCallListScan result;
  while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
  if (pos >= text.size()) return result;
  if (text[pos] != '[') {
    JsonCallScan call = ScanJsonCall(text, pos, at_end);
    result.state = call.state;
    result.end = call.end;
    result.calls.push_back(std::move(call));
    return result;
  }
  ++pos;
  bool first = true;
  while (true) {
    while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
    if (pos >= text.size()) return result;
    if (text[pos] == ']' && first) {
      result.state = JsonScanState::kComplete;
      result.end = pos + 1;
      return result;
    }
    JsonCallScan call = ScanJsonCall(text, pos, at_end);
    JsonScanState state = call.state;
    pos = call.end;
    result.calls.push_back(std::move(call));
    if (state != JsonScanState::kComplete) {
      result.state = state;
      return result;
    }
    while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
    if (pos >= text.size()) return result;
    if (text[pos] == ']') {
      result.state = JsonScanState::kComplete;
      result.end = pos + 1;
      return result;
    }
    if (text[pos] != ',') {
      result.state = JsonScanState::kInvalid;
      return result;
    }
    ++pos;
    first = false;
  }
}

std::optional<std::vector<JsonCallScan>> ParseJsonCalls(std::string_view text) {
  JsonCallListScan scan = ScanJsonCalls(text, 0, true);
  if (scan.state != JsonScanState::kComplete) return std::nullopt;
  if (!StripWs(text.substr(scan.end)).empty()) return std::nullopt;
  return std::move(scan.calls);
}

bool AddScannedJsonCalls(const ToolSet& tools, const std::vector<JsonCallScan>& calls,
                         ToolCallScan& scan) {
  for (const JsonCallScan& call : calls) {
    bool complete = call.state == JsonScanState::kComplete;
    if (!call.name) {  // a complete call without a name is dropped
      if (!complete) return false;
      continue;
    }
    if (!tools.Has(*call.name)) {
      if (!complete) return false;
      continue;
    }
    scan.calls.push_back(ScannedCall{*call.name, call.arguments, complete});
    if (!complete) return false;
  }
  return true;
}

}  // namespace radixserve::chat
