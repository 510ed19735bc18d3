#include "api/request_builder.h"

#include <chrono>
#include <cstdio>

#include <fmt/format.h>

#include "api/json_fields.h"
#include "sampling/sampling_defaults.h"
#include "sampling/sampling_params.h"
#include "tokenizer/stop_regex_matcher.h"

namespace radixserve::api {

std::string NewRid(ServerContext& ctx) {
  // Time-seeded prefix + counter: unique in the process, unpredictable enough for logs.
  static const uint64_t kStart =
      static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  uint64_t n = ctx.next_rid.fetch_add(1);
  return fmt::format("{:016x}{:016x}", kStart, n);
}

Expected<std::optional<int32_t>> ReadRoutedDpRank(const ServerContext& ctx,
                                                  const nlohmann::json& body) {
  const int64_t dp_size = ctx.args->GetInt(args::key::kDpSize);
  std::optional<int64_t> rank;
  for (const char* key : {"data_parallel_rank", "routed_dp_rank"}) {  // the newer name wins
    RADIX_ASSIGN_OR_RETURN(std::optional<int64_t> read, ReadOptionalInt(body, key, 0, dp_size - 1));
    if (read.has_value()) rank = read;
  }
  if (!rank) return std::optional<int32_t>();
  return std::optional<int32_t>(static_cast<int32_t>(*rank));
}

Expected<int64_t> CheckN(const nlohmann::json& value, const RequestLimits& limits,
                         const char* field) {
  int64_t n = 0;
  RADIX_ASSIGN_OR_RETURN(n, ReadInt(value, field));
  if (n < 1) return InvalidArgument(fmt::format("{} must be at least 1, got {}.", field, n));
  if (n > limits.max_n) {
    return InvalidArgument(fmt::format("{} must be at most {} (the server's --max-n), got {}.",
                                       field, limits.max_n, n));
  }
  return n;
}

std::string TokenText(const ServerContext& ctx, int32_t token_id) {
  if (ctx.tokenizer == nullptr) return {};
  const int32_t ids[1] = {token_id};
  return ctx.tokenizer->Decode(
      ids, {.skip_special_tokens = false, .spaces_between_special_tokens = true});
}

std::optional<sampling::GrammarSpec> ConstraintSpec(const sampling::SamplingParams& params) {
  if (params.json_schema) {
    return sampling::GrammarSpec{sampling::GrammarKind::kJsonSchema, *params.json_schema};
  }
  if (params.regex) return sampling::GrammarSpec{sampling::GrammarKind::kRegex, *params.regex};
  if (params.ebnf) return sampling::GrammarSpec{sampling::GrammarKind::kEbnf, *params.ebnf};
  if (params.structural_tag) {
    return sampling::GrammarSpec{sampling::GrammarKind::kStructuralTag, *params.structural_tag};
  }
  return std::nullopt;
}

Status CompileConstraint(const ServerContext& ctx, engine::GenerateRequest& request) {
  if (request.grammar != nullptr) return Status::Ok();
  std::optional<sampling::GrammarSpec> spec = ConstraintSpec(request.sampling);
  if (!spec) return Status::Ok();
  RADIX_ASSIGN_OR_RETURN(request.grammar, ctx.grammar_cache->Get(*spec));
  return Status::Ok();
}

Expected<std::optional<engine::LoraRef>> ResolveLora(const ServerContext& ctx,
                                                     const std::optional<std::string>& name) {
  if (!name) return std::optional<engine::LoraRef>();
  if (ctx.lora_registry == nullptr) {
    return InvalidArgument("LoRA is not enabled. Please set `--enable-lora` to enable LoRA.");
  }
  std::optional<engine::LoraRef> ref = ctx.lora_registry->Find(*name);
  if (!ref) {
    std::string loaded;
    for (const engine::LoraRef& r : ctx.lora_registry->List()) {
      loaded += (loaded.empty() ? "" : ", ") + r.name;
    }
    return InvalidArgument("The following requested LoRA adapters are not loaded: " + *name +
                           "\nLoaded adapters: " + (loaded.empty() ? "(none)" : loaded));
  }
  return ref;
}

Status AttachConstraints(const ServerContext& ctx, engine::GenerateRequest& request) {
  const sampling::SamplingParams& params = request.sampling;
  // SGLang's verify() lets structural_tag sit beside another constraint and then enforces only
  // the other one; one constraint is enforced here, so the pair is refused instead.
  if (params.structural_tag && (params.json_schema || params.regex || params.ebnf)) {
    return InvalidArgument("structural_tag cannot be combined with regex, json_schema, or ebnf.");
  }
  if (std::optional<sampling::GrammarSpec> spec = ConstraintSpec(params)) {
    if (ctx.grammar_cache == nullptr) {
      return InvalidArgument(fmt::format("{} cannot be enforced: {}.",
                                         sampling::GrammarKindName(spec->kind),
                                         ctx.grammar_disabled_reason));
    }
    if (ctx.grammar_queue != nullptr) {
      request.grammar = ctx.grammar_cache->Find(*spec);  // a miss is compiled on the queue
    } else if (Status compiled = CompileConstraint(ctx, request); !compiled.ok()) {
      return compiled;
    }
  }
  for (const std::string& pattern : params.stop_regex) {
    auto compiled = tokenizer::CompileStopRegex(pattern);
    if (!compiled.ok()) {
      return InvalidArgument(fmt::format("{} (pattern {})", compiled.status().message(),
                                         nlohmann::json(pattern).dump()));
    }
    request.stop_regex.push_back(std::move(compiled).value());
  }
  return Status::Ok();
}

BuiltRequest BuildGenerateRequest(const ServerContext& ctx, const PromptInput& prompt,
                                  const nlohmann::json& sampling_json,
                                  const BuildOptions& options) {
  BuiltRequest out;
  engine::GenerateRequest request;
  request.rid = options.rid;

  if (prompt.ids) {
    request.input_ids = *prompt.ids;
  } else if (prompt.text) {
    if (ctx.tokenizer == nullptr) {
      out.error = BadRequest(
          "The tokenizer is not initialized (--skip-tokenizer-init): send "
          "input_ids instead of text.");
      return out;
    }
    auto ids = ctx.tokenizer->Encode(
        *prompt.text, {.add_special_tokens = options.add_special_tokens, .parse_special = true});
    request.input_ids.assign(ids.begin(), ids.end());
  }
  if (request.input_ids.empty()) {
    out.error = BadRequest("input_ids cannot be empty.");
    return out;
  }
  for (int32_t id : request.input_ids) {
    if (id < 0 || id >= ctx.model.vocab_size) {
      out.error = BadRequest(
          fmt::format("Token id {} is out of vocabulary (size {}).", id, ctx.model.vocab_size));
      return out;
    }
  }

  nlohmann::json merged = sampling_json.is_null() ? nlohmann::json::object() : sampling_json;
  if (!merged.is_object()) {
    out.error = BadRequest("sampling_params must be an object.");
    return out;
  }
  if (options.apply_model_defaults) {
    merged = sampling::MergeSamplingDefaults(ctx.model.generation_defaults, merged);
  }
  const nlohmann::json& preferred = ctx.args->Get(args::key::kPreferredSamplingParams);
  if (preferred.is_object()) merged = sampling::MergeSamplingDefaults(preferred, merged);

  auto params = sampling::SamplingParams::FromJson(
      merged, {.float_fields_are_floats = options.float_fields_are_floats});
  if (!params.ok()) {
    out.error = BadRequest(params.status().message());
    return out;
  }
  if (Status verified = params->Verify(ctx.model.vocab_size); !verified.ok()) {
    out.error = BadRequest(verified.message());
    return out;
  }
  request.sampling = std::move(params).value();

  for (int32_t id : options.token_ids_logprob) {
    if (id < 0 || id >= ctx.model.vocab_size) {
      out.error =
          BadRequest(fmt::format("token_ids_logprob contains {}, which is outside the "
                                 "vocabulary (size {}).",
                                 id, ctx.model.vocab_size));
      return out;
    }
  }
  if (options.top_logprobs_num < 0 || options.top_logprobs_num > ctx.limits.max_top_logprobs) {
    out.error =
        BadRequest(fmt::format("top_logprobs_num must be in [0, {}] (the server's "
                               "--max-top-logprobs), got {}.",
                               ctx.limits.max_top_logprobs, options.top_logprobs_num));
    return out;
  }
  // SGLang's TokenizerManager length checks (the engine truncates instead under
  // --allow-auto-truncate or LightLLM's --long_truncation_mode).
  const auto input_len = static_cast<int64_t>(request.input_ids.size());
  const int64_t context_len = ctx.model.context_len;
  const bool engine_truncates = ctx.args->GetBool(args::key::kAllowAutoTruncate) ||
                                !ctx.args->IsNull(args::key::kLongTruncationMode);
  if (!engine_truncates && context_len > 0) {
    if (input_len >= context_len) {
      out.error = BadRequest(fmt::format(
          "The input ({} tokens) is longer than the model's context length ({} tokens).", input_len,
          context_len));
      return out;
    }
    const auto& max_new = request.sampling.max_new_tokens;
    if (max_new && *max_new >= context_len - input_len) {  // no overflow near INT64_MAX
      out.error = BadRequest(fmt::format(
          "Requested token count exceeds the model's maximum context length of {} tokens. You "
          "requested a total of {} tokens: {} tokens from the input messages and {} tokens for "
          "the completion. Please reduce the number of tokens in the input messages or the "
          "completion to fit within the limit.",
          context_len, static_cast<uint64_t>(*max_new) + static_cast<uint64_t>(input_len),
          input_len, *max_new));
      return out;
    }
  }
  request.stream = options.stream;
  request.priority = options.priority;
  request.extra_key = options.extra_key;
  request.lora = options.lora;
  request.return_logprob = options.return_logprob;
  request.logprob_start_len = options.logprob_start_len;
  request.top_logprobs_num = options.top_logprobs_num;
  request.token_ids_logprob = options.token_ids_logprob;
  request.return_text_in_logprobs = options.return_text_in_logprobs;
  request.return_hidden_states = options.return_hidden_states;
  request.return_entropy = options.return_entropy;
  request.detokenize = ctx.tokenizer != nullptr;
  if (options.return_logprob && options.logprob_start_len >= 0 &&
      options.logprob_start_len >= static_cast<int64_t>(request.input_ids.size())) {
    out.error = BadRequest(fmt::format(
        "logprob_start_len={} is higher than the number of input tokens {}. Request with a "
        "lower logprob_start_len.",
        options.logprob_start_len, request.input_ids.size()));
    return out;
  }
  // Last: compiling a grammar is the expensive check (cached per constraint text).
  if (Status constrained = AttachConstraints(ctx, request); !constrained.ok()) {
    out.error = BadRequest(constrained.message());
    return out;
  }
  out.request = std::move(request);
  return out;
}

}  // namespace radixserve::api
