// The request fields of /v1/chat/completions and /v1/completions: every field of SGLang 0.5.23's
// ChatCompletionRequest and CompletionRequest, plus the OpenAI fields SGLang's models leave out,
// each with what radixserve does with it. A field nobody defines is refused with OpenAI's own
// answer ("Unrecognized request argument supplied"), so a client never gets free text for a
// request field it thought had an effect (a vLLM-style guided_json, say).
//
// Thread safety: pure functions over a constant table.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/api_error.h"

namespace radixserve::api::openai {

enum class Route { kChat, kCompletions };

enum class FieldUse {
  kUsed,         // read by the route: it has its effect
  kMetadata,     // names or tags the request for the client's bookkeeping (user, metadata, ...);
                 // SGLang and OpenAI do not change the answer for it either
  kDefaultOnly,  // a feature radixserve does not have (multimodal, routed experts, custom logit
                 // processors, ...): accepted at its default, a 400 naming it otherwise
};

struct FieldSpec {
  std::string_view name;
  bool chat = false;
  bool completions = false;
  FieldUse use = FieldUse::kUsed;
  // kDefaultOnly: the value SGLang defaults to besides null / false / 0 / empty, if any.
  std::optional<bool> default_bool;
};

// Every field either route knows, in one table (docs/api.md lists it).
const std::vector<FieldSpec>& OpenAiFields();

// The first field of `body` the route does not define, or defines only at a default the body
// does not keep, as the 400 to answer; nullopt when every field is fine.
std::optional<ApiError> CheckOpenAiFields(const nlohmann::json& body, Route route);

}  // namespace radixserve::api::openai
