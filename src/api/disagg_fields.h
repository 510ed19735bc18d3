// SGLang's prefill/decode disaggregation fields of a generation request (bootstrap_host,
// bootstrap_port, bootstrap_room; the router adds them) and what they mean on each server role
// (docs/disaggregation.md):
//   prefill  the request computes its prompt and one token (SGLang's max_new_tokens = 1) and its
//            prompt's K/V rows are published under its room for the decode server to fetch;
//   decode   the request's prompt K/V is fetched from the prefill server before it is submitted,
//            and its input logprobs are left to the prefill server (the router merges those);
//   neither  the fields are refused (400): no transfer would happen.
// A request without bootstrap_room is served whole on either role.
#pragma once

#include <nlohmann/json.hpp>

#include "api/api_error.h"
#include "api/serving.h"

namespace radixserve::api {

// Reads the fields (scalars, or lists with one entry per engine request of the plan, in order)
// and applies them to plan.requests.
ApiExpected<bool> ApplyBootstrap(const ServerContext& ctx, const nlohmann::json& body,
                                 ServingPlan& plan);

}  // namespace radixserve::api
