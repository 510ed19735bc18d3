#include "api/openai_fields.h"

#include <algorithm>

#include <fmt/format.h>

namespace radixserve::api::openai {
namespace {

// SGLang's defaults for these fields are None, False or 0 (an empty list or object says the same).
bool IsDefaultValue(const nlohmann::json& value, std::optional<bool> default_bool) {
  if (default_bool && value.is_boolean() && value.get<bool>() == *default_bool) return true;
  return value.is_null() || (value.is_boolean() && !value.get<bool>()) ||
         (value.is_number() && value == 0) || (value.is_array() && value.empty()) ||
         (value.is_object() && value.empty());
}

constexpr bool kChat = true;
constexpr bool kCompl = true;

FieldSpec Row(std::string_view name, bool chat, bool completions, FieldUse use,
              bool true_is_default = false) {
  FieldSpec spec;
  spec.name = name;
  spec.chat = chat;
  spec.completions = completions;
  spec.use = use;
  if (true_is_default) spec.default_bool = true;
  return spec;
}

}  // namespace

const std::vector<FieldSpec>& OpenAiFields() {
  using enum FieldUse;
  static const std::vector<FieldSpec> fields = {
      // OpenAI's fields.
      Row("model", kChat, kCompl, kUsed),
      Row("messages", kChat, false, kUsed),
      Row("prompt", false, kCompl, kUsed),
      Row("stream", kChat, kCompl, kUsed),
      Row("stream_options", kChat, kCompl, kUsed),
      Row("n", kChat, kCompl, kUsed),
      Row("best_of", false, kCompl, kUsed),
      Row("echo", false, kCompl, kUsed),
      Row("suffix", false, kCompl, kUsed),
      Row("max_tokens", kChat, kCompl, kUsed),
      Row("max_completion_tokens", kChat, false, kUsed),
      Row("temperature", kChat, kCompl, kUsed),
      Row("top_p", kChat, kCompl, kUsed),
      Row("frequency_penalty", kChat, kCompl, kUsed),
      Row("presence_penalty", kChat, kCompl, kUsed),
      Row("logit_bias", kChat, kCompl, kUsed),
      Row("logprobs", kChat, kCompl, kUsed),
      Row("top_logprobs", kChat, false, kUsed),
      Row("seed", kChat, kCompl, kUsed),
      Row("stop", kChat, kCompl, kUsed),
      Row("response_format", kChat, kCompl, kUsed),
      Row("tools", kChat, false, kUsed),
      Row("tool_choice", kChat, false, kUsed),
      Row("parallel_tool_calls", kChat, false, kUsed),
      Row("reasoning_effort", kChat, false, kUsed),
      Row("user", kChat, kCompl, kMetadata),
      Row("metadata", kChat, kCompl, kMetadata),
      Row("safety_identifier", kChat, kCompl, kMetadata),
      // A cache-routing hint: the radix cache finds shared prefixes without one.
      Row("prompt_cache_key", kChat, kCompl, kMetadata),
      Row("store", kChat, false, kDefaultOnly),
      Row("functions", kChat, false, kDefaultOnly),
      Row("function_call", kChat, false, kDefaultOnly),
      Row("audio", kChat, false, kDefaultOnly),
      Row("prediction", kChat, false, kDefaultOnly),
      Row("web_search_options", kChat, false, kDefaultOnly),
      Row("verbosity", kChat, false, kDefaultOnly),
      // SGLang's sampling extensions.
      Row("top_k", kChat, kCompl, kUsed),
      Row("min_p", kChat, kCompl, kUsed),
      Row("min_tokens", kChat, kCompl, kUsed),
      Row("repetition_penalty", kChat, kCompl, kUsed),
      Row("stop_token_ids", kChat, kCompl, kUsed),
      Row("stop_regex", kChat, kCompl, kUsed),
      Row("no_stop_trim", kChat, kCompl, kUsed),
      Row("ignore_eos", kChat, kCompl, kUsed),
      Row("skip_special_tokens", kChat, kCompl, kUsed),
      Row("spaces_between_special_tokens", kChat, kCompl, kUsed),  // vLLM's
      Row("json_schema", kChat, kCompl, kUsed),
      Row("regex", kChat, kCompl, kUsed),
      Row("ebnf", kChat, kCompl, kUsed),
      // SGLang's chat extensions.
      Row("continue_final_message", kChat, false, kUsed),
      Row("separate_reasoning", kChat, false, kUsed),
      Row("stream_reasoning", kChat, false, kUsed),
      Row("chat_template_kwargs", kChat, false, kUsed),
      Row("thinking", kChat, false, kUsed),
      Row("reasoning", kChat, false, kUsed),  // SGLang's {"effort", "enabled"} input form
      Row("input_ids", kChat, false, kUsed),
      // SGLang's request bookkeeping, routing and cache isolation.
      Row("rid", kChat, kCompl, kUsed),
      Row("priority", kChat, kCompl, kUsed),
      Row("extra_key", kChat, kCompl, kUsed),
      Row("cache_salt", kChat, kCompl, kUsed),
      Row("lora_path", kChat, kCompl, kUsed),
      Row("custom_labels", false, kCompl, kUsed),
      Row("routed_dp_rank", kChat, kCompl, kUsed),
      Row("data_parallel_rank", kChat, kCompl, kUsed),
      Row("bootstrap_host", kChat, kCompl, kUsed),
      Row("bootstrap_port", kChat, kCompl, kUsed),
      Row("bootstrap_room", kChat, kCompl, kUsed),
      // A router's sticky-session key (as on /generate); sessions themselves are /generate's.
      Row("session_id", kChat, kCompl, kMetadata),
      Row("session_params", kChat, kCompl, kDefaultOnly),
      // SGLang's response extensions.
      Row("return_hidden_states", kChat, kCompl, kUsed),
      Row("return_token_ids", kChat, kCompl, kUsed),
      Row("return_prompt_token_ids", kChat, false, kUsed),
      Row("return_meta_info", kChat, false, kUsed),
      Row("return_cached_tokens_details", kChat, kCompl, kUsed),
      Row("return_input_ids_in_sglext", kChat, false, kUsed),
      Row("return_output_ids_in_sglext", kChat, false, kUsed),
      Row("return_spec_tokens_details", kChat, kCompl, kDefaultOnly),
      Row("return_routed_experts", kChat, kCompl, kDefaultOnly),
      Row("routed_experts_start_len", kChat, kCompl, kDefaultOnly),
      Row("return_sampling_mask", kChat, false, kDefaultOnly),
      Row("sampling_logprobs_mode", kChat, false, kDefaultOnly),
      Row("return_flat_raw_output_top_logprobs", kChat, false, kDefaultOnly),
      // Only shapes the flat raw logprobs above (default true).
      Row("return_flat_raw_top_logprobs_b64", kChat, false, kDefaultOnly, true),
      Row("disagg_prefill_dp_rank", kChat, kCompl, kDefaultOnly),
      // Features radixserve does not have: multimodal inputs, custom logit processors,
      // watermarks, DeepSeek-V4 quick instructions.
      Row("custom_params", kChat, kCompl, kDefaultOnly),
      Row("custom_logit_processor", kChat, kCompl, kDefaultOnly),
      Row("watermark", kChat, kCompl, kDefaultOnly),
      Row("images_config", kChat, kCompl, kDefaultOnly),
      Row("mm_processor_kwargs", kChat, kCompl, kDefaultOnly),
      Row("video_config", kChat, false, kDefaultOnly),
      Row("use_audio_in_video", kChat, false, kDefaultOnly),
      Row("max_dynamic_patch", kChat, false, kDefaultOnly),
      Row("min_dynamic_patch", kChat, false, kDefaultOnly),
      Row("task", kChat, false, kDefaultOnly),
  };
  return fields;
}

std::optional<ApiError> CheckOpenAiFields(const nlohmann::json& body, Route route) {
  const std::vector<FieldSpec>& fields = OpenAiFields();
  for (auto item = body.begin(); item != body.end(); ++item) {
    const std::string& key = item.key();
    const nlohmann::json& value = item.value();
    auto it = std::find_if(fields.begin(), fields.end(), [&](const FieldSpec& spec) {
      return spec.name == key && (route == Route::kChat ? spec.chat : spec.completions);
    });
    const std::string shown = key.size() > 64 ? key.substr(0, 64) + "..." : key;
    if (it == fields.end()) {
      ApiError error =
          InvalidRequest(fmt::format("Unrecognized request argument supplied: {}", shown));
      error.param = shown;
      return error;
    }
    if (it->use == FieldUse::kDefaultOnly && !IsDefaultValue(value, it->default_bool)) {
      ApiError error = InvalidRequest(fmt::format(
          "'{}' is not supported by radixserve: send it unset (null/false) or leave it out.",
          shown));
      error.param = shown;
      return error;
    }
  }
  return std::nullopt;
}

}  // namespace radixserve::api::openai
