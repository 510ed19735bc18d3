// Server-side sampling defaults, as plain functions of plain inputs (no ServerArgs dependency).
//
//   --sampling-defaults model|openai: ModelSamplingDefaults picks the keys SGLang takes from the
//     model's generation_config.json (repetition_penalty, temperature, top_k, top_p, min_p, when
//     present and not null); `openai` uses none. SGLang applies them on /v1/chat/completions only,
//     to fields the request left unset (then 1.0 / 1.0 / -1 / 0.0 / 1.0).
//     Divergence: SGLang reads the file through transformers 4.x GenerationConfig.to_dict(),
//     which fills unset keys with transformers' own defaults (top_k 50, ...); we take only the
//     keys the file actually contains, as transformers 5 does.
//   --preferred-sampling-params '<json object>': merged UNDER each request's sampling params
//     (request keys win), as SGLang's {**preferred, **request}. Divergence: a request key that is
//     JSON null counts as unset and takes the preferred value (SGLang would pass None through).
// All functions are pure; any thread.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace radixserve::sampling {

enum class SamplingDefaultsSource { kModel, kOpenAI };

// Parses --sampling-defaults ("model" or "openai").
Expected<SamplingDefaultsSource> ParseSamplingDefaultsSource(std::string_view text);

// The defaults object taken from a parsed generation_config.json (null if the model has none).
Expected<nlohmann::json> ModelSamplingDefaults(const nlohmann::json& generation_config,
                                               SamplingDefaultsSource source);

// Parses the --preferred-sampling-params JSON text (must be an object; empty text: {}).
Expected<nlohmann::json> ParsePreferredSamplingParams(std::string_view text);

// {**defaults, **request}, except that null request values do not hide a default.
nlohmann::json MergeSamplingDefaults(const nlohmann::json& defaults, const nlohmann::json& request);

}  // namespace radixserve::sampling
