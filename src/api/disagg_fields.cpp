#include "api/disagg_fields.h"

#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace radixserve::api {
namespace {

using nlohmann::json;

// The field as one value per request: a scalar serves a single request, a list must have one
// entry per request. Entries may be null.
ApiExpected<std::vector<json>> PerRequest(const json& body, const char* key, size_t requests) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::vector<json>(requests);
  if (!it->is_array()) {
    if (requests != 1) {
      return InvalidRequest(fmt::format(
          "{} must be a list with one entry per generated sequence ({} here).", key, requests));
    }
    return std::vector<json>{*it};
  }
  if (it->size() != requests) {
    return InvalidRequest(fmt::format("{} has {} entries; the request generates {} sequences.", key,
                                      it->size(), requests));
  }
  return std::vector<json>(it->begin(), it->end());
}

bool AnySet(const std::vector<json>& values) {
  for (const json& value : values) {
    if (!value.is_null()) return true;
  }
  return false;
}

}  // namespace

ApiExpected<bool> ApplyBootstrap(const ServerContext& ctx, const json& body, ServingPlan& plan) {
  const size_t n = plan.requests.size();
  std::vector<json> hosts, ports, rooms;
  RADIX_ASSIGN_OR_RETURN(hosts, PerRequest(body, "bootstrap_host", n));
  RADIX_ASSIGN_OR_RETURN(ports, PerRequest(body, "bootstrap_port", n));
  RADIX_ASSIGN_OR_RETURN(rooms, PerRequest(body, "bootstrap_room", n));
  if (!AnySet(hosts) && !AnySet(ports) && !AnySet(rooms)) return true;
  if (ctx.kv_transfer == nullptr) {
    return InvalidRequest(
        "bootstrap_host / bootstrap_port / bootstrap_room are for prefill/decode disaggregation; "
        "this server runs without --disaggregation-mode.");
  }
  const bool prefill = ctx.kv_transfer->role() == disagg::Role::kPrefill;
  for (size_t i = 0; i < n; ++i) {
    if (rooms[i].is_null()) continue;  // served whole
    if (!rooms[i].is_number_integer() || rooms[i].get<int64_t>() < 0) {
      return InvalidRequest("bootstrap_room must be a non-negative integer.");
    }
    engine::Bootstrap bootstrap;
    bootstrap.room = rooms[i].get<uint64_t>();
    bootstrap.port = ctx.kv_transfer->bootstrap_port();
    if (!ports[i].is_null()) {
      if (!ports[i].is_number_integer() || ports[i].get<int64_t>() < 1 ||
          ports[i].get<int64_t>() > 65535) {
        return InvalidRequest("bootstrap_port must be an integer port (1-65535) or null.");
      }
      bootstrap.port = ports[i].get<int32_t>();
    }
    if (!hosts[i].is_null()) {
      if (!hosts[i].is_string() || hosts[i].get<std::string>().empty()) {
        return InvalidRequest("bootstrap_host must be a non-empty string.");
      }
      bootstrap.host = hosts[i].get<std::string>();
    } else if (!prefill) {
      return InvalidRequest("bootstrap_host is required with bootstrap_room on a decode server.");
    }
    engine::GenerateRequest& request = plan.requests[i];
    if (prefill) {
      // SGLang's prefill server generates the first token only; the decode server the rest.
      request.sampling.max_new_tokens = 1;
      request.export_kv = true;
    } else {
      // The prefill server computes (and returns) the input logprobs; the router merges them.
      request.logprob_start_len = -1;
    }
    request.bootstrap = std::move(bootstrap);
  }
  return true;
}

}  // namespace radixserve::api
